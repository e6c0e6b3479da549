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
#include "worker/proto.h"
#include "worker/request.h"

enum sws_http1_state {
    SWS_H1_IDLE = 0, /* between requests: no byte of the next one parsed */
    SWS_H1_HEAD,     /* request line and headers in progress */
    SWS_H1_BODY,     /* head accepted; body (and trailers) in progress */
    SWS_H1_DEAD,     /* a request was rejected: nothing more is parsed */
};

typedef struct sws_http1 {
    llhttp_t parser;
    uint8_t state;          /* enum sws_http1_state */
    uint8_t chunked;
    uint8_t line_done;      /* the request line is complete */
    uint8_t frame;          /* chunk framing: where our own scan stands (http1.c) */
    uint16_t reject;        /* status chosen by a callback that failed */
    const char *reject_why; /* for the log line */
    uint32_t head_len;      /* bytes of the accepted head at rbuf + msg_start */
    uint32_t trailer_bytes;
    uint64_t framing_bytes; /* chunk sizes, extensions, CRLFs, trailers */
    uint64_t chunk_left;    /* chunk framing: size, then data bytes still due */
    const char *gap;        /* chunk framing not yet scanned starts here */
} sws_http1_t;

/* HTTP/1.x as a protocol of worker/proto.h: what a connection set that
 * serves HTTP/1 is initialised with. Its operations, each a static
 * function of http1.c reached only through this table:
 *   init          start HTTP/1 on a fresh connection;
 *   on_input      parse rbuf[rpos, rend), answering each complete request
 *                 through the set's handler; returns when the input is used
 *                 up, the output is above its high-water mark, the
 *                 connection is to close, or a request was rejected (then
 *                 the rejection is queued);
 *   fail          answer status (408 on a timeout) with Connection: close
 *                 and stop parsing;
 *   write_head    the status line and headers: Date, Server,
 *                 Content-Length (when with_length), Connection, extra;
 *                 reserves body_room more bytes after the head so the body
 *                 follows without another allocation;
 *   response_end  keep the connection for the next request, or close it
 *                 after the output. */
extern const sws_proto_ops_t sws_http1_proto;

#endif
