/*
 * kube_probe: ingressd's Kubernetes client alone, for the integration
 * tests (test/integration/test_kube_client.py): reads the API like
 * ingressd does and prints each event it would hand to the object store,
 * one line each, flushed:
 *
 *   LIST_BEGIN KIND
 *   UPSERT KIND NAMESPACE/NAME RESOURCEVERSION
 *   DELETE KIND NAMESPACE/NAME RESOURCEVERSION
 *   LIST_END KIND
 *
 * and on SIGTERM or SIGINT, per kind read, before it exits 0:
 *   STATS KIND lists=N watches=N relists=N errors=N events=N
 *
 *   kube_probe (--kubeconfig FILE | --in-cluster SA_DIR) [--namespace NS]
 *              [--kinds LIST] [--limit N] [--watch-timeout S] [--max-event BYTES]
 *
 * --in-cluster reads KUBERNETES_SERVICE_HOST/PORT from the environment.
 * Logs (debug level) go to standard error.
 */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/log.h"
#include "core/loop.h"
#include "ingressd/kube.h"

typedef struct probe {
    sws_loop_t loop;
    sws_io_t sig;
} probe_t;

static void on_event(void *ctx, sws_kube_kind_t kind, sws_kube_event_t ev, const json_t *obj)
{
    static const char *const names[] = { "LIST_BEGIN", "UPSERT", "DELETE", "LIST_END" };
    json_t *meta = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));

    (void)ctx;
    if (obj == NULL)
        printf("%s %s\n", names[ev], sws_kube_kind_name(kind));
    else
        printf("%s %s %s/%s %s\n", names[ev], sws_kube_kind_name(kind), ns ? ns : "",
               name ? name : "?", rv ? rv : "?");
    fflush(stdout);
}

static void on_signal(sws_io_t *io, uint32_t events)
{
    probe_t *p = sws_container_of(io, probe_t, sig);
    struct signalfd_siginfo si;

    (void)events;
    if (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        p->loop.stop = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: kube_probe (--kubeconfig FILE | --in-cluster SA_DIR) "
                    "[--namespace NS] [--kinds LIST] [--limit N] [--watch-timeout S] "
                    "[--max-event BYTES]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *sa_dir = NULL;
    sws_kube_opts_t opts = { 0 };
    sws_kube_conn_t conn;
    probe_t p;
    sigset_t set;
    char err[1024];
    sws_kube_t *k;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "--kubeconfig") == 0)
            kubeconfig = v;
        else if (strcmp(a, "--in-cluster") == 0)
            sa_dir = v;
        else if (strcmp(a, "--namespace") == 0)
            opts.namespace = v;
        else if (strcmp(a, "--limit") == 0)
            opts.list_limit = (unsigned)atoi(v);
        else if (strcmp(a, "--watch-timeout") == 0)
            opts.watch_timeout_s = (unsigned)atoi(v);
        else if (strcmp(a, "--max-event") == 0)
            opts.max_event = (size_t)atol(v);
        else if (strcmp(a, "--kinds") == 0) {
            if (sws_kube_kinds_parse(v, &opts.kinds, err, sizeof(err)) < 0) {
                fprintf(stderr, "kube_probe: --kinds: %s\n", err);
                return 2;
            }
        } else
            usage();
    }
    if ((kubeconfig == NULL) == (sa_dir == NULL))
        usage();
    sws_log_init("kube_probe", 2, SWS_LOG_DEBUG);
    if ((kubeconfig ? sws_kubeconfig_load(&conn, kubeconfig, NULL, err, sizeof(err))
                    : sws_kube_conn_incluster(&conn, getenv("KUBERNETES_SERVICE_HOST"),
                                              getenv("KUBERNETES_SERVICE_PORT"), sa_dir, err,
                                              sizeof(err))) < 0) {
        fprintf(stderr, "kube_probe: %s\n", err);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (sws_loop_init(&p.loop) < 0) {
        perror("kube_probe: epoll");
        return 1;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    p.sig.fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    p.sig.cb = on_signal;
    if (p.sig.fd < 0 || sws_loop_add(&p.loop, &p.sig, EPOLLIN) < 0) {
        perror("kube_probe: signalfd");
        return 1;
    }
    k = sws_kube_start(&p.loop, &conn, &opts, on_event, NULL, err, sizeof(err));
    if (k == NULL) {
        fprintf(stderr, "kube_probe: %s\n", err);
        return 1;
    }
    int rc = sws_loop_run(&p.loop);
    for (unsigned i = 0; i < SWS_KUBE_KINDS; i++) {
        sws_kube_stats_t st;
        if (!(opts.kinds == 0 || (opts.kinds & (1u << i))))
            continue;
        sws_kube_stats(k, (sws_kube_kind_t)i, &st);
        printf("STATS %s lists=%llu watches=%llu relists=%llu errors=%llu events=%llu\n",
               sws_kube_kind_name((sws_kube_kind_t)i), (unsigned long long)st.lists,
               (unsigned long long)st.watches, (unsigned long long)st.relists,
               (unsigned long long)st.errors, (unsigned long long)st.events);
    }
    fflush(stdout);
    sws_kube_free(k);
    sws_loop_del(&p.loop, &p.sig);
    close(p.sig.fd);
    sws_loop_close(&p.loop);
    sws_kube_conn_free(&conn);
    curl_global_cleanup();
    return rc < 0 ? 1 : 0;
}
