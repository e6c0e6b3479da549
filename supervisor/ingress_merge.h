/*
 * What the supervisor serves when it subscribes to ingressd: the file's
 * RouteSet and the ingress RouteSet merged into one (docs/configuration.md,
 * "ingress"; docs/adr/0037-ingress-clone-pattern.md).
 *
 * The rule: the file wins every name it claims.
 *   - settings and tls (server.tls) are the file's; the ingress set's are
 *     not used;
 *   - the file's hosts come first, then the ingress hosts; a host name the
 *     file serves is taken out of the ingress host that also has it (the
 *     rest of its names stay), and an ingress host left without names is
 *     not served;
 *   - pools: the file's, then the ingress ones; an ingress pool whose name
 *     the file's pools use is not served, nor any ingress host that routes
 *     to it (else its routes would reach the file's pool).
 * Each refusal is counted in the result for the caller's log line.
 *
 * Ownership: the result is a view. It borrows every host, route and pool
 * from file and ingress, which must outlive it; it owns its arrays and the
 * shallow copies of the hosts that lost names (sws_ingress_merge_free).
 * Cost: names are compared pairwise, file x ingress (the file has a few
 * hosts; 10,000 ingress hosts against 20 file names is 200,000 compares).
 *
 * Pure functions on memory: any process; the supervisor and the tests.
 */
#ifndef SWS_SUPERVISOR_INGRESS_MERGE_H
#define SWS_SUPERVISOR_INGRESS_MERGE_H

#include <stddef.h>

#include "proto/scalws.pb-c.h"

typedef struct sws_ingress_merge {
    Sws__RouteSet rs;          /* what to publish */
    Sws__Host *copies;         /* ingress hosts that lost a name (owned) */
    char **names;              /* the names those copies keep (owned, one array) */
    size_t shadowed_names;     /* ingress host names the file serves */
    size_t dropped_hosts;      /* ingress hosts not served (no name left, or a shadowed pool) */
    size_t shadowed_pools;     /* ingress pools named like one of the file's */
    const char *first_shadowed; /* the first name or pool shadowed, for the log; NULL: none */
} sws_ingress_merge_t;

/* Merge file and ingress (NULL: nothing from ingressd yet) into *m.
 * 0, or -1 when memory ran out (m then holds nothing to free). */
int sws_ingress_merge(const Sws__RouteSet *file, const Sws__RouteSet *ingress,
                      sws_ingress_merge_t *m);

void sws_ingress_merge_free(sws_ingress_merge_t *m);

#endif
