#include "supervisor/admin_http.h"

#include <string.h>

#include "core/str.h"

static sws_admin_req_t *req_of(llhttp_t *p)
{
    return p->data;
}

/* A callback refuses the request: remember why and stop llhttp. */
static int refuse(llhttp_t *p, unsigned status, const char *why)
{
    sws_admin_req_t *r = req_of(p);
    r->state = SWS_ADMIN_REQ_ERROR;
    r->status = status;
    r->why = why;
    return -1;
}

/* Append len bytes to buf (*used of cap taken), or refuse with status and
 * why when they do not fit: llhttp hands the target and the body in pieces. */
static int append(llhttp_t *p, char *buf, size_t *used, size_t cap, const char *at, size_t len,
                  unsigned status, const char *why)
{
    if (len > cap - *used)
        return refuse(p, status, why);
    memcpy(buf + *used, at, len);
    *used += len;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    sws_admin_req_t *r = req_of(p);
    if (append(p, r->target, &r->target_len, SWS_ADMIN_MAX_TARGET, at, len, 414,
               "request target too long") < 0)
        return -1;
    r->target[r->target_len] = '\0';
    return 0;
}

/* Header names come in pieces too: their first bytes are enough to know
 * Authorization, their length tells a longer name from it. */
static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    sws_admin_req_t *r = req_of(p);
    if (r->field_len < sizeof(r->field))
        memcpy(r->field + r->field_len, at,
               len < sizeof(r->field) - r->field_len ? len : sizeof(r->field) - r->field_len);
    r->field_len += len;
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    sws_admin_req_t *r = req_of(p);
    sws_str_t name = { r->field, r->field_len };
    r->field_len = 0;
    /* A trailer's (after a chunked body) is no credential. */
    if (r->in_trailers || !sws_str_caseeq_lit(name, "authorization"))
        return 0;
    if (r->has_authorization)
        return refuse(p, 400, "more than one Authorization header");
    r->has_authorization = 1;
    r->in_authorization = 1;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    sws_admin_req_t *r = req_of(p);
    if (!r->in_authorization)
        return 0;
    return append(p, r->authorization, &r->authorization_len, sizeof(r->authorization), at, len,
                  431, "Authorization header too long");
}

static int on_header_value_complete(llhttp_t *p)
{
    req_of(p)->in_authorization = 0;
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    req_of(p)->in_trailers = 1;
    /* A declared length that cannot fit is refused before its bytes come. */
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > SWS_ADMIN_MAX_BODY)
        return refuse(p, 413, "request body too large");
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    sws_admin_req_t *r = req_of(p);
    return append(p, r->body, &r->body_len, SWS_ADMIN_MAX_BODY, at, len, 413,
                  "request body too large");
}

static int on_message_complete(llhttp_t *p)
{
    sws_admin_req_t *r = req_of(p);
    r->state = SWS_ADMIN_REQ_DONE;
    r->method = llhttp_method_name((llhttp_method_t)llhttp_get_method(p));
    return HPE_PAUSED; /* one request per connection: the rest is ignored */
}

static const llhttp_settings_t parser_settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void sws_admin_req_init(sws_admin_req_t *r)
{
    memset(r, 0, sizeof(*r));
    llhttp_init(&r->parser, HTTP_REQUEST, &parser_settings);
    r->parser.data = r;
}

sws_admin_req_state_t sws_admin_req_feed(sws_admin_req_t *r, const char *p, size_t n)
{
    if (r->state != SWS_ADMIN_REQ_MORE)
        return r->state;
    if (n > SWS_ADMIN_MAX_REQUEST - r->total) {
        r->state = SWS_ADMIN_REQ_ERROR;
        r->status = 413;
        r->why = "request too large";
        return r->state;
    }
    r->total += n;
    llhttp_errno_t rc = llhttp_execute(&r->parser, p, n);
    if (r->state == SWS_ADMIN_REQ_MORE && rc != HPE_OK) {
        r->state = SWS_ADMIN_REQ_ERROR;
        r->status = 400;
        r->why = "malformed HTTP request";
    }
    return r->state;
}

sws_admin_req_state_t sws_admin_req_eof(sws_admin_req_t *r)
{
    if (r->state != SWS_ADMIN_REQ_MORE)
        return r->state;
    /* A body delimited by the end of the connection (HTTP/1.0 style)
     * completes here; anything else cut short is an error. */
    if (llhttp_finish(&r->parser) != HPE_OK || r->state == SWS_ADMIN_REQ_MORE) {
        r->state = SWS_ADMIN_REQ_ERROR;
        r->status = 400;
        r->why = "request cut short";
    }
    return r->state;
}
