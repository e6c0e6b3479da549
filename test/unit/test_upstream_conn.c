/* worker/upstream_conn.c: address parsing.
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_addr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
