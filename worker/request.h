/*
 * The request as handlers see it.
 *
 * A request is the first member of its stream (worker/stream.h), which
 * the protocol owns; handlers answer through the stream's producer API.
 * The HTTP/1 layer (worker/http1.c) fills it; later the HTTP/2 layer fills
 * the same struct, so handlers never know which protocol carried it. All
 * sws_str_t slices point into the connection's read buffer (the normalized
 * path may point into the stream's path buffer) and stay valid until the
 * stream is released. target is what the client sent, for the logs.
 *
 * Handlers (respond, static, redirect, proxy) run when the request is
 * complete (its body, if any, has been read and discarded: local actions
 * ignore request bodies), except that the set's head handler
 * (worker/conn.h) sees a request with a body when its head is complete,
 * so that the proxy streams the body (sws_stream_set_body).
 */
#ifndef SWS_WORKER_REQUEST_H
#define SWS_WORKER_REQUEST_H

#include <stdint.h>
#include <sys/types.h>

#include "core/str.h"
#include "shm/table.h"

typedef struct sws_conn sws_conn_t;

typedef struct sws_header {
    sws_str_t name;
    sws_str_t value;
} sws_header_t;

#define SWS_REQUEST_MAX_HEADERS 128 /* hard cap; settings may set less */

#define SWS_REQUEST_UPSTREAM_TEXT 160

typedef struct sws_request_upstream {
    char addr[SWS_REQUEST_UPSTREAM_TEXT];   /* "127.0.0.1:8081, 127.0.0.1:8082" */
    char status[SWS_REQUEST_UPSTREAM_TEXT]; /* "502, 200"; "-": no status came */
    char ms[SWS_REQUEST_UPSTREAM_TEXT];     /* "3, 12": each attempt's milliseconds */
} sws_request_upstream_t;

typedef struct sws_request {
    sws_conn_t *conn;               /* owner */
    const sws_table_t *table;       /* the generation this request was routed in */
    const sws_route_t *route;       /* NULL: no route (404) */
    uint64_t routed_gen;            /* the generation route was looked up in; 0: not
                                     * routed yet (worker/handlers.h: once) */
    const sws_settings_t *settings;

    sws_str_t method;               /* "GET" */
    uint8_t method_id;              /* llhttp_method_t */
    uint8_t version_major;
    uint8_t version_minor;
    uint8_t is_head;
    uint8_t keep_alive;             /* the protocol's decision; an action may clear it */
    uint8_t tls;                    /* arrived over TLS (roadmap 3): https_redirect skips it */

    sws_str_t target;               /* the raw request-target */
    sws_str_t path;                 /* target before '?'; normal form (core/path.h) from
                                     * dispatch on: what routes and actions see */
    sws_str_t query;                /* after '?', without it; len 0 when none */
    sws_str_t host;                 /* Host header value as received; len 0 when none */

    sws_header_t headers[SWS_REQUEST_MAX_HEADERS];
    unsigned nheaders;
    /* The request's trailers (HTTP/2 only; HTTP/1 drops them), after the
     * head's fields: headers[nheaders .. nheaders + ntrailers), sharing
     * the array's bound. Complete when the body consumer's end() or the
     * handler of a request with a body is called. */
    unsigned ntrailers;

    /* The body's framing, as the protocol checked it (HTTP/1: a single
     * chunked Transfer-Encoding, or one valid Content-Length). */
    uint8_t body_chunked;           /* chunked: its length is unknown */
    uint64_t body_length;           /* Content-Length; 0 when chunked or none */

    uint64_t start_ms;              /* loop time when the first byte arrived */

    /* Filled by the stream, read by the access log. */
    unsigned status;
    uint64_t body_bytes;            /* body bytes of the response (0 for HEAD) */
    uint64_t request_body_bytes;
    /* Filled by the proxy, read by the access log: one entry per attempt,
     * joined by ", " as nginx's $upstream_addr, $upstream_status and
     * $upstream_response_time; "" when the request was not proxied. */
    sws_request_upstream_t upstream;
} sws_request_t;

/* The first header named `name` (ASCII case-insensitive), or NULL. */
const sws_str_t *sws_request_header(const sws_request_t *r, const char *name);

/* The reason phrase for status ("Not Found"); "Unknown" for others. At
 * most SWS_HTTP_REASON_MAX bytes ("Network Authentication Required"). */
#define SWS_HTTP_REASON_MAX 31
const char *sws_http_reason(unsigned status);

#endif
