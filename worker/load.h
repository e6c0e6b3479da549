/*
 * A worker's load, published for the eBPF accept policies: plain stores
 * into its record of the load map (ebpf/policy.h), which the supervisor
 * mapped MAP_SHARED before the fork. No syscall per update: a store per
 * accept, a few per loop turn, and two vDSO clock reads per wait for the
 * busy share (ADRs 0065, 0072).
 *
 * Hooks, all no-ops when the worker has no record (shared or reuseport):
 *   sws_load_init      at setup, before the listeners are registered
 *   sws_load_woke      after epoll_wait returns (the loop's wake hook):
 *                      clears asleep
 *   sws_load_tick      before epoll_wait (the loop's tick hook): heartbeat,
 *                      live connections, requests in flight, asleep (every
 *                      wait counts as a sleep: ADR 0072), and once per
 *                      SWS_LOAD_BEAT_MS the beat (sws_load_beat)
 *   sws_load_accepted  after each accept
 *   sws_load_draining  when the worker stops taking connections
 *
 * No timer: the worker's loop passes sws_load_sleep_ms as the bound of each
 * sleep, so a worker idle in epoll_wait still beats (it is not stuck) at
 * most SWS_LOAD_SLEEP_MS apart, and a worker that turns its loop anyway is
 * never woken for it. A wake-up is what the accept policies' CPU is made
 * of on a machine with fewer CPUs than workers (about 100 us of CPU each
 * on the development VM; docs/benchmarks/2026-12-01-accept-policies.md,
 * session 8); a 250 ms beat timer woke every worker 4 times a second.
 *
 * Caller: the worker process, single-threaded. The record's cpu and down
 * fields and the program's selected count are not ours (policy.h).
 */
#ifndef SWS_WORKER_LOAD_H
#define SWS_WORKER_LOAD_H

#include <stdint.h>

#include "core/loop.h"
#include "ebpf/policy.h"

/* The busy share's interval: the first tick at least this long after the
 * last beat beats. */
#define SWS_LOAD_BEAT_MS 250u
/* The longest sleep: half the stale limit, so that an idle worker's
 * heartbeat is never near it (policy.h, the supervisor's stuck check). */
#define SWS_LOAD_SLEEP_MS (SWS_EBPF_STALE_MS / 2)

typedef struct sws_load {
    struct sws_ebpf_worker *rec; /* NULL: nothing to publish */
    sws_loop_t *loop;
    uint64_t slept_at_ns;        /* when the loop went into epoll_wait */
    uint64_t interval_ns;        /* start of the busy-share interval */
    uint64_t idle_ns;            /* asleep in epoll_wait during it */
    uint64_t selected_at_beat;   /* rec->selected at the last beat */
    uint64_t beat_due_ms;        /* the loop's clock: the next tick from then beats */
    const int *fds;              /* the listeners (borrowed), for their queues */
    unsigned nfds;
} sws_load_t;

/* In the worker child as soon as it forked (rec NULL: nothing): its first
 * heartbeat, so the program places connections on it from now on. */
void sws_load_announce(struct sws_ebpf_worker *rec);

/* Start publishing into rec (NULL: never) for a worker accepting on the
 * nfds listeners fds (borrowed; they must outlive l). Marks the worker up:
 * heartbeat now (a restarted worker's record was reset by the supervisor). */
void sws_load_init(sws_load_t *l, sws_loop_t *loop, struct sws_ebpf_worker *rec,
                   const int *fds, unsigned nfds);

void sws_load_woke(sws_load_t *l);

/* The bound of each sleep in epoll_wait (sws_loop_run_once's max_wait_ms):
 * SWS_LOAD_SLEEP_MS while publishing, -1 (none) without a record. */
static inline int sws_load_sleep_ms(const sws_load_t *l)
{
    return l->rec != NULL ? (int)SWS_LOAD_SLEEP_MS : -1;
}

/* live: connections open; inflight: requests being answered. */
void sws_load_tick(sws_load_t *l, uint64_t now_ms, unsigned live, unsigned inflight);

/* Moves one connection from queued to live at once: the tick's live count
 * comes only after a batch of up to 64 accepts, and until then the worker
 * would look that much lighter to the program, in the middle of a burst. */
static inline void sws_load_accepted(sws_load_t *l)
{
    if (l->rec == NULL)
        return;
    l->rec->accepted++;
    l->rec->live++;
    l->rec->settled++;
}

void sws_load_draining(sws_load_t *l);

/* What the tick does once per SWS_LOAD_BEAT_MS (public for the tests):
 * the busy share of the interval, and the resync of the queued count when
 * nothing was placed here for a whole beat and the accept queues are
 * empty. */
void sws_load_beat(sws_load_t *l);

#endif
