/* HTTP/2 on a connection with nghttp2 (worker/http2.h). */
#include "worker/http2.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "core/fmt.h"
#include "core/http_token.h"
#include "core/log.h"
#include "llhttp.h"
#include "worker/conn.h"
#include "worker/stream.h"

typedef struct sws_http2 sws_http2_t;

/* One client stream: the exchange (first, so that the sink finds its
 * stream from the sws_stream_t), the copies of its request's header bytes
 * and its response body not yet framed. */
typedef struct h2_stream {
    sws_stream_t st;
    /* Kept while the stream is a spare (stream_recycle): the next stream
     * of the connection starts with them. */
    char *hbuf;          /* the request's names and values; slices point here */
    size_t hcap;
    char *obuf;          /* response body bytes not yet framed, from the first one */
    size_t ocap;         /* its size: grows up to SWS_HTTP2_STREAM_BUF */

    /* The exchange's own, from here to the end: zeroed when it begins. */
    sws_http2_t *h2;
    struct h2_stream *prev, *next;
    int32_t id;

    size_t hlen;
    size_t hsize;        /* the header list's size as RFC 9113 6.5.2 counts it */
    uint16_t refuse;     /* status to answer once the head is complete (431) */
    uint8_t head_done;   /* the request head is complete and dispatched */
    uint8_t remote_done; /* the client ended its side (END_STREAM) */
    uint8_t early;       /* the head handler answered: the body goes to its consumer */
    uint8_t closed;      /* nghttp2 closed it: released at the next sweep */
    uint8_t deferred;    /* the data provider said DEFERRED: resume it on new bytes */
    uint8_t data_eof;    /* the producer ended: the provider sends END_STREAM */
    uint8_t want_resume; /* the sink refused bytes: resume the stream on room */
    uint8_t reset_sent;  /* we reset it (413 sent): its DATA is dropped */
    uint8_t responding;  /* a final head with a body went to nghttp2 */
    uint8_t end_sent;    /* our END_STREAM went out */
    uint8_t cut;         /* we reset it: its window stalled too long */
    uint8_t invalid;     /* nghttp2 refused one of its frames and reset it */
    uint8_t peer_reset;  /* the client reset it */
    uint8_t dispatch;    /* complete with its head: handled once this read is parsed */
    uint8_t swept;       /* counted in h2->nsweep: closed, a window or a resume owed */
    uint64_t stall_ms;   /* when the client's window began to hold its
                          * response back (loop time), 0: it does not */
    size_t unconsumed;   /* body bytes received, not yet given back to the stream's window:
                          * > 0 once its consumer said it holds enough, until it resumes
                          * (st.body_full asks every consumer for that resume:
                          * body_take); nghttp2 gives no empty DATA chunk */
    size_t held;         /* of them and the others its consumer took, those not passed
                          * on yet: not given back to the connection's window */
    size_t ooff, olen;   /* obuf's bytes waiting for the data provider */
} h2_stream_t;

/* The part of a stream zeroed when an exchange begins. */
#define H2_STREAM_FRESH offsetof(h2_stream_t, h2)
/* A spare keeps a header or body buffer up to this size (the common
 * request head, a small response); a larger one is freed with its
 * exchange. The body buffer starts at H2_OBUF_MIN and doubles. */
#define H2_SPARE_BUF_KEEP (4u * 1024)
#define H2_OBUF_MIN 1024u

/* nghttp2's small blocks, kept per connection (h2_mem_*). */
#define H2_MEM_CLASSES 4       /* 64, 128, 256, 512 bytes */
#define H2_MEM_SMALLEST 64u
#define H2_MEM_KEEP 32u        /* free blocks kept per class */

typedef union h2_block {
    union h2_block *next;      /* free: the next free block of its class */
    max_align_t align;
} h2_block_t;

/* Before each block nghttp2 gets: its class, H2_MEM_CLASSES for one of
 * malloc's own (larger). */
typedef union h2_block_head {
    unsigned cls;
    max_align_t align;
} h2_block_head_t;

struct sws_http2 {
    nghttp2_session *session;
    nghttp2_mem mem;        /* nghttp2's allocator: h2_mem_*, this connection's blocks */
    h2_block_t *blocks[H2_MEM_CLASSES];
    unsigned nblocks[H2_MEM_CLASSES];
    sws_conn_t *conn;
    h2_stream_t *streams;   /* open streams, doubly linked, newest first */
    h2_stream_t *oldest;    /* the list's tail: dispatch walks from it */
    h2_stream_t *last;      /* stream_get's last answer, NULL once released */
    /* Released streams kept for the next ones (linked by next), at most
     * SWS_HTTP2_SPARE_STREAMS: a stream costs no allocation, no zeroing of
     * its header array, no heap growth and trim, in the steady state. */
    h2_stream_t *spare;
    unsigned nspare;
    /* Streams the sweep has work for, and those marked for dispatch: the
     * pump and every read test these, not every stream. */
    unsigned nsweep, ndispatch;
    uint64_t opened;        /* streams the client opened, ever */
    unsigned resets;        /* of this window's streams opened, those the client
                             * reset before their response was complete */
    size_t held;            /* request-body bytes the streams' consumers hold, all
                             * streams: at most SWS_HTTP2_BODY_BUDGET */
    size_t held_peak;       /* the most they held at once (logged at the close) */
    nghttp2_nv *nv;         /* the submits' scratch array (nv_scratch) */
    size_t nvcap;
    uint64_t taken;         /* bytes of the client's given to nghttp2 (logged at the
                             * close: a flood's tests judge by it) */
    uint8_t budget_met;     /* the client's window ran out on the budget (logged once) */
    uint8_t dead;           /* no input is parsed any more (fatal, or torn down) */
    uint8_t goaway;         /* the shutdown notice (and its PING) was submitted */
    uint8_t goaway_final;   /* the GOAWAY naming the last stream taken was */
    uint8_t ended;          /* torn down, its last frames out, every stream released:
                             * nghttp2 is not asked for frames again */
};

static sws_http2_t *h2_of(const sws_conn_t *c)
{
    return c->proto_state;
}

static h2_stream_t *h2s_of(const sws_stream_t *st)
{
    return (h2_stream_t *)st; /* st is its first member */
}

int sws_http2_preface_match(const char *buf, size_t len)
{
    size_t n = len < SWS_HTTP2_PREFACE_LEN ? len : SWS_HTTP2_PREFACE_LEN;
    if (n == 0)
        return 0; /* buf may be NULL: no read buffer yet */
    if (memcmp(buf, SWS_HTTP2_PREFACE, n) != 0)
        return -1;
    return len >= SWS_HTTP2_PREFACE_LEN ? 1 : 0;
}

/* ---- the request ---- */

/* HTTP/1's set (llhttp's HTTP methods): not RTSP's, nor PRI, which are
 * no HTTP methods and would be forwarded to members as such. */
static const sws_str_t method_names[64] = {
#define SWS_METHOD_NAME(num, name, string) [num] = { #string, sizeof(#string) - 1 },
    HTTP_METHOD_MAP(SWS_METHOD_NAME)
#undef SWS_METHOD_NAME
};

/* llhttp's number for a method name (handlers and the proxy read
 * method_id), 0 (DELETE's) never returned for an unknown name: such a
 * request gets 501 (nghttp2 checked it is a token). */
static int method_id(sws_str_t m, uint8_t *id)
{
    for (unsigned i = 0; i < sizeof(method_names) / sizeof(method_names[0]); i++) {
        if (method_names[i].p != NULL && sws_str_eq(method_names[i], m)) {
            *id = (uint8_t)i;
            return 0;
        }
    }
    return -1;
}

/* Room for n more bytes in the stream's header buffer, growing it
 * (slices already made follow the bytes: sws_proto_slice_move). 0 or -1. */
static int hbuf_reserve(h2_stream_t *hs, size_t n)
{
    if (hs->hcap - hs->hlen >= n)
        return 0;
    size_t cap = hs->hcap < 1024 ? 1024 : hs->hcap;
    while (cap - hs->hlen < n)
        cap *= 2;
    uintptr_t old = (uintptr_t)hs->hbuf;
    char *b = realloc(hs->hbuf, cap);
    if (b == NULL)
        return -1;
    sws_request_t *r = &hs->st.req;
    sws_str_t *slices[] = { &r->method, &r->target, &r->path, &r->query, &r->host };
    for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); i++)
        sws_proto_slice_move(slices[i], old, hs->hcap, b, 0);
    for (unsigned i = 0; i < r->nheaders + r->ntrailers; i++) {
        sws_proto_slice_move(&r->headers[i].name, old, hs->hcap, b, 0);
        sws_proto_slice_move(&r->headers[i].value, old, hs->hcap, b, 0);
    }
    hs->hbuf = b;
    hs->hcap = cap;
    return 0;
}

/* Copy bytes into the header buffer; where they went, or NULL. */
static const char *hbuf_add(h2_stream_t *hs, const uint8_t *p, size_t n)
{
    if (hbuf_reserve(hs, n) < 0)
        return NULL;
    char *at = hs->hbuf + hs->hlen;
    memcpy(at, p, n);
    hs->hlen += n;
    return at;
}

static int hbuf_slice(h2_stream_t *hs, const uint8_t *p, size_t n, sws_str_t *out)
{
    const char *at = hbuf_add(hs, p, n);
    if (at == NULL)
        return -1;
    *out = (sws_str_t){ at, n };
    return 0;
}

/* Count a field into the header list's size (RFC 9113 6.5.2: its name,
 * its value and 32); 1 once the list is over max_header_size. */
static int hsize_over(h2_stream_t *hs, const sws_settings_t *st, size_t namelen, size_t valuelen)
{
    hs->hsize += namelen + valuelen + 32;
    return hs->hsize > st->max_header_size;
}

/* A field's name and value into the header buffer, for hd (the next of
 * the head's or the trailers'). Room for both first: a growth between
 * the two would leave the name behind (hd is not counted yet, so no
 * slice_move follows it). 0 or -1. */
static int field_add(h2_stream_t *hs, sws_header_t *hd, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen)
{
    if (hbuf_reserve(hs, namelen + valuelen) < 0 || hbuf_slice(hs, name, namelen, &hd->name) < 0 ||
        hbuf_slice(hs, value, valuelen, &hd->value) < 0)
        return -1;
    return 0;
}

static void stream_unlink(sws_http2_t *h2, h2_stream_t *hs)
{
    if (hs->prev != NULL)
        hs->prev->next = hs->next;
    else
        h2->streams = hs->next;
    if (hs->next != NULL)
        hs->next->prev = hs->prev;
    else
        h2->oldest = hs->prev;
    h2->nsweep -= hs->swept;
    h2->ndispatch -= hs->dispatch;
}

/* The stream has work for the next sweep (h2_sweep). */
static void sweep_mark(h2_stream_t *hs)
{
    if (!hs->swept) {
        hs->swept = 1;
        hs->h2->nsweep++;
    }
}

static void stream_destroy(h2_stream_t *hs)
{
    sws_stream_free(&hs->st, 0);
    free(hs->hbuf);
    free(hs->obuf);
    free(hs);
}

/* A released stream becomes a spare, with its buffers when they are of
 * a common size; beyond SWS_HTTP2_SPARE_STREAMS, or on a session that
 * takes no more streams, it is freed. */
static void stream_recycle(sws_http2_t *h2, h2_stream_t *hs)
{
    if (h2->nspare >= SWS_HTTP2_SPARE_STREAMS || h2->dead) {
        stream_destroy(hs);
        return;
    }
    sws_stream_free(&hs->st, 1);
    if (hs->hcap > H2_SPARE_BUF_KEEP) {
        free(hs->hbuf);
        hs->hbuf = NULL;
        hs->hcap = 0;
    }
    if (hs->ocap > H2_SPARE_BUF_KEEP) {
        free(hs->obuf);
        hs->obuf = NULL;
        hs->ocap = 0;
    }
    hs->next = h2->spare;
    h2->spare = hs;
    h2->nspare++;
}

/* A stream for a new exchange: a spare, else a new allocation (whose
 * sws_stream_t is initialized once). Its own fields are zero. */
static h2_stream_t *stream_new(sws_http2_t *h2)
{
    h2_stream_t *hs = h2->spare;
    if (hs != NULL) {
        h2->spare = hs->next;
        h2->nspare--;
    } else {
        hs = malloc(sizeof(*hs));
        if (hs == NULL)
            return NULL;
        sws_stream_init(&hs->st);
        hs->hbuf = hs->obuf = NULL;
        hs->hcap = hs->ocap = 0;
    }
    memset((char *)hs + H2_STREAM_FRESH, 0, sizeof(*hs) - H2_STREAM_FRESH);
    return hs;
}

/* Count and log the exchange, give back its unconsumed window, keep it
 * as a spare or free it. */
static void stream_release(sws_http2_t *h2, h2_stream_t *hs)
{
    sws_request_t *r = &hs->st.req;
    if (hs->invalid && hs->st.phase < SWS_STREAM_RESPONSE)
        r->status = 400; /* logged as HTTP/1 logs a malformed request */
    /* The log counts what went into frames, not bytes still held. */
    if (r->body_bytes >= hs->olen)
        r->body_bytes -= hs->olen;
    /* Its consumer is gone with it: what it held is the connection's again. */
    if (hs->held > 0 && h2->session != NULL)
        nghttp2_session_consume_connection(h2->session, hs->held);
    h2->held -= hs->held;
    if (h2->session != NULL)
        nghttp2_session_set_stream_user_data(h2->session, hs->id, NULL);
    if (h2->last == hs)
        h2->last = NULL;
    sws_stream_release(&hs->st);
    stream_unlink(h2, hs);
    stream_recycle(h2, hs);
}

/* The stream of id, or NULL. The last one found is remembered: a head's
 * fields, its frame's end and the frames sent for it come one after the
 * other, and each lookup in nghttp2's map costs a hash probe. */
static h2_stream_t *stream_get(sws_http2_t *h2, int32_t id)
{
    if (h2->last != NULL && h2->last->id == id)
        return h2->last;
    h2_stream_t *hs = nghttp2_session_get_stream_user_data(h2->session, id);
    if (hs != NULL)
        h2->last = hs;
    return hs;
}

/* path and query from the :path pseudo-header (origin-form; "*" for
 * OPTIONS). CONNECT has no :path (RFC 9113 8.5): its target is the
 * authority, as HTTP/1's authority-form, and meets the same dispatch.
 * 0 or -1. */
static int split_target(sws_request_t *r)
{
    if (r->method_id == HTTP_CONNECT && r->target.len == 0)
        r->target = r->host;
    sws_str_t t = r->target;
    if (t.len == 0)
        return -1;
    if (t.p[0] != '/') {
        if ((t.len == 1 && t.p[0] == '*' && r->method_id == HTTP_OPTIONS) ||
            r->method_id == HTTP_CONNECT) {
            r->path = t;
            return 0;
        }
        return -1;
    }
    const char *q = memchr(t.p, '?', t.len);
    r->path = (sws_str_t){ t.p, q != NULL ? (size_t)(q - t.p) : t.len };
    if (q != NULL)
        r->query = (sws_str_t){ q + 1, t.len - r->path.len - 1 };
    return 0;
}

static void stream_ask_continue(h2_stream_t *hs)
{
    static const sws_header_t none[1];
    if (hs->st.expect_continue && hs->st.phase == SWS_STREAM_REQUEST)
        sws_stream_interim(&hs->st, 100, none, 0);
}

/* HTTP/2 lets a client split Cookie into one field per pair (RFC 9113
 * 8.2.3), which an HTTP/1 upstream must not see: they become one field,
 * joined with "; ", where the first was. 0, or -1 (out of memory). */
static int cookies_join(h2_stream_t *hs)
{
    sws_request_t *r = &hs->st.req;
    unsigned n = 0;
    size_t len = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        if (sws_str_eq(r->headers[i].name, SWS_STR("cookie"))) {
            n++;
            len += r->headers[i].value.len + 2;
        }
    }
    if (n < 2)
        return 0;
    len -= 2;
    if (hbuf_reserve(hs, len) < 0) /* no value moves while it is copied */
        return -1;
    char *joined = hs->hbuf + hs->hlen, *o = joined;
    unsigned k = 0, first = 0, seen = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        sws_header_t hd = r->headers[i];
        if (sws_str_eq(hd.name, SWS_STR("cookie"))) {
            if (seen > 0)
                o = SWS_PUT_LIT(o, "; ");
            o = sws_put(o, hd.value.p, hd.value.len);
            if (seen++ > 0)
                continue; /* joined into the first */
            first = k;
        }
        r->headers[k++] = hd;
    }
    hs->hlen += len;
    r->headers[first].value = (sws_str_t){ joined, len };
    r->nheaders = k;
    return 0;
}

/* The head is complete (END_HEADERS): check it, then hand it to the head
 * handler (a body follows) or the handler (it does not). */
static void stream_head_done(sws_http2_t *h2, h2_stream_t *hs, int end_stream)
{
    sws_conn_set_t *s = h2->conn->set;
    sws_request_t *r = &hs->st.req;
    hs->head_done = 1;
    hs->remote_done = (uint8_t)end_stream;
    /* CONNECT's stream stays open for a tunnel we do not make: it is
     * answered from its head, as HTTP/1 answers it; what follows is
     * dropped. */
    if (r->method_id == HTTP_CONNECT) {
        end_stream = 1;
        hs->early = 1;
    }
    r->keep_alive = 1; /* the version was set when the stream began */
    r->is_head = r->method_id == HTTP_HEAD;
    const sws_str_t *cl = sws_request_header(r, "content-length");
    if (cl != NULL) {
        uint64_t v = 0;
        for (size_t i = 0; i < cl->len && v <= s->settings->max_body_size; i++)
            v = v * 10 + (uint64_t)(cl->p[i] - '0'); /* nghttp2 checked the digits */
        r->body_length = v;
    }
    r->body_chunked = !end_stream && cl == NULL; /* a length only the end tells */
    unsigned status = hs->refuse;
    if (status == 0 && cookies_join(hs) < 0)
        status = 500;
    /* After the join, which moves fields down over the cookies it merged. */
    const sws_str_t *expect = sws_request_header(r, "expect");
    if (status == 0 && r->host.len == 0) {
        const sws_str_t *host = sws_request_header(r, "host");
        if (host != NULL)
            r->host = *host;
    }
    if (status == 0 && split_target(r) < 0)
        status = 400;
    if (status == 0 && r->body_length > s->settings->max_body_size)
        status = 413;
    if (status == 0 && expect != NULL && !sws_str_caseeq_lit(*expect, "100-continue"))
        status = 417;
    r->table = s->table;
    r->settings = s->settings;
    if (status != 0) {
        sws_log_info("client %s: stream %d refused (%u)", sws_conn_peer_text(h2->conn), hs->id,
                     status);
        hs->early = 1;
        sws_stream_error(&hs->st, status);
        return;
    }
    hs->st.expect_continue = expect != NULL && !end_stream;
    if (!end_stream && s->head_handler != NULL) {
        r->route = NULL;
        s->head_handler(&hs->st);
        hs->early = (uint8_t)sws_stream_answered(&hs->st);
    }
    if (end_stream) {
        s->handler(&hs->st);
        if (!sws_stream_answered(&hs->st))
            sws_stream_error(&hs->st, 500);
        return;
    }
    stream_ask_continue(hs);
}

/* The client ended the body (END_STREAM after DATA, or trailers). */
static void stream_body_done(sws_http2_t *h2, h2_stream_t *hs)
{
    sws_conn_set_t *s = h2->conn->set;
    hs->remote_done = 1;
    if (hs->early) {
        if (hs->st.body != NULL)
            hs->st.body->end(&hs->st);
        return;
    }
    hs->st.req.table = s->table;
    hs->st.req.settings = s->settings;
    s->handler(&hs->st);
    if (!sws_stream_answered(&hs->st))
        sws_stream_error(&hs->st, 500);
}

/* ---- nghttp2's callbacks ---- */

static const sws_stream_sink_t h2_sink;

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    sws_http2_t *h2 = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    h2_stream_t *hs = stream_new(h2);
    if (hs == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* refuses the stream */
    hs->h2 = h2;
    hs->id = frame->hd.stream_id;
    sws_stream_start(&hs->st, h2->conn, &h2_sink);
    hs->st.req.version_major = 2; /* also for a head nghttp2 refuses */
    hs->st.req.version_minor = 0;
    hs->next = h2->streams;
    if (h2->streams != NULL)
        h2->streams->prev = hs;
    else
        h2->oldest = hs;
    h2->streams = hs;
    /* Rapid reset is judged per window of streams opened (count_reset). */
    if (h2->opened++ % SWS_HTTP2_RESET_WINDOW == 0)
        h2->resets = 0;
    h2->conn->head_started = 1; /* the header timer runs from here */
    nghttp2_session_set_stream_user_data(session, hs->id, hs);
    h2->last = hs; /* its fields come next */
    return 0;
}

/* A field of the request's trailers, kept after the head's fields (a
 * proxy to an HTTP/2 member passes them on: gRPC). The head's limits
 * bound head and trailers together; beyond them, or out of memory, the
 * stream is reset (nghttp2: INTERNAL_ERROR), not cut silently: a
 * trailer may carry the meaning of the body. */
static int trailer_field(sws_http2_t *h2, h2_stream_t *hs, const uint8_t *name, size_t namelen,
                         const uint8_t *value, size_t valuelen)
{
    sws_request_t *r = &hs->st.req;
    const sws_settings_t *st = h2->conn->set->settings;
    int over = hsize_over(hs, st, namelen, valuelen); /* as for the head */
    if (hs->reset_sent)
        return 0;
    if (over || r->nheaders + r->ntrailers >= sws_request_max_fields(st)) {
        sws_log_info("client %s: stream %d: request trailers too large",
                     sws_conn_peer_text(h2->conn), hs->id);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (field_add(hs, &r->headers[r->nheaders + r->ntrailers], name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    r->ntrailers++;
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags;
    sws_http2_t *h2 = user;
    h2_stream_t *hs = stream_get(h2, frame->hd.stream_id);
    if (hs == NULL)
        return 0;
    if (hs->head_done)
        return trailer_field(h2, hs, name, namelen, value, valuelen);
    (void)session;
    sws_request_t *r = &hs->st.req;
    const sws_settings_t *st = h2->conn->set->settings;
    if (hsize_over(hs, st, namelen, valuelen))
        hs->refuse = 431;
    if (hs->refuse != 0)
        return 0; /* decoded (the HPACK state must follow) but not kept */
    int rc = 0;
    sws_str_t n = { (const char *)name, namelen };
    if (namelen > 0 && name[0] == ':') {
        if (sws_str_eq(n, SWS_STR(":method"))) {
            rc = hbuf_slice(hs, value, valuelen, &r->method);
            if (rc == 0 && method_id(r->method, &r->method_id) < 0)
                hs->refuse = 501;
        } else if (sws_str_eq(n, SWS_STR(":path"))) {
            rc = hbuf_slice(hs, value, valuelen, &r->target);
        } else if (sws_str_eq(n, SWS_STR(":authority"))) {
            rc = hbuf_slice(hs, value, valuelen, &r->host);
        }
        return rc < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
    }
    if (r->nheaders >= sws_request_max_fields(st)) {
        hs->refuse = 431;
        return 0;
    }
    if (field_add(hs, &r->headers[r->nheaders], name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    r->nheaders++;
    return 0;
}

/* Give back n bytes of the client's window on stream id (and the
 * connection's): bytes nobody keeps. */
static void window_give(sws_http2_t *h2, h2_stream_t *hs, size_t n)
{
    if (n > 0)
        nghttp2_session_consume(h2->session, hs->id, n);
}

/* n body bytes for the stream's consumer. The stream's window opens again
 * for what the consumer took while it had room (a full consumer holds the
 * client to the window it has); the connection's only once the consumer
 * passed them on, so that all streams together hold at most the budget
 * (the connection's window) and a client at it waits for its window. The
 * consumer says so with sws_stream_body_resume, which st.body_full asks of
 * it whatever data() answers; set before the call, which may pass the
 * bytes on at once. */
static void body_take(sws_http2_t *h2, h2_stream_t *hs, const uint8_t *data, size_t len)
{
    hs->st.body_full = 1;
    hs->held += len;
    h2->held += len;
    if (h2->held > h2->held_peak)
        h2->held_peak = h2->held;
    if (hs->st.body->data(&hs->st, (const char *)data, len) || hs->unconsumed > 0)
        hs->unconsumed += len;
    else
        nghttp2_session_consume_stream(h2->session, hs->id, len);
    sweep_mark(hs); /* the connection's window, maybe the stream's, owed */
    if (!h2->budget_met && nghttp2_session_get_local_window_size(h2->session) <= 0) {
        h2->budget_met = 1;
        sws_log_debug("client %s: HTTP/2: request bodies held reach the connection's budget "
                      "(%zu bytes): the client waits for its window",
                      sws_conn_peer_text(h2->conn), h2->held);
    }
}

/* The consumer passed on all it held (or is gone): both windows open. */
static void body_given_back(sws_http2_t *h2, h2_stream_t *hs)
{
    if (hs->unconsumed > 0)
        nghttp2_session_consume_stream(h2->session, hs->id, hs->unconsumed);
    if (hs->held > 0)
        nghttp2_session_consume_connection(h2->session, hs->held);
    h2->held -= hs->held;
    hs->held = hs->unconsumed = 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    (void)flags;
    sws_http2_t *h2 = user;
    h2_stream_t *hs = stream_get(h2, id);
    if (hs == NULL) {
        nghttp2_session_consume_connection(session, len);
        return 0;
    }
    sws_request_t *r = &hs->st.req;
    r->request_body_bytes += len;
    if (hs->reset_sent || (hs->early && hs->st.body == NULL)) {
        window_give(h2, hs, len); /* answered from the head: dropped */
        return 0;
    }
    if (r->request_body_bytes > r->settings->max_body_size) {
        window_give(h2, hs, len);
        hs->reset_sent = 1;
        sws_log_info("client %s: stream %d: request body too large", sws_conn_peer_text(h2->conn),
                     id);
        /* Before the response (a proxy may be relaying the body already):
         * the producer is dropped and 413 answers; after it, the stream
         * can only be cut. */
        if (hs->st.phase < SWS_STREAM_RESPONSE) {
            sws_stream_drop_source(&hs->st);
            hs->early = 1;
            sws_stream_error(&hs->st, 413);
        } else {
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        }
        return 0;
    }
    if (hs->st.body == NULL) {
        window_give(h2, hs, len); /* a local action: the body is dropped */
        return 0;
    }
    body_take(h2, hs, data, len);
    return 0;
}

/* Rapid reset (CVE-2023-44487): streams opened and reset before their
 * answer cost us their work and the client nothing. A client may reset
 * some; one that resets more than SWS_HTTP2_RESET_FLOOR of a window of
 * SWS_HTTP2_RESET_WINDOW streams opened is told to calm down and cut off.
 * Only resets before our END_STREAM count, whatever the other streams do
 * (streams answered in between do not dilute them), and counting per
 * stream opened rather than per second keeps the verdict independent of
 * timing. */
static void count_reset(sws_http2_t *h2, const h2_stream_t *hs)
{
    if (hs == NULL || hs->end_sent)
        return; /* answered already: it cost what a request costs */
    h2->resets++;
    if (h2->resets > SWS_HTTP2_RESET_FLOOR && !h2->dead) {
        sws_log_info("client %s: %u streams reset before their answer, of %u opened: connection "
                     "closed",
                     sws_conn_peer_text(h2->conn), h2->resets,
                     (unsigned)((h2->opened - 1) % SWS_HTTP2_RESET_WINDOW + 1));
        nghttp2_session_terminate_session(h2->session, NGHTTP2_ENHANCE_YOUR_CALM);
        h2->dead = 1;
    }
}

/* The GOAWAY naming the last stream we took: what is in flight finishes,
 * nothing new starts; nghttp2 then wants to read only while streams are
 * open, so the connection closes after them (h2_pump). */
static void goaway_final(sws_http2_t *h2)
{
    if (h2->goaway_final)
        return;
    h2->goaway_final = 1;
    nghttp2_submit_goaway(h2->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h2->session), NGHTTP2_NO_ERROR,
                          NULL, 0);
}

/* The opaque data of the PING sent with the shutdown notice. */
static const uint8_t drain_ping[8] = { 's', 'w', 's', '-', 's', 't', 'o', 'p' };

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    (void)session;
    sws_http2_t *h2 = user;
    h2_stream_t *hs = frame->hd.stream_id != 0 ? stream_get(h2, frame->hd.stream_id) : NULL;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (hs == NULL)
            break;
        if (!hs->head_done && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            h2->ndispatch += !hs->dispatch;
            hs->dispatch = 1; /* a RST_STREAM later in this read spares its work */
        }
        else if (!hs->head_done)
            stream_head_done(h2, hs, 0);
        else if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            stream_body_done(h2, hs); /* trailers */
        break;
    case NGHTTP2_DATA:
        if (hs != NULL && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !hs->reset_sent)
            stream_body_done(h2, hs);
        break;
    case NGHTTP2_RST_STREAM:
        if (hs != NULL)
            hs->peer_reset = 1;
        count_reset(h2, hs);
        break;
    case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && h2->goaway &&
            memcmp(frame->ping.opaque_data, drain_ping, sizeof(drain_ping)) == 0)
            goaway_final(h2); /* a round trip after the notice */
        break;
    default:
        break;
    }
    return 0;
}

/* nghttp2 refused a stream's request and resets it: the exchange is
 * logged 400 at its release unless a response had begun. One info line
 * per stream. */
static void stream_invalid(sws_http2_t *h2, h2_stream_t *hs, const char *why)
{
    if (hs->invalid)
        return;
    hs->invalid = 1;
    sws_log_info("client %s: stream %d refused: %s", sws_conn_peer_text(h2->conn), hs->id, why);
}

/* A malformed head (pseudo-headers, connection-specific fields). */
static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame, int lib_error,
                            void *user)
{
    (void)session;
    h2_stream_t *hs = frame->hd.stream_id != 0 ? stream_get(user, frame->hd.stream_id) : NULL;
    if (hs != NULL)
        stream_invalid(user, hs, nghttp2_strerror(lib_error));
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *user)
{
    (void)session;
    h2_stream_t *hs = stream_get(user, id);
    /* nghttp2 resets a body that disagrees with its content-length
     * without calling on_invalid_frame. */
    if (hs != NULL && error_code == NGHTTP2_PROTOCOL_ERROR && !hs->peer_reset)
        stream_invalid(user, hs, "body length differs from content-length");
    if (hs != NULL) {
        hs->closed = 1; /* released after nghttp2 returns: the producer may still be in a call */
        sweep_mark(hs);
    }
    return 0;
}

/* Our response ended (END_STREAM went out) before the client's request
 * did (a 413, an answer from the head, a proxied answer that did not wait
 * for the body): the rest of its body is not wanted (RFC 9113 8.1:
 * RST_STREAM NO_ERROR), and its consumer takes no more, so the client
 * stops sending and no body timer runs for it. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    h2_stream_t *hs = stream_get(user, frame->hd.stream_id);
    if (hs != NULL && frame->hd.type == NGHTTP2_DATA && frame->hd.length > 0)
        hs->stall_ms = 0; /* bytes went: a stall that follows starts afresh */
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    if (hs != NULL)
        hs->end_sent = 1;
    if (hs != NULL && !hs->remote_done) {
        hs->reset_sent = 1;
        hs->st.body = NULL;
        hs->st.body_full = 0; /* what it held is given back by the next sweep */
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

/* ---- the response: the sink ---- */

/* The producer gave bytes or ended: have nghttp2 pull them, and the
 * connection write them when the producer ran outside its turn. */
static void stream_kick(h2_stream_t *hs)
{
    sws_conn_t *c = hs->st.req.conn;
    if (hs->deferred) {
        hs->deferred = 0;
        nghttp2_session_resume_data(hs->h2->session, hs->id);
    }
    if (!c->running && c->phase == SWS_CONN_ACTIVE) {
        c->want_writable = 1;
        sws_conn_wake(c);
    }
}

static void trailers_submit(h2_stream_t *hs);

static ssize_t data_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
    (void)session;
    (void)id;
    (void)user;
    h2_stream_t *hs = source->ptr;
    size_t n = hs->olen < length ? hs->olen : length;
    if (n == 0 && !hs->data_eof) {
        hs->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    memcpy(buf, hs->obuf + hs->ooff, n);
    hs->ooff += n;
    hs->olen -= n;
    if (hs->olen == 0)
        hs->ooff = 0;
    if (hs->olen == 0 && hs->data_eof) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (hs->st.ntrailers > 0) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            trailers_submit(hs);
        }
    }
    return (ssize_t)n;
}

/* Fields a response may not carry in HTTP/2 (connection-specific) or
 * whose work the framing does (Content-Length is ours, from st->length). */
static int field_dropped(sws_str_t name)
{
    const sws_http_token_t *t = sws_http_token_find(name.p, name.len);
    return t != NULL && (t->flags & (SWS_TKF_H2_FORBIDDEN | SWS_TKF_HOP_BY_HOP | SWS_TKF_FRAMING));
}

/* Room for n name/value pairs in the connection's scratch array, which
 * every submit reuses (nghttp2 copies the pairs it is given). NULL when
 * out of memory. */
static nghttp2_nv *nv_scratch(sws_http2_t *h2, size_t n)
{
    if (n > h2->nvcap) {
        size_t cap = h2->nvcap < 16 ? 16 : h2->nvcap;
        while (cap < n)
            cap *= 2;
        nghttp2_nv *nv = realloc(h2->nv, sizeof(*nv) * cap);
        if (nv == NULL)
            return NULL;
        h2->nv = nv;
        h2->nvcap = cap;
    }
    return h2->nv;
}

/* nv[first..) for the fields h[0..n) a response may carry. Their names
 * go as the producer wrote them: nghttp2 lower-cases the names it copies
 * (its submit functions say so). Returns the count. */
static size_t nv_fields(nghttp2_nv *nv, size_t first, const sws_header_t *h, unsigned n)
{
    size_t k = first;
    for (unsigned i = 0; i < n; i++) {
        if (field_dropped(h[i].name))
            continue;
        nv[k++] = (nghttp2_nv){ (uint8_t *)h[i].name.p, (uint8_t *)h[i].value.p, h[i].name.len,
                                h[i].value.len, NGHTTP2_NV_FLAG_NONE };
    }
    return k;
}

/* A name we spell in lower case and that lives as long as the program:
 * nghttp2 need not copy it. */
#define NV(name, value, vlen) \
    ((nghttp2_nv){ (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, (vlen), \
                   NGHTTP2_NV_FLAG_NO_COPY_NAME })

static void trailers_submit(h2_stream_t *hs)
{
    const sws_header_t *t = hs->st.trailers;
    unsigned n = hs->st.ntrailers;
    nghttp2_nv *nv = nv_scratch(hs->h2, n);
    if (nv == NULL) {
        nghttp2_submit_rst_stream(hs->h2->session, NGHTTP2_FLAG_NONE, hs->id,
                                  NGHTTP2_INTERNAL_ERROR);
        return;
    }
    size_t k = nv_fields(nv, 0, t, n);
    nghttp2_submit_trailer(hs->h2->session, hs->id, nv, k); /* copies */
}

/* A head: :status, then what we add (date, server, content-length), then
 * the producer's fields. provider: with a body (DATA follows). 0 or -1. */
static int submit_head(h2_stream_t *hs, unsigned status, const sws_header_t *h, unsigned n,
                       int provider, int final)
{
    sws_conn_t *c = hs->st.req.conn;
    sws_conn_set_t *s = c->set;
    char st3[3] = { (char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
                    (char)('0' + status % 10) };
    char len[SWS_FMT_U64_MAX];
    enum { OURS = 4 };
    nghttp2_nv *nv = nv_scratch(hs->h2, (size_t)n + OURS);
    if (nv == NULL)
        return -1;
    size_t k = 0;
    nv[k++] = NV(":status", st3, sizeof(st3));
    if (final) {
        nv[k++] = NV("date", s->loop->http_date, s->loop->http_date_len);
        if (s->server_name.len > 0)
            nv[k++] = NV("server", s->server_name.p, s->server_name.len);
        if (hs->st.length != SWS_STREAM_LENGTH_UNKNOWN && status != 204 && status != 304)
            nv[k++] = NV("content-length", len, (size_t)(sws_put_u64(len, hs->st.length) - len));
    }
    k = nv_fields(nv, k, h, n);
    int rc;
    if (!final) {
        rc = nghttp2_submit_headers(hs->h2->session, NGHTTP2_FLAG_NONE, hs->id, NULL, nv, k,
                                    NULL);
    } else {
        nghttp2_data_provider dp = { .source.ptr = hs, .read_callback = data_read };
        rc = nghttp2_submit_response(hs->h2->session, hs->id, nv, k, provider ? &dp : NULL);
        hs->responding = (uint8_t)(rc == 0 && provider);
    }
    if (rc != 0)
        return -1;
    stream_kick(hs);
    return 0;
}

/* Bytes for a stream whose client is gone are taken and dropped, so that
 * no producer waits on it. */
static int sink_gone(const h2_stream_t *hs)
{
    return hs->st.req.conn->phase == SWS_CONN_CLOSED || hs->closed;
}

static int sink_head(sws_stream_t *st, const sws_header_t *h, unsigned n, size_t body_room)
{
    (void)body_room;
    h2_stream_t *hs = h2s_of(st);
    if (sink_gone(hs))
        return 0;
    unsigned status = st->req.status;
    int body = !st->no_body && st->length != 0 && status != 204 && status != 304;
    return submit_head(hs, status, h, n, body, 1);
}

/* Room for up to want more body bytes in the stream's buffer, which
 * holds at most SWS_HTTP2_STREAM_BUF: the buffer is made or grown to
 * take them (as large as the response needs, so that a small one keeps a
 * small buffer, which a spare keeps). 0 when full or out of memory. */
static size_t out_room(h2_stream_t *hs, size_t want)
{
    if (hs->ooff > 0 && hs->olen > 0) {
        memmove(hs->obuf, hs->obuf + hs->ooff, hs->olen);
    }
    hs->ooff = 0;
    size_t room = SWS_HTTP2_STREAM_BUF - hs->olen;
    if (want < room)
        room = want;
    if (hs->ocap - hs->olen < room) {
        size_t cap = hs->ocap < H2_OBUF_MIN ? H2_OBUF_MIN : hs->ocap;
        while (cap - hs->olen < room)
            cap *= 2;
        if (cap > SWS_HTTP2_STREAM_BUF)
            cap = SWS_HTTP2_STREAM_BUF;
        char *b = realloc(hs->obuf, cap);
        if (b == NULL)
            return 0;
        hs->obuf = b;
        hs->ocap = cap;
    }
    return room;
}

/* The sink refused bytes: the sweep resumes the producer once there is
 * room. */
static void resume_owed(h2_stream_t *hs)
{
    hs->want_resume = 1;
    sweep_mark(hs);
}

static size_t sink_data(sws_stream_t *st, const char *p, size_t n)
{
    h2_stream_t *hs = h2s_of(st);
    if (sink_gone(hs))
        return n;
    size_t take = out_room(hs, n);
    if (take < n)
        resume_owed(hs);
    if (take == 0)
        return 0;
    memcpy(hs->obuf + hs->olen, p, take);
    hs->olen += take;
    stream_kick(hs);
    return take;
}

static size_t sink_room(const sws_stream_t *st)
{
    /* A source asks before it reads: a full buffer owes it a resume. */
    h2_stream_t *hs = h2s_of(st);
    if (sink_gone(hs))
        return SIZE_MAX;
    size_t room = SWS_HTTP2_STREAM_BUF - hs->olen;
    if (room == 0)
        resume_owed(hs);
    return room;
}

/* A file is read into the stream's buffer a piece at a time: its bytes
 * go inside DATA frames, which sendfile cannot make. */
static int64_t sink_file(sws_stream_t *st, int fd, off_t off, uint64_t len)
{
    h2_stream_t *hs = h2s_of(st);
    if (sink_gone(hs))
        return (int64_t)len;
    size_t want = out_room(hs, len < SWS_HTTP2_STREAM_BUF ? (size_t)len : SWS_HTTP2_STREAM_BUF);
    if (want < len)
        resume_owed(hs);
    if (want == 0)
        return 0;
    ssize_t n = pread(fd, hs->obuf + hs->olen, want, off);
    if (n <= 0) {
        if (n == 0)
            errno = 0; /* the file shrank */
        return -1;
    }
    hs->olen += (size_t)n;
    stream_kick(hs);
    return n;
}

static int sink_end(sws_stream_t *st, const sws_header_t *t, unsigned n)
{
    (void)t;
    (void)n; /* they are st->trailers, kept until the release: data_read sends them */
    h2_stream_t *hs = h2s_of(st);
    hs->data_eof = 1;
    if (!sink_gone(hs))
        stream_kick(hs);
    return 1;
}

static int sink_retract(sws_stream_t *st)
{
    (void)st;
    return -1; /* the HEADERS are queued in nghttp2 already */
}

static int sink_interim(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n)
{
    h2_stream_t *hs = h2s_of(st);
    if (status == 101)
        return -1; /* no Upgrade in HTTP/2 (RFC 9113 8.6) */
    if (sink_gone(hs))
        return 0;
    return submit_head(hs, status, h, n, 0, 0);
}

static int sink_upgrade(sws_stream_t *st, const sws_proto_ops_t *ops, void *state)
{
    (void)st;
    (void)ops;
    (void)state;
    return -1;
}

static void sink_abort(sws_stream_t *st)
{
    h2_stream_t *hs = h2s_of(st);
    if (sink_gone(hs))
        return;
    nghttp2_submit_rst_stream(hs->h2->session, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_INTERNAL_ERROR);
    stream_kick(hs);
}

static const sws_stream_sink_t h2_sink = {
    .head = sink_head,
    .data = sink_data,
    .room = sink_room,
    .file = sink_file,
    .end = sink_end,
    .retract = sink_retract,
    .interim = sink_interim,
    .upgrade = sink_upgrade,
    .abort = sink_abort,
};

/* ---- the connection ---- */

/* Frames into the output while it is below its mark. 0, or -1 (fatal:
 * the connection was closed). */
static int h2_send(sws_conn_t *c, sws_http2_t *h2)
{
    while (!h2->ended && !sws_conn_output_blocked(c)) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h2->session, &data);
        if (n < 0) {
            sws_log_error("client %s: HTTP/2: %s", sws_conn_peer_text(c), nghttp2_strerror((int)n));
            sws_conn_close(c);
            return -1;
        }
        if (n == 0)
            return 0;
        if (sws_conn_append(c, data, (size_t)n) < 0) {
            sws_log_error("client %s: HTTP/2: no memory for output", sws_conn_peer_text(c));
            sws_conn_close(c);
            return -1;
        }
    }
    /* Stopped at the mark with more to frame: conn.c calls writable once
     * the output drained. */
    if (!h2->ended && nghttp2_session_want_write(h2->session))
        c->want_writable = 1;
    return 0;
}

/* Streams nghttp2 closed are released; those whose sink refused bytes
 * and has room again are resumed; the windows of bodies passed on are
 * given back. 1 when one was resumed or a window given back (there may
 * be more to send: a WINDOW_UPDATE). */
static int h2_sweep(sws_http2_t *h2)
{
    int resumed = 0;
    h2_stream_t *next;
    for (h2_stream_t *hs = h2->streams; hs != NULL && h2->nsweep > 0; hs = next) {
        next = hs->next;
        if (!hs->swept)
            continue;
        if (hs->closed) {
            stream_release(h2, hs);
            continue;
        }
        if (!hs->st.body_full && hs->held > 0) {
            body_given_back(h2, hs); /* the consumer resumed, or was dropped */
            resumed = 1;
        }
        if (hs->want_resume && hs->olen < SWS_HTTP2_STREAM_BUF) {
            hs->want_resume = 0;
            sws_stream_resume(&hs->st); /* may refuse again: resume_owed marks it anew */
            resumed = 1;
        }
        /* Unmarked once nothing is owed; closed during the resume, it
         * stays marked for its release. */
        if (!hs->closed && hs->held == 0 && !hs->want_resume) {
            hs->swept = 0;
            h2->nsweep--;
        }
    }
    return resumed;
}

/* Graceful stop (RFC 9113 6.8): a shutdown notice (GOAWAY naming the
 * largest stream id) with a PING; the final GOAWAY goes when the PING is
 * acknowledged, one round trip later, so that streams the client sent
 * before it saw the notice are taken rather than refused. A client that
 * does not acknowledge gets it at the header timeout (http2_fail). At the
 * keep-alive timeout (not draining) the final GOAWAY goes at once. */
static void h2_drain(sws_conn_t *c)
{
    sws_http2_t *h2 = h2_of(c);
    if (h2 == NULL || h2->session == NULL) {
        c->close_after = 1;
        return;
    }
    if (h2->dead)
        return; /* its GOAWAY is out or queued */
    if (c->set->draining && !h2->goaway && !h2->goaway_final) {
        h2->goaway = 1;
        nghttp2_submit_shutdown_notice(h2->session);
        nghttp2_submit_ping(h2->session, NGHTTP2_FLAG_NONE, drain_ping);
    } else {
        goaway_final(h2);
    }
    sws_conn_wake(c);
}

/* The client's window holds back a response we have not finished (with
 * or without bytes waiting in the stream's buffer: the END_STREAM waits
 * too). */
static int stream_stalled(const sws_http2_t *h2, const h2_stream_t *hs)
{
    return !hs->closed && !hs->cut && hs->responding && !hs->end_sent &&
           (nghttp2_session_get_stream_remote_window_size(h2->session, hs->id) <= 0 ||
            nghttp2_session_get_remote_window_size(h2->session) <= 0);
}

/* Stamp when each stall began; DATA going out clears the stamp
 * (on_frame_send), so only a stall without progress grows old. */
static void stalls_update(sws_http2_t *h2)
{
    uint64_t now = sws_loop_now_ms(h2->conn->set->loop);
    for (h2_stream_t *hs = h2->streams; hs != NULL; hs = hs->next) {
        if (!stream_stalled(h2, hs))
            hs->stall_ms = 0;
        else if (hs->stall_ms == 0)
            hs->stall_ms = now > 0 ? now : 1;
    }
}

/* The body timer ended while responses wait for the client's window:
 * those stalled for a whole body timeout are reset (RST_STREAM CANCEL),
 * as HTTP/1's send timeout cuts a reader that takes nothing; the others
 * go on. 1 when the timer was about stalls (the connection lives on if
 * a stream does), 0 when none waits for the window. */
static int stalls_cut(sws_conn_t *c, sws_http2_t *h2)
{
    uint64_t now = sws_loop_now_ms(c->set->loop);
    int stalls = 0;
    for (h2_stream_t *hs = h2->streams; hs != NULL; hs = hs->next) {
        if (!stream_stalled(h2, hs))
            continue;
        stalls = 1;
        if (hs->stall_ms == 0 || now - hs->stall_ms < c->set->settings->body_timeout_ms)
            continue;
        sws_log_info("client %s: stream %d: the client's window held its response back: reset",
                     sws_conn_peer_text(c), hs->id);
        hs->cut = 1;
        nghttp2_submit_rst_stream(h2->session, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_CANCEL);
    }
    return stalls;
}

/* Send what there is, release what ended, resume what has room, until
 * nothing moves or the output is full; close once the session is over. */
static void h2_pump(sws_conn_t *c, sws_http2_t *h2)
{
    for (unsigned round = 0; round < 2 * SWS_HTTP2_MAX_STREAMS; round++) {
        if (h2_send(c, h2) < 0)
            return;
        if (!h2_sweep(h2) || sws_conn_output_blocked(c))
            break;
    }
    h2_sweep(h2);
    /* Torn down and its last frames (GOAWAY) queued: no stream will move
     * again, and a connection that lingers holds none of them. */
    if (h2->dead && !h2->ended && !nghttp2_session_want_write(h2->session)) {
        while (h2->streams != NULL)
            stream_release(h2, h2->streams);
        h2->ended = 1;
    }
    stalls_update(h2);
    if (!nghttp2_session_want_read(h2->session) && !nghttp2_session_want_write(h2->session))
        c->close_after = 1;
}

/* The requests complete with their head that this read brought, in the
 * order they came (the list is newest first), but those the client reset
 * in the same read: a rapid reset costs no handler's work (a proxy
 * connect). */
static void streams_dispatch(sws_http2_t *h2)
{
    for (h2_stream_t *hs = h2->oldest; hs != NULL && h2->ndispatch > 0; hs = hs->prev) {
        if (!hs->dispatch)
            continue;
        hs->dispatch = 0;
        h2->ndispatch--;
        if (!hs->closed && !h2->dead)
            stream_head_done(h2, hs, 1);
    }
}

static void http2_on_input(sws_conn_t *c)
{
    sws_http2_t *h2 = h2_of(c);
    if (h2->session == NULL) {
        sws_conn_close(c);
        return;
    }
    if (c->set->draining && !h2->goaway)
        h2_drain(c); /* switched to while draining */
    /* A client that does not read is not read either (PING, SETTINGS and
     * their acknowledgements would pile up). */
    if (!h2->dead && c->rpos < c->rend && !sws_conn_output_blocked(c)) {
        /* nghttp2 takes all of it: header bytes are copied, body bytes
         * go to their consumer, so nothing points into the buffer. */
        h2->taken += c->rend - c->rpos;
        ssize_t n = nghttp2_session_mem_recv(h2->session, (const uint8_t *)c->rbuf + c->rpos,
                                             c->rend - c->rpos);
        if (n < 0) {
            sws_log_info("client %s: HTTP/2: %s", sws_conn_peer_text(c), nghttp2_strerror((int)n));
            h2->dead = 1;
            if (n != NGHTTP2_ERR_BAD_CLIENT_MAGIC && n != NGHTTP2_ERR_FLOODED)
                nghttp2_session_terminate_session(h2->session, NGHTTP2_PROTOCOL_ERROR);
        }
        streams_dispatch(h2);
        c->rpos = c->rend = c->msg_start = 0;
    }
    if (h2->dead) {
        c->rpos = c->rend = c->msg_start = 0; /* what a dead session left is dropped */
        c->input_paused = 1;
    }
    h2_pump(c, h2);
    if (c->phase == SWS_CONN_ACTIVE && h2->dead && !nghttp2_session_want_write(h2->session))
        c->close_after = 1;
}

static enum sws_proto_wait http2_waiting_for(const sws_conn_t *c);

/* Streams that are neither closed nor being reset by us. */
static unsigned streams_alive(const sws_http2_t *h2)
{
    unsigned n = 0;
    for (const h2_stream_t *hs = h2->streams; hs != NULL; hs = hs->next)
        n += !hs->closed && !hs->cut;
    return n;
}

static void http2_fail(sws_conn_t *c, unsigned status, const char *why)
{
    sws_http2_t *h2 = h2_of(c);
    /* Only the body timer armed for a stall spares the connection (not a
     * header timeout, which a stall must not extend). */
    if (status == 408 && !h2->dead && http2_waiting_for(c) == SWS_PROTO_WAIT_WINDOW &&
        stalls_cut(c, h2) && streams_alive(h2)) {
        h2_pump(c, h2);
        return;
    }
    sws_log_info("client %s: HTTP/2: %s (%u)", sws_conn_peer_text(c),
                 status == 408 ? "a stream's head or body, or the client's window, stalled" : why,
                 status);
    if (h2->dead) {
        c->close_after = 1;
        return;
    }
    h2->dead = 1;
    nghttp2_session_terminate_session(h2->session, NGHTTP2_NO_ERROR);
    h2_pump(c, h2);
    c->close_after = 1;
}

/* What the connection waits for, for conn.c's one timer: a head in
 * progress (header timeout), a body, or a response stalled by the
 * client's flow-control window (body timeout), nothing from the client
 * (a producer at work: its own timers), no stream at all (keep-alive). */
static enum sws_proto_wait http2_waiting_for(const sws_conn_t *c)
{
    const sws_http2_t *h2 = h2_of(c);
    if (h2 == NULL || h2->session == NULL)
        return SWS_PROTO_WAIT_NOTHING;
    int body = 0, response = 0, window = 0;
    /* A client held to the budget waits on our consumers, not on itself. */
    int budget = h2->held > 0 && nghttp2_session_get_local_window_size(h2->session) <= 0;
    for (const h2_stream_t *hs = h2->streams; hs != NULL; hs = hs->next) {
        if (hs->closed)
            continue;
        if (!hs->head_done)
            return SWS_PROTO_WAIT_HEAD;
        /* Stamped by stalls_update at the end of the pump that every
         * change of a window or of the stream's state ends with (a read,
         * a write, a producer's wake-up, a timer): no window lookup. */
        if (hs->stall_ms != 0)
            window = 1;
        else if (!hs->remote_done && hs->unconsumed == 0 && !hs->reset_sent && !budget)
            body = 1;
        else
            response = 1;
    }
    /* A stall first: input, which re-arms the body timer, would keep it. */
    if (window)
        return SWS_PROTO_WAIT_WINDOW;
    if (body)
        return SWS_PROTO_WAIT_BODY;
    if (response)
        return SWS_PROTO_WAIT_RESPONSE;
    if (h2->dead)
        return SWS_PROTO_WAIT_NOTHING;
    /* The client owes the shutdown notice's PING acknowledgement: bounded
     * like a head, by the header timeout (then http2_fail's GOAWAY). */
    if (h2->goaway && !h2->goaway_final)
        return SWS_PROTO_WAIT_HEAD;
    return SWS_PROTO_WAIT_IDLE;
}

/* A producer waiting on someone else (the proxy) is cancelled when the
 * client is gone, as HTTP/1 does (ADR 0025). */
static int http2_client_gone(sws_conn_t *c)
{
    for (const h2_stream_t *hs = h2_of(c)->streams; hs != NULL; hs = hs->next)
        if (hs->st.source != NULL && !sws_stream_ended(&hs->st))
            return 1;
    return 0;
}

/* ---- nghttp2's memory ----
 * A stream costs nghttp2 four allocations and five frees (its stream, the
 * HEADERS and DATA items, the fields' copy, ...), each from a size class
 * whose glibc cache the streams in flight overflow. Freed blocks of up to
 * 512 bytes stay with the connection (at most H2_MEM_KEEP per class) for
 * the next stream; larger ones are malloc's. */

static unsigned h2_mem_class(size_t size)
{
    unsigned cls = 0;
    for (size_t cap = H2_MEM_SMALLEST; cls < H2_MEM_CLASSES && cap < size; cap *= 2)
        cls++;
    return cls;
}

static size_t h2_mem_cap(unsigned cls)
{
    return (size_t)H2_MEM_SMALLEST << cls;
}

static void *h2_mem_malloc(size_t size, void *user)
{
    sws_http2_t *h2 = user;
    unsigned cls = h2_mem_class(size);
    h2_block_head_t *head;
    if (cls < H2_MEM_CLASSES && h2->blocks[cls] != NULL) {
        h2_block_t *b = h2->blocks[cls];
        h2->blocks[cls] = b->next;
        h2->nblocks[cls]--;
        head = (h2_block_head_t *)b - 1;
    } else {
        head = malloc(sizeof(*head) + (cls < H2_MEM_CLASSES ? h2_mem_cap(cls) : size));
        if (head == NULL)
            return NULL;
        head->cls = cls;
    }
    return head + 1;
}

static void h2_mem_free(void *p, void *user)
{
    sws_http2_t *h2 = user;
    if (p == NULL)
        return;
    h2_block_head_t *head = (h2_block_head_t *)p - 1;
    unsigned cls = head->cls;
    if (cls >= H2_MEM_CLASSES || h2->nblocks[cls] >= H2_MEM_KEEP) {
        free(head);
        return;
    }
    h2_block_t *b = p;
    b->next = h2->blocks[cls];
    h2->blocks[cls] = b;
    h2->nblocks[cls]++;
}

static void *h2_mem_calloc(size_t nmemb, size_t size, void *user)
{
    if (size != 0 && nmemb > SIZE_MAX / size)
        return NULL;
    void *p = h2_mem_malloc(nmemb * size, user);
    if (p != NULL)
        memset(p, 0, nmemb * size);
    return p;
}

static void *h2_mem_realloc(void *p, size_t size, void *user)
{
    if (p == NULL)
        return h2_mem_malloc(size, user);
    h2_block_head_t *head = (h2_block_head_t *)p - 1;
    if (head->cls >= H2_MEM_CLASSES && h2_mem_class(size) >= H2_MEM_CLASSES) {
        h2_block_head_t *grown = realloc(head, sizeof(*head) + size);
        return grown != NULL ? grown + 1 : NULL;
    }
    if (head->cls < H2_MEM_CLASSES && size <= h2_mem_cap(head->cls))
        return p;
    void *q = h2_mem_malloc(size, user);
    if (q == NULL)
        return NULL;
    /* A class block grows (its bytes, all of them), or a larger block
     * shrinks into a class (size of its bytes). */
    size_t keep = head->cls < H2_MEM_CLASSES ? h2_mem_cap(head->cls) : size;
    memcpy(q, p, keep < size ? keep : size);
    h2_mem_free(p, user);
    return q;
}

/* The connection's kept blocks, once its session is gone. */
static void h2_mem_drop(sws_http2_t *h2)
{
    for (unsigned cls = 0; cls < H2_MEM_CLASSES; cls++) {
        while (h2->blocks[cls] != NULL) {
            h2_block_t *b = h2->blocks[cls];
            h2->blocks[cls] = b->next;
            free((h2_block_head_t *)b - 1);
        }
        h2->nblocks[cls] = 0;
    }
}

static nghttp2_session_callbacks *callbacks;

static int session_new(sws_http2_t *h2)
{
    if (callbacks == NULL) {
        if (nghttp2_session_callbacks_new(&callbacks) != 0)
            return -1;
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, on_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, on_invalid_frame);
    }
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0)
        return -1;
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    h2->mem = (nghttp2_mem){ h2, h2_mem_malloc, h2_mem_free, h2_mem_calloc, h2_mem_realloc };
    int rc = nghttp2_session_server_new3(&h2->session, callbacks, h2, opt, &h2->mem);
    nghttp2_option_del(opt);
    if (rc != 0) {
        h2->session = NULL;
        return -1;
    }
    const sws_settings_t *st = h2->conn->set->settings;
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SWS_HTTP2_MAX_STREAMS },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, SWS_HTTP2_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, st->max_header_size },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
    };
    if (nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
        return -1;
    /* The connection's window is the budget (a WINDOW_UPDATE: SETTINGS
     * cannot set it); body_take keeps it there. */
    return nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0,
                                                 SWS_HTTP2_BODY_BUDGET);
}

/* Switched to (worker/http2.h) with no state: the state is ours to make.
 * A failure leaves a state without a session, which on_input closes. */
static void http2_init(sws_conn_t *c)
{
    sws_http2_t *h2 = calloc(1, sizeof(*h2));
    if (h2 == NULL) {
        static sws_http2_t none;
        sws_log_error("client %s: no memory for HTTP/2", sws_conn_peer_text(c));
        c->proto_state = &none;
        return;
    }
    c->proto_state = h2;
    h2->conn = c;
    if (session_new(h2) < 0)
        sws_log_error("client %s: cannot start an HTTP/2 session", sws_conn_peer_text(c));
}

static void http2_close(sws_conn_t *c)
{
    sws_http2_t *h2 = h2_of(c);
    if (h2 == NULL || h2->conn == NULL)
        return;
    while (h2->streams != NULL)
        stream_release(h2, h2->streams);
    while (h2->spare != NULL) {
        h2_stream_t *hs = h2->spare;
        h2->spare = hs->next;
        stream_destroy(hs);
    }
    sws_log_debug("client %s: HTTP/2: closed after taking %llu bytes from the client; request "
                  "bodies held at most %zu bytes at once (budget %u)",
                  sws_conn_peer_text(c), (unsigned long long)h2->taken, h2->held_peak,
                  SWS_HTTP2_BODY_BUDGET);
    nghttp2_session_del(h2->session);
    h2_mem_drop(h2);
    free(h2->nv);
    free(h2);
    c->proto_state = NULL;
}

const sws_proto_ops_t sws_http2_proto = {
    .state_size = 0,
    .init = http2_init,
    .on_input = http2_on_input,
    .writable = http2_on_input, /* the same work: input held back is parsed now */
    .fail = http2_fail,
    .waiting_for = http2_waiting_for,
    /* no input_moved: nothing points into the read buffer (on_input) */
    .close = http2_close,
    .client_gone = http2_client_gone,
    .drain = h2_drain,
};
