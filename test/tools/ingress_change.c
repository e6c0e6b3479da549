/*
 * What one endpoint change costs ingressd, without the API server: a store
 * of INGRESSES Ingresses (one host, "/" and "/health" each), as many
 * Services and EndpointSlices of 10 ready endpoints, translated and
 * published once; then CHANGES times one EndpointSlice replaced (one
 * address changed) and the routes published again, as the daemon's loop
 * does after a coalescing window (ingressd/daemon.c).
 *
 *   ingress_change MODE CHANGES [INGRESSES]
 *
 * MODE full: every change translates the whole store and the publisher
 * diffs the full RouteSets (what the daemon does after a change of any
 * other kind); incremental: the pools of the changed Service only
 * (ingressd/translate.h sws_ingress_translation_endpoints). The work of a
 * change is in one_change(), so callgrind counts it alone:
 *
 *   valgrind --tool=callgrind --toggle-collect=one_change \
 *       build/test/ingress_change incremental 5
 *
 * Wall times are printed, never judged (shared machines). Publishes on an
 * ipc endpoint in a temporary directory, removed at the end.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "ingressd/publish.h"
#include "ingressd/store.h"
#include "ingressd/translate.h"

#define ENDPOINTS 10

typedef struct bench {
    sws_ingress_store_t st;
    sws_ingress_translation_t *tr; /* incremental: the last translation */
    sws_ingress_pub_t *pub;
    int incremental;
    uint64_t version;
} bench_t;

static void event(bench_t *b, sws_kube_kind_t kind, json_t *o)
{
    if (o == NULL) {
        fprintf(stderr, "json_pack failed\n");
        exit(1);
    }
    sws_ingress_store_event(&b->st, kind, SWS_KUBE_UPSERT, o);
    json_decref(o);
}

/* Service app-i's slice, resourceVersion rv, its first address last.x. */
static json_t *slice(int i, int rv, int first)
{
    char name[32], svc[32], version[16], ip[32];
    json_t *eps = json_array();
    snprintf(name, sizeof(name), "app-%d-x", i);
    snprintf(svc, sizeof(svc), "app-%d", i);
    snprintf(version, sizeof(version), "%d", rv);
    for (int e = 0; e < ENDPOINTS; e++) {
        snprintf(ip, sizeof(ip), "10.%d.%d.%d", i / 256, i % 256, e == 0 ? first : e + 1);
        json_array_append_new(eps, json_pack("{s:[s], s:{s:b}}", "addresses", ip, "conditions",
                                             "ready", 1));
    }
    return json_pack("{s:{s:s, s:s, s:s, s:{s:s}}, s:s, s:[{s:s, s:i, s:s}], s:o}", "metadata",
                     "name", name, "namespace", "default", "resourceVersion", version, "labels",
                     "kubernetes.io/service-name", svc, "addressType", "IPv4", "ports", "name",
                     "http", "port", 8080, "protocol", "TCP", "endpoints", eps);
}

static void load(bench_t *b, int n)
{
    event(b, SWS_KUBE_INGRESSCLASS,
          json_pack("{s:{s:s, s:s}, s:{s:s}}", "metadata", "name", "scalws", "resourceVersion",
                    "1", "spec", "controller", SWS_INGRESS_CONTROLLER));
    for (int i = 0; i < n; i++) {
        char name[32], host[64];
        snprintf(name, sizeof(name), "app-%d", i);
        snprintf(host, sizeof(host), "app-%d.example.com", i);
        event(b, SWS_KUBE_SERVICE,
              json_pack("{s:{s:s, s:s, s:s}, s:{s:[{s:s, s:i, s:s}]}}", "metadata", "name", name,
                        "namespace", "default", "resourceVersion", "10", "spec", "ports", "name",
                        "http", "port", 80, "protocol", "TCP"));
        event(b, SWS_KUBE_ENDPOINTSLICE, slice(i, 3, 1));
        event(b, SWS_KUBE_INGRESS,
              json_pack("{s:{s:s, s:s, s:s, s:s}, s:{s:s, s:[{s:s, s:{s:["
                        "{s:s, s:s, s:{s:{s:s, s:{s:i}}}}, {s:s, s:s, s:{s:{s:s, s:{s:i}}}}"
                        "]}}]}}",
                        "metadata", "name", name, "namespace", "default", "resourceVersion", "100",
                        "creationTimestamp", "2026-11-30T10:00:00Z", "spec", "ingressClassName",
                        "scalws", "rules", "host", host, "http", "paths", "path", "/", "pathType",
                        "Prefix", "backend", "service", "name", name, "port", "number", 80,
                        "path", "/health", "pathType", "Exact", "backend", "service", "name",
                        name, "port", "number", 80));
    }
}

/* The daemon's publish_now, both ways; the change bits taken. */
static void publish(bench_t *b)
{
    char err[256];
    int rc;
    unsigned changed = sws_ingress_store_take_changes(&b->st);
    b->version++;
    if (b->incremental && b->tr != NULL && changed == SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE)) {
        rc = sws_ingress_translation_endpoints(b->tr, &b->st, b->version);
        size_t n;
        Sws__Pool *const *pools = sws_ingress_translation_changed(b->tr, &n);
        if (rc == 0)
            rc = sws_ingress_pub_pools(b->pub, sws_ingress_translation_routes(b->tr), pools, n,
                                       err, sizeof(err));
    } else {
        sws_ingress_translation_free(b->tr);
        b->tr = sws_ingress_translation_new(&b->st, "scalws", b->version, 1);
        rc = b->tr != NULL ? sws_ingress_pub_routes(b->pub, sws_ingress_translation_routes(b->tr),
                                                    err, sizeof(err))
                           : -1;
        if (!b->incremental) {
            sws_ingress_translation_free(b->tr);
            b->tr = NULL;
        }
    }
    sws_ingress_store_clear_touched(&b->st);
    if (rc < 0) {
        fprintf(stderr, "publish failed: %s\n", err);
        exit(1);
    }
}

__attribute__((noinline)) static void one_change(bench_t *b, int i, int rv)
{
    event(b, SWS_KUBE_ENDPOINTSLICE, slice(i, rv, 100 + rv % 100));
    publish(b);
}

/* VmRSS of this process, in KiB (0 when unknown). */
static long rss_kib(void)
{
    char line[128];
    long kib = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kib;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
    bench_t b = { 0 };
    char dir[] = "/tmp/ingress-change-XXXXXX", endpoint[128], err[256];
    struct timespec t0;
    if (argc < 3 || (strcmp(argv[1], "full") != 0 && strcmp(argv[1], "incremental") != 0)) {
        fprintf(stderr, "usage: %s full|incremental CHANGES [INGRESSES]\n", argv[0]);
        return 2;
    }
    int changes = atoi(argv[2]), n = argc > 3 ? atoi(argv[3]) : 10000;
    b.incremental = strcmp(argv[1], "incremental") == 0;
    sws_log_init("ingress_change", 2, SWS_LOG_ERROR);
    if (mkdtemp(dir) == NULL)
        return perror("mkdtemp"), 1;
    snprintf(endpoint, sizeof(endpoint), "ipc://%s/routes.sock", dir);
    if ((b.pub = sws_ingress_pub_open(endpoint, 1, err, sizeof(err))) == NULL) {
        fprintf(stderr, "publisher: %s\n", err);
        return 1;
    }
    sws_ingress_store_init(&b.st);
    load(&b, n);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    publish(&b);
    printf("%d Ingresses, %d endpoints: first publication %.1f ms, RSS %ld KiB\n", n,
           n * ENDPOINTS, ms_since(&t0), rss_kib());
    srand(1);
    for (int c = 0; c < changes; c++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        one_change(&b, rand() % n, 4 + c);
        printf("change %d (%s): %.3f ms, sequence %llu\n", c, argv[1], ms_since(&t0),
               (unsigned long long)sws_ingress_pub_sequence(b.pub));
    }
    sws_ingress_translation_free(b.tr);
    sws_ingress_pub_close(b.pub);
    sws_ingress_store_free(&b.st);
    rmdir(dir);
    return 0;
}
