/* worker/upstream_health.c: passive health with a fake clock (ms). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "worker/upstream_health.h"

static const sws_upstream_health_conf_t conf = {
    .max_fails = 3, .fail_window_ms = 10000, .cooldown_ms = 5000,
};

/* A member marked down at t: three failures at t - 2, t - 1, t. */
static sws_upstream_health_t down_at(uint64_t t)
{
    sws_upstream_health_t h = { 0 };
    for (uint64_t i = 0; i < 3; i++) {
        assert_false(sws_upstream_health_is_down(&h));
        sws_upstream_health_failure(&h, &conf, t - 2 + i);
    }
    assert_true(sws_upstream_health_is_down(&h));
    return h;
}

static void test_max_fails_in_window_mark_down_for_cooldown(void **state)
{
    (void)state;
    sws_upstream_health_t h = { 0 };
    assert_true(sws_upstream_health_available(&h, &conf, 0));
    sws_upstream_health_failure(&h, &conf, 1000);
    sws_upstream_health_failure(&h, &conf, 5000);
    assert_true(sws_upstream_health_available(&h, &conf, 5000));
    sws_upstream_health_failure(&h, &conf, 10999); /* 9,999 ms after the first */
    assert_true(sws_upstream_health_is_down(&h));
    assert_false(sws_upstream_health_available(&h, &conf, 10999));
    assert_false(sws_upstream_health_available(&h, &conf, 10999 + 4999));
    assert_true(sws_upstream_health_available(&h, &conf, 10999 + 5000));
    assert_int_equal(h.failures, 3);
}

/* Three failures, but never three within fail_window of the first. */
static void test_failures_spread_beyond_the_window_do_not(void **state)
{
    (void)state;
    sws_upstream_health_t h = { 0 };
    sws_upstream_health_failure(&h, &conf, 1000);
    sws_upstream_health_failure(&h, &conf, 2000);
    sws_upstream_health_failure(&h, &conf, 11000); /* a new window */
    sws_upstream_health_failure(&h, &conf, 12000);
    assert_false(sws_upstream_health_is_down(&h));
    sws_upstream_health_failure(&h, &conf, 20999);
    assert_true(sws_upstream_health_is_down(&h));
}

static void test_success_forgets_failures(void **state)
{
    (void)state;
    sws_upstream_health_t h = { 0 };
    sws_upstream_health_failure(&h, &conf, 1);
    sws_upstream_health_failure(&h, &conf, 2);
    sws_upstream_health_success(&h);
    sws_upstream_health_failure(&h, &conf, 3);
    sws_upstream_health_failure(&h, &conf, 4);
    assert_false(sws_upstream_health_is_down(&h));
    assert_true(sws_upstream_health_available(&h, &conf, 4));
    assert_int_equal(h.failures, 4);
}

static void test_zero_max_fails_never_marks_down(void **state)
{
    (void)state;
    const sws_upstream_health_conf_t never = { .max_fails = 0, .fail_window_ms = 10000,
                                               .cooldown_ms = 5000 };
    sws_upstream_health_t h = { 0 };
    for (uint64_t t = 0; t < 100; t++)
        sws_upstream_health_failure(&h, &never, t);
    assert_false(sws_upstream_health_is_down(&h));
    assert_true(sws_upstream_health_available(&h, &never, 100));
}

/* After the cooldown one request is the trial; no other goes there until
 * its verdict. Success: up again, with a clean count. */
static void test_one_trial_after_cooldown_success_brings_up(void **state)
{
    (void)state;
    sws_upstream_health_t h = down_at(1000);
    assert_true(sws_upstream_health_available(&h, &conf, 6000));
    sws_upstream_health_picked(&h, &conf, 6000);
    assert_false(sws_upstream_health_available(&h, &conf, 6000));
    assert_false(sws_upstream_health_available(&h, &conf, 10999));
    assert_true(sws_upstream_health_is_down(&h));
    sws_upstream_health_success(&h);
    assert_false(sws_upstream_health_is_down(&h));
    assert_true(sws_upstream_health_available(&h, &conf, 7000));
    sws_upstream_health_failure(&h, &conf, 7001);
    sws_upstream_health_failure(&h, &conf, 7002);
    assert_false(sws_upstream_health_is_down(&h));
}

static void test_failed_trial_marks_down_for_another_cooldown(void **state)
{
    (void)state;
    sws_upstream_health_t h = down_at(1000);
    sws_upstream_health_picked(&h, &conf, 6500);
    sws_upstream_health_failure(&h, &conf, 7000);
    assert_int_equal(h.state, SWS_UPSTREAM_HEALTH_DOWN);
    assert_false(sws_upstream_health_available(&h, &conf, 11999));
    assert_true(sws_upstream_health_available(&h, &conf, 12000));
}

/* A trial that never reports lets another request try a cooldown later. */
static void test_trial_without_verdict_allows_another_after_cooldown(void **state)
{
    (void)state;
    sws_upstream_health_t h = down_at(1000);
    sws_upstream_health_picked(&h, &conf, 6000);
    assert_false(sws_upstream_health_available(&h, &conf, 10999));
    assert_true(sws_upstream_health_available(&h, &conf, 11000));
    sws_upstream_health_picked(&h, &conf, 11000);
    assert_false(sws_upstream_health_available(&h, &conf, 11001));
}

/* Requests sent before the marking end while down: their failures do not
 * stretch the cooldown, their successes do not cut it short. */
static void test_reports_while_down_change_nothing(void **state)
{
    (void)state;
    sws_upstream_health_t h = down_at(1000);
    sws_upstream_health_failure(&h, &conf, 4000);
    sws_upstream_health_success(&h);
    assert_true(sws_upstream_health_is_down(&h));
    assert_false(sws_upstream_health_available(&h, &conf, 5999));
    assert_true(sws_upstream_health_available(&h, &conf, 6000));
    assert_int_equal(h.failures, 4);
    /* Picking while up or before the cooldown is over is no trial. */
    sws_upstream_health_t up = { 0 };
    sws_upstream_health_picked(&up, &conf, 1);
    assert_int_equal(up.state, SWS_UPSTREAM_HEALTH_UP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_fails_in_window_mark_down_for_cooldown),
        cmocka_unit_test(test_failures_spread_beyond_the_window_do_not),
        cmocka_unit_test(test_success_forgets_failures),
        cmocka_unit_test(test_zero_max_fails_never_marks_down),
        cmocka_unit_test(test_one_trial_after_cooldown_success_brings_up),
        cmocka_unit_test(test_failed_trial_marks_down_for_another_cooldown),
        cmocka_unit_test(test_trial_without_verdict_allows_another_after_cooldown),
        cmocka_unit_test(test_reports_while_down_change_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
