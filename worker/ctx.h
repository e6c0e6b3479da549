/*
 * The worker context: what one worker process keeps for its request
 * handlers between requests, reached from the request rather than through
 * file-scope globals.
 *
 * Owner: the worker (worker.c's sws_worker_t embeds one for the life of the
 * process and closes it when its loop ends). A handler reaches it as
 * sws_worker_ctx(r), through the connection set that carried the request
 * (sws_conn_set_t.ctx, worker/conn.h), and never frees it. Single-threaded
 * like everything in a worker; zero-initialised memory is an empty context.
 * A test that drives a handler which needs one points its set's ctx at a
 * context of its own.
 *
 * What belongs here: per-worker state shared by the requests of every
 * connection: the static roots held open (static_open.h), the upstream
 * connections and the view of the pools; per-worker caches and action
 * counters as they come, each one field more here rather than one global more.
 */
#ifndef SWS_WORKER_CTX_H
#define SWS_WORKER_CTX_H

#include "worker/conn.h"
#include "worker/pipe_cache.h"
#include "worker/proxy.h"
#include "worker/request.h"
#include "worker/static_open.h"
#include "worker/upstream_conn.h"
#include "worker/upstream_h2.h"
#include "worker/upstream_pools.h"

typedef struct sws_worker_ctx {
    sws_static_roots_t static_roots; /* the static action's open root dirfds */
    sws_upstream_set_t upstreams;    /* the proxy's idle upstream connections; its
                                      * timer queues: sws_upstream_set_init once */
    sws_upstream_pools_t pools;      /* the pools of the generation held, with the
                                      * balancers' state: sws_upstream_pools_adopt
                                      * at each generation */
    sws_pipe_cache_t pipes;          /* the proxy's empty pipes for splice */
    sws_upstream_h2_set_t h2;        /* the proxy's HTTP/2 connections to members, on
                                      * `upstreams`: sws_upstream_h2_set_init once */
    sws_proxy_spares_t proxies;      /* the proxy's request states kept for reuse */
} sws_worker_ctx_t;

/* The context of the worker serving r. Never NULL in a worker; a test's
 * set without one makes this NULL, for handlers that do not need it. */
static inline sws_worker_ctx_t *sws_worker_ctx(const sws_request_t *r)
{
    return r->conn->set->ctx;
}

/* Release what the context holds (descriptors, upstream connections, the pools view), leaving it
 * empty. When the worker stops, after its connections are closed. */
static inline void sws_worker_ctx_close(sws_worker_ctx_t *ctx)
{
    sws_static_roots_close(&ctx->static_roots);
    sws_upstream_h2_set_close(&ctx->h2); /* its connections are the set's */
    sws_upstream_set_close(&ctx->upstreams);
    sws_upstream_pools_free(&ctx->pools);
    sws_pipe_cache_close(&ctx->pipes);
    sws_proxy_spares_close(&ctx->proxies);
}

#endif
