/* The stream (worker/stream.h, ADR 0008): the producer API, the pacing of
 * what the sink cannot take yet, and the one place a finished exchange is
 * counted and logged. Knows no protocol: bytes on the wire are the sink's. */
#include "worker/stream.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "worker/access_log.h"
#include "worker/conn.h"

/* A body copy above this is not kept for the next exchange of a reused
 * stream: memory stays flat after one large response to a slow client. */
#define STREAM_PEND_KEEP (64u * 1024)

void sws_stream_init(sws_stream_t *st)
{
    memset(st, 0, sizeof(*st));
    st->file_fd = -1;
    st->pipe_fd = -1;
}

void sws_stream_start(sws_stream_t *st, sws_conn_t *c, const sws_stream_sink_t *sink)
{
    sws_request_t *r = &st->req;
    c->set->inflight++;
    st->sink = sink;
    st->source = NULL;
    st->source_data = NULL;
    st->body = NULL;
    st->body_full = 0;
    st->expect_continue = 0;
    st->phase = SWS_STREAM_REQUEST;
    st->no_body = 0;
    st->end_asked = 0;
    st->aborted = 0;
    st->length = SWS_STREAM_LENGTH_UNKNOWN;
    st->given = 0;
    st->pend_off = st->pend_len = 0;
    st->pipe_given = 0;

    /* Field by field: the header array is large and filled as parsed. */
    r->conn = c;
    r->table = NULL;
    r->route = NULL;
    r->routed_gen = 0;
    r->settings = c->set->settings;
    r->method = SWS_STR("-");
    r->method_id = 0;
    r->version_major = 1;
    r->version_minor = 1;
    r->is_head = 0;
    r->keep_alive = 0;
    r->tls = c->tls;
    r->target = SWS_STR("");
    r->path = SWS_STR("");
    r->query = SWS_STR("");
    r->host = SWS_STR("");
    r->nheaders = 0;
    r->ntrailers = 0;
    r->body_chunked = 0;
    r->body_length = 0;
    r->start_ms = sws_loop_now_ms(c->set->loop);
    r->status = 0;
    r->body_bytes = 0;
    r->request_body_bytes = 0;
    r->upstream.addr[0] = r->upstream.status[0] = r->upstream.ms[0] = '\0';
}

/* Log a producer's misuse of the API once, naming the request. */
static void stream_misuse(const sws_stream_t *st, const char *what)
{
    const sws_request_t *r = &st->req;
    sws_log_error("%.*s %.*s: %s", (int)r->method.len, r->method.p, (int)r->target.len,
                  r->target.p, what);
}

/* The response cannot be completed: the sink cuts it, nothing more is
 * pushed, and the connection is not reused. */
static void stream_abort(sws_stream_t *st)
{
    if (st->aborted)
        return;
    st->aborted = 1;
    st->req.keep_alive = 0;
    st->pend_off = st->pend_len = 0;
    st->file_left = 0;
    st->pipe_left = 0;
    st->phase = SWS_STREAM_ENDED;
    st->sink->abort(st);
}

/* Keep n bytes the sink did not take, after those already kept. */
static int pend_append(sws_stream_t *st, const char *p, size_t n)
{
    if (st->pend_off > 0) {
        memmove(st->pend, st->pend + st->pend_off, st->pend_len);
        st->pend_off = 0;
    }
    if (st->pend_cap - st->pend_len < n) {
        size_t cap = st->pend_cap < 4096 ? 4096 : st->pend_cap;
        while (cap - st->pend_len < n)
            cap *= 2;
        char *q = realloc(st->pend, cap);
        if (q == NULL)
            return -1;
        st->pend = q;
        st->pend_cap = cap;
    }
    memcpy(st->pend + st->pend_len, p, n);
    st->pend_len += n;
    return 0;
}

/* Push what the stream holds, in order: bytes, the file range, the end.
 * 0 (pushed, or the sink is full), -1 when the file could not be read
 * (errno set). A sink never calls back into the stream from an operation,
 * so a push is never re-entered. */
static int stream_push(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    while (st->pend_len > 0) {
        size_t n = st->sink->data(st, st->pend + st->pend_off, st->pend_len);
        if (n == 0)
            return 0;
        r->body_bytes += n;
        st->pend_off += n;
        st->pend_len -= n;
    }
    st->pend_off = 0;
    while (st->file_left > 0) {
        int64_t n = st->sink->file(st, st->file_fd, st->file_off, st->file_left);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        r->body_bytes += (uint64_t)n;
        st->file_off += n;
        st->file_left -= (uint64_t)n;
    }
    if (st->pipe_left > 0) {
        int64_t n = st->sink->pipe(st, st->pipe_fd, st->pipe_left);
        if (n <= 0)
            return 0;
        r->body_bytes += (uint64_t)n;
        st->pipe_left = 0;
        st->pipe_given = 1;
    }
    if (st->end_asked && st->phase == SWS_STREAM_RESPONSE) {
        int rc = st->sink->end(st, st->trailers, st->ntrailers);
        if (rc < 0) {
            sws_log_error("client %s: no memory to end a response", sws_conn_peer_text(r->conn));
            stream_abort(st);
        } else if (rc > 0) {
            st->phase = SWS_STREAM_ENDED;
        }
    }
    return 0;
}

/* The body's file could not be read (err). While nothing of the body went
 * out and the sink can take the head back, the client gets a 500 instead;
 * otherwise the response is cut. 0 when replaced, -1 when cut. */
static int stream_file_failed(sws_stream_t *st, int err)
{
    sws_request_t *r = &st->req;
    sws_log_error("client %s: reading the body of %.*s %.*s: %s", sws_conn_peer_text(r->conn),
                  (int)r->method.len, r->method.p, (int)r->target.len, r->target.p,
                  err != 0 ? strerror(err) : "the file shrank");
    if (r->body_bytes == 0 && st->sink->retract(st) == 0) {
        close(st->file_fd);
        st->file_fd = -1;
        st->file_left = 0;
        st->end_asked = 0;
        st->given = 0;
        st->phase = SWS_STREAM_REQUEST;
        r->status = 0;
        sws_stream_error(st, 500);
        return 0;
    }
    stream_abort(st);
    return -1;
}

/* Push, and answer a failure to read the body. 0, or -1 when the body
 * the producer gave will not be sent (replaced or cut). */
static int stream_flush(sws_stream_t *st)
{
    if (stream_push(st) == 0)
        return st->aborted ? -1 : 0;
    stream_file_failed(st, errno);
    return -1;
}

int sws_stream_interim(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n)
{
    if (status < 100 || status > 199 || status == 101 || st->phase != SWS_STREAM_REQUEST) {
        stream_misuse(st, "an interim answer out of place");
        return -1;
    }
    if (st->sink->interim(st, status, h, n) < 0)
        return -1;
    if (status == 100)
        st->expect_continue = 0; /* the client has its 100: nobody sends another */
    return 0;
}

int sws_stream_upgrade(sws_stream_t *st, const sws_header_t *h, unsigned n,
                       const sws_proto_ops_t *ops, void *state)
{
    if (st->phase != SWS_STREAM_REQUEST) {
        stream_misuse(st, "a 101 after the head");
        return -1;
    }
    if (st->sink->interim(st, 101, h, n) < 0)
        return -1;
    st->req.status = 101;
    st->req.keep_alive = 0;
    /* Never ended: the protocol keeps the exchange open (and does not
     * finish it) until the connection closes. */
    st->phase = SWS_STREAM_RESPONSE;
    if (st->sink->upgrade(st, ops, state) < 0) {
        stream_abort(st);
        return -1;
    }
    return 0;
}

void sws_stream_resume(sws_stream_t *st)
{
    if (st->phase != SWS_STREAM_RESPONSE || st->aborted)
        return;
    st->pipe_given = 0;
    if (stream_flush(st) < 0)
        return;
    /* A pipe range the sink took just now is still in the pipe: the sink
     * resumes again once it emptied it. */
    if (!sws_stream_blocked(st) && !st->pipe_given && !st->end_asked && st->source != NULL)
        st->source->proceed(st);
}

void sws_stream_release(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    if (st->phase == SWS_STREAM_IDLE)
        return;
    r->conn->set->inflight--;
    /* A producer was at work and nothing was answered: the client closed
     * first (nginx's 499, "client closed request"). The source is told
     * before the line is written, so that it can fill the request's
     * upstream fields. */
    if (r->status == 0 && st->source != NULL)
        r->status = SWS_STATUS_CLIENT_CLOSED;
    if (st->source != NULL && st->source->dispose != NULL)
        st->source->dispose(st);
    st->source = NULL;
    if (r->status != 0) {
        sws_conn_t *c = r->conn;
        sws_conn_set_t *s = c->set;
        c->requests++;
        s->counters->requests++;
        if (s->access_log != NULL && s->access_log->fd >= 0)
            sws_access_log_request(s->access_log, r, sws_conn_peer_text(c), s->loop->wall_sec,
                                   sws_loop_now_ms(s->loop) - r->start_ms);
    }
    st->body = NULL;
    st->body_full = 0;
    if (st->file_fd >= 0)
        close(st->file_fd);
    st->file_fd = -1;
    st->file_left = 0;
    st->pipe_fd = -1;
    st->pipe_left = 0;
    st->pend_off = st->pend_len = 0;
    if (st->pend_cap > STREAM_PEND_KEEP) { /* rare: a large body to a slow sink */
        free(st->pend);
        st->pend = NULL;
        st->pend_cap = 0;
    }
    if (st->trailer_mem != NULL) {
        free(st->trailer_mem);
        st->trailer_mem = NULL;
        st->trailers = NULL;
        st->ntrailers = 0;
    }
    st->phase = SWS_STREAM_IDLE;
}

void sws_stream_free(sws_stream_t *st, int trim)
{
    if (!trim || st->path_cap > SWS_STREAM_PATH_KEEP) {
        free(st->path_buf);
        st->path_buf = NULL;
        st->path_cap = 0;
    }
    if (!trim) {
        free(st->pend);
        st->pend = NULL;
        st->pend_cap = 0;
    }
}

size_t sws_stream_room(const sws_stream_t *st)
{
    if (sws_stream_blocked(st))
        return 0;
    return st->sink->room != NULL ? st->sink->room(st) : SIZE_MAX;
}

void sws_stream_abort(sws_stream_t *st)
{
    if (st->phase == SWS_STREAM_RESPONSE)
        stream_abort(st);
}

void sws_stream_set_body(sws_stream_t *st, const sws_stream_body_ops_t *ops)
{
    st->body = ops;
}

void sws_stream_body_resume(sws_stream_t *st)
{
    if (!st->body_full)
        return;
    st->body_full = 0;
    sws_conn_wake(st->req.conn);
}

void sws_stream_set_source(sws_stream_t *st, const sws_stream_source_t *src, void *data)
{
    st->source = src;
    st->source_data = data;
}

/* The head, with a hint of the body bytes about to follow. */
static int stream_head(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n,
                       uint64_t length, size_t room)
{
    sws_request_t *r = &st->req;
    if (st->phase != SWS_STREAM_REQUEST) {
        char what[64];
        snprintf(what, sizeof(what), "answered twice (%u, then %u)", r->status, status);
        stream_misuse(st, what);
        return -1;
    }
    if (status < 200 || status > 999) {
        char what[64];
        snprintf(what, sizeof(what), "%u is not a final status; answering 500", status);
        stream_misuse(st, what);
        status = 500;
    }
    r->status = status;
    st->no_body = r->is_head || status == 204 || status == 304;
    st->length = length;
    st->phase = SWS_STREAM_RESPONSE;
    if (st->sink->head(st, h, n, st->no_body ? 0 : room) < 0) {
        sws_log_error("client %s: no memory for a %u response", sws_conn_peer_text(r->conn),
                      status);
        stream_abort(st);
        return -1;
    }
    return 0;
}

int sws_stream_head(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n,
                    uint64_t length)
{
    return stream_head(st, status, h, n, length, 0);
}

/* Whether the producer may give n more body bytes now; drops what a
 * response without a body would carry (*n = 0). */
static int body_allowed(sws_stream_t *st, uint64_t *n)
{
    if (st->phase != SWS_STREAM_RESPONSE || st->end_asked) {
        if (!st->aborted)
            stream_misuse(st, "body outside a response");
        return 0;
    }
    if (st->length != SWS_STREAM_LENGTH_UNKNOWN && *n > st->length - st->given) {
        stream_misuse(st, "body longer than its announced length");
        stream_abort(st);
        return 0;
    }
    if (st->no_body)
        *n = 0;
    st->given += *n;
    return 1;
}

/* Body bytes in order: to the sink when nothing is held before them, the
 * rest kept. 0, or -1 (out of memory: the stream is aborted). */
static int stream_offer(sws_stream_t *st, const char *p, size_t n)
{
    if (st->pend_len == 0) {
        size_t took = st->sink->data(st, p, n);
        st->req.body_bytes += took;
        p += took;
        n -= took;
        if (n == 0)
            return 0;
    }
    if (pend_append(st, p, n) < 0) {
        sws_log_error("client %s: no memory to hold %zu body bytes",
                      sws_conn_peer_text(st->req.conn), n);
        stream_abort(st);
        return -1;
    }
    return 0;
}

int sws_stream_write(sws_stream_t *st, const void *p, size_t n)
{
    uint64_t len = n;
    if (!body_allowed(st, &len))
        return -1;
    if (len == 0)
        return 0;
    if (st->file_left > 0) {
        /* Bytes after a file range still pending would overtake it. */
        stream_misuse(st, "body written while a file range is pending");
        stream_abort(st);
        return -1;
    }
    return stream_offer(st, p, n);
}

int sws_stream_send_file(sws_stream_t *st, int fd, off_t off, uint64_t len)
{
    if (!body_allowed(st, &len) || st->file_left > 0) {
        if (st->file_left > 0)
            stream_misuse(st, "a second file range while one is pending");
        close(fd);
        return -1;
    }
    if (len == 0) {
        close(fd);
        return 0;
    }
    if (st->file_fd >= 0)
        close(st->file_fd); /* an earlier range, all pushed */
    st->file_fd = fd;
    st->file_off = off;
    st->file_left = len;
    return stream_flush(st);
}

int sws_stream_can_pipe(const sws_stream_t *st)
{
    return st->sink->pipe != NULL && st->phase == SWS_STREAM_RESPONSE && !st->no_body &&
           st->length != SWS_STREAM_LENGTH_UNKNOWN && !st->req.tls;
}

int sws_stream_send_pipe(sws_stream_t *st, int fd, uint64_t len)
{
    if (!sws_stream_can_pipe(st)) {
        stream_misuse(st, "a pipe where the sink cannot take one");
        stream_abort(st);
        return -1;
    }
    if (!body_allowed(st, &len))
        return -1;
    if (len == 0)
        return 0;
    if (st->file_left > 0 || st->pipe_left > 0) {
        stream_misuse(st, "a pipe range while another range is pending");
        stream_abort(st);
        return -1;
    }
    st->pipe_fd = fd;
    st->pipe_left = len;
    return stream_flush(st);
}

/* Copy trailers into one block the stream owns until the release. */
static int trailers_copy(sws_stream_t *st, const sws_header_t *t, unsigned n)
{
    size_t bytes = n * sizeof(sws_header_t);
    for (unsigned i = 0; i < n; i++)
        bytes += t[i].name.len + t[i].value.len;
    sws_header_t *h = malloc(bytes);
    if (h == NULL)
        return -1;
    char *o = (char *)(h + n);
    for (unsigned i = 0; i < n; i++) {
        memcpy(o, t[i].name.p, t[i].name.len);
        h[i].name = (sws_str_t){ o, t[i].name.len };
        o += t[i].name.len;
        memcpy(o, t[i].value.p, t[i].value.len);
        h[i].value = (sws_str_t){ o, t[i].value.len };
        o += t[i].value.len;
    }
    st->trailer_mem = h;
    st->trailers = h;
    st->ntrailers = n;
    return 0;
}

int sws_stream_end(sws_stream_t *st, const sws_header_t *t, unsigned n)
{
    uint64_t none = 0;
    if (!body_allowed(st, &none))
        return -1;
    if (!st->no_body && st->length != SWS_STREAM_LENGTH_UNKNOWN && st->given < st->length) {
        stream_misuse(st, "body shorter than its announced length");
        stream_abort(st);
        return -1;
    }
    if (n > 0 && trailers_copy(st, t, n) < 0) {
        sws_log_error("client %s: no memory for trailers", sws_conn_peer_text(st->req.conn));
        stream_abort(st);
        return -1;
    }
    st->end_asked = 1;
    return stream_flush(st);
}

void sws_stream_respond(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n,
                        const void *body, size_t len)
{
    if (stream_head(st, status, h, n, len, len) < 0)
        return;
    /* The whole body and the end at once: the checks of write and end
     * hold by construction (nothing pending, the length is len). */
    if (!st->no_body && len > 0) {
        st->given = len;
        if (stream_offer(st, body, len) < 0)
            return;
    }
    st->end_asked = 1;
    stream_flush(st);
}

void sws_stream_respond_file(sws_stream_t *st, unsigned status, const sws_header_t *h,
                             unsigned n, int fd, off_t off, uint64_t len)
{
    if (sws_stream_head(st, status, h, n, len) < 0) {
        close(fd);
        return;
    }
    if (sws_stream_send_file(st, fd, off, len) < 0)
        return;
    sws_stream_end(st, NULL, 0);
}

/* Statuses after which the connection cannot be trusted to be in sync
 * (or the body was not read): answer, then close. */
static int status_closes(unsigned status)
{
    switch (status) {
    case 400: case 408: case 413: case 414: case 417: case 431: case 505:
        return 1;
    default:
        return 0;
    }
}

/* The error page: each "%u %s" becomes a status of STATUS_DIGITS and its
 * reason, so ERROR_PAGE_MAX holds the page of any status. */
#define ERROR_PAGE                                               \
    "<!DOCTYPE html>\n<html><head><title>%u %s</title></head>" \
    "<body><h1>%u %s</h1></body></html>\n"
#define STATUS_DIGITS 3
#define ERROR_PAGE_MAX (sizeof(ERROR_PAGE) + 2 * (STATUS_DIGITS + SWS_HTTP_REASON_MAX))

void sws_stream_error(sws_stream_t *st, unsigned status)
{
    static const sws_header_t type = { SWS_STR("Content-Type"), SWS_STR("text/html") };
    char body[ERROR_PAGE_MAX];
    const char *reason = sws_http_reason(status);
    int n = snprintf(body, sizeof(body), ERROR_PAGE, status, reason, status, reason);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = 0;
    if (status_closes(status))
        st->req.keep_alive = 0;
    sws_stream_respond(st, status, &type, 1, body, (size_t)n);
}
