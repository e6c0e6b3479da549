/*
 * A worker's live figures per upstream member, published to shared memory
 * for GET /v1/pools (shm/shm.h: the member blocks). The supervisor serves
 * the admin API and never asks a worker; it reads what the worker wrote
 * last.
 *
 * What is published, per member of the pools view the worker holds
 * (worker/upstream_pools.h), in the table's member order: requests in
 * flight (each holds an upstream connection), idle keep-alive
 * connections, requests ended, failures reported to passive health, and
 * passive health as this worker sees it (down until when).
 *
 * When: after each generation adopted (the members changed), and from the
 * loop's tick at most once per SWS_UPSTREAM_STATS_MS. A tick too soon
 * after the last publication arms a timer instead, which publishes once
 * what the iteration changed even if the worker then sleeps; the timer's
 * own iteration arms nothing more. So the figures lag at most about
 * SWS_UPSTREAM_STATS_MS behind, and an idle worker is woken at most once
 * after its last event. The cost is O(members) per publication, never per
 * request.
 *
 * Ownership: the worker (worker.c) embeds one for its life; pools and set
 * are borrowed from its context and must outlive it. Single-threaded.
 */
#ifndef SWS_WORKER_UPSTREAM_STATS_H
#define SWS_WORKER_UPSTREAM_STATS_H

#include <stdint.h>

#include "core/loop.h"
#include "shm/shm.h"
#include "worker/upstream_conn.h"
#include "worker/upstream_pools.h"

#define SWS_UPSTREAM_STATS_MS 100u

typedef struct sws_upstream_stats_ix sws_upstream_stats_ix_t; /* id -> record, hashed */

typedef struct sws_upstream_stats {
    sws_shm_t *shm;                   /* NULL: nothing published */
    unsigned slot;                    /* the worker's index */
    sws_loop_t *loop;
    const sws_upstream_pools_t *pools; /* borrowed */
    const sws_upstream_set_t *set;     /* borrowed */
    sws_shm_member_stats_t *recs;     /* owned scratch, one per member */
    sws_upstream_stats_ix_t *ix;      /* owned, built at each adopt: O(members), no
                                       * sort (100,000 members per ingress change) */
    uint32_t n, cap;
    uint32_t nslots;                  /* ix's: a power of 2, at least 2n */
    uint64_t published_ms;            /* loop time of the last publication */
    int timer_published;              /* the timer ran in this loop iteration */
    sws_timer_queue_t q;
    sws_timer_t timer;
} sws_upstream_stats_t;

/* Start publishing into shm's member block of `slot` (shm NULL: never). */
void sws_upstream_stats_init(sws_upstream_stats_t *st, sws_loop_t *loop, sws_shm_t *shm,
                             unsigned slot, const sws_upstream_pools_t *pools,
                             const sws_upstream_set_t *set);

/* The pools view changed (sws_upstream_pools_adopt succeeded): publish its
 * members now. */
void sws_upstream_stats_adopted(sws_upstream_stats_t *st);

/* The loop's tick: publish when SWS_UPSTREAM_STATS_MS have passed since
 * the last time, else make sure the timer will. */
void sws_upstream_stats_tick(sws_upstream_stats_t *st);

/* Collect the figures and write them now (what the tick and the timer do;
 * public for the tests). */
void sws_upstream_stats_publish(sws_upstream_stats_t *st);

/* Free the scratch and publish nothing more (the worker stops). */
void sws_upstream_stats_close(sws_upstream_stats_t *st);

#endif
