/* One worker's view of the upstream pools (upstream_pools.h). */
#include "worker/upstream_pools.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"

static void pool_free(sws_upstream_pool_t *p)
{
    for (uint32_t i = 0; p->members != NULL && i < p->bal.npeers; i++)
        free(p->members[i].tls_name);
    sws_upstream_tls_ctx_free(p->tls_ctx);
    free(p->name);
    free(p->key_name);
    free(p->bal.peers);
    free(p->members);
}

static void view_free(sws_upstream_pool_t *pools, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        pool_free(&pools[i]);
    free(pools);
}

static char *dup_tstr(const sws_table_t *t, sws_tstr_t s)
{
    return strndup(sws_table_str(t, s), s.len);
}

/* The socket address of a member, from what the table parsed: -1 for a
 * name (the config reader and the admin API resolve theirs; another
 * source may not have). */
static int member_addr(const sws_member_t *m, sws_upstream_addr_t *out)
{
    memset(out, 0, sizeof(*out));
    if (m->family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->sa;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(m->port);
        memcpy(&a->sin6_addr, m->ip, sizeof(a->sin6_addr));
        out->len = sizeof(*a);
        return 0;
    }
    if (m->family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&out->sa;
        a->sin_family = AF_INET;
        a->sin_port = htons(m->port);
        memcpy(&a->sin_addr, m->ip, sizeof(a->sin_addr));
        out->len = sizeof(*a);
        return 0;
    }
    return -1;
}

/* The name a member of an https pool proves: the pool's sni, else its
 * host name (an address "name:port", resolved or not), else its IP. */
static char *member_tls_name(const sws_table_t *t, const sws_pool_t *tp, const sws_member_t *m,
                             int *is_name)
{
    *is_name = 1;
    if (tp->tls_sni.len > 0)
        return dup_tstr(t, tp->tls_sni);
    if (m->resolved || m->family == AF_UNSPEC) {
        const char *a = sws_table_str(t, m->address);
        const char *colon = strrchr(a, ':');
        return strndup(a, colon != NULL ? (size_t)(colon - a) : strlen(a));
    }
    *is_name = 0;
    return dup_tstr(t, m->host);
}

/* The TLS of an https pool's members; a context that cannot be made (out
 * of memory: the checker made sure the CA parses) takes them down. */
static int pool_tls(sws_upstream_pool_t *p, const sws_table_t *t, const sws_pool_t *tp)
{
    char err[160];
    const sws_member_t *m = sws_table_members(t, tp);
    p->tls_ctx = sws_upstream_tls_ctx_new(sws_table_str(t, tp->tls_ca_pem), tp->tls_ca_pem.len,
                                          tp->tls_verify, err, sizeof(err));
    if (p->tls_ctx == NULL)
        sws_log_error("pool %s: %s: its members take no request", p->name, err);
    for (uint32_t i = 0; i < tp->nmembers; i++) {
        sws_upstream_member_t *um = &p->members[i];
        int is_name;
        if ((um->tls_name = member_tls_name(t, tp, &m[i], &is_name)) == NULL)
            return -1;
        um->tls = (sws_upstream_tls_t){
            .ctx = p->tls_ctx,
            .sni = is_name ? um->tls_name : NULL,
            .name = um->tls_name,
            .verify = tp->tls_verify,
            .alpn_h2 = tp->protocol != SWS__POOL__PROTOCOL__HTTPS,
        };
        if (p->tls_ctx == NULL)
            p->bal.peers[i].state = SWS_UPSTREAM_DOWN;
    }
    return 0;
}

/* The table's pool tp, built into p (zeroed): -1 when out of memory. */
static int pool_build(sws_upstream_pool_t *p, const sws_table_t *t, const sws_pool_t *tp)
{
    uint32_t n = tp->nmembers;
    p->name = dup_tstr(t, tp->name);
    p->key_name = dup_tstr(t, tp->hash_name);
    p->bal.peers = calloc(n ? n : 1, sizeof(*p->bal.peers));
    p->members = calloc(n ? n : 1, sizeof(*p->members));
    if (p->name == NULL || p->key_name == NULL || p->bal.peers == NULL || p->members == NULL)
        return -1;
    p->name_len = tp->name.len;
    p->bal.npeers = n;
    p->bal.kind = tp->balance == SWS_BALANCE_LEAST_CONN ? SWS_UPSTREAM_LEAST_CONN
                  : tp->balance == SWS_BALANCE_HASH     ? SWS_UPSTREAM_HASH
                                                        : SWS_UPSTREAM_ROUND_ROBIN;
    p->bal.max_conns = tp->max_conns;
    p->bal.health = (sws_upstream_health_conf_t){
        .max_fails = tp->max_fails,
        .fail_window_ms = tp->fail_window_ms,
        .cooldown_ms = tp->cooldown_ms,
    };
    /* The table numbers hash kinds as upstream_key.h does (0: none). */
    p->hashed = tp->balance == SWS_BALANCE_HASH && tp->hash_kind != SWS_HASH_NONE;
    p->key = (sws_upstream_key_t){ tp->hash_kind, { p->key_name, tp->hash_name.len } };
    p->retries = tp->retries;
    p->conf.keepalive = tp->keepalive;
    p->conf.timeout_ms[SWS_UPSTREAM_T_CONNECT] = tp->connect_timeout_ms;
    p->conf.timeout_ms[SWS_UPSTREAM_T_SEND] = tp->send_timeout_ms;
    p->conf.timeout_ms[SWS_UPSTREAM_T_READ] = tp->read_timeout_ms;
    p->conf.timeout_ms[SWS_UPSTREAM_T_IDLE] = tp->idle_timeout_ms;
    const sws_member_t *m = sws_table_members(t, tp);
    for (uint32_t i = 0; i < n; i++) {
        sws_upstream_peer_t *peer = &p->bal.peers[i];
        sws_upstream_member_t *um = &p->members[i];
        /* A resolved name says which of its addresses: "localhost:80 (127.0.0.1)". */
        if (m[i].resolved)
            snprintf(um->text, sizeof(um->text), "%s (%s)", sws_table_str(t, m[i].address),
                     sws_table_str(t, m[i].host));
        else
            snprintf(um->text, sizeof(um->text), "%s", sws_table_str(t, m[i].address));
        peer->id = m[i].id;
        peer->weight = m[i].weight;
        peer->state = (uint8_t)m[i].state;
        if (member_addr(&m[i], &um->addr) < 0) {
            sws_log_error("pool %s member %s: a name nobody resolved (a RouteSet source must "
                          "give addresses): it takes no request", p->name, um->text);
            peer->state = SWS_UPSTREAM_DOWN;
        }
    }
    if (tp->tls && pool_tls(p, t, tp) < 0)
        return -1;
    sws_upstream_balance_prepare(&p->bal);
    /* A pool whose TLS context could not be made is built again next time. */
    p->digest = tp->protocol == SWS__POOL__PROTOCOL__HTTPS && p->tls_ctx == NULL ? 0 : tp->digest;
    return 0;
}

sws_upstream_pool_t *sws_upstream_pools_find(sws_upstream_pools_t *v, const char *name,
                                             size_t len, uint32_t hint)
{
    for (uint32_t k = 0; k < v->npools; k++) {
        /* A generation usually keeps the pools' order: the hint first. */
        uint32_t i = (hint + k) % v->npools;
        sws_upstream_pool_t *p = &v->pools[i];
        if (p->name_len == len && memcmp(p->name, name, len) == 0)
            return p;
    }
    return NULL;
}

static int member_kept(const sws_upstream_pool_t *pools, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (sws_upstream_balance_find(&pools[i].bal, id, -1) >= 0)
            return 1;
    return 0;
}

static int id_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The ids of the members of the pools rebuilt (kept[i] 0), sorted (NULL
 * when there are none or memory is short): a search per old member
 * instead of member_kept's walk of every pool, which at 100,000 members in
 * 10,000 pools was 10^9 steps, tens of seconds of a worker's loop per
 * generation (bench/ingressbench.py). */
static uint64_t *sorted_ids(const sws_upstream_pool_t *pools, const uint8_t *kept, uint32_t n,
                            size_t *count)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        k += kept[i] ? 0 : pools[i].bal.npeers;
    uint64_t *ids = k > 0 ? malloc(k * sizeof(*ids)) : NULL;
    if (ids == NULL)
        return NULL;
    k = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; !kept[i] && j < pools[i].bal.npeers; j++)
            ids[k++] = pools[i].bal.peers[j].id;
    qsort(ids, k, sizeof(*ids), id_cmp);
    *count = k;
    return ids;
}

/* The current view's pools by name, for the new table's: the one after
 * the last found first (a generation keeps the pools' order, give or take
 * a pool added or removed: ingress pools come sorted), else a binary
 * search over the names sorted once, at the first miss, so that a table
 * of renamed pools costs n log n, not n^2. */
typedef struct prev_index {
    const sws_upstream_pools_t *v;
    uint32_t next;
    uint32_t *sorted; /* indexes into v->pools by name; NULL until a miss */
} prev_index_t;

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c != 0 ? c : (alen > blen) - (alen < blen);
}

static int sorted_cmp(const void *a, const void *b, void *ctx)
{
    const sws_upstream_pool_t *pools = ctx;
    const sws_upstream_pool_t *x = &pools[*(const uint32_t *)a], *y = &pools[*(const uint32_t *)b];
    return name_cmp(x->name, x->name_len, y->name, y->name_len);
}

static int prev_is(const prev_index_t *x, uint32_t i, const char *name, size_t len)
{
    const sws_upstream_pool_t *p = &x->v->pools[i];
    return p->name_len == len && memcmp(p->name, name, len) == 0;
}

/* The index in the current view of the pool called name, or -1; -2 when
 * out of memory. */
static int64_t prev_find(prev_index_t *x, const char *name, size_t len)
{
    for (uint32_t i = x->next; i < x->next + 2 && i < x->v->npools; i++)
        if (prev_is(x, i, name, len)) {
            x->next = i + 1;
            return i;
        }
    uint32_t n = x->v->npools;
    if (x->sorted == NULL && n > 0) {
        if ((x->sorted = malloc(n * sizeof(*x->sorted))) == NULL)
            return -2;
        for (uint32_t i = 0; i < n; i++)
            x->sorted[i] = i;
        qsort_r(x->sorted, n, sizeof(*x->sorted), sorted_cmp, x->v->pools);
    }
    for (uint32_t lo = 0, hi = n; lo < hi;) {
        uint32_t mid = lo + (hi - lo) / 2, i = x->sorted[mid];
        const sws_upstream_pool_t *p = &x->v->pools[i];
        int c = name_cmp(name, len, p->name, p->name_len);
        if (c == 0) {
            x->next = i + 1;
            return i;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

/* The new view's pools: kept[i] 1 when pool i is the current view's
 * prev[i] unchanged (same name and digest), to be moved; else built from
 * the table, carrying from prev[i] (-1: a new pool). Nothing of the
 * current view is touched yet. -1: out of memory. */
static int pools_build(sws_upstream_pool_t *pools, uint8_t *kept, int64_t *prev, uint32_t n,
                       const sws_upstream_pools_t *v, const sws_table_t *t)
{
    prev_index_t x = { v, 0, NULL };
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        const sws_pool_t *tp = sws_table_pool(t, i);
        prev[i] = prev_find(&x, sws_table_str(t, tp->name), tp->name.len);
        if (prev[i] == -2) {
            rc = -1;
            break;
        }
        const sws_upstream_pool_t *from = prev[i] >= 0 ? &v->pools[prev[i]] : NULL;
        if (from != NULL && from->digest != 0 && from->digest == tp->digest) {
            kept[i] = 1;
            continue;
        }
        if (pool_build(&pools[i], t, tp) < 0)
            rc = -1;
        else if (from != NULL)
            sws_upstream_balance_carry(pools[i].bal.peers, pools[i].bal.npeers,
                                       from->bal.peers, from->bal.npeers);
    }
    free(x.sorted);
    return rc;
}

int sws_upstream_pools_adopt(sws_upstream_pools_t *v, const sws_table_t *t,
                             sws_upstream_set_t *s, char *err, size_t errlen)
{
    uint32_t n = sws_table_pool_count(t);
    sws_upstream_pool_t *pools = calloc(n ? n : 1, sizeof(*pools));
    uint8_t *kept = calloc(n ? n : 1, sizeof(*kept));
    int64_t *prev = calloc(n ? n : 1, sizeof(*prev));
    if (pools == NULL || kept == NULL || prev == NULL ||
        pools_build(pools, kept, prev, n, v, t) < 0) {
        view_free(pools, pools != NULL ? n : 0); /* the kept ones are still zeroes */
        free(kept);
        free(prev);
        return sws_errf(err, errlen, "out of memory for the upstream pools");
    }
    for (uint32_t i = 0; i < n; i++)
        if (kept[i]) {
            pools[i] = v->pools[prev[i]];
            v->pools[prev[i]] = (sws_upstream_pool_t){ 0 }; /* moved: npeers 0 below */
        }
    /* A member of a pool kept is still there; one of a pool rebuilt or gone
     * may be in a rebuilt pool only: a RouteSet has each id once, and a
     * kept pool has the ids it had. */
    size_t nids = 0;
    uint64_t *ids = sorted_ids(pools, kept, n, &nids);
    for (uint32_t i = 0; i < v->npools; i++) {
        const sws_upstream_balancer_t *b = &v->pools[i].bal;
        for (uint32_t j = 0; j < b->npeers; j++) {
            uint64_t id = b->peers[j].id;
            int still = ids != NULL ? bsearch(&id, ids, nids, sizeof(*ids), id_cmp) != NULL
                                    : member_kept(pools, n, id);
            if (!still)
                sws_upstream_close_idle(s, id);
        }
    }
    free(ids);
    free(kept);
    free(prev);
    view_free(v->pools, v->npools);
    v->pools = pools;
    v->npools = n;
    return 0;
}

void sws_upstream_pools_free(sws_upstream_pools_t *v)
{
    view_free(v->pools, v->npools);
    *v = (sws_upstream_pools_t){ 0 };
}
