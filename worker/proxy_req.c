/* The request a proxy sends upstream (proxy_req.h). */
#include "worker/proxy_req.h"

#include <stdint.h>

#include "core/fmt.h"
#include "core/http_token.h"

/* A writer that counts what does not fit in out (all of it when out is
 * NULL): one walk serves the size and the write, so the size is exact
 * (STYLE: one computation for both paths). */
typedef struct emit {
    char *o;
    size_t n;
    size_t cap; /* o has room for cap bytes; what goes beyond is counted only */
} emit_t;

static void put(emit_t *e, const char *p, size_t n)
{
    /* n == 0: p may be NULL (an absent Host), which memcpy must not get. */
    if (e->o != NULL && n > 0 && e->n <= e->cap && n <= e->cap - e->n)
        memcpy(e->o + e->n, p, n);
    e->n += n;
}

static void put_str(emit_t *e, sws_str_t s)
{
    put(e, s.p, s.len);
}

#define PUT_LIT(e, lit) put((e), (lit), SWS_LIT_LEN(lit))

static void put_u64(emit_t *e, uint64_t v)
{
    char tmp[SWS_FMT_U64_MAX];
    put(e, tmp, (size_t)(sws_put_u64(tmp, v) - tmp));
}

static void put_field(emit_t *e, sws_str_t name, sws_str_t value)
{
    put_str(e, name);
    PUT_LIT(e, ": ");
    put_str(e, value);
    PUT_LIT(e, "\r\n");
}

static int is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Call each(tok, arg) for each token of the values of the fields named
 * field in h[0..n) until it returns nonzero; that value, or 0. */
static int list_tokens(const sws_header_t *h, unsigned n, const char *field,
                       int (*each)(sws_str_t tok, void *arg), void *arg)
{
    for (unsigned i = 0; i < n; i++) {
        if (!sws_str_caseeq_lit(h[i].name, field))
            continue;
        const char *p = h[i].value.p, *end = p + h[i].value.len;
        while (p < end) {
            while (p < end && (is_ows(*p) || *p == ','))
                p++;
            const char *t = p;
            while (p < end && *p != ',' && !is_ows(*p))
                p++;
            int r = p > t ? each((sws_str_t){ t, (size_t)(p - t) }, arg) : 0;
            if (r != 0)
                return r;
            while (p < end && *p != ',')
                p++;
        }
    }
    return 0;
}

static int token_is(sws_str_t tok, void *name)
{
    return sws_str_caseeq(tok, *(const sws_str_t *)name);
}

int sws_proxy_list_has(const sws_header_t *h, unsigned n, const char *field, sws_str_t token)
{
    return list_tokens(h, n, field, token_is, &token);
}

int sws_proxy_connection_names(const sws_header_t *h, unsigned n, sws_str_t name)
{
    return sws_proxy_list_has(h, n, "connection", name);
}

static int token_keep(sws_str_t tok, void *arg)
{
    sws_proxy_conn_tokens_t *t = arg;
    if (t->n == SWS_PROXY_CONN_TOKENS)
        return 1; /* full: the caller asks the fields */
    t->tok[t->n++] = tok;
    return 0;
}

void sws_proxy_conn_tokens_init(sws_proxy_conn_tokens_t *t, const sws_header_t *h, unsigned n)
{
    t->n = 0;
    t->h = NULL;
    t->nh = 0;
    if (list_tokens(h, n, "connection", token_keep, t) != 0) {
        t->h = h;
        t->nh = n;
    }
}

int sws_proxy_conn_tokens_name(const sws_proxy_conn_tokens_t *t, sws_str_t name)
{
    if (t->h != NULL)
        return sws_proxy_connection_names(t->h, t->nh, name);
    for (unsigned i = 0; i < t->n; i++)
        if (sws_str_caseeq(t->tok[i], name))
            return 1;
    return 0;
}

/* Fields written here from what the proxy knows, never copied from the
 * client. */
static int is_replaced(sws_str_t name)
{
    return sws_str_caseeq_lit(name, "x-forwarded-for") ||
           sws_str_caseeq_lit(name, "x-forwarded-proto") ||
           sws_str_caseeq_lit(name, "x-forwarded-host") || sws_str_caseeq_lit(name, "x-real-ip");
}

/* Whether the field named name, of token t (NULL: none), is dropped. */
static int drops(const sws_proxy_conn_tokens_t *ct, const sws_http_token_t *t, sws_str_t name)
{
    if (t != NULL && ((t->flags & SWS_TKF_HOP_BY_HOP) || t->id == SWS_TK_HOST ||
                      t->id == SWS_TK_CONTENT_LENGTH || t->id == SWS_TK_EXPECT))
        return 1;
    return is_replaced(name) || sws_proxy_conn_tokens_name(ct, name);
}

int sws_proxy_req_upgrade(const sws_request_t *r, sws_str_t *proto)
{
    const sws_str_t *up = sws_request_header(r, "upgrade");
    if (r->version_major != 1 || r->version_minor != 1 || up == NULL || up->len == 0 ||
        !sws_proxy_connection_names(r->headers, r->nheaders, SWS_STR("upgrade")) ||
        sws_str_caseeq_lit(*up, "h2c"))
        return 0;
    *proto = *up;
    return 1;
}

/* Via: the client's values, in order, then ours (RFC 9110 7.6.3). */
static void emit_via(emit_t *e, const sws_header_t *h, unsigned n, sws_str_t pseudonym)
{
    const char *sep = "";
    for (unsigned i = 0; i < n; i++) {
        if (!sws_str_caseeq_lit(h[i].name, "via") || h[i].value.len == 0)
            continue;
        put(e, sep, strlen(sep));
        put_str(e, h[i].value);
        sep = ", ";
    }
    put(e, sep, strlen(sep));
    PUT_LIT(e, "1.1 ");
    put_str(e, pseudonym);
}

int sws_proxy_req_drops(const sws_request_t *r, sws_str_t name)
{
    sws_proxy_conn_tokens_t ct;
    sws_proxy_conn_tokens_init(&ct, r->headers, r->nheaders);
    return drops(&ct, sws_http_token_find(name.p, name.len), name);
}

/* X-Forwarded-For: what the client's fields said, in order, then the
 * client's own address (as nginx's $proxy_add_x_forwarded_for). A field
 * named by Connection is hop-by-hop and does not count. */
static void put_forwarded_for(emit_t *e, const sws_request_t *r, const sws_proxy_req_opts_t *o,
                              const sws_proxy_conn_tokens_t *ct)
{
    PUT_LIT(e, "X-Forwarded-For: ");
    int conn_named = sws_proxy_conn_tokens_name(ct, SWS_STR("x-forwarded-for"));
    for (unsigned i = 0; i < r->nheaders && !conn_named; i++) {
        if (!sws_str_caseeq_lit(r->headers[i].name, "x-forwarded-for") ||
            r->headers[i].value.len == 0)
            continue;
        put_str(e, r->headers[i].value);
        PUT_LIT(e, ", ");
    }
    put_str(e, o->client_ip);
    PUT_LIT(e, "\r\n");
}

static void emit_request(emit_t *e, const sws_request_t *r, const sws_proxy_req_opts_t *o)
{
    put_str(e, r->method);
    PUT_LIT(e, " ");
    put_str(e, r->path);
    if (r->query.len > 0) {
        PUT_LIT(e, "?");
        put_str(e, r->query);
    }
    PUT_LIT(e, " HTTP/1.1\r\n");
    /* Always one Host, empty when an HTTP/1.0 client sent none (RFC 9112
     * 3.2): the request goes out as HTTP/1.1, which a member must refuse
     * without Host. */
    sws_str_t host = o->host_header.len > 0 ? o->host_header : r->host;
    put_field(e, SWS_STR("Host"), host);
    sws_proxy_conn_tokens_t ct;
    sws_proxy_conn_tokens_init(&ct, r->headers, r->nheaders);
    int framed = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        const sws_header_t *hd = &r->headers[i];
        const sws_http_token_t *t = sws_http_token_find(hd->name.p, hd->name.len);
        if (t != NULL && (t->id == SWS_TK_CONTENT_LENGTH || t->id == SWS_TK_TRANSFER_ENCODING))
            framed = 1;
        if (!drops(&ct, t, hd->name) && !(o->via.len > 0 && sws_str_caseeq_lit(hd->name, "via")))
            put_field(e, hd->name, hd->value);
    }
    if (o->upgrade.len > 0) {
        PUT_LIT(e, "Connection: upgrade\r\n");
        put_field(e, SWS_STR("Upgrade"), o->upgrade);
    }
    if (o->expect_continue)
        PUT_LIT(e, "Expect: 100-continue\r\n");
    if (o->via.len > 0) {
        PUT_LIT(e, "Via: ");
        emit_via(e, r->headers, r->nheaders, o->via);
        PUT_LIT(e, "\r\n");
    }
    put_forwarded_for(e, r, o, &ct);
    put_field(e, SWS_STR("X-Forwarded-Proto"), o->tls ? SWS_STR("https") : SWS_STR("http"));
    if (r->host.len > 0)
        put_field(e, SWS_STR("X-Forwarded-Host"), r->host);
    put_field(e, SWS_STR("X-Real-IP"), o->client_ip);
    if (o->chunked) {
        PUT_LIT(e, "Transfer-Encoding: chunked\r\n");
    } else if (o->body_len > 0 || framed) {
        PUT_LIT(e, "Content-Length: ");
        put_u64(e, o->body_len);
        PUT_LIT(e, "\r\n");
    }
    PUT_LIT(e, "\r\n");
}

size_t sws_proxy_req_size(const sws_request_t *r, const sws_proxy_req_opts_t *o)
{
    return sws_proxy_req_write_in(NULL, 0, r, o);
}

size_t sws_proxy_req_write(char *out, const sws_request_t *r, const sws_proxy_req_opts_t *o)
{
    return sws_proxy_req_write_in(out, SIZE_MAX, r, o);
}

size_t sws_proxy_req_write_in(char *out, size_t cap, const sws_request_t *r,
                              const sws_proxy_req_opts_t *o)
{
    emit_t e = { out, 0, cap };
    emit_request(&e, r, o);
    return e.n;
}

size_t sws_proxy_req_size_hint(const sws_request_t *r, const sws_proxy_req_opts_t *o)
{
    /* Our own lines: the request line's and the fields' fixed text, a
     * Content-Length of 20 digits. */
    size_t n = 192 + r->method.len + r->path.len + r->query.len + o->host_header.len +
               2 * r->host.len + 2 * o->client_ip.len;
    /* Connection: upgrade, Upgrade, Expect and our Via (the client's Via
     * values are counted with the fields). */
    n += 64 + o->upgrade.len + o->via.len;
    for (unsigned i = 0; i < r->nheaders; i++)
        n += r->headers[i].name.len + r->headers[i].value.len + SWS_LIT_LEN(": \r\n");
    return n;
}
