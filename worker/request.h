/*
 * The request as handlers see it, and the response API they answer with.
 *
 * A request belongs to its connection (sws_conn_t, worker/conn.h). The HTTP/1
 * layer (worker/http1.c) fills it; later the HTTP/2 layer fills the same
 * struct, so handlers never know which protocol carried it. All sws_str_t
 * slices point into the connection's read buffer (the normalized path may
 * point into the connection's path buffer) and stay valid until the
 * handler returns. target is what the client sent, for the logs.
 *
 * Handlers (respond, static, redirect; proxy later) run synchronously when
 * the request is complete (its body, if any, has been read and discarded:
 * local actions ignore request bodies). A handler answers exactly once with
 * one of sws_response_send(), sws_response_sendfile() or
 * sws_response_error(); the HTTP layer adds the status line, Date, Server,
 * Content-Length and Connection, writes the bytes (batched with the other
 * responses of a pipeline), and logs the request.
 *
 * Extra header lines are complete "Name: value\r\n" lines; the bytes are
 * copied before the call returns, so a handler may build them on its stack.
 * HEAD: the HTTP layer omits the body and keeps Content-Length. 204 and 304
 * get neither body nor Content-Length. A handler cannot answer 1xx (the HTTP
 * layer sends 100 Continue itself): a 1xx from a handler becomes a 500.
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

typedef struct sws_request {
    sws_conn_t *conn;               /* owner */
    const sws_table_t *table;       /* the generation this request was routed in */
    const sws_route_t *route;       /* NULL: no route (404) */
    const sws_settings_t *settings;

    sws_str_t method;               /* "GET" */
    uint8_t method_id;              /* llhttp_method_t */
    uint8_t version_major;
    uint8_t version_minor;
    uint8_t is_head;
    uint8_t keep_alive;             /* the HTTP layer's decision; sws_response_close() clears it */
    uint8_t tls;                    /* arrived over TLS (roadmap 3): https_redirect skips it */

    sws_str_t target;               /* the raw request-target */
    sws_str_t path;                 /* target before '?'; normal form (core/path.h) from
                                     * dispatch on: what routes and actions see */
    sws_str_t query;                /* after '?', without it; len 0 when none */
    sws_str_t host;                 /* Host header value as received; len 0 when none */

    sws_header_t headers[SWS_REQUEST_MAX_HEADERS];
    unsigned nheaders;

    uint64_t start_ms;              /* loop time when the first byte arrived */

    /* Filled by the response functions, read by the access log. */
    unsigned status;
    uint64_t body_bytes;            /* body bytes of the response (0 for HEAD) */
    uint64_t request_body_bytes;
} sws_request_t;

/* The first header named `name` (ASCII case-insensitive), or NULL. */
const sws_str_t *sws_request_header(const sws_request_t *r, const char *name);

/* A complete response from memory; body is copied. */
void sws_response_send(sws_request_t *r, unsigned status, const char *extra, size_t extra_len,
                       const void *body, size_t body_len);

/* A response whose body is len bytes of fd from offset, sent with
 * sendfile(2). The connection takes ownership of fd and closes it when the
 * body is sent or the connection dies (also for HEAD, at once). */
void sws_response_sendfile(sws_request_t *r, unsigned status, const char *extra,
                           size_t extra_len, int fd, off_t offset, uint64_t len);

/* A short HTML error page for status (400, 403, 404, 405, 408, 413, 414,
 * 416, 431, 500, 505, ...). */
void sws_response_error(sws_request_t *r, unsigned status);

/* Close the connection after this response (Connection: close). */
void sws_response_close(sws_request_t *r);

/* The reason phrase for status ("Not Found"); "Unknown" for others. At
 * most SWS_HTTP_REASON_MAX bytes ("Network Authentication Required"). */
#define SWS_HTTP_REASON_MAX 31
const char *sws_http_reason(unsigned status);

#endif
