/*
 * A client connection and the per-worker set that owns all of them.
 *
 * Ownership: the worker owns one sws_conn_set_t; the set owns every
 * connection (live, closed-this-iteration, and a free list for reuse) and
 * each connection owns its fd, its read buffer, its output buffer and an
 * optional file being sent. Everything runs in the worker's one thread.
 *
 * Protocols: conn.c knows none; it calls the connection's protocol through
 * the operations of worker/proto.h (HTTP/1.1: sws_http1_proto), and keeps
 * the protocol's per-connection state (its streams among it) in
 * proto_state, allocated with the connection. Requests reach the set's
 * handler as streams (worker/stream.h).
 *
 * I/O model (the hot path; see worker/http1.c for the protocol):
 *   - the fd is registered once, edge-triggered for IN|OUT|RDHUP; there is
 *     no epoll_ctl per request;
 *   - a read that fills less than the free space means the socket is
 *     drained: no further read until the next edge;
 *   - every response produced from one read is appended to one output
 *     buffer and written with one write(2) right after parsing; EPOLLOUT is
 *     only waited for after a short write;
 *   - above the write high-water mark (or while a file body is pending)
 *     parsing of further pipelined requests stops until the output drains;
 *   - one event reads at most SWS_CONN_READS_PER_RUN times and writes at
 *     most about SWS_CONN_SEND_PER_RUN bytes (queued output, file and pipe
 *     ranges, and a producer's sws_conn_write_through alike: a relay refilling the output as fast as the client
 *     takes it is held like a sendfile); input still waiting, or room for
 *     more, is then reported again in the next loop iteration.
 *
 * Timers: one per connection, armed in the set's per-purpose queues
 * (core/loop.h): header (request head in progress), body (body read in
 * progress), idle (keep-alive wait), send (a write is blocked; when it
 * fires, a client that acknowledged bytes since the last check gets
 * another period), linger (after we shut down writing, waiting for the
 * client's FIN).
 *
 * Memory of idle connections: a connection holds its read and output
 * buffers only while it works. Once it is idle (nothing unparsed, nothing
 * referenced, nothing queued) both go back to the set's small cache of
 * buffers, where the next connection that reads takes one (an output
 * buffer grown for mid-size responses, up to the high-water mark, stays
 * with its connection instead: it would be reallocated per response): so thousands of
 * idle keep-alive connections cost their struct, not 24 KiB each (nginx
 * frees its header buffer on idle keep-alive connections likewise), and a
 * busy connection pays two pointer moves per request, not a malloc.
 *
 * TLS (ADR 0033): a connection opened with sws_conn_open_tls runs the
 * handshake first (worker/tls.h, SSL on the fd, under the handshake timer),
 * then every read and write of it goes through SSL_read/SSL_write; file and
 * pipe ranges (sendfile, splice) are read into the output in pieces of
 * SWS_CONN_TLS_PIECE and written from there, and sws_conn_write_through
 * takes nothing (the caller queues it). OpenSSL's record buffers stay
 * with a connection while it works and go back within
 * SWS_CONN_TLS_BUFFERS_IDLE_MS of its last turn (ADR 0063).
 *
 * Closing: sws_conn_close() closes the fd at once but frees nothing: the
 * connection moves to the closed list and sws_conn_set_reap(), called from
 * the loop tick, recycles it. So an event batch never touches freed memory.
 */
#ifndef SWS_WORKER_CONN_H
#define SWS_WORKER_CONN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/loop.h"
#include "core/str.h"
#include "shm/shm.h"
#include "shm/table.h"
#include "worker/access_log.h"
#include "worker/proto.h"

#define SWS_CONN_READ_BUF (16u * 1024)   /* initial read buffer */
#define SWS_CONN_OUT_BUF (8u * 1024)     /* initial output buffer */
#define SWS_CONN_OUT_HWM (64u * 1024)    /* stop parsing while more is queued */
/* What the output may hold over its mark without growing: a producer
 * stops at the mark, but the framing of its last piece (a chunk-size line,
 * the last chunk and the trailers' framing) may pass it by a few bytes;
 * without this the buffer doubled for them and shrank once drained. */
#define SWS_CONN_OUT_SLACK 512u
#define SWS_CONN_OUT_MAX (SWS_CONN_OUT_HWM + SWS_CONN_OUT_SLACK)
#define SWS_CONN_LINGER_MS 2000          /* wait for the client's FIN after ours */
/* Graceful stop: how long an idle HTTP/1.1 connection waits for its next
 * request (capped by the keep-alive timeout). Long enough for a request a
 * client sent as the drain began, or right after its last response, to
 * arrive and be answered (ADR 0044); short, so idle clients do not hold a
 * stopping worker for its whole shutdown_timeout. */
#define SWS_CONN_DRAIN_IDLE_MS 1000
#define SWS_CONN_FREE_MAX 128            /* recycled connections kept */
#define SWS_CONN_BUF_CACHE 64            /* idle buffers of each kind kept per set */
#define SWS_CONN_READS_PER_RUN 16        /* reads per event before others get a turn */
/* Bytes written per event before others get a turn (nginx: sendfile_max_chunk,
 * 2m). Measured on the dev machine: one 1 MiB sendfile from the page cache
 * to a loopback reader takes 0.03-0.06 ms (1 ms cold), and the 90 MB turn
 * of issue 5 took 166-436 ms under load (2-5 ms per MiB): so a fast
 * download delays its worker's other clients by at most a few ms per turn,
 * while the syscalls per MiB (one sendfile, one epoll_ctl) stay negligible. */
#define SWS_CONN_SEND_PER_RUN (1u << 20)
/* A file or pipe range goes out over TLS in pieces of one TLS record. */
#define SWS_CONN_TLS_PIECE (16u * 1024)
/* A TLS connection gives OpenSSL's record buffers (about 34 KiB) back at
 * most this long after its last turn, not after each request: freeing and
 * allocating them cost a keep-alive request 1.2k instructions, 7 % of it
 * (ADR 0063). */
#define SWS_CONN_TLS_BUFFERS_IDLE_MS 1000

typedef struct sws_conn_set sws_conn_set_t;
typedef struct sws_worker_ctx sws_worker_ctx_t;
typedef struct sws_stream sws_stream_t;
typedef struct sws_tls_gen sws_tls_gen_t;
struct ssl_st;

/* Called with a stream whose request is complete; answers it through the
 * stream's producer API (worker/stream.h). */
typedef void (*sws_stream_handler_t)(sws_stream_t *st);

enum sws_conn_phase {
    SWS_CONN_ACTIVE = 0, /* reading requests, writing responses */
    SWS_CONN_LINGER,     /* we shut down writing; discard input until FIN */
    SWS_CONN_CLOSED,     /* fd closed; memory waits for the tick */
};

struct sws_conn {
    sws_io_t io;
    const sws_proto_ops_t *proto; /* the protocol on this connection */
    sws_timer_t timer;
    sws_timer_queue_t *timer_q;   /* queue the timer is armed in; NULL: none */
    sws_timer_t tls_idle;         /* TLS: give the record buffers back (tls_idle_q) */
    sws_defer_t wake;             /* queued by sws_conn_wake */
    sws_conn_set_t *set;
    sws_conn_t *prev, *next;      /* set->live list; `next` links closed/free lists */

    uint8_t phase;                /* enum sws_conn_phase */
    uint8_t readable;             /* the last edge has not been drained yet */
    uint8_t rdhup;                /* peer shut down writing (EPOLLRDHUP) */
    uint8_t peer_eof;             /* read returned 0 */
    uint8_t close_after;          /* close once the queued output is written */
    uint8_t input_over;           /* with close_after: the protocol read the client's
                                   * last request whole, so closing needs no lingering
                                   * read unless bytes arrived after it (ADR 0057) */
    uint8_t wrote;                /* a write made progress in this run */
    uint8_t got_input;            /* a read brought bytes in this run */
    uint8_t head_started;         /* a request head began in this run */
    uint8_t tls;                  /* accepted on a TLS listener (ssl below) */
    uint8_t tls_handshaking;      /* the handshake is not done yet */
    uint8_t tls_read_wants_write; /* SSL_read or the handshake waits for room */
    uint8_t tls_socket_drained;   /* the last read(2) under OpenSSL was short or
                                   * EAGAIN (worker/tls.c, sws_tls_drained) */
    uint8_t want_writable;        /* call proto->writable once the output drains */
    uint8_t running;              /* inside its turn (conn_run) */
    uint8_t yielded;              /* this turn asked for the next (conn_yield) */
    uint8_t input_paused;         /* the protocol takes no input now (a request body's
                                   * consumer is full): no read until it says otherwise */
    uint8_t shut_wr;              /* sws_conn_shutdown_write: 1 asked, 2 done */
    const sws_proto_ops_t *switch_to; /* sws_conn_switch_proto, until the protocol returns */
    void *switch_state;
    struct ssl_st *ssl;           /* TLS: the session (worker/tls.h); NULL: plain */

    /* Input: rbuf[rpos, rend) is unparsed; the current request's head lives
     * in rbuf[msg_start, ...) until the request is answered. NULL (rcap 0)
     * while the connection is idle. */
    char *rbuf;
    uint32_t rcap, rpos, rend, msg_start;

    /* Output: obuf[osent, olen) is queued, then file_left bytes of file_fd
     * (the fd is the protocol's: a stream's, closed when it is released).
     * obuf is NULL (ocap 0) while nothing is queued on an idle connection. */
    char *obuf;
    size_t ocap, olen, osent;
    int file_fd;
    off_t file_off;
    uint64_t file_left;
    uint8_t file_pipe;            /* file_fd is a pipe's read end: splice(2), no offset */
    size_t sent_turn;             /* bytes written in this turn, against SWS_CONN_SEND_PER_RUN */
    uint64_t bytes_out;           /* written to the socket, ever */
    uint64_t acked_checked;       /* of those, acknowledged at the last send timer check */

    void *proto_state;            /* proto->state_size bytes, the protocol's */
    unsigned requests;            /* answered on this connection */

    struct sockaddr_storage peer;
    socklen_t peer_len;
    char peer_text[64];           /* "" until sws_conn_peer_text() formats it */
};

struct sws_conn_set {
    sws_loop_t *loop;
    const sws_proto_ops_t *proto;    /* what new connections speak */
    const sws_proto_ops_t *h2_proto; /* HTTP/2 (worker/http2.c) for ALPN h2 and h2c prior knowledge; NULL: not spoken */
    sws_stream_handler_t handler;
    /* Optional: called when the head of a request with a body is complete,
     * before its body is read, so that an action that streams the body
     * (the proxy) takes it (sws_stream_set_body) and answers from there;
     * handler is then not called for that request. NULL: bodies are read
     * and dropped, and handler answers. */
    sws_stream_handler_t head_handler;
    sws_shm_counters_t *counters;    /* never NULL */
    sws_access_log_t *access_log;    /* NULL: no access log */
    sws_worker_ctx_t *ctx;           /* the owner's, for handlers (worker/ctx.h); NULL: none */

    /* The generation in use (refreshed by the owner at each tick). */
    const sws_table_t *table;        /* NULL before the first generation */
    const sws_settings_t *settings;  /* never NULL */
    sws_str_t server_name;

    sws_timer_queue_t header_q, body_q, idle_q, send_q, linger_q;
    sws_timer_queue_t drain_q;       /* idle HTTP/1.1 while draining */
    sws_timer_queue_t handshake_q;   /* TLS: the handshake must be done within */
    sws_timer_queue_t tls_idle_q;    /* TLS: SWS_CONN_TLS_BUFFERS_IDLE_MS */
    sws_tls_gen_t *tls;              /* the generation's TLS contexts (the owner's);
                                      * NULL: TLS connections are refused */

    /* Standard-size buffers of idle connections, for the next to read or
     * write (see "Memory of idle connections"). */
    char *rbufs[SWS_CONN_BUF_CACHE], *obufs[SWS_CONN_BUF_CACHE];
    unsigned nrbufs, nobufs;

    sws_conn_t *live;                /* doubly linked */
    sws_conn_t *closed;              /* singly linked, freed by the tick */
    sws_conn_t *free_list;           /* singly linked */
    unsigned nlive, nfree;
    unsigned inflight;               /* streams started and not released (worker/stream.c) */
    int draining;                    /* graceful stop: no keep-alive */
};

/* Defaults used before a generation is adopted (and by tests). */
extern const sws_settings_t sws_conn_default_settings;

/* Set up an empty set whose connections speak proto (worker/proto.h;
 * static, not copied). handler answers complete requests; counters must
 * outlive the set. */
void sws_conn_set_init(sws_conn_set_t *s, sws_loop_t *loop, const sws_proto_ops_t *proto,
                       sws_stream_handler_t handler, sws_shm_counters_t *counters);

/* Use table t with settings st (NULL: the defaults) and Server header
 * value server_name (borrowed: must stay valid while t is held). Timer
 * durations follow st; timers already armed keep their deadlines. */
void sws_conn_set_configure(sws_conn_set_t *s, const sws_table_t *t, const sws_settings_t *st,
                            sws_str_t server_name);

/* Take ownership of an accepted, non-blocking fd and start reading.
 * Returns the connection, or NULL (fd closed, error logged). */
sws_conn_t *sws_conn_open(sws_conn_set_t *s, int fd, const struct sockaddr *peer,
                          socklen_t peer_len);

/* The same for a TLS listener's connection: the handshake runs first,
 * under the table's server.tls handshake_timeout (set->tls must be set, else
 * the fd is closed and NULL returned). */
sws_conn_t *sws_conn_open_tls(sws_conn_set_t *s, int fd, const struct sockaddr *peer,
                              socklen_t peer_len);

/* Graceful stop: from now on every response closes its connection.
 * HTTP/2 connections get their GOAWAYs; an idle HTTP/1.1 one (idle now, or
 * once its current response is sent) stays open for SWS_CONN_DRAIN_IDLE_MS
 * (at most its keep-alive timeout) in case its next request is on the way:
 * that request is answered, with Connection: close. */
void sws_conn_set_drain(sws_conn_set_t *s);

/* How many connections are idle (no request in progress, nothing to send):
 * what close_all would close without cutting a response. */
unsigned sws_conn_set_count_idle(const sws_conn_set_t *s);

/* Close every connection now (stop or end of drain); returns how many were
 * open. */
unsigned sws_conn_set_close_all(sws_conn_set_t *s);

/* From the loop tick: recycle the connections closed since the last tick. */
void sws_conn_set_reap(sws_conn_set_t *s);

/* Free everything (after close_all and reap). */
void sws_conn_set_destroy(sws_conn_set_t *s);

/* Close now: fd closed, timer disarmed, memory recycled at the next tick.
 * Safe to call twice. */
void sws_conn_close(sws_conn_t *c);

/* The client's address as text ("127.0.0.1", "::1"), formatted once. */
const char *sws_conn_peer_text(sws_conn_t *c);

/* Output buffer: make room for n more bytes (capacity doubles, but stops
 * at SWS_CONN_OUT_MAX when that is enough). 0, or -1 (out of memory). */
int sws_conn_reserve(sws_conn_t *c, size_t n);

/* Append bytes to the output (reserving room). 0 or -1. */
int sws_conn_append(sws_conn_t *c, const void *p, size_t n);

/* Write what is queued and then up to n bytes of p with one writev(2),
 * now, whatever the connection's turn: for a producer whose large piece
 * would otherwise be copied into the output only to be written from there
 * (the proxy's body, read into its own buffer). Counts against the turn's
 * byte budget like any write. Returns how many bytes of p went to the
 * socket (0 when the socket is full, a file range is queued, the budget is
 * spent, or the write failed: a failure is left for the connection's own
 * next write, which closes it, so the caller's stream is never released
 * under it). The caller queues the rest (sws_conn_append) and wakes the
 * connection. */
size_t sws_conn_write_through(sws_conn_t *c, const void *p, size_t n);

/* Queue len bytes of fd from off after the queued output. The fd stays the
 * caller's and must stay open until they are sent (file_left is 0) or the
 * connection closes. Nothing may be appended to the output meanwhile: it
 * would overtake the file. */
void sws_conn_queue_file(sws_conn_t *c, int fd, off_t off, uint64_t len);

/* Queue len bytes that wait in a pipe (fd: its read end) after the queued
 * output, as sws_conn_queue_file does a file range: written with
 * splice(2). The pipe stays the caller's and must hold those bytes until
 * they are sent (file_left is 0) or the connection closes. */
void sws_conn_queue_pipe(sws_conn_t *c, int fd, uint64_t len);

/* Give the connection a turn later in this loop iteration (write what was
 * queued, call writable if asked): for a producer that wrote to one of its
 * streams from another watcher's callback (an upstream's bytes arrived).
 * Nothing when it is running now (its turn writes anyway) or closed. */
void sws_conn_wake(sws_conn_t *c);

/* Protocol switch (an HTTP/1 Upgrade answered 101, worker/tunnel.h): the
 * connection's bytes belong to ops from now on, with state as its
 * proto_state (the new protocol's memory: its close frees it). Asked from
 * inside the connection's turn (the protocol's own call), it takes effect
 * when that call returns, so the old protocol never finds the new state
 * in proto_state; the new protocol's on_input then sees the bytes still
 * unparsed, rbuf[rpos, rend). Otherwise ops->init runs now and a turn
 * follows later in this loop iteration. The first protocol's state stays
 * as it was, untouched, until the connection closes: then ops->close
 * runs, the set's protocol is back, and its own close releases what it
 * held (the exchange that asked for the switch, logged then). Memory the
 * connection keeps for reuse is the set's protocol's only. */
void sws_conn_switch_proto(sws_conn_t *c, const sws_proto_ops_t *ops, void *state);

/* Shut down writing once the queued output is written (a tunnel passes
 * on its peer's half-close); reading goes on. */
void sws_conn_shutdown_write(sws_conn_t *c);

/* Parsing of further requests must wait for the output to drain. */
static inline int sws_conn_output_blocked(const sws_conn_t *c)
{
    return c->file_left > 0 || c->olen - c->osent >= SWS_CONN_OUT_HWM;
}

/* Bytes that may still go into the output before it blocks; 0 when it is
 * blocked. What a producer reads at most, so the mark holds. */
static inline size_t sws_conn_out_room(const sws_conn_t *c)
{
    return sws_conn_output_blocked(c) ? 0 : SWS_CONN_OUT_HWM - (c->olen - c->osent);
}

#endif
