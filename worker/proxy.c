/* The proxy action: relay one request and its response (proxy.h). */
#include "worker/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/fmt.h"
#include "core/http_token.h"
#include "core/log.h"
#include "llhttp.h"
#include "worker/conn.h"
#include "worker/ctx.h"
#include "worker/proxy_req.h"
#include "worker/tunnel.h"
#include "worker/upstream_balance.h"
#include "worker/upstream_conn.h"
#include "worker/upstream_h2.h"
#include "worker/upstream_key.h"
#include "worker/upstream_pools.h"

/* Request body bytes held for the upstream above which the client is not
 * read (the HTTP/1 output's high-water mark, the other way round). */
#define BODY_HWM (64u * 1024)

/* A response body announced at least this long goes by splice(2) from the
 * upstream to the client (ADR 0022): below a few reads, the pipe's own
 * calls (splice in, splice out per pipe's worth) cost about what the copy saves
 * (docs/benchmarks/2026-12-01-proxy-splice.md). */
#define SPLICE_MIN (64u * 1024)

enum phase {
    PH_CONNECT = 0, /* connect() in progress */
    PH_SEND,        /* writing the request */
    PH_READ,        /* the request is written: reading the response */
    PH_DONE,        /* answered (relayed, cut or an error): nothing more to do */
};

/* What went wrong with an attempt: decides the retry and the status. */
enum fail_kind {
    F_CONNECT,         /* the request was never sent: any method may retry */
    F_CONNECT_TIMEOUT,
    F_SEND,            /* reset or close while writing the request */
    F_SEND_TIMEOUT,
    F_BROKEN,          /* reset or close after the request was written */
    F_READ_TIMEOUT,
    F_STATUS,          /* answered 502, 503 or 504 */
    F_INVALID,         /* not HTTP/1: never retried (it would answer the same) */
    F_CLIENT,          /* the client's stream refused what we gave: it is cut already */
    F_REFUSED,         /* HTTP/2: the member did not process it (REFUSED_STREAM, GOAWAY) */
};

/* The HTTP/2 client hands us its response fields in p->fields. */
_Static_assert(SWS_UPSTREAM_H2_MAX_FIELDS <= SWS_PROXY_MAX_FIELDS, "h2 fields fit p->fields");
_Static_assert(SWS_UPSTREAM_H2_MAX_INTERIM == SWS_PROXY_BUF, "1xx heads: one bound for both wires");

typedef struct proxy {
    sws_stream_t *st;
    sws_upstream_set_t *ups;
    sws_upstream_pools_t *pools;  /* the worker's view: the pool is found again by name */
    sws_upstream_conn_t *u;       /* the attempt's connection; NULL between attempts */
    sws_upstream_h2_set_t *h2set; /* the worker's HTTP/2 client */
    sws_upstream_h2_stream_t *h2s; /* an h2 pool's attempt: its stream; NULL between */
    uint8_t h2;                   /* the pool speaks HTTP/2 to its members */
    uint8_t te_trailers;          /* ... and the request says `te: trailers` (gRPC) */
    llhttp_t parser;
    uint8_t phase;                /* enum phase */
    uint8_t idempotent;
    uint8_t is_head;
    uint8_t head_given;           /* the head went to the stream: no retry from now on */
    uint8_t got_byte;             /* a response byte came in this attempt */
    uint8_t paused;               /* stopped reading: the stream is blocked */
    uint8_t send_waited;          /* the request did not go out in one go */
    uint8_t read_full;            /* the last read filled rbuf: the socket may hold more */
    uint8_t has_body;             /* the client's body streams through us */
    uint8_t body_chunked;         /* ... re-framed in chunks (its length is unknown) */
    uint8_t body_ended;           /* the client's body is complete (and framed) */
    uint8_t body_dropped;         /* body bytes went out and are gone: no retry */
    uint8_t interim;              /* the head being parsed is a 1xx */
    uint8_t upgrade;              /* the request asks for a switch we tunnel */
    uint8_t switching;            /* ... and the upstream answered 101 */
    uint8_t in_trailers;
    uint8_t ended;                /* the response ended (sws_stream_end) */
    uint8_t splicing;             /* the body goes upstream -> pipe -> client */
    uint8_t pipe_wait;            /* a pipe range is with the stream: wait for proceed */
    uint8_t fail_kind;            /* a callback's refusal: enum fail_kind ... */
    const char *why;              /* ... and why */
    /* llhttp's reasons run to 55 bytes ("Content-Length can't be present
     * with Transfer-Encoding") after "invalid response: ". */
    char why_buf[96];
    uint8_t picked;               /* a member was picked and not yet told how it went */
    uint8_t logged;               /* the attempt is in the request's upstream fields */
    uint8_t has_key;              /* the request has a hash key */
    unsigned attempts;            /* retries made */
    unsigned retries;             /* the pool's, when the request came */
    unsigned status;              /* the status the upstream answered in this attempt */
    uint64_t attempt_ms;          /* loop time the attempt began */
    sws_upstream_conf_t conf;     /* the pool's, for the connections it takes */
    sws_upstream_tried_t tried;
    uint64_t cur_id;              /* the member of this attempt ... */
    int cur_hint;                 /* ... at this index of its pool then */
    char cur_text[SWS_UPSTREAM_MEMBER_TEXT]; /* "-": none yet */
    uint32_t pool_hint;           /* the pool's index in the view */
    char *pool;                   /* its name, NUL-terminated */
    size_t pool_len;
    sws_str_t key;                /* the hash key, copied */
    sws_str_t via;                /* "1.1 <pseudonym>" for the response's Via; len 0: none */
    char *req;
    size_t req_len, req_sent;
    char *bbuf;                   /* request body for the upstream, framed */
    size_t blen, bsent, bcap;     /* bbuf[bsent, blen) is still to send */
    sws_defer_t kick;             /* send body bytes that came in the client's turn */
    sws_pipe_cache_t *pipes;      /* the worker's */
    sws_pipe_t pipe;              /* rd -1: none taken */
    size_t in_pipe;               /* bytes put into it since it was last empty */
    uint64_t body_left;           /* splicing: body bytes still in the upstream's socket */
    char *rbuf;                   /* SWS_PROXY_BUF bytes; none for an h2 pool (nghttp2 reads) */
    size_t rlen;                  /* rbuf[0, rlen) was handed to llhttp and is still referenced */
    unsigned nfields;
    sws_proxy_spares_t *spares;   /* the worker's ... */
    int block;                    /* ... kind this block goes back to; -1: freed */
    /* Last: 4 KiB that proxy_start does not clear (fields[0, nfields) are
     * written before they are read). */
    sws_header_t fields[SWS_PROXY_MAX_FIELDS];
} proxy_t;

static void attempt(proxy_t *p);

/* ---- the request states kept for reuse (sws_proxy_spares_t) ---- */

/* Bytes after a spare block's proxy_t besides the read buffer: the head
 * (its size hint, a few hundred bytes usually), the pool's name, the
 * hash key and the Via value. A request needing more gets its own. */
#define SPARE_EXTRA 4096u
#define SPARES_MAX 64u /* per kind: what a burst leaves behind */

/* A spare block's kind: with the read buffer (HTTP/1 pools) or not. */
static int spare_kind(size_t rbuf_len)
{
    return rbuf_len > 0;
}

/* A proxy_t with at least `extra` bytes after it; *cap: how many there
 * are, *block: the kind it goes back to, or -1. NULL: out of memory. */
static proxy_t *proxy_alloc(sws_proxy_spares_t *sp, size_t rbuf_len, size_t extra, size_t *cap,
                            int *block)
{
    int k = spare_kind(rbuf_len);
    size_t spare_cap = rbuf_len + SPARE_EXTRA;
    if (extra > spare_cap) {
        *cap = extra;
        *block = -1;
        return malloc(sizeof(proxy_t) + extra);
    }
    *cap = spare_cap;
    *block = k;
    void *b = sp->list[k];
    if (b == NULL)
        return malloc(sizeof(proxy_t) + spare_cap);
    memcpy(&sp->list[k], b, sizeof(void *)); /* a spare's first bytes: the next one */
    sp->n[k]--;
    return b;
}

static void proxy_free(sws_proxy_spares_t *sp, proxy_t *p, int block)
{
    if (block < 0 || sp->n[block] >= SPARES_MAX) {
        free(p);
        return;
    }
    memcpy((void *)p, &sp->list[block], sizeof(void *));
    sp->list[block] = p;
    sp->n[block]++;
}

void sws_proxy_spares_close(sws_proxy_spares_t *sp)
{
    for (int k = 0; k < 2; k++) {
        while (sp->list[k] != NULL) {
            void *b = sp->list[k];
            memcpy(&sp->list[k], b, sizeof(void *));
            free(b);
        }
        sp->n[k] = 0;
    }
}
static void exchange(proxy_t *p, const sws_upstream_pool_t *pool,
                     const sws_upstream_member_t *m, int fresh);
static void log_attempt(proxy_t *p);
static void read_response(proxy_t *p);
static void splice_begin(proxy_t *p, uint64_t length);

/* ---- response parsing (llhttp callbacks) ---- */

/* A callback refuses what it got: llhttp stops (on_headers_complete
 * turns any value but 0, 1 and 2 into HPE_CB_HEADERS_COMPLETE; -1 is
 * safe for every callback). */
static int refuse(proxy_t *p, enum fail_kind kind, const char *why)
{
    p->fail_kind = (uint8_t)kind;
    p->why = why;
    return -1;
}

static int on_header_field(llhttp_t *hp, const char *at, size_t len)
{
    proxy_t *p = hp->data;
    if (p->nfields > 0) {
        sws_header_t *last = &p->fields[p->nfields - 1];
        if (last->name.p + last->name.len == at) { /* split across reads */
            last->name.len += len;
            return 0;
        }
    }
    if (p->nfields >= SWS_PROXY_MAX_FIELDS)
        return refuse(p, F_INVALID, "too many response fields");
    p->fields[p->nfields++] = (sws_header_t){ { at, len }, { at + len, 0 } };
    return 0;
}

static int on_header_value(llhttp_t *hp, const char *at, size_t len)
{
    proxy_t *p = hp->data;
    if (p->nfields == 0)
        return refuse(p, F_INVALID, "field value without a name");
    sws_header_t *hd = &p->fields[p->nfields - 1];
    /* llhttp passes an obs-fold's continuation as one more span of the
     * value; taken as the value, it dropped the line before it. A proxy
     * rejects it or makes it a space (RFC 9112 5.2): rejected, as nginx
     * does. The bytes between the two spans are in rbuf. */
    const char *gap = hd->value.len > 0 ? hd->value.p + hd->value.len : hd->name.p + hd->name.len;
    if (at > gap && memchr(gap, '\n', (size_t)(at - gap)) != NULL)
        return refuse(p, F_INVALID, "a folded response field (obs-fold)");
    if (hd->value.len > 0 && hd->value.p + hd->value.len == at)
        hd->value.len += len;
    else
        hd->value = (sws_str_t){ at, len };
    return 0;
}

/* Fields of the response the protocol layer writes itself, or that
 * describe the upstream connection only. */
static int response_drops(const sws_proxy_conn_tokens_t *ct, sws_str_t name)
{
    const sws_http_token_t *t = sws_http_token_find(name.p, name.len);
    if (t != NULL && (t->flags & (SWS_TKF_HOP_BY_HOP | SWS_TKF_FRAMING)))
        return 1;
    return sws_str_caseeq_lit(name, "date") || sws_str_caseeq_lit(name, "server") ||
           sws_proxy_conn_tokens_name(ct, name);
}

/* Room for the fields relayed and those the proxy adds (Upgrade, Via). */
#define RELAYED_MAX (SWS_PROXY_MAX_FIELDS + 2u)

/* Our Via after the member's (a list continued, RFC 9110 5.3), when the
 * route asks for it; the new count. */
static unsigned add_via(const proxy_t *p, sws_header_t *out, unsigned n)
{
    if (p->via.len > 0)
        out[n++] = (sws_header_t){ SWS_STR("Via"), p->via };
    return n;
}

/* p->fields minus what response_drops() names, values without trailing
 * whitespace, into out; how many. */
static unsigned relayed_fields(proxy_t *p, sws_header_t *out)
{
    unsigned n = 0;
    sws_proxy_conn_tokens_t ct;
    sws_proxy_conn_tokens_init(&ct, p->fields, p->nfields);
    for (unsigned i = 0; i < p->nfields; i++) {
        sws_header_t *hd = &p->fields[i];
        while (hd->value.len > 0 &&
               (hd->value.p[hd->value.len - 1] == ' ' || hd->value.p[hd->value.len - 1] == '\t'))
            hd->value.len--;
        if (!response_drops(&ct, hd->name))
            out[n++] = *hd;
    }
    return n;
}

/* Whether the request may be sent again after this failure (issue 7's
 * rules, ADR 0014), retries left or not. */
static int may_resend(const proxy_t *p, enum fail_kind kind)
{
    /* A body is kept only until it is sent: one whose bytes are gone
     * cannot be sent again. */
    if (p->head_given || p->body_dropped)
        return 0;
    /* A request for a switch may have started something the member keeps
     * (a session, a subscription): sent once, it is not sent again. */
    if (p->upgrade && p->req_sent > 0)
        return 0;
    switch (kind) {
    case F_CONNECT:
    case F_CONNECT_TIMEOUT:
    case F_REFUSED: /* RFC 9113 8.7: not processed, safe to send again */
        return 1;
    case F_SEND:
    case F_SEND_TIMEOUT:
    case F_BROKEN:
    case F_STATUS:
        /* A request that may have reached a member is sent again only
         * when sending it twice is harmless (RFC 9110 9.2.2). */
        return p->idempotent || p->req_sent == 0;
    case F_READ_TIMEOUT:
        return p->idempotent && !p->got_byte;
    default:
        return 0;
    }
}

static int can_retry(const proxy_t *p, enum fail_kind kind)
{
    return p->attempts < p->retries && may_resend(p, kind);
}

/* The attempt's connection came from the idle pool and broke before a
 * byte of the answer: most likely the member closed it while idle (its
 * keep-alive timeout, a restart) and its FIN came after the loop's last
 * look (ADR 0021). That says nothing of the member's health, and the
 * request is sent once more on a new connection to the same member, not
 * counted in `retries` (ADR 0026; nginx does not count a cached
 * connection's error against its tries either). */
static int stale(const proxy_t *p, enum fail_kind kind)
{
    return p->u != NULL && p->u->reused && !p->got_byte && (kind == F_SEND || kind == F_BROKEN);
}

/* An interim answer (1xx, not 101) in p->fields to the client: 0, or -1
 * (refused: p->why). */
static int give_interim(proxy_t *p, unsigned status)
{
    /* Interim answers (100 Continue to the Expect we forwarded, 103
     * Early Hints) go to the client as they come. The stream has no
     * head yet, so a refusal (no memory) must still answer: as an
     * invalid answer does (F_CLIENT would leave the client waiting). */
    sws_header_t out[SWS_PROXY_MAX_FIELDS];
    unsigned n = relayed_fields(p, out);
    if (sws_stream_interim(p->st, status, out, n) < 0)
        return refuse(p, F_INVALID, "the client's stream refused an interim answer");
    p->interim = 1;
    p->nfields = 0;
    return 0;
}

/* The final head in p->fields to the client, whichever wire it came
 * by: 0, or -1 (refused, or a 502-504 to retry: p->why). */
static int give_head(proxy_t *p, unsigned status, uint64_t length)
{
    p->status = status;
    if ((status == 502 || status == 503 || status == 504) && can_retry(p, F_STATUS)) {
        snprintf(p->why_buf, sizeof(p->why_buf), "answered %u", status);
        return refuse(p, F_STATUS, p->why_buf);
    }
    sws_header_t out[RELAYED_MAX];
    unsigned n = add_via(p, out, relayed_fields(p, out));
    p->head_given = 1;
    p->nfields = 0;
    /* An answer before the whole body (417, 401, 413 to an Expect): the
     * rest of the body will not be read, so the client's connection ends
     * after it, and says so. */
    if (p->has_body && !p->body_ended)
        p->st->req.keep_alive = 0;
    if (sws_stream_head(p->st, status, out, n, length) < 0)
        return refuse(p, F_CLIENT, "the client's stream refused the head");
    return 0;
}

/* llhttp lets a response field name hold a space or a control byte;
 * relayed, the client would split it its own way. NULL or why not. */
static const char *fields_problem(const proxy_t *p)
{
    for (unsigned i = 0; i < p->nfields; i++)
        if (!sws_str_is_token(p->fields[i].name))
            return "a response field name that is not a token";
    return NULL;
}

/* A body's transfer coding: none, or a single chunked, as a request's
 * (http1.c). Any other would reach the client unnamed (Transfer-Encoding
 * is hop-by-hop, dropped) with its coded bytes taken for the content; we
 * undo none but chunked. NULL or why not. */
static const char *coding_problem(const proxy_t *p)
{
    unsigned n = 0;
    for (unsigned i = 0; i < p->nfields; i++) {
        sws_str_t v = p->fields[i].value;
        if (!sws_str_caseeq_lit(p->fields[i].name, "transfer-encoding"))
            continue;
        while (v.len > 0 && (v.p[v.len - 1] == ' ' || v.p[v.len - 1] == '\t'))
            v.len--;
        if (++n > 1 || !sws_str_caseeq_lit(v, "chunked"))
            return "a Transfer-Encoding other than a single chunked";
    }
    return NULL;
}

/* A 1xx, 204 and 304, and the answer to a HEAD, end at their head
 * whatever length or coding their fields announce (RFC 9112 6.3: a 304
 * may name the 200's); llhttp 8.1 would read the body they announce. */
static int bodiless(const proxy_t *p, unsigned status)
{
    return p->is_head || status < 200 || status == 204 || status == 304;
}

static int on_headers_complete(llhttp_t *hp)
{
    proxy_t *p = hp->data;
    unsigned status = hp->status_code;
    const char *why = fields_problem(p);
    /* llhttp flags a Transfer-Encoding field: without one (most answers)
     * there is no coding to look at. */
    if (why == NULL && (hp->flags & F_TRANSFER_ENCODING) && !bodiless(p, status))
        why = coding_problem(p);
    if (why != NULL)
        return refuse(p, F_INVALID, why);
    if (status == 101) {
        if (!p->upgrade)
            return refuse(p, F_INVALID, "101 Switching Protocols that nobody asked for");
        p->status = status;
        p->switching = 1;
        return HPE_PAUSED; /* the bytes after the head are the tunnel's (switch_protocols) */
    }
    if (status < 100)
        return refuse(p, F_INVALID, "a status below 100");
    if (status < 200)
        return give_interim(p, status) < 0 ? -1 : 1; /* 1: no body, the final head follows */
    uint64_t length = (hp->flags & F_CONTENT_LENGTH) ? hp->content_length
                                                     : SWS_STREAM_LENGTH_UNKNOWN;
    if (give_head(p, status, length) < 0)
        return -1;
    if (bodiless(p, status))
        return 1; /* llhttp expects no body */
    if (length != SWS_STREAM_LENGTH_UNKNOWN && length >= SPLICE_MIN)
        splice_begin(p, length);
    return 0;
}

static int on_body(llhttp_t *hp, const char *at, size_t len)
{
    proxy_t *p = hp->data;
    if (p->splicing)
        p->body_left -= len; /* what came with the head is copied */
    if (sws_stream_write(p->st, at, len) < 0)
        return refuse(p, F_CLIENT, "the client's stream refused the body");
    return 0;
}

static int on_chunk_header(llhttp_t *hp)
{
    proxy_t *p = hp->data;
    if (hp->content_length == 0) { /* the last chunk: trailers may follow */
        p->in_trailers = 1;
        p->nfields = 0;
    }
    return 0;
}

/* The response's end to the client's stream, with the member's trailers
 * (p->fields) when it sent some. -1: the client's stream refused it. */
static int give_end(proxy_t *p, int trailers)
{
    sws_header_t out[SWS_PROXY_MAX_FIELDS];
    unsigned n = trailers ? relayed_fields(p, out) : 0;
    p->ended = 1;
    log_attempt(p); /* the end may log the request at once */
    return sws_stream_end(p->st, out, n);
}

static int on_message_complete(llhttp_t *hp)
{
    proxy_t *p = hp->data;
    if (p->interim) {
        p->interim = 0;
        return 0; /* the final head follows */
    }
    const char *why = p->in_trailers ? fields_problem(p) : NULL;
    if (why != NULL)
        return refuse(p, F_INVALID, why);
    if (give_end(p, p->in_trailers) < 0)
        return refuse(p, F_CLIENT, "the client's stream refused the end");
    return HPE_PAUSED; /* what follows, if anything, is not ours to parse */
}

static const llhttp_settings_t parser_settings = {
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

/* ---- the relay ---- */

static const char *member_text(const proxy_t *p)
{
    return p->cur_text;
}

/* The request's pool in the worker's current view (a reload may have
 * replaced it since the request came, or removed it: NULL). */
static sws_upstream_pool_t *pool_now(proxy_t *p)
{
    return sws_upstream_pools_find(p->pools, p->pool, p->pool_len, p->pool_hint);
}

/* item[0, n), after ", " when list has one already; an item that does
 * not fit is left out (the list stays whole entries). Once per attempt on
 * every proxied request: no printf. */
static void list_add(char *list, const char *item, size_t n)
{
    size_t len = strlen(list);
    size_t sep = len > 0 ? 2 : 0;
    if (len + sep + n >= SWS_REQUEST_UPSTREAM_TEXT)
        return;
    char *o = sws_put(list + len, ", ", sep);
    *sws_put(o, item, n) = '\0';
}

/* The attempt's entry for the access log (request.h). */
static void log_attempt(proxy_t *p)
{
    sws_request_upstream_t *u = &p->st->req.upstream;
    if (p->logged)
        return;
    p->logged = 1;
    char num[SWS_FMT_U64_MAX];
    list_add(u->addr, p->cur_text, strlen(p->cur_text));
    if (p->status != 0)
        list_add(u->status, num, (size_t)(sws_put_u64(num, p->status) - num));
    else
        list_add(u->status, "-", 1);
    uint64_t ms = sws_loop_now_ms(p->ups->loop) - p->attempt_ms;
    list_add(u->ms, num, (size_t)(sws_put_u64(num, ms) - num));
}

/* Tell the balancer how the attempt on the member picked went: once per
 * pick (its in-flight count and passive health); and the access log. */
static void report(proxy_t *p, sws_upstream_outcome_t outcome)
{
    if (!p->picked)
        return;
    p->picked = 0;
    log_attempt(p);
    sws_upstream_pool_t *pool = pool_now(p);
    if (pool != NULL)
        sws_upstream_balance_done(&pool->bal, p->cur_id, p->cur_hint, outcome,
                                  sws_loop_now_ms(p->ups->loop));
}

/* The answer relayed whole: what it says of the member. */
static void report_answered(proxy_t *p)
{
    /* A 502-504 relayed (no retry was left) is the member's failure too. */
    report(p, p->status >= 502 && p->status <= 504 ? SWS_UPSTREAM_FAILED : SWS_UPSTREAM_OK);
}

/* What a failure says of the member (upstream_health.h): the causes that
 * may be retried are its failures; an invalid response, the client's
 * refusal or a stale pooled connection say nothing of its health. */
static sws_upstream_outcome_t fail_outcome(enum fail_kind kind, int was_stale)
{
    /* A refused stream is a member going away in order (GOAWAY) or
     * full: not a failure either. */
    return kind == F_INVALID || kind == F_CLIENT || kind == F_REFUSED || was_stale
               ? SWS_UPSTREAM_NEUTRAL
               : SWS_UPSTREAM_FAILED;
}

/* Nothing worked: the client gets status. Its body may still be on the
 * way: then the connection ends after the answer (what follows the answer
 * on it cannot be trusted to be a request). */
static void answer_error(proxy_t *p, unsigned status)
{
    p->phase = PH_DONE;
    if (p->has_body && !p->body_ended)
        p->st->req.keep_alive = 0;
    sws_stream_error(p->st, status);
}

/* The attempt met a stale pooled connection (stale()): the same member
 * again, on a new connection, within the same pick (it stays in flight
 * there); the access log shows both. -1 when the member left the pool
 * meanwhile: an ordinary failure then. */
static int reopen(proxy_t *p, const char *why)
{
    sws_upstream_pool_t *pool = pool_now(p);
    int i = pool == NULL ? -1 : sws_upstream_balance_find(&pool->bal, p->cur_id, p->cur_hint);
    if (i < 0)
        return -1;
    sws_log_info("proxy: pool %s member %s: pooled connection %s: sending again on a new "
                 "connection", p->pool, member_text(p), why);
    log_attempt(p);
    p->cur_hint = i;
    exchange(p, pool, &pool->members[i], 1);
    return 0;
}

/* The attempt failed: retry on another member when the rules allow it,
 * else answer (or cut what went out). */
static void failed(proxy_t *p, enum fail_kind kind, const char *why)
{
    int timeout = kind == F_CONNECT_TIMEOUT || kind == F_SEND_TIMEOUT || kind == F_READ_TIMEOUT;
    unsigned status = timeout ? 504 : 502;
    int was_stale = stale(p, kind);
    int retry = can_retry(p, kind);
    if (p->u != NULL) {
        sws_upstream_close(p->u);
        p->u = NULL;
    }
    sws_upstream_h2_cancel(p->h2s);
    p->h2s = NULL;
    /* A reopened attempt's connection is new, never reused: not stale
     * again, so a member is reopened at most once per pick. */
    if (was_stale && may_resend(p, kind) && reopen(p, why) == 0)
        return;
    report(p, fail_outcome(kind, was_stale));
    if (kind == F_CLIENT) {
        p->phase = PH_DONE;
        return;
    }
    if (p->head_given) {
        sws_log_error("proxy: pool %s member %s: %s after the response began: response cut",
                      p->pool, member_text(p), why);
        p->phase = PH_DONE;
        sws_stream_abort(p->st);
        return;
    }
    if (retry) {
        sws_log_warn("proxy: pool %s member %s: %s: retrying (%u of %u)", p->pool, member_text(p),
                     why, p->attempts + 1, p->retries);
        p->attempts++;
        attempt(p);
        return;
    }
    sws_log_error("proxy: pool %s member %s: %s (%u)", p->pool, member_text(p), why, status);
    answer_error(p, status);
}

/* The response ended (sws_stream_end went to the stream). */
static void completed(proxy_t *p, int reusable)
{
    sws_upstream_conn_t *u = p->u;
    p->u = NULL;
    p->phase = PH_DONE;
    sws_upstream_disarm(u);
    report_answered(p);
    /* An answer that came before all of the body went out leaves the
     * connection in the middle of a request; a pooled connection is trusted
     * to have nothing unread (its events tell of what comes later): after a
     * short read it has not. */
    int sent_all = p->req_sent == p->req_len && (!p->has_body || (p->body_ended && p->bsent == p->blen));
    if (reusable && sent_all && llhttp_should_keep_alive(&p->parser) &&
        (!p->read_full || sws_upstream_drained(u)))
        sws_upstream_put(u);
    else
        sws_upstream_close(u);
}

/* The upstream answered 101 to our request for a switch: the client gets
 * the 101 and both connections become a tunnel (worker/tunnel.h), which
 * takes the upstream connection (never back to the idle pool) and the
 * bytes after the head, rbuf[pos, end). */
static void switch_protocols(proxy_t *p, const char *pos, const char *end)
{
    sws_header_t out[RELAYED_MAX];
    unsigned n = add_via(p, out, relayed_fields(p, out));
    for (unsigned i = 0; i < p->nfields; i++) /* hop-by-hop, but the switch's to name */
        if (sws_str_caseeq_lit(p->fields[i].name, "upgrade"))
            if (n < RELAYED_MAX)
                out[n++] = p->fields[i];
    sws_upstream_conn_t *u = p->u;
    p->u = NULL;
    p->phase = PH_DONE;
    p->head_given = 1;
    sws_upstream_disarm(u);
    /* The tunnel is a long request: it stays in flight on the member (for
     * least_conn, max_conns and the live figures) until it ends, when the
     * stream is released (proxy_dispose), as nginx and HAProxy count it. */
    log_attempt(p);
    sws_tunnel_t *t = sws_tunnel_new(p->st, u, pos, (size_t)(end - pos));
    if (t == NULL) {
        sws_log_error("proxy: pool %s member %s: out of memory for a tunnel (502)", p->pool,
                      member_text(p));
        sws_stream_error(p->st, 502);
        return;
    }
    if (sws_stream_upgrade(p->st, out, n, &sws_tunnel_proto, t) < 0) {
        sws_log_error("proxy: pool %s member %s: the client's side cannot switch protocols (502)",
                      p->pool, member_text(p));
        sws_tunnel_free(t);
        sws_stream_error(p->st, 502);
    }
}

/* Hand rbuf[off, off + n) to llhttp. 0: go on reading; -1: the attempt is
 * over (completed or failed). */
static int parse(proxy_t *p, size_t off, size_t n)
{
    const char *from = p->rbuf + off;
    llhttp_errno_t e = llhttp_execute(&p->parser, from, n);
    p->rlen = off + n;
    if (e == HPE_OK) {
        /* The fields of a head or of trailers in progress point into
         * rbuf: keep its bytes until they are complete. */
        if (p->head_given && !p->in_trailers)
            p->rlen = 0;
        return 0;
    }
    if (e == HPE_PAUSED && p->ended) {
        completed(p, llhttp_get_error_pos(&p->parser) == from + n);
        return -1;
    }
    if (e == HPE_PAUSED && p->switching) {
        switch_protocols(p, llhttp_get_error_pos(&p->parser), from + n);
        return -1;
    }
    if (p->why != NULL) { /* a callback refused (HPE_USER, or HPE_CB_* from on_headers_complete) */
        failed(p, (enum fail_kind)p->fail_kind, p->why);
        return -1;
    }
    snprintf(p->why_buf, sizeof(p->why_buf), "invalid response: %s",
             llhttp_get_error_reason(&p->parser));
    failed(p, F_INVALID, p->why_buf);
    return -1;
}

/* The upstream closed its side. */
static void upstream_eof(proxy_t *p)
{
    if (p->got_byte) {
        llhttp_finish(&p->parser); /* ends a close-delimited body */
        if (p->ended) {
            completed(p, 0);
            return;
        }
    }
    failed(p, F_BROKEN, p->got_byte ? "closed in the response" : "closed before answering");
}

/* Whether the response is read now: once the request is written, and
 * while its body still streams (the member's 100 Continue, or a final
 * answer that makes the rest of the body moot, comes before it). */
static int reading(const proxy_t *p)
{
    return p->phase == PH_READ || (p->phase == PH_SEND && p->req_sent == p->req_len);
}

/* The body of length bytes goes by splice when the client's side can take
 * a pipe and one is at hand; otherwise it is copied (read_response). */
static void splice_begin(proxy_t *p, uint64_t length)
{
    char err[128];
    if (!sws_stream_can_pipe(p->st) || p->pipes == NULL || !sws_upstream_can_splice(p->u))
        return;
    if (sws_pipe_get(p->pipes, &p->pipe, err, sizeof(err)) < 0) {
        sws_log_warn("proxy: %s: relaying the body by copying", err);
        return;
    }
    p->splicing = 1;
    p->in_pipe = 0;
    p->body_left = length;
    /* splice takes exactly the body: bytes the member sent after it came
     * with an edge already consumed, so completed() must ask the socket
     * before the connection goes back to the pool. */
    p->read_full = 1;
}

/* The pipe's bytes go to the stream; the pipe is touched again after the
 * stream's proceed(). 0, or -1 when the attempt is over. */
static int splice_hand(proxy_t *p)
{
    if (sws_stream_send_pipe(p->st, p->pipe.rd, p->in_pipe) < 0) {
        failed(p, F_CLIENT, "the client's stream refused the body");
        return -1;
    }
    p->pipe_wait = 1;
    if (p->body_left > 0)
        return 0;
    /* All of the body left the upstream's socket: the exchange with the
     * member is over (its end follows the pipe's bytes in the stream). */
    p->ended = 1;
    log_attempt(p);
    if (sws_stream_end(p->st, NULL, 0) < 0) {
        failed(p, F_CLIENT, "the client's stream refused the end");
        return -1;
    }
    completed(p, 1);
    return -1;
}

/* A read or splice from the upstream socket that moved nothing (n <= 0):
 * 1 to try again (EINTR); 0 when the socket is empty (its next edge brings
 * us back); -1 when the attempt is over (the member closed, or an error,
 * handled here). */
static int moved_nothing(proxy_t *p, ssize_t n)
{
    if (n == 0) {
        upstream_eof(p);
        return -1;
    }
    if (errno == EINTR)
        return 1;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return 0;
    failed(p, F_BROKEN, strerror(errno));
    return -1;
}

/* Move the body upstream socket -> pipe -> the stream, a pipe's worth at a
 * time, the stream pacing it like read_response's copies. splice(2)
 * answers EAGAIN both for an empty socket and for a full pipe (whose
 * capacity is in pieces, not bytes): with bytes in the pipe it is taken as
 * full and the pipe goes out first; with an empty pipe the socket is
 * empty, and its next edge brings us back (HAProxy's rule too). */
static void splice_relay(proxy_t *p)
{
    while (reading(p)) {
        if (p->pipe_wait) {
            p->paused = 1;
            sws_upstream_disarm(p->u); /* the client's send timer runs */
            return;
        }
        p->paused = 0;
        if (p->body_left == 0 || p->in_pipe >= p->pipe.size) {
            if (splice_hand(p) < 0)
                return;
            continue;
        }
        size_t want = p->pipe.size - p->in_pipe;
        if (want > p->body_left)
            want = (size_t)p->body_left;
        ssize_t n = splice(p->u->io.fd, NULL, p->pipe.wr, NULL, want,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0) {
            p->in_pipe += (size_t)n;
            p->body_left -= (uint64_t)n;
            sws_upstream_arm(p->u, SWS_UPSTREAM_T_READ);
            continue;
        }
        int r = moved_nothing(p, n);
        if (r > 0)
            continue;
        if (r < 0 || p->in_pipe == 0)
            return; /* over, or the socket is empty: its next edge */
        if (splice_hand(p) < 0)
            return;
    }
}

static void read_response(proxy_t *p)
{
    for (;;) {
        if (!reading(p))
            return;
        if (p->splicing && p->head_given) {
            splice_relay(p);
            return;
        }
        size_t want = SWS_PROXY_BUF - p->rlen;
        if (p->head_given) {
            /* Read no more than the client's side takes whole, so that no
             * body byte is copied twice (into the stream, then out). */
            size_t room = sws_stream_room(p->st);
            if (room == 0) {
                /* The client is slower: leave the bytes in the socket (the
                 * upstream's window fills and it stops sending) until the
                 * stream asks for more. */
                p->paused = 1;
                sws_upstream_disarm(p->u);
                return;
            }
            if (want > room)
                want = room;
        }
        p->paused = 0;
        if (want == 0) {
            failed(p, F_INVALID, "response head or trailers too large");
            return;
        }
        ssize_t n = sws_upstream_read(p->u, p->rbuf + p->rlen, want);
        if (n > 0) {
            p->got_byte = 1;
            p->read_full = (size_t)n == want;
            sws_upstream_arm(p->u, SWS_UPSTREAM_T_READ);
            if (parse(p, p->rlen, (size_t)n) < 0)
                return;
            continue;
        }
        if (moved_nothing(p, n) > 0)
            continue;
        return;
    }
}

/* What is still to send: the rest of the head, else of the body held. */
static int next_out(proxy_t *p, const char **at, size_t **sent, size_t *left)
{
    if (p->req_sent < p->req_len) {
        *at = p->req + p->req_sent;
        *sent = &p->req_sent;
        *left = p->req_len - p->req_sent;
        return 1;
    }
    if (p->bsent < p->blen) {
        *at = p->bbuf + p->bsent;
        *sent = &p->bsent;
        *left = p->blen - p->bsent;
        return 1;
    }
    return 0;
}

/* All the body held went out: its memory is reused, so it cannot be sent
 * again; a client paused for want of room is read again. */
static void body_sent(proxy_t *p)
{
    if (p->blen > 0) {
        p->body_dropped = 1;
        p->blen = p->bsent = 0;
    }
    sws_stream_body_resume(p->st);
}

/* readable: the caller's event brought an EPOLLIN edge for this connection
 * that nobody read yet. */
static void send_request(proxy_t *p, int readable)
{
    const char *at;
    size_t *sent, left;
    while (next_out(p, &at, &sent, &left)) {
        ssize_t n = sws_upstream_write(p->u, at, left);
        if (n > 0) {
            *sent += (size_t)n;
            sws_upstream_arm(p->u, SWS_UPSTREAM_T_SEND);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            p->send_waited = 1;
            return; /* the send timer runs; EPOLLOUT goes on */
        }
        failed(p, F_SEND, n < 0 ? strerror(errno) : "send wrote nothing");
        return;
    }
    if (p->has_body) {
        body_sent(p);
        if (!p->body_ended) {
            /* The client's pace now: its body timer runs, not ours. */
            sws_upstream_disarm(p->u);
            return;
        }
    }
    /* The response comes with the next EPOLLIN edge, unless the upstream
     * answered while we were still waiting to send, or with the event that
     * finished the send: that edge is gone (edge-triggered), so look now. */
    p->phase = PH_READ;
    /* A response paused for a slow client is the client's pace: its send
     * timer runs, not our read timer (proceed arms it again). */
    if (!p->paused)
        sws_upstream_arm(p->u, SWS_UPSTREAM_T_READ);
    if (p->send_waited || readable)
        read_response(p);
}

static void on_upstream_event(sws_upstream_conn_t *u, uint32_t events)
{
    proxy_t *p = u->data;
    char err[128];
    if (p->phase == PH_CONNECT) {
        /* A TLS handshake waits for reads too. */
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !u->handshaking)
            return;
        int rc = sws_upstream_connected(u, err, sizeof(err));
        if (rc < 0) {
            failed(p, F_CONNECT, err);
            return;
        }
        if (rc > 0)
            return; /* the handshake waits for the member, under the connect timer */
        p->phase = PH_SEND;
        send_request(p, 0);
        return;
    }
    if (p->phase == PH_SEND) {
        /* The event's EPOLLIN edge is ours to use: send_request reads when
         * it finishes the request, and while still sending we do. */
        int readable = p->u == u && !p->paused &&
                       (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
        send_request(p, readable);
        if (p->phase == PH_SEND && p->u == u && readable)
            read_response(p);
        return;
    }
    if (p->phase == PH_READ && !p->paused)
        read_response(p);
}

static void on_upstream_timeout(sws_upstream_conn_t *u, enum sws_upstream_timer which)
{
    proxy_t *p = u->data;
    switch (which) {
    case SWS_UPSTREAM_T_CONNECT:
        failed(p, F_CONNECT_TIMEOUT, "connect timed out");
        break;
    case SWS_UPSTREAM_T_SEND:
        failed(p, F_SEND_TIMEOUT, "send timed out");
        break;
    default:
        failed(p, F_READ_TIMEOUT, "read timed out");
        break;
    }
}

static const sws_upstream_ops_t upstream_ops = {
    .on_event = on_upstream_event,
    .on_timeout = on_upstream_timeout,
};

/* ---- an h2 or grpc pool: the attempt over HTTP/2 (worker/upstream_h2.h) ---- */

static int h2_head(void *data, unsigned status, const sws_header_t *h, unsigned n,
                   uint64_t length)
{
    proxy_t *p = data;
    p->got_byte = 1;
    memcpy(p->fields, h, n * sizeof(*h));
    p->nfields = n;
    if ((status < 200 ? give_interim(p, status) : give_head(p, status, length)) == 0)
        return 0;
    failed(p, (enum fail_kind)p->fail_kind, p->why); /* cancels the stream */
    return -1;
}

/* Body bytes go to the client's stream as they come; what it holds (the
 * client is slower) keeps the member's window shut until proceed(). */
static int h2_data(void *data, const char *at, size_t n)
{
    proxy_t *p = data;
    if (sws_stream_write(p->st, at, n) < 0) {
        failed(p, F_CLIENT, "the client's stream refused the body");
        return -1;
    }
    p->paused = (uint8_t)sws_stream_blocked(p->st);
    return p->paused;
}

static void h2_end(void *data, const sws_header_t *t, unsigned n)
{
    proxy_t *p = data;
    p->h2s = NULL;
    memcpy(p->fields, t, n * sizeof(*t));
    p->nfields = n;
    p->phase = PH_DONE;
    if (give_end(p, n > 0) < 0) {
        failed(p, F_CLIENT, "the client's stream refused the end");
        return;
    }
    report_answered(p);
}

/* The proxy's failure kind for an HTTP/2 one. */
static enum fail_kind h2_fail_kind(sws_upstream_h2_fail_t kind)
{
    static const uint8_t kinds[] = {
        [SWS_UPSTREAM_H2_CONNECT] = F_CONNECT,
        [SWS_UPSTREAM_H2_CONNECT_TIMEOUT] = F_CONNECT_TIMEOUT,
        [SWS_UPSTREAM_H2_REFUSED] = F_REFUSED,
        [SWS_UPSTREAM_H2_SEND_TIMEOUT] = F_SEND_TIMEOUT,
        [SWS_UPSTREAM_H2_BROKEN] = F_BROKEN,
        [SWS_UPSTREAM_H2_READ_TIMEOUT] = F_READ_TIMEOUT,
        [SWS_UPSTREAM_H2_INVALID] = F_INVALID,
    };
    return (enum fail_kind)kinds[kind];
}

static void h2_failed(void *data, sws_upstream_h2_fail_t kind, const char *why)
{
    proxy_t *p = data;
    p->h2s = NULL;
    failed(p, h2_fail_kind(kind), why);
}

/* The client's body held (body_data), as the member's window takes it. */
static size_t h2_body(void *data, char *buf, size_t len, int *eof)
{
    proxy_t *p = data;
    size_t n = p->blen - p->bsent;
    if (n > len)
        n = len;
    memcpy(buf, p->bbuf + p->bsent, n);
    p->bsent += n;
    /* A small body (a unary gRPC call's) is kept, so that a stream the
     * member refused unprocessed goes again whole; a larger one is let go
     * as it is sent, as over HTTP/1. */
    if (n > 0 && p->bsent == p->blen) {
        if (p->blen >= BODY_HWM)
            body_sent(p);
        else
            sws_stream_body_resume(p->st);
    }
    *eof = p->body_ended && p->bsent == p->blen;
    return n;
}

/* The client's trailers (an HTTP/2 client's; HTTP/1 drops them). */
static unsigned h2_trailers(void *data, const sws_header_t **t)
{
    proxy_t *p = data;
    const sws_request_t *r = &p->st->req;
    *t = &r->headers[r->nheaders];
    return r->ntrailers;
}

static const sws_upstream_h2_ops_t h2_ops = {
    .head = h2_head,
    .data = h2_data,
    .end = h2_end,
    .failed = h2_failed,
    .body = h2_body,
    .trailers = h2_trailers,
};

/* The request as a stream to member m, on a connection with room. The
 * head proxy_req.c wrote is mapped onto HTTP/2 there; the body is chunked
 * by nobody (body_chunked is clear): HTTP/2 frames it. */
static void h2_exchange(proxy_t *p, const sws_upstream_member_t *m)
{
    char err[128];
    sws_upstream_h2_req_t req = {
        .head = p->req,
        .head_len = p->req_len,
        .has_body = p->has_body,
        .te_trailers = p->te_trailers,
        .member = p->cur_text,
    };
    sws_upstream_h2_fail_t kind;
    p->phase = PH_SEND;
    p->h2s = sws_upstream_h2_submit(p->h2set, p->cur_id, &m->addr, m->tls.ctx ? &m->tls : NULL,
                                    &p->conf, &req, &h2_ops, p, &kind, err, sizeof(err));
    if (p->h2s == NULL) {
        failed(p, h2_fail_kind(kind), err);
        return;
    }
    /* Queued: from now on it may reach the member (only a refusal says
     * it did not). */
    p->req_sent = p->req_len;
}

/* One attempt, on the member the pool's balancer picks: one not tried
 * yet when another may take it (upstream_balance.h). */
static void attempt(proxy_t *p)
{
    sws_upstream_pool_t *pool = pool_now(p);
    int i = pool == NULL ? -1
                         : sws_upstream_balance_pick(&pool->bal, p->has_key ? &p->key : NULL,
                                                     &p->tried, sws_loop_now_ms(p->ups->loop));
    if (i < 0) {
        sws_log_error("proxy: pool %s: no member may take the request (503)", p->pool);
        answer_error(p, 503);
        return;
    }
    p->picked = 1;
    p->cur_id = pool->bal.peers[i].id;
    p->cur_hint = i;
    sws_upstream_tried_add(&p->tried, p->cur_id);
    const sws_upstream_member_t *m = &pool->members[i];
    memcpy(p->cur_text, m->text, sizeof(p->cur_text));
    exchange(p, pool, m, 0);
}

/* The request to the member picked (m of pool): on an idle connection to
 * it or a new one; fresh: a new one. */
static void exchange(proxy_t *p, const sws_upstream_pool_t *pool,
                     const sws_upstream_member_t *m, int fresh)
{
    char err[128];
    p->logged = 0;
    p->status = 0;
    p->attempt_ms = sws_loop_now_ms(p->ups->loop);
    p->req_sent = 0;
    p->bsent = 0; /* what is held is all of the body so far (body_dropped is 0) */
    p->rlen = 0;
    p->nfields = 0;
    p->got_byte = p->interim = p->in_trailers = p->paused = p->send_waited = 0;
    p->why = NULL;
    if (p->h2) {
        h2_exchange(p, m);
        return;
    }
    llhttp_init(&p->parser, HTTP_RESPONSE, &parser_settings);
    p->parser.data = p;
    const sws_upstream_tls_t *tls = pool->tls_ctx ? &m->tls : NULL;
    p->u = fresh ? sws_upstream_open(p->ups, p->cur_id, &m->addr, tls, &upstream_ops, p, err,
                                     sizeof(err))
                 : sws_upstream_get_tls(p->ups, p->cur_id, &m->addr, tls, &upstream_ops, p, err,
                                        sizeof(err));
    if (p->u == NULL) {
        failed(p, F_CONNECT, err);
        return;
    }
    sws_upstream_configure(p->u, &p->conf);
    if (p->u->connecting) {
        p->phase = PH_CONNECT;
        sws_upstream_arm(p->u, SWS_UPSTREAM_T_CONNECT);
        return;
    }
    p->phase = PH_SEND;
    send_request(p, 0);
}

/* ---- the stream's source ---- */

static void proxy_proceed(sws_stream_t *st)
{
    proxy_t *p = st->source_data;
    if (p->h2s != NULL && p->paused) { /* the client took what the stream held */
        p->paused = 0;
        sws_upstream_h2_consumed(p->h2s);
        return;
    }
    if (p->pipe_wait) { /* the sink emptied the pipe */
        p->pipe_wait = 0;
        p->in_pipe = 0;
    }
    if (p->paused && reading(p)) {
        sws_upstream_arm(p->u, SWS_UPSTREAM_T_READ);
        read_response(p);
    }
}

static void proxy_dispose(sws_stream_t *st)
{
    proxy_t *p = st->source_data;
    if (p->u != NULL)
        sws_upstream_close(p->u); /* the client left mid-exchange */
    sws_upstream_h2_cancel(p->h2s); /* ... the member gets RST_STREAM */
    /* A tunnel ending is the end of its member's answer; anything else
     * still picked here was cut by the client's side. */
    report(p, p->switching ? SWS_UPSTREAM_OK : SWS_UPSTREAM_NEUTRAL);
    /* Every body byte counted as sent reached the client's socket (the
     * protocol takes back what a closing connection left queued), so
     * the pipe holds none of them. */
    if (p->pipes != NULL)
        sws_pipe_put(p->pipes, &p->pipe,
                     st->length != SWS_STREAM_LENGTH_UNKNOWN && st->req.body_bytes == st->length);
    sws_defer_cancel(&p->kick);
    free(p->bbuf);
    proxy_free(p->spares, p, p->block);
}

static const sws_stream_source_t proxy_source = {
    .proceed = proxy_proceed,
    .dispose = proxy_dispose,
};

/* ---- the request body's consumer ---- */

static void body_kick(sws_defer_t *d)
{
    proxy_t *p = sws_container_of(d, proxy_t, kick);
    if (p->h2s != NULL)
        sws_upstream_h2_resume(p->h2s);
    else if (p->phase == PH_SEND) /* connected: a full socket answers EAGAIN, EPOLLOUT follows */
        send_request(p, 0);
}

static int body_append(proxy_t *p, const char *a, size_t n)
{
    if (n == 0)
        return 0;
    if (p->bcap - p->blen < n) {
        size_t cap = p->bcap < 4096 ? 4096 : p->bcap;
        while (cap - p->blen < n)
            cap *= 2;
        char *b = realloc(p->bbuf, cap);
        if (b == NULL)
            return -1;
        p->bbuf = b;
        p->bcap = cap;
    }
    memcpy(p->bbuf + p->blen, a, n);
    p->blen += n;
    return 0;
}

/* Bytes of the client's body, inside the client's turn: held (framed
 * again when chunked) and sent from the loop's deferred work, so that no
 * upstream failure is answered from inside the client's parser. */
static int body_data(sws_stream_t *st, const char *at, size_t len)
{
    proxy_t *p = st->source_data;
    if (p->phase == PH_DONE || len == 0) {
        /* Answered already: the rest is read and dropped, hence passed
         * on (stream.h): HTTP/2 would count it against the connection's
         * budget until the stream ends, shutting the window on every
         * other upload there. */
        sws_stream_body_resume(st);
        return 0;
    }
    char size[SWS_FMT_U64_MAX + 2];
    char *e = size;
    if (p->body_chunked)
        e = SWS_PUT_LIT(sws_put_hex(size, len), "\r\n");
    if (body_append(p, size, (size_t)(e - size)) < 0 || body_append(p, at, len) < 0 ||
        (p->body_chunked && body_append(p, "\r\n", 2) < 0)) {
        failed(p, F_CLIENT, "out of memory for the request body");
        sws_stream_error(p->st, 500);
        return 0;
    }
    sws_loop_defer(p->ups->loop, &p->kick);
    return p->blen - p->bsent >= BODY_HWM;
}

static void body_end(sws_stream_t *st)
{
    proxy_t *p = st->source_data;
    if (p->phase == PH_DONE)
        return;
    if (p->body_chunked && body_append(p, "0\r\n\r\n", 5) < 0) {
        failed(p, F_CLIENT, "out of memory for the request body");
        sws_stream_error(p->st, 500);
        return;
    }
    p->body_ended = 1;
    sws_loop_defer(p->ups->loop, &p->kick);
}

static const sws_stream_body_ops_t proxy_body = {
    .data = body_data,
    .end = body_end,
};

static int method_idempotent(uint8_t m)
{
    return m == HTTP_GET || m == HTTP_HEAD || m == HTTP_OPTIONS || m == HTTP_PUT ||
           m == HTTP_DELETE || m == HTTP_TRACE;
}

/* The request's hash key for the pool, into key (NULL: none). The
 * client's address as bytes: 4 for IPv4, 16 for IPv6. */
static int request_key(const sws_upstream_pool_t *pool, const sws_request_t *r, sws_str_t *key)
{
    const struct sockaddr_storage *sa = &r->conn->peer;
    sws_str_t client = { NULL, 0 };
    if (!pool->hashed)
        return 0;
    if (r->conn->peer_len > 0 && sa->ss_family == AF_INET)
        client = (sws_str_t){ (const char *)&((const struct sockaddr_in *)sa)->sin_addr, 4 };
    else if (r->conn->peer_len > 0 && sa->ss_family == AF_INET6)
        client = (sws_str_t){ (const char *)&((const struct sockaddr_in6 *)sa)->sin6_addr, 16 };
    return sws_upstream_key_get(&pool->key, r->headers, r->nheaders, client, key);
}

/* A grpc pool is for HTTP/2 clients only (ADR 0034: gRPC needs
 * trailers end to end, which an HTTP/1 response rarely carries to a
 * client), answered 426 (the client's mistake: logged as info, like other
 * refused requests). 1 when answered. */
static int protocol_refused(const sws_pool_t *tpool, const sws_request_t *r,
                            const sws_str_t *name, const char *peer, sws_stream_t *st)
{
    if (tpool->protocol == SWS__POOL__PROTOCOL__GRPC && r->version_major != 2) {
        sws_log_info("proxy: pool %.*s (grpc): client %s spoke HTTP/%u.%u, gRPC needs HTTP/2 (426)",
                     (int)name->len, name->p, peer, r->version_major, r->version_minor);
        sws_stream_error(st, 426);
        return 1;
    }
    return 0;
}

/* Whether the request asks for trailers in the answer: gRPC's does
 * (`te: trailers`, the only TE an HTTP/2 request may carry); an HTTP/1
 * client's TE may list codings beside it (`TE: deflate, trailers`), which
 * do not go to an HTTP/2 member. */
static int wants_trailers(const sws_pool_t *tpool, const sws_request_t *r)
{
    return tpool->protocol == SWS__POOL__PROTOCOL__GRPC ||
           sws_proxy_list_has(r->headers, r->nheaders, "te", SWS_STR("trailers"));
}

/* The action; streams_body: called from the head handler, the body
 * still to come through the stream's body consumer. */
static void proxy_start(sws_stream_t *st, int streams_body)
{
    sws_request_t *r = &st->req;
    sws_worker_ctx_t *ctx = sws_worker_ctx(r);
    const sws_table_t *t = r->table;
    if (r->request_body_bytes > 0) {
        /* Dispatched after its body was read and dropped: a set without
         * the head handler (worker/conn.h). */
        sws_log_error("client %s: a request body reached the proxy after it was dropped (500)",
                      sws_conn_peer_text(r->conn));
        sws_stream_error(st, 500);
        return;
    }
    if (ctx == NULL || r->route->pool >= sws_table_pool_count(t)) {
        sws_log_error("proxy: route without a pool or worker context (500)");
        sws_stream_error(st, 500);
        return;
    }
    const sws_pool_t *tpool = sws_table_pool(t, r->route->pool);
    sws_str_t name = { sws_table_str(t, tpool->name), tpool->name.len };
    sws_upstream_pool_t *pool =
        sws_upstream_pools_find(&ctx->pools, name.p, name.len, r->route->pool);
    if (pool == NULL) {
        sws_log_error("proxy: pool %.*s: not in the worker's view (500)", (int)name.len, name.p);
        sws_stream_error(st, 500);
        return;
    }
    const char *peer = sws_conn_peer_text(r->conn);
    if (protocol_refused(tpool, r, &name, peer, st))
        return;
    int h2 = tpool->protocol == SWS__POOL__PROTOCOL__H2 ||
             tpool->protocol == SWS__POOL__PROTOCOL__GRPC;
    sws_proxy_req_opts_t o = {
        .host_header = { sws_table_str(t, r->route->host_header), r->route->host_header.len },
        .client_ip = { peer, strlen(peer) },
        .tls = r->tls,
        .via = { sws_table_str(t, r->route->via), r->route->via.len },
    };
    sws_str_t key = { NULL, 0 };
    int has_key = request_key(pool, r, &key);
    if (streams_body) {
        o.chunked = r->body_chunked;
        o.body_len = r->body_length;
    }
    /* A switch is tunnelled when asked for without a body (what would
     * follow the body on the connection is not ours to frame); an upgrade
     * with a body is an ordinary request, its Upgrade dropped. */
    int upgrade = !streams_body && !h2 && sws_proxy_req_upgrade(r, &o.upgrade);
    /* The client waits for a 100: the upstream's is the one to give it
     * (it may answer 417 or 401 instead, and the body never comes). Over
     * HTTP/2 the body goes as the window allows: the protocol answers 100. */
    o.expect_continue = streams_body && st->expect_continue && !h2;
    if (o.expect_continue)
        st->expect_continue = 0;
    static const char via_version[] = "1.1 ";
    size_t via_len = o.via.len > 0 ? SWS_LIT_LEN(via_version) + o.via.len : 0;
    /* The head is written once, into room that holds it (the size hint);
     * only a hint too small (never seen) costs a second walk. */
    size_t room = sws_proxy_req_size_hint(r, &o), req_len = 0;
    size_t rbuf_len = h2 ? 0 : SWS_PROXY_BUF;
    size_t rest = rbuf_len + name.len + 1 + key.len + via_len;
    proxy_t *p = NULL;
    int block = -1;
    for (int tries = 0; tries < 2; tries++) {
        size_t cap;
        p = proxy_alloc(&ctx->proxies, rbuf_len, room + rest, &cap, &block);
        if (p == NULL)
            break;
        room = cap - rest; /* all the block has */
        req_len = sws_proxy_req_write_in((char *)(p + 1), room, r, &o);
        if (req_len <= room)
            break;
        proxy_free(&ctx->proxies, p, block);
        p = NULL;
        room = req_len;
    }
    if (p == NULL) {
        sws_log_error("client %s: out of memory for a proxied request (500)", peer);
        sws_stream_error(st, 500);
        return;
    }
    memset(p, 0, offsetof(proxy_t, fields));
    p->spares = &ctx->proxies;
    p->block = block;
    p->req = (char *)(p + 1);
    p->req_len = req_len;
    p->rbuf = p->req + room;
    p->pool = p->rbuf + rbuf_len;
    memcpy(p->pool, name.p, name.len);
    p->pool[name.len] = '\0';
    p->pool_len = name.len;
    p->pool_hint = (uint32_t)(pool - ctx->pools.pools);
    /* The key's bytes live in the client's buffers: a retry comes later. */
    if (has_key) {
        memcpy(p->pool + name.len + 1, key.p, key.len);
        p->key = (sws_str_t){ p->pool + name.len + 1, key.len };
        p->has_key = 1;
    }
    if (via_len > 0) { /* the pseudonym lives in the generation: copied */
        char *v = p->pool + name.len + 1 + key.len;
        sws_put(SWS_PUT_LIT(v, via_version), o.via.p, o.via.len);
        p->via = (sws_str_t){ v, via_len };
    }
    p->st = st;
    p->ups = &ctx->upstreams;
    p->pools = &ctx->pools;
    p->pipes = &ctx->pipes;
    p->pipe.rd = p->pipe.wr = -1;
    p->retries = pool->retries;
    p->conf = pool->conf;
    memcpy(p->cur_text, "-", sizeof("-"));
    p->idempotent = (uint8_t)method_idempotent(r->method_id);
    p->is_head = r->is_head;
    p->upgrade = (uint8_t)upgrade;
    p->h2 = (uint8_t)h2;
    p->h2set = &ctx->h2;
    p->te_trailers = (uint8_t)(h2 && wants_trailers(tpool, r));
    sws_defer_init(&p->kick, body_kick);
    sws_stream_set_source(st, &proxy_source, p);
    if (streams_body) {
        p->has_body = 1;
        p->body_chunked = (uint8_t)(o.chunked && !h2);
        sws_stream_set_body(st, &proxy_body);
    }
    attempt(p);
}

void sws_proxy_handle(sws_stream_t *st)
{
    proxy_start(st, 0);
}

void sws_proxy_handle_body(sws_stream_t *st)
{
    proxy_start(st, 1);
}
