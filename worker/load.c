#include "worker/load.h"

#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void on_beat(sws_timer_t *t)
{
    sws_load_t *l = sws_container_of(t, sws_load_t, beat_timer);
    struct sws_ebpf_worker *rec = l->rec;
    uint64_t now = mono_ns();
    uint64_t span = now - l->interval_ns;
    if (span > 0) {
        uint64_t busy = span > l->idle_ns ? span - l->idle_ns : 0;
        rec->busy_pct = (uint32_t)(busy * 100 / span);
    }
    l->interval_ns = now;
    l->idle_ns = 0;
    /* Resync the queued count (policy.h: selected - settled) while nothing
     * is queued: no accept for a whole beat and the last one found the
     * queue empty. A handshake the program counted but that never
     * completed would otherwise count as load for ever. A SYN placed right
     * now may be forgotten: an error of one, gone at the next resync. */
    if (l->queue_empty && rec->accepted == l->accepted_at_beat)
        rec->settled = rec->selected;
    l->accepted_at_beat = rec->accepted;
    sws_timer_arm(l->loop, &l->beat_q, &l->beat_timer);
}

void sws_load_init(sws_load_t *l, sws_loop_t *loop, struct sws_ebpf_worker *rec)
{
    l->rec = rec;
    l->loop = loop;
    if (rec == NULL)
        return;
    l->slept_at_ns = 0;
    l->interval_ns = mono_ns();
    l->idle_ns = 0;
    l->queue_empty = 0;
    l->accepted_at_beat = rec->accepted;
    sws_timer_queue_init(loop, &l->beat_q, SWS_LOAD_BEAT_MS);
    sws_timer_init(&l->beat_timer, on_beat);
    sws_timer_arm(loop, &l->beat_q, &l->beat_timer);
    rec->draining = 0;
    rec->heartbeat_ms = sws_loop_now_ms(loop);
}

void sws_load_woke(sws_load_t *l)
{
    if (l->rec == NULL || l->slept_at_ns == 0)
        return;
    l->idle_ns += mono_ns() - l->slept_at_ns;
    l->slept_at_ns = 0;
}

void sws_load_tick(sws_load_t *l, uint64_t now_ms, unsigned live, unsigned inflight)
{
    struct sws_ebpf_worker *rec = l->rec;
    if (rec == NULL)
        return;
    rec->heartbeat_ms = now_ms;
    rec->live = live;
    rec->inflight = inflight;
    l->slept_at_ns = mono_ns();
}

void sws_load_draining(sws_load_t *l)
{
    if (l->rec != NULL)
        l->rec->draining = 1;
}
