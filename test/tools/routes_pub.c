/*
 * routes_pub: publishes the routes of a scalwsd configuration file the way
 * ingressd publishes the cluster's (ingressd/publish.h), so integration
 * tests drive scalwsd's ingress subscription without Kubernetes.
 *
 *   routes_pub -c FILE -p ENDPOINT [--id N] [--skip-at N]
 *
 * The file's `hosts` and `pools` are the RouteSet (its server section is
 * read and ignored). SIGHUP reads the file again and publishes what
 * changed; SIGTERM or SIGINT stops. --id fixes the publisher id (default:
 * random, as ingressd); --skip-at N numbers the Nth delta one too far, as a
 * lost message would look. Prints "routes_pub: ready" once bound and
 * "routes_pub: sequence N" after each delta, on standard output.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "ingressd/publish.h"
#include "supervisor/config.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void publish_file(sws_ingress_pub_t *pub, const char *path, unsigned *deltas,
                         unsigned skip_at)
{
    char err[1024];
    Sws__Config *cfg = NULL;
    if (sws_config_load(path, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "routes_pub: %s; nothing published\n", err);
        return;
    }
    if (skip_at > 0 && *deltas + 1 == skip_at)
        sws_ingress_pub_skip_sequence(pub);
    int rc = sws_ingress_pub_routes(pub, cfg->routes, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "routes_pub: %s\n", err);
    if (rc > 0) {
        (*deltas)++;
        printf("routes_pub: sequence %llu\n", (unsigned long long)sws_ingress_pub_sequence(pub));
        fflush(stdout);
    }
    sws_config_free(cfg);
}

int main(int argc, char **argv)
{
    const char *config = NULL, *endpoint = NULL;
    uint64_t id = 0;
    unsigned skip_at = 0, deltas = 0;
    static const struct option opts[] = {
        { "id", required_argument, NULL, 'i' },
        { "skip-at", required_argument, NULL, 's' },
        { NULL, 0, NULL, 0 },
    };
    for (int c; (c = getopt_long(argc, argv, "c:p:", opts, NULL)) != -1;) {
        if (c == 'c')
            config = optarg;
        else if (c == 'p')
            endpoint = optarg;
        else if (c == 'i')
            id = strtoull(optarg, NULL, 0);
        else if (c == 's')
            skip_at = (unsigned)strtoul(optarg, NULL, 10);
        else
            return 2;
    }
    if (config == NULL || endpoint == NULL) {
        fprintf(stderr, "usage: routes_pub -c FILE -p ENDPOINT [--id N] [--skip-at N]\n");
        return 2;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    char err[512];
    sws_ingress_pub_t *pub = sws_ingress_pub_open(endpoint, id, err, sizeof(err));
    if (pub == NULL) {
        fprintf(stderr, "routes_pub: %s\n", err);
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = sfd };
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.fd = sws_ingress_pub_fd(pub);
    epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev);
    publish_file(pub, config, &deltas, skip_at);
    printf("routes_pub: ready\n");
    fflush(stdout);

    for (int stop = 0; !stop;) {
        uint64_t now = now_ms(), due = sws_ingress_pub_deadline_ms(pub);
        struct epoll_event got[4];
        int n = epoll_wait(ep, got, 4, due > now ? (int)(due - now) : 0);
        for (int i = 0; i < n; i++) {
            if (got[i].data.fd != sfd)
                continue;
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGHUP)
                    publish_file(pub, config, &deltas, skip_at);
                else
                    stop = 1;
            }
        }
        /* Every wake-up: libzmq's descriptor is edge-like. */
        sws_ingress_pub_on_readable(pub);
        sws_ingress_pub_tick(pub, now_ms());
    }
    sws_ingress_pub_close(pub);
    close(ep);
    close(sfd);
    return 0;
}
