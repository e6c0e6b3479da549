#include "supervisor/ingress_merge.h"

#include <stdlib.h>
#include <string.h>

#include "shm/routeset_check.h"

static int file_has_name(const Sws__RouteSet *file, const char *name)
{
    for (size_t h = 0; h < file->n_hosts; h++) {
        for (size_t i = 0; i < file->hosts[h]->n_names; i++) {
            if (sws_routeset_host_names_same(file->hosts[h]->names[i], name))
                return 1;
        }
    }
    return 0;
}

static int file_has_pool(const Sws__RouteSet *file, const char *name)
{
    for (size_t p = 0; p < file->n_pools; p++) {
        if (strcmp(file->pools[p]->name, name) == 0)
            return 1;
    }
    return 0;
}

/* Whether host proxies to one of the pools the file shadows (shadowed,
 * the short list the pool loop collected: not both pool lists per route). */
static int routes_to_shadowed(const Sws__Host *host, const char *const *shadowed, size_t n)
{
    for (size_t r = 0; r < host->n_routes; r++) {
        const Sws__Route *route = host->routes[r];
        if (route->action_case != SWS__ROUTE__ACTION_PROXY || route->proxy == NULL)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(shadowed[i], route->proxy->pool) == 0)
                return 1;
        }
    }
    return 0;
}

void sws_ingress_merge_free(sws_ingress_merge_t *m)
{
    free(m->rs.hosts);
    free(m->rs.pools);
    free(m->copies);
    free(m->names);
    memset(m, 0, sizeof(*m));
}

int sws_ingress_merge(const Sws__RouteSet *file, const Sws__RouteSet *ingress,
                      sws_ingress_merge_t *m)
{
    static const Sws__RouteSet empty = SWS__ROUTE_SET__INIT;
    memset(m, 0, sizeof(*m));
    sws__route_set__init(&m->rs);
    if (ingress == NULL)
        ingress = &empty;
    size_t nnames = 0;
    for (size_t h = 0; h < ingress->n_hosts; h++)
        nnames += ingress->hosts[h]->n_names;
    m->rs.hosts = malloc((file->n_hosts + ingress->n_hosts + 1) * sizeof(*m->rs.hosts));
    m->rs.pools = malloc((file->n_pools + ingress->n_pools + 1) * sizeof(*m->rs.pools));
    m->copies = malloc((ingress->n_hosts + 1) * sizeof(*m->copies));
    m->names = malloc((nnames + 1) * sizeof(*m->names));
    const char **shadowed = malloc((ingress->n_pools + 1) * sizeof(*shadowed));
    if (m->rs.hosts == NULL || m->rs.pools == NULL || m->copies == NULL || m->names == NULL ||
        shadowed == NULL) {
        free(shadowed);
        sws_ingress_merge_free(m);
        return -1;
    }
    m->rs.version = file->version;
    m->rs.settings = file->settings;
    m->rs.tls = file->tls;

    for (size_t p = 0; p < file->n_pools; p++)
        m->rs.pools[m->rs.n_pools++] = file->pools[p];
    for (size_t p = 0; p < ingress->n_pools; p++) {
        if (!file_has_pool(file, ingress->pools[p]->name)) {
            m->rs.pools[m->rs.n_pools++] = ingress->pools[p];
            continue;
        }
        shadowed[m->shadowed_pools] = ingress->pools[p]->name;
        if (m->shadowed_pools++ == 0 && m->first_shadowed == NULL)
            m->first_shadowed = ingress->pools[p]->name;
    }

    for (size_t h = 0; h < file->n_hosts; h++)
        m->rs.hosts[m->rs.n_hosts++] = file->hosts[h];
    size_t ncopies = 0, nkept_names = 0;
    for (size_t h = 0; h < ingress->n_hosts; h++) {
        Sws__Host *host = ingress->hosts[h];
        if (routes_to_shadowed(host, shadowed, m->shadowed_pools)) {
            m->dropped_hosts++;
            continue;
        }
        size_t keep = 0;
        char **kept = m->names + nkept_names;
        for (size_t i = 0; i < host->n_names; i++) {
            if (!file_has_name(file, host->names[i])) {
                kept[keep++] = host->names[i];
            } else if (m->shadowed_names++ == 0 && m->first_shadowed == NULL) {
                m->first_shadowed = host->names[i];
            }
        }
        if (keep == 0) {
            m->dropped_hosts++;
        } else if (keep == host->n_names) {
            m->rs.hosts[m->rs.n_hosts++] = host;
        } else {
            /* A shallow copy: routes and certificates stay the ingress set's. */
            Sws__Host *copy = &m->copies[ncopies++];
            *copy = *host;
            copy->names = kept;
            copy->n_names = keep;
            nkept_names += keep;
            m->rs.hosts[m->rs.n_hosts++] = copy;
        }
    }
    free(shadowed);
    return 0;
}
