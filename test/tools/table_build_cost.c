/*
 * What the supervisor's table build of ingressd's full set costs in page
 * faults and CPU, without processes: a RouteSet of HOSTS hosts (one name,
 * "/" and "/health" proxied to its pool of 10 members each), as
 * ingressd translates 10,000 Ingresses and 100,000 endpoints
 * (bench/ingressbench.py), built ROUNDS times into an arena faulted in
 * beforehand (the supervisor warms its arenas: sws_shm_prepare).
 *
 *   table_build_cost fresh|kept [HOSTS [ROUNDS]]
 *
 * fresh: each build's check allocates its own memory (sws_table_build);
 * kept: one scratch kept between the builds, reserved before the first as
 * sws_shm_prepare does (sws_table_build_reusing, ADR 0055). Prints, per
 * step, getrusage's minor faults and user+system CPU around it. Figures
 * are printed, never judged (shared machines).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "shm/routeset_check.h"
#include "shm/table.h"

#define MEMBERS 10

static void *must(void *p)
{
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static char *text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *text(const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return must(strdup(buf));
}

static Sws__Route *proxy_route(const char *path, const char *pool)
{
    Sws__Route *r = must(malloc(sizeof(*r)));
    Sws__Proxy *px = must(malloc(sizeof(*px)));
    sws__route__init(r);
    sws__proxy__init(px);
    r->match = SWS__ROUTE__MATCH__PREFIX;
    r->path = must(strdup(path));
    px->pool = must(strdup(pool));
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = px;
    return r;
}

/* Heap throughout: sws__route_set__free_unpacked frees it. */
static Sws__RouteSet *full_set(int hosts)
{
    Sws__RouteSet *rs = must(malloc(sizeof(*rs)));
    sws__route_set__init(rs);
    rs->settings = must(malloc(sizeof(*rs->settings)));
    sws__settings__init(rs->settings);
    rs->settings->server_name = must(strdup("scalws"));
    rs->n_hosts = rs->n_pools = (size_t)hosts;
    rs->hosts = must(calloc((size_t)hosts, sizeof(*rs->hosts)));
    rs->pools = must(calloc((size_t)hosts, sizeof(*rs->pools)));
    for (int i = 0; i < hosts; i++) {
        Sws__Pool *p = must(malloc(sizeof(*p)));
        sws__pool__init(p);
        p->name = text("default-app-%d-8080", i);
        p->n_members = MEMBERS;
        p->members = must(calloc(MEMBERS, sizeof(*p->members)));
        for (int m = 0; m < MEMBERS; m++) {
            p->members[m] = must(malloc(sizeof(*p->members[m])));
            sws__member__init(p->members[m]);
            p->members[m]->address = text("10.%d.%d.%d:8080", i / 256, i % 256, m + 1);
        }
        rs->pools[i] = p;
        Sws__Host *h = must(malloc(sizeof(*h)));
        sws__host__init(h);
        h->n_names = 1;
        h->names = must(calloc(1, sizeof(*h->names)));
        h->names[0] = text("app-%d.example", i);
        h->n_routes = 2;
        h->routes = must(calloc(2, sizeof(*h->routes)));
        h->routes[0] = proxy_route("/", p->name);
        h->routes[1] = proxy_route("/health", p->name);
        rs->hosts[i] = h;
    }
    return rs;
}

typedef struct cost {
    long minflt;
    double cpu_ms;
} cost_t;

static cost_t now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (cost_t){ ru.ru_minflt, (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                                       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3 };
}

static void report(const char *step, cost_t before)
{
    cost_t after = now();
    printf("%-22s %6ld faults %7.1f ms CPU\n", step, after.minflt - before.minflt,
           after.cpu_ms - before.cpu_ms);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "fresh") != 0 && strcmp(argv[1], "kept") != 0)) {
        fprintf(stderr, "usage: %s fresh|kept [HOSTS [ROUNDS]]\n", argv[0]);
        return 2;
    }
    int kept = strcmp(argv[1], "kept") == 0;
    int hosts = argc > 2 ? atoi(argv[2]) : 10000, rounds = argc > 3 ? atoi(argv[3]) : 3;
    Sws__RouteSet *rs = full_set(hosts);
    size_t size = sws_table_size(rs);
    char *arena = must(aligned_alloc(64, (size + 63) & ~(size_t)63));
    memset(arena, 0, size);
    sws_routeset_scratch_t scratch = { 0 };
    char err[512];
    printf("%d hosts, %d members, table %zu bytes, %s scratch\n", hosts, hosts * MEMBERS, size,
           kept ? "kept" : "fresh");
    if (kept) {
        cost_t t = now();
        if (sws_routeset_scratch_reserve(&scratch, rs) < 0) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        report("reserve (prepare)", t);
    }
    for (int r = 1; r <= rounds; r++) {
        char step[32];
        cost_t t = now();
        int rc = sws_table_build_reusing(arena, size, (uint64_t)r, rs, kept ? &scratch : NULL,
                                         err, sizeof(err));
        if (rc != 0) {
            fprintf(stderr, "build: %s\n", err);
            return 1;
        }
        snprintf(step, sizeof(step), "build %d", r);
        report(step, t);
    }
    sws_routeset_scratch_free(&scratch);
    free(arena);
    sws__route_set__free_unpacked(rs, NULL);
    return 0;
}
