/*
 * A routing-table generation: built once by the supervisor into an arena,
 * then read by every worker without locks (shm/table.h).
 *
 * Layout, each section 8-byte aligned, every reference an offset from the
 * table's first byte:
 *
 *   struct sws_table   magic, generation, size, section offsets, settings
 *   hosts              tbl_host_t per RouteSet host: its slice of routes
 *   routes             sws_route_t; per host exact routes first, then
 *                      prefix routes by descending length (first match wins)
 *   exact names        open-addressing hash table (linear probing, load at
 *                      most 1/2) of lowercased exact host names
 *   wildcard names     the same for wildcard suffixes: "*.example.com" is
 *                      stored as ".example.com"
 *   fields             sws_tfield_t: the respond routes' header fields,
 *                      each route's in one slice
 *   pools, members     sws_pool_t, sws_member_t: each pool's members in
 *                      one slice, addresses parsed
 *   certs              sws_tcert_t: each host's certificates in one slice,
 *                      then the default certificate
 *   strings            a NUL byte (every empty string), then each string's
 *                      bytes followed by a NUL
 *
 * Names are hashed right to left, so one backward pass over a request's
 * host yields the hash of every suffix that starts at a dot: the wildcard
 * candidates, longest last, and finally the whole name.
 */
#include "shm/table.h"

#include "core/err.h"
#include "core/fmt.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/str.h"
#include "shm/routeset_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define TABLE_MAGIC 0x314c425453575353ULL /* "SSWSTBL1" little-endian */
#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

typedef struct tbl_host {
    uint32_t first_route; /* index into the routes */
    uint32_t nexact;      /* the first nexact routes match exactly */
    uint32_t nroutes;
    uint32_t first_cert;  /* index into the certs */
    uint32_t ncerts;
} tbl_host_t;

/* One slot of a host-name hash table. */
typedef struct tbl_name {
    uint32_t hash;
    uint32_t host;   /* host index + 1; 0 = empty slot */
    sws_tstr_t name; /* lowercased */
} tbl_name_t;

typedef struct tbl_names {
    uint32_t off;
    uint32_t mask;   /* capacity - 1 */
    uint32_t count;  /* 0: no table, skip the probe */
    uint32_t reserved;
} tbl_names_t;

struct sws_table {
    uint64_t magic;
    uint64_t generation;
    uint32_t size;
    uint32_t nhosts;
    uint32_t hosts_off;
    uint32_t routes_off;
    uint32_t nroutes;
    uint32_t catchall; /* host index + 1; 0 = none */
    tbl_names_t exact;
    tbl_names_t wild;
    uint32_t pools_off;
    uint32_t npools;
    uint32_t members_off;
    uint32_t nmembers;
    uint32_t fields_off;
    uint32_t nfields;
    uint32_t certs_off;
    uint32_t default_cert; /* cert index + 1; 0 = none */
    sws_settings_t settings;
    sws_tls_settings_t tls;
};

/* Where each section goes; computed the same way by sws_table_size() and
 * sws_table_build() so the size is exact. */
typedef struct table_layout {
    size_t nhosts, nroutes, nexact, nwild, npools, nmembers, nfields, ncerts;
    size_t exact_cap, wild_cap;
    size_t hosts_off, routes_off, exact_off, wild_off, fields_off, pools_off, members_off;
    size_t certs_off;
    size_t strings_off;
    size_t total;
} table_layout_t;

/* The string pool being filled by sws_table_build(). */
typedef struct table_writer {
    char *base;
    size_t next;
    size_t end;
    uint32_t empty; /* offset of the shared "" */
    sws_tfield_t *fields;
    uint32_t next_field;
    int overflow;   /* a layout bug: refuse rather than write past the table */
    sws_routeset_pools_t pools; /* the check's pool names sorted: a route finds
                                 * its pool by a binary search (ingress sets
                                 * have thousands of pools and routes) */
} table_writer_t;

static inline unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

static inline uint32_t hash_step(uint32_t h, unsigned char c)
{
    return (h ^ lower(c)) * FNV_PRIME;
}

static uint32_t hash_name(const char *p, size_t len)
{
    uint32_t h = FNV_OFFSET;
    while (len > 0)
        h = hash_step(h, (unsigned char)p[--len]);
    return h;
}

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* Bytes a string takes in the pool: empty strings share one NUL. */
static size_t str_bytes(size_t len)
{
    return len ? len + 1 : 0;
}

/* Place count items of size bytes at *off; returns where they start. */
static size_t place(size_t *off, size_t count, size_t size)
{
    size_t start = *off;
    *off = align8(start + count * size);
    return start;
}

static size_t hash_capacity(size_t n)
{
    size_t cap = 1;
    if (n == 0)
        return 0;
    while (cap < 2 * n)
        cap <<= 1;
    return cap;
}

/* ---- host names ------------------------------------------------------ */

typedef enum name_kind { NAME_EXACT, NAME_WILDCARD, NAME_CATCHALL } name_kind_t;

/* A configured name without its tolerated trailing dot. */
static size_t name_len(const char *name)
{
    size_t len = strlen(name);
    return (len > 1 && name[len - 1] == '.') ? len - 1 : len;
}

static name_kind_t name_kind(const char *name)
{
    if (name[0] == '*' && name[1] == '\0')
        return NAME_CATCHALL;
    return name[0] == '*' ? NAME_WILDCARD : NAME_EXACT;
}

/* ---- routes ---------------------------------------------------------- */

static size_t fields_str_bytes(const Sws__Respond *rp)
{
    size_t n = 0;
    for (size_t i = 0; i < rp->n_headers; i++)
        n += str_bytes(strlen(rp->headers[i]->name)) + str_bytes(strlen(rp->headers[i]->value));
    return n;
}

/* A static root as stored: without trailing slashes, except "/" itself. */
static size_t root_len(const char *root)
{
    size_t len = strlen(root);
    while (len > 1 && root[len - 1] == '/')
        len--;
    return len;
}

static size_t route_str_bytes(const Sws__Route *r)
{
    size_t n = str_bytes(strlen(r->path));
    switch (r->action_case) {
    case SWS__ROUTE__ACTION_RESPOND:
        n += fields_str_bytes(r->respond) + str_bytes(r->respond->body.len);
        break;
    case SWS__ROUTE__ACTION_STATIC:
        n += str_bytes(root_len(r->static_->root)) + str_bytes(strlen(r->static_->index));
        break;
    case SWS__ROUTE__ACTION_REDIRECT:
        n += str_bytes(strlen(r->redirect->location));
        break;
    case SWS__ROUTE__ACTION_PROXY:
        n += str_bytes(strlen(r->proxy->host_header)) + str_bytes(strlen(r->proxy->via));
        break;
    default:
        break;
    }
    return n;
}

/* ---- pools ---------------------------------------------------------- */

uint64_t sws_member_id(const char *pool, const char *key)
{
    /* The NUL between the two keeps ("ab", "c:1") apart from ("a", "bc:1"). */
    uint64_t h = sws_fnv1a(SWS_FNV1A_INIT, pool, strlen(pool) + 1);

    h = sws_fnv1a(h, key, strlen(key));
    return h != 0 ? h : 1; /* 0 means "derive" in a RouteSet */
}

uint64_t sws_member_resolved_id(const char *pool, const char *name_key, const char *addr_key)
{
    /* A key holds no '=' (sws_routeset_addr_t.key), so the pair is unambiguous. */
    char key[2 * sizeof(((sws_routeset_addr_t *)0)->key) + 2];
    snprintf(key, sizeof(key), "%s=%s", name_key, addr_key);
    return sws_member_id(pool, key);
}

/* The header or cookie name of a hash_key ("" for client_ip or none). */
static const char *pool_hash_name(const Sws__Pool *pool, unsigned *kind)
{
    const char *name = "";

    *kind = SWS_HASH_NONE;
    if (pool->balance == SWS__POOL__BALANCE__HASH)
        sws_routeset_hash_key_problem(pool->hash_key, kind, &name);
    return name;
}

/* A pool's TLS strings as the table keeps them: the CA only when it is
 * used (over TLS with verification), the SNI only over TLS. */
static const ProtobufCBinaryData *pool_tls_ca(const Sws__Pool *pool)
{
    static const ProtobufCBinaryData none = { 0, NULL };
    if (!sws_routeset_pool_tls(pool) || pool->tls == NULL || pool->tls->skip_verify)
        return &none;
    return &pool->tls->ca_pem;
}

static const char *pool_tls_sni(const Sws__Pool *pool)
{
    if (!sws_routeset_pool_tls(pool) || pool->tls == NULL)
        return "";
    return pool->tls->sni;
}

static size_t pool_hash_name_len(const Sws__Pool *pool)
{
    unsigned kind;
    return strlen(pool_hash_name(pool, &kind));
}

/* The addresses of the table members mb becomes (each has its own copy:
 * a member's strings are its own). */
static size_t member_address_bytes(const Sws__Member *mb)
{
    return sws_routeset_member_width(mb) * str_bytes(strlen(mb->address));
}

/* Their hosts (sws_member_t.host), as sws_routeset_pools_t.host_bytes
 * counts them for a RouteSet checked. */
static size_t member_host_bytes(const Sws__Member *mb)
{
    sws_routeset_addr_t addr;
    size_t n = 0;

    if (mb->n_resolved == 0) {
        sws_routeset_address_problem(mb->address, 1, &addr);
        return str_bytes(strlen(addr.host));
    }
    for (size_t r = 0; r < mb->n_resolved; r++) {
        sws_routeset_address_problem(mb->resolved[r], 1, &addr);
        n += str_bytes(strlen(addr.host));
    }
    return n;
}

/* ---- TLS ------------------------------------------------------------ */

static size_t cert_str_bytes(const Sws__Certificate *c)
{
    return str_bytes(c->cert_pem.len) + str_bytes(c->key_pem.len);
}

/* The TLS strings: ciphers and ciphersuites, a default filled in for "". */
static const char *tls_ciphers(const Sws__Tls *tls)
{
    return tls != NULL && tls->ciphers[0] != '\0' ? tls->ciphers : SWS_DEFAULT_TLS_CIPHERS;
}

static const char *tls_ciphersuites(const Sws__Tls *tls)
{
    return tls != NULL && tls->ciphersuites[0] != '\0' ? tls->ciphersuites
                                                        : SWS_DEFAULT_TLS_CIPHERSUITES;
}

static size_t tls_str_bytes(const Sws__Tls *tls)
{
    size_t n = str_bytes(strlen(tls_ciphers(tls))) + str_bytes(strlen(tls_ciphersuites(tls)));
    if (tls != NULL && tls->default_certificate != NULL)
        n += cert_str_bytes(tls->default_certificate);
    return n;
}

/* checked: what the check found (the build), or NULL (sws_table_size):
 * then every member's address is parsed here. */
static void table_layout(const Sws__RouteSet *rs, const sws_routeset_pools_t *checked,
                         table_layout_t *lay)
{
    size_t strings = 1; /* the shared "" */
    memset(lay, 0, sizeof(*lay));

    lay->nhosts = rs->n_hosts;
    for (size_t h = 0; h < rs->n_hosts; h++) {
        const Sws__Host *host = rs->hosts[h];
        for (size_t i = 0; i < host->n_names; i++) {
            const char *name = host->names[i];
            name_kind_t kind = name_kind(name);
            if (kind == NAME_CATCHALL)
                continue;
            if (kind == NAME_WILDCARD)
                lay->nwild++;
            else
                lay->nexact++;
            strings += str_bytes(name_len(name));
        }
        lay->nroutes += host->n_routes;
        lay->ncerts += host->n_certificates;
        for (size_t i = 0; i < host->n_certificates; i++)
            strings += cert_str_bytes(host->certificates[i]);
        for (size_t i = 0; i < host->n_routes; i++) {
            const Sws__Route *r = host->routes[i];
            strings += route_str_bytes(r);
            if (r->action_case == SWS__ROUTE__ACTION_RESPOND)
                lay->nfields += r->respond->n_headers;
        }
    }
    lay->npools = rs->n_pools;
    for (size_t p = 0; p < rs->n_pools; p++) {
        const Sws__Pool *pool = rs->pools[p];
        strings += str_bytes(strlen(pool->name)) + str_bytes(pool_hash_name_len(pool)) +
                   str_bytes(pool_tls_ca(pool)->len) + str_bytes(strlen(pool_tls_sni(pool)));
        for (size_t m = 0; m < pool->n_members; m++) {
            lay->nmembers += sws_routeset_member_width(pool->members[m]);
            strings += member_address_bytes(pool->members[m]);
            if (checked == NULL)
                strings += member_host_bytes(pool->members[m]);
        }
    }
    if (checked != NULL)
        strings += checked->host_bytes;
    if (rs->settings != NULL) {
        strings += str_bytes(strlen(rs->settings->server_name));
        if (rs->settings->access_log != NULL)
            strings += str_bytes(strlen(rs->settings->access_log->path));
    }

    strings += tls_str_bytes(rs->tls);
    if (rs->tls != NULL && rs->tls->default_certificate != NULL)
        lay->ncerts++;

    lay->exact_cap = hash_capacity(lay->nexact);
    lay->wild_cap = hash_capacity(lay->nwild);

    size_t off = align8(sizeof(struct sws_table));
    lay->hosts_off = place(&off, lay->nhosts, sizeof(tbl_host_t));
    lay->routes_off = place(&off, lay->nroutes, sizeof(sws_route_t));
    lay->exact_off = place(&off, lay->exact_cap, sizeof(tbl_name_t));
    lay->wild_off = place(&off, lay->wild_cap, sizeof(tbl_name_t));
    lay->fields_off = place(&off, lay->nfields, sizeof(sws_tfield_t));
    lay->pools_off = place(&off, lay->npools, sizeof(sws_pool_t));
    lay->members_off = place(&off, lay->nmembers, sizeof(sws_member_t));
    lay->certs_off = place(&off, lay->ncerts, sizeof(sws_tcert_t));
    lay->strings_off = off;
    lay->total = align8(off + strings);
}

size_t sws_table_bytes(const sws_table_t *t)
{
    return t->size;
}

size_t sws_table_size(const Sws__RouteSet *rs)
{
    table_layout_t lay;
    table_layout(rs, NULL, &lay);
    return lay.total;
}

/* ---- building -------------------------------------------------------- */

/* Reserve len bytes and their NUL in the string pool; 0 or -1 on overflow. */
static int reserve(table_writer_t *w, size_t len)
{
    if (w->next + len + 1 > w->end) {
        w->overflow = 1;
        return -1;
    }
    return 0;
}

static sws_tstr_t put_bytes(table_writer_t *w, const void *p, size_t len)
{
    sws_tstr_t s = { w->empty, 0 };
    if (len == 0 || reserve(w, len) != 0)
        return s;
    s.off = (uint32_t)w->next;
    s.len = (uint32_t)len;
    memcpy(w->base + w->next, p, len);
    w->base[w->next + len] = '\0';
    w->next += len + 1;
    return s;
}

static sws_tstr_t put_lower(table_writer_t *w, const char *p, size_t len)
{
    sws_tstr_t s = put_bytes(w, p, len);
    for (size_t i = 0; i < len; i++)
        w->base[s.off + i] = (char)lower((unsigned char)w->base[s.off + i]);
    return s;
}

/* The respond route's header fields, as name/value strings in the next
 * slice of the fields section. */
static void put_fields(table_writer_t *w, const Sws__Respond *rp, sws_route_t *out)
{
    out->fields = w->next_field;
    out->nfields = (uint16_t)rp->n_headers;
    for (size_t i = 0; i < rp->n_headers; i++) {
        const Sws__Header *hd = rp->headers[i];
        sws_tfield_t *f = &w->fields[w->next_field++];
        f->name = put_bytes(w, hd->name, strlen(hd->name));
        f->value = put_bytes(w, hd->value, strlen(hd->value));
    }
}

/* The action-specific part of a route (checked: sws_routeset_check). */
static void build_action(table_writer_t *w, const Sws__Route *r, sws_route_t *out)
{
    switch (r->action_case) {
    case SWS__ROUTE__ACTION_RESPOND: {
        const Sws__Respond *rp = r->respond;
        out->action = SWS_ACTION_RESPOND;
        out->status = (uint16_t)rp->status;
        put_fields(w, rp, out);
        out->body = put_bytes(w, rp->body.data, rp->body.len);
        return;
    }
    case SWS__ROUTE__ACTION_STATIC: {
        const Sws__Static *st = r->static_;
        out->action = SWS_ACTION_STATIC;
        out->follow_symlinks = st->follow_symlinks ? 1 : 0;
        out->root = put_bytes(w, st->root, root_len(st->root));
        out->index = put_bytes(w, st->index, strlen(st->index));
        return;
    }
    case SWS__ROUTE__ACTION_REDIRECT: {
        const Sws__Redirect *rd = r->redirect;
        out->action = SWS_ACTION_REDIRECT;
        out->status = (uint16_t)rd->status;
        out->location = put_bytes(w, rd->location, strlen(rd->location));
        return;
    }
    case SWS__ROUTE__ACTION_PROXY:
        out->pool = sws_routeset_pool_index(&w->pools, r->proxy->pool);
        out->action = SWS_ACTION_PROXY;
        out->host_header = put_bytes(w, r->proxy->host_header, strlen(r->proxy->host_header));
        out->via = put_bytes(w, r->proxy->via, strlen(r->proxy->via));
        return;
    default:
        return;
    }
}

static void build_route(table_writer_t *w, const Sws__Host *host, const Sws__Route *r,
                        sws_route_t *out)
{
    sws_tstr_t empty = { w->empty, 0 };
    memset(out, 0, sizeof(*out));
    /* Fields the action does not use still read as "". */
    out->path = out->body = out->location = out->root = out->index = out->host_header = empty;
    out->via = empty;
    build_action(w, r, out);
    out->match = r->match == SWS__ROUTE__MATCH__EXACT ? SWS_MATCH_EXACT : SWS_MATCH_PREFIX;
    out->https_redirect = (r->https_redirect || host->https_redirect) ? 1 : 0;
    out->path = put_bytes(w, r->path, strlen(r->path));
}

/* Does a come before b in a host's route order? Exact routes first; then
 * longer prefixes first, so the first prefix that matches is the longest. */
static int route_before(const sws_route_t *a, const sws_route_t *b)
{
    if (a->match != b->match)
        return a->match == SWS_MATCH_EXACT;
    return a->match == SWS_MATCH_PREFIX && a->path.len > b->path.len;
}

/* Stable: prefixes of one length keep the configuration's order. */
static void sort_routes(sws_route_t *r, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        sws_route_t cur = r[i];
        size_t j = i;
        while (j > 0 && route_before(&cur, &r[j - 1])) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = cur;
    }
}

static int name_insert(char *base, const tbl_names_t *names, uint32_t hash, sws_tstr_t name,
                       uint32_t host)
{
    tbl_name_t *slots = (tbl_name_t *)(base + names->off);
    for (uint32_t i = hash & names->mask;; i = (i + 1) & names->mask) {
        tbl_name_t *s = &slots[i];
        if (s->host == 0) {
            s->hash = hash;
            s->host = host;
            s->name = name;
            return 0;
        }
        if (s->hash == hash && s->name.len == name.len &&
            memcmp(base + s->name.off, base + name.off, name.len) == 0)
            return -1;
    }
}

/* Names are valid and each is used once (sws_routeset_check). */
static void build_names(table_writer_t *w, struct sws_table *t, const Sws__Host *host,
                        uint32_t index)
{
    for (size_t i = 0; i < host->n_names; i++) {
        const char *name = host->names[i];
        name_kind_t kind = name_kind(name);
        if (kind == NAME_CATCHALL) {
            t->catchall = index + 1;
            continue;
        }
        /* A wildcard's key is its suffix with the dot: ".example.com". */
        size_t skip = kind == NAME_WILDCARD ? 1 : 0;
        sws_tstr_t s = put_lower(w, name + skip, name_len(name) - skip);
        tbl_names_t *names = kind == NAME_WILDCARD ? &t->wild : &t->exact;
        name_insert(w->base, names, hash_name(w->base + s.off, s.len), s, index + 1);
    }
}

/* The table member of mb, or with resolved addresses (r < n_resolved)
 * the one of its address r. */
static void build_member(table_writer_t *w, const Sws__Pool *pool, const Sws__Member *mb,
                         size_t r, sws_member_t *out)
{
    sws_routeset_addr_t addr, name;

    memset(out, 0, sizeof(*out));
    if (mb->n_resolved > 0) {
        sws_routeset_address_problem(mb->address, 1, &name);
        sws_routeset_address_problem(mb->resolved[r], 1, &addr);
        out->id = sws_member_resolved_id(pool->name, name.key, addr.key);
        out->resolved = 1;
    } else {
        sws_routeset_address_problem(mb->address, 1, &addr);
        out->id = mb->id != 0 ? mb->id : sws_member_id(pool->name, addr.key);
    }
    out->address = put_bytes(w, mb->address, strlen(mb->address));
    out->weight = mb->weight != 0 ? mb->weight : SWS_DEFAULT_POOL_WEIGHT;
    out->state = (uint32_t)mb->state;
    out->host = put_bytes(w, addr.host, strlen(addr.host));
    out->port = addr.port;
    out->family = (uint8_t)addr.family;
    memcpy(out->ip, addr.ip, sizeof(out->ip));
}

/* A pool's settings; a Timeouts or Health message the RouteSet left out
 * reads as the defaults of table.h. */
static void build_pool(table_writer_t *w, const Sws__Pool *pool, sws_pool_t *out)
{
    static const Sws__Pool__Timeouts default_timeouts = {
        .connect_ms = SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS,
        .send_ms = SWS_DEFAULT_POOL_SEND_TIMEOUT_MS,
        .read_ms = SWS_DEFAULT_POOL_READ_TIMEOUT_MS,
        .idle_ms = SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS,
    };
    static const Sws__Pool__Health default_health = {
        .max_fails = SWS_DEFAULT_POOL_MAX_FAILS,
        .fail_window_ms = SWS_DEFAULT_POOL_FAIL_WINDOW_MS,
        .cooldown_ms = SWS_DEFAULT_POOL_COOLDOWN_MS,
    };
    const Sws__Pool__Timeouts *to = pool->timeouts ? pool->timeouts : &default_timeouts;
    const Sws__Pool__Health *he = pool->health ? pool->health : &default_health;
    unsigned kind;
    const char *name = pool_hash_name(pool, &kind);
    const ProtobufCBinaryData *ca = pool_tls_ca(pool);
    const char *sni = pool_tls_sni(pool);

    memset(out, 0, sizeof(*out));
    out->name = put_bytes(w, pool->name, strlen(pool->name));
    out->balance = (uint8_t)pool->balance;
    out->hash_kind = (uint8_t)kind;
    out->hash_name = put_bytes(w, name, strlen(name));
    out->keepalive = pool->keepalive;
    out->retries = pool->retries;
    out->max_conns = pool->max_conns;
    out->connect_timeout_ms = to->connect_ms;
    out->send_timeout_ms = to->send_ms;
    out->read_timeout_ms = to->read_ms;
    out->idle_timeout_ms = to->idle_ms;
    out->max_fails = he->max_fails;
    out->fail_window_ms = he->fail_window_ms;
    out->cooldown_ms = he->cooldown_ms;
    out->protocol = (uint8_t)pool->protocol;
    out->tls = (uint8_t)sws_routeset_pool_tls(pool);
    out->tls_verify = out->tls && (pool->tls == NULL || !pool->tls->skip_verify);
    out->tls_ca_pem = put_bytes(w, (const char *)ca->data, ca->len);
    out->tls_sni = put_bytes(w, sni, strlen(sni));
}

/* ---- pool digests (sws_pool_t.digest, ADR 0048) ------------------------ */

/* One 64-bit word into the digest: a multiply and a shift per 8 bytes, so
 * that digesting 100,000 members costs the build about a millisecond
 * (FNV's multiply per byte would cost eight times that). Equality is all
 * it is for; the inputs are the table's own bytes. */
static uint64_t digest_word(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 31);
}

/* len bytes; the length goes in with the last word, so "ab" then "c"
 * differs from "a" then "bc". */
static uint64_t digest_bytes(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t v;
    for (; len >= sizeof(v); b += sizeof(v), len -= sizeof(v)) {
        memcpy(&v, b, sizeof(v));
        h = digest_word(h, v);
    }
    v = 0;
    memcpy(&v, b, len);
    return digest_word(h, v ^ (uint64_t)len << 56);
}

/* A string's bytes, wherever it lies (its offset differs per generation). */
static uint64_t digest_str(uint64_t h, const char *base, sws_tstr_t *s)
{
    h = digest_bytes(h, base + s->off, s->len);
    s->off = 0;
    return h;
}

/* Each record as written (build_pool and build_member zero them first, so
 * padding reads 0), with its offsets replaced by the strings' bytes: a
 * field added later is in the digest without a line here, and an offset
 * forgotten below only makes the digest differ more often, never less. */
static uint64_t pool_digest(const char *base, const sws_pool_t *pool, const sws_member_t *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    sws_pool_t p;
    memcpy(&p, pool, sizeof(p));
    h = digest_str(h, base, &p.name);
    h = digest_str(h, base, &p.hash_name);
    h = digest_str(h, base, &p.tls_ca_pem);
    h = digest_str(h, base, &p.tls_sni);
    p.first_member = 0;
    p.digest = 0;
    h = digest_bytes(h, &p, sizeof(p));
    for (uint32_t i = 0; i < pool->nmembers; i++) {
        sws_member_t mb;
        memcpy(&mb, &m[i], sizeof(mb));
        h = digest_str(h, base, &mb.address);
        h = digest_str(h, base, &mb.host);
        h = digest_bytes(h, &mb, sizeof(mb));
    }
    return h != 0 ? h : 1;
}

/* Pools and members are checked (sws_routeset_check). */
static void build_pools(table_writer_t *w, struct sws_table *t, const Sws__RouteSet *rs)
{
    sws_pool_t *pools = (sws_pool_t *)(w->base + t->pools_off);
    sws_member_t *members = (sws_member_t *)(w->base + t->members_off);
    uint32_t m = 0;
    for (size_t p = 0; p < rs->n_pools; p++) {
        const Sws__Pool *pool = rs->pools[p];
        build_pool(w, pool, &pools[p]);
        pools[p].first_member = m;
        for (size_t i = 0; i < pool->n_members; i++)
            for (size_t r = 0; r < sws_routeset_member_width(pool->members[i]); r++, m++)
                build_member(w, pool, pool->members[i], r, &members[m]);
        pools[p].nmembers = m - pools[p].first_member;
        pools[p].digest = pool_digest(w->base, &pools[p], &members[pools[p].first_member]);
    }
}

static void build_settings(table_writer_t *w, sws_settings_t *out, const Sws__Settings *s)
{
    sws_log_level_t level;
    memset(out, 0, sizeof(*out));
    out->server_name = out->access_log_path = (sws_tstr_t){ w->empty, 0 };
    if (s == NULL)
        return;
    /* "" leaves log_level 0: workers keep the level they have. */
    if (sws_log_level_parse(s->log_level, &level) == 0)
        out->log_level = (uint32_t)level + 1;
    out->max_request_line = s->max_request_line;
    out->max_header_size = s->max_header_size;
    out->max_headers = s->max_headers;
    out->header_timeout_ms = s->header_timeout_ms;
    out->max_body_size = s->max_body_size;
    out->body_timeout_ms = s->body_timeout_ms;
    out->keepalive_timeout_ms = s->keepalive_timeout_ms;
    out->send_timeout_ms = s->send_timeout_ms;
    out->keepalive_requests = s->keepalive_requests;
    out->shutdown_timeout_ms = s->shutdown_timeout_ms;
    out->server_tokens = (uint32_t)s->server_tokens;
    out->server_name = put_bytes(w, s->server_name, strlen(s->server_name));
    if (s->access_log != NULL) {
        const char *path = s->access_log->path;
        out->access_log_format = (uint32_t)s->access_log->format;
        /* "-" and "" both mean standard output; the table says it one way. */
        out->access_log_path = put_bytes(w, path, strcmp(path, "-") == 0 ? 0 : strlen(path));
    }
}

static void build_cert(table_writer_t *w, const Sws__Certificate *c, sws_tcert_t *out)
{
    out->cert_pem = put_bytes(w, c->cert_pem.data, c->cert_pem.len);
    out->key_pem = put_bytes(w, c->key_pem.data, c->key_pem.len);
}

uint32_t sws_table_ticket_key_rotation_ms(const Sws__Tls *tls)
{
    return tls != NULL && tls->ticket_key_rotation_ms != 0 ? tls->ticket_key_rotation_ms
                                                          : SWS_DEFAULT_TLS_TICKET_KEY_ROTATION_MS;
}

/* The TLS settings, and the default certificate after the hosts' ones. */
static void build_tls(table_writer_t *w, struct sws_table *t, const Sws__Tls *tls,
                      uint32_t next_cert)
{
    sws_tls_settings_t *out = &t->tls;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; tls != NULL && i < tls->n_protocols; i++)
        out->protocols |= tls->protocols[i] == SWS__TLS__PROTOCOL__TLSV1_2 ? SWS_TLS_PROTO_1_2
                                                                         : SWS_TLS_PROTO_1_3;
    if (out->protocols == 0)
        out->protocols = SWS_TLS_PROTO_1_2 | SWS_TLS_PROTO_1_3;
    out->handshake_timeout_ms = tls != NULL && tls->handshake_timeout_ms != 0
                                    ? tls->handshake_timeout_ms
                                    : SWS_DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS;
    out->ticket_key_rotation_ms = sws_table_ticket_key_rotation_ms(tls);
    out->session_tickets = tls == NULL || tls->session_tickets;
    out->ciphers = put_bytes(w, tls_ciphers(tls), strlen(tls_ciphers(tls)));
    out->ciphersuites = put_bytes(w, tls_ciphersuites(tls), strlen(tls_ciphersuites(tls)));
    if (tls != NULL && tls->default_certificate != NULL) {
        build_cert(w, tls->default_certificate, (sws_tcert_t *)(w->base + t->certs_off) + next_cert);
        t->default_cert = next_cert + 1;
    }
}

static tbl_names_t names_init(size_t off, size_t cap, size_t count)
{
    tbl_names_t n = { (uint32_t)off, cap ? (uint32_t)cap - 1 : 0, (uint32_t)count, 0 };
    return n;
}

static void header_init(struct sws_table *t, const table_layout_t *lay, uint64_t gen)
{
    memset(t, 0, sizeof(*t));
    t->magic = TABLE_MAGIC;
    t->generation = gen;
    t->size = (uint32_t)lay->total;
    t->nhosts = (uint32_t)lay->nhosts;
    t->hosts_off = (uint32_t)lay->hosts_off;
    t->routes_off = (uint32_t)lay->routes_off;
    t->nroutes = (uint32_t)lay->nroutes;
    t->exact = names_init(lay->exact_off, lay->exact_cap, lay->nexact);
    t->wild = names_init(lay->wild_off, lay->wild_cap, lay->nwild);
    t->pools_off = (uint32_t)lay->pools_off;
    t->npools = (uint32_t)lay->npools;
    t->members_off = (uint32_t)lay->members_off;
    t->nmembers = (uint32_t)lay->nmembers;
    t->fields_off = (uint32_t)lay->fields_off;
    t->nfields = (uint32_t)lay->nfields;
    t->certs_off = (uint32_t)lay->certs_off;
}

int sws_table_build(void *arena, size_t arena_size, uint64_t gen, const Sws__RouteSet *rs,
                    char *err, size_t errlen)
{
    return sws_table_build_reusing(arena, arena_size, gen, rs, NULL, err, errlen);
}

int sws_table_build_reusing(void *arena, size_t arena_size, uint64_t gen,
                            const Sws__RouteSet *rs, sws_routeset_scratch_t *scratch, char *err,
                            size_t errlen)
{
    sws_routeset_refusal_t why;
    table_layout_t lay;

    /* The one check every source passes; the build below trusts it. */
    sws_routeset_pools_t pools;
    if (sws_routeset_check_pools(rs, scratch, &why, &pools) != 0)
        return sws_errf(err, errlen, "%s%s%s", why.path, why.path[0] ? ": " : "", why.msg);
    table_layout(rs, &pools, &lay);
    if (lay.total > arena_size || lay.total > UINT32_MAX) {
        sws_routeset_pools_free(&pools);
        if (lay.total > arena_size)
            return sws_errf(err, errlen, "table needs %zu bytes, arena has %zu; raise "
                            "server.table_size", lay.total, arena_size);
        return sws_errf(err, errlen, "table needs %zu bytes, more than 4 GiB", lay.total);
    }

    char *base = arena;
    struct sws_table *t = arena;
    table_writer_t w = { base, lay.strings_off + 1, lay.total, (uint32_t)lay.strings_off,
                         (sws_tfield_t *)(base + lay.fields_off), 0, 0, pools };
    /* Empty hash slots must read as host 0; the rest is overwritten. */
    memset(base + lay.exact_off, 0, lay.pools_off - lay.exact_off);
    base[lay.strings_off] = '\0';
    header_init(t, &lay, gen);
    build_settings(&w, &t->settings, rs->settings);

    tbl_host_t *hosts = (tbl_host_t *)(base + t->hosts_off);
    sws_route_t *routes = (sws_route_t *)(base + t->routes_off);
    sws_tcert_t *certs = (sws_tcert_t *)(base + t->certs_off);
    uint32_t next_route = 0, next_cert = 0;
    for (size_t h = 0; h < rs->n_hosts; h++) {
        const Sws__Host *host = rs->hosts[h];
        build_names(&w, t, host, (uint32_t)h);
        tbl_host_t *th = &hosts[h];
        th->first_cert = next_cert;
        th->ncerts = (uint32_t)host->n_certificates;
        for (size_t i = 0; i < host->n_certificates; i++)
            build_cert(&w, host->certificates[i], &certs[next_cert++]);
        th->first_route = next_route;
        th->nroutes = (uint32_t)host->n_routes;
        th->nexact = 0;
        for (size_t i = 0; i < host->n_routes; i++) {
            sws_route_t *out = &routes[next_route + i];
            build_route(&w, host, host->routes[i], out);
            th->nexact += out->match == SWS_MATCH_EXACT;
        }
        sort_routes(&routes[next_route], host->n_routes);
        next_route += (uint32_t)host->n_routes;
    }
    build_pools(&w, t, rs);
    build_tls(&w, t, rs->tls, next_cert);
    sws_routeset_pools_free(&w.pools);
    if (w.overflow)
        return sws_errf(err, errlen, "table strings overflow the computed size (a bug)");
    return 0;
}

/* ---- reading --------------------------------------------------------- */

uint64_t sws_table_generation(const sws_table_t *t)
{
    return t->generation;
}

const sws_settings_t *sws_table_settings(const sws_table_t *t)
{
    return &t->settings;
}

const sws_tls_settings_t *sws_table_tls(const sws_table_t *t)
{
    return &t->tls;
}

const sws_tcert_t *sws_table_default_cert(const sws_table_t *t)
{
    if (t->default_cert == 0)
        return NULL;
    return (const sws_tcert_t *)((const char *)t + t->certs_off) + (t->default_cert - 1);
}

uint32_t sws_table_host_count(const sws_table_t *t)
{
    return t->nhosts;
}

const sws_tcert_t *sws_table_host_certs(const sws_table_t *t, uint32_t host, uint32_t *n)
{
    const tbl_host_t *th = (const tbl_host_t *)((const char *)t + t->hosts_off) + host;
    *n = th->ncerts;
    return (const sws_tcert_t *)((const char *)t + t->certs_off) + th->first_cert;
}

uint32_t sws_table_pool_count(const sws_table_t *t)
{
    return t->npools;
}

const sws_pool_t *sws_table_pool(const sws_table_t *t, uint32_t i)
{
    return (const sws_pool_t *)((const char *)t + t->pools_off) + i;
}

const sws_tfield_t *sws_table_fields(const sws_table_t *t, const sws_route_t *route)
{
    return (const sws_tfield_t *)((const char *)t + t->fields_off) + route->fields;
}

const sws_member_t *sws_table_members(const sws_table_t *t, const sws_pool_t *p)
{
    return (const sws_member_t *)((const char *)t + t->members_off) + p->first_member;
}

/* stored is lowercase already; only the request's bytes need folding. */
static int name_eq(const char *stored, const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)stored[i] != lower((unsigned char)p[i]))
            return 0;
    return 1;
}

static uint32_t name_find(const sws_table_t *t, const tbl_names_t *names, uint32_t hash,
                          const char *p, size_t len)
{
    const tbl_name_t *slots = (const tbl_name_t *)((const char *)t + names->off);
    for (uint32_t i = hash & names->mask;; i = (i + 1) & names->mask) {
        const tbl_name_t *s = &slots[i];
        if (s->host == 0)
            return 0;
        if (s->hash == hash && s->name.len == len && name_eq(sws_table_str(t, s->name), p, len))
            return s->host;
    }
}

/* Host index + 1, or 0. */
static uint32_t host_find(const sws_table_t *t, const char *host, size_t len)
{
    /* The port follows the last ']' of an IPv6 literal, else the ':'. */
    const char *colon = NULL;
    if (len > 0 && host[0] == '[') {
        const char *bracket = memchr(host, ']', len);
        if (bracket != NULL)
            colon = memchr(bracket, ':', len - (size_t)(bracket - host));
    } else {
        colon = memchr(host, ':', len);
    }
    if (colon != NULL)
        len = (size_t)(colon - host);
    if (len > 1 && host[len - 1] == '.')
        len--;
    if (len == 0)
        return t->catchall;

    /* One backward pass: at each dot the hash covers a wildcard candidate;
     * the last (leftmost) hit is the longest wildcard. */
    uint32_t h = FNV_OFFSET, wild = 0;
    for (size_t i = len; i-- > 0;) {
        h = hash_step(h, (unsigned char)host[i]);
        if (host[i] == '.' && i > 0 && t->wild.count != 0) {
            uint32_t hit = name_find(t, &t->wild, h, host + i, len - i);
            if (hit != 0)
                wild = hit;
        }
    }
    if (t->exact.count != 0) {
        uint32_t hit = name_find(t, &t->exact, h, host, len);
        if (hit != 0)
            return hit;
    }
    return wild != 0 ? wild : t->catchall;
}

const sws_route_t *sws_table_lookup(const sws_table_t *t, const char *host, size_t host_len,
                                    const char *path, size_t path_len)
{
    uint32_t hi = host_find(t, host, host_len);
    if (hi == 0)
        return NULL;
    const tbl_host_t *th = (const tbl_host_t *)((const char *)t + t->hosts_off) + (hi - 1);
    const sws_route_t *r = (const sws_route_t *)((const char *)t + t->routes_off) + th->first_route;
    uint32_t i = 0;
    for (; i < th->nexact; i++)
        if (r[i].path.len == path_len && memcmp(sws_table_str(t, r[i].path), path, path_len) == 0)
            return &r[i];
    for (; i < th->nroutes; i++)
        if (r[i].path.len <= path_len && memcmp(sws_table_str(t, r[i].path), path, r[i].path.len) == 0)
            return &r[i];
    return NULL;
}

uint32_t sws_table_tls_host(const sws_table_t *t, const char *name, size_t len)
{
    const char *dot;

    if (len > 1 && name[len - 1] == '.')
        len--;
    if (len == 0)
        return 0;
    if (t->exact.count != 0) {
        uint32_t hit = name_find(t, &t->exact, hash_name(name, len), name, len);
        if (hit != 0)
            return hit;
    }
    /* A certificate's wildcard covers one label: only the suffix after the
     * first dot is a candidate. */
    dot = memchr(name, '.', len);
    if (dot == NULL || dot == name || t->wild.count == 0)
        return 0;
    len -= (size_t)(dot - name);
    return name_find(t, &t->wild, hash_name(dot, len), dot, len);
}
