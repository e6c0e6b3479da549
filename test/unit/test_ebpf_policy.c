/* ebpf/policy.h: each accept policy's choice, run in userspace on a load
 * map built here (the program runs the same code at each SYN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ebpf/policy.h"

#define NOW 100000u /* ms; heartbeats are set to it unless a test says not */
#define NO_CPU (~0u)

typedef struct fixture {
    struct sws_ebpf_state s;
} fixture_t;

/* n live workers, fresh heartbeats, nothing held, pinned round-robin on
 * ncpus CPUs. */
static void setup_state(fixture_t *f, enum sws_ebpf_policy policy, unsigned n, unsigned ncpus)
{
    memset(f, 0, sizeof(*f));
    f->s.config.policy = policy;
    f->s.config.fountain_threshold = 85;
    f->s.config.nworkers = n;
    for (unsigned i = 0; i < n; i++) {
        f->s.w[i].heartbeat_ms = NOW;
        f->s.w[i].cpu = i % ncpus;
    }
}

static int pick(const fixture_t *f, uint32_t hash)
{
    return sws_ebpf_pick(&f->s, hash, NO_CPU, NOW);
}

/* As the program does: place, and count the connection on that slot (it
 * is queued until the worker accepts it). */
static int place(fixture_t *f, uint32_t hash, uint32_t cpu)
{
    int slot = sws_ebpf_pick(&f->s, hash, cpu, NOW);
    assert_true(slot >= 0 && slot < (int)f->s.config.nworkers);
    f->s.w[slot].selected++;
    return slot;
}

/* The hash that scales onto slot i of n (the kernel's reciprocal_scale). */
static uint32_t hash_for(unsigned i, unsigned n)
{
    return (uint32_t)((((uint64_t)i << 32) + (1ull << 32) / n / 2) / n);
}

/* ---- which workers count ---- */

static void test_eligible_excludes_stuck_draining_down_and_unstarted(void **state)
{
    (void)state;
    struct sws_ebpf_worker w;
    memset(&w, 0, sizeof(w));
    assert_false(sws_ebpf_eligible(&w, NOW)); /* no heartbeat yet */
    w.heartbeat_ms = NOW - SWS_EBPF_STALE_MS;
    assert_true(sws_ebpf_eligible(&w, NOW));
    w.heartbeat_ms = NOW - SWS_EBPF_STALE_MS - 1;
    assert_false(sws_ebpf_eligible(&w, NOW));
    w.heartbeat_ms = NOW + 4; /* a coarse clock a tick ahead */
    assert_true(sws_ebpf_eligible(&w, NOW));
    w.draining = 1;
    assert_false(sws_ebpf_eligible(&w, NOW));
    w.draining = 0;
    w.down = 1;
    assert_false(sws_ebpf_eligible(&w, NOW));
}

static void test_load_counts_queued_connections_clamped(void **state)
{
    (void)state;
    struct sws_ebpf_worker w;
    memset(&w, 0, sizeof(w));
    w.live = 3;
    w.selected = 10;
    w.settled = 7;
    assert_int_equal(sws_ebpf_load(&w), 6);
    w.settled = 12; /* a resync raced a SYN: taken more than placed */
    assert_int_equal(sws_ebpf_load(&w), 3);
    w.settled = 0;
    w.selected = 1ull << 40; /* never more than the clamp */
    assert_int_equal(sws_ebpf_queued(&w), SWS_EBPF_QUEUED_MAX);
}

static void test_no_eligible_worker_leaves_it_to_the_kernel(void **state)
{
    (void)state;
    fixture_t f;
    const enum sws_ebpf_policy all[] = { SWS_EBPF_HASH, SWS_EBPF_LEAST_LOADED, SWS_EBPF_FOUNTAIN,
                                         SWS_EBPF_CPU };
    for (size_t p = 0; p < sizeof(all) / sizeof(all[0]); p++) {
        setup_state(&f, all[p], 4, 2);
        for (unsigned i = 0; i < 4; i++)
            f.s.w[i].down = 1;
        assert_int_equal(sws_ebpf_pick(&f.s, 12345, 0, NOW), -1);
    }
    setup_state(&f, 0, 4, 2); /* no policy loaded */
    assert_int_equal(pick(&f, 1), -1);
}

/* ---- hash ---- */

static void test_hash_is_the_kernel_scaling_and_skips_excluded_slots(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_HASH, 8, 2);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(pick(&f, hash_for(i, 8)), (int)i);
    assert_int_equal(pick(&f, 0), 0);
    assert_int_equal(pick(&f, UINT32_MAX), 7);
    f.s.w[3].heartbeat_ms = NOW - 5000; /* stuck: the next one takes its share */
    assert_int_equal(pick(&f, hash_for(3, 8)), 4);
    f.s.w[7].draining = 1; /* wraps */
    assert_int_equal(pick(&f, hash_for(7, 8)), 0);
}

/* ---- least-loaded ---- */

static void test_least_loaded_takes_the_fewest_connections(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 4, 2);
    unsigned live[] = { 5, 2, 9, 3 };
    for (unsigned i = 0; i < 4; i++)
        f.s.w[i].live = live[i];
    for (unsigned h = 0; h < 4; h++)
        assert_int_equal(pick(&f, hash_for(h, 4)), 1);
    f.s.w[1].selected = 2; /* two queued: 4 now, worker 3 has 3 */
    assert_int_equal(pick(&f, 0), 3);
}

static void test_least_loaded_breaks_ties_by_busy_share_then_hash(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 4, 2);
    /* Equal loads: the slot the hash points at, or the next from there. */
    for (unsigned h = 0; h < 4; h++)
        assert_int_equal(pick(&f, hash_for(h, 4)), (int)h);
    f.s.w[2].busy_pct = 40;
    f.s.w[0].busy_pct = 10;
    f.s.w[1].busy_pct = 10;
    f.s.w[3].busy_pct = 10;
    assert_int_equal(pick(&f, hash_for(2, 4)), 3);
}

static void test_least_loaded_spreads_one_at_a_time_and_a_burst_evenly(void **state)
{
    (void)state;
    fixture_t f;
    unsigned count[8] = { 0 };
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 8, 2);
    /* 64 one at a time, each accepted before the next (queued -> live). */
    for (unsigned c = 0; c < 64; c++) {
        int slot = place(&f, c * 2654435761u, NO_CPU);
        f.s.w[slot].settled++;
        f.s.w[slot].live++;
        count[slot]++;
    }
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(count[i], 8);
    /* A burst of 256 before any worker accepts: queued counts as load. */
    memset(count, 0, sizeof(count));
    for (unsigned c = 0; c < 256; c++)
        count[place(&f, c * 40503u, NO_CPU)]++;
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(count[i], 32);
}

static void test_least_loaded_skips_a_stuck_worker_whatever_its_load(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 3, 1);
    f.s.w[0].live = 10;
    f.s.w[1].live = 10;
    f.s.w[2].heartbeat_ms = NOW - SWS_EBPF_STALE_MS - 1; /* idle but SIGSTOPped */
    for (unsigned c = 0; c < 20; c++)
        assert_int_not_equal(place(&f, c * 2654435761u, NO_CPU), 2);
}

/* Every worker asleep in epoll_wait but `awake`. */
static void only_awake(fixture_t *f, unsigned awake)
{
    for (unsigned i = 0; i < f->s.config.nworkers; i++)
        f->s.w[i].asleep = i != awake;
}

static void test_least_loaded_prefers_an_awake_worker_close_to_the_least(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 4, 2);
    only_awake(&f, 2);
    unsigned live[] = { 4, 4, 5, 4 };
    for (unsigned i = 0; i < 4; i++)
        f.s.w[i].live = live[i];
    /* Within least + least/8 + 1 = 5: the awake one, whatever the hash. */
    for (unsigned h = 0; h < 4; h++)
        assert_int_equal(pick(&f, hash_for(h, 4)), 2);
    f.s.w[2].live = 6; /* beyond: the lightest, asleep or not */
    assert_int_equal(pick(&f, hash_for(1, 4)), 1);
    /* The margin grows with the load: least 16, up to 16 + 2 + 1. */
    for (unsigned i = 0; i < 4; i++)
        f.s.w[i].live = 16;
    f.s.w[2].live = 19;
    assert_int_equal(pick(&f, hash_for(0, 4)), 2);
    f.s.w[2].live = 20;
    assert_int_equal(pick(&f, hash_for(0, 4)), 0);
    /* Awake but stuck (no heartbeat for a second): not eligible at all. */
    f.s.w[2].live = 16;
    f.s.w[2].heartbeat_ms = NOW - SWS_EBPF_STALE_MS - 1;
    assert_int_equal(pick(&f, hash_for(2, 4)), 3);
}

static void test_least_loaded_takes_the_lightest_of_the_awake(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 4, 2);
    unsigned live[] = { 4, 5, 4, 3 };
    for (unsigned i = 0; i < 4; i++) {
        f.s.w[i].live = live[i];
        f.s.w[i].asleep = 1;
    }
    f.s.w[1].asleep = 0;
    f.s.w[2].asleep = 0;
    assert_int_equal(pick(&f, hash_for(1, 4)), 2);
    /* All asleep: the lightest, as before. */
    f.s.w[1].asleep = 1;
    f.s.w[2].asleep = 1;
    assert_int_equal(pick(&f, hash_for(1, 4)), 3);
}

/* Issue 9's placement bound holds while one worker stays awake and takes
 * what it may: no worker empty, none above 1.25x the mean. */
static void test_least_loaded_with_an_awake_worker_stays_within_the_placement_bound(void **state)
{
    (void)state;
    fixture_t f;
    unsigned count[8] = { 0 };
    setup_state(&f, SWS_EBPF_LEAST_LOADED, 8, 2);
    /* One at a time: the worker that took the last one is still awake. */
    only_awake(&f, 0);
    for (unsigned c = 0; c < 64; c++) {
        int slot = place(&f, c * 2654435761u, NO_CPU);
        f.s.w[slot].settled++;
        f.s.w[slot].live++;
        count[slot]++;
        only_awake(&f, (unsigned)slot);
    }
    for (unsigned i = 0; i < 8; i++) {
        assert_true(count[i] >= 1);
        assert_true(count[i] * 8 * 4 <= 64 * 5);
    }
    /* A burst of 256 while worker 3 stays awake. */
    memset(count, 0, sizeof(count));
    only_awake(&f, 3);
    for (unsigned c = 0; c < 256; c++)
        count[place(&f, c * 40503u, NO_CPU)]++;
    assert_true(count[3] > 32); /* it took more than its share */
    for (unsigned i = 0; i < 8; i++) {
        assert_true(count[i] >= 1);
        assert_true(count[i] * 8 * 4 <= 256 * 5);
    }
}

/* ---- fountain ---- */

static void test_fountain_fills_in_order_and_keeps_later_workers_empty(void **state)
{
    (void)state;
    fixture_t f;
    unsigned count[8] = { 0 };
    setup_state(&f, SWS_EBPF_FOUNTAIN, 8, 2);
    /* Below SWS_EBPF_FOUNTAIN_MIN a worker is never full. */
    for (unsigned c = 0; c < SWS_EBPF_FOUNTAIN_MIN; c++)
        count[place(&f, c * 2654435761u, NO_CPU)]++;
    assert_int_equal(count[0], SWS_EBPF_FOUNTAIN_MIN);
    /* Held for good: full at twice the fair share of 8 workers, so four
     * workers take 64 and the last four stay empty. */
    for (unsigned c = SWS_EBPF_FOUNTAIN_MIN; c < 64; c++)
        count[place(&f, c * 2654435761u, NO_CPU)]++;
    for (unsigned i = 0; i < 4; i++)
        assert_int_equal(count[i], 16);
    for (unsigned i = 4; i < 8; i++)
        assert_int_equal(count[i], 0);
}

static void test_fountain_spills_over_within_a_burst(void **state)
{
    (void)state;
    fixture_t f;
    unsigned count[8] = { 0 };
    setup_state(&f, SWS_EBPF_FOUNTAIN, 8, 2);
    /* Nothing accepted yet: only the counts the program keeps at each SYN. */
    for (unsigned c = 0; c < 256; c++)
        count[place(&f, c * 40503u, NO_CPU)]++;
    assert_true(count[0] < 256 / 2);
    assert_true(count[1] > 0 && count[2] > 0 && count[3] > 0);
    assert_int_equal(count[0] + count[1] + count[2] + count[3], 256);
}

static void test_fountain_skips_a_busy_worker(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_FOUNTAIN, 4, 2);
    f.s.w[0].busy_pct = 86;
    assert_int_equal(pick(&f, 0), 1);
    f.s.w[0].busy_pct = 85; /* at the threshold: not above it */
    assert_int_equal(pick(&f, 0), 0);
    f.s.config.fountain_threshold = 50;
    assert_int_equal(pick(&f, 0), 1);
}

static void test_fountain_when_all_are_full_takes_the_lightest(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_FOUNTAIN, 4, 2);
    for (unsigned i = 0; i < 4; i++) {
        f.s.w[i].busy_pct = 95;
        f.s.w[i].live = 20;
    }
    f.s.w[2].live = 12;
    assert_int_equal(pick(&f, 0), 2);
}

/* ---- cpu ---- */

static void test_cpu_takes_the_worker_pinned_to_the_syn_cpu(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_CPU, 4, 4);
    for (uint32_t cpu = 0; cpu < 4; cpu++)
        for (unsigned c = 0; c < 8; c++)
            assert_int_equal(place(&f, c * 2654435761u, cpu), (int)cpu);
}

static void test_cpu_with_more_workers_than_cpus_spreads_over_that_cpus_workers(void **state)
{
    (void)state;
    fixture_t f;
    unsigned count[8] = { 0 };
    setup_state(&f, SWS_EBPF_CPU, 8, 2); /* cpu 1: workers 1, 3, 5, 7 */
    for (unsigned c = 0; c < 64; c++)
        count[place(&f, c * 2654435761u, 1)]++;
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(count[i], i % 2 == 1 ? 16 : 0);
}

static void test_cpu_falls_back_to_any_worker_when_its_own_are_out(void **state)
{
    (void)state;
    fixture_t f;
    setup_state(&f, SWS_EBPF_CPU, 4, 2);
    f.s.w[1].down = 1;
    f.s.w[3].draining = 1;
    f.s.w[0].live = 5;
    assert_int_equal(sws_ebpf_pick(&f.s, 0, 1, NOW), 2);
    assert_int_equal(sws_ebpf_pick(&f.s, 0, 7, NOW), 2); /* a CPU with no worker */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eligible_excludes_stuck_draining_down_and_unstarted),
        cmocka_unit_test(test_load_counts_queued_connections_clamped),
        cmocka_unit_test(test_no_eligible_worker_leaves_it_to_the_kernel),
        cmocka_unit_test(test_hash_is_the_kernel_scaling_and_skips_excluded_slots),
        cmocka_unit_test(test_least_loaded_takes_the_fewest_connections),
        cmocka_unit_test(test_least_loaded_breaks_ties_by_busy_share_then_hash),
        cmocka_unit_test(test_least_loaded_spreads_one_at_a_time_and_a_burst_evenly),
        cmocka_unit_test(test_least_loaded_skips_a_stuck_worker_whatever_its_load),
        cmocka_unit_test(test_least_loaded_prefers_an_awake_worker_close_to_the_least),
        cmocka_unit_test(test_least_loaded_takes_the_lightest_of_the_awake),
        cmocka_unit_test(test_least_loaded_with_an_awake_worker_stays_within_the_placement_bound),
        cmocka_unit_test(test_fountain_fills_in_order_and_keeps_later_workers_empty),
        cmocka_unit_test(test_fountain_spills_over_within_a_burst),
        cmocka_unit_test(test_fountain_skips_a_busy_worker),
        cmocka_unit_test(test_fountain_when_all_are_full_takes_the_lightest),
        cmocka_unit_test(test_cpu_takes_the_worker_pinned_to_the_syn_cpu),
        cmocka_unit_test(test_cpu_with_more_workers_than_cpus_spreads_over_that_cpus_workers),
        cmocka_unit_test(test_cpu_falls_back_to_any_worker_when_its_own_are_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
