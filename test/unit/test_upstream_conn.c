/* worker/upstream_conn.c: address parsing and the round-robin stand-in.
 * The idle pool and the timers are exercised through the proxy, with real
 * upstream connections, in test_proxy.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "worker/upstream_conn.h"

static void test_parse_addr(void **state)
{
    (void)state;
    sws_upstream_addr_t a;
    char err[160];
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("127.0.0.1:8080"), &a, err, sizeof(err)), 0);
    assert_int_equal(a.sa.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&a.sa)->sin_port), 8080);
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("[::1]:80"), &a, err, sizeof(err)), 0);
    assert_int_equal(a.sa.ss_family, AF_INET6);
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("backend:80"), &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not an IP literal"));
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("127.0.0.1:0"), &a, err, sizeof(err)), -1);
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("127.0.0.1:65536"), &a, err, sizeof(err)), -1);
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("127.0.0.1"), &a, err, sizeof(err)), -1);
    assert_int_equal(sws_upstream_parse_addr(SWS_STR("::1:80"), &a, err, sizeof(err)), -1);
}

static void test_pick_round_robin_avoids_the_failed_member(void **state)
{
    (void)state;
    sws_upstream_set_t s = { 0 };
    uint8_t ok[3] = { 1, 0, 1 };
    assert_int_equal(sws_upstream_pick(&s, ok, 3, -1), 0);
    assert_int_equal(sws_upstream_pick(&s, ok, 3, -1), 2);
    assert_int_equal(sws_upstream_pick(&s, ok, 3, -1), 0);
    assert_int_equal(sws_upstream_pick(&s, ok, 3, 2), 0);
    assert_int_equal(sws_upstream_pick(&s, ok, 3, 0), 2);
    uint8_t one[2] = { 0, 1 };
    assert_int_equal(sws_upstream_pick(&s, one, 2, 1), 1); /* the only one left */
    uint8_t none[2] = { 0, 0 };
    assert_int_equal(sws_upstream_pick(&s, none, 2, -1), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_addr),
        cmocka_unit_test(test_pick_round_robin_avoids_the_failed_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
