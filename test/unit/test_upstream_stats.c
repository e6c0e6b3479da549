/* worker/upstream_stats.c: what a worker publishes per upstream member,
 * read back from a real shm region as the admin API reads it. The pools
 * view is built by hand (the balancers' state is what a worker's requests
 * would have left); idle connections are socketpair ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/upstream_stats.h"

#define SLOT 1

typedef struct fixture {
    sws_loop_t loop;
    sws_shm_t shm;
    sws_upstream_set_t set;
    sws_upstream_peer_t peers_a[2], peers_b[1];
    sws_upstream_pool_t pools[2];
    sws_upstream_pools_t view;
    sws_upstream_stats_t st;
} fixture_t;

static fixture_t F;

static int setup(void **state)
{
    char err[256];
    memset(&F, 0, sizeof(F));
    assert_int_equal(sws_loop_init(&F.loop), 0);
    assert_int_equal(sws_shm_create(&F.shm, 4096, 2, 2, err, sizeof(err)), 0);
    sws_upstream_set_init(&F.set, &F.loop);
    F.peers_a[0].id = 11;
    F.peers_a[1].id = 12;
    F.peers_b[0].id = 21;
    F.pools[0].bal = (sws_upstream_balancer_t){ .peers = F.peers_a, .npeers = 2 };
    F.pools[0].bal.health.cooldown_ms = 5000;
    F.pools[1].bal = (sws_upstream_balancer_t){ .peers = F.peers_b, .npeers = 1 };
    F.view = (sws_upstream_pools_t){ .pools = F.pools, .npools = 2 };
    sws_upstream_stats_init(&F.st, &F.loop, &F.shm, SLOT, &F.view, &F.set);
    *state = &F;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sws_upstream_stats_close(&F.st);
    sws_upstream_set_close(&F.set);
    sws_shm_close(&F.shm);
    sws_loop_close(&F.loop);
    return 0;
}

static sws_shm_member_stats_t read_member(uint64_t id)
{
    sws_shm_member_stats_t out;
    memset(&out, 0xa5, sizeof(out));
    if (sws_shm_member_stats_read(&F.shm, SLOT, id, 0, &out) != 1)
        fail_msg("member %llu not published", (unsigned long long)id);
    return out;
}

/* One idle keep-alive connection to member id (the other end is closed
 * at once: the set only counts it). */
static void idle_conn(uint64_t id)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(sws_upstream_adopt(&F.set, id, sv[0]), 0);
    close(sv[1]);
}

static void test_adopt_publishes_every_member_of_every_pool(void **state)
{
    (void)state;
    sws_shm_member_stats_t out;
    assert_int_equal(sws_shm_member_stats_read(&F.shm, SLOT, 21, 0, &out), 0);
    sws_upstream_stats_adopted(&F.st);
    for (uint64_t id = 11; id <= 21; id += id == 12 ? 9 : 1) {
        out = read_member(id);
        assert_int_equal(out.id, id);
        assert_int_equal(out.requests + out.failures + out.down_until_ms + out.active + out.idle,
                         0);
    }
    /* Record i is member i of the table, so the admin API's hint hits. */
    assert_int_equal(sws_shm_member_stats_read(&F.shm, SLOT, 21, 2, &out), 1);
}

static void test_figures_are_the_balancers_and_the_idle_pools(void **state)
{
    (void)state;
    sws_upstream_stats_adopted(&F.st);
    F.peers_a[0].active = 2;
    F.peers_a[0].requests = 40;
    F.peers_a[0].health.failures = 3;
    F.peers_a[1].health = (sws_upstream_health_t){
        .state = SWS_UPSTREAM_HEALTH_DOWN, .since_ms = 1000, .failures = 5,
    };
    F.peers_b[0].health.state = SWS_UPSTREAM_HEALTH_TRIAL;
    F.peers_b[0].health.since_ms = 7;
    idle_conn(11);
    idle_conn(11);
    idle_conn(21);
    idle_conn(99); /* a member the view no longer has */
    sws_upstream_stats_publish(&F.st);

    sws_shm_member_stats_t a = read_member(11), b = read_member(12), c = read_member(21);
    assert_int_equal(a.active, 2);
    assert_int_equal(a.idle, 2);
    assert_int_equal(a.requests, 40);
    assert_int_equal(a.failures, 3);
    assert_int_equal(a.down_until_ms, 0);
    assert_int_equal(b.failures, 5);
    assert_int_equal(b.down_until_ms, 1000 + 5000); /* down for the pool's cooldown */
    assert_int_equal(b.idle, 0);
    assert_int_equal(c.idle, 1);
    assert_int_equal(c.down_until_ms, 7); /* a trial out: still down (cooldown 0) */
}

static void test_tick_publishes_at_most_every_interval_and_the_timer_catches_up(void **state)
{
    (void)state;
    /* Fake loop time from 1 s: the loop's real clock, which run_once reads
     * below, is later than any deadline armed here. */
    F.loop.now_ms = 1000;
    sws_upstream_stats_adopted(&F.st);
    F.peers_a[0].active = 1;
    F.loop.now_ms += SWS_UPSTREAM_STATS_MS - 1;
    sws_upstream_stats_tick(&F.st);
    assert_int_equal(read_member(11).active, 0); /* too soon ... */
    assert_true(sws_timer_is_armed(&F.st.timer)); /* ... but not forgotten */
    F.loop.now_ms += 1;
    sws_upstream_stats_tick(&F.st);
    assert_int_equal(read_member(11).active, 1);

    /* The request ends in the next iteration; the worker then sleeps: the
     * timer publishes it, once, and its iteration arms nothing more. */
    F.peers_a[0].active = 0;
    F.loop.now_ms += 1;
    sws_upstream_stats_tick(&F.st);
    assert_int_equal(read_member(11).active, 1);
    assert_true(sws_timer_is_armed(&F.st.timer));
    F.loop.now_ms += SWS_UPSTREAM_STATS_MS;
    assert_int_equal(sws_loop_run_once(&F.loop, 0), 0);
    assert_false(sws_timer_is_armed(&F.st.timer));
    assert_int_equal(read_member(11).active, 0);
    sws_upstream_stats_tick(&F.st); /* the tick of the timer's iteration */
    assert_false(sws_timer_is_armed(&F.st.timer)); /* an idle worker sleeps */
}

/* A table without pools (a worker's start before any proxy route): an
 * empty block, nothing to sort or search, and the tick does nothing. */
static void test_a_view_without_members_publishes_none(void **state)
{
    (void)state;
    sws_upstream_pools_t none = { 0 };
    sws_upstream_stats_t st;
    sws_shm_member_stats_t out;
    sws_upstream_stats_init(&st, &F.loop, &F.shm, 0, &none, &F.set);
    idle_conn(11);
    sws_upstream_stats_adopted(&st);
    assert_int_equal(sws_shm_member_stats_read(&F.shm, 0, 11, 0, &out), 0);
    sws_upstream_stats_tick(&st);
    assert_false(sws_timer_is_armed(&st.timer));
    sws_upstream_stats_close(&st);
}

static void test_no_shm_publishes_nothing(void **state)
{
    (void)state;
    F.st.shm = NULL;
    sws_upstream_stats_adopted(&F.st);
    sws_shm_member_stats_t out;
    assert_int_equal(sws_shm_member_stats_read(&F.shm, SLOT, 11, 0, &out), 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_adopt_publishes_every_member_of_every_pool),
        T(test_figures_are_the_balancers_and_the_idle_pools),
        T(test_tick_publishes_at_most_every_interval_and_the_timer_catches_up),
        T(test_a_view_without_members_publishes_none),
        T(test_no_shm_publishes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
