/*
 * One worker's view of the upstream pools of the table generation it
 * holds: per pool, its settings, its members' parsed addresses and the
 * balancer (worker/upstream_balance.h) with this worker's state.
 *
 * Ownership: the worker context (worker/ctx.h) embeds one
 * sws_upstream_pools_t. The worker rebuilds it when it adopts a
 * generation (worker.c adopt_generation) with sws_upstream_pools_adopt();
 * the proxy (worker/proxy.h) reads it. Single-threaded, like the worker.
 *
 * Across a reload (ADR 0012, 0013): a pool is the same pool when its name
 * is. One whose digest (sws_pool_t.digest) did not change either is kept
 * as it is, moved into the new view (ADR 0048): an ingress generation
 * that changed one pool of 10,000 rebuilds that one. A changed pool is
 * rebuilt and its members carry their round-robin position, requests in
 * flight and passive health by member id (sws_upstream_balance_carry), so
 * a reload that adds one member leaves the others' turns and health as
 * they were. A member gone from every pool has its idle upstream
 * connections closed at the switch (they would only wait for their idle
 * timeout); requests in flight on it finish, and their report finds no
 * member and is dropped.
 *
 * A pool over TLS (https; h2 or grpc with tls, the table's `tls`) gets one
 * client SSL_CTX when it is built (its CA and verify setting are in its
 * digest, so a kept pool keeps it); each member its SNI and the name its
 * certificate must carry: tls.sni, else the member's host name, else (an
 * IP literal) no SNI and its IP, and for h2 and grpc ALPN "h2". proxy.c
 * hands &member->tls to sws_upstream_get_tls() or sws_upstream_h2_submit().
 *
 * A request keeps no pointer into the view across loop iterations (the
 * next generation frees it): it keeps the pool's name and index and asks
 * sws_upstream_pools_find() again, and reports by member id.
 */
#ifndef SWS_WORKER_UPSTREAM_POOLS_H
#define SWS_WORKER_UPSTREAM_POOLS_H

#include <stddef.h>
#include <stdint.h>

#include "shm/table.h"
#include "worker/upstream_balance.h"
#include "worker/upstream_conn.h"
#include "worker/upstream_key.h"
#include "worker/upstream_tls.h"

#define SWS_UPSTREAM_MEMBER_TEXT 64 /* a member's address as logged */

typedef struct sws_upstream_member {
    sws_upstream_addr_t addr;
    char text[SWS_UPSTREAM_MEMBER_TEXT];
    char *tls_name;                 /* https: the name or IP it must prove; owned */
    sws_upstream_tls_t tls;         /* https: its connections' TLS (tls.ctx the pool's) */
} sws_upstream_member_t;

typedef struct sws_upstream_pool {
    char *name;                     /* NUL-terminated, owned */
    size_t name_len;
    sws_upstream_balancer_t bal;    /* bal.peers: owned, parallel to members */
    sws_upstream_member_t *members; /* owned */
    int hashed;                     /* balance: hash; key is set */
    sws_upstream_key_t key;         /* key.name points into key_name */
    char *key_name;                 /* owned */
    uint32_t retries;               /* further members tried after a failure */
    sws_upstream_conf_t conf;       /* keepalive and timeouts, for its connections */
    SSL_CTX *tls_ctx;               /* over TLS: made when built (ADR 0030); NULL: none */
    uint64_t digest;                /* the table's (sws_pool_t.digest); 0: rebuild it */
} sws_upstream_pool_t;

typedef struct sws_upstream_pools {
    sws_upstream_pool_t *pools;
    uint32_t npools;                /* the table's pool count, same order */
} sws_upstream_pools_t;

/* Replace the view with one of table t, keeping or carrying state from
 * the current one (see the top), and close the idle connections in s of
 * the members gone. Costs one pass over the pools plus the work of the
 * pools that changed. 0, or -1 with err set (out of memory): the view
 * stays as it was.
 * Addresses come as the table parsed them (no second parser); a member
 * that is a name nobody resolved is logged and counted down. */
int sws_upstream_pools_adopt(sws_upstream_pools_t *v, const sws_table_t *t,
                             sws_upstream_set_t *s, char *err, size_t errlen);

/* The pool named name (len bytes), or NULL; hint (an index it had) is
 * looked at first. */
sws_upstream_pool_t *sws_upstream_pools_find(sws_upstream_pools_t *v, const char *name,
                                             size_t len, uint32_t hint);

/* Free the view, leaving it empty (the worker stops). */
void sws_upstream_pools_free(sws_upstream_pools_t *v);

#endif
