/*
 * HTTP/1.x on a connection: llhttp glue, limits, anti-smuggling rules and
 * response serialization.
 *
 * llhttp 8.1 runs with no lenient flag. It pauses twice per request: at the
 * end of the head (so the head is checked as a whole before any body byte
 * is accepted) and at the end of the message (so the handler runs outside
 * llhttp's callbacks and the next pipelined request is parsed only when
 * the output has room). Where llhttp 8.1 is lenient by itself (bare LF or
 * bare CR as a line end, obs-fold, field names that are not tokens,
 * Transfer-Encoding on HTTP/1.0 or with codings before chunked) the checks
 * here reject the request. It also skips bytes of the chunked framing
 * without looking at them (the two after chunk data, the one after a CR),
 * so every framing byte, from the first chunk size to the end of the
 * trailers, goes through our own scan of the chunked grammar
 * (RFC 9112 7.1, without whitespace in chunk extensions, as llhttp).
 *
 * A rejected request gets its 4xx/5xx with Connection: close, parsing stops
 * for good, and the connection is shut down once the answer is written: no
 * byte after a rejected request is ever interpreted.
 *
 * All functions run in the worker that owns the connection.
 */
#ifndef SWS_WORKER_HTTP1_H
#define SWS_WORKER_HTTP1_H

#include <stddef.h>
#include <stdint.h>

#include "llhttp.h"
#include "worker/conn.h"
#include "worker/proto.h"
#include "worker/stream.h"

enum sws_http1_state {
    SWS_H1_IDLE = 0, /* between requests: no byte of the next one parsed */
    SWS_H1_HEAD,     /* request line and headers in progress */
    SWS_H1_BODY,     /* head accepted; body (and trailers) in progress */
    SWS_H1_RESPONSE, /* the request is in; its response is produced or sent */
    SWS_H1_DEAD,     /* a request was rejected: nothing more is parsed */
};

typedef struct sws_http1 {
    llhttp_t parser;
    uint8_t state;          /* enum sws_http1_state */
    uint8_t chunked;
    uint8_t frame;          /* chunk framing: where our own scan stands (http1.c) */
    uint8_t early;          /* the head handler answered (or will): the body goes
                             * to the stream's consumer, handler is not called */
    uint8_t over_headers;   /* a field beyond max_headers began (refused at its ':') */
    uint8_t nameless;       /* a field value without a name began */
    uint16_t reject;        /* status chosen by a callback that failed */
    const char *reject_why; /* for the log line */
    uint32_t head_len;      /* bytes of the accepted head at rbuf + msg_start */
    uint32_t trailer_bytes; /* trailer-line bytes scanned (scan_framing) */
    uint64_t framing_bytes; /* chunk sizes, extensions, CRLFs, trailers */
    uint64_t chunk_left;    /* chunk framing: size, then data bytes still due */
    const char *gap;        /* chunk framing not yet scanned starts here */
    uint8_t client_closes;  /* the request asked to end the connection
                             * (Connection: close, HTTP/1.0 without keep-alive) */

    /* The response in progress (worker/http1_out.c). */
    uint8_t out_chunked;    /* its body goes in chunks (length unknown) */
    uint64_t head_pos;      /* output position (bytes_out + queued) of its head */

    /* The one exchange at a time: HTTP/1 answers in order, so a connection
     * reuses one stream. Last: init resets everything before it. */
    sws_stream_t stream;
} sws_http1_t;

/* The HTTP/1 state of connection c (its proto_state). */
static inline sws_http1_t *sws_http1_of(const sws_conn_t *c)
{
    return c->proto_state;
}

/* HTTP/1.x as a protocol of worker/proto.h: what a connection set that
 * serves HTTP/1 is initialised with. Its operations, each a static
 * function of http1.c reached only through this table:
 *   setup/init    a stream for the connection; parsing from the start;
 *   on_input      parse rbuf[rpos, rend), handing each complete request to
 *                 the set's handler; returns when the input is used up, a
 *                 response is still in progress, the output is above its
 *                 high-water mark, the connection is to close, or a
 *                 request was rejected (then the rejection is queued);
 *   writable      push more of the response in progress; release its
 *                 stream once all of it is queued and its file range sent,
 *                 then go on with the next request (or close);
 *   fail          answer status (408 on a timeout) with Connection: close
 *                 and stop parsing;
 *   close         release the stream of a response cut short. */
extern const sws_proto_ops_t sws_http1_proto;

/* The serialization of a stream's response (worker/http1_out.c), used by
 * http1.c only: status line and fields (Date, Server, Content-Length or
 * chunked, Connection added), body with or without chunks, trailers. */
extern const sws_stream_sink_t sws_http1_sink;

#endif
