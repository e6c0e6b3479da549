/*
 * A byte tunnel between a client connection and an upstream connection,
 * after the upstream answered 101 Switching Protocols to a request that
 * asked for an upgrade (WebSocket, or any other Upgrade): ADR 0020.
 *
 * Take-over. The proxy (worker/proxy.c) makes the tunnel with the
 * upstream connection it holds (sws_tunnel_new: the tunnel owns it from
 * then on) and hands it to sws_stream_upgrade(), which sends the 101 and
 * has the protocol switch the client connection to sws_tunnel_proto
 * (sws_conn_switch_proto, worker/conn.h). HTTP/1's state, with the stream
 * and the request head its slices point into, waits untouched until the
 * connection closes; the stream is released (its one access log line:
 * status 101, req.body_bytes the bytes sent to the client,
 * req.request_body_bytes those received from it) when the tunnel ends.
 *
 * I/O. The client's side keeps conn.c's output: upstream bytes are read
 * straight into the connection's output buffer (so the 101 goes first and
 * conn.c's send timer and write budget apply), and the tunnel stops
 * reading the upstream while that output is above its high-water mark
 * (sws_conn_output_blocked), until conn.c calls writable. The client's
 * input is the tunnel's: it keeps input_paused set so that conn.c reads
 * nothing into the read buffer (the request head stays there for the log)
 * and reads the socket itself into one SWS_TUNNEL_BUF buffer, which it
 * does not refill while the upstream has not taken all of it. So a
 * tunnel holds at most SWS_TUNNEL_BUF bytes one way and the output's
 * high-water mark (SWS_CONN_OUT_HWM: a read takes no more than the room
 * below it) the other way, whatever the speeds; TCP stops the faster
 * side.
 *
 * Ends. A FIN on one side is passed on to the other once the bytes before
 * it are written (shutdown(SHUT_WR)); when both sides have sent theirs
 * the tunnel ends. A reset, an error, or the timer end it at once.
 * Idle: no byte either way for the pool's timeouts.idle (the upstream
 * connection's SWS_UPSTREAM_T_IDLE timer, re-armed on each move; at its
 * expiry, bytes the peers took from the socket buffers since the last
 * one count as moves too: SIOCOUTQ, ADR 0027); once one side's FIN was
 * passed on, the pool's timeouts.read (SWS_UPSTREAM_T_READ) instead. Ending
 * closes the client connection (after its queued output) and with it the
 * upstream connection: a tunnelled connection never goes back to the
 * keep-alive pool. A graceful stop leaves tunnels open until its drain
 * timeout closes every connection.
 *
 * Everything runs in the worker that owns both connections.
 */
#ifndef SWS_WORKER_TUNNEL_H
#define SWS_WORKER_TUNNEL_H

#include <stddef.h>
#include <stdint.h>

#include "worker/proto.h"
#include "worker/stream.h"
#include "worker/upstream_conn.h"

#define SWS_TUNNEL_BUF (16u * 1024)  /* client -> upstream bytes held */
#define SWS_TUNNEL_READS_PER_RUN 16u /* reads each way per turn before others get one */

typedef struct sws_tunnel sws_tunnel_t;

/* One direction of bytes from a socket to another through a bounded
 * buffer: what sws_tunnel_pump moves. */
typedef struct sws_tunnel_half {
    char *buf;          /* SWS_TUNNEL_BUF bytes, the holder's */
    const char *out;    /* out[0, len) is still to write (into buf, or borrowed) */
    size_t len;
    uint64_t moved;     /* bytes written, ever */
    uint8_t readable;   /* the source may have bytes (cleared on EAGAIN or a short read) */
    uint8_t hup;        /* the source's peer shut down: read on to its EOF */
    uint8_t eof;        /* the source sent its FIN */
    uint8_t shut;       /* ... and it was passed on: the destination's write side is shut */
    sws_upstream_conn_t *to_u; /* set: `to` is its socket, written through it (TLS, ADR 0030) */
} sws_tunnel_half_t;

enum sws_tunnel_pump_result {
    SWS_TUNNEL_WAIT = 0, /* blocked: the source has nothing, or the destination is full */
    SWS_TUNNEL_MORE,     /* stopped after reads reads: more may be waiting */
    SWS_TUNNEL_ERROR,    /* a read or write failed (reset): end the tunnel */
};

/* Move bytes from `from` to `to` (non-blocking sockets): write what is
 * held, read again only once all of it is written (backpressure), at most
 * `reads` reads; pass a FIN on (shutdown(to, SHUT_WR)) once everything
 * before it is written. A read shorter than the buffer drained the socket
 * (edge-triggered: the next bytes bring a new edge), unless hup says a
 * FIN is behind them. *progress is set when a byte moved. A pure
 * function of the sockets and h: any thread (h->to_u set: `to` is written
 * and shut through that upstream connection, TLS or not, its worker's). */
enum sws_tunnel_pump_result sws_tunnel_pump(sws_tunnel_half_t *h, int from, int to,
                                            unsigned reads, int *progress);

/* A tunnel over u (a connected upstream connection the caller holds:
 * the tunnel owns it from now on, also when this fails) for the exchange
 * st; early[0, n) are upstream bytes that came after the 101's head
 * (copied). NULL when out of memory (u closed). */
sws_tunnel_t *sws_tunnel_new(sws_stream_t *st, sws_upstream_conn_t *u, const char *early,
                             size_t n);

/* Free a tunnel that sws_stream_upgrade() did not take (its upstream
 * connection closed). */
void sws_tunnel_free(sws_tunnel_t *t);

/* The client connection's protocol once switched (sws_conn_switch_proto,
 * with the tunnel as its state): init starts relaying, on_input and
 * writable relay, close ends the tunnel and frees it. */
extern const sws_proto_ops_t sws_tunnel_proto;

#endif
