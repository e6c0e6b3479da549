/*
 * A stream: one request/response exchange, whatever the protocol carrying
 * it (ADR 0008).
 *
 * Three parties meet here:
 *   - the protocol (worker/http1.c today, HTTP/2 next) owns the stream's
 *     memory. It starts a stream when a request begins (sws_stream_start),
 *     fills st->req, hands the complete request to the handler, and
 *     releases the stream (sws_stream_release) when it is done with it:
 *     the whole response is written to the connection, or the connection
 *     is gone. HTTP/1 keeps one stream per connection and reuses it;
 *     HTTP/2 will keep one per open stream id, many per connection;
 *   - the action (respond, static, redirect; later proxy and cache), the
 *     producer, answers through the producer API below: a head (status
 *     and name/value fields), a body (bytes or a file range), trailers and
 *     an end. It never writes a protocol byte: no status line, no framing,
 *     no Date, Server or Connection field;
 *   - the sink (sws_stream_sink_t), the protocol's half that turns the
 *     response into bytes on the connection: HTTP/1 serializes it, HTTP/2
 *     will map it to frames.
 *
 * Backpressure. The sink takes what it has room for and says how much it
 * took; the stream keeps the rest (bytes are copied into the stream's own
 * buffer, a file range stays a range: never read into memory) and pushes
 * it when the sink calls sws_stream_resume(). A producer that makes its
 * body piece by piece (the proxy, relaying an upstream) sets a source
 * (sws_stream_set_source): it writes while sws_stream_blocked() is false,
 * then returns; the stream calls its proceed() once everything it holds
 * went to the sink, so the body moves at the client's pace through a
 * bounded buffer. Actions that have their whole body at once (a respond
 * body, a file) give it in one call and end: the stream paces it.
 *
 * Ownership. A file descriptor given to sws_stream_send_file belongs to
 * the stream from that call on (also when the call fails) and is closed
 * when the stream is released: the sink may use it until then. Bytes given
 * to sws_stream_write and fields given to sws_stream_head or
 * sws_stream_end are copied before the call returns, so a producer may
 * build them on its stack. The request's slices point into the
 * connection's input, which the protocol keeps until the release; the
 * table generation the request was routed in (st->req.table) is only
 * guaranteed during the handler's call: a producer that outlives it copies
 * what it needs.
 *
 * Accounting. A stream that answered is counted and written to the access
 * log once, in sws_stream_release, whichever protocol carried it, whether
 * it ended or was cut short; one whose source had not answered yet when
 * it was released (the client closed first) is logged with status 499,
 * after the source's dispose (which may fill its upstream fields).
 *
 * Everything runs in the worker that owns the connection.
 */
#ifndef SWS_WORKER_STREAM_H
#define SWS_WORKER_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/proto.h"
#include "worker/request.h"

typedef struct sws_stream sws_stream_t;

/* The body length of a response whose end is not known in advance (the
 * sink frames it: HTTP/1.1 chunked, HTTP/1.0 by closing, HTTP/2 by
 * END_STREAM). */
#define SWS_STREAM_LENGTH_UNKNOWN UINT64_MAX

/* The status logged for a request whose client closed before a producer
 * still at work answered (nginx's "client closed request"): never sent. */
#define SWS_STATUS_CLIENT_CLOSED 499u

/* The protocol's side. Each operation gets a stream that is started and
 * not released, from the stream code only, in the worker's thread. */
typedef struct sws_stream_sink {
    /* Serialize the head: st->req.status, the fields h[0..n) and what the
     * protocol owns (Date, Server, framing, Connection); st->length is the
     * body length or SWS_STREAM_LENGTH_UNKNOWN (a 204, a 304 and a HEAD's
     * answer carry no body whatever it says). body_room: bytes the
     * producer is about to write, a hint for one reservation. 0, or -1
     * when out of memory (nothing written). */
    int (*head)(sws_stream_t *st, const sws_header_t *h, unsigned n, size_t body_room);
    /* Take up to n body bytes; how many were taken (copied or sent). Fewer
     * than n: the sink is full and calls sws_stream_resume() once it has
     * room again. */
    size_t (*data)(sws_stream_t *st, const char *p, size_t n);
    /* How many body bytes data() would take now without the stream
     * keeping any (0: none until sws_stream_resume()). Optional: a
     * producer that sizes its reads by it (the proxy) never has its bytes
     * copied twice. */
    size_t (*room)(const sws_stream_t *st);
    /* Take up to len body bytes of fd from off (the fd stays the stream's
     * and valid until the release); how many, as for data, or -1 when
     * they could not be read (errno set; nothing of them taken). */
    int64_t (*file)(sws_stream_t *st, int fd, off_t off, uint64_t len);
    /* Take all len body bytes waiting in a pipe (fd: its read end, the
     * producer's), or none (0: resume comes). The sink moves them out of
     * the pipe before it calls sws_stream_resume() again. Optional: a sink
     * without it cannot carry a body by splice (sws_stream_can_pipe). */
    int64_t (*pipe)(sws_stream_t *st, int fd, uint64_t len);
    /* The body is complete; trailers t[0..n) (n may be 0; a sink that
     * cannot carry them drops them). 1: taken; 0: no room now (resume
     * comes); -1: out of memory. */
    int (*end)(sws_stream_t *st, const sws_header_t *t, unsigned n);
    /* Take back the head, which nothing of the body followed yet, so that
     * another answer replaces it (a file that cannot be read after its
     * head was written). 0, or -1 when the head already left. */
    int (*retract)(sws_stream_t *st);
    /* An interim (1xx) head now, before the final one: status, the fields
     * h[0..n) (and, for 101, what the protocol needs to switch: HTTP/1
     * adds Connection: upgrade). 0, or -1 when out of memory. */
    int (*interim)(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n);
    /* After a 101 went out through interim: the exchange becomes a
     * two-way byte tunnel, run by ops/state (worker/proto.h); HTTP/1
     * hands its connection over (sws_conn_switch_proto). The stream stays
     * open until the connection closes, and is released (logged) then.
     * 0, or -1 when the protocol cannot hand over (HTTP/2 will tunnel in
     * a stream instead: RFC 8441). */
    int (*upgrade)(sws_stream_t *st, const sws_proto_ops_t *ops, void *state);
    /* The response cannot be completed (out of memory, an unreadable
     * body): end the exchange abnormally, so that the client sees it was
     * cut (HTTP/1: close the connection after what is queued). The stream
     * is released by the protocol as usual. */
    void (*abort)(sws_stream_t *st);
} sws_stream_sink_t;

/* A producer that makes its body piece by piece. */
typedef struct sws_stream_source {
    /* Everything written so far went to the sink: write more (while
     * sws_stream_blocked() is false) or end. */
    void (*proceed)(sws_stream_t *st);
    /* The stream is released (finished, or cut short): drop what the
     * producer holds for it. Called before the access log line is
     * written, so it may still fill st->req's upstream fields. Optional. */
    void (*dispose)(sws_stream_t *st);
} sws_stream_source_t;

/* The consumer of a request's body (the proxy), set by a handler the
 * protocol called when the request head was complete (the set's
 * head_handler, worker/conn.h), before any body byte was read. Without
 * one the protocol reads the body and drops it, as local actions want. */
typedef struct sws_stream_body_ops {
    /* n body bytes, in order; copied before the call returns. Returns 1
     * when the consumer holds enough: the protocol stops reading the
     * client until sws_stream_body_resume() (and runs no body timer
     * meanwhile: the wait is the consumer's), else 0. Whatever it
     * answers, the consumer calls sws_stream_body_resume() each time it
     * has passed on all the bytes it holds: HTTP/2 counts them against
     * its connection's budget until then (ADR 0035). */
    int (*data)(sws_stream_t *st, const char *p, size_t n);
    /* The body is complete; its trailers, if any, are in st->req
     * (ntrailers: HTTP/2 keeps them, HTTP/1 drops them). */
    void (*end)(sws_stream_t *st);
} sws_stream_body_ops_t;

enum sws_stream_phase {
    SWS_STREAM_IDLE = 0,  /* released, or never started */
    SWS_STREAM_REQUEST,   /* started: the request is being read */
    SWS_STREAM_RESPONSE,  /* the head went to the sink */
    SWS_STREAM_ENDED,     /* the end went to the sink: nothing more to push */
};

struct sws_stream {
    sws_request_t req;                 /* what handlers see */
    const sws_stream_sink_t *sink;
    const sws_stream_source_t *source; /* NULL: the producer gave all it has */
    void *source_data;                 /* the producer's, for its callbacks */
    const sws_stream_body_ops_t *body; /* NULL: the request body is dropped */
    uint8_t body_full;                 /* body->data said so: no reading until resumed */
    /* The client waits for 100 Continue before it sends its body. The
     * protocol sets it when the head is complete; the head handler that
     * takes the body may forward the expectation and relay the upstream's
     * own 100 (sws_stream_interim clears it); when it is still set after
     * the head handler, the protocol answers 100 itself. */
    uint8_t expect_continue;

    uint8_t phase;                     /* enum sws_stream_phase */
    uint8_t no_body;                   /* HEAD, 204, 304: body bytes are dropped */
    uint8_t end_asked;                 /* the producer ended; the end waits behind the body */
    uint8_t aborted;
    uint64_t length;                   /* announced body length, or ..._UNKNOWN */
    uint64_t given;                    /* body bytes the producer gave */

    /* What the sink has not taken yet, in order: bytes, then a file range,
     * then the end with its trailers (copied into trailer_mem). */
    char *pend;
    size_t pend_off, pend_len, pend_cap;
    int file_fd;                       /* -1: none; the stream's until release */
    off_t file_off;
    uint64_t file_left;
    int pipe_fd;                       /* the producer's pipe, not the stream's */
    uint64_t pipe_left;                /* of its bytes, not taken by the sink yet */
    uint8_t pipe_given;                /* a pipe range went to the sink in this push */
    sws_header_t *trailers;
    unsigned ntrailers;
    void *trailer_mem;

    /* The normal form of req.path when it differs from what the client
     * sent (core/path.h); kept across the exchanges of a reused stream. */
    char *path_buf;
    size_t path_cap;
};

/* ---- the protocol's side ---- */

/* A path buffer above this is freed when its connection closes. */
#define SWS_STREAM_PATH_KEEP (4u * 1024)

/* Make st a fresh, idle stream. Once, before its first sws_stream_start
 * (the protocol's per-connection setup). */
void sws_stream_init(sws_stream_t *st);

/* Begin an exchange on c: the request is reset (start_ms now), the
 * response is empty. The stream must be idle. */
void sws_stream_start(sws_stream_t *st, sws_conn_t *c, const sws_stream_sink_t *sink);

/* The sink has room again: push what the stream holds, then let the
 * source produce more. */
void sws_stream_resume(sws_stream_t *st);

/* The sink took the end: the response is complete on the protocol's side
 * (HTTP/1 may still be sending a file range it took). */
static inline int sws_stream_ended(const sws_stream_t *st)
{
    return st->phase == SWS_STREAM_ENDED;
}

/* The protocol is done with the exchange: count it and write its access
 * log line (when it answered), close its file, tell its source, free its
 * body memory. The stream is idle after. Safe on an idle stream. */
void sws_stream_release(sws_stream_t *st);

/* Free what an idle stream keeps between exchanges (the path buffer),
 * or only an unusually large one when trim is set. */
void sws_stream_free(sws_stream_t *st, int trim);

/* ---- the producer's side (actions) ---- */

/* The head: a final status (a 1xx becomes 500: the protocol sends its own
 * interim answers), fields h[0..n) and the body length (or
 * SWS_STREAM_LENGTH_UNKNOWN). Once per stream: a second head is refused
 * and logged. 0, or -1 (nothing sent; after out of memory the stream is
 * aborted). */
int sws_stream_head(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n,
                    uint64_t length);

/* An interim answer (100 Continue, 103 Early Hints) before the head:
 * fields h[0..n) (copied). Any number of them; not 101 (that is
 * sws_stream_upgrade). 0, or -1 (nothing sent). */
int sws_stream_interim(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n);

/* Answer 101 with fields h[0..n) (the upstream's Upgrade among them) and
 * hand the exchange to a tunnel: ops/state become the protocol of the
 * client's side (worker/tunnel.h), state is theirs to free in ops->close.
 * The stream's access log line is written when the tunnel ends, with
 * status 101 and the bytes the tunnel moved (req.body_bytes to the
 * client, req.request_body_bytes from it). 0, or -1 when the protocol
 * cannot switch (nothing handed over: answer an error instead). */
int sws_stream_upgrade(sws_stream_t *st, const sws_header_t *h, unsigned n,
                       const sws_proto_ops_t *ops, void *state);

/* Body bytes, in order, after the head (copied). Dropped for HEAD, 204 and
 * 304; bytes beyond the announced length are refused. 0, or -1 (the
 * stream is aborted). */
int sws_stream_write(sws_stream_t *st, const void *p, size_t n);

/* len body bytes of fd from off, after what was written before; the
 * stream owns fd from now on. 0, or -1 (the stream is aborted). */
int sws_stream_send_file(sws_stream_t *st, int fd, off_t off, uint64_t len);

/* The body is complete; trailers t[0..n) (copied; n may be 0). 0 or -1. */
int sws_stream_end(sws_stream_t *st, const sws_header_t *t, unsigned n);

/* The stream holds body the sink has not taken: a source stops writing
 * and waits for its proceed(). */
static inline int sws_stream_blocked(const sws_stream_t *st)
{
    return st->pend_len > 0 || st->file_left > 0 || st->pipe_left > 0;
}

/* How many body bytes a write would hand to the sink whole now (0 while
 * blocked; SIZE_MAX when the sink does not say): a source reads at most
 * that much, so that nothing it writes is kept by the stream. */
size_t sws_stream_room(const sws_stream_t *st);

/* Whether the body may go by sws_stream_send_pipe: the sink can take a
 * pipe, the body's length was announced (so no framing goes between its
 * bytes), the response has a body and the connection is not TLS (whose
 * records are made in user space). */
int sws_stream_can_pipe(const sws_stream_t *st);

/* len body bytes waiting in a pipe (fd: its read end), after what was
 * written before, only where sws_stream_can_pipe() says so. The pipe stays
 * the producer's; from this call on the producer puts nothing more into
 * it until its source's proceed() (by then the sink emptied it), and
 * keeps it open until the stream is released. 0, or -1 (the stream is
 * aborted). */
int sws_stream_send_pipe(sws_stream_t *st, int fd, uint64_t len);

/* The producer cannot complete the response whose head it gave (its
 * upstream broke mid-body): the sink cuts it (HTTP/1: the connection
 * closes after what is queued, so the client sees a short body). Nothing
 * before a head (answer an error instead) or after the end. */
void sws_stream_abort(sws_stream_t *st);

/* Take the request body (see sws_stream_body_ops_t); from the head
 * handler only. The ops are static, the state is the source's data. */
void sws_stream_set_body(sws_stream_t *st, const sws_stream_body_ops_t *ops);

/* The body consumer has passed on what it holds (it said it was full, or
 * the protocol asked: st->body_full): the protocol reads and hands it
 * more (later in this loop iteration). A no-op when nobody waits. */
void sws_stream_body_resume(sws_stream_t *st);

/* A producer that makes its body piece by piece (see the top). */
void sws_stream_set_source(sws_stream_t *st, const sws_stream_source_t *src, void *data);

/* The protocol refuses a request whose producer took it but has not
 * answered yet (HTTP/2: a body over max_body_size while the proxy relays
 * it): the source is disposed of (the proxy drops its upstream) and
 * forgotten with the body consumer, so that an error can answer instead.
 * Nothing once the head went to the sink. */
void sws_stream_drop_source(sws_stream_t *st);

/* Whether the action answered or will (a head, or a source that will). */
static inline int sws_stream_answered(const sws_stream_t *st)
{
    return st->phase >= SWS_STREAM_RESPONSE || st->source != NULL;
}

/* A whole response from memory: head, body (copied), end. */
void sws_stream_respond(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n,
                        const void *body, size_t len);

/* A whole response whose body is len bytes of fd from off (the stream
 * takes fd, also for HEAD, 304 or a failure). A file that cannot be read
 * turns into a 500 while its head can still be taken back. */
void sws_stream_respond_file(sws_stream_t *st, unsigned status, const sws_header_t *h,
                             unsigned n, int fd, off_t off, uint64_t len);

/* A short HTML error page for status; the statuses after which the
 * connection cannot be trusted to be in sync (400, 408, 413, 414, 417,
 * 431, 505) close it after the answer. */
void sws_stream_error(sws_stream_t *st, unsigned status);

#endif
