/* The response API of worker/request.h, over the connection's protocol
 * (worker/proto.h: write_head, response_end): it knows no protocol. A
 * response is counted and logged here, once, whichever protocol carried it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/fmt.h"
#include "core/log.h"
#include "worker/conn.h"
#include "worker/access_log.h"
#include "worker/request.h"

/* Files up to this size are read into the output buffer, so the response
 * leaves in one write with the responses around it. */
#define SWS_RESPONSE_INLINE_FILE (16u * 1024)

/* The IANA HTTP Status Code Registry, every code a server may send, with
 * the reason phrase of its RFC (RFC 9110 where it defines the code). 418
 * is reserved by RFC 9110 15.5.19; its phrase is RFC 2324's. */
static const char *const reasons[] = {
    [100] = "Continue",
    [101] = "Switching Protocols",
    [102] = "Processing",
    [103] = "Early Hints",
    [200] = "OK",
    [201] = "Created",
    [202] = "Accepted",
    [203] = "Non-Authoritative Information",
    [204] = "No Content",
    [205] = "Reset Content",
    [206] = "Partial Content",
    [207] = "Multi-Status",
    [208] = "Already Reported",
    [226] = "IM Used",
    [300] = "Multiple Choices",
    [301] = "Moved Permanently",
    [302] = "Found",
    [303] = "See Other",
    [304] = "Not Modified",
    [305] = "Use Proxy",
    [307] = "Temporary Redirect",
    [308] = "Permanent Redirect",
    [400] = "Bad Request",
    [401] = "Unauthorized",
    [402] = "Payment Required",
    [403] = "Forbidden",
    [404] = "Not Found",
    [405] = "Method Not Allowed",
    [406] = "Not Acceptable",
    [407] = "Proxy Authentication Required",
    [408] = "Request Timeout",
    [409] = "Conflict",
    [410] = "Gone",
    [411] = "Length Required",
    [412] = "Precondition Failed",
    [413] = "Content Too Large",
    [414] = "URI Too Long",
    [415] = "Unsupported Media Type",
    [416] = "Range Not Satisfiable",
    [417] = "Expectation Failed",
    [418] = "I'm a teapot",
    [421] = "Misdirected Request",
    [422] = "Unprocessable Content",
    [423] = "Locked",
    [424] = "Failed Dependency",
    [425] = "Too Early",
    [426] = "Upgrade Required",
    [428] = "Precondition Required",
    [429] = "Too Many Requests",
    [431] = "Request Header Fields Too Large",
    [451] = "Unavailable For Legal Reasons",
    [500] = "Internal Server Error",
    [501] = "Not Implemented",
    [502] = "Bad Gateway",
    [503] = "Service Unavailable",
    [504] = "Gateway Timeout",
    [505] = "HTTP Version Not Supported",
    [506] = "Variant Also Negotiates",
    [507] = "Insufficient Storage",
    [508] = "Loop Detected",
    [510] = "Not Extended",
    [511] = "Network Authentication Required",
};

const char *sws_http_reason(unsigned status)
{
    if (status < sizeof(reasons) / sizeof(reasons[0]) && reasons[status] != NULL)
        return reasons[status];
    return "Unknown";
}

const sws_str_t *sws_request_header(const sws_request_t *r, const char *name)
{
    size_t n = strlen(name);
    for (unsigned i = 0; i < r->nheaders; i++) {
        const sws_header_t *h = &r->headers[i];
        if (h->name.len == n && strncasecmp(h->name.p, name, n) == 0)
            return &h->value;
    }
    return NULL;
}

/* 204 and 304 carry neither a body nor a Content-Length. */
static int status_has_body(unsigned status)
{
    return status != 204 && status != 304;
}

/* A handler answers once, with a final status: a 1xx is interim, so the
 * client would wait for another answer that never comes (or, for 101, take
 * the connection for another protocol). */
static int response_allowed(sws_request_t *r, unsigned *status)
{
    if (r->status != 0) {
        sws_log_error("%.*s %.*s answered twice (%u, then %u)", (int)r->method.len, r->method.p,
                      (int)r->target.len, r->target.p, r->status, *status);
        return 0;
    }
    if (*status < 200 || *status > 999) {
        sws_log_error("%.*s %.*s: %u is not a final status; answering 500", (int)r->method.len,
                      r->method.p, (int)r->target.len, r->target.p, *status);
        *status = 500;
    }
    return 1;
}

/* The response is queued: count it, log it, let the protocol go on. */
static void response_end(sws_conn_t *c, sws_request_t *r)
{
    sws_conn_set_t *s = c->set;
    c->requests++;
    s->counters->requests++;
    if (s->access_log != NULL && s->access_log->fd >= 0)
        sws_access_log_request(s->access_log, r, sws_conn_peer_text(c), s->loop->wall_sec,
                               sws_loop_now_ms(s->loop) - r->start_ms);
    c->proto->response_end(c, r);
}

/* Out of memory for the response: nothing of it was queued; end the
 * connection after what is already queued. */
static void response_failed(sws_request_t *r, unsigned status)
{
    sws_log_error("client %s: no memory for a %u response", sws_conn_peer_text(r->conn), status);
    r->status = status;
    r->keep_alive = 0;
    response_end(r->conn, r);
}

void sws_response_send(sws_request_t *r, unsigned status, const char *extra, size_t extra_len,
                       const void *body, size_t body_len)
{
    sws_conn_t *c = r->conn;
    if (!response_allowed(r, &status))
        return;
    int has_body = status_has_body(status);
    if (!has_body)
        body_len = 0;
    size_t send_len = r->is_head ? 0 : body_len;
    if (c->proto->write_head(c, r, status, extra, extra_len, body_len, has_body, send_len) < 0) {
        response_failed(r, status);
        return;
    }
    if (send_len > 0) {
        memcpy(c->obuf + c->olen, body, send_len); /* room reserved with the head */
        c->olen += send_len;
    }
    r->status = status;
    r->body_bytes = send_len;
    response_end(c, r);
}

void sws_response_sendfile(sws_request_t *r, unsigned status, const char *extra,
                           size_t extra_len, int fd, off_t offset, uint64_t len)
{
    sws_conn_t *c = r->conn;
    if (!response_allowed(r, &status)) {
        close(fd);
        return;
    }
    int has_body = status_has_body(status);
    if (!has_body)
        len = 0;
    int inline_body = !r->is_head && len > 0 && len <= SWS_RESPONSE_INLINE_FILE;
    size_t queued_before = c->olen - c->osent;
    if (c->proto->write_head(c, r, status, extra, extra_len, len, has_body,
                             inline_body ? (size_t)len : 0) < 0) {
        close(fd);
        response_failed(r, status);
        return;
    }
    if (r->is_head || len == 0) {
        close(fd);
        r->body_bytes = 0;
    } else if (inline_body) {
        ssize_t n = pread(fd, c->obuf + c->olen, (size_t)len, offset);
        int err = n < 0 ? errno : 0;
        close(fd);
        if (n != (ssize_t)len) {
            /* Take the head back: the promised length cannot be sent. */
            c->olen = c->osent + queued_before;
            sws_log_error("pread for a response: %s", n < 0 ? strerror(err) : "file shrank");
            sws_response_error(r, 500);
            return;
        }
        c->olen += (size_t)len;
        r->body_bytes = len;
    } else {
        sws_conn_queue_file(c, fd, offset, len);
        r->body_bytes = len;
    }
    r->status = status;
    response_end(c, r);
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

void sws_response_error(sws_request_t *r, unsigned status)
{
    static const char type[] = "Content-Type: text/html\r\n";
    char body[ERROR_PAGE_MAX];
    const char *reason = sws_http_reason(status);
    int n = snprintf(body, sizeof(body), ERROR_PAGE, status, reason, status, reason);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = 0;
    if (status_closes(status))
        r->keep_alive = 0;
    sws_response_send(r, status, type, SWS_LIT_LEN(type), body, (size_t)n);
}

void sws_response_close(sws_request_t *r)
{
    r->keep_alive = 0;
}
