#include "worker/http1.h"

#include "core/fmt.h"
#include "core/http_token.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "worker/conn.h"
#include "worker/http2.h"

static const sws_str_t method_names[64] = {
#define SWS_METHOD_NAME(num, name, string) [num] = { #string, sizeof(#string) - 1 },
    HTTP_ALL_METHOD_MAP(SWS_METHOD_NAME)
#undef SWS_METHOD_NAME
};

static sws_str_t method_name(uint8_t m)
{
    if (m < sizeof(method_names) / sizeof(method_names[0]) && method_names[m].p != NULL)
        return method_names[m];
    return SWS_STR("-");
}

static sws_conn_t *parser_conn(llhttp_t *p)
{
    return p->data;
}

/* A callback refuses the request: remember why, stop llhttp. */
static int refuse(sws_conn_t *c, unsigned status, const char *why)
{
    sws_http1_of(c)->reject = (uint16_t)status;
    sws_http1_of(c)->reject_why = why;
    return HPE_USER;
}

/* Where the scan of the chunked framing stands (sws_http1_t.frame): the
 * grammar of RFC 9112 7.1, one state per place a byte can be. */
enum frame_state {
    FR_SIZE_FIRST,  /* a chunk-size line starts: HEXDIG */
    FR_SIZE,        /* HEXDIG, ';' or CR */
    FR_EXT_NAME0,   /* after ';': a token starts */
    FR_EXT_NAME,    /* tchar, '=', ';' or CR */
    FR_EXT_VALUE0,  /* after '=': a token or a quoted-string starts */
    FR_EXT_VALUE,   /* tchar, ';' or CR */
    FR_EXT_QUOTED,  /* qdtext, '\\' or the closing '"' */
    FR_EXT_PAIR,    /* the byte after '\\' */
    FR_EXT_QUOTED_END, /* ';' or CR */
    FR_SIZE_LF,     /* LF ends the chunk-size line */
    FR_DATA,        /* chunk_left data bytes are due, in body spans */
    FR_DATA_CR,     /* CRLF after the data */
    FR_DATA_LF,
    FR_TRAILER0,    /* a trailer field line, or CR of the final CRLF */
    FR_TRAILER_NAME, /* tchar or ':' */
    FR_TRAILER_VALUE, /* field-vchar, SP, HTAB or CR */
    FR_TRAILER_LF,
    FR_END_LF,      /* LF of the final CRLF */
    FR_DONE,        /* the message ends here: no framing byte may follow */
};

/* VCHAR or obs-text (RFC 9110 5.5). */
static int is_field_vchar(unsigned char b)
{
    return (b > 0x20 && b < 0x7f) || b >= 0x80;
}

/* One framing byte: the next state, or -1 when the byte has no place
 * there. */
static int frame_step(sws_http1_t *h, unsigned char b)
{
    switch ((enum frame_state)h->frame) {
    case FR_SIZE_FIRST:
    case FR_SIZE: {
        int d = sws_hex_value(b);
        if (d >= 0) {
            if (h->chunk_left >> 60 != 0)
                return -1; /* llhttp refuses the overflow too */
            h->chunk_left = h->chunk_left << 4 | (uint64_t)d;
            return FR_SIZE;
        }
        if (h->frame == FR_SIZE_FIRST)
            return -1;
        return b == ';' ? FR_EXT_NAME0 : b == '\r' ? FR_SIZE_LF : -1;
    }
    case FR_EXT_NAME0:
        return sws_is_tchar(b) ? FR_EXT_NAME : -1;
    case FR_EXT_NAME:
    case FR_EXT_VALUE:
        if (sws_is_tchar(b))
            return h->frame;
        if (b == '=' && h->frame == FR_EXT_NAME)
            return FR_EXT_VALUE0;
        return b == ';' ? FR_EXT_NAME0 : b == '\r' ? FR_SIZE_LF : -1;
    case FR_EXT_VALUE0:
        return sws_is_tchar(b) ? FR_EXT_VALUE : b == '"' ? FR_EXT_QUOTED : -1;
    case FR_EXT_QUOTED:
        if (b == '"')
            return FR_EXT_QUOTED_END;
        if (b == '\\')
            return FR_EXT_PAIR;
        return is_field_vchar(b) || b == ' ' || b == '\t' ? FR_EXT_QUOTED : -1;
    case FR_EXT_PAIR:
        return is_field_vchar(b) || b == ' ' || b == '\t' ? FR_EXT_QUOTED : -1;
    case FR_EXT_QUOTED_END:
        return b == ';' ? FR_EXT_NAME0 : b == '\r' ? FR_SIZE_LF : -1;
    case FR_SIZE_LF:
        if (b != '\n')
            return -1;
        return h->chunk_left == 0 ? FR_TRAILER0 : FR_DATA;
    case FR_DATA:
        return -1; /* llhttp ended the data before its size */
    case FR_DATA_CR:
        return b == '\r' ? FR_DATA_LF : -1;
    case FR_DATA_LF:
        return b == '\n' ? FR_SIZE_FIRST : -1;
    case FR_TRAILER0:
        return b == '\r' ? FR_END_LF : sws_is_tchar(b) ? FR_TRAILER_NAME : -1;
    case FR_TRAILER_NAME:
        return sws_is_tchar(b) ? FR_TRAILER_NAME : b == ':' ? FR_TRAILER_VALUE : -1;
    case FR_TRAILER_VALUE:
        if (b == '\r')
            return FR_TRAILER_LF;
        return is_field_vchar(b) || b == ' ' || b == '\t' ? FR_TRAILER_VALUE : -1;
    case FR_TRAILER_LF:
        return b == '\n' ? FR_TRAILER0 : -1;
    case FR_END_LF:
        return b == '\n' ? FR_DONE : -1;
    case FR_DONE:
        return -1;
    }
    return -1;
}

/* Chunk framing and trailers, the bytes between body spans, through our
 * own scan (llhttp 8.1 skips some of them unchecked). llhttp also accepts
 * any number of leading zeros in a chunk size and extensions of any
 * length, and drops them: without a bound a client could stream a body
 * that never reaches max_body_size (CVE-2024-22019 in Node). So the
 * framing may be as large as the body and head limits together, far above
 * what a client sends, and no larger. Returns 0, or the status to refuse
 * with. */
static unsigned scan_framing(sws_conn_t *c, const char *from, const char *to, const char **why)
{
    sws_http1_t *h = sws_http1_of(c);
    const sws_settings_t *st = c->set->settings;
    h->framing_bytes += (uint64_t)(to - from);
    if (h->framing_bytes > st->max_body_size + st->max_header_size) {
        *why = "chunk framing too large";
        return 413;
    }
    for (const char *p = from; p < to; p++) {
        int next = frame_step(h, (unsigned char)*p);
        if (next < 0) {
            *why = "bad chunk framing";
            return 400;
        }
        /* Trailer lines are bounded like a head, counted by the byte so
         * the refusal does not depend on where reads end. */
        if (next >= FR_TRAILER_NAME && next <= FR_TRAILER_LF &&
            ++h->trailer_bytes > st->max_header_size) {
            *why = "trailers too large";
            return 431;
        }
        h->frame = (uint8_t)next;
    }
    return 0;
}

/* A body span of len bytes follows the framing scanned so far: it must be
 * chunk data our scan expects. Returns 0, or the status to refuse with. */
static unsigned scan_data(sws_http1_t *h, size_t len, const char **why)
{
    if (h->frame != FR_DATA || len > h->chunk_left) {
        *why = "chunk data where the framing has none";
        return 400;
    }
    h->chunk_left -= len;
    if (h->chunk_left == 0)
        h->frame = FR_DATA_CR;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    sws_request_t *r = &sws_http1_of(parser_conn(p))->stream.req;
    if (r->target.len > 0 && r->target.p + r->target.len == at)
        r->target.len += len; /* the rest of a target split across reads */
    else
        r->target = (sws_str_t){ at, len };
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    sws_conn_t *c = parser_conn(p);
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    if (h->state == SWS_H1_BODY || h->over_headers)
        return 0; /* a trailer (dropped: scan_framing checks it), or one too many */
    if (r->nheaders > 0) {
        sws_header_t *last = &r->headers[r->nheaders - 1];
        if (last->name.p + last->name.len == at) {
            last->name.len += len; /* split across reads */
            return 0;
        }
    }
    if (r->nheaders >= sws_request_max_fields(c->set->settings)) {
        h->over_headers = 1; /* refused where the name ends, wherever reads end */
        return 0;
    }
    sws_header_t *hd = &r->headers[r->nheaders++];
    hd->name = (sws_str_t){ at, len };
    hd->value = (sws_str_t){ at + len, 0 };
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    sws_conn_t *c = parser_conn(p);
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    if (h->state == SWS_H1_BODY)
        return 0; /* a trailer */
    if (r->nheaders == 0) {
        h->nameless = 1; /* refused where the value ends */
        return 0;
    }
    sws_header_t *hd = &r->headers[r->nheaders - 1];
    if (hd->value.len > 0 && hd->value.p + hd->value.len == at)
        hd->value.len += len;
    else
        hd->value = (sws_str_t){ at, len };
    return 0;
}

/* Refusals happen in the _complete callbacks, at a byte that does not
 * depend on where reads end: a span callback sees a field in pieces when
 * it is cut, whole otherwise, and llhttp may find a fault inside the span
 * before calling it. */
static int on_header_field_complete(llhttp_t *p)
{
    sws_conn_t *c = parser_conn(p);
    sws_http1_t *h = sws_http1_of(c);
    if (h->state == SWS_H1_HEAD && h->over_headers)
        return refuse(c, 431, "too many headers");
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    sws_conn_t *c = parser_conn(p);
    sws_http1_t *h = sws_http1_of(c);
    if (h->state == SWS_H1_HEAD && h->nameless)
        return refuse(c, 400, "header value without a name");
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    /* Pause: the head is checked as a whole, outside llhttp, before any
     * body byte is accepted. */
    return sws_http1_of(parser_conn(p))->state == SWS_H1_HEAD ? HPE_PAUSED : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    sws_conn_t *c = parser_conn(p);
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    /* The framing before the span first: cut into reads, it was scanned
     * before this span arrived. */
    const char *why;
    unsigned status = h->chunked ? scan_framing(c, h->gap, at, &why) : 0;
    if (status != 0)
        return refuse(c, status, why);
    r->request_body_bytes += len;
    if (r->request_body_bytes > c->set->settings->max_body_size)
        return refuse(c, 413, "request body too large");
    if (h->chunked) {
        status = scan_data(h, len, &why);
        if (status != 0)
            return refuse(c, status, why);
        h->gap = at + len;
    }
    if (h->stream.body != NULL && h->stream.body->data(&h->stream, at, len))
        h->stream.body_full = 1;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    (void)p;
    return HPE_PAUSED; /* the handler runs outside llhttp */
}

static const llhttp_settings_t parser_settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void http1_setup(sws_conn_t *c)
{
    sws_stream_init(&sws_http1_of(c)->stream);
}

static void http1_init(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    memset(h, 0, offsetof(sws_http1_t, stream));
    llhttp_init(&h->parser, HTTP_REQUEST, &parser_settings);
    h->parser.data = c;
    h->state = SWS_H1_IDLE;
}

static void begin_request(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    h->state = SWS_H1_HEAD;
    h->chunked = 0;
    h->client_closes = 0;
    h->reject = 0;
    h->head_len = 0;
    h->trailer_bytes = 0;
    h->over_headers = 0;
    h->nameless = 0;
    h->framing_bytes = 0;
    h->early = 0;
    c->msg_start = c->rpos;
    c->head_started = 1;
    sws_stream_start(&h->stream, c, &sws_http1_sink);
}

/* The exchange is over on our side: the stream's response is all queued
 * and its file range sent (or it was cut short). Count and log it, then
 * go on with the next request or close after the output. */
static void exchange_finish(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    /* A response that ended before its request's body (an action that
     * answered from the head) leaves the rest of that body unread: the
     * connection cannot be trusted to be in sync. */
    int keep = h->stream.req.keep_alive && !h->stream.aborted && h->state != SWS_H1_DEAD &&
               h->state != SWS_H1_BODY;
    sws_stream_release(&h->stream);
    if (keep) {
        h->state = SWS_H1_IDLE;
    } else {
        /* The client said this request is its last and all of it was read
         * (no body left, nothing pipelined behind it): it sends nothing
         * more, so the close needs no lingering read (ADR 0057). When we
         * chose to close (a graceful stop, keepalive_requests, an upgrade),
         * the client may be sending its next request: conn.c lingers. */
        c->input_over = h->client_closes && !h->stream.aborted && h->state != SWS_H1_DEAD &&
                        h->state != SWS_H1_BODY && c->rpos == c->rend;
        h->state = SWS_H1_DEAD;
        c->close_after = 1;
    }
    /* The head is no longer referenced: its bytes may be reused. */
    if (c->rpos == c->rend)
        c->rpos = c->rend = 0;
    c->msg_start = c->rpos;
}

/* After the handler, and whenever the output drained: release the stream
 * when its response is complete, or ask conn.c to call again once the
 * output it waits on has drained. A response that waits on its producer
 * (nothing queued) goes on when the producer writes. */
static void http1_exchange_check(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_stream_t *st = &h->stream;
    if (st->phase == SWS_STREAM_IDLE || st->phase == SWS_STREAM_REQUEST)
        return;
    if (sws_stream_ended(st) && c->file_left == 0)
        exchange_finish(c);
    else if (sws_conn_output_blocked(c))
        c->want_writable = 1;
}

static void http1_writable(sws_conn_t *c)
{
    sws_stream_resume(&sws_http1_of(c)->stream);
    http1_exchange_check(c);
}

static void http1_fail(sws_conn_t *c, unsigned status, const char *why)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    if (h->state == SWS_H1_DEAD)
        return;
    if (h->state == SWS_H1_IDLE)
        begin_request(c);
    if (r->method.len == 1 && r->target.len > 0) /* the line was parsed */
        r->method = method_name(h->parser.method);
    sws_log_info("client %s: %s (%u)", sws_conn_peer_text(c), why, status);
    h->state = SWS_H1_DEAD;
    c->close_after = 1;
    r->keep_alive = 0;
    if (h->stream.phase == SWS_STREAM_REQUEST)
        sws_stream_error(&h->stream, status);
    http1_exchange_check(c);
}

/* The request line's version is not one we serve: 505 when it is a
 * well-formed "HTTP/d.d" other than 1.0 and 1.1 (then r records it, as
 * the request carried it, for the log), 400 when anything else stands in
 * its place (none at all: llhttp reads that as HTTP/0.9). Only the bytes
 * up to the minor digit decide: llhttp refuses a version there, and what
 * follows may not have arrived yet (the answer must not depend on how the
 * input was cut into reads); a bad byte after it is refused either way. */
static unsigned version_refusal(sws_request_t *r, const char *end)
{
    const char *v = r->target.p + r->target.len;
    int well_formed = r->target.len > 0 && end - v >= 9 && memcmp(v, " HTTP/", 6) == 0 &&
                      v[6] >= '0' && v[6] <= '9' && v[7] == '.' && v[8] >= '0' && v[8] <= '9';
    if (!well_formed)
        return 400;
    r->version_major = (uint8_t)(v[6] - '0');
    r->version_minor = (uint8_t)(v[8] - '0');
    int supported = v[6] == '1' && (v[8] == '0' || v[8] == '1');
    return supported ? 400 : 505;
}

/* The size limits of a head, judged on its first `have` bytes (the whole
 * head, or what of it has arrived, or what llhttp read before it refused):
 * the request line up to its first CR or LF, then the whole head. Both
 * only grow with `have`, and every refusal checks them first, so the
 * answer never depends on how the head was cut into reads. Returns 0, or
 * the status to answer with *why set. */
static unsigned head_limits(const sws_conn_t *c, size_t have, const char **why)
{
    const sws_settings_t *st = c->set->settings;
    const char *head = c->rbuf + c->msg_start;
    size_t max_line = st->max_request_line;
    /* The line is longer than max_line iff none of its first max_line + 1
     * bytes ends it. */
    if (have > max_line && memchr(head, '\r', max_line + 1) == NULL &&
        memchr(head, '\n', max_line + 1) == NULL) {
        *why = "request line too long";
        return 414;
    }
    if (have > st->max_header_size) {
        *why = "request head too large";
        return 431;
    }
    return 0;
}

/* llhttp refused the bytes: which answer. */
static void parse_error(sws_conn_t *c, llhttp_errno_t err)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    /* What our own checks find before the fault comes first: had the
     * input been cut into reads, they would have run on the bytes before
     * it (head_limits in the head, the framing scan in a chunked body)
     * before llhttp read on to the fault. */
    const char *why = NULL;
    unsigned status = 0;
    const char *at = llhttp_get_error_pos(&h->parser);
    if (h->state == SWS_H1_HEAD)
        status = head_limits(c, (size_t)(at - (c->rbuf + c->msg_start)), &why);
    else if (h->state == SWS_H1_BODY && h->chunked && h->reject == 0 && at != NULL)
        status = scan_framing(c, h->gap, at, &why); /* as input_used would have */
    if (status != 0) {
        http1_fail(c, status, why);
        return;
    }
    if (h->reject != 0) { /* a callback refused (HPE_USER, or HPE_CB_* from a _complete one) */
        http1_fail(c, h->reject, h->reject_why);
        return;
    }
    if (err == HPE_INVALID_VERSION || err == HPE_PAUSED_H2_UPGRADE) {
        http1_fail(c, version_refusal(r, c->rbuf + c->rend), "unsupported HTTP version");
        return;
    }
    if (err == HPE_PAUSED_UPGRADE) { /* not reached: upgrades close first */
        h->state = SWS_H1_DEAD;
        c->close_after = 1;
        return;
    }
    http1_fail(c, 400, llhttp_get_error_reason(&h->parser));
}

static int host_char_ok(unsigned char ch)
{
    /* RFC 3986 reg-name / IP-literal and a port: unreserved, pct-encoded,
     * sub-delims, ':', '[', ']'. */
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
        return 1;
    return ch != 0 && strchr("-._~%!$&'()*+,;=:[]", ch) != NULL;
}

static int host_ok(sws_str_t host)
{
    for (size_t i = 0; i < host.len; i++)
        if (!host_char_ok((unsigned char)host.p[i]))
            return 0;
    return 1;
}

/* path, query and (absolute-form) host from the request-target. 0 or -1. */
static int parse_target(sws_request_t *r)
{
    sws_str_t t = r->target;
    sws_str_t rest = t;
    if (t.len == 0)
        return -1;
    if (t.p[0] != '/') {
        size_t scheme = 0;
        if (t.len > 7 && strncasecmp(t.p, "http://", 7) == 0)
            scheme = 7;
        else if (t.len > 8 && strncasecmp(t.p, "https://", 8) == 0)
            scheme = 8;
        if (scheme == 0) {
            /* authority-form (CONNECT) and asterisk-form (OPTIONS *) */
            if (r->method_id == HTTP_CONNECT ||
                (r->method_id == HTTP_OPTIONS && t.len == 1 && t.p[0] == '*')) {
                r->path = t;
                return 0;
            }
            return -1;
        }
        /* absolute-form: its authority wins over Host (RFC 9112 3.2.2). */
        const char *a = t.p + scheme, *end = t.p + t.len, *e = a;
        while (e < end && *e != '/' && *e != '?')
            e++;
        sws_str_t auth = { a, (size_t)(e - a) };
        if (auth.len == 0 || !host_ok(auth) || memchr(auth.p, '@', auth.len) != NULL)
            return -1;
        r->host = auth;
        rest = (sws_str_t){ e, (size_t)(end - e) };
        if (rest.len == 0 || rest.p[0] == '?') {
            r->path = SWS_STR("/");
            if (rest.len > 0)
                r->query = (sws_str_t){ rest.p + 1, rest.len - 1 };
            return 0;
        }
    }
    const char *q = memchr(rest.p, '?', rest.len);
    if (q == NULL) {
        r->path = rest;
    } else {
        r->path = (sws_str_t){ rest.p, (size_t)(q - rest.p) };
        r->query = (sws_str_t){ q + 1, rest.len - r->path.len - 1 };
    }
    return 0;
}

/* Line structure of the head: lines that each end in CRLF, with no other
 * CR or LF (llhttp 8.1 takes a bare LF as a line end, and skips the byte
 * after a CR in places), no line starting with whitespace (obs-fold).
 * Returns 0, or the status to answer with *why set. */
static unsigned check_lines(const char *head, size_t len, const char **why)
{
    const char *end = head + len;
    for (const char *line = head; line < end;) {
        const char *cr = memchr(line, '\r', (size_t)(end - line));
        const char *lf = memchr(line, '\n', (size_t)(end - line));
        if (cr == NULL || lf != cr + 1) {
            *why = "bare CR or LF in the request head";
            return 400;
        }
        line = lf + 1;
        if (line < end && (*line == ' ' || *line == '\t')) {
            *why = "obs-fold in the request head";
            return 400;
        }
    }
    return 0;
}

/* The request line is exactly method SP request-target SP HTTP-version
 * CRLF (RFC 9112 3). llhttp 8.1 also takes several spaces before the
 * target or the version, which a proxy in front could split differently. */
static int request_line_ok(const char *head, sws_str_t method, sws_str_t target)
{
    const char *v = target.p + target.len;
    return target.p == head + method.len + 1 && memcmp(v, " HTTP/", 6) == 0 && v[9] == '\r';
}

/* The request line as llhttp read it: method and version into r, the
 * version served, the line's exact shape. 0, or the status to answer with
 * *why set. */
static unsigned check_request_line(sws_conn_t *c, const char *head, const char *pos,
                                   const char **why)
{
    sws_request_t *r = &sws_http1_of(c)->stream.req;
    const llhttp_t *p = &sws_http1_of(c)->parser;
    r->method_id = p->method;
    r->method = method_name(p->method);
    r->is_head = p->method == HTTP_HEAD;
    r->version_major = p->http_major;
    r->version_minor = p->http_minor;
    if (p->http_major != 1 || p->http_minor > 1) {
        *why = "unsupported HTTP version";
        return version_refusal(r, pos);
    }
    if (!request_line_ok(head, r->method, r->target)) {
        *why = "malformed request line";
        return 400;
    }
    return 0;
}

/* The known header fields of a head (core/http_token.h): where
 * scan_known_headers records the (last) value and the count of each. */
typedef struct known_headers {
    const sws_str_t *value[SWS_TK_COUNT]; /* the last one seen; NULL: none */
    unsigned count[SWS_TK_COUNT];
} known_headers_t;

/* Every field name a token, every value without trailing whitespace, the
 * known fields found. 0, or the status to answer with *why set. */
static unsigned scan_known_headers(sws_request_t *r, known_headers_t *k, const char **why)
{
    memset(k, 0, sizeof(*k));
    for (unsigned i = 0; i < r->nheaders; i++) {
        sws_header_t *hd = &r->headers[i];
        /* llhttp 8.1 lets a space through ("X A"), and whitespace before
         * the colon is a smuggling vector (RFC 9110 5.1). */
        if (!sws_str_is_token(hd->name)) {
            *why = "header name not a token";
            return 400;
        }
        while (hd->value.len > 0 &&
               (hd->value.p[hd->value.len - 1] == ' ' || hd->value.p[hd->value.len - 1] == '\t'))
            hd->value.len--;
        const sws_http_token_t *t = sws_http_token_find(hd->name.p, hd->name.len);
        if (t == NULL)
            continue;
        if ((t->flags & SWS_TKF_SINGLE) && k->count[t->id] > 0) {
            *why = "a header that must appear once is repeated";
            return 400;
        }
        k->value[t->id] = &hd->value;
        k->count[t->id]++;
    }
    return 0;
}

/* Host (exactly one in HTTP/1.1, valid characters) and the request-target
 * (path, query, and the host of an absolute-form target). 0, or the status
 * to answer with *why set. */
static unsigned check_host_and_target(sws_request_t *r, const known_headers_t *k,
                                      const char **why)
{
    const sws_str_t *host = k->value[SWS_TK_HOST];
    unsigned nhost = k->count[SWS_TK_HOST];
    if (nhost > 1 || (nhost == 0 && r->version_minor == 1) || (host != NULL && !host_ok(*host))) {
        *why = "missing, repeated or invalid Host";
        return 400;
    }
    if (host != NULL)
        r->host = *host;
    if (parse_target(r) < 0) {
        *why = "invalid request target";
        return 400;
    }
    return 0;
}

/* How the body is framed: a single chunked Transfer-Encoding on HTTP/1.1
 * only, a Content-Length within max_body_size, the one expectation we
 * meet (100-continue: noted when the client waits for it, answered by
 * continue_if_waited). 0, or the status to answer with *why set. */
static unsigned check_framing(sws_conn_t *c, const known_headers_t *k, const char *pos,
                              const char **why)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    const llhttp_t *p = &h->parser;
    const sws_str_t *te = k->value[SWS_TK_TRANSFER_ENCODING];
    unsigned nte = k->count[SWS_TK_TRANSFER_ENCODING];
    const sws_str_t *expect = k->value[SWS_TK_EXPECT];
    if (nte > 0 && (r->version_minor == 0 || nte > 1 || !sws_str_caseeq_lit(*te, "chunked"))) {
        *why = "Transfer-Encoding other than a single chunked";
        return 400;
    }
    h->chunked = (p->flags & F_CHUNKED) != 0;
    uint64_t length = (p->flags & F_CONTENT_LENGTH) ? p->content_length : 0;
    r->body_chunked = h->chunked;
    r->body_length = h->chunked ? 0 : length;
    if (length > c->set->settings->max_body_size) {
        *why = "request body too large";
        return 413;
    }
    if (expect != NULL && r->version_minor == 1) {
        if (!sws_str_caseeq_lit(*expect, "100-continue")) {
            *why = "unsupported expectation";
            return 417;
        }
        /* No 100 when the body is already here: the client did not wait. */
        h->stream.expect_continue = (h->chunked || length > 0) && pos == c->rbuf + c->rend;
    }
    return 0;
}

/* The client waits for 100 Continue and the head handler did not take
 * that over (a proxy forwards it and relays the upstream's): ours, unless
 * the final answer is given already (then the body is not read). */
static void continue_if_waited(sws_conn_t *c)
{
    static const sws_header_t none[1];
    sws_stream_t *st = &sws_http1_of(c)->stream;
    if (st->expect_continue && st->phase == SWS_STREAM_REQUEST &&
        sws_stream_interim(st, 100, none, 0) < 0)
        http1_fail(c, 500, "out of memory");
}

/* Whether the connection may carry another request after this one. */
static void decide_keep_alive(sws_conn_t *c)
{
    const llhttp_t *p = &sws_http1_of(c)->parser;
    /* An upgrade or CONNECT is answered like any request, then the
     * connection ends: what follows is not HTTP/1. */
    int upgrade = p->method == HTTP_CONNECT ||
                  ((p->flags & F_UPGRADE) && (p->flags & F_CONNECTION_UPGRADE));
    sws_http1_of(c)->client_closes = !llhttp_should_keep_alive(p);
    /* (A graceful stop clears it when the response is written.) */
    sws_http1_of(c)->stream.req.keep_alive = llhttp_should_keep_alive(p) && !upgrade &&
                        c->requests + 1 < c->set->settings->keepalive_requests;
}

/* The whole head is in rbuf[msg_start, pos): check it, fill the request.
 * 0, or -1 when the request was rejected. */
static int head_complete(sws_conn_t *c, const char *pos)
{
    sws_http1_t *h = sws_http1_of(c);
    const char *head = c->rbuf + c->msg_start;
    const char *why = NULL;
    known_headers_t known;

    h->head_len = (uint32_t)(pos - head);
    unsigned status = head_limits(c, h->head_len, &why);
    if (status == 0)
        status = check_lines(head, h->head_len, &why);
    if (status == 0)
        status = check_request_line(c, head, pos, &why);
    if (status == 0)
        status = scan_known_headers(&sws_http1_of(c)->stream.req, &known, &why);
    if (status == 0)
        status = check_host_and_target(&sws_http1_of(c)->stream.req, &known, &why);
    if (status == 0)
        status = check_framing(c, &known, pos, &why);
    if (status != 0) {
        http1_fail(c, status, why);
        return -1;
    }
    decide_keep_alive(c);
    h->state = SWS_H1_BODY;
    h->frame = FR_SIZE_FIRST;
    h->chunk_left = 0;
    return 0;
}

/* The head of a request with a body is complete: the set's head handler
 * sees it before any body byte, so that an action that streams the body
 * takes it (worker/conn.h). */
static void head_dispatch(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    sws_conn_set_t *s = c->set;
    const llhttp_t *p = &h->parser;
    int has_body = h->chunked || ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0);
    if (s->head_handler == NULL || !has_body)
        return;
    r->table = s->table;
    r->settings = s->settings;
    r->route = NULL;
    s->head_handler(&h->stream);
    h->early = (uint8_t)sws_stream_answered(&h->stream);
    if (h->early)
        http1_exchange_check(c); /* an answer given at once (an error) */
}

static void message_complete(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    sws_conn_set_t *s = c->set;
    h->state = SWS_H1_RESPONSE;
    if (h->early) {
        if (h->stream.body != NULL)
            h->stream.body->end(&h->stream);
        http1_exchange_check(c);
        return;
    }
    r->table = s->table;
    r->settings = s->settings;
    s->handler(&h->stream);
    if (!sws_stream_answered(&h->stream)) {
        sws_log_error("no answer for %.*s %.*s", (int)r->method.len, r->method.p,
                      (int)r->target.len, r->target.p);
        sws_stream_error(&h->stream, 500);
    }
    http1_exchange_check(c);
}

/* The framing from the last body span up to `to`: 1 if acceptable, else 0
 * with the request rejected. At the end of the message (complete), our
 * scan must be at the end of the chunked body exactly where llhttp is. */
static int framing_ok(sws_conn_t *c, const char *to, int complete)
{
    const char *why = "chunked body ends before its final CRLF";
    unsigned status = scan_framing(c, sws_http1_of(c)->gap, to, &why);
    if (status == 0 && complete && sws_http1_of(c)->frame != FR_DONE)
        status = 400;
    if (status != 0)
        http1_fail(c, status, why);
    return status == 0;
}

/* llhttp used up rbuf[rpos, rend) without completing the message. */
static void input_used(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    if (h->state == SWS_H1_HEAD) {
        const char *why = NULL;
        unsigned status = head_limits(c, c->rend - c->msg_start, &why);
        if (status != 0)
            http1_fail(c, status, why);
        c->rpos = c->rend;
        return;
    }
    if (h->chunked && !framing_ok(c, c->rbuf + c->rend, 0))
        return;
    /* Body bytes are dropped as soon as they are parsed; the head stays. */
    c->rpos = c->rend = c->msg_start + h->head_len;
}

/* The client ended its input inside a request: there is nothing to answer
 * (the rest will never come), but it is logged like a rejected request. */
static void input_ended(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    if (!c->peer_eof || (h->state != SWS_H1_HEAD && h->state != SWS_H1_BODY))
        return;
    sws_log_info("client %s: connection closed in the request %s", sws_conn_peer_text(c),
                 h->state == SWS_H1_HEAD ? "head" : "body");
    h->state = SWS_H1_DEAD;
    c->close_after = 1;
}

/* h2c with prior knowledge (RFC 9113 3.3): a connection whose first bytes
 * are HTTP/2's preface speaks HTTP/2 from there, when the set serves it
 * (otherwise llhttp reads "PRI * HTTP/2.0" and it gets 505, as before).
 * 1: switched (HTTP/2 reads the preface itself); -1: the bytes so far are
 * a proper prefix of it, wait for more; 0: HTTP/1. */
static int prior_knowledge(sws_conn_t *c)
{
    if (c->set->h2_proto == NULL || c->requests > 0 || c->rpos != 0)
        return 0;
    int m = sws_http2_preface_match(c->rbuf, c->rend);
    if (m < 0)
        return 0;
    if (m > 0)
        sws_conn_switch_proto(c, c->set->h2_proto, NULL);
    else if (c->peer_eof)
        return 0; /* it never will be: HTTP/1 answers what came */
    return m > 0 ? 1 : -1;
}

static void http1_process(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    c->input_paused = 0;
    for (;;) {
        if (h->state == SWS_H1_DEAD || h->state == SWS_H1_RESPONSE || c->close_after ||
            c->phase != SWS_CONN_ACTIVE || sws_conn_output_blocked(c))
            return;
        if (h->state == SWS_H1_BODY && h->stream.body_full) {
            c->input_paused = 1; /* the rest waits in the socket: TCP paces the client */
            return;
        }
        if (h->state == SWS_H1_IDLE) {
            int h2c = prior_knowledge(c);
            if (h2c != 0) /* 1: switched; -1: the preface is not complete yet */
                return;
            /* Empty lines before a request line are ignored (RFC 9112 2.2). */
            while (c->rpos < c->rend && (c->rbuf[c->rpos] == '\r' || c->rbuf[c->rpos] == '\n'))
                c->rpos++;
            if (c->rpos == c->rend) {
                c->rpos = c->rend = c->msg_start = 0;
                return;
            }
            begin_request(c);
        } else if (c->rpos == c->rend && h->state == SWS_H1_HEAD) {
            input_ended(c);
            return;
        }
        /* In the body state llhttp runs even on no new byte: it finishes a
         * message whose head ended exactly at the end of the input. */
        const char *p = c->rbuf + c->rpos;
        h->gap = p;
        llhttp_errno_t err = llhttp_execute(&h->parser, p, c->rend - c->rpos);
        if (err == HPE_OK) {
            input_used(c);
            input_ended(c);
            return;
        }
        if (err != HPE_PAUSED) {
            parse_error(c, err);
            return;
        }
        const char *pos = llhttp_get_error_pos(&h->parser);
        llhttp_resume(&h->parser);
        c->rpos = (uint32_t)(pos - c->rbuf);
        if (h->state == SWS_H1_HEAD) {
            if (head_complete(c, pos) < 0)
                return;
            head_dispatch(c);
            continue_if_waited(c);
            continue;
        }
        if (h->chunked && !framing_ok(c, pos, 1))
            return;
        message_complete(c);
    }
}

/* ---- the protocol operations conn.c calls (worker/proto.h) ---- */

static enum sws_proto_wait http1_waiting_for(const sws_conn_t *c)
{
    switch (sws_http1_of(c)->state) {
    case SWS_H1_IDLE:
        return SWS_PROTO_WAIT_IDLE;
    case SWS_H1_HEAD:
        return SWS_PROTO_WAIT_HEAD;
    case SWS_H1_BODY: /* a full body consumer is the wait, not the client */
        return sws_http1_of(c)->stream.body_full ? SWS_PROTO_WAIT_RESPONSE : SWS_PROTO_WAIT_BODY;
    case SWS_H1_RESPONSE:
        return SWS_PROTO_WAIT_RESPONSE;
    default:
        return SWS_PROTO_WAIT_NOTHING;
    }
}

/* The request's slices point into the read buffer: they follow its bytes. */
static void http1_input_moved(sws_conn_t *c, uintptr_t old_base, size_t old_cap,
                              const char *new_base, size_t shift)
{
    sws_request_t *r = &sws_http1_of(c)->stream.req;
    sws_proto_slice_move(&r->target, old_base, old_cap, new_base, shift);
    sws_proto_slice_move(&r->path, old_base, old_cap, new_base, shift);
    sws_proto_slice_move(&r->query, old_base, old_cap, new_base, shift);
    sws_proto_slice_move(&r->host, old_base, old_cap, new_base, shift);
    for (unsigned i = 0; i < r->nheaders; i++) {
        sws_proto_slice_move(&r->headers[i].name, old_base, old_cap, new_base, shift);
        sws_proto_slice_move(&r->headers[i].value, old_base, old_cap, new_base, shift);
    }
}

/* The client closed while its response was produced: a producer still at
 * work (the proxy, waiting on its member or relaying its body) is
 * cancelled, as nginx does with proxy_ignore_client_abort off, FIN or
 * reset alike (a FIN after the request may be a half-close by a client
 * that still reads: nginx cannot tell either, ADR 0025). A response that
 * is complete on our side is sent out as before. */
static int http1_client_gone(sws_conn_t *c)
{
    const sws_stream_t *st = &sws_http1_of(c)->stream;
    if (st->source == NULL || sws_stream_ended(st))
        return 0;
    sws_log_info("client %s: connection closed before the response was complete: request "
                 "cancelled",
                 sws_conn_peer_text(c));
    return 1;
}

/* The connection is closing: a response still in progress is cut short
 * (and logged as such); a path buffer grown for one long path is freed. */
static void http1_close(sws_conn_t *c)
{
    sws_http1_t *h = sws_http1_of(c);
    sws_request_t *r = &h->stream.req;
    r->keep_alive = 0;
    /* The log counts what reached the socket, not a file range's unsent rest. */
    if (h->stream.phase != SWS_STREAM_IDLE && c->file_left <= r->body_bytes)
        r->body_bytes -= c->file_left;
    sws_stream_release(&h->stream);
    sws_stream_free(&h->stream, 1);
}

static void http1_destroy(sws_conn_t *c)
{
    sws_stream_free(&sws_http1_of(c)->stream, 0);
}

const sws_proto_ops_t sws_http1_proto = {
    .state_size = sizeof(sws_http1_t),
    .setup = http1_setup,
    .init = http1_init,
    .on_input = http1_process,
    .writable = http1_writable,
    .fail = http1_fail,
    .waiting_for = http1_waiting_for,
    .input_moved = http1_input_moved,
    .close = http1_close,
    .destroy = http1_destroy,
    .client_gone = http1_client_gone,
};
