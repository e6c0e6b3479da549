/*
 * ingressd watching a cluster (ingressd/daemon.h): the glue between the
 * Kubernetes client, the store, the translation, the publisher and the
 * health endpoint, on one sws loop.
 */
#include "ingressd/daemon.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "core/json.h"
#include "core/log.h"
#include "core/loop.h"
#include "ingressd/health.h"
#include "ingressd/kube.h"
#include "ingressd/kubeconfig.h"
#include "ingressd/publish.h"
#include "ingressd/store.h"
#include "ingressd/translate.h"

typedef struct daemon {
    const sws_ingressd_options_t *o;
    sws_loop_t loop;
    sws_io_t sig;
    sws_kube_conn_t conn;
    sws_kube_t *kube;
    sws_ingress_store_t store;
    sws_ingress_translation_t *tr; /* the last translation, kept for endpoint changes */
    sws_ingress_pub_t *pub;
    sws_io_t pub_io;
    sws_ingress_health_t *health;
    sws_timer_queue_t coalesce_queue;
    sws_timer_t coalesce;
    uint64_t translations;   /* RouteSets made (the version of the next is this + 1) */
    int published;           /* a RouteSet went to the publisher since the start */
    uint64_t published_ms;   /* when (loop time) */
    uint64_t last_translate_us;
    int loop_open;
} daemon_t;

/* A change of EndpointSlices only, after a translation that worked:
 * redo the pools of their Services (ingressd/translate.h) and have the
 * publisher compare those alone. Anything else: translate the whole store
 * and let the publisher compare the full sets. Either way it sends what
 * differs from the last set. A failure (memory) drops the kept
 * translation and leaves the change bits set, so the next window
 * translates everything again. */
static void publish_now(daemon_t *d)
{
    char err[256];
    uint64_t t0 = sws_clock_us(), version = d->translations + 1;
    unsigned changed = sws_ingress_store_take_changes(&d->store);
    int endpoints = changed == SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE);
    int incremental = d->tr != NULL && endpoints, rc;

    if (incremental) {
        rc = sws_ingress_translation_endpoints(d->tr, &d->store, version);
    } else {
        /* After endpoints alone moved, the parts left out are the same as
         * last time: not logged again. */
        sws_ingress_translation_free(d->tr);
        d->tr = sws_ingress_translation_new(&d->store, d->o->ingress_class, version,
                                            d->published && endpoints);
        rc = d->tr != NULL ? 0 : -1;
    }
    sws_ingress_store_clear_touched(&d->store);
    uint64_t t1 = sws_clock_us();
    if (rc == 0) {
        d->translations++;
        d->last_translate_us = t1 - t0;
        const Sws__RouteSet *rs = sws_ingress_translation_routes(d->tr);
        size_t npools;
        Sws__Pool *const *pools = sws_ingress_translation_changed(d->tr, &npools);
        rc = incremental
                 ? sws_ingress_pub_pools(d->pub, rs, pools, npools, err, sizeof(err))
                 : sws_ingress_pub_routes(d->pub, rs, err, sizeof(err));
        if (rc < 0)
            sws_log_error("publish: %s; trying again", err);
    }
    if (rc < 0) {
        sws_ingress_translation_free(d->tr);
        d->tr = NULL;
        d->store.changed |= changed ? changed : 1u;
        sws_timer_arm(&d->loop, &d->coalesce_queue, &d->coalesce);
        return;
    }
    if (rc > 0 || !d->published) {
        const sws_ingress_translate_stats_t *stats = sws_ingress_translation_stats(d->tr);
        sws_log_info("routes: sequence %" PRIu64 ": %zu Ingresses of class %s, %zu hosts, "
                     "%zu routes, %zu pools, %zu members, %zu parts left out; translated in "
                     "%" PRIu64 " us (%s), published in %" PRIu64 " us",
                     sws_ingress_pub_sequence(d->pub), stats->ingresses, d->o->ingress_class,
                     stats->hosts, stats->routes, stats->pools, stats->members, stats->skipped,
                     d->last_translate_us, incremental ? "endpoints" : "full",
                     sws_clock_us() - t1);
    }
    d->published = 1;
    d->published_ms = sws_loop_now_ms(&d->loop);
}

static void on_coalesce(sws_timer_t *t)
{
    publish_now(sws_container_of(t, daemon_t, coalesce));
}

/* Before each wait: a change since the last publication (or the first
 * complete LIST) opens a coalescing window. */
static void on_tick(sws_loop_t *loop, void *data)
{
    daemon_t *d = data;
    (void)loop;
    if (d->coalesce.next != NULL || !sws_kube_synced(d->kube))
        return;
    if (d->store.changed != 0 || !d->published)
        sws_timer_arm(&d->loop, &d->coalesce_queue, &d->coalesce);
}

static void on_pub(sws_io_t *io, uint32_t events)
{
    daemon_t *d = sws_container_of(io, daemon_t, pub_io);
    (void)events;
    sws_ingress_pub_on_readable(d->pub);
}

static void on_signal(sws_io_t *io, uint32_t events)
{
    daemon_t *d = sws_container_of(io, daemon_t, sig);
    struct signalfd_siginfo si;

    (void)events;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        sws_log_notice("signal %s: stopping", strsignal((int)si.ssi_signo));
        d->loop.stop = 1;
    }
}

/* /healthz: the loop runs (it answered), with what the watches do.
 * /readyz: routes have been published. */
static unsigned health(void *ctx, int readyz, sws_json_out_t *out)
{
    daemon_t *d = ctx;
    int ready = d->published;

    sws_json_lit(out, "{\"published\": ");
    sws_json_raw(out, d->published ? "true" : "false", d->published ? 4 : 5);
    sws_json_lit(out, ", \"sequence\": ");
    sws_json_u64(out, sws_ingress_pub_sequence(d->pub));
    sws_json_lit(out, ", \"last_publication_age_ms\": ");
    sws_json_u64(out, d->published ? sws_loop_now_ms(&d->loop) - d->published_ms : 0);
    sws_json_lit(out, ", \"last_translation_us\": ");
    sws_json_u64(out, d->last_translate_us);
    sws_json_lit(out, ", \"kinds\": {");
    for (unsigned k = 0; k < SWS_KUBE_KINDS; k++) {
        static const char *const phases[] = { "list", "watch", "backoff" };
        sws_kube_stats_t st;
        sws_kube_stats(d->kube, (sws_kube_kind_t)k, &st);
        if (k > 0)
            sws_json_lit(out, ", ");
        sws_json_cstr(out, sws_kube_kind_name((sws_kube_kind_t)k));
        sws_json_lit(out, ": {\"phase\": ");
        sws_json_cstr(out, phases[st.phase <= 2 ? st.phase : 2]);
        sws_json_lit(out, ", \"synced\": ");
        sws_json_raw(out, st.synced ? "true" : "false", st.synced ? 4 : 5);
        sws_json_lit(out, ", \"objects\": ");
        sws_json_u64(out, sws_ingress_store_count(&d->store, (sws_kube_kind_t)k));
        sws_json_lit(out, ", \"relists\": ");
        sws_json_u64(out, st.relists);
        sws_json_lit(out, ", \"errors\": ");
        sws_json_u64(out, st.errors);
        sws_json_lit(out, ", \"resource_version\": ");
        sws_json_cstr(out, st.resource_version != NULL ? st.resource_version : "");
        sws_json_lit(out, "}");
    }
    sws_json_lit(out, "}}\n");
    return readyz && !ready ? 503 : 200;
}

static int open_signals(daemon_t *d)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    d->sig.fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    d->sig.cb = on_signal;
    if (d->sig.fd < 0 || sws_loop_add(&d->loop, &d->sig, EPOLLIN) < 0) {
        sws_log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static int open_connection(daemon_t *d)
{
    const sws_ingressd_options_t *o = d->o;
    char err[1024];
    int rc;

    if (o->kubeconfig != NULL)
        rc = sws_kubeconfig_load(&d->conn, o->kubeconfig, NULL, err, sizeof(err));
    else
        rc = sws_kube_conn_incluster(&d->conn, getenv("KUBERNETES_SERVICE_HOST"),
                                     getenv("KUBERNETES_SERVICE_PORT"), SWS_KUBE_SA_DIR, err,
                                     sizeof(err));
    if (rc < 0) {
        sws_log_error("%s%s", err,
                      o->kubeconfig == NULL && strstr(err, "--kubeconfig") == NULL
                          ? " (outside a cluster, give --kubeconfig FILE)"
                          : "");
        return -1;
    }
    return 0;
}

static int start(daemon_t *d)
{
    const sws_ingressd_options_t *o = d->o;
    sws_kube_opts_t kopts = { .namespace = o->namespace_ };
    char err[1024];

    if (sws_loop_init(&d->loop) < 0) {
        sws_log_error("epoll: %s", strerror(errno));
        return -1;
    }
    d->loop_open = 1;
    if (open_signals(d) < 0 || open_connection(d) < 0)
        return -1;
    d->pub = sws_ingress_pub_open(o->publish, 0, err, sizeof(err));
    if (d->pub == NULL) {
        sws_log_error("--publish %s: %s", o->publish, err);
        return -1;
    }
    d->pub_io.fd = sws_ingress_pub_fd(d->pub);
    d->pub_io.cb = on_pub;
    if (sws_loop_add(&d->loop, &d->pub_io, EPOLLIN) < 0) {
        sws_log_error("epoll: %s", strerror(errno));
        return -1;
    }
    if (o->health != NULL) {
        d->health = sws_ingress_health_start(&d->loop, o->health, health, d, err, sizeof(err));
        if (d->health == NULL) {
            sws_log_error("%s", err);
            return -1;
        }
    }
    sws_timer_queue_init(&d->loop, &d->coalesce_queue, SWS_INGRESSD_COALESCE_MS);
    sws_timer_init(&d->coalesce, on_coalesce);
    sws_loop_set_tick(&d->loop, on_tick, d);
    d->kube = sws_kube_start(&d->loop, &d->conn, &kopts, sws_ingress_store_event, &d->store, err,
                             sizeof(err));
    if (d->kube == NULL) {
        sws_log_error("Kubernetes client: %s", err);
        return -1;
    }
    sws_log_notice("watching %s (%s%s), class %s; publishing on %s%s%s", d->conn.server,
                   d->conn.source, o->namespace_ != NULL ? ", one namespace" : "",
                   o->ingress_class, o->publish, o->health != NULL ? "; health on " : "",
                   o->health != NULL ? o->health : "");
    return 0;
}

/* The loop, bounded by the publisher's heartbeat deadline; libzmq's
 * descriptor is edge-like, so its queue is read on every wake-up, not only
 * when epoll names it (ingressd/publish.h). */
static int run(daemon_t *d)
{
    while (!d->loop.stop) {
        uint64_t now = sws_loop_now_ms(&d->loop);
        uint64_t due = sws_ingress_pub_deadline_ms(d->pub);
        if (due <= now) {
            sws_ingress_pub_tick(d->pub, now);
            continue;
        }
        uint64_t wait = due - now;
        if (sws_loop_run_once(&d->loop, wait > 1000 ? 1000 : (int)wait) < 0) {
            sws_log_error("epoll: %s", strerror(errno));
            return -1;
        }
        sws_ingress_pub_on_readable(d->pub);
    }
    return 0;
}

static void teardown(daemon_t *d)
{
    sws_kube_free(d->kube);
    sws_ingress_health_stop(d->health);
    if (d->coalesce.cb != NULL) {
        sws_timer_disarm(&d->coalesce);
        sws_timer_queue_remove(&d->loop, &d->coalesce_queue);
    }
    if (d->pub != NULL) {
        sws_loop_del(&d->loop, &d->pub_io);
        sws_ingress_pub_close(d->pub);
    }
    if (d->sig.fd >= 0) { /* the loop is open: it came first */
        sws_loop_del(&d->loop, &d->sig);
        close(d->sig.fd);
    }
    sws_ingress_translation_free(d->tr);
    sws_ingress_store_free(&d->store);
    sws_kube_conn_free(&d->conn);
    if (d->loop_open)
        sws_loop_close(&d->loop);
}

int sws_ingressd_run(const sws_ingressd_options_t *o)
{
    daemon_t *d = calloc(1, sizeof(*d)); /* the loop's event array is large */
    int rc;

    if (d == NULL) {
        sws_log_error("out of memory");
        return 1;
    }
    d->o = o;
    d->sig.fd = -1;
    sws_ingress_store_init(&d->store);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = start(d) == 0 && run(d) == 0 ? 0 : 1;
    teardown(d);
    curl_global_cleanup();
    free(d);
    return rc;
}
