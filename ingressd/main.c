/*
 * ingressd: the command line (ingressd/options.h). With --from-dir and
 * --print it reads objects from files, translates them and prints what
 * scalwsd would serve: a look at what a cluster's objects become, without
 * a cluster. Without them it watches the API server and publishes to
 * scalwsd (ingressd/daemon.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/version.h"
#include "ingressd/daemon.h"
#include "ingressd/from_dir.h"
#include "ingressd/options.h"
#include "ingressd/store.h"
#include "ingressd/translate.h"
#include "shm/routeset_check.h"

static const char *const state_names[] = { "up", "draining", "down" };

static void print_routes(FILE *out, const Sws__RouteSet *rs)
{
    for (size_t h = 0; h < rs->n_hosts; h++) {
        const Sws__Host *host = rs->hosts[h];
        fprintf(out, "host %s", host->names[0]);
        if (host->n_certificates > 0)
            fprintf(out, " (certificate from Secret %s)", host->certificates[0]->cert_path);
        fputc('\n', out);
        for (size_t r = 0; r < host->n_routes; r++) {
            const Sws__Route *route = host->routes[r];
            fprintf(out, "  %-6s %s -> %s\n",
                    route->match == SWS__ROUTE__MATCH__EXACT ? "exact" : "prefix", route->path,
                    route->proxy != NULL ? route->proxy->pool : "?");
        }
    }
    for (size_t p = 0; p < rs->n_pools; p++) {
        const Sws__Pool *pool = rs->pools[p];
        fprintf(out, "pool %s:%s", pool->name, pool->n_members == 0 ? " no members (503)" : "");
        for (size_t m = 0; m < pool->n_members; m++)
            fprintf(out, "%s %s %s", m ? "," : "", pool->members[m]->address,
                    state_names[pool->members[m]->state <= 2 ? pool->members[m]->state : 2]);
        fputc('\n', out);
    }
}

/* --from-dir DIR --print: 0 when the RouteSet passes the check scalwsd
 * applies, else 1. */
static int run_from_dir(const sws_ingressd_options_t *o)
{
    sws_ingress_store_t st;
    sws_ingress_translate_stats_t stats;
    sws_routeset_refusal_t why;
    char err[512];
    size_t nobjects;
    int rc = 1;

    sws_ingress_store_init(&st);
    if (sws_ingress_from_dir(o->from_dir, sws_ingress_store_event, &st, &nobjects, err,
                             sizeof(err)) < 0) {
        sws_log_error("%s", err);
        goto out;
    }
    Sws__RouteSet *rs = sws_ingress_translate(&st, o->ingress_class, 1, 0, &stats);
    if (rs == NULL)
        goto out;
    printf("%zu objects read (%" PRIu64 " refused); %zu Ingresses of class %s: %zu hosts, "
           "%zu routes, %zu pools, %zu members; %zu parts left out (%zu conflicts)\n",
           nobjects, st.refused, stats.ingresses, o->ingress_class, stats.hosts, stats.routes,
           stats.pools, stats.members, stats.skipped, stats.conflicts);
    print_routes(stdout, rs);
    if (sws_routeset_check(rs, &why) == 0) {
        printf("check: ok\n");
        rc = 0;
    } else {
        printf("check: refused: %s: %s\n", why.path, why.msg);
    }
    sws_ingress_translate_free(rs);
out:
    sws_ingress_store_free(&st);
    return rc;
}

int main(int argc, char **argv)
{
    sws_ingressd_options_t o;
    char err[512];

    sws_log_init("ingressd", 2, SWS_LOG_INFO);
    if (sws_ingressd_options_parse(argc, argv, &o, err, sizeof(err)) < 0) {
        fprintf(stderr, "ingressd: %s\n(ingressd --help lists the options)\n", err);
        return 2;
    }
    if (o.help) {
        fputs(sws_ingressd_usage, stdout);
        return 0;
    }
    if (o.version) {
        printf("ingressd %s\n", SWS_VERSION);
        return 0;
    }
    sws_log_set_level(o.log_level);
    return o.print ? run_from_dir(&o) : sws_ingressd_run(&o);
}
