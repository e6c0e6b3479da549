/*
 * Store -> RouteSet (ingressd/translate.h). Messages are built with malloc
 * and the generated *__INIT values and attached to the RouteSet as soon as
 * they exist, so sws__route_set__free_unpacked frees a finished or a
 * half-built one alike; an allocation that fails sets t->oom and the
 * translation gives up at the end.
 */
#include "ingressd/translate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/path.h"
#include "shm/routeset_check.h"
#include "shm/table.h"

#define CATCH_ALL "*"

/* An exact route "/p" that a Prefix "/p" asks for, added at the end
 * unless an Exact "/p" of the host took it. */
typedef struct companion {
    char *path;
    const char *pool; /* the pool's name in the RouteSet */
} companion_t;

typedef struct host_b {
    Sws__Host *h;     /* in t->rs->hosts */
    size_t routes_cap;
    companion_t *comp;
    size_t ncomp, comp_cap;
    const sws_ingress_secret_t *secret; /* its certificate, once chosen */
} host_b_t;

/* Who holds a (host, path type, path). */
typedef struct claim {
    const sws_ingress_ingress_t *owner;
    char key[]; /* HOST \0 TYPE \0 PATH */
} claim_t;

/* A pool made from a Service, and the name of the Service's port whose
 * endpoints are its members: what an endpoint change redoes. */
typedef struct service_pool {
    Sws__Pool *pool;
    char *port_name;
} service_pool_t;

typedef struct service_pools {
    service_pool_t *v;
    size_t n, cap;
    char key[]; /* "NS/SERVICE": the map key */
} service_pools_t;

struct sws_ingress_translation {
    Sws__RouteSet *rs;
    sws_ingress_translate_stats_t stats;
    sws_map_t services; /* "NS/SERVICE" -> service_pools_t */
    Sws__Pool **changed;        /* made anew by the last endpoints call */
    size_t nchanged, changed_cap;
};

typedef struct tr {
    const sws_ingress_store_t *st;
    Sws__RouteSet *rs;
    int oom;
    int quiet;
    size_t hosts_cap, pools_cap;
    sws_map_t hosts;  /* name -> host_b_t */
    sws_map_t claims; /* claim key -> claim_t */
    sws_map_t pools;  /* name -> pool index + 1 */
    sws_map_t *services; /* kept translations only: the pools of each Service */
    sws_ingress_translate_stats_t stats;
} tr_t;

/* ---- allocation ---- */

/* Make room for one more element in *arr (n used, *cap allocated). */
static int grow(tr_t *t, void *arr, size_t n, size_t *cap, size_t size)
{
    void **a = arr;
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 4;
    void *p = realloc(*a, c * size);
    if (p == NULL) {
        t->oom = 1;
        return -1;
    }
    *a = p;
    *cap = c;
    return 0;
}

static void *alloc(tr_t *t, const void *init, size_t size)
{
    void *m = malloc(size);
    if (m == NULL) {
        t->oom = 1;
        return NULL;
    }
    return memcpy(m, init, size);
}

#define NEW(t, type, INIT) ((type *)alloc((t), &(type)INIT, sizeof(type)))

static char *dup(tr_t *t, const char *s)
{
    char *d = strdup(s);
    t->oom |= d == NULL;
    return d;
}

/* ---- class selection and order ---- */

static int ours(const sws_ingress_store_t *st, const char *class_name,
                const sws_ingress_ingress_t *in)
{
    const sws_ingress_class_t *c = sws_ingress_store_get(st, SWS_KUBE_INGRESSCLASS, "", class_name);
    int served = c != NULL && strcmp(c->controller, SWS_INGRESS_CONTROLLER) == 0;
    /* The annotation first: it predates the field and ingress-nginx reads
     * it first too. */
    if (in->legacy_class != NULL)
        return strcmp(in->legacy_class, class_name) == 0;
    if (in->class_name != NULL)
        return served && strcmp(in->class_name, class_name) == 0;
    return served && c->is_default;
}

static int older_first(const void *a, const void *b)
{
    const sws_ingress_ingress_t *x = *(const sws_ingress_ingress_t *const *)a;
    const sws_ingress_ingress_t *y = *(const sws_ingress_ingress_t *const *)b;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    int c = strcmp(x->obj.ns, y->obj.ns);
    return c != 0 ? c : strcmp(x->obj.name, y->obj.name);
}

/* ---- pools ---- */

void sws_ingress_pool_name(const char *ns, const char *service, uint32_t port, char *out,
                           size_t outsize)
{
    char full[SWS_INGRESS_KEY_MAX + 1 + SWS_FMT_U64_MAX];
    char *o = sws_ingress_key(full, ns, service) + full;
    full[strlen(ns)] = '_';
    o = sws_put_u64(SWS_PUT_LIT(o, "_"), port);
    *o = '\0';
    if ((size_t)(o - full) <= SWS_ROUTESET_POOL_NAME_MAX && (size_t)(o - full) < outsize) {
        memcpy(out, full, (size_t)(o - full) + 1);
        return;
    }
    /* Cut, and keep it unique with a hash of the whole name. */
    snprintf(out, outsize, "%.*s-%016" PRIx64, (int)(SWS_ROUTESET_POOL_NAME_MAX - 17), full,
             sws_fnv1a(SWS_FNV1A_INIT, full, strlen(full)));
}

/* Add the endpoints of slices on the port named port_name to pool. */
static void add_members(tr_t *t, Sws__Pool *pool, const sws_ingress_slices_t *sl,
                        const char *port_name)
{
    sws_map_t seen = { 0 }; /* address -> member */
    size_t cap = 0;
    char addr[64];
    for (size_t i = 0; sl != NULL && i < sl->n && !t->oom; i++) {
        const sws_ingress_slice_t *s = sl->v[i];
        uint32_t port = 0;
        for (size_t p = 0; p < s->nports && port == 0; p++)
            if (strcmp(s->ports[p].name, port_name) == 0)
                port = s->ports[p].port;
        for (size_t e = 0; port != 0 && e < s->nendpoints; e++) {
            const sws_ingress_slice_endpoint_t *ep = &s->endpoints[e];
            Sws__Member__State state = ep->ready         ? SWS__MEMBER__STATE__UP
                                       : ep->terminating ? SWS__MEMBER__STATE__DRAINING
                                                         : SWS__MEMBER__STATE__DOWN;
            if (state == SWS__MEMBER__STATE__DOWN)
                continue; /* not ready and not going: not a member */
            /* Not snprintf: it was half of a large translation's time. */
            char *o = sws_put(addr, ep->address, strnlen(ep->address, sizeof(ep->address)));
            o = sws_put_u64(SWS_PUT_LIT(o, ":"), port);
            size_t n = (size_t)(o - addr);
            *o = '\0';
            /* An endpoint in two slices (while one replaces the other) is
             * one member, up if either says so. One slice holds an address
             * once (the store sees to it): no map then. */
            Sws__Member *m = sl->n > 1 ? sws_map_get(&seen, addr, n) : NULL;
            if (m != NULL) {
                if (state == SWS__MEMBER__STATE__UP)
                    m->state = state;
                continue;
            }
            if (grow(t, &pool->members, pool->n_members, &cap, sizeof(*pool->members)) < 0 ||
                (m = NEW(t, Sws__Member, SWS__MEMBER__INIT)) == NULL)
                break;
            pool->members[pool->n_members++] = m;
            m->state = state;
            m->weight = SWS_DEFAULT_POOL_WEIGHT;
            if ((m->address = dup(t, addr)) == NULL ||
                (sl->n > 1 && sws_map_put(&seen, m->address, n, m) < 0)) {
                t->oom = 1;
                break;
            }
            t->stats.members++;
        }
    }
    sws_map_free(&seen);
}

/* pool is made from the Service of key (its port port_name): kept for
 * sws_ingress_translation_endpoints. */
static int note_service_pool(tr_t *t, const char *key, size_t len, Sws__Pool *pool,
                             const char *port_name)
{
    service_pools_t *v = sws_map_get(t->services, key, len);
    if (v == NULL) {
        if ((v = calloc(1, sizeof(*v) + len + 1)) == NULL)
            return t->oom = 1, -1;
        memcpy(v->key, key, len + 1);
        if (sws_map_put(t->services, v->key, len, v) < 0) {
            free(v);
            return t->oom = 1, -1;
        }
    }
    if (grow(t, &v->v, v->n, &v->cap, sizeof(*v->v)) < 0)
        return -1;
    if ((v->v[v->n].port_name = dup(t, port_name)) == NULL)
        return -1;
    v->v[v->n++].pool = pool;
    return 0;
}

/* The pool of backend b of Ingress in (created on first use): its name in
 * the RouteSet, or NULL with why. */
static const char *backend_pool(tr_t *t, const sws_ingress_ingress_t *in,
                                const sws_ingress_backend_t *b, char *why, size_t whylen)
{
    const sws_ingress_service_t *svc;
    const sws_ingress_port_t *sp = NULL;
    char name[SWS_ROUTESET_POOL_NAME_MAX + 1], key[SWS_INGRESS_KEY_MAX];

    if (b->service == NULL)
        return snprintf(why, whylen, "a resource backend is not supported"), NULL;
    svc = sws_ingress_store_get(t->st, SWS_KUBE_SERVICE, in->obj.ns, b->service);
    if (svc == NULL)
        return snprintf(why, whylen, "Service %s/%s not found", in->obj.ns, b->service), NULL;
    for (size_t i = 0; i < svc->nports && sp == NULL; i++)
        if (b->port != 0 ? svc->ports[i].port == b->port
                         : strcmp(svc->ports[i].name, b->port_name) == 0)
            sp = &svc->ports[i];
    if (sp == NULL) {
        if (b->port != 0)
            snprintf(why, whylen, "Service %s/%s has no TCP port %" PRIu32, in->obj.ns,
                     b->service, b->port);
        else
            snprintf(why, whylen, "Service %s/%s has no TCP port named \"%s\"", in->obj.ns,
                     b->service, b->port_name);
        return NULL;
    }
    sws_ingress_pool_name(in->obj.ns, b->service, sp->port, name, sizeof(name));
    /* The API server allows no other names; this is for a store fed by
     * something else, whose one bad name must not make the RouteSet fail
     * its check. */
    const char *bad = sws_routeset_pool_name_problem(name);
    if (bad != NULL)
        return snprintf(why, whylen, "pool name \"%s\": %s", name, bad), NULL;
    uintptr_t found = (uintptr_t)sws_map_get(&t->pools, name, strlen(name));
    if (found != 0)
        return t->rs->pools[found - 1]->name;

    Sws__Pool *pool;
    if (grow(t, &t->rs->pools, t->rs->n_pools, &t->pools_cap, sizeof(*t->rs->pools)) < 0 ||
        (pool = NEW(t, Sws__Pool, SWS__POOL__INIT)) == NULL)
        return snprintf(why, whylen, "out of memory"), NULL;
    t->rs->pools[t->rs->n_pools++] = pool;
    pool->keepalive = SWS_DEFAULT_POOL_KEEPALIVE;
    pool->retries = SWS_DEFAULT_POOL_RETRIES;
    if ((pool->name = dup(t, name)) == NULL ||
        sws_map_put(&t->pools, pool->name, strlen(pool->name),
                            (void *)(uintptr_t)t->rs->n_pools) < 0)
        return t->oom = 1, snprintf(why, whylen, "out of memory"), NULL;
    t->stats.pools++;
    size_t n = sws_ingress_key(key, in->obj.ns, b->service);
    add_members(t, pool, sws_ingress_store_slices(t->st, key, n), sp->name);
    if (t->services != NULL && note_service_pool(t, key, n, pool, sp->name) < 0)
        return snprintf(why, whylen, "out of memory"), NULL;
    return pool->name;
}

/* ---- hosts, claims, routes ---- */

static host_b_t *host_get(tr_t *t, const char *name, int create)
{
    host_b_t *hb = sws_map_get(&t->hosts, name, strlen(name));
    if (hb != NULL || !create)
        return hb;
    Sws__Host *h;
    if (grow(t, &t->rs->hosts, t->rs->n_hosts, &t->hosts_cap, sizeof(*t->rs->hosts)) < 0 ||
        (h = NEW(t, Sws__Host, SWS__HOST__INIT)) == NULL)
        return NULL;
    t->rs->hosts[t->rs->n_hosts++] = h;
    if ((h->names = calloc(1, sizeof(*h->names))) == NULL || (h->names[0] = dup(t, name)) == NULL)
        return t->oom = 1, NULL;
    h->n_names = 1;
    if ((hb = calloc(1, sizeof(*hb))) == NULL)
        return t->oom = 1, NULL;
    hb->h = h;
    if (sws_map_put(&t->hosts, h->names[0], strlen(name), hb) < 0) {
        free(hb);
        return t->oom = 1, NULL;
    }
    t->stats.hosts++;
    return hb;
}

static size_t claim_key(char *key, const char *host, char type, const char *path)
{
    size_t hl = strlen(host), pl = strlen(path);
    memcpy(key, host, hl + 1);
    key[hl + 1] = type;
    key[hl + 2] = '\0';
    memcpy(key + hl + 3, path, pl);
    return hl + 3 + pl;
}

#define CLAIM_KEY_MAX (SWS_INGRESS_NAME_MAX + 3 + SWS_PATH_OUT_MAX(SWS_INGRESS_PATH_MAX) + 1)

/* Take (host, type, path) for in: NULL when taken, else the older owner. */
static const sws_ingress_ingress_t *claim(tr_t *t, const char *host, char type, const char *path,
                                          const sws_ingress_ingress_t *in)
{
    char key[CLAIM_KEY_MAX];
    size_t len = claim_key(key, host, type, path);
    claim_t *c = sws_map_get(&t->claims, key, len);
    if (c != NULL)
        return c->owner;
    if ((c = malloc(sizeof(*c) + len)) == NULL)
        return t->oom = 1, NULL;
    c->owner = in;
    memcpy(c->key, key, len);
    if (sws_map_put(&t->claims, c->key, len, c) < 0) {
        free(c);
        t->oom = 1;
    }
    return NULL;
}

static int claimed(tr_t *t, const char *host, char type, const char *path)
{
    char key[CLAIM_KEY_MAX];
    size_t len = claim_key(key, host, type, path);
    return sws_map_get(&t->claims, key, len) != NULL;
}

static void add_route(tr_t *t, host_b_t *hb, Sws__Route__Match match, const char *path,
                      const char *pool)
{
    Sws__Route *r;
    Sws__Proxy *px;
    Sws__Host *h = hb->h;
    if (grow(t, &h->routes, h->n_routes, &hb->routes_cap, sizeof(*h->routes)) < 0 ||
        (r = NEW(t, Sws__Route, SWS__ROUTE__INIT)) == NULL)
        return;
    h->routes[h->n_routes++] = r;
    r->match = match;
    if ((r->path = dup(t, path)) == NULL || (px = NEW(t, Sws__Proxy, SWS__PROXY__INIT)) == NULL)
        return;
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = px;
    px->pool = dup(t, pool);
    t->stats.routes++;
}

/* The path of an Ingress path in the form the table matches: normal form,
 * and for a prefix without its trailing slash ("/" stays). 0, or -1 with
 * why. */
static int route_path(const char *in, int prefix, char *out, size_t outsize, char *why,
                      size_t whylen)
{
    sws_str_t res;
    const char *bad;
    if (in[0] != '/')
        return snprintf(why, whylen, "path \"%s\" does not start with '/'", in), -1;
    switch (sws_path_normalize((sws_str_t){ in, strlen(in) }, out, outsize, &res, &bad)) {
    case SWS_PATH_NORMAL:
    case SWS_PATH_CHANGED:
        /* The normal form may be a prefix of the input ("/a/." gives
         * "/a/", "//" gives "/") with nothing written to out. */
        if (res.p != out)
            memmove(out, res.p, res.len);
        break;
    default:
        return snprintf(why, whylen, "path \"%s\": %s", in, bad != NULL ? bad : "too long"), -1;
    }
    out[res.len] = '\0';
    if (prefix && res.len > 1 && out[res.len - 1] == '/')
        out[res.len - 1] = '\0';
    if (sws_routeset_route_path_check(out, why, whylen) < 0)
        return -1;
    return 0;
}

/* The part of in named by what ("spec.rules[%zu].http.paths[%zu]" with i
 * and j, ...) is left out. The name is formatted only here: building it
 * for every path was a tenth of a large translation. */
static void skip(tr_t *t, const sws_ingress_ingress_t *in, const char *what, size_t i, size_t j,
                 const char *why)
{
    char part[96];
    t->stats.skipped++;
    if (t->quiet)
        return;
    snprintf(part, sizeof(part), what, i, j);
    sws_log_warn("Ingress %s: %s left out: %s", in->obj.key, part, why);
}

#define PART_PATH "spec.rules[%zu].http.paths[%zu]"
#define PART_RULE "spec.rules[%zu]"
#define PART_TLS "spec.tls[%zu]"
#define PART_DEFAULT "spec.defaultBackend"

/* A path of a rule of in, on host hb. */
static void add_path(tr_t *t, const sws_ingress_ingress_t *in, host_b_t *hb, size_t ri,
                     size_t pi)
{
    const sws_ingress_path_t *p = &in->rules[ri].paths[pi];
    char path[SWS_PATH_OUT_MAX(SWS_INGRESS_PATH_MAX) + 2], why[256];
    const char *host = hb->h->names[0], *pool;
    int prefix = p->type != SWS_INGRESS_PATH_EXACT;
    char type = prefix ? 'P' : 'E';
    const sws_ingress_ingress_t *owner;

    if (route_path(p->path, prefix, path, sizeof(path), why, sizeof(why)) < 0)
        return skip(t, in, PART_PATH, ri, pi, why);
    if ((pool = backend_pool(t, in, &p->backend, why, sizeof(why))) == NULL)
        return skip(t, in, PART_PATH, ri, pi, why);
    if ((owner = claim(t, host, type, path, in)) != NULL) {
        t->stats.conflicts++;
        snprintf(why, sizeof(why), "%s %s%s is served for the older Ingress %s", host,
                 prefix ? "Prefix " : "Exact ", path, owner->obj.key);
        return skip(t, in, PART_PATH, ri, pi, why);
    }
    if (!prefix) {
        add_route(t, hb, SWS__ROUTE__MATCH__EXACT, path, pool);
        return;
    }
    if (strcmp(path, "/") == 0) {
        add_route(t, hb, SWS__ROUTE__MATCH__PREFIX, path, pool);
        return;
    }
    /* "/p": the prefix "/p/" now, the exact "/p" when all Exact paths are known. */
    size_t len = strlen(path);
    path[len] = '/';
    path[len + 1] = '\0';
    add_route(t, hb, SWS__ROUTE__MATCH__PREFIX, path, pool);
    path[len] = '\0';
    if (grow(t, &hb->comp, hb->ncomp, &hb->comp_cap, sizeof(*hb->comp)) < 0)
        return;
    hb->comp[hb->ncomp].pool = pool;
    if ((hb->comp[hb->ncomp].path = dup(t, path)) != NULL)
        hb->ncomp++;
}

static void add_rules(tr_t *t, const sws_ingress_ingress_t *in)
{
    for (size_t r = 0; r < in->nrules; r++) {
        const sws_ingress_rule_t *rule = &in->rules[r];
        const char *name = rule->host[0] != '\0' ? rule->host : CATCH_ALL, *bad;
        if ((bad = sws_routeset_host_name_problem(name)) != NULL) {
            char why[SWS_INGRESS_NAME_MAX + 64];
            snprintf(why, sizeof(why), "host \"%s\": %s", name, bad);
            skip(t, in, PART_RULE, r, 0, why);
            continue;
        }
        host_b_t *hb = rule->npaths > 0 ? host_get(t, name, 1) : NULL;
        for (size_t p = 0; hb != NULL && p < rule->npaths; p++)
            add_path(t, in, hb, r, p);
    }
}

/* spec.defaultBackend: "/" of the catch-all host and of in's hosts (also
 * those of rules without paths), where no rule took it. */
static void add_default_backend(tr_t *t, const sws_ingress_ingress_t *in)
{
    char why[256];
    const char *pool;
    if (in->default_backend.service == NULL)
        return;
    if ((pool = backend_pool(t, in, &in->default_backend, why, sizeof(why))) == NULL)
        return skip(t, in, PART_DEFAULT, 0, 0, why);
    for (size_t r = 0; r <= in->nrules; r++) {
        const char *name = r == in->nrules ? CATCH_ALL : in->rules[r].host;
        if (name[0] == '\0' || sws_routeset_host_name_problem(name) != NULL)
            name = CATCH_ALL; /* refused where the rules were added */
        host_b_t *hb = host_get(t, name, 1);
        if (hb != NULL && claim(t, hb->h->names[0], 'P', "/", in) == NULL)
            add_route(t, hb, SWS__ROUTE__MATCH__PREFIX, "/", pool);
    }
}

static void add_tls(tr_t *t, const sws_ingress_ingress_t *in)
{
    char why[512];
    for (size_t i = 0; i < in->ntls; i++) {
        const sws_ingress_tls_t *tls = &in->tls[i];
        const sws_ingress_secret_t *sec;
        if (tls->secret[0] == '\0')
            continue; /* the default certificate: scalwsd's own */
        sec = sws_ingress_store_get(t->st, SWS_KUBE_SECRET, in->obj.ns, tls->secret);
        if (sec == NULL || sec->problem != NULL) {
            if (sec == NULL)
                snprintf(why, sizeof(why), "no Secret %s/%s of type kubernetes.io/tls", in->obj.ns,
                         tls->secret);
            else
                snprintf(why, sizeof(why), "Secret %s: %s", sec->obj.key, sec->problem);
            skip(t, in, PART_TLS, i, 0, why);
            continue;
        }
        for (size_t h = 0; h < tls->nhosts; h++) {
            host_b_t *hb = host_get(t, tls->hosts[h], 0);
            if (hb == NULL || hb->secret == sec)
                continue; /* no rule serves it: nothing to certify */
            if (hb->secret != NULL) {
                t->stats.conflicts++;
                snprintf(why, sizeof(why), "%s has the certificate of Secret %s (an older Ingress)",
                         tls->hosts[h], hb->secret->obj.key);
                skip(t, in, PART_TLS, i, 0, why);
                continue;
            }
            hb->secret = sec;
        }
    }
}

static void add_certificate(tr_t *t, host_b_t *hb)
{
    const sws_ingress_secret_t *s = hb->secret;
    Sws__Certificate *c;
    if (s == NULL || (hb->h->certificates = calloc(1, sizeof(*hb->h->certificates))) == NULL ||
        (c = NEW(t, Sws__Certificate, SWS__CERTIFICATE__INIT)) == NULL) {
        t->oom |= s != NULL;
        return;
    }
    hb->h->certificates[hb->h->n_certificates++] = c;
    c->cert_pem.data = malloc(s->cert_len);
    c->key_pem.data = malloc(s->key_len);
    c->cert_path = dup(t, s->obj.key);
    c->key_path = dup(t, s->obj.key);
    if (c->cert_pem.data == NULL || c->key_pem.data == NULL)
        return (void)(t->oom = 1);
    memcpy(c->cert_pem.data, s->cert, c->cert_pem.len = s->cert_len);
    memcpy(c->key_pem.data, s->key, c->key_pem.len = s->key_len);
}

/* The exact companions of the prefixes, the certificates; frees the
 * builders. */
static void finish_hosts(tr_t *t)
{
    const sws_map_slot_t *s;
    size_t it = 0;
    while ((s = sws_map_next(&t->hosts, &it)) != NULL) {
        host_b_t *hb = s->val;
        for (size_t i = 0; i < hb->ncomp; i++) {
            if (!claimed(t, hb->h->names[0], 'E', hb->comp[i].path))
                add_route(t, hb, SWS__ROUTE__MATCH__EXACT, hb->comp[i].path, hb->comp[i].pool);
            free(hb->comp[i].path);
        }
        add_certificate(t, hb);
        free(hb->comp);
        free(hb);
    }
}

static void free_maps(tr_t *t)
{
    const sws_map_slot_t *s;
    size_t it = 0;
    while ((s = sws_map_next(&t->claims, &it)) != NULL)
        free(s->val);
    sws_map_free(&t->claims);
    sws_map_free(&t->hosts);
    sws_map_free(&t->pools);
}

/* The whole store; services: NULL, or the map that keeps the pools of
 * each Service. */
static Sws__RouteSet *translate(const sws_ingress_store_t *st, const char *class_name,
                                uint64_t version, int quiet, sws_ingress_translate_stats_t *stats,
                                sws_map_t *services)
{
    tr_t t = { .st = st, .quiet = quiet, .services = services };
    const sws_ingress_ingress_t *in, **sel = NULL;
    size_t n = 0, it = 0;

    if ((t.rs = NEW(&t, Sws__RouteSet, SWS__ROUTE_SET__INIT)) == NULL) {
        sws_log_error("translation: out of memory");
        return NULL;
    }
    t.rs->version = version;
    sel = malloc((sws_ingress_store_count(st, SWS_KUBE_INGRESS) + 1) * sizeof(*sel));
    t.oom |= sel == NULL;
    while (sel != NULL && (in = sws_ingress_store_next(st, SWS_KUBE_INGRESS, &it)) != NULL)
        if (ours(st, class_name, in))
            sel[n++] = in;
    t.stats.ingresses = n;
    if (sel != NULL) {
        qsort(sel, n, sizeof(*sel), older_first);
        /* Rules of every Ingress before any default backend or TLS: a
         * default backend takes only what no rule took, and a TLS entry
         * certifies only hosts that rules serve. */
        for (size_t i = 0; i < n && !t.oom; i++)
            add_rules(&t, sel[i]);
        for (size_t i = 0; i < n && !t.oom; i++)
            add_default_backend(&t, sel[i]);
        for (size_t i = 0; i < n && !t.oom; i++)
            add_tls(&t, sel[i]);
    }
    finish_hosts(&t);
    free_maps(&t);
    free(sel);
    if (t.oom) {
        sws_log_error("translation: out of memory");
        sws_ingress_translate_free(t.rs);
        return NULL;
    }
    if (stats != NULL)
        *stats = t.stats;
    return t.rs;
}

Sws__RouteSet *sws_ingress_translate(const sws_ingress_store_t *st, const char *class_name,
                                     uint64_t version, int quiet,
                                     sws_ingress_translate_stats_t *stats)
{
    return translate(st, class_name, version, quiet, stats, NULL);
}

void sws_ingress_translate_free(Sws__RouteSet *rs)
{
    if (rs != NULL)
        sws__route_set__free_unpacked(rs, NULL);
}

/* ---- a translation kept ---- */

static void free_services(sws_map_t *services)
{
    const sws_map_slot_t *s;
    size_t it = 0;
    while ((s = sws_map_next(services, &it)) != NULL) {
        service_pools_t *v = s->val;
        for (size_t i = 0; i < v->n; i++)
            free(v->v[i].port_name);
        free(v->v);
        free(v);
    }
    sws_map_free(services);
}

sws_ingress_translation_t *sws_ingress_translation_new(const sws_ingress_store_t *st,
                                                       const char *class_name, uint64_t version,
                                                       int quiet)
{
    sws_ingress_translation_t *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        sws_log_error("translation: out of memory");
        return NULL;
    }
    x->rs = translate(st, class_name, version, quiet, &x->stats, &x->services);
    if (x->rs == NULL) {
        sws_ingress_translation_free(x);
        return NULL;
    }
    return x;
}

/* The members of pool anew, from the slices of the Service of key on its
 * port port_name: what add_members gives a full translation. */
static int redo_members(sws_ingress_translation_t *x, tr_t *t, const char *key, size_t len,
                        service_pool_t *sp)
{
    Sws__Pool fresh = SWS__POOL__INIT, *pool = sp->pool;
    add_members(t, &fresh, sws_ingress_store_slices(t->st, key, len), sp->port_name);
    if (!t->oom)
        grow(t, &x->changed, x->nchanged, &x->changed_cap, sizeof(*x->changed));
    if (t->oom) {
        for (size_t i = 0; i < fresh.n_members; i++)
            sws__member__free_unpacked(fresh.members[i], NULL);
        free(fresh.members);
        return -1;
    }
    for (size_t i = 0; i < pool->n_members; i++)
        sws__member__free_unpacked(pool->members[i], NULL);
    free(pool->members);
    x->stats.members = x->stats.members - pool->n_members + fresh.n_members;
    pool->members = fresh.members;
    pool->n_members = fresh.n_members;
    x->changed[x->nchanged++] = pool;
    return 0;
}

int sws_ingress_translation_endpoints(sws_ingress_translation_t *x, const sws_ingress_store_t *st,
                                      uint64_t version)
{
    tr_t t = { .st = st, .rs = x->rs, .quiet = 1 };
    const sws_map_slot_t *s;
    size_t it = 0;
    x->nchanged = 0;
    /* A Service none of our Ingresses names has no pools: nothing to do. */
    while ((s = sws_map_next(sws_ingress_store_touched(st), &it)) != NULL) {
        service_pools_t *v = sws_map_get(&x->services, s->key, s->len);
        for (size_t i = 0; v != NULL && i < v->n; i++)
            if (redo_members(x, &t, s->key, s->len, &v->v[i]) < 0) {
                sws_log_error("translation: out of memory");
                return -1;
            }
    }
    x->rs->version = version;
    return 0;
}

const Sws__RouteSet *sws_ingress_translation_routes(const sws_ingress_translation_t *x)
{
    return x->rs;
}

const sws_ingress_translate_stats_t *sws_ingress_translation_stats(const sws_ingress_translation_t *x)
{
    return &x->stats;
}

Sws__Pool *const *sws_ingress_translation_changed(const sws_ingress_translation_t *x, size_t *n)
{
    *n = x->nchanged;
    return x->changed;
}

void sws_ingress_translation_free(sws_ingress_translation_t *x)
{
    if (x == NULL)
        return;
    sws_ingress_translate_free(x->rs);
    free_services(&x->services);
    free(x->changed);
    free(x);
}
