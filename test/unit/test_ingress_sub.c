/* supervisor/ingress_sub.c: the clone pattern's rule, without sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "supervisor/ingress_sub.h"

#define SNAP SWS__INGRESS_MESSAGE__BODY_SNAPSHOT
#define DELTA SWS__INGRESS_MESSAGE__BODY_DELTA
#define BEAT SWS__INGRESS_MESSAGE__BODY_HEARTBEAT

static const sws_ingress_seq_t waiting = { 0, 0, 0 };
static const sws_ingress_seq_t at7 = { 1, 7, 0xabc };

static void test_first_snapshot_applies_and_deltas_wait_for_it(void **state)
{
    (void)state;
    assert_int_equal(sws_ingress_judge(&waiting, SNAP, 7, 0xabc), SWS_INGRESS_APPLY);
    assert_int_equal(sws_ingress_judge(&waiting, DELTA, 8, 0xabc), SWS_INGRESS_QUEUE);
    assert_int_equal(sws_ingress_judge(&waiting, BEAT, 8, 0xabc), SWS_INGRESS_IGNORE);
}

static void test_next_delta_applies_old_ones_are_ignored(void **state)
{
    (void)state;
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 8, 0xabc), SWS_INGRESS_APPLY);
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 7, 0xabc), SWS_INGRESS_IGNORE);
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 3, 0xabc), SWS_INGRESS_IGNORE);
    assert_int_equal(sws_ingress_judge(&at7, BEAT, 7, 0xabc), SWS_INGRESS_IGNORE);
    /* A second answer to a request sent twice. */
    assert_int_equal(sws_ingress_judge(&at7, SNAP, 7, 0xabc), SWS_INGRESS_IGNORE);
    assert_int_equal(sws_ingress_judge(&at7, SNAP, 9, 0xabc), SWS_INGRESS_APPLY);
}

static void test_gap_seen_in_a_delta_or_a_heartbeat(void **state)
{
    (void)state;
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 9, 0xabc), SWS_INGRESS_GAP);
    /* The delta that would have said so was lost: the heartbeat tells. */
    assert_int_equal(sws_ingress_judge(&at7, BEAT, 8, 0xabc), SWS_INGRESS_GAP);
}

static void test_new_publisher_is_a_restart(void **state)
{
    (void)state;
    /* Its numbers start again: 1 is not "old news" from a new publisher. */
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 1, 0xdef), SWS_INGRESS_RESTART);
    assert_int_equal(sws_ingress_judge(&at7, DELTA, 8, 0xdef), SWS_INGRESS_RESTART);
    assert_int_equal(sws_ingress_judge(&at7, BEAT, 0, 0xdef), SWS_INGRESS_RESTART);
    assert_int_equal(sws_ingress_judge(&at7, SNAP, 1, 0xdef), SWS_INGRESS_APPLY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_snapshot_applies_and_deltas_wait_for_it),
        cmocka_unit_test(test_next_delta_applies_old_ones_are_ignored),
        cmocka_unit_test(test_gap_seen_in_a_delta_or_a_heartbeat),
        cmocka_unit_test(test_new_publisher_is_a_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
