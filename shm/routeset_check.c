/*
 * The RouteSet checker (shm/routeset_check.h): one walk over a RouteSet,
 * one function per rule, the same rules the YAML reader applies while it
 * walks the file.
 */
#include "shm/routeset_check.h"

#include "core/fmt.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/err.h"
#include "core/log.h"
#include "core/http_token.h"
#include "core/str.h"
#include "shm/table.h"
#include "core/path.h"
#include "core/tls_pem.h"

#include <openssl/ssl.h>

/* ---- refusals ---- */

static sws_routeset_refusal_t *at(sws_routeset_refusal_t *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static sws_routeset_refusal_t *at(sws_routeset_refusal_t *why, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why->path, sizeof(why->path), fmt, ap);
    va_end(ap);
    return why;
}

static int refuse(sws_routeset_refusal_t *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int refuse(sws_routeset_refusal_t *why, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why->msg, sizeof(why->msg), fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- the rules ---- */

const char *sws_routeset_host_name_problem(const char *s)
{
    static const char wildcard[] = "a wildcard must be \"*.\" followed by a name";
    static const char empty_label[] = "has an empty label (two dots, or a dot at either end)";
    size_t len, label = 0;
    int wild = 0;

    if (strcmp(s, "*") == 0)
        return NULL;
    if (s[0] == '*') {
        if (s[1] != '.')
            return wildcard;
        s += 2;
        wild = 1;
    }
    len = strlen(s);
    if (len == 0)
        return wild ? wildcard : "must not be empty";
    if (s[0] == '[') {
        char ip[INET6_ADDRSTRLEN];
        struct in6_addr a;
        if (wild)
            return wildcard;
        if (s[len - 1] != ']' || len - 2 >= sizeof(ip))
            return "an IPv6 address is written in brackets, as in [::1]";
        memcpy(ip, s + 1, len - 2);
        ip[len - 2] = '\0';
        return inet_pton(AF_INET6, ip, &a) == 1 ? NULL : "not an IPv6 address";
    }
    /* A fully qualified "a.example." is "a.example": the table strips the
     * dot, as it strips one from the request's Host. */
    if (len > 1 && s[len - 1] == '.' && s[len - 2] != '.')
        len--;
    if (len > 253)
        return "is longer than 253 characters";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0)
                return empty_label;
            label = 0;
        } else if (c == ':') {
            return "a host name has no port (ports are ignored when matching)";
        } else if (c == '*') {
            return wildcard;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_') {
            if (++label > 63)
                return "has a label longer than 63 characters";
        } else {
            return "may contain only letters, digits, '-', '_' and '.'";
        }
    }
    return label == 0 ? empty_label : NULL;
}

int sws_routeset_host_names_same(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 1 && a[la - 1] == '.')
        la--;
    if (lb > 1 && b[lb - 1] == '.')
        lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}

const char *sws_routeset_header_name_problem(const char *s)
{
    if (s[0] == '\0')
        return "a header name must not be empty";
    if (!sws_is_token(s))
        return "a header name may contain only letters, digits and !#$%&'*+-.^_`|~";
    /* Framing the server computes from the body and the connection state;
     * a second value would make the response ambiguous to a client. */
    const sws_http_token_t *t = sws_http_token_find(s, strlen(s));
    if (t != NULL && (t->flags & SWS_TKF_FRAMING))
        return "is set by the server (from the body and the connection state)";
    return NULL;
}

int sws_routeset_field_value_ok(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 0;
    }
    return 1;
}

int sws_routeset_via_ok(const char *via)
{
    size_t len = strlen(via);
    return len == 0 || (len <= SWS_VIA_PSEUDONYM_MAX && sws_is_token(via));
}

/* Raw (still percent-encoded), without query or fragment. */
static const char *path_problem(const char *s)
{
    if (s[0] != '/')
        return "must start with \"/\"";
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '?' || c == '#')
            return "must not contain '?' or '#' (routes match the path without the query)";
        if (c <= 0x20 || c >= 0x7f)
            return "must be ASCII without spaces or control characters "
                   "(percent-encode the rest, as clients send it)";
    }
    return NULL;
}

int sws_routeset_route_path_check(const char *path, char *msg, size_t msglen)
{
    sws_str_t in = { path, strlen(path) }, norm;
    const char *why = path_problem(path);
    char *out;
    int rc = -1;

    if (why != NULL) {
        snprintf(msg, msglen, "\"%s\" %s", path, why);
        return -1;
    }
    /* Requests are routed by their normal path (ADR 0006): a route path in
     * another form would never match, so it is refused with the form to
     * write instead. */
    out = malloc(SWS_PATH_OUT_MAX(in.len));
    if (out == NULL) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    switch (sws_path_normalize(in, out, SWS_PATH_OUT_MAX(in.len), &norm, &why)) {
    case SWS_PATH_NORMAL:
        rc = 0;
        break;
    case SWS_PATH_BAD:
        snprintf(msg, msglen, "\"%s\" is no valid request path: %s", path, why);
        break;
    default:
        snprintf(msg, msglen, "\"%s\" is not in normal form (requests are matched in it): "
                 "write \"%.*s\"", path, (int)norm.len, norm.p);
        break;
    }
    free(out);
    return rc;
}

int sws_routeset_index_ok(const char *index)
{
    return index[0] != '\0' && strchr(index, '/') == NULL && strcmp(index, ".") != 0 &&
           strcmp(index, "..") != 0;
}

int sws_routeset_redirect_status_ok(uint32_t status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

const char *sws_routeset_location_problem(const char *location)
{
    if (location[0] == '\0')
        return "must not be empty";
    for (const char *c = location; *c != '\0'; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c == 0x7f)
            return "must not contain spaces or control characters (percent-encode them)";
    return NULL;
}

/* 1..65535, in at most five digits. */
static int port_parse(const char *s, uint16_t *port)
{
    unsigned long v = 0;
    size_t len = 0;

    for (; s[len] >= '0' && s[len] <= '9'; len++)
        if (len == 5)
            return -1; /* a sixth digit */
        else
            v = v * 10 + (unsigned long)(s[len] - '0');
    if (len == 0 || s[len] != '\0' || v < 1 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

/* The host part of an address without brackets: an IPv4 address or a name. */
static const char *addr_host(sws_routeset_addr_t *out)
{
    const char *problem;
    size_t len;

    if (inet_pton(AF_INET, out->host, out->ip) == 1) {
        out->family = AF_INET;
        return NULL;
    }
    /* Dotted digits that are no IPv4 address ("10.0.0", "300.1.1.1") are a
     * typo far more often than a name. */
    if (strspn(out->host, "0123456789.") == strlen(out->host))
        return "not an IPv4 address";
    if (out->host[0] == '*')
        return "must name one host, not a wildcard";
    problem = sws_routeset_host_name_problem(out->host);
    if (problem != NULL)
        return problem;
    len = strlen(out->host);
    if (out->host[len - 1] == '.')
        out->host[len - 1] = '\0';
    for (char *c = out->host; *c != '\0'; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c | 0x20);
    out->family = AF_UNSPEC;
    return NULL;
}

const char *sws_routeset_address_problem(const char *text, int need_port,
                                         sws_routeset_addr_t *out)
{
    return sws_routeset_address_parse(text, need_port ? SWS_ADDR_NEED_PORT : 0, out);
}

const char *sws_routeset_address_parse(const char *text, unsigned flags, sws_routeset_addr_t *out)
{
    sws_routeset_addr_t tmp;
    const char *port = NULL, *problem;
    size_t hostlen;

    if (out == NULL)
        out = &tmp;
    /* Not the whole struct: host and key are strings (a parse per member
     * of a large RouteSet, several times per build). */
    out->family = AF_UNSPEC;
    out->port = 0;
    memset(out->ip, 0, sizeof(out->ip));
    out->host[0] = out->key[0] = '\0';
    if (text[0] == '\0')
        return "must not be empty";
    /* nginx's proxy_pass takes a URL: the first thing a newcomer writes
     * (whose "http:" read as an IPv6 address without brackets). */
    if (strstr(text, "://") != NULL)
        return (flags & SWS_ADDR_ANY_HOST) ? "a URL; expected HOST:PORT"
                                           : "a URL; expected HOST:PORT (a pool says http or "
                                             "https by its protocol)";
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL)
            return "missing ']' after the IPv6 address";
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return "expected [IPv6]:PORT";
        hostlen = (size_t)(close - text - 1);
        if (hostlen >= INET6_ADDRSTRLEN)
            return "not an IPv6 address";
        memcpy(out->host, text + 1, hostlen);
        out->host[hostlen] = '\0';
        if (inet_pton(AF_INET6, out->host, out->ip) != 1)
            return "not an IPv6 address";
        inet_ntop(AF_INET6, out->ip, out->host, sizeof(out->host));
        out->family = AF_INET6;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon != NULL && memchr(text, ':', (size_t)(colon - text)) != NULL)
            return "an IPv6 address needs brackets, as in [::1]:8080";
        hostlen = colon != NULL ? (size_t)(colon - text) : strlen(text);
        port = colon != NULL ? colon + 1 : NULL;
        if ((flags & SWS_ADDR_ANY_HOST) && port != NULL &&
            (hostlen == 0 || (hostlen == 1 && text[0] == '*'))) {
            strcpy(out->host, "0.0.0.0"); /* out->ip: zeros */
            out->family = AF_INET;
        } else {
            if (hostlen == 0)
                return "the host is missing (expected HOST:PORT)";
            if (hostlen >= sizeof(out->host))
                return "is longer than 253 characters";
            memcpy(out->host, text, hostlen);
            out->host[hostlen] = '\0';
            problem = addr_host(out);
            if (problem != NULL)
                return problem;
        }
    }
    if (port != NULL && port_parse(port, &out->port) < 0)
        return "the port must be a number from 1 to 65535";
    if (port == NULL && (flags & SWS_ADDR_NEED_PORT))
        return "the port is missing (expected HOST:PORT)";
    /* Not snprintf: an ingress RouteSet has 100,000 members, each parsed
     * by the check and the table build (bench/ingressbench.py). It fits:
     * a host of 255 bytes, "[]:" and 5 digits < sizeof(key). */
    char *o = out->key;
    if (out->family == AF_INET6)
        o = SWS_PUT_LIT(o, "[");
    o = sws_put(o, out->host, strlen(out->host));
    if (out->family == AF_INET6)
        o = SWS_PUT_LIT(o, "]");
    if (out->port != 0) {
        o = SWS_PUT_LIT(o, ":");
        o = sws_put_u64(o, out->port);
    }
    *o = '\0';
    return NULL;
}

const char *sws_routeset_pool_name_problem(const char *name)
{
    size_t len = strlen(name);

    if (len == 0)
        return "must not be empty";
    if (len > SWS_ROUTESET_POOL_NAME_MAX)
        return "is longer than 128 characters";
    for (const char *c = name; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.'))
            return "may contain only letters, digits, '-', '_' and '.'";
    return NULL;
}

const char *sws_routeset_hash_key_problem(const char *key, unsigned *kind, const char **name)
{
    static const struct {
        const char *prefix;
        unsigned kind;
    } named[] = { { "header:", SWS_HASH_HEADER }, { "cookie:", SWS_HASH_COOKIE } };

    if (strcmp(key, "client_ip") == 0) {
        *kind = SWS_HASH_CLIENT_IP;
        *name = "";
        return NULL;
    }
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        size_t n = strlen(named[i].prefix);
        if (strncmp(key, named[i].prefix, n) != 0)
            continue;
        if (!sws_is_token(key + n))
            return "NAME must be a header or cookie name: letters, digits and "
                   "!#$%&'*+-.^_`|~";
        *kind = named[i].kind;
        *name = key + n;
        return NULL;
    }
    return "expected client_ip, header:NAME or cookie:NAME";
}

/* ---- the walk ---- */

static int check_settings(const Sws__Settings *st, sws_routeset_refusal_t *why)
{
    sws_log_level_t level;

    if (st == NULL)
        return 0;
    /* "": workers keep the level they have. */
    if (st->log_level[0] != '\0' && sws_log_level_parse(st->log_level, &level) < 0)
        return refuse(at(why, "settings.log_level"),
                      "expected debug, info, notice, warn or error, got \"%s\"", st->log_level);
    if (!sws_routeset_field_value_ok(st->server_name))
        return refuse(at(why, "settings.server_name"),
                      "must not contain control characters (CR, LF, ...)");
    if (st->server_tokens > SWS__SETTINGS__SERVER_TOKENS__BUILD)
        return refuse(at(why, "settings.server_tokens"), "expected off, on or build, got %d",
                      (int)st->server_tokens);
    return 0;
}


static int check_timeout(uint32_t ms, const char *pool, const char *key,
                         sws_routeset_refusal_t *why)
{
    if (ms >= 1 && ms <= SWS_ROUTESET_POOL_TIMEOUT_MAX_MS)
        return 0;
    return refuse(at(why, "%s.%s", pool, key), "expected 1 to %u milliseconds, got %u",
                  SWS_ROUTESET_POOL_TIMEOUT_MAX_MS, ms);
}

static int check_count(uint32_t v, uint32_t max, const char *pool, const char *key,
                       sws_routeset_refusal_t *why)
{
    if (v <= max)
        return 0;
    return refuse(at(why, "%s.%s", pool, key), "expected a number from 0 to %u, got %u", max, v);
}

static int check_balance(const Sws__Pool *pool, const char *at_pool, sws_routeset_refusal_t *why)
{
    const char *problem, *name;
    unsigned kind;

    switch (pool->balance) {
    case SWS__POOL__BALANCE__ROUND_ROBIN:
    case SWS__POOL__BALANCE__LEAST_CONN:
        if (pool->hash_key[0] != '\0')
            return refuse(at(why, "%s.hash_key", at_pool), "a hash_key needs balance hash");
        return 0;
    case SWS__POOL__BALANCE__HASH:
        if (pool->hash_key[0] == '\0')
            return refuse(at(why, "%s.hash_key", at_pool),
                          "balance hash needs a hash_key: client_ip, header:NAME or cookie:NAME");
        problem = sws_routeset_hash_key_problem(pool->hash_key, &kind, &name);
        if (problem != NULL)
            return refuse(at(why, "%s.hash_key", at_pool), "\"%s\": %s", pool->hash_key, problem);
        return 0;
    default:
        return refuse(at(why, "%s.balance", at_pool),
                      "expected round_robin, least_conn or hash, got %d", (int)pool->balance);
    }
}

const char *sws_routeset_sni_problem(const char *name)
{
    struct in_addr a4;
    struct in6_addr a6;

    if (name[0] == '*')
        return "a wildcard names no one host";
    /* RFC 6066 3: "Literal IPv4 and IPv6 addresses are not permitted". */
    if (name[0] == '[' || inet_pton(AF_INET, name, &a4) == 1 || inet_pton(AF_INET6, name, &a6) == 1)
        return "an IP address is never sent as SNI (leave sni out: the member's IP is verified)";
    return sws_routeset_host_name_problem(name);
}

/* A pool's tls.ca_pem, through the loader the worker uses
 * (core/tls_pem.h), into a scratch store. */
static int ca_pem_check(const void *pem, size_t len, char *err, size_t errlen)
{
    X509_STORE *store = X509_STORE_new();
    int rc;

    if (store == NULL)
        return sws_errf(err, errlen, "out of memory");
    rc = sws_tls_pem_ca_load(store, pem, len, err, errlen);
    X509_STORE_free(store);
    return rc;
}

const char *sws_routeset_pool_tls_problem(int protocol)
{
    if (protocol == SWS__POOL__PROTOCOL__HTTPS || protocol == SWS__POOL__PROTOCOL__H2 ||
        protocol == SWS__POOL__PROTOCOL__GRPC)
        return NULL;
    return "tls needs protocol: https, h2 or grpc";
}

int sws_routeset_pool_tls(const Sws__Pool *pool)
{
    if (pool->protocol == SWS__POOL__PROTOCOL__HTTPS)
        return 1;
    return pool->tls != NULL && sws_routeset_pool_tls_problem(pool->protocol) == NULL;
}

/* protocol, and tls only with https, h2 or grpc: verification needs trust
 * anchors, and an sni is a host name. Paths as the YAML keys (tls.ca). */
static int check_pool_tls(const Sws__Pool *pool, const char *p, sws_routeset_refusal_t *why)
{
    const Sws__Pool__Tls *tls = pool->tls;
    char ca_problem[128];
    const char *problem;

    if (pool->protocol != SWS__POOL__PROTOCOL__HTTP && pool->protocol != SWS__POOL__PROTOCOL__HTTPS &&
        pool->protocol != SWS__POOL__PROTOCOL__H2 && pool->protocol != SWS__POOL__PROTOCOL__GRPC)
        return refuse(at(why, "%s.protocol", p), "expected http, https, h2 or grpc, got %d",
                      (int)pool->protocol);
    if ((problem = sws_routeset_pool_tls_problem(pool->protocol)) != NULL)
        return tls == NULL ? 0 : refuse(at(why, "%s.tls", p), "%s", problem);
    if (!sws_routeset_pool_tls(pool))
        return 0; /* h2c */
    if ((tls == NULL || !tls->skip_verify) &&
        ca_pem_check(tls ? tls->ca_pem.data : NULL, tls ? tls->ca_pem.len : 0, ca_problem,
                     sizeof(ca_problem)) < 0)
        return refuse(at(why, "%s.tls.ca", p), "%s%s%s", tls && tls->ca[0] ? tls->ca : "",
                      tls && tls->ca[0] ? ": " : "", ca_problem);
    if (tls != NULL && tls->sni[0] != '\0' && (problem = sws_routeset_sni_problem(tls->sni)) != NULL)
        return refuse(at(why, "%s.tls.sni", p), "\"%s\": %s", tls->sni, problem);
    return 0;
}

static int check_pool_fields(const Sws__Pool *pool, const char *p, sws_routeset_refusal_t *why)
{
    const Sws__Pool__Timeouts *to = pool->timeouts;
    const Sws__Pool__Health *he = pool->health;
    const char *problem = sws_routeset_pool_name_problem(pool->name);

    if (problem != NULL)
        return refuse(at(why, "%s.name", p), "\"%s\": %s", pool->name, problem);
    if (check_balance(pool, p, why) < 0 ||
        check_count(pool->keepalive, SWS_ROUTESET_KEEPALIVE_MAX, p, "keepalive", why) < 0 ||
        check_count(pool->retries, SWS_ROUTESET_RETRIES_MAX, p, "retries", why) < 0 ||
        check_count(pool->max_conns, SWS_ROUTESET_MAX_CONNS_MAX, p, "max_conns", why) < 0 ||
        check_pool_tls(pool, p, why) < 0)
        return -1;
    /* Absent: the table takes the defaults. Present: every field is a
     * value, and no timeout is "none". */
    if (to != NULL && (check_timeout(to->connect_ms, p, "timeouts.connect_ms", why) < 0 ||
                       check_timeout(to->send_ms, p, "timeouts.send_ms", why) < 0 ||
                       check_timeout(to->read_ms, p, "timeouts.read_ms", why) < 0 ||
                       check_timeout(to->idle_ms, p, "timeouts.idle_ms", why) < 0))
        return -1;
    if (he != NULL &&
        (check_count(he->max_fails, SWS_ROUTESET_MAX_FAILS_MAX, p, "health.max_fails", why) < 0 ||
         /* Passive health off: the windows are never read. */
         (he->max_fails > 0 &&
          (check_timeout(he->fail_window_ms, p, "health.fail_window_ms", why) < 0 ||
           check_timeout(he->cooldown_ms, p, "health.cooldown_ms", why) < 0))))
        return -1;
    return 0;
}

/* ---- the scratch (sws_routeset_scratch_t): a stack, sized before the
 * check from counts, so an array taken never moves ---- */

/* The smallest page a kernel maps: a write at each such step touches
 * every page, whatever the page size. */
#define SCRATCH_PAGE 4096u

/* Each array starts on malloc's alignment. */
#define SCRATCH_ALIGN 16u

static size_t scratch_round(size_t bytes)
{
    return (bytes + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
}

/* bytes from s, released by setting s->used back; NULL past what
 * sws_routeset_scratch_reserve sized (a bug: it counts what the check
 * takes). */
static void *take(sws_routeset_scratch_t *s, size_t bytes)
{
    bytes = scratch_round(bytes);
    if (bytes > s->cap - s->used)
        return NULL;
    void *p = (char *)s->mem + s->used;
    s->used += bytes;
    return p;
}

/* Slots of the member ids' hash set for n ids: a power of two, at most
 * half full. */
static size_t ids_slots(size_t n)
{
    size_t cap = 2;
    while (cap < 2 * n)
        cap <<= 1;
    return cap;
}

/* A member's path in a refusal, formatted only then: an ingress set
 * passes 100,000 members. */
#define MEMBER_AT "pools[%zu].members[%zu]"

/* One member's place and id, for the ids-once check. */
typedef struct member_use {
    uint64_t id;
    size_t p, m;
    int derived;
    size_t host_bytes; /* its table members' hosts, each with its NUL */
} member_use_t;

/* A name's resolved addresses (Member.resolved): IP literals with the
 * name's port, each once. Quadratic in at most SWS_ROUTESET_RESOLVED_MAX. */
static int check_resolved(const Sws__Member *mb, const sws_routeset_addr_t *name,
                          member_use_t *use, sws_routeset_refusal_t *why)
{
    sws_routeset_addr_t r, q;

    if (name->family != AF_UNSPEC)
        return refuse(at(why, MEMBER_AT ".resolved", use->p, use->m),
                      "\"%s\" is not a name: only a name has resolved addresses", mb->address);
    if (mb->n_resolved > SWS_ROUTESET_RESOLVED_MAX)
        return refuse(at(why, MEMBER_AT ".resolved", use->p, use->m),
                      "%zu addresses, at most %u", mb->n_resolved, SWS_ROUTESET_RESOLVED_MAX);
    for (size_t i = 0; i < mb->n_resolved; i++) {
        const char *problem = sws_routeset_address_problem(mb->resolved[i], 1, &r);
        if (problem == NULL && r.family == AF_UNSPEC)
            problem = "expected an IP address, got a name";
        if (problem == NULL && r.port != name->port)
            problem = "the port differs from the name's";
        for (size_t j = 0; problem == NULL && j < i; j++)
            if (sws_routeset_address_problem(mb->resolved[j], 1, &q) == NULL &&
                strcmp(q.key, r.key) == 0)
                problem = "listed twice";
        if (problem != NULL)
            return refuse(at(why, MEMBER_AT ".resolved[%zu]", use->p, use->m, i), "\"%s\": %s",
                          mb->resolved[i], problem);
        use->host_bytes += strlen(r.host) + 1;
    }
    return 0;
}

static int check_member(const Sws__Pool *pool, const Sws__Member *mb, member_use_t *use,
                        sws_routeset_refusal_t *why)
{
    sws_routeset_addr_t addr;
    const char *problem = sws_routeset_address_problem(mb->address, 1, &addr);

    if (problem != NULL)
        return refuse(at(why, MEMBER_AT ".address", use->p, use->m), "\"%s\": %s", mb->address,
                      problem);
    if (mb->weight > SWS_ROUTESET_WEIGHT_MAX)
        return refuse(at(why, MEMBER_AT ".weight", use->p, use->m),
                      "expected a number from 1 to %u (0: the default, 1), got %u",
                      SWS_ROUTESET_WEIGHT_MAX, mb->weight);
    if (mb->state != SWS__MEMBER__STATE__UP && mb->state != SWS__MEMBER__STATE__DRAINING &&
        mb->state != SWS__MEMBER__STATE__DOWN)
        return refuse(at(why, MEMBER_AT ".state", use->p, use->m),
                      "expected up, draining or down, got %d", (int)mb->state);
    use->host_bytes = mb->n_resolved > 0 ? 0 : strlen(addr.host) + 1;
    if (mb->n_resolved > 0 && check_resolved(mb, &addr, use, why) < 0)
        return -1;
    use->derived = mb->id == 0;
    use->id = use->derived ? sws_member_id(pool->name, addr.key) : mb->id;
    return 0;
}

/* Every member id once across the RouteSet: a hash set filled in
 * RouteSet order, so the first id seen again is the earliest second use
 * (ingressd's sets have 100,000 members: a sort was a fifth of the check).
 * Two derived ids are equal for the same address in a pool (a 64-bit
 * collision otherwise), so that is how it is reported. */
static int check_ids_once(sws_routeset_scratch_t *scratch, const Sws__RouteSet *rs,
                          const member_use_t *uses, size_t n, sws_routeset_refusal_t *why)
{
    const member_use_t *dup = NULL, *first = NULL;
    size_t cap = ids_slots(n);
    uint32_t *slots = take(scratch, cap * sizeof(*slots)); /* use index + 1; 0: empty */
    if (slots == NULL)
        return refuse(at(why, "pools"), "out of memory");
    memset(slots, 0, cap * sizeof(*slots));
    for (size_t i = 0; i < n && dup == NULL; i++) {
        /* A given id may be 1, 2, 3: spread it (Fibonacci hashing). */
        size_t s = (size_t)((uses[i].id * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
        while (slots[s] != 0 && uses[slots[s] - 1].id != uses[i].id)
            s = (s + 1) & (cap - 1);
        if (slots[s] != 0) {
            dup = &uses[i];
            first = &uses[slots[s] - 1];
        }
        slots[s] = (uint32_t)(i + 1);
    }
    if (dup == NULL)
        return 0;
    if (dup->derived && first->derived && dup->p == first->p)
        return refuse(at(why, "pools[%zu].members[%zu].address", dup->p, dup->m),
                      "\"%s\" is already a member of this pool (members[%zu])",
                      rs->pools[dup->p]->members[dup->m]->address, first->m);
    return refuse(at(why, "pools[%zu].members[%zu].id", dup->p, dup->m),
                  "member id %llu is already used (pools[%zu].members[%zu])",
                  (unsigned long long)dup->id, first->p, first->m);
}

typedef struct use {
    const char *key;
    size_t keylen;
    unsigned kind; /* routes: the match */
    size_t a, b;
} use_t;

/* qsort_r order: kind, key (ASCII case folded when *fold: host names),
 * then place, so equal keys lie together in RouteSet order. */
static int use_cmp(const void *x, const void *y, void *fold)
{
    const use_t *u = x, *v = y;
    size_t n = u->keylen < v->keylen ? u->keylen : v->keylen;
    int c;

    if (u->kind != v->kind)
        return u->kind < v->kind ? -1 : 1;
    c = *(const int *)fold ? strncasecmp(u->key, v->key, n) : memcmp(u->key, v->key, n);
    if (c != 0)
        return c;
    if (u->keylen != v->keylen)
        return u->keylen < v->keylen ? -1 : 1;
    if (u->a != v->a)
        return u->a < v->a ? -1 : 1;
    return u->b < v->b ? -1 : (u->b > v->b);
}

static int use_same(const use_t *u, const use_t *v, int fold)
{
    if (u->kind != v->kind || u->keylen != v->keylen)
        return 0;
    return fold ? strncasecmp(u->key, v->key, u->keylen) == 0
                : memcmp(u->key, v->key, u->keylen) == 0;
}

/* The earliest second use in uses[0..n), or NULL; *first gets the use it
 * repeats. Sorts uses. */
static const use_t *second_use(use_t *uses, size_t n, int fold, const use_t **first)
{
    const use_t *found = NULL;

    qsort_r(uses, n, sizeof(*uses), use_cmp, &fold);
    for (size_t i = 1; i < n; i++) {
        if (!use_same(&uses[i - 1], &uses[i], fold))
            continue;
        const use_t *f = &uses[i - 1];
        while (f > uses && use_same(f - 1, &uses[i], fold))
            f--;
        if (found == NULL || uses[i].a < found->a ||
            (uses[i].a == found->a && uses[i].b < found->b)) {
            found = &uses[i];
            *first = f;
        }
    }
    return found;
}

/* What the checks of routes need from the pools: their names sorted
 * (check_pools makes them), so that a proxy route finds its pool by a
 * binary search. An ingress RouteSet has thousands of pools and routes. */
typedef sws_routeset_pools_t check_ctx_t; /* sorted: one use per pool; the caller frees */

static int name_cmp(const void *key, const void *elem)
{
    const use_t *u = elem;
    size_t len = strlen(key), n = len < u->keylen ? len : u->keylen;
    int c = memcmp(key, u->key, n);
    return c != 0 ? c : len < u->keylen ? -1 : len > u->keylen;
}

static const use_t *pool_find(const check_ctx_t *cx, const char *name)
{
    if (cx->rs->n_pools == 0)
        return NULL;
    return bsearch(name, cx->sorted, cx->rs->n_pools, sizeof(*cx->sorted), name_cmp);
}

/* Each pool's name once: sorted into cx->sorted, where equal names lie
 * together. */
static int check_pool_names(check_ctx_t *cx, sws_routeset_refusal_t *why)
{
    const Sws__RouteSet *rs = cx->rs;
    const use_t *dup, *first = NULL;

    if (rs->n_pools == 0)
        return 0;
    cx->sorted = take(cx->scratch, rs->n_pools * sizeof(*cx->sorted));
    if (cx->sorted == NULL)
        return refuse(at(why, "pools"), "out of memory");
    for (size_t p = 0; p < rs->n_pools; p++)
        cx->sorted[p] = (use_t){ rs->pools[p]->name, strlen(rs->pools[p]->name), 0, p, 0 };
    dup = second_use(cx->sorted, rs->n_pools, 0, &first);
    if (dup != NULL)
        return refuse(at(why, "pools[%zu].name", dup->a),
                      "pool \"%s\" appears twice (first at pools[%zu])", dup->key, first->a);
    return 0;
}

/* "NAME[I]" at o, NUL-terminated; returns where the NUL is. Per pool and
 * per member of a large RouteSet, where snprintf was a tenth of the check. */
static char *put_index(char *o, const char *name, size_t i)
{
    o = sws_put(o, name, strlen(name));
    o = SWS_PUT_LIT(o, "[");
    o = sws_put_u64(o, i);
    o = SWS_PUT_LIT(o, "]");
    *o = '\0';
    return o;
}

static int check_pools(check_ctx_t *cx, sws_routeset_refusal_t *why)
{
    const Sws__RouteSet *rs = cx->rs;
    size_t nmembers = 0, ntable = 0, k = 0;
    member_use_t *uses;
    int rc = 0;

    for (size_t p = 0; p < rs->n_pools; p++) {
        char at_pool[sizeof("pools[]") + SWS_FMT_U64_MAX];
        put_index(at_pool, "pools", p);
        if (check_pool_fields(rs->pools[p], at_pool, why) < 0)
            return -1;
        nmembers += rs->pools[p]->n_members;
        for (size_t m = 0; m < rs->pools[p]->n_members; m++)
            ntable += sws_routeset_member_width(rs->pools[p]->members[m]);
    }
    if (check_pool_names(cx, why) < 0)
        return -1;
    if (nmembers == 0)
        return 0;
    if (ntable > SWS_ROUTESET_MEMBERS_MAX)
        return refuse(at(why, "pools"), "%zu members in all, at most %u", ntable,
                      SWS_ROUTESET_MEMBERS_MAX);
    size_t mark = cx->scratch->used;
    uses = take(cx->scratch, nmembers * sizeof(*uses));
    if (uses == NULL)
        return refuse(at(why, "pools"), "out of memory");
    for (size_t p = 0; p < rs->n_pools && rc == 0; p++) {
        for (size_t m = 0; m < rs->pools[p]->n_members && rc == 0; m++) {
            uses[k] = (member_use_t){ .p = p, .m = m };
            rc = check_member(rs->pools[p], rs->pools[p]->members[m], &uses[k], why);
            cx->host_bytes += uses[k++].host_bytes;
        }
    }
    if (rc == 0)
        rc = check_ids_once(cx->scratch, rs, uses, nmembers, why);
    cx->scratch->used = mark;
    return rc;
}

static int check_respond(const Sws__Respond *rp, const char *route, sws_routeset_refusal_t *why)
{
    if (rp->status < SWS_ROUTESET_RESPOND_STATUS_MIN ||
        rp->status > SWS_ROUTESET_RESPOND_STATUS_MAX)
        return refuse(at(why, "%s.respond.status", route),
                      "expected a number from %u to %u, got %u", SWS_ROUTESET_RESPOND_STATUS_MIN,
                      SWS_ROUTESET_RESPOND_STATUS_MAX, rp->status);
    if (rp->n_headers > SWS_ROUTE_MAX_FIELDS)
        return refuse(at(why, "%s.respond.headers", route), "at most %u header fields, got %zu",
                      SWS_ROUTE_MAX_FIELDS, rp->n_headers);
    for (size_t i = 0; i < rp->n_headers; i++) {
        const Sws__Header *hd = rp->headers[i];
        const char *problem = sws_routeset_header_name_problem(hd->name);
        if (problem != NULL)
            return refuse(at(why, "%s.respond.headers[%zu]", route, i), "\"%s\": %s", hd->name,
                          problem);
        if (!sws_routeset_field_value_ok(hd->value))
            return refuse(at(why, "%s.respond.headers[%zu]", route, i),
                          "a header value must not contain CR, LF or other control characters");
    }
    if (rp->body.len > 0 && (rp->status == 204 || rp->status == 304))
        return refuse(at(why, "%s.respond.body", route), "a %u response has no body", rp->status);
    return 0;
}

static int check_action(const check_ctx_t *cx, const Sws__Route *r, const char *route,
                        sws_routeset_refusal_t *why)
{
    const char *problem;

    switch (r->action_case) {
    case SWS__ROUTE__ACTION_RESPOND:
        return check_respond(r->respond, route, why);
    case SWS__ROUTE__ACTION_STATIC:
        if (r->static_->root[0] == '\0')
            return refuse(at(why, "%s.static.root", route), "must name a directory");
        if (r->static_->root[0] != '/')
            return refuse(at(why, "%s.static.root", route),
                          "expected an absolute path, got \"%s\"", r->static_->root);
        if (!sws_routeset_index_ok(r->static_->index))
            return refuse(at(why, "%s.static.index", route), "must be a file name (no '/')");
        return 0;
    case SWS__ROUTE__ACTION_REDIRECT:
        if (!sws_routeset_redirect_status_ok(r->redirect->status))
            return refuse(at(why, "%s.redirect.status", route),
                          "expected 301, 302, 303, 307 or 308, got %u", r->redirect->status);
        problem = sws_routeset_location_problem(r->redirect->location);
        if (problem != NULL)
            return refuse(at(why, "%s.redirect.location", route), "%s", problem);
        return 0;
    case SWS__ROUTE__ACTION_PROXY:
        if (pool_find(cx, r->proxy->pool) == NULL)
            return refuse(at(why, "%s.proxy.pool", route), "no pool is named \"%s\"",
                          r->proxy->pool);
        /* It goes upstream as a header line: the address rules keep
         * controls, spaces and a second header out of it. */
        problem = r->proxy->host_header[0] == '\0'
                      ? NULL
                      : sws_routeset_address_problem(r->proxy->host_header, 0, NULL);
        if (problem != NULL)
            return refuse(at(why, "%s.proxy.host_header", route), "\"%s\": %s",
                          r->proxy->host_header, problem);
        if (!sws_routeset_via_ok(r->proxy->via))
            return refuse(at(why, "%s.proxy.via", route),
                          "\"%s\": a pseudonym is a token of at most %u bytes", r->proxy->via,
                          SWS_VIA_PSEUDONYM_MAX);
        return 0;
    default:
        return refuse(at(why, "%s", route),
                      "a route needs one action: respond, static, redirect or proxy");
    }
}

static int check_route(const check_ctx_t *cx, const Sws__Route *r, size_t h, size_t i,
                       sws_routeset_refusal_t *why)
{
    char route[sizeof("hosts[].routes[]") + 2 * SWS_FMT_U64_MAX];

    put_index(put_index(route, "hosts", h), ".routes", i);
    if (r->match == SWS__ROUTE__MATCH__REGEX)
        return refuse(at(why, "%s.match", route), "regex paths are not supported yet");
    if (r->match != SWS__ROUTE__MATCH__PREFIX && r->match != SWS__ROUTE__MATCH__EXACT)
        return refuse(at(why, "%s.match", route), "expected prefix or exact, got %d",
                      (int)r->match);
    if (sws_routeset_route_path_check(r->path, why->msg, sizeof(why->msg)) < 0) {
        at(why, "%s.path", route);
        return -1;
    }
    return check_action(cx, r, route, why);
}

static int check_host(const check_ctx_t *cx, const Sws__Host *host, size_t h,
                      sws_routeset_refusal_t *why)
{
    if (host->n_names == 0)
        return refuse(at(why, "hosts[%zu]", h), "a host needs names: [...] (or name: ...)");
    for (size_t i = 0; i < host->n_names; i++) {
        const char *problem = sws_routeset_host_name_problem(host->names[i]);
        if (problem != NULL)
            return refuse(at(why, "hosts[%zu].names[%zu]", h, i), "\"%s\": %s", host->names[i],
                          problem);
    }
    for (size_t i = 0; i < host->n_routes; i++)
        if (check_route(cx, host->routes[i], h, i, why) < 0)
            return -1;
    return 0;
}

/* ---- TLS ---- */

/* One certificate pair, loaded into ctx as a worker will load it; *types
 * collects the key types already given (one pair per type: a second would
 * silently replace the first). at_cert names the pair ("hosts[0].
 * certificates[1]"); the refusal names its "cert" or "key" like the YAML. */
static int check_certificate(SSL_CTX *ctx, const Sws__Certificate *c, const char *at_cert,
                             unsigned *types, sws_routeset_refusal_t *why)
{
    static const char *const part_key[] = { "cert", "key" };
    sws_tls_pem_part_t part;
    int type;
    char msg[256];

    if (sws_tls_pem_use(ctx, c->cert_pem.data, c->cert_pem.len, c->key_pem.data, c->key_pem.len,
                        &type, &part, msg, sizeof(msg)) < 0) {
        const char *path = part == SWS_TLS_PEM_CERT ? c->cert_path : c->key_path;
        return refuse(at(why, "%s.%s", at_cert, part_key[part]), "%s%s%s", path,
                      path[0] != '\0' ? ": " : "", msg);
    }
    unsigned bit = type == EVP_PKEY_RSA ? 1u : type == EVP_PKEY_EC ? 2u : 4u;
    if (*types & bit)
        return refuse(at(why, "%s.cert", at_cert),
                      "a second %s certificate for the same names: give one RSA and one "
                      "ECDSA pair at most", sws_tls_pem_key_type_name(type));
    *types |= bit;
    return 0;
}

/* A fresh context per certificate set: pairs load side by side as they
 * will in the worker. */
static int check_certificates(Sws__Certificate *const *certs, size_t n, const char *at_set,
                              sws_routeset_refusal_t *why)
{
    char at_cert[96];
    unsigned types = 0;
    int rc = 0;

    if (n == 0)
        return 0;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL)
        return refuse(at(why, "%s", at_set), "out of memory for a TLS context");
    for (size_t i = 0; i < n && rc == 0; i++) {
        snprintf(at_cert, sizeof(at_cert), "%s[%zu]", at_set, i);
        rc = check_certificate(ctx, certs[i], at_cert, &types, why);
    }
    SSL_CTX_free(ctx);
    return rc;
}

static int check_tls(const Sws__RouteSet *rs, sws_routeset_refusal_t *why)
{
    const Sws__Tls *tls = rs->tls;
    unsigned types = 0;
    int rc = 0;

    for (size_t h = 0; h < rs->n_hosts; h++) {
        char at_set[64];
        snprintf(at_set, sizeof(at_set), "hosts[%zu].certificates", h);
        if (check_certificates(rs->hosts[h]->certificates, rs->hosts[h]->n_certificates, at_set,
                               why) < 0)
            return -1;
    }
    if (tls == NULL)
        return 0;
    for (size_t i = 0; i < tls->n_protocols; i++)
        if (tls->protocols[i] != SWS__TLS__PROTOCOL__TLSV1_2 &&
            tls->protocols[i] != SWS__TLS__PROTOCOL__TLSV1_3)
            return refuse(at(why, "tls.protocols[%zu]", i), "expected TLSv1.2 or TLSv1.3");
    if (tls->handshake_timeout_ms > SWS_ROUTESET_POOL_TIMEOUT_MAX_MS)
        return refuse(at(why, "tls.handshake_timeout"), "expected at most a day, got %u ms",
                      tls->handshake_timeout_ms);
    /* One context for the default pair (a set of one, named without an
     * index as in the YAML) and the cipher lists: OpenSSL says whether it
     * knows a list, the one judge of it. */
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL)
        return refuse(at(why, "tls"), "out of memory for a TLS context");
    if (tls->default_certificate != NULL)
        rc = check_certificate(ctx, tls->default_certificate, "tls.default_certificate", &types,
                               why);
    if (rc == 0 && tls->ciphers[0] != '\0' && SSL_CTX_set_cipher_list(ctx, tls->ciphers) != 1)
        rc = refuse(at(why, "tls.ciphers"), "no cipher OpenSSL knows in \"%s\"", tls->ciphers);
    else if (rc == 0 && tls->ciphersuites[0] != '\0' &&
             SSL_CTX_set_ciphersuites(ctx, tls->ciphersuites) != 1)
        rc = refuse(at(why, "tls.ciphersuites"), "not a TLS 1.3 ciphersuite list OpenSSL knows: "
                    "\"%s\"", tls->ciphersuites);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

int sws_routeset_has_certificates(const Sws__RouteSet *rs)
{
    if (rs->tls != NULL && rs->tls->default_certificate != NULL)
        return 1;
    for (size_t h = 0; h < rs->n_hosts; h++)
        if (rs->hosts[h]->n_certificates > 0)
            return 1;
    return 0;
}

/* ---- used twice: sorted, so a large RouteSet costs n log n ---- */

/* One host name or one route; (a, b) is its place in the RouteSet. */
static int check_names_once(const check_ctx_t *cx, sws_routeset_refusal_t *why)
{
    const Sws__RouteSet *rs = cx->rs;
    size_t mark = cx->scratch->used;
    size_t n = 0, k = 0;
    const use_t *dup, *first = NULL;
    use_t *uses;
    int rc = 0;

    for (size_t h = 0; h < rs->n_hosts; h++)
        n += rs->hosts[h]->n_names;
    if (n < 2)
        return 0;
    uses = take(cx->scratch, n * sizeof(*uses));
    if (uses == NULL)
        return refuse(at(why, "hosts"), "out of memory");
    for (size_t h = 0; h < rs->n_hosts; h++) {
        for (size_t i = 0; i < rs->hosts[h]->n_names; i++) {
            const char *name = rs->hosts[h]->names[i];
            size_t len = strlen(name);
            if (len > 1 && name[len - 1] == '.')
                len--;
            uses[k++] = (use_t){ name, len, 0, h, i };
        }
    }
    dup = second_use(uses, n, 1, &first);
    if (dup != NULL)
        rc = refuse(at(why, "hosts[%zu].names[%zu]", dup->a, dup->b),
                    "host name \"%s\" is already used (hosts[%zu].names[%zu])",
                    rs->hosts[dup->a]->names[dup->b], first->a, first->b);
    cx->scratch->used = mark;
    return rc;
}

static int check_routes_once(const check_ctx_t *cx, const Sws__Host *host, size_t h,
                             sws_routeset_refusal_t *why)
{
    static const char *const match_names[] = { "prefix", "exact" };
    size_t mark = cx->scratch->used;
    const use_t *dup, *first = NULL;
    use_t *uses;
    int rc = 0;

    if (host->n_routes < 2)
        return 0;
    uses = take(cx->scratch, host->n_routes * sizeof(*uses));
    if (uses == NULL)
        return refuse(at(why, "hosts[%zu].routes", h), "out of memory");
    for (size_t i = 0; i < host->n_routes; i++)
        uses[i] = (use_t){ host->routes[i]->path, strlen(host->routes[i]->path),
                           (unsigned)host->routes[i]->match, h, i };
    dup = second_use(uses, host->n_routes, 0, &first);
    if (dup != NULL)
        rc = refuse(at(why, "hosts[%zu].routes[%zu].path", h, dup->b),
                    "this host already has a %s route for \"%s\" (routes[%zu])",
                    match_names[dup->kind], dup->key, first->b);
    cx->scratch->used = mark;
    return rc;
}

int sws_routeset_check_pools(const Sws__RouteSet *rs, sws_routeset_scratch_t *scratch,
                             sws_routeset_refusal_t *why, sws_routeset_pools_t *pools)
{
    sws_routeset_scratch_t own = { 0 };
    check_ctx_t cx = { .rs = rs, .scratch = scratch != NULL ? scratch : &own };
    int rc = 0;

    memset(why, 0, sizeof(*why));
    if (sws_routeset_scratch_reserve(cx.scratch, rs) < 0) {
        *pools = (check_ctx_t){ .rs = rs };
        return refuse(why, "out of memory");
    }
    cx.owned = own.mem;
    if (check_settings(rs->settings, why) < 0 || check_pools(&cx, why) < 0)
        rc = -1;
    for (size_t h = 0; rc == 0 && h < rs->n_hosts; h++)
        rc = check_host(&cx, rs->hosts[h], h, why);
    if (rc == 0 && check_names_once(&cx, why) < 0)
        rc = -1;
    for (size_t h = 0; rc == 0 && h < rs->n_hosts; h++)
        rc = check_routes_once(&cx, rs->hosts[h], h, why);
    if (rc == 0)
        rc = check_tls(rs, why);
    cx.scratch = NULL;
    if (rc < 0)
        sws_routeset_pools_free(&cx);
    *pools = cx;
    return rc;
}

int sws_routeset_check(const Sws__RouteSet *rs, sws_routeset_refusal_t *why)
{
    sws_routeset_pools_t pools;
    int rc = sws_routeset_check_pools(rs, NULL, why, &pools);
    sws_routeset_pools_free(&pools);
    return rc;
}

uint32_t sws_routeset_pool_index(const sws_routeset_pools_t *pools, const char *name)
{
    const use_t *u = pool_find(pools, name);
    return u != NULL ? (uint32_t)u->a : 0;
}

void sws_routeset_pools_free(sws_routeset_pools_t *pools)
{
    free(pools->owned);
    pools->owned = NULL;
    pools->sorted = NULL;
}

/* What a check of rs takes, as it takes it: the pool names for the whole
 * check (the build reads them), then in turn the member uses with their
 * ids' hash set, the host names, one host's routes. */
static size_t scratch_need(const Sws__RouteSet *rs)
{
    size_t members = 0, names = 0, routes = 0;
    for (size_t p = 0; p < rs->n_pools; p++)
        members += rs->pools[p]->n_members;
    for (size_t h = 0; h < rs->n_hosts; h++) {
        names += rs->hosts[h]->n_names;
        if (rs->hosts[h]->n_routes > routes)
            routes = rs->hosts[h]->n_routes;
    }
    /* More is refused before the members' arrays are taken. */
    if (members > SWS_ROUTESET_MEMBERS_MAX)
        members = 0;
    size_t most = scratch_round(members * sizeof(member_use_t)) +
                  scratch_round(ids_slots(members) * sizeof(uint32_t));
    if (scratch_round(names * sizeof(use_t)) > most)
        most = scratch_round(names * sizeof(use_t));
    if (scratch_round(routes * sizeof(use_t)) > most)
        most = scratch_round(routes * sizeof(use_t));
    return scratch_round(rs->n_pools * sizeof(use_t)) + most;
}

int sws_routeset_scratch_reserve(sws_routeset_scratch_t *s, const Sws__RouteSet *rs)
{
    size_t need = scratch_need(rs);

    s->used = 0;
    if (need <= s->cap && need >= s->cap / 4)
        return 0;
    sws_routeset_scratch_free(s);
    if (need == 0)
        return 0;
    s->mem = malloc(need);
    if (s->mem == NULL)
        return -1;
    /* Faulted in now, a write per page: the supervisor reserves before
     * the build it times (sws_shm_prepare), and every later check finds
     * the pages there. Not memset(0): the compiler makes malloc and it a
     * calloc, which touches no fresh page. */
    for (size_t off = 0; off < need; off += SCRATCH_PAGE)
        ((volatile char *)s->mem)[off] = 0;
    s->cap = need;
    return 0;
}

void sws_routeset_scratch_free(sws_routeset_scratch_t *s)
{
    free(s->mem);
    *s = (sws_routeset_scratch_t){ 0 };
}
