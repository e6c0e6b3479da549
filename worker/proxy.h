/*
 * The proxy action: one request relayed to a member of the route's pool
 * over HTTP/1.1 (or HTTP/2, below), its response relayed back through the
 * request's stream (ADR 0008; docs/adr/0014-proxy-relay.md).
 *
 * sws_proxy_handle() runs as the route's action, in the worker, inside
 * the protocol's call. It copies what it needs from the table generation
 * (the pool's name and settings, the route's host_header, the request's
 * hash key: the generation is only guaranteed during the call), serializes
 * the request (worker/proxy_req.h), has the pool's balancer in the
 * worker's view (worker/upstream_pools.h) pick a member, takes an idle
 * connection to it or opens one (worker/upstream_conn.h, with the pool's
 * keepalive and timeouts) and sets itself as the stream's source. Each
 * attempt's end is reported to the balancer once (sws_upstream_balance_done):
 * a response other than 502-504 is a success; a connect failure, a reset or
 * close, a timeout or a 502-504 a failure for passive health; an invalid
 * response or a client gone say nothing of the member. Everything after happens on the upstream
 * connection's events and timers, and in the stream's proceed():
 *
 *   - the response is parsed by llhttp (HTTP_RESPONSE, no lenient flag);
 *     1xx answers are relayed (sws_stream_interim: the member's 100 to an
 *     Expect: 100-continue the client waits on, which the proxy forwards,
 *     and 103); a 101 answers a request that asked for a switch
 *     (sws_proxy_req_upgrade) and hands both connections to a tunnel
 *     (worker/tunnel.h, ADR 0020), which stays in flight on its member
 *     until it ends; else it is refused;
 *   - the final head goes to sws_stream_head: the status, the fields minus
 *     the hop-by-hop ones, those Connection names, Content-Length and
 *     Transfer-Encoding (the length is given as a number, or unknown: the
 *     client's protocol frames it), Date and Server (the sink writes its
 *     own); the body to sws_stream_write, the trailers to sws_stream_end;
 *   - backpressure: the upstream is read no more than sws_stream_room()
 *     says the client's side takes whole; at 0, reading stops (and the
 *     read timer with it: the client's send timer runs instead) until
 *     proceed(). So one read buffer (SWS_PROXY_BUF) plus the sink's
 *     high-water mark bound what a response holds in memory, whatever the
 *     speeds, and no body byte is copied into the stream;
 *   - a body announced at 64 KiB or more, where sws_stream_can_pipe()
 *     allows, goes upstream socket -> pipe -> client by splice(2), a
 *     pipe's worth at a time (the pipe from the worker's cache,
 *     worker/pipe_cache.h; ADR 0022);
 *   - after a complete response on a keep-alive upstream connection with
 *     nothing more to read, the connection goes back to the idle pool;
 *     otherwise it is closed.
 *
 * Failures (connect refused or timed out, reset, close, read or send
 * timeout, an invalid response): before any byte of the response went to
 * the stream, the request is retried on another member when the rule of
 * issue 7 allows it (any method after a connect failure; GET, HEAD,
 * OPTIONS, PUT, DELETE, TRACE also after a read timeout before any byte, a
 * 502/503/504 answer, or a connection broken after the request was
 * written; a request with other methods is never sent twice), up to
 * the pool's `retries` times (0: one attempt), the balancer skipping the
 * members already tried while another may take it; else the
 * client gets 502 (504 after a timeout, 503 when no member may take it:
 * none up, all down by passive health or at max_conns) and the
 * error log one line naming pool, member and reason. After the head went
 * out the response is cut (sws_stream_abort) and logged.
 *
 * A connection from the idle pool that breaks before a byte of the answer
 * (the member closed it as the request went out: ADR 0021's race) is not
 * the member's failure: a request the rules above let go again is sent
 * once more to the same member on a new connection, not counted in
 * `retries` (ADR 0026).
 *
 * The response is read while the request body still streams, once the
 * head is written: a 100, or a final answer that makes the rest of the
 * body moot (then the client's connection closes after it).
 *
 * A pool whose protocol is h2 or grpc (ADR 0034) is spoken to over
 * HTTP/2 (worker/upstream_h2.h): the same pick, retry rules, passive
 * health and access log; the head above mapped onto HTTP/2 fields, the
 * body framed by HTTP/2 (not chunked), trailers both ways, no tunnel and
 * no forwarded Expect; a stream the member refused unprocessed (F_REFUSED)
 * is retried whatever the method and says nothing of its health. A grpc
 * pool answers HTTP/1 clients 426.
 *
 * Memory: one block per proxied request (state, request head, read
 * buffer), from the worker's spares when its head fits the usual size
 * (sws_proxy_spares_t), and one allocation for a request body; given
 * back or freed when the stream is released (the source's dispose).
 */
#ifndef SWS_WORKER_PROXY_H
#define SWS_WORKER_PROXY_H

#include "worker/stream.h"

#define SWS_PROXY_BUF (16u * 1024)     /* read buffer; a response head must fit */
#define SWS_PROXY_MAX_FIELDS 128u      /* response fields (and trailers) relayed */

/* A proxied request's state is taken from here when its head fits the
 * usual size (two kinds: with the HTTP/1 read buffer, and without it for
 * an h2 or grpc pool), and given back when the stream is released, so a
 * request costs no allocation (ADR 0051). Per worker, in the worker
 * context (worker/ctx.h); zero-initialised is empty. */
typedef struct sws_proxy_spares {
    void *list[2];
    unsigned n[2];
} sws_proxy_spares_t;

/* Free what is kept (the worker stops, its streams released). */
void sws_proxy_spares_close(sws_proxy_spares_t *sp);

/* The proxy action (worker/handlers.h dispatches to it) for a request
 * without a body, complete. Needs the worker context (worker/ctx.h) of the
 * request's connection set. */
void sws_proxy_handle(sws_stream_t *st);

/* The same for a request whose head is complete and whose body is still
 * to come (the set's head handler, worker/conn.h): the body streams to
 * the upstream as it arrives (sws_stream_set_body), re-framed (the length
 * the client announced, or chunks), with backpressure both ways: at most
 * about 64 KiB of it is held, then the client is not read until the
 * upstream took it. A request whose body bytes went out is not retried
 * (the body is not kept). */
void sws_proxy_handle_body(sws_stream_t *st);

#endif
