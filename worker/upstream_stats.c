/* A worker's live figures per upstream member (upstream_stats.h). */
#include "worker/upstream_stats.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* A slot of the open-addressing table (linear probing) of ids. */
struct sws_upstream_stats_ix {
    uint64_t id;
    uint32_t rec; /* record index + 1; 0: an empty slot */
};

/* Member ids are hashes already, but a source may give its own (1, 2, 3):
 * spread them (Fibonacci hashing). */
static uint32_t ix_first(const sws_upstream_stats_t *st, uint64_t id)
{
    return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & (st->nslots - 1);
}

/* The record of member id, or NULL (the idle connections of a member the
 * view no longer has: closed at the switch, or a test's). */
static sws_shm_member_stats_t *rec_of(sws_upstream_stats_t *st, uint64_t id)
{
    if (st->n == 0)
        return NULL;
    for (uint32_t i = ix_first(st, id); st->ix[i].rec != 0; i = (i + 1) & (st->nslots - 1))
        if (st->ix[i].id == id)
            return &st->recs[st->ix[i].rec - 1];
    return NULL;
}

/* Timers run after the iteration's events: this publication has them all,
 * and the tick that follows has nothing new to arm the timer for. */
static void on_timer(sws_timer_t *t)
{
    sws_upstream_stats_t *st = sws_container_of(t, sws_upstream_stats_t, timer);
    sws_upstream_stats_publish(st);
    st->timer_published = 1;
}

void sws_upstream_stats_init(sws_upstream_stats_t *st, sws_loop_t *loop, sws_shm_t *shm,
                             unsigned slot, const sws_upstream_pools_t *pools,
                             const sws_upstream_set_t *set)
{
    *st = (sws_upstream_stats_t){
        .shm = shm, .slot = slot, .loop = loop, .pools = pools, .set = set,
    };
    sws_timer_queue_init(loop, &st->q, SWS_UPSTREAM_STATS_MS);
    sws_timer_init(&st->timer, on_timer);
}

void sws_upstream_stats_adopted(sws_upstream_stats_t *st)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < st->pools->npools; p++)
        n += st->pools->pools[p].bal.npeers;
    if (n > SWS_SHM_MEMBER_STATS_MAX)
        n = SWS_SHM_MEMBER_STATS_MAX; /* the table refuses more (SWS_ROUTESET_MEMBERS_MAX) */
    uint32_t nslots = 2;
    while (nslots < 2 * n)
        nslots <<= 1;
    if (n > st->cap || nslots > st->nslots) {
        sws_shm_member_stats_t *recs = realloc(st->recs, (n ? n : 1) * sizeof(*recs));
        if (recs != NULL)
            st->recs = recs;
        sws_upstream_stats_ix_t *ix = realloc(st->ix, nslots * sizeof(*ix));
        if (ix != NULL)
            st->ix = ix;
        if (recs == NULL || ix == NULL) {
            sws_log_error("out of memory for the upstream figures: GET /v1/pools shows none "
                          "from this worker until the next generation");
            st->n = 0;
            sws_upstream_stats_publish(st);
            return;
        }
        st->cap = n;
    }
    st->nslots = nslots;
    memset(st->ix, 0, nslots * sizeof(*st->ix));
    uint32_t k = 0;
    for (uint32_t p = 0; p < st->pools->npools; p++) {
        const sws_upstream_balancer_t *b = &st->pools->pools[p].bal;
        for (uint32_t i = 0; i < b->npeers && k < n; i++, k++) {
            uint32_t s = ix_first(st, b->peers[i].id);
            while (st->ix[s].rec != 0)
                s = (s + 1) & (nslots - 1);
            st->ix[s] = (sws_upstream_stats_ix_t){ b->peers[i].id, k + 1 };
        }
    }
    st->n = n;
    sws_upstream_stats_publish(st);
}

/* Passive health's "down until": when the member may get a request again
 * (a trial after the cooldown, or another trial when one got no verdict). */
static uint64_t down_until(const sws_upstream_health_t *h, const sws_upstream_health_conf_t *c)
{
    if (!sws_upstream_health_is_down(h))
        return 0;
    uint64_t t = h->since_ms + c->cooldown_ms;
    return t != 0 ? t : 1;
}

void sws_upstream_stats_publish(sws_upstream_stats_t *st)
{
    uint32_t k = 0;
    for (uint32_t p = 0; p < st->pools->npools; p++) {
        const sws_upstream_balancer_t *b = &st->pools->pools[p].bal;
        for (uint32_t i = 0; i < b->npeers && k < st->n; i++, k++) {
            const sws_upstream_peer_t *peer = &b->peers[i];
            st->recs[k] = (sws_shm_member_stats_t){
                .id = peer->id,
                .requests = peer->requests,
                .failures = peer->health.failures,
                .down_until_ms = down_until(&peer->health, &b->health),
                .active = peer->active,
            };
        }
    }
    for (const sws_upstream_bucket_t *bk = st->set->buckets; bk != NULL; bk = bk->next) {
        sws_shm_member_stats_t *r = bk->n != 0 ? rec_of(st, bk->member_id) : NULL;
        if (r != NULL)
            r->idle = bk->n;
    }
    st->published_ms = sws_loop_now_ms(st->loop);
    if (st->shm != NULL)
        sws_shm_member_stats_write(st->shm, st->slot, st->recs, st->n);
}

void sws_upstream_stats_tick(sws_upstream_stats_t *st)
{
    int by_timer = st->timer_published;
    st->timer_published = 0;
    if (st->n == 0 || by_timer)
        return; /* nothing can have changed since */
    if (sws_loop_now_ms(st->loop) - st->published_ms >= SWS_UPSTREAM_STATS_MS) {
        sws_upstream_stats_publish(st);
        return;
    }
    /* This iteration may have changed a figure: publish it even if the
     * worker now sleeps. */
    if (!sws_timer_is_armed(&st->timer))
        sws_timer_arm(st->loop, &st->q, &st->timer);
}

void sws_upstream_stats_close(sws_upstream_stats_t *st)
{
    sws_timer_disarm(&st->timer);
    free(st->recs);
    free(st->ix);
    st->recs = NULL;
    st->ix = NULL;
    st->n = st->cap = st->nslots = 0;
}
