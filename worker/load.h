/*
 * A worker's load, published for the eBPF accept policies: plain stores
 * into its record of the load map (ebpf/policy.h), which the supervisor
 * mapped MAP_SHARED before the fork. No syscall per update: two vDSO clock
 * reads per loop turn for the busy share, a store per accept.
 *
 * Hooks, all no-ops when the worker has no record (shared or reuseport):
 *   sws_load_init      at setup, before the listeners are registered
 *   sws_load_woke      after epoll_wait returns (the loop's wake hook):
 *                      clears asleep
 *   sws_load_tick      before epoll_wait (the loop's tick hook): heartbeat,
 *                      live connections, requests in flight, and asleep
 *                      if the wait will sleep (sws_loop_will_block)
 *   sws_load_accepted  after each accept
 *   sws_load_draining  when the worker stops taking connections
 *
 * A timer wakes an idle worker every SWS_LOAD_BEAT_MS so that its heartbeat
 * stays fresh (a worker asleep in epoll_wait is not stuck), and its busy
 * share is computed over that interval.
 *
 * Caller: the worker process, single-threaded. The record's cpu and down
 * fields and the program's selected count are not ours (policy.h).
 */
#ifndef SWS_WORKER_LOAD_H
#define SWS_WORKER_LOAD_H

#include <stdint.h>

#include "core/loop.h"
#include "ebpf/policy.h"

#define SWS_LOAD_BEAT_MS 250u

typedef struct sws_load {
    struct sws_ebpf_worker *rec; /* NULL: nothing to publish */
    sws_loop_t *loop;
    uint64_t slept_at_ns;        /* when the loop went into epoll_wait */
    uint64_t interval_ns;        /* start of the busy-share interval */
    uint64_t idle_ns;            /* asleep in epoll_wait during it */
    uint64_t selected_at_beat;   /* rec->selected at the last beat */
    const int *fds;              /* the listeners (borrowed), for their queues */
    unsigned nfds;
    sws_timer_queue_t beat_q;
    sws_timer_t beat_timer;
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

/* What the beat timer does every SWS_LOAD_BEAT_MS (public for the tests):
 * the busy share of the interval, and the resync of the queued count when
 * nothing was placed here for a whole beat and the accept queues are
 * empty. */
void sws_load_beat(sws_load_t *l);

#endif
