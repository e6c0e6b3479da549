/*
 * The event loop: one epoll instance, fd watchers, and timers.
 *
 * One loop per process, run by that process's only thread; nothing here is
 * thread-safe and nothing needs to be.
 *
 * Watchers (sws_io_t) are embedded in their owner (a connection, a listener)
 * and registered once; the owner keeps the memory alive until it has called
 * sws_loop_del(). Callbacks get the watcher and the epoll event bits; the
 * owner recovers itself with container_of-style casts.
 *
 * Timers: every timeout in ScalWS is "N ms after the last activity" with N
 * fixed per purpose (header timeout, keep-alive timeout, ...). So instead of
 * a heap or a wheel, each purpose has a timer queue: a FIFO list with one
 * duration, where arming moves the timer to the tail. Arm and disarm are
 * O(1) pointer moves, and expiry looks only at the queue heads (see
 * docs/adr/0003-timer-queues.md). When a reload changes a duration, timers
 * armed before keep their old deadline; the queue may then be briefly out of
 * order, which delays an expiry by at most the difference, never loses one.
 *
 * Time: sws_loop_now_ms() is the monotonic clock read once per iteration
 * (after epoll_wait returns), not per call: cheap, and consistent within
 * an iteration.
 */
#ifndef SWS_CORE_LOOP_H
#define SWS_CORE_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>

#include "core/http_date.h"

#define sws_container_of(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

typedef struct sws_loop sws_loop_t;
typedef struct sws_io sws_io_t;
typedef struct sws_timer sws_timer_t;
typedef struct sws_timer_queue sws_timer_queue_t;

typedef void (*sws_io_cb)(sws_io_t *io, uint32_t events);
typedef void (*sws_timer_cb)(sws_timer_t *timer);
typedef void (*sws_tick_cb)(sws_loop_t *loop, void *data);
typedef struct sws_defer sws_defer_t;
typedef void (*sws_defer_cb)(sws_defer_t *d);

struct sws_io {
    int fd;
    sws_io_cb cb;
};

struct sws_timer {
    sws_timer_t *prev, *next; /* NULL when not armed */
    uint64_t deadline_ms;
    sws_timer_cb cb;
};

struct sws_timer_queue {
    sws_timer_t head; /* sentinel of a circular list */
    uint64_t duration_ms;
    sws_timer_queue_t *next_queue; /* the loop's list of queues */
};

/* Work to run later in this iteration, after the events and timers: what
 * one watcher's callback asks of another owner (a producer writing to a
 * connection that is not running). Embedded in its owner, like a timer. */
struct sws_defer {
    sws_defer_t *prev, *next; /* NULL when not queued */
    sws_defer_cb cb;
};

#define SWS_LOOP_MAX_EVENTS 256

struct sws_loop {
    int epfd;
    int stop;                     /* set by anyone: sws_loop_run returns */
    int nevents;                  /* events[next_event, nevents) are not dispatched yet */
    int next_event;
    uint64_t now_ms;              /* monotonic, updated each iteration */
    time_t wall_sec;              /* CLOCK_REALTIME seconds at now_ms */
    char http_date[SWS_HTTP_DATE_BUF]; /* "Mon, 30 Nov 2026 02:33:30 GMT", for wall_sec */
    size_t http_date_len;
    sws_timer_queue_t *queues;
    uint64_t next_expiry_ms;      /* no timer is due before this: an arm lowers
                                   * it, a disarm leaves it early (one walk
                                   * too many, never a timer late) */
    sws_tick_cb tick;             /* called once per iteration, before waiting */
    void *tick_data;
    sws_tick_cb wake;             /* called once per iteration, after waiting */
    void *wake_data;
    sws_defer_t deferred;         /* sentinel of a circular list: work queued
                                   * (the loop must not move after init) */
    struct epoll_event events[SWS_LOOP_MAX_EVENTS];
};

/* 0, or -1 with errno set. */
int sws_loop_init(sws_loop_t *loop);
void sws_loop_close(sws_loop_t *loop);

/* Register, change, unregister a watcher. events are EPOLL* bits (EPOLLET
 * included where wanted). 0, or -1 with errno set. */
int sws_loop_add(sws_loop_t *loop, sws_io_t *io, uint32_t events);
int sws_loop_mod(sws_loop_t *loop, sws_io_t *io, uint32_t events);
int sws_loop_del(sws_loop_t *loop, sws_io_t *io);

/* The tick runs once per iteration, before epoll_wait: flush buffered logs,
 * adopt a new table generation, reap closed connections. */
void sws_loop_set_tick(sws_loop_t *loop, sws_tick_cb cb, void *data);

/* The wake callback runs once per iteration as soon as epoll_wait returns,
 * before any event or timer is handled: what the tick did before a long
 * sleep may be stale by then (a table generation published meanwhile), and
 * the events that woke us must not be handled with it. Keep it to a few
 * loads: it runs on every wake-up. */
void sws_loop_set_wake(sws_loop_t *loop, sws_tick_cb cb, void *data);

/* Wait at most max_wait_ms (-1: until an event or the next timer), dispatch
 * events, then expired timers. 0, or -1 on an epoll error other than EINTR. */
int sws_loop_run_once(sws_loop_t *loop, int max_wait_ms);

/* Iterate until loop->stop is set. 0, or -1 on an epoll error. */
int sws_loop_run(sws_loop_t *loop);

/* Whether io may have an event the loop has not dispatched yet: one later
 * in the batch being dispatched, or one still in the kernel because the
 * last epoll_wait filled its array. 0 means every readiness change of io
 * that happened before the last epoll_wait has reached its callback: a
 * caller can trust what its callbacks saw without a system call (the
 * upstream pool's reuse check, worker/upstream_conn.h). */
int sws_loop_io_pending(const sws_loop_t *loop, const sws_io_t *io);

/* Refresh now_ms, wall_sec and http_date from the clocks. */
void sws_loop_update_time(sws_loop_t *loop);

static inline uint64_t sws_loop_now_ms(const sws_loop_t *loop) { return loop->now_ms; }

/* The precise monotonic clock in microseconds, read now: for measuring a
 * piece of work (a table build, a translation), where the loop's coarse
 * now_ms is too coarse. Any process. */
static inline uint64_t sws_clock_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Timer queues: register once per purpose; duration may be changed later. */
void sws_timer_queue_init(sws_loop_t *loop, sws_timer_queue_t *q, uint64_t duration_ms);
/* Unregister q, whose timers are all disarmed: for an owner that goes away
 * before the loop does (the supervisor's admin API). */
void sws_timer_queue_remove(sws_loop_t *loop, sws_timer_queue_t *q);
static inline void sws_timer_queue_set_duration(sws_timer_queue_t *q, uint64_t duration_ms)
{
    q->duration_ms = duration_ms;
}

static inline void sws_timer_init(sws_timer_t *t, sws_timer_cb cb)
{
    t->prev = t->next = NULL;
    t->deadline_ms = 0;
    t->cb = cb;
}

static inline int sws_timer_is_armed(const sws_timer_t *t) { return t->next != NULL; }

/* Deferred work (sws_defer_t): cb runs once, in this iteration after the
 * events and timers (or in the next, without sleeping, when queued from
 * the tick). Queueing a queued item does nothing; cancel is safe on an
 * item that is not queued. */
static inline void sws_defer_init(sws_defer_t *d, sws_defer_cb cb)
{
    d->prev = d->next = NULL;
    d->cb = cb;
}
static inline int sws_defer_is_queued(const sws_defer_t *d) { return d->next != NULL; }
void sws_loop_defer(sws_loop_t *loop, sws_defer_t *d);
void sws_defer_cancel(sws_defer_t *d);

/* Fire t at now + q->duration_ms; re-arming moves it (also across queues). */
void sws_timer_arm(sws_loop_t *loop, sws_timer_queue_t *q, sws_timer_t *t);
void sws_timer_disarm(sws_timer_t *t);

#endif
