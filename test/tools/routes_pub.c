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
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/loop.h"
#include "ingressd/publish.h"
#include "supervisor/config.h"

typedef struct routes_pub {
    sws_loop_t loop;
    sws_io_t sig;
    sws_io_t pub_io;
    sws_ingress_pub_t *pub;
    const char *config;
    unsigned deltas;  /* deltas published */
    unsigned skip_at; /* --skip-at: this delta skips a sequence number (0: none) */
} routes_pub_t;

static void publish_file(routes_pub_t *rp)
{
    char err[1024];
    Sws__Config *cfg = NULL;
    if (sws_config_load(rp->config, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "routes_pub: %s; nothing published\n", err);
        return;
    }
    if (rp->skip_at > 0 && rp->deltas + 1 == rp->skip_at)
        sws_ingress_pub_skip_sequence(rp->pub);
    int rc = sws_ingress_pub_routes(rp->pub, cfg->routes, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "routes_pub: %s\n", err);
    if (rc > 0) {
        rp->deltas++;
        printf("routes_pub: sequence %llu\n",
               (unsigned long long)sws_ingress_pub_sequence(rp->pub));
        fflush(stdout);
    }
    sws_config_free(cfg);
}

static void on_signal(sws_io_t *io, uint32_t events)
{
    routes_pub_t *rp = sws_container_of(io, routes_pub_t, sig);
    struct signalfd_siginfo si;

    (void)events;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP)
            publish_file(rp);
        else
            rp->loop.stop = 1;
    }
}

static void on_pub(sws_io_t *io, uint32_t events)
{
    routes_pub_t *rp = sws_container_of(io, routes_pub_t, pub_io);

    (void)events;
    sws_ingress_pub_on_readable(rp->pub);
}

int main(int argc, char **argv)
{
    routes_pub_t rp = { .sig.fd = -1 };
    const char *endpoint = NULL;
    uint64_t id = 0;
    static const struct option opts[] = {
        { "id", required_argument, NULL, 'i' },
        { "skip-at", required_argument, NULL, 's' },
        { NULL, 0, NULL, 0 },
    };
    for (int c; (c = getopt_long(argc, argv, "c:p:", opts, NULL)) != -1;) {
        if (c == 'c')
            rp.config = optarg;
        else if (c == 'p')
            endpoint = optarg;
        else if (c == 'i')
            id = strtoull(optarg, NULL, 0);
        else if (c == 's')
            rp.skip_at = (unsigned)strtoul(optarg, NULL, 10);
        else
            return 2;
    }
    if (rp.config == NULL || endpoint == NULL) {
        fprintf(stderr, "usage: routes_pub -c FILE -p ENDPOINT [--id N] [--skip-at N]\n");
        return 2;
    }
    if (sws_loop_init(&rp.loop) < 0) {
        perror("routes_pub: epoll");
        return 1;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    rp.sig.fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    rp.sig.cb = on_signal;
    if (rp.sig.fd < 0 || sws_loop_add(&rp.loop, &rp.sig, EPOLLIN) < 0) {
        perror("routes_pub: signalfd");
        return 1;
    }
    char err[512];
    rp.pub = sws_ingress_pub_open(endpoint, id, err, sizeof(err));
    if (rp.pub == NULL) {
        fprintf(stderr, "routes_pub: %s\n", err);
        return 1;
    }
    rp.pub_io.fd = sws_ingress_pub_fd(rp.pub);
    rp.pub_io.cb = on_pub;
    if (sws_loop_add(&rp.loop, &rp.pub_io, EPOLLIN) < 0) {
        perror("routes_pub: epoll_ctl");
        return 1;
    }
    publish_file(&rp);
    printf("routes_pub: ready\n");
    fflush(stdout);

    /* As ingressd's loop (ingressd/daemon.c:run): bounded by the heartbeat
     * deadline, and libzmq's descriptor is edge-like, so its queue is read
     * on every wake-up, not only when epoll names it. */
    int rc = 0;
    while (!rp.loop.stop) {
        uint64_t now = sws_loop_now_ms(&rp.loop), due = sws_ingress_pub_deadline_ms(rp.pub);
        if (due <= now) {
            sws_ingress_pub_tick(rp.pub, now);
            continue;
        }
        if (sws_loop_run_once(&rp.loop, due - now > 1000 ? 1000 : (int)(due - now)) < 0) {
            perror("routes_pub: epoll_wait");
            rc = 1;
            break;
        }
        sws_ingress_pub_on_readable(rp.pub);
    }
    sws_loop_del(&rp.loop, &rp.pub_io);
    sws_ingress_pub_close(rp.pub);
    sws_loop_del(&rp.loop, &rp.sig);
    close(rp.sig.fd);
    sws_loop_close(&rp.loop);
    return rc;
}
