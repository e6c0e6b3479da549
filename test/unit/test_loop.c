/* core/loop.c: watchers, timer queues, cached time and the HTTP date. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/http_date.h"
#include "core/loop.h"

typedef struct pipe_watch {
    sws_io_t io;
    int fired;
    uint32_t events;
} pipe_watch_t;

static void on_pipe(sws_io_t *io, uint32_t events)
{
    pipe_watch_t *w = sws_container_of(io, pipe_watch_t, io);
    char buf[16];
    w->fired++;
    w->events = events;
    while (read(io->fd, buf, sizeof(buf)) > 0)
        ;
}

static void test_io_watcher_fires_on_readable(void **state)
{
    (void)state;
    sws_loop_t loop;
    int p[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    pipe_watch_t w = { .io = { .fd = p[0], .cb = on_pipe } };
    assert_int_equal(sws_loop_add(&loop, &w.io, EPOLLIN | EPOLLET), 0);

    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_int_equal(w.fired, 0); /* nothing written yet */

    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(sws_loop_run_once(&loop, 1000), 0);
    assert_int_equal(w.fired, 1);
    assert_true(w.events & EPOLLIN);

    assert_int_equal(sws_loop_del(&loop, &w.io), 0);
    assert_int_equal(write(p[1], "y", 1), 1);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_int_equal(w.fired, 1); /* unregistered: no more calls */
    close(p[0]);
    close(p[1]);
    sws_loop_close(&loop);
}

/* Two watchers made readable before one wait: the first one's callback
 * sees the second's event still to come, and its own as dispatched. */
static pipe_watch_t *pending_other;
static int pending_seen[2];
static sws_loop_t *pending_loop;

static void on_pipe_pending(sws_io_t *io, uint32_t events)
{
    on_pipe(io, events);
    if (pending_other != NULL) {
        pending_seen[0] = sws_loop_io_pending(pending_loop, &pending_other->io);
        pending_seen[1] = sws_loop_io_pending(pending_loop, io);
        pending_other = NULL;
    }
}

static void test_io_pending_names_events_later_in_the_batch(void **state)
{
    (void)state;
    sws_loop_t loop;
    int a[2], b[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(pipe2(a, O_NONBLOCK), 0);
    assert_int_equal(pipe2(b, O_NONBLOCK), 0);
    pipe_watch_t wa = { .io = { .fd = a[0], .cb = on_pipe_pending } };
    pipe_watch_t wb = { .io = { .fd = b[0], .cb = on_pipe } };
    assert_int_equal(sws_loop_add(&loop, &wa.io, EPOLLIN | EPOLLET), 0);
    assert_int_equal(sws_loop_add(&loop, &wb.io, EPOLLIN | EPOLLET), 0);
    /* The ready list keeps the order in which the two became readable. */
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "y", 1), 1);
    pending_loop = &loop;
    pending_other = &wb;
    assert_int_equal(sws_loop_run_once(&loop, 1000), 0);
    assert_int_equal(wa.fired, 1);
    assert_int_equal(wb.fired, 1);
    assert_int_equal(pending_seen[0], 1); /* b's event came after a's */
    assert_int_equal(pending_seen[1], 0); /* a's own is being dispatched */
    /* After the batch, nothing is pending. */
    assert_int_equal(sws_loop_io_pending(&loop, &wa.io), 0);
    assert_int_equal(sws_loop_io_pending(&loop, &wb.io), 0);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
    sws_loop_close(&loop);
}

/* The order of one iteration's callbacks, as letters: t(ick), w(ake),
 * e(vent). */
static char seq[16];

static void seq_add(char ch)
{
    size_t n = strlen(seq);
    if (n + 1 < sizeof(seq))
        seq[n] = ch;
}

static void on_seq_tick(sws_loop_t *loop, void *data)
{
    (void)loop;
    seq_add(*(const char *)data);
}

static void on_seq_pipe(sws_io_t *io, uint32_t events)
{
    on_pipe(io, events);
    seq_add('e');
}

static void test_wake_runs_after_waiting_before_events(void **state)
{
    (void)state;
    sws_loop_t loop;
    int p[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    pipe_watch_t w = { .io = { .fd = p[0], .cb = on_seq_pipe } };
    assert_int_equal(sws_loop_add(&loop, &w.io, EPOLLIN | EPOLLET), 0);
    sws_loop_set_tick(&loop, on_seq_tick, "t");
    sws_loop_set_wake(&loop, on_seq_tick, "w");

    memset(seq, 0, sizeof(seq));
    assert_int_equal(write(p[1], "x", 1), 1);
    assert_int_equal(sws_loop_run_once(&loop, 1000), 0);
    assert_string_equal(seq, "twe");

    /* A wake-up with no event (the wait timed out) runs it too. */
    memset(seq, 0, sizeof(seq));
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_string_equal(seq, "tw");
    close(p[0]);
    close(p[1]);
    sws_loop_close(&loop);
}

typedef struct counted_timer {
    sws_timer_t timer;
    int fired;
    int order;
} counted_timer_t;

static int fire_seq;

static void on_timer(sws_timer_t *t)
{
    counted_timer_t *c = sws_container_of(t, counted_timer_t, timer);
    c->fired++;
    c->order = ++fire_seq;
}

/* The loop's sleep is bounded by next_expiry_ms alone (no walk before
 * waiting): it must stay at or below every armed deadline however timers
 * are disarmed and re-armed, else the loop would sleep past one. */
static void assert_expiry_bounds(const sws_loop_t *loop, const counted_timer_t *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (sws_timer_is_armed(&ts[i].timer))
            assert_true(loop->next_expiry_ms <= ts[i].timer.deadline_ms);
}

static void test_disarm_and_rearm_never_let_the_loop_sleep_past_a_deadline(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_timer_queue_t slow, quick;
    counted_timer_t t[2] = { 0 }; /* t[0] on slow, t[1] on quick */
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(loop.next_expiry_ms, UINT64_MAX); /* nothing armed: no wake-up */
    sws_timer_queue_init(&loop, &slow, 3600 * 1000);
    sws_timer_queue_init(&loop, &quick, 20);
    sws_timer_init(&t[0].timer, on_timer);
    sws_timer_init(&t[1].timer, on_timer);
    fire_seq = 0;

    sws_timer_arm(&loop, &quick, &t[1].timer);
    sws_timer_arm(&loop, &slow, &t[0].timer);
    assert_expiry_bounds(&loop, t, 2);
    sws_timer_disarm(&t[1].timer); /* the earliest goes: the bound stays early */
    assert_expiry_bounds(&loop, t, 2);
    /* A turn that fires nothing recomputes it; the quick one comes back. */
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_expiry_bounds(&loop, t, 2);
    sws_timer_arm(&loop, &quick, &t[1].timer);
    assert_expiry_bounds(&loop, t, 2);
    sws_timer_arm(&loop, &quick, &t[1].timer); /* re-armed later */
    assert_expiry_bounds(&loop, t, 2);

    /* No bound from the caller: only the quick deadline ends each sleep. A
     * loop sleeping to the slow one would not return for a minute (its
     * cap), and then not with the quick one fired alone. */
    for (int i = 0; i < 100 && t[1].fired == 0; i++) {
        assert_int_equal(sws_loop_run_once(&loop, -1), 0);
        assert_expiry_bounds(&loop, t, 2);
    }
    assert_int_equal(t[1].fired, 1);
    assert_int_equal(t[0].fired, 0);
    assert_int_equal(loop.next_expiry_ms, t[0].timer.deadline_ms); /* exact after a walk */
    sws_timer_disarm(&t[0].timer);
    sws_timer_queue_remove(&loop, &quick);
    sws_timer_queue_remove(&loop, &slow);
    sws_loop_close(&loop);
}

/* A sleep that ends by its timeout is as long as the timer asked: the
 * timer fires after that one epoll_wait, although the coarse clock read
 * after it may lag the sleep by up to a tick (1-4 ms). Else each timer
 * wake-up costs a second one, a few ms later, that finds the deadline
 * reached: an idle worker's 250 ms beat woke it 6-7 times a second instead
 * of 4 (docs/benchmarks/2026-12-01-accept-policies.md, session 8). Each
 * round fails with a chance of about one in two without the rule (when
 * the clock lags more at the wake-up than at the arm); 20 rounds. */
static void test_timer_fires_after_one_sleep(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_timer_queue_t q;
    counted_timer_t t = { 0 };
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_timer_queue_init(&loop, &q, 7);
    sws_timer_init(&t.timer, on_timer);
    for (int round = 1; round <= 20; round++) {
        sws_loop_update_time(&loop);
        sws_timer_arm(&loop, &q, &t.timer);
        assert_int_equal(sws_loop_run_once(&loop, -1), 0);
        if (t.fired != round)
            fail_msg("round %d: the timer did not fire after the sleep it set", round);
        assert_true(loop.now_ms >= t.timer.deadline_ms);
    }
    sws_timer_queue_remove(&loop, &q);
    sws_loop_close(&loop);
}

static void test_timer_queue_fires_in_arm_order_and_rearm_moves(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_timer_queue_t q;
    counted_timer_t a = { 0 }, b = { 0 }, c = { 0 };
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_timer_queue_init(&loop, &q, 10);
    sws_timer_init(&a.timer, on_timer);
    sws_timer_init(&b.timer, on_timer);
    sws_timer_init(&c.timer, on_timer);
    fire_seq = 0;

    sws_timer_arm(&loop, &q, &a.timer);
    sws_timer_arm(&loop, &q, &b.timer);
    sws_timer_arm(&loop, &q, &c.timer);
    sws_timer_arm(&loop, &q, &a.timer); /* activity on a: it goes last */
    sws_timer_disarm(&b.timer);         /* b is cancelled */
    assert_false(sws_timer_is_armed(&b.timer));

    /* Drive the loop until both armed timers fired; bounded by count, and
     * each wait is bounded by the next deadline the loop computes itself. */
    for (int i = 0; i < 1000 && (a.fired == 0 || c.fired == 0); i++)
        assert_int_equal(sws_loop_run_once(&loop, 100), 0);

    assert_int_equal(a.fired, 1);
    assert_int_equal(b.fired, 0);
    assert_int_equal(c.fired, 1);
    assert_int_equal(c.order, 1);
    assert_int_equal(a.order, 2);
    assert_false(sws_timer_is_armed(&a.timer));
    sws_loop_close(&loop);
}

static void test_timer_not_due_does_not_fire(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_timer_queue_t q;
    counted_timer_t a = { 0 };
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_timer_queue_init(&loop, &q, 3600 * 1000);
    sws_timer_init(&a.timer, on_timer);
    sws_timer_arm(&loop, &q, &a.timer);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_int_equal(a.fired, 0);
    assert_true(sws_timer_is_armed(&a.timer));
    assert_true(a.timer.deadline_ms >= loop.now_ms + 3600 * 1000 - 1);
    sws_loop_close(&loop);
}

static void on_always(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_container_of(io, pipe_watch_t, io)->fired++;
}

/* A busy loop (events every iteration) does not walk the timer queues
 * before the deadline it remembers: a timer armed then in a shorter queue
 * still fires in the next iteration (its arm lowers what was remembered). */
static void test_timer_armed_before_the_remembered_deadline_fires(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_timer_queue_t slow, now;
    counted_timer_t late = { 0 }, due = { 0 };
    int p[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    /* Level-triggered and always writable: every epoll_wait has an event. */
    pipe_watch_t w = { .io = { .fd = p[1], .cb = on_always } };
    assert_int_equal(sws_loop_add(&loop, &w.io, EPOLLOUT), 0);
    sws_timer_queue_init(&loop, &slow, 3600 * 1000);
    sws_timer_queue_init(&loop, &now, 0);
    sws_timer_init(&late.timer, on_timer);
    sws_timer_init(&due.timer, on_timer);
    sws_timer_arm(&loop, &slow, &late.timer);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0); /* remembers an hour from now */
    assert_int_equal(w.fired, 1);
    sws_timer_arm(&loop, &now, &due.timer);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0); /* busy: no walk before it waits */
    assert_int_equal(w.fired, 2);
    assert_int_equal(due.fired, 1);
    assert_int_equal(late.fired, 0);
    assert_true(sws_timer_is_armed(&late.timer));
    close(p[0]);
    close(p[1]);
    sws_loop_close(&loop);
}

/* One busy iteration (a level-triggered pipe, then unregistered), then one
 * iteration of at most 10 s in which only a timerfd due in after_ms can
 * fire: how many times it did. */
static int busy_then_timerfd(long after_ms)
{
    sws_loop_t loop;
    int p[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    assert_int_equal(write(p[1], "x", 1), 1);
    pipe_watch_t ready = { .io = { .fd = p[0], .cb = on_always } };
    assert_int_equal(sws_loop_add(&loop, &ready.io, EPOLLIN), 0);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    assert_int_equal(ready.fired, 1);
    assert_int_equal(sws_loop_del(&loop, &ready.io), 0);

    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    assert_true(tfd >= 0);
    struct itimerspec its = { .it_value = { .tv_sec = after_ms / 1000,
                                            .tv_nsec = (after_ms % 1000) * 1000000L } };
    assert_int_equal(timerfd_settime(tfd, 0, &its, NULL), 0);
    pipe_watch_t timer = { .io = { .fd = tfd, .cb = on_pipe } };
    assert_int_equal(sws_loop_add(&loop, &timer.io, EPOLLIN), 0);
    assert_int_equal(sws_loop_run_once(&loop, 10000), 0);
    close(tfd);
    close(p[0]);
    close(p[1]);
    sws_loop_close(&loop);
    return timer.fired;
}

/* After a busy iteration the wait sleeps at once with its timeout (it
 * returns at once when events are ready): no empty zero-timeout look
 * before each sleep (ADR 0059), so this one iteration sees the timer. */
static void test_a_wait_after_a_busy_iteration_sleeps_without_a_look(void **state)
{
    (void)state;
    assert_int_equal(busy_then_timerfd(20), 1);
}

/* Deferred work runs once in the iteration that queued it, after the
 * events, also what a deferred callback queues; a cancelled item never
 * runs; queueing from outside an iteration keeps the next one awake. */
static struct deferred_log {
    sws_loop_t *loop;
    sws_defer_t a, b, c;
    char order[8];
    int n;
    int runs;
} dl;

static void note(char what)
{
    dl.runs++;
    if (dl.n < (int)sizeof(dl.order) - 1)
        dl.order[dl.n++] = what;
}

static void defer_a(sws_defer_t *d)
{
    (void)d;
    note('a');
    sws_loop_defer(dl.loop, &dl.b); /* queued by a callback: same iteration */
    sws_loop_defer(dl.loop, &dl.a); /* itself again: runs again, bounded */
}

static void defer_b(sws_defer_t *d)
{
    (void)d;
    note('b');
}

static void defer_c(sws_defer_t *d)
{
    (void)d;
    note('c');
}

static void test_deferred_work_runs_once_per_queueing(void **state)
{
    (void)state;
    sws_loop_t loop;
    assert_int_equal(sws_loop_init(&loop), 0);
    memset(&dl, 0, sizeof(dl));
    dl.loop = &loop;
    sws_defer_init(&dl.a, defer_b);
    sws_defer_init(&dl.b, defer_b);
    sws_defer_init(&dl.c, defer_c);
    sws_loop_defer(&loop, &dl.b);
    sws_loop_defer(&loop, &dl.b); /* twice: once */
    sws_loop_defer(&loop, &dl.c);
    sws_defer_cancel(&dl.c);
    assert_false(sws_defer_is_queued(&dl.c));
    /* Queued outside an iteration: this one must not sleep (a -1 wait
     * would block for ever with nothing else registered). */
    assert_int_equal(sws_loop_run_once(&loop, -1), 0);
    assert_string_equal(dl.order, "b");
    assert_false(sws_defer_is_queued(&dl.b));

    dl.n = dl.runs = 0;
    memset(dl.order, 0, sizeof(dl.order));
    sws_defer_init(&dl.a, defer_a);
    sws_loop_defer(&loop, &dl.a);
    assert_int_equal(sws_loop_run_once(&loop, 0), 0);
    /* a ran, queued b and itself: b, then a again (which queues both
     * again), up to the per-iteration bound: the loop is never held. */
    assert_memory_equal(dl.order, "abab", 4);
    assert_true(dl.runs > 4 && dl.runs <= 4096);
    assert_true(sws_defer_is_queued(&dl.a) || sws_defer_is_queued(&dl.b));
    sws_defer_cancel(&dl.a);
    sws_defer_cancel(&dl.b);
    sws_loop_close(&loop);
}

static void test_http_date_format(void **state)
{
    (void)state;
    char out[SWS_HTTP_DATE_BUF];
    assert_int_equal(sws_http_date_format(0, out), SWS_HTTP_DATE_LEN);
    assert_string_equal(out, "Thu, 01 Jan 1970 00:00:00 GMT");
    sws_http_date_format(1796005410, out);
    assert_string_equal(out, "Mon, 30 Nov 2026 02:23:30 GMT");
}

static void test_loop_date_is_current(void **state)
{
    (void)state;
    sws_loop_t loop;
    char expect[SWS_HTTP_DATE_BUF];
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_http_date_format(loop.wall_sec, expect);
    assert_int_equal(loop.http_date_len, SWS_HTTP_DATE_LEN);
    assert_string_equal(loop.http_date, expect);
    time_t now = time(NULL);
    assert_true(loop.wall_sec >= now - 2 && loop.wall_sec <= now);
    sws_loop_close(&loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_watcher_fires_on_readable),
        cmocka_unit_test(test_io_pending_names_events_later_in_the_batch),
        cmocka_unit_test(test_wake_runs_after_waiting_before_events),
        cmocka_unit_test(test_timer_queue_fires_in_arm_order_and_rearm_moves),
        cmocka_unit_test(test_disarm_and_rearm_never_let_the_loop_sleep_past_a_deadline),
        cmocka_unit_test(test_timer_not_due_does_not_fire),
        cmocka_unit_test(test_timer_fires_after_one_sleep),
        cmocka_unit_test(test_timer_armed_before_the_remembered_deadline_fires),
        cmocka_unit_test(test_a_wait_after_a_busy_iteration_sleeps_without_a_look),
        cmocka_unit_test(test_deferred_work_runs_once_per_queueing),
        cmocka_unit_test(test_http_date_format),
        cmocka_unit_test(test_loop_date_is_current),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
