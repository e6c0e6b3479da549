/*
 * HTTP/2 to upstream members (ADR 0034): one nghttp2 client session per
 * upstream connection, many requests multiplexed on it; in the clear with
 * prior knowledge (h2c), or over TLS (the pool's `tls:`) where ALPN must
 * choose "h2": a member that chooses another protocol or none fails the
 * connection as a failed handshake would (SWS_UPSTREAM_H2_CONNECT). The proxy (worker/proxy.c) uses it for the
 * pools whose protocol is h2 or grpc, and keeps what does not depend on
 * the wire: the pick, the retry rules, passive health, the access log.
 *
 * Ownership: the worker context (worker/ctx.h) embeds one
 * sws_upstream_h2_set_t beside the upstream set whose connections it
 * uses. A connection is the h2 set's from its open to its close: held,
 * never in the upstream set's idle pool (its session state would be
 * lost). A stream is the set's too; its user (the proxy) holds the handle
 * from sws_upstream_h2_submit until ops->end or ops->failed is called (the
 * handle is dead from that call on) or until it calls
 * sws_upstream_h2_cancel; the set frees or keeps it (its spares, for the
 * next requests: ADR 0051) once nghttp2 is done with it too.
 * Single-threaded, in the worker.
 *
 * Connections: a request goes on an open connection to its member that
 * has room (fewer of our streams than the member's
 * SETTINGS_MAX_CONCURRENT_STREAMS; 100 assumed until its SETTINGS come,
 * nghttp2's default) and no GOAWAY, else on a new one; the set keeps the
 * connections with room in a list of their own (`room`). A member whose
 * SETTINGS_MAX_CONCURRENT_STREAMS is 0 takes no stream (ADR 0056): the
 * requests nghttp2 held for it fail as CONNECT (never sent), and while
 * an open connection to it says 0 a request to it fails so at once,
 * without a new connection; logged once per connection. A limit lowered
 * above 0 lets the streams sent finish; those held wait for a slot (under
 * the read timer), new requests take a new connection. What a loop
 * iteration queued on a connection goes in one write. The pool's
 * max_conns bounds requests in flight per member (the balancer's rule, as
 * for HTTP/1), hence connections too. A connection whose last stream
 * closed is idle: at most the pool's `keepalive` idle ones per member are
 * kept (the last one beyond is closed), each until its idle timeout, and
 * those of a member that left the table are closed at the switch
 * (sws_upstream_close_idle's hook).
 *
 * Timers (the pool's, sws_upstream_conf_t): one per connection, by what
 * it waits for: connect; send, while written bytes wait for the socket
 * (re-armed by each write) or a request body waits for the member's
 * window; read, while a stream waits for the member (a stream held back
 * by a slow client waits for the client, not the member); idle. The read
 * timer and the window's send timer are re-armed only when a stream
 * moves (a head, body bytes, an end or a reset, either way): a member's
 * PING, SETTINGS, WINDOW_UPDATE or empty DATA frames do not keep a
 * stalled stream waiting; nor does a moving one keep a starved one
 * waiting: when a stream moves, another that has waited a whole read (or
 * window send) timeout fails alone. A connect, send or read timeout of
 * the connection closes it and fails every stream on it with that cause.
 *
 * Flow control: a response's body bytes are given to ops->data; the
 * member's window (stream and connection) opens again only for the bytes
 * the user took: at once when data() returns 0, else when the user calls
 * sws_upstream_h2_consumed. So a slow client holds at most a stream
 * window (64 KiB) per stream, and the member stops sending.
 *
 * The request: its head is the HTTP/1.1 head worker/proxy_req.c made for
 * the request (one rule for what is forwarded: hop-by-hop fields,
 * X-Forwarded-*, Via), mapped onto HTTP/2: the request line to :method,
 * :scheme (http, or https over TLS) and :path, Host to :authority, names lowercased,
 * Transfer-Encoding and Connection dropped; `te: trailers` added when
 * asked (gRPC). The body comes from ops->body as the member's window
 * allows; at its end its trailers (ops->trailers) go as a HEADERS frame.
 */
#ifndef SWS_WORKER_UPSTREAM_H2_H
#define SWS_WORKER_UPSTREAM_H2_H

#include <stddef.h>
#include <stdint.h>

#include "worker/request.h"
#include "worker/upstream_conn.h"

/* Response fields (and trailers) kept per stream, and their bytes. */
#define SWS_UPSTREAM_H2_MAX_FIELDS 128u
#define SWS_UPSTREAM_H2_MAX_HEAD (64u * 1024)
/* Interim (1xx) heads' fields per stream, all of them: HEADERS frames are
 * not flow-controlled, so without a bound a member's stream of 103s
 * would pile up in a slow client's output. The HTTP/1 member path's bound
 * too (they share its 16 KiB head buffer, SWS_PROXY_BUF). */
#define SWS_UPSTREAM_H2_MAX_INTERIM (16u * 1024)

typedef struct sws_upstream_h2_stream sws_upstream_h2_stream_t;
typedef struct sws_upstream_h2_conn sws_upstream_h2_conn_t;

typedef struct sws_upstream_h2_set {
    sws_upstream_set_t *ups;       /* whose connections and timer queues are used */
    sws_upstream_h2_conn_t *conns; /* open ones, any member */
    sws_upstream_h2_conn_t *room;  /* those of them that take one more stream */
    sws_upstream_h2_conn_t *dead;  /* closed, freed by `reap` (outside nghttp2's calls) */
    sws_defer_t reap;
    sws_upstream_h2_stream_t *spare; /* streams nghttp2 is done with, for the next requests */
    unsigned nspare;
} sws_upstream_h2_set_t;

/* Why a stream failed: the user maps it onto its retry rules. */
typedef enum sws_upstream_h2_fail {
    SWS_UPSTREAM_H2_CONNECT = 0,    /* no connection: nothing was sent */
    SWS_UPSTREAM_H2_CONNECT_TIMEOUT,
    SWS_UPSTREAM_H2_REFUSED,        /* not processed by the member (REFUSED_STREAM, a
                                     * GOAWAY below it, or never sent): RFC 9113 8.7 */
    SWS_UPSTREAM_H2_SEND_TIMEOUT,
    SWS_UPSTREAM_H2_BROKEN,         /* reset, or the connection lost, after it was sent */
    SWS_UPSTREAM_H2_READ_TIMEOUT,
    SWS_UPSTREAM_H2_INVALID,        /* a protocol error, or a response we cannot relay */
} sws_upstream_h2_fail_t;

/* The user's callbacks; data is the user's pointer given to submit. They
 * run in the connection's event or a deferred call, never inside submit,
 * cancel, resume or consumed. */
typedef struct sws_upstream_h2_ops {
    /* A head: interim (1xx) or final; fields h[0..n) without the pseudo
     * ones, names lowercase; length: content-length, else
     * SWS_STREAM_LENGTH_UNKNOWN. 0: go on; -1: the user gave the stream up
     * (it called sws_upstream_h2_cancel; nothing more is called). */
    int (*head)(void *data, unsigned status, const sws_header_t *h, unsigned n,
                uint64_t length);
    /* n body bytes. 0: taken (the member may send as much more); 1: held,
     * the window opens by sws_upstream_h2_consumed; -1: given up, as for
     * head. */
    int (*data)(void *data, const char *p, size_t n);
    /* The response is complete; trailers t[0..n) (n may be 0). The handle
     * is dead. */
    void (*end)(void *data, const sws_header_t *t, unsigned n);
    /* The stream failed; the handle is dead. */
    void (*failed)(void *data, sws_upstream_h2_fail_t kind, const char *why);
    /* Request body: up to len bytes into buf; how many. 0 with *eof
     * clear: none now (the user calls sws_upstream_h2_resume when it has
     * more). *eof set: the body is complete after these bytes. */
    size_t (*body)(void *data, char *buf, size_t len, int *eof);
    /* At the body's end: its trailers, h[0..n) (names lowercase, as an
     * HTTP/2 client sent them); 0 for none. Optional. */
    unsigned (*trailers)(void *data, const sws_header_t **h);
} sws_upstream_h2_ops_t;

typedef struct sws_upstream_h2_req {
    const char *head;              /* the HTTP/1.1 head (proxy_req.h), CRLF CRLF included */
    size_t head_len;
    int has_body;                  /* a body follows (ops->body) */
    int te_trailers;               /* send `te: trailers` */
    const char *member;            /* the member as logged (a new connection keeps a copy) */
} sws_upstream_h2_req_t;

/* Zero-initialised memory is an empty set; init ties it to the upstream
 * set it opens connections in (and hooks its sws_upstream_close_idle).
 * Once per worker. */
void sws_upstream_h2_set_init(sws_upstream_h2_set_t *s, sws_upstream_set_t *ups);

/* Close every connection and free everything (the worker stops, after
 * every user gave its streams up): before sws_upstream_set_close. */
void sws_upstream_h2_set_close(sws_upstream_h2_set_t *s);

/* Send req to member_id (addr) on a connection with room, or a new one
 * (conf: the pool's keepalive and timeouts; tls: NULL for h2c, else the
 * member's, with alpn_h2 set, worker/upstream_pools.h). The handle, or NULL with err
 * and *kind set; nothing was sent then: CONNECT when no connection could
 * be made or the member says it takes no stream (above); REFUSED when the connection chosen took no new stream (it
 * takes none from then on: a later request goes on another); INVALID when
 * the head cannot be sent over HTTP/2 or memory ran out (neither says
 * anything of the member). */
sws_upstream_h2_stream_t *sws_upstream_h2_submit(sws_upstream_h2_set_t *s, uint64_t member_id,
                                                 const sws_upstream_addr_t *addr,
                                                 const sws_upstream_tls_t *tls,
                                                 const sws_upstream_conf_t *conf,
                                                 const sws_upstream_h2_req_t *req,
                                                 const sws_upstream_h2_ops_t *ops, void *data,
                                                 sws_upstream_h2_fail_t *kind, char *err,
                                                 size_t errlen);

/* The user gives the stream up (its client left, or it answered
 * otherwise): the member gets RST_STREAM (CANCEL), and no callback
 * follows. The handle is dead. */
void sws_upstream_h2_cancel(sws_upstream_h2_stream_t *hs);

/* The user has more request body (ops->body will give it). */
void sws_upstream_h2_resume(sws_upstream_h2_stream_t *hs);

/* The user took the body bytes it held (data() returned 1): the member's
 * window opens for them. */
void sws_upstream_h2_consumed(sws_upstream_h2_stream_t *hs);

/* Close the idle connections of a member and let its busy ones finish
 * without taking new streams (it left the table). */
void sws_upstream_h2_close_idle(sws_upstream_h2_set_t *s, uint64_t member_id);

/* Take a connected, non-blocking fd as an HTTP/2 connection to
 * member_id without a stream (tests and the fuzz target: one end of a
 * socketpair stands for a member). 0, or -1 (fd closed). */
int sws_upstream_h2_adopt(sws_upstream_h2_set_t *s, uint64_t member_id, int fd,
                          const sws_upstream_conf_t *conf);

/* Open connections to member_id, and how many of them are idle (tests). */
unsigned sws_upstream_h2_count(const sws_upstream_h2_set_t *s, uint64_t member_id,
                               unsigned *idle);

#endif
