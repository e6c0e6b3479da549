/*
 * Choosing the member of an upstream pool for a request (one worker's view).
 *
 * The proxy keeps one sws_upstream_balancer_t per pool per worker. It fills
 * the peers from the table's members (id, weight, state) for each table
 * generation and hands the new array to sws_upstream_balance_carry(), which
 * moves this worker's state (round-robin position, requests in flight,
 * passive health) from the previous array by member id: a member that is
 * still there keeps it, a new member starts fresh, a removed member's state
 * goes with the old array. Nothing here depends on the table's layout.
 *
 * A request then goes through:
 *   i = sws_upstream_balance_pick(b, key, &tried, now)   -- a member, or -1
 *   ... the proxy sends it to b->peers[i] ...
 *   sws_upstream_balance_done(b, id, i, outcome, now)    -- exactly once
 * A retry adds the failed member's id to `tried` and picks again.
 *
 * Which members may get a new request: state up, weight > 0 (a weight of 0
 * takes no new request, as in HAProxy), available by passive health
 * (worker/upstream_health.h: a member down by health is treated like state
 * down), and fewer than max_conns requests in flight from this worker
 * (0: no limit). Draining and down members get none; requests in flight on
 * them finish.
 *
 * Retries (issue 7: "a retry never goes to the member that just failed
 * when another one is available"): members in `tried` are skipped while
 * another one may be picked; when all that may are tried, any tried one
 * except the last (the one that just failed); only when that member is the
 * only one left is it picked again (a new connection: a reset keep-alive
 * connection to a one-member pool is worth a retry). The proxy sees the
 * member id and may decline.
 *
 * Kinds (ADR 0011):
 *   round_robin  nginx's smooth weighted round robin: weights 5,1,1 give
 *                a a b a c a a; over the members that may be picked.
 *   least_conn   fewest requests in flight relative to weight; ties go
 *                round robin among the tied (not always the first).
 *   hash         weighted rendezvous hashing of the key: removing a member
 *                moves only its keys, adding one moves only keys to it;
 *                the next member in the key's order when the first may not
 *                be picked. No key (header or cookie absent): round robin.
 *
 * Per worker, single-threaded, no allocation: the caller owns the peers
 * array and frees the old one after carrying.
 */
#ifndef SWS_WORKER_UPSTREAM_BALANCE_H
#define SWS_WORKER_UPSTREAM_BALANCE_H

#include <stdint.h>

#include "core/str.h"
#include "worker/upstream_health.h"

/* Values as the table's Sws__Member__State (proto/scalws.proto). */
typedef enum sws_upstream_state {
    SWS_UPSTREAM_UP = 0,
    SWS_UPSTREAM_DRAINING = 1,
    SWS_UPSTREAM_DOWN = 2,
} sws_upstream_state_t;

typedef enum sws_upstream_balance_kind {
    SWS_UPSTREAM_ROUND_ROBIN = 0, /* the default */
    SWS_UPSTREAM_LEAST_CONN,
    SWS_UPSTREAM_HASH,
} sws_upstream_balance_kind_t;

typedef struct sws_upstream_peer {
    /* From the table, set by the caller for each generation. */
    uint64_t id;
    uint32_t weight;
    uint8_t state;                 /* sws_upstream_state_t */
    /* Derived from id by sws_upstream_balance_prepare (hash's per-member
     * half of the rendezvous hash). */
    uint64_t id_hash;
    /* This worker's, carried across generations by member id. */
    uint32_t active;               /* requests in flight, each on its own upstream
                                    * connection; idle keep-alive ones not counted */
    int64_t current;               /* smooth round robin's current weight */
    uint64_t requests;             /* ended (done), for the admin API */
    sws_upstream_health_t health;
} sws_upstream_peer_t;

typedef struct sws_upstream_balancer {
    sws_upstream_peer_t *peers;    /* owned by the caller */
    uint32_t npeers;
    uint8_t kind;                  /* sws_upstream_balance_kind_t */
    uint32_t max_conns;            /* per member in this worker; 0: no limit */
    uint8_t weighted;              /* weights differ (sws_upstream_balance_prepare) */
    sws_upstream_health_conf_t health;
} sws_upstream_balancer_t;

/* The members a request was sent to, newest last. Holds the newest
 * SWS_UPSTREAM_TRIED_MAX (more retries than that forget the oldest).
 * Zero-initialised: none. Ids, not indexes, so that a retry after a new
 * table generation still knows them. */
#define SWS_UPSTREAM_TRIED_MAX 8
typedef struct sws_upstream_tried {
    uint64_t id[SWS_UPSTREAM_TRIED_MAX];
    uint32_t n; /* ids added in all; the newest is id[(n - 1) % MAX] */
} sws_upstream_tried_t;

void sws_upstream_tried_add(sws_upstream_tried_t *t, uint64_t id);

/* Move this worker's state from the previous generation's peers to next
 * (matched by id; a member in next and not in prev starts fresh with
 * zeroes). next's id/weight/state are the caller's; the rest is
 * overwritten. */
void sws_upstream_balance_carry(sws_upstream_peer_t *next, uint32_t nnext,
                                const sws_upstream_peer_t *prev, uint32_t nprev);

/* Once per generation, after the caller set the peers' id, weight and
 * state (and before any pick): what every hash pick would otherwise
 * recompute per member (ADR 0011): the hash of each member's id, and
 * whether the weights differ. */
void sws_upstream_balance_prepare(sws_upstream_balancer_t *b);

/* The index of the member for this request in b->peers, or -1 when no
 * member may take it (503). key: for hash, the request's key bytes
 * (worker/upstream_key.h); NULL (or not hash): none. tried: NULL for a
 * first try. Counts the request as in flight on the member and, when its
 * passive health had a trial due, makes it the trial. now_ms: loop time. */
int sws_upstream_balance_pick(sws_upstream_balancer_t *b, const sws_str_t *key,
                              const sws_upstream_tried_t *tried, uint64_t now_ms);

typedef enum sws_upstream_outcome {
    SWS_UPSTREAM_OK = 0,  /* the member answered (whatever the status, but 502-504) */
    SWS_UPSTREAM_FAILED,  /* a failure for passive health (upstream_health.h) */
    SWS_UPSTREAM_NEUTRAL, /* ended for another reason: says nothing of the member */
} sws_upstream_outcome_t;

/* The request picked on member id (at index hint then) has ended: no
 * longer in flight, counted in requests, outcome reported to its passive health. By id, so that
 * it is right after a new generation (hint is checked first); a member
 * removed since is forgotten, and nothing happens. */
void sws_upstream_balance_done(sws_upstream_balancer_t *b, uint64_t id, int hint,
                               sws_upstream_outcome_t outcome, uint64_t now_ms);

/* The member with this id, or -1; hint (an index it had) is tried first. */
int sws_upstream_balance_find(const sws_upstream_balancer_t *b, uint64_t id, int hint);

#endif
