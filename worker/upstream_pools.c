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

/* The ids of every member of pools, sorted (NULL when there are none or
 * memory is short): a search per old member instead of member_kept's walk
 * of every pool, which at 100,000 members in 10,000 pools was 10^9 steps,
 * tens of seconds of a worker's loop per generation (bench/ingressbench.py). */
static uint64_t *sorted_ids(const sws_upstream_pool_t *pools, uint32_t n, size_t *count)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        k += pools[i].bal.npeers;
    uint64_t *ids = k > 0 ? malloc(k * sizeof(*ids)) : NULL;
    if (ids == NULL)
        return NULL;
    k = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < pools[i].bal.npeers; j++)
            ids[k++] = pools[i].bal.peers[j].id;
    qsort(ids, k, sizeof(*ids), id_cmp);
    *count = k;
    return ids;
}

int sws_upstream_pools_adopt(sws_upstream_pools_t *v, const sws_table_t *t,
                             sws_upstream_set_t *s, char *err, size_t errlen)
{
    uint32_t n = sws_table_pool_count(t);
    sws_upstream_pool_t *pools = calloc(n ? n : 1, sizeof(*pools));
    if (pools == NULL)
        return sws_errf(err, errlen, "out of memory for the upstream pools");
    for (uint32_t i = 0; i < n; i++) {
        if (pool_build(&pools[i], t, sws_table_pool(t, i)) < 0) {
            view_free(pools, n);
            return sws_errf(err, errlen, "out of memory for the upstream pools");
        }
        sws_upstream_pool_t *prev =
            sws_upstream_pools_find(v, pools[i].name, pools[i].name_len, i);
        if (prev != NULL)
            sws_upstream_balance_carry(pools[i].bal.peers, pools[i].bal.npeers,
                                       prev->bal.peers, prev->bal.npeers);
    }
    size_t nids = 0;
    uint64_t *ids = sorted_ids(pools, n, &nids);
    for (uint32_t i = 0; i < v->npools; i++) {
        const sws_upstream_balancer_t *b = &v->pools[i].bal;
        for (uint32_t j = 0; j < b->npeers; j++) {
            uint64_t id = b->peers[j].id;
            int kept = ids != NULL ? bsearch(&id, ids, nids, sizeof(*ids), id_cmp) != NULL
                                   : member_kept(pools, n, id);
            if (!kept)
                sws_upstream_close_idle(s, id);
        }
    }
    free(ids);
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
