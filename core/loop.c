#include "core/loop.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int sws_loop_init(sws_loop_t *loop)
{
    memset(loop, 0, sizeof(*loop));
    loop->deferred.prev = loop->deferred.next = &loop->deferred;
    loop->next_expiry_ms = UINT64_MAX; /* no timer armed */
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0)
        return -1;
    sws_loop_update_time(loop);
    return 0;
}

void sws_loop_close(sws_loop_t *loop)
{
    if (loop->epfd >= 0)
        close(loop->epfd);
    loop->epfd = -1;
}

static int loop_ctl(sws_loop_t *loop, int op, sws_io_t *io, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = io };
    return epoll_ctl(loop->epfd, op, io->fd, &ev);
}

int sws_loop_add(sws_loop_t *loop, sws_io_t *io, uint32_t events)
{
    return loop_ctl(loop, EPOLL_CTL_ADD, io, events);
}

int sws_loop_mod(sws_loop_t *loop, sws_io_t *io, uint32_t events)
{
    return loop_ctl(loop, EPOLL_CTL_MOD, io, events);
}

int sws_loop_del(sws_loop_t *loop, sws_io_t *io)
{
    return loop_ctl(loop, EPOLL_CTL_DEL, io, 0);
}

void sws_loop_set_tick(sws_loop_t *loop, sws_tick_cb cb, void *data)
{
    loop->tick = cb;
    loop->tick_data = data;
}

void sws_loop_set_wake(sws_loop_t *loop, sws_tick_cb cb, void *data)
{
    loop->wake = cb;
    loop->wake_data = data;
}

void sws_loop_update_time(sws_loop_t *loop)
{
    struct timespec ts;
    /* The coarse clocks are vDSO reads at tick resolution (1-4 ms), enough
     * for timeouts and the Date header, and cheaper than the precise ones. */
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    /* Never backwards: sws_loop_run_once may have moved now_ms to the end
     * of a sleep the coarse clock had not reached yet. */
    if (now_ms > loop->now_ms)
        loop->now_ms = now_ms;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != loop->wall_sec || loop->http_date_len == 0) {
        loop->wall_sec = ts.tv_sec;
        loop->http_date_len = sws_http_date_format(loop->wall_sec, loop->http_date);
    }
}

void sws_timer_queue_init(sws_loop_t *loop, sws_timer_queue_t *q, uint64_t duration_ms)
{
    q->head.prev = q->head.next = &q->head;
    q->head.cb = NULL;
    q->duration_ms = duration_ms;
    q->next_queue = loop->queues;
    loop->queues = q;
}

void sws_timer_queue_remove(sws_loop_t *loop, sws_timer_queue_t *q)
{
    for (sws_timer_queue_t **at = &loop->queues; *at != NULL; at = &(*at)->next_queue) {
        if (*at == q) {
            *at = q->next_queue;
            break;
        }
    }
    q->next_queue = NULL;
}

void sws_timer_disarm(sws_timer_t *t)
{
    if (t->next == NULL)
        return;
    t->prev->next = t->next;
    t->next->prev = t->prev;
    t->prev = t->next = NULL;
}

void sws_timer_arm(sws_loop_t *loop, sws_timer_queue_t *q, sws_timer_t *t)
{
    sws_timer_disarm(t);
    t->deadline_ms = loop->now_ms + q->duration_ms;
    if (t->deadline_ms < loop->next_expiry_ms)
        loop->next_expiry_ms = t->deadline_ms;
    t->prev = q->head.prev;
    t->next = &q->head;
    q->head.prev->next = t;
    q->head.prev = t;
}

/* The earliest deadline among the queue heads (each queue is in deadline
 * order), UINT64_MAX when no timer is armed: into next_expiry_ms. */
static void earliest_deadline(sws_loop_t *loop)
{
    uint64_t best = UINT64_MAX;
    for (const sws_timer_queue_t *q = loop->queues; q != NULL; q = q->next_queue) {
        const sws_timer_t *t = q->head.next;
        if (t != &q->head && t->deadline_ms < best)
            best = t->deadline_ms;
    }
    loop->next_expiry_ms = best;
}

/* Milliseconds until next_expiry_ms; -1 when no timer is armed. No walk:
 * it is a lower bound of every armed deadline (an arm lowers it, the walk
 * in expire_timers sets it exactly), so the loop never sleeps past one;
 * after a disarm it may wake early, for one walk that finds nothing due. */
static int next_timeout(sws_loop_t *loop)
{
    uint64_t at = loop->next_expiry_ms;
    if (at == UINT64_MAX)
        return -1;
    if (at <= loop->now_ms)
        return 0;
    return at - loop->now_ms > 60000 ? 60000 : (int)(at - loop->now_ms);
}

static void expire_timers(sws_loop_t *loop)
{
    /* Under load most iterations fall within one coarse clock tick and
     * before any deadline: no walk over every queue then. */
    if (loop->now_ms < loop->next_expiry_ms)
        return;
    for (sws_timer_queue_t *q = loop->queues; q != NULL; q = q->next_queue) {
        /* Fire the heads that are due; a callback may arm or disarm any
         * timer, including the next one, so re-read the head each time. */
        for (;;) {
            sws_timer_t *t = q->head.next;
            if (t == &q->head || t->deadline_ms > loop->now_ms)
                break;
            sws_timer_disarm(t);
            t->cb(t);
        }
    }
    earliest_deadline(loop);
}

void sws_loop_defer(sws_loop_t *loop, sws_defer_t *d)
{
    if (d->next != NULL)
        return;
    sws_defer_t *head = &loop->deferred;
    d->prev = head->prev;
    d->next = head;
    head->prev->next = d;
    head->prev = d;
}

void sws_defer_cancel(sws_defer_t *d)
{
    if (d->next == NULL)
        return;
    d->prev->next = d->next;
    d->next->prev = d->prev;
    d->prev = d->next = NULL;
}

/* Run what is queued, including what the callbacks queue, up to a bound:
 * two items that keep queueing each other must not hold the loop; what is
 * left runs in the next iteration, which then does not sleep. */
#define DEFER_PER_ITERATION 4096

static void run_deferred(sws_loop_t *loop)
{
    sws_defer_t *head = &loop->deferred;
    for (unsigned i = 0; i < DEFER_PER_ITERATION && head->next != head; i++) {
        sws_defer_t *d = head->next;
        sws_defer_cancel(d);
        d->cb(d);
    }
}

/* This iteration's epoll_wait timeout. A wait with a timeout returns at
 * once when events are ready, so it needs no zero-timeout look first: that
 * look only added an epoll_wait, empty, before every sleep (ADRs 0059,
 * 0072). Only a sleep needs the timers' next deadline; max_wait_ms (-1:
 * none) bounds it. */
static int wait_ms(sws_loop_t *loop, int max_wait_ms)
{
    int wait = 0;
    if (loop->deferred.next == &loop->deferred) {
        wait = next_timeout(loop);
        if (max_wait_ms >= 0 && (wait < 0 || max_wait_ms < wait))
            wait = max_wait_ms;
    }
    return wait;
}

int sws_loop_run_once(sws_loop_t *loop, int max_wait_ms)
{
    if (loop->tick != NULL)
        loop->tick(loop, loop->tick_data);
    /* The tick may decide the loop is done (a drained worker): return
     * before blocking in epoll_wait until some unrelated timer fires. */
    if (loop->stop)
        return 0;
    int wait = wait_ms(loop, max_wait_ms);
    uint64_t slept_from = loop->now_ms;
    int n = epoll_wait(loop->epfd, loop->events, SWS_LOOP_MAX_EVENTS, wait);
    sws_loop_update_time(loop);
    /* A sleep that ended by its timeout lasted at least `wait` ms, which
     * the coarse clock may not show yet (it lags by up to a tick): without
     * this, the timer it slept for would find itself not due and cost a
     * second wake-up a few ms later (4 beats a second became 6-7 on an
     * idle worker). */
    if (n == 0 && wait > 0 && loop->now_ms < slept_from + (uint64_t)wait)
        loop->now_ms = slept_from + (uint64_t)wait;
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    if (loop->wake != NULL)
        loop->wake(loop, loop->wake_data);
    loop->nevents = n;
    for (loop->next_event = 0; loop->next_event < n;) {
        struct epoll_event *ev = &loop->events[loop->next_event++];
        sws_io_t *io = ev->data.ptr;
        io->cb(io, ev->events);
    }
    expire_timers(loop);
    run_deferred(loop);
    return 0;
}

int sws_loop_io_pending(const sws_loop_t *loop, const sws_io_t *io)
{
    if (loop->nevents == SWS_LOOP_MAX_EVENTS)
        return 1;
    for (int i = loop->next_event; i < loop->nevents; i++)
        if (loop->events[i].data.ptr == io)
            return 1;
    return 0;
}

int sws_loop_run(sws_loop_t *loop)
{
    while (!loop->stop) {
        if (sws_loop_run_once(loop, -1) < 0)
            return -1;
    }
    return 0;
}
