#include "worker/load.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether every listener's accept queue is empty: one getsockopt each, at
 * most once a beat, and only when the worker looks idle. */
static int queues_empty(const sws_load_t *l)
{
    for (unsigned i = 0; i < l->nfds; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        /* On a listener, tcpi_unacked is the accept queue's length. */
        if (getsockopt(l->fds[i], IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || ti.tcpi_unacked != 0)
            return 0;
    }
    return 1;
}

void sws_load_announce(struct sws_ebpf_worker *rec)
{
    if (rec == NULL)
        return;
    /* The loop's clock (core/loop.c), which the supervisor's stuck check
     * and the later ticks use. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    rec->draining = 0;
    rec->heartbeat_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

_Static_assert(SWS_LOAD_SLEEP_MS >= SWS_LOAD_BEAT_MS && 2 * SWS_LOAD_SLEEP_MS <= SWS_EBPF_STALE_MS,
               "an idle worker beats well within the stale limit, and a busy one per interval");

void sws_load_beat(sws_load_t *l)
{
    struct sws_ebpf_worker *rec = l->rec;
    if (rec == NULL)
        return;
    uint64_t now = mono_ns();
    uint64_t span = now - l->interval_ns;
    if (span > 0) {
        uint64_t busy = span > l->idle_ns ? span - l->idle_ns : 0;
        rec->busy_pct = (uint32_t)(busy * 100 / span);
    }
    l->interval_ns = now;
    l->idle_ns = 0;
    l->beat_due_ms = sws_loop_now_ms(l->loop) + SWS_LOAD_BEAT_MS;
    /* Resync the queued count (policy.h: selected - settled) when nothing
     * can be on its way: no connection placed here for a whole beat, and
     * the accept queues empty. Else a handshake the program counted that
     * never completed (a client gone after its SYN; a SYN cookie, counted
     * at the SYN and again at the ACK) would count as load for ever. Only
     * a handshake slower than a beat is forgotten (its accept then finds
     * settled ahead, which the policy reads as nothing queued), until the
     * next resync. */
    uint64_t selected = rec->selected;
    if (selected == l->selected_at_beat && rec->settled != selected && queues_empty(l))
        rec->settled = selected;
    l->selected_at_beat = selected;
}

void sws_load_init(sws_load_t *l, sws_loop_t *loop, struct sws_ebpf_worker *rec,
                   const int *fds, unsigned nfds)
{
    l->rec = rec;
    l->loop = loop;
    l->fds = fds;
    l->nfds = nfds;
    if (rec == NULL)
        return;
    l->slept_at_ns = 0;
    l->interval_ns = mono_ns();
    l->idle_ns = 0;
    l->selected_at_beat = rec->selected;
    l->beat_due_ms = sws_loop_now_ms(loop) + SWS_LOAD_BEAT_MS;
    rec->draining = 0;
    rec->heartbeat_ms = sws_loop_now_ms(loop);
}

void sws_load_woke(sws_load_t *l)
{
    if (l->rec == NULL)
        return;
    l->rec->asleep = 0;
    if (l->slept_at_ns == 0)
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
    if (now_ms >= l->beat_due_ms)
        sws_load_beat(l);
    /* Last, just before epoll_wait: every wait counts as a sleep, also
     * one that finds events at once (microseconds, cleared by the wake
     * hook). Telling the two apart took a zero-timeout look before each
     * sleep, an epoll_wait per request at a low rate, which least-loaded's
     * preference for an awake worker did not repay (ADRs 0065, 0072). */
    rec->asleep = 1;
    l->slept_at_ns = mono_ns();
}

void sws_load_draining(sws_load_t *l)
{
    if (l->rec != NULL)
        l->rec->draining = 1;
}
