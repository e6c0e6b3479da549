/*
 * The interface between a connection (worker/conn.c) and the protocol that
 * runs on it (worker/http1.c today, HTTP/2 next); ADR 0007, and ADR 0008
 * for the streams a protocol carries.
 *
 * conn.c owns the socket, the read and output buffers, the file range being
 * sent and the one timer; it knows no protocol. It keeps state_size bytes
 * for the protocol with each connection (c->proto_state, allocated and
 * freed with the connection, reused with it) and calls the protocol
 * through these operations, always from the worker's thread:
 *   - setup (optional): once, when the connection's memory is allocated (make the
 *     state valid; destroy frees what setup or later calls allocated);
 *   - init: when a connection opens on that memory (a fresh exchange);
 *   - on_input: the bytes rbuf[rpos, rend) are new; parse and answer what is
 *     complete, advancing rpos and appending to the output. Stop early when
 *     sws_conn_output_blocked() says so: conn.c calls again once it drained;
 *   - writable: the output drained below its high-water mark (and no file
 *     range is pending) after the protocol asked with c->want_writable:
 *     push more of the responses in progress, finish those that are sent;
 *   - fail: conn.c gives up on the input (408 on a timeout, 431 when a head
 *     does not fit the read buffer): queue that answer with Connection:
 *     close and parse nothing more;
 *   - waiting_for: what the protocol waits for now, so that conn.c arms the
 *     matching timer and knows an idle connection (which a graceful stop
 *     may close at once);
 *   - input_moved (optional: a protocol that keeps nothing pointing into
 *     the read buffer needs none): the read buffer's bytes moved (compaction drops
 *     rbuf[0, shift) and moves the rest to the front; growth moves them to
 *     new memory): the protocol re-points what it keeps into them, with
 *     sws_proto_slice_move();
 *   - close: the connection is closing (its fd is already closed): release
 *     every stream still open (each is logged as cut short) and trim the
 *     state's memory for reuse;
 *   - destroy (optional): the connection's memory is freed: free what the state holds;
 *   - client_gone (optional): the client closed its side (a FIN or a reset
 *     seen, also while its input is paused) while waiting_for says
 *     WAIT_RESPONSE. 1 when the protocol gives the exchange up (a producer
 *     that waits on someone else, as the proxy on its member, is
 *     cancelled: nginx's proxy_ignore_client_abort off); conn.c then
 *     closes the connection at once (close releases the stream, logged
 *     499 when nothing was answered). 0: the response goes on (a local
 *     answer being sent is finished, as before).
 *   - drain (optional): a graceful stop began (c->set->draining; called
 *     for every connection, idle or not), or an idle connection's
 *     keep-alive timer ended: a protocol that can tell its client so
 *     (HTTP/2's GOAWAY) does, lets the exchanges in flight finish and
 *     sets close_after once none is left. Without it an idle connection
 *     is closed at once.
 * A protocol never closes the fd or frees the connection itself: it sets
 * close_after (or calls sws_conn_close on a fatal error) and returns; with
 * it input_over when the client said it sends nothing more and all it sent
 * was read, so that conn.c closes without a lingering read (ADR 0057).
 */
#ifndef SWS_WORKER_PROTO_H
#define SWS_WORKER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

typedef struct sws_conn sws_conn_t;

enum sws_proto_wait {
    SWS_PROTO_WAIT_IDLE = 0, /* between requests: nothing of the next one yet */
    SWS_PROTO_WAIT_HEAD,     /* a request head is in progress */
    SWS_PROTO_WAIT_BODY,     /* a request body is in progress */
    SWS_PROTO_WAIT_RESPONSE, /* a request is in; its response is being produced */
    SWS_PROTO_WAIT_NOTHING,  /* parsing stopped for good (a rejected request) */
    /* A response waits for the client's flow-control window (HTTP/2): the
     * body timer runs from when the wait began and no input moves it (a
     * PING is no progress); at its end fail(408) cuts what stalled. */
    SWS_PROTO_WAIT_WINDOW,
};

typedef struct sws_proto_ops {
    size_t state_size; /* bytes of per-connection state (c->proto_state) */
    void (*setup)(sws_conn_t *c);
    void (*init)(sws_conn_t *c);
    void (*on_input)(sws_conn_t *c);
    void (*writable)(sws_conn_t *c);
    void (*fail)(sws_conn_t *c, unsigned status, const char *why);
    enum sws_proto_wait (*waiting_for)(const sws_conn_t *c);
    void (*input_moved)(sws_conn_t *c, uintptr_t old_base, size_t old_cap, const char *new_base,
                        size_t shift);
    void (*close)(sws_conn_t *c);
    void (*destroy)(sws_conn_t *c);
    int (*client_gone)(sws_conn_t *c);
    void (*drain)(sws_conn_t *c);
} sws_proto_ops_t;

/* Re-point a slice into the read buffer after its bytes moved (see
 * input_moved). Offsets are computed as integers so no pointer into freed
 * memory is ever compared; a slice into the dropped bytes is emptied
 * rather than pointed before the buffer; a slice elsewhere is left alone. */
static inline void sws_proto_slice_move(sws_str_t *s, uintptr_t old_base, size_t old_cap,
                                        const char *new_base, size_t shift)
{
    uintptr_t off = (uintptr_t)s->p - old_base;
    if (s->p == NULL || off > old_cap)
        return;
    if (off < shift)
        *s = SWS_STR("");
    else
        s->p = new_base + (off - shift);
}

#endif
