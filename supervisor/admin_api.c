#include "supervisor/admin_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/str.h"
#include "shm/routeset_check.h"
#include "shm/routeset_delta.h"
#include "supervisor/ingress_sub.h"
#include "supervisor/resolve.h"

#define MAX_SEGMENTS 6

/* ---- the request target ---- */

/* Split the path of target (the query is ignored) into its '/'-separated
 * segments, each percent-decoded in place in buf (so "%5B%3A%3A1%5D:80"
 * names "[::1]:80"). The number of segments, or -1 for a bad %XX, %00,
 * too many segments or a target that is not a path. */
static int split_target(const char *target, char *buf, size_t buflen, char *seg[MAX_SEGMENTS])
{
    size_t n = strcspn(target, "?");
    if (n == 0 || target[0] != '/' || n >= buflen)
        return -1;
    int nseg = 0;
    size_t w = 0;
    for (size_t i = 1; i <= n; i++) {
        if (i == n || target[i] == '/') {
            if (nseg == MAX_SEGMENTS)
                return -1;
            buf[w++] = '\0';
            nseg++;
            continue;
        }
        if (w == 0 || buf[w - 1] == '\0') {
            if (nseg == MAX_SEGMENTS)
                return -1;
            seg[nseg] = buf + w;
        }
        if (target[i] != '%') {
            buf[w++] = target[i];
            continue;
        }
        int hi = i + 2 < n ? sws_hex_value((unsigned char)target[i + 1]) : -1;
        int lo = hi >= 0 ? sws_hex_value((unsigned char)target[i + 2]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0))
            return -1;
        buf[w++] = (char)(hi << 4 | lo);
        i += 2;
    }
    /* An empty segment ("/v1//pools", a trailing '/') names nothing. */
    for (int s = 0; s < nseg; s++) {
        if (seg[s] == NULL || seg[s][0] == '\0')
            return -1;
    }
    return nseg;
}

/* ---- replies ---- */

static void reply_error(sws_admin_reply_t *reply, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_error(sws_admin_reply_t *reply, unsigned status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sws_json_out_free(&reply->body);
    reply->status = status;
    sws_json_error(&reply->body, msg);
}

static const char *state_name(Sws__Member__State s)
{
    switch (s) {
    case SWS__MEMBER__STATE__UP:
        return "up";
    case SWS__MEMBER__STATE__DRAINING:
        return "draining";
    case SWS__MEMBER__STATE__DOWN:
        return "down";
    default:
        return "unknown";
    }
}

/* The id the table gives member m, or with resolved addresses its address
 * r (derived from pool and address when the source left it 0, ADR 0013;
 * from pool, name and address for a name, ADR 0024). */
static uint64_t member_id(const char *pool, const Sws__Member *m, size_t r)
{
    sws_routeset_addr_t a, n;
    if (m->n_resolved > 0 && sws_routeset_address_problem(m->address, 1, &n) == NULL &&
        sws_routeset_address_problem(m->resolved[r], 1, &a) == NULL)
        return sws_member_resolved_id(pool, n.key, a.key);
    if (m->id == 0 && sws_routeset_address_problem(m->address, 1, &a) == NULL)
        return sws_member_id(pool, a.key);
    return m->id;
}

static uint64_t mono_coarse_ms(void)
{
    /* The workers' loop clock (core/loop.c), which down_until_ms is in. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The live figures of one worker (or, index < 0, their sum), without the
 * braces. */
static void put_live(sws_json_out_t *o, int index, const sws_shm_member_stats_t *s,
                     unsigned ndown, uint64_t now_ms)
{
    if (index >= 0) {
        sws_json_lit(o, "\"index\": ");
        sws_json_u64(o, (uint64_t)index);
        sws_json_lit(o, ", ");
    }
    sws_json_lit(o, "\"health\": ");
    sws_json_cstr(o, ndown > 0 ? "down" : "up");
    if (index < 0) {
        sws_json_lit(o, ", \"down_workers\": ");
        sws_json_u64(o, ndown);
    } else if (ndown > 0) {
        sws_json_lit(o, ", \"down_for_ms\": ");
        sws_json_u64(o, s->down_until_ms > now_ms ? s->down_until_ms - now_ms : 0);
    }
    sws_json_lit(o, ", \"connections\": ");
    sws_json_u64(o, (uint64_t)s->active + s->idle);
    sws_json_lit(o, ", \"idle\": ");
    sws_json_u64(o, s->idle);
    sws_json_lit(o, ", \"in_flight\": ");
    sws_json_u64(o, s->active);
    sws_json_lit(o, ", \"requests\": ");
    sws_json_u64(o, s->requests);
    sws_json_lit(o, ", \"failures\": ");
    sws_json_u64(o, s->failures);
}

/* The workers' figures for member id (docs/admin-api.md): summed, then
 * per worker that published a record for it. hint: its index among the
 * table's members. */
static void put_member_live(sws_json_out_t *o, const sws_admin_api_t *api, uint64_t id,
                            uint32_t hint)
{
    sws_shm_member_stats_t w[SWS_SHM_MAX_WORKERS], sum = { 0 };
    int found[SWS_SHM_MAX_WORKERS] = { 0 };
    unsigned ndown = 0, nw = api->shm != NULL ? api->nworkers : 0;
    uint64_t now = mono_coarse_ms();
    if (nw > SWS_SHM_MAX_WORKERS)
        nw = SWS_SHM_MAX_WORKERS;
    for (unsigned i = 0; i < nw; i++) {
        /* -1 (the worker kept rewriting): left out, like a worker that
         * does not hold the member yet. */
        found[i] = sws_shm_member_stats_read(api->shm, i, id, hint, &w[i]) == 1;
        if (!found[i])
            continue;
        sum.active += w[i].active;
        sum.idle += w[i].idle;
        sum.requests += w[i].requests;
        sum.failures += w[i].failures;
        ndown += w[i].down_until_ms != 0;
    }
    sws_json_lit(o, ", ");
    put_live(o, -1, &sum, ndown, now);
    sws_json_lit(o, ", \"workers\": [");
    int first = 1;
    for (unsigned i = 0; i < nw; i++) {
        if (!found[i])
            continue;
        if (!first)
            sws_json_lit(o, ", ");
        sws_json_lit(o, "{");
        first = 0;
        put_live(o, (int)i, &w[i], w[i].down_until_ms != 0, now);
        sws_json_lit(o, "}");
    }
    sws_json_lit(o, "]");
}

static void put_weight_state(sws_json_out_t *o, const Sws__Member *m)
{
    sws_json_lit(o, ", \"weight\": ");
    sws_json_u64(o, m->weight);
    sws_json_lit(o, ", \"state\": ");
    sws_json_cstr(o, state_name(m->state));
}

/* A member of the table as the workers know it: m, or its resolved
 * address r with the name beside it; without the closing brace. */
static void put_member_fields(sws_json_out_t *o, const char *pool, const Sws__Member *m,
                              size_t r)
{
    sws_json_lit(o, "{\"id\": ");
    sws_json_u64(o, member_id(pool, m, r));
    sws_json_lit(o, ", \"address\": ");
    sws_json_cstr(o, m->n_resolved > 0 ? m->resolved[r] : m->address);
    if (m->n_resolved > 0) {
        sws_json_lit(o, ", \"name\": ");
        sws_json_cstr(o, m->address);
    }
    put_weight_state(o, m);
}

/* A member as a change gave it: a name with the addresses it resolved to,
 * each with its id. */
static void put_member(sws_json_out_t *o, const char *pool, const Sws__Member *m)
{
    if (m->n_resolved == 0) {
        put_member_fields(o, pool, m, 0);
        sws_json_lit(o, "}");
        return;
    }
    sws_json_lit(o, "{\"address\": ");
    sws_json_cstr(o, m->address);
    sws_json_lit(o, ", \"resolved\": [");
    for (size_t r = 0; r < m->n_resolved; r++) {
        if (r > 0)
            sws_json_lit(o, ", ");
        sws_json_lit(o, "{\"id\": ");
        sws_json_u64(o, member_id(pool, m, r));
        sws_json_lit(o, ", \"address\": ");
        sws_json_cstr(o, m->resolved[r]);
        sws_json_lit(o, "}");
    }
    sws_json_lit(o, "]");
    put_weight_state(o, m);
    sws_json_lit(o, "}");
}

/* ---- GET ---- */

static void get_status(sws_admin_api_t *api, sws_admin_reply_t *reply)
{
    sws_json_out_t *o = &reply->body;
    uint64_t cur = api->shm != NULL ? sws_shm_current_generation(api->shm) : api->generation;
    sws_json_lit(o, "{\"generation\": ");
    sws_json_u64(o, cur);
    sws_json_lit(o, ", \"admin_changes\": ");
    sws_json_u64(o, api->changes);
    sws_json_lit(o, ", \"accept_policy\": ");
    sws_json_cstr(o, api->accept_policy != NULL ? api->accept_policy : "-");
    sws_json_lit(o, ", \"workers\": [");
    for (unsigned i = 0; api->shm != NULL && i < api->nworkers; i++) {
        if (i > 0)
            sws_json_lit(o, ", ");
        sws_json_lit(o, "{\"index\": ");
        sws_json_u64(o, i);
        sws_json_lit(o, ", \"generation\": ");
        sws_json_u64(o, sws_shm_reader_generation(api->shm, i));
        /* Each worker's own plain stores, read racily: a figure, not an
         * invariant (shm.h). */
        const sws_shm_counters_t *n = sws_shm_counters(api->shm, i);
        sws_json_lit(o, ", \"connections_accepted\": ");
        sws_json_u64(o, n->connections_accepted);
        sws_json_lit(o, ", \"connections_active\": ");
        sws_json_u64(o, n->connections_active);
        sws_json_lit(o, ", \"requests\": ");
        sws_json_u64(o, n->requests);
        sws_json_lit(o, "}");
    }
    sws_json_lit(o, "]");
    sws_ingress_sub_status(api->ingress, o);
    sws_json_lit(o, "}\n");
    reply->status = 200;
}

/* Probes (Kubernetes' liveness and readiness): answered whatever the
 * state of the table, so no 503 for "nothing published" on /healthz. */
static void get_probe(sws_admin_api_t *api, int ready_probe, sws_admin_reply_t *reply)
{
    const char *why = NULL;
    if (ready_probe && api->packed == NULL)
        why = "no routing table published yet";
    else if (ready_probe)
        sws_ingress_sub_ready(api->ingress, &why);
    if (why != NULL)
        return reply_error(reply, 503, "not ready: %s", why);
    sws_json_lit(&reply->body, "{\"status\": \"ok\"}\n");
    reply->status = 200;
}

static void get_pools(sws_admin_api_t *api, sws_admin_reply_t *reply)
{
    sws_json_out_t *o = &reply->body;
    const Sws__RouteSet *rs = sws_admin_api_routes(api);
    if (rs == NULL)
        return reply_error(reply, 500, "out of memory");
    uint32_t k = 0; /* the member's index in the table: the workers' hint */
    sws_json_lit(o, "{\"generation\": ");
    sws_json_u64(o, api->generation);
    sws_json_lit(o, ", \"pools\": [");
    for (size_t p = 0; p < rs->n_pools; p++) {
        const Sws__Pool *pool = rs->pools[p];
        if (p > 0)
            sws_json_lit(o, ", ");
        sws_json_lit(o, "{\"name\": ");
        sws_json_cstr(o, pool->name);
        sws_json_lit(o, ", \"members\": [");
        for (size_t m = 0; m < pool->n_members; m++) {
            /* A name resolved to several addresses is several members. */
            for (size_t r = 0; r < sws_routeset_member_width(pool->members[m]); r++, k++) {
                if (m > 0 || r > 0)
                    sws_json_lit(o, ", ");
                put_member_fields(o, pool->name, pool->members[m], r);
                put_member_live(o, api, member_id(pool->name, pool->members[m], r), k);
                sws_json_lit(o, "}");
            }
        }
        sws_json_lit(o, "]}");
    }
    sws_json_lit(o, "]}\n");
    reply->status = 200;
}

/* ---- changes ---- */

static Sws__Pool *find_pool(const Sws__RouteSet *rs, const char *name)
{
    for (size_t p = 0; p < rs->n_pools; p++)
        if (strcmp(rs->pools[p]->name, name) == 0)
            return rs->pools[p];
    return NULL;
}

/* The member at the address key (canonical, as the table keys them: "[::1]:80"
 * and "[0::1]:80" are one member), or n_members. */
static size_t find_member(const Sws__Pool *pool, const char *key)
{
    sws_routeset_addr_t a;
    for (size_t m = 0; m < pool->n_members; m++)
        if (sws_routeset_address_problem(pool->members[m]->address, 1, &a) == NULL &&
            strcmp(a.key, key) == 0)
            return m;
    return pool->n_members;
}

/* The PUT body: {"weight": N, "state": "up"|"draining"}, each optional.
 * *has_* say which were given. */
static int parse_member_body(const char *body, size_t len, int *has_weight, uint32_t *weight,
                             int *has_state, Sws__Member__State *state, char *err, size_t errlen)
{
    sws_json_field_t f[SWS_JSON_FIELDS_MAX];
    size_t n = 0;
    *has_weight = *has_state = 0;
    if (len == 0)
        return 0;
    if (sws_json_parse_flat(body, len, f, &n, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(f[i].key, "weight") == 0) {
            char *end = NULL;
            unsigned long v = f[i].type == SWS_JSON_NUMBER && f[i].value[0] != '-'
                                  ? strtoul(f[i].value, &end, 10)
                                  : 0;
            if (end == NULL || *end != '\0' || v < 1 || v > SWS_ROUTESET_WEIGHT_MAX)
                return sws_errf(err, errlen, "weight: expected a whole number from 1 to %u",
                                SWS_ROUTESET_WEIGHT_MAX);
            *has_weight = 1;
            *weight = (uint32_t)v;
        } else if (strcmp(f[i].key, "state") == 0) {
            if (f[i].type == SWS_JSON_STRING && strcmp(f[i].value, "up") == 0)
                *state = SWS__MEMBER__STATE__UP;
            else if (f[i].type == SWS_JSON_STRING && strcmp(f[i].value, "draining") == 0)
                *state = SWS__MEMBER__STATE__DRAINING;
            else if (f[i].type == SWS_JSON_STRING && strcmp(f[i].value, "down") == 0)
                return sws_errf(err, errlen, "state: \"down\" is the health checks' verdict, "
                                             "not set here: use \"draining\" or DELETE");
            else
                return sws_errf(err, errlen, "state: expected \"up\" or \"draining\"");
            *has_state = 1;
        } else {
            return sws_errf(err, errlen, "unknown field \"%s\" (known: weight, state)", f[i].key);
        }
    }
    return 0;
}

/* Check and publish next (a changed copy), then answer with what changed.
 * Takes next. */
static void publish_change(sws_admin_api_t *api, Sws__RouteSet *next, const char *pool,
                           const Sws__Member *m, const char *what, unsigned ok_status,
                           sws_admin_reply_t *reply)
{
    sws_routeset_refusal_t why;
    char err[512];
    uint64_t gen = 0;
    if (sws_routeset_check(next, &why) < 0) {
        reply_error(reply, 422, "%s%s%s", why.path, why.path[0] != '\0' ? ": " : "", why.msg);
    } else {
        int rc = api->publish(api->publish_ctx, next, &gen, err, sizeof(err));
        if (rc == SWS_SHM_BUSY)
            reply_error(reply, 503, "%s; nothing changed: retry", err);
        else if (rc == SWS_ADMIN_UNAVAILABLE)
            reply_error(reply, 503, "%s; nothing changed", err);
        else if (rc < 0)
            reply_error(reply, 422, "%s; nothing changed", err);
    }
    if (reply->status == 0) {
        api->changes++;
        sws_log_info("admin API: pool \"%s\": member %s %s (id %llu, weight %u, %s); "
                     "generation %llu", pool, m->address, what, (unsigned long long)m->id,
                     m->weight, state_name(m->state), (unsigned long long)gen);
        sws_json_out_t *o = &reply->body;
        sws_json_lit(o, "{\"generation\": ");
        sws_json_u64(o, gen);
        sws_json_lit(o, ", \"pool\": ");
        sws_json_cstr(o, pool);
        sws_json_lit(o, ", \"");
        sws_json_raw(o, what, strlen(what));
        sws_json_lit(o, "\": ");
        put_member(o, pool, m);
        sws_json_lit(o, "}\n");
        reply->status = ok_status;
    }
    sws__route_set__free_unpacked(next, NULL);
}

/* Does m resolve to exactly the addresses of r (in r's order)? */
static int same_addresses(const Sws__Member *m, const sws_resolved_t *r)
{
    if (m->n_resolved != r->n)
        return 0;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(m->resolved[i], r->addr[i]) != 0)
            return 0;
    return 1;
}

static void put_member_req(sws_admin_api_t *api, const char *pool_name, const char *addr,
                           const char *body, size_t len, sws_admin_reply_t *reply)
{
    char err[256];
    int has_weight, has_state;
    uint32_t weight = 1;
    Sws__Member__State state = SWS__MEMBER__STATE__UP;
    sws_routeset_addr_t a;
    const char *problem = sws_routeset_address_problem(addr, 1, &a);
    if (problem != NULL)
        return reply_error(reply, 400, "member \"%s\": %s", addr, problem);
    if (parse_member_body(body, len, &has_weight, &weight, &has_state, &state, err,
                          sizeof(err)) < 0)
        return reply_error(reply, 400, "%s", err);
    const Sws__RouteSet *cur = sws_admin_api_routes(api);
    if (cur == NULL)
        return reply_error(reply, 500, "out of memory");
    if (find_pool(cur, pool_name) == NULL)
        return reply_error(reply, 404, "no pool \"%s\"", pool_name);
    /* A name is resolved now, as the file's are at a reload (ADR 0024): a
     * PUT of a known name takes its current addresses. */
    sws_resolved_t res = { 0 };
    sws_admin_resolve_fn resolve = api->resolve != NULL ? api->resolve : sws_resolve_member;
    if (a.family == AF_UNSPEC && resolve(&a, &res, err, sizeof(err)) < 0)
        return reply_error(reply, 422, "member \"%s\": %s; nothing changed", addr, err);

    Sws__RouteSet *next = sws_routeset_copy(cur);
    if (next == NULL)
        return reply_error(reply, 500, "out of memory");
    Sws__Pool *pool = find_pool(next, pool_name);
    size_t at = find_member(pool, a.key);
    if (at < pool->n_members) {
        Sws__Member *m = pool->members[at];
        int moved = a.family == AF_UNSPEC && !same_addresses(m, &res);
        if (moved && sws_resolve_fill(m, &res) < 0) {
            sws__route_set__free_unpacked(next, NULL);
            return reply_error(reply, 500, "out of memory");
        }
        if (!moved && (!has_weight || m->weight == weight) &&
            (!has_state || m->state == state)) {
            /* Nothing to publish: say what is there. */
            sws_json_lit(&reply->body, "{\"generation\": ");
            sws_json_u64(&reply->body, api->generation);
            sws_json_lit(&reply->body, ", \"pool\": ");
            sws_json_cstr(&reply->body, pool_name);
            sws_json_lit(&reply->body, ", \"unchanged\": ");
            put_member(&reply->body, pool_name, m);
            sws_json_lit(&reply->body, "}\n");
            reply->status = 200;
            sws__route_set__free_unpacked(next, NULL);
            return;
        }
        if (has_weight)
            m->weight = weight;
        if (has_state)
            m->state = state;
        return publish_change(api, next, pool_name, m, "updated", 200, reply);
    }

    Sws__Member *m = malloc(sizeof(*m));
    Sws__Member **grown = realloc(pool->members, (pool->n_members + 1) * sizeof(*grown));
    char *copy = strdup(addr);
    if (grown != NULL)
        pool->members = grown;
    if (m == NULL || grown == NULL || copy == NULL) {
        free(m);
        free(copy);
        sws__route_set__free_unpacked(next, NULL);
        return reply_error(reply, 500, "out of memory");
    }
    sws__member__init(m);
    m->id = 0; /* derived by the table from pool and address, as for the file's */
    m->address = copy;
    m->weight = weight;
    m->state = state;
    pool->members[pool->n_members++] = m;
    if (res.n > 0 && sws_resolve_fill(m, &res) < 0) {
        sws__route_set__free_unpacked(next, NULL);
        return reply_error(reply, 500, "out of memory");
    }
    publish_change(api, next, pool_name, m, "added", 201, reply);
}

static void delete_member_req(sws_admin_api_t *api, const char *pool_name, const char *addr,
                              sws_admin_reply_t *reply)
{
    sws_routeset_addr_t a;
    const Sws__RouteSet *routes = sws_admin_api_routes(api);
    if (routes == NULL)
        return reply_error(reply, 500, "out of memory");
    const Sws__Pool *cur = find_pool(routes, pool_name);
    if (cur == NULL)
        return reply_error(reply, 404, "no pool \"%s\"", pool_name);
    if (sws_routeset_address_problem(addr, 1, &a) != NULL || find_member(cur, a.key) == cur->n_members)
        return reply_error(reply, 404, "pool \"%s\" has no member \"%s\"", pool_name, addr);
    Sws__RouteSet *next = sws_routeset_copy(routes);
    if (next == NULL)
        return reply_error(reply, 500, "out of memory");
    Sws__Pool *pool = find_pool(next, pool_name);
    size_t at = find_member(pool, a.key);
    Sws__Member *m = pool->members[at];
    memmove(&pool->members[at], &pool->members[at + 1],
            (pool->n_members - at - 1) * sizeof(*pool->members));
    pool->n_members--;
    publish_change(api, next, pool_name, m, "removed", 200, reply);
    sws__member__free_unpacked(m, NULL);
}

/* ---- dispatch ---- */

/* POST /v1/upgrade: {} or {"binary": "/abs/path"}; 202 {"pid": N}. */
static void post_upgrade(sws_admin_api_t *api, const char *body, size_t len,
                         sws_admin_reply_t *reply)
{
    sws_json_field_t f[SWS_JSON_FIELDS_MAX];
    size_t n = 0;
    char err[512];
    const char *binary = NULL;
    if (len > 0 && sws_json_parse_flat(body, len, f, &n, err, sizeof(err)) < 0) {
        reply_error(reply, 400, "%s", err);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(f[i].key, "binary") != 0) {
            reply_error(reply, 400, "unknown field \"%s\" (known: binary)", f[i].key);
            return;
        }
        if (f[i].type != SWS_JSON_STRING || f[i].value[0] != '/') {
            reply_error(reply, 400, "binary: expected an absolute path");
            return;
        }
        /* The binary runs as the supervisor (root): naming one is for
         * whoever may write the Unix socket, never for any local user. */
        if (!api->peer_unix) {
            reply_error(reply, 403, "binary: only over the admin API's Unix socket (a loopback "
                        "port is open to every local user; the binary would run as this "
                        "server's user)");
            return;
        }
        binary = f[i].value;
    }
    long pid = 0;
    int rc = api->upgrade(api->publish_ctx, binary, &pid, err, sizeof(err));
    if (rc == SWS_ADMIN_CONFLICT)
        reply_error(reply, 409, "%s", err);
    else if (rc == SWS_ADMIN_UNAVAILABLE)
        reply_error(reply, 503, "%s", err);
    else if (rc == SWS_ADMIN_BAD_BINARY)
        reply_error(reply, 422, "%s", err);
    else if (rc < 0)
        reply_error(reply, 500, "%s", err);
    if (rc != 0)
        return;
    reply->status = 202;
    sws_json_lit(&reply->body, "{\"pid\": ");
    sws_json_u64(&reply->body, (uint64_t)pid);
    sws_json_lit(&reply->body, "}\n");
}

/* RFC 6750: the scheme and a realm; error="invalid_token" only when a
 * token came, so a client without one is not told it sent a bad one. */
static void unauthorized(sws_admin_auth_t auth, sws_admin_reply_t *reply)
{
    if (auth == SWS_ADMIN_AUTH_WRONG) {
        reply_error(reply, 401, "wrong bearer token");
        reply->challenge = "Bearer realm=\"scalws-admin\", error=\"invalid_token\"";
    } else {
        reply_error(reply, 401, "this listener needs Authorization: Bearer TOKEN, the token of "
                    "server.admin.token_file");
        reply->challenge = "Bearer realm=\"scalws-admin\"";
    }
}

static int method_is(const char *method, const char *want, const char *allow,
                     sws_admin_reply_t *reply)
{
    if (strcmp(method, want) == 0 || (strcmp(want, "GET") == 0 && strcmp(method, "HEAD") == 0))
        return 1;
    reply_error(reply, 405, "method %s not allowed here (allowed: %s)", method, allow);
    reply->allow = allow;
    return 0;
}

void sws_admin_api_handle(sws_admin_api_t *api, const char *method, const char *target,
                          const char *body, size_t body_len, sws_admin_reply_t *reply)
{
    char buf[1100];
    char *seg[MAX_SEGMENTS] = { 0 };
    memset(reply, 0, sizeof(*reply));
    int n = split_target(target, buf, sizeof(buf), seg);
    if (n < 0)
        reply_error(reply, 400, "bad request target");
    else if (n == 1 && (strcmp(seg[0], "healthz") == 0 || strcmp(seg[0], "readyz") == 0)) {
        if (method_is(method, "GET", "GET, HEAD", reply))
            get_probe(api, seg[0][0] == 'r', reply);
    } else if (api->auth != SWS_ADMIN_AUTH_OK)
        unauthorized(api->auth, reply);
    else if (n < 2 || strcmp(seg[0], "v1") != 0)
        reply_error(reply, 404, "no such endpoint (see docs/admin-api.md)");
    else if (api->packed == NULL)
        reply_error(reply, 503, "no routing table published yet");
    else if (n == 2 && strcmp(seg[1], "status") == 0) {
        if (method_is(method, "GET", "GET, HEAD", reply))
            get_status(api, reply);
    } else if (n == 2 && strcmp(seg[1], "upgrade") == 0 && api->upgrade != NULL) {
        if (method_is(method, "POST", "POST", reply))
            post_upgrade(api, body, body_len, reply);
    } else if (n == 2 && strcmp(seg[1], "pools") == 0) {
        if (method_is(method, "GET", "GET, HEAD", reply))
            get_pools(api, reply);
    } else if (n == 5 && strcmp(seg[1], "pools") == 0 && strcmp(seg[3], "members") == 0) {
        if (strcmp(method, "PUT") == 0)
            put_member_req(api, seg[2], seg[4], body, body_len, reply);
        else if (method_is(method, "DELETE", "PUT, DELETE", reply))
            delete_member_req(api, seg[2], seg[4], reply);
    } else {
        reply_error(reply, 404, "no such endpoint (see docs/admin-api.md)");
    }
    if (reply->body.oom) {
        sws_json_out_free(&reply->body);
        reply->status = 500;
    }
}

/* ---- publications ---- */

/* A publication not by the admin API replaces its changes: said once. */
static void note_source(sws_admin_api_t *api, uint64_t gen, sws_published_by_t by)
{
    if (by != SWS_PUBLISHED_BY_ADMIN && api->changes > 0)
        sws_log_notice("admin API: generation %llu from %s replaces the %u change(s) made "
                       "through the admin API", (unsigned long long)gen,
                       by == SWS_PUBLISHED_BY_FILE ? "the configuration file"
                                                   : "ingressd (merged with the file's routes)",
                       api->changes);
    if (by != SWS_PUBLISHED_BY_ADMIN)
        api->changes = 0;
}

static int kept_nothing(uint64_t gen)
{
    sws_log_error("admin API: out of memory keeping generation %llu; changes refused until "
                  "the next publication", (unsigned long long)gen);
    return -1;
}

static void drop_routes(sws_admin_api_t *api)
{
    if (api->routes != NULL)
        sws__route_set__free_unpacked(api->routes, NULL);
    api->routes = NULL;
    free(api->packed);
    api->packed = NULL;
    api->packed_len = 0;
}

int sws_admin_api_published(sws_admin_api_t *api, const Sws__RouteSet *rs, uint64_t gen,
                            sws_published_by_t by)
{
    note_source(api, gen, by);
    drop_routes(api);
    api->generation = gen;
    size_t len = sws__route_set__get_packed_size(rs);
    api->packed = malloc(len > 0 ? len : 1);
    if (api->packed == NULL)
        return kept_nothing(gen);
    api->packed_len = sws__route_set__pack(rs, api->packed);
    return 0;
}

int sws_admin_api_published_packed(sws_admin_api_t *api, const uint8_t *packed, size_t len,
                                   uint64_t gen, sws_published_by_t by)
{
    note_source(api, gen, by);
    drop_routes(api);
    api->generation = gen;
    api->packed = malloc(len > 0 ? len : 1);
    if (api->packed == NULL)
        return kept_nothing(gen);
    memcpy(api->packed, packed, len);
    api->packed_len = len;
    return 0;
}

const Sws__RouteSet *sws_admin_api_routes(sws_admin_api_t *api)
{
    if (api->routes == NULL && api->packed != NULL)
        api->routes = sws__route_set__unpack(NULL, api->packed_len, api->packed);
    return api->routes;
}

void sws_admin_api_free(sws_admin_api_t *api)
{
    drop_routes(api);
}
