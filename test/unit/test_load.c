/* worker/load.c: what a worker publishes into its load record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/loop.h"
#include "worker/load.h"

typedef struct fixture {
    sws_loop_t loop;
    struct sws_ebpf_worker rec;
    sws_load_t load;
    int listener;
    struct sockaddr_in addr;
} fixture_t;

/* A loop, a listener and a record per test. */
static int setup(void **state)
{
    static fixture_t f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(sws_loop_init(&f.loop), 0);
    f.listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(f.listener >= 0);
    f.addr.sin_family = AF_INET;
    f.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(f.addr);
    assert_int_equal(bind(f.listener, (struct sockaddr *)&f.addr, len), 0);
    assert_int_equal(listen(f.listener, 16), 0);
    assert_int_equal(getsockname(f.listener, (struct sockaddr *)&f.addr, &len), 0);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    close(f->listener);
    sws_loop_close(&f->loop);
    return 0;
}

static void start(fixture_t *f, uint64_t selected, uint64_t settled)
{
    memset(&f->rec, 0, sizeof(f->rec));
    f->rec.selected = selected;
    f->rec.settled = settled;
    f->rec.draining = 1; /* left over: a new worker is not draining */
    sws_load_init(&f->load, &f->loop, &f->rec, &f->listener, 1);
}

static void test_init_marks_the_worker_up(void **state)
{
    fixture_t *f = *state;
    sws_loop_update_time(&f->loop);
    start(f, 0, 0);
    assert_int_equal(f->rec.draining, 0);
    assert_int_equal(f->rec.heartbeat_ms, sws_loop_now_ms(&f->loop));
    assert_true(f->rec.heartbeat_ms != 0);
}

static void test_tick_publishes_heartbeat_live_and_inflight(void **state)
{
    fixture_t *f = *state;
    start(f, 0, 0);
    sws_load_tick(&f->load, 123456, 7, 2);
    assert_int_equal(f->rec.heartbeat_ms, 123456);
    assert_int_equal(f->rec.live, 7);
    assert_int_equal(f->rec.inflight, 2);
    sws_load_draining(&f->load);
    assert_int_equal(f->rec.draining, 1);
}

/* least-loaded prefers a worker that is not in epoll_wait: the tick (just
 * before it) says asleep, the wake hook (just after) says awake. */
static void test_asleep_from_tick_to_wake(void **state)
{
    fixture_t *f = *state;
    start(f, 0, 0);
    assert_int_equal(f->rec.asleep, 0);
    sws_load_tick(&f->load, 1, 0, 0);
    assert_int_equal(f->rec.asleep, 1);
    sws_load_woke(&f->load);
    assert_int_equal(f->rec.asleep, 0);
}

/* The loop's tick hook for the test below: the record as the tick left it,
 * just before epoll_wait. */
typedef struct tick_seen {
    fixture_t *f;
    uint32_t asleep;
    uint64_t slept_at_ns;
} tick_seen_t;

static void on_tick_publish(sws_loop_t *loop, void *data)
{
    tick_seen_t *seen = data;
    sws_load_tick(&seen->f->load, sws_loop_now_ms(loop), 0, 0);
    seen->asleep = seen->f->rec.asleep;
    seen->slept_at_ns = seen->f->load.slept_at_ns;
}

static void on_wake_publish(sws_loop_t *loop, void *data)
{
    (void)loop;
    sws_load_woke(&((tick_seen_t *)data)->f->load);
}

static void on_readable(sws_io_t *io, uint32_t events)
{
    (void)io;
    (void)events;
}

/* Every wait counts as a sleep, also one after a busy iteration that finds
 * events at once: the tick sets asleep and the sleep's start, the wake hook
 * clears asleep and counts the wait as idle time. The loop keeps no
 * zero-timeout look before sleeping to tell the two apart, under any
 * policy (ADRs 0065, 0072): one epoll_wait less per sleep. */
static void test_every_wait_is_a_sleep(void **state)
{
    fixture_t *f = *state;
    start(f, 0, 0);
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    assert_int_equal(write(p[1], "x", 1), 1);
    sws_io_t io = { .fd = p[0], .cb = on_readable };
    assert_int_equal(sws_loop_add(&f->loop, &io, EPOLLIN), 0); /* level: ready every time */
    tick_seen_t seen = { .f = f };
    sws_loop_set_tick(&f->loop, on_tick_publish, &seen);
    sws_loop_set_wake(&f->loop, on_wake_publish, &seen); /* as worker.c hooks them */

    for (int i = 0; i < 3; i++) { /* idle before, then busy twice */
        uint64_t idle_before = f->load.idle_ns;
        assert_int_equal(sws_loop_run_once(&f->loop, -1), 0);
        assert_int_equal(seen.asleep, 1);
        assert_true(seen.slept_at_ns != 0);
        assert_int_equal(f->rec.asleep, 0);     /* cleared on waking */
        assert_int_equal(f->load.slept_at_ns, 0);
        assert_true(f->load.idle_ns > idle_before);
    }
    assert_int_equal(sws_loop_del(&f->loop, &io), 0);
    close(p[0]);
    close(p[1]);
}

/* Between two ticks a worker may accept a whole batch: each accept moves
 * the connection from queued to live at once, so its load never dips. */
static void test_accept_moves_a_connection_from_queued_to_live(void **state)
{
    fixture_t *f = *state;
    start(f, 10, 0);
    sws_load_tick(&f->load, 1, 0, 0);
    assert_int_equal(sws_ebpf_load(&f->rec), 10);
    for (unsigned i = 0; i < 10; i++) {
        sws_load_accepted(&f->load);
        assert_int_equal(sws_ebpf_load(&f->rec), 10);
    }
    assert_int_equal(f->rec.accepted, 10);
    assert_int_equal(f->rec.live, 10);
}

static void test_beat_resyncs_the_queue_only_when_idle_and_empty(void **state)
{
    fixture_t *f = *state;
    start(f, 5, 2); /* three counted that never arrived */
    f->rec.selected = 6; /* one placed during this beat: maybe on its way */
    sws_load_beat(&f->load);
    assert_int_equal(f->rec.settled, 2);
    /* A whole beat with nothing placed, but one waiting in the queue. */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&f->addr, sizeof(f->addr)), 0);
    sws_load_beat(&f->load);
    assert_int_equal(f->rec.settled, 2);
    int a = accept(f->listener, NULL, NULL);
    assert_true(a >= 0);
    sws_load_accepted(&f->load);
    /* Idle and empty: whatever is still counted never comes. */
    sws_load_beat(&f->load);
    assert_int_equal(f->rec.settled, 6);
    assert_int_equal(sws_ebpf_queued(&f->rec), 0);
    close(a);
    close(c);
}

/* No timer of its own: a wake-up costs a worker about 100 us of CPU on the
 * development VM, and a 250 ms beat timer woke every worker 4 times a
 * second, idle or serving (docs/benchmarks/2026-12-01-accept-policies.md,
 * session 8). The loop's sleeps are bounded instead, well within the
 * stale limit. */
static void test_publishing_arms_no_timer_and_bounds_the_sleep(void **state)
{
    fixture_t *f = *state;
    start(f, 0, 0);
    assert_int_equal(f->loop.next_expiry_ms, UINT64_MAX);
    assert_int_equal(sws_load_sleep_ms(&f->load), SWS_LOAD_SLEEP_MS);
    assert_true(2 * sws_load_sleep_ms(&f->load) <= SWS_EBPF_STALE_MS);
    sws_load_t none;
    memset(&none, 0, sizeof(none));
    sws_load_init(&none, &f->loop, NULL, &f->listener, 1);
    assert_int_equal(sws_load_sleep_ms(&none), -1);
}

/* The beat (busy share, queue resync) comes from the tick, once the
 * interval is over, and not at every tick. */
static void test_tick_beats_once_per_interval(void **state)
{
    fixture_t *f = *state;
    sws_loop_update_time(&f->loop);
    uint64_t t0 = sws_loop_now_ms(&f->loop);
    start(f, 3, 0); /* three counted that never arrived */
    f->rec.busy_pct = 77; /* not a share this test can compute */
    sws_load_tick(&f->load, t0 + SWS_LOAD_BEAT_MS - 1, 0, 0);
    assert_int_equal(f->rec.busy_pct, 77);
    assert_int_equal(f->rec.settled, 0);

    f->loop.now_ms = t0 + SWS_LOAD_BEAT_MS;
    sws_load_tick(&f->load, f->loop.now_ms, 0, 0);
    assert_true(f->rec.busy_pct <= 100);
    assert_int_equal(f->rec.settled, 3); /* nothing placed for a beat, queue empty */

    f->rec.busy_pct = 77;
    f->loop.now_ms += SWS_LOAD_BEAT_MS - 1;
    sws_load_tick(&f->load, f->loop.now_ms, 0, 0);
    assert_int_equal(f->rec.busy_pct, 77);
    f->loop.now_ms += 1;
    sws_load_tick(&f->load, f->loop.now_ms, 0, 0);
    assert_true(f->rec.busy_pct <= 100);
}

static void test_without_a_record_nothing_is_written(void **state)
{
    fixture_t *f = *state;
    sws_load_t l;
    memset(&l, 0, sizeof(l));
    sws_load_init(&l, &f->loop, NULL, &f->listener, 1);
    sws_load_tick(&l, 1, 2, 3);
    sws_load_woke(&l);
    sws_load_accepted(&l);
    sws_load_draining(&l);
    sws_load_beat(&l);
    assert_null(l.rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_init_marks_the_worker_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tick_publishes_heartbeat_live_and_inflight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_asleep_from_tick_to_wake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_wait_is_a_sleep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_accept_moves_a_connection_from_queued_to_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_beat_resyncs_the_queue_only_when_idle_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publishing_arms_no_timer_and_bounds_the_sleep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tick_beats_once_per_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_without_a_record_nothing_is_written, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
