/* worker/server_tokens.c: the Server header value for each server_tokens,
 * with this binary's version and build id; a name that leaves no room for
 * them goes alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/version.h"
#include "proto/scalws.pb-c.h"
#include "worker/server_tokens.h"

static void assert_value(sws_str_t got, const char *want)
{
    if (got.len != strlen(want) || memcmp(got.p, want, got.len) != 0)
        print_error("got \"%.*s\", want \"%s\"\n", (int)got.len, got.p, want);
    assert_int_equal(got.len, strlen(want));
    assert_memory_equal(got.p, want, got.len);
}

static void test_off_is_the_name_itself(void **state)
{
    (void)state;
    char buf[SWS_SERVER_TOKENS_BUF];
    sws_str_t name = SWS_STR("scalws");
    sws_str_t got = sws_server_tokens_apply(name, SWS__SETTINGS__SERVER_TOKENS__OFF, buf,
                                            sizeof(buf));
    assert_ptr_equal(got.p, name.p);
    assert_value(got, "scalws");
}

static void test_on_adds_the_version(void **state)
{
    (void)state;
    char buf[SWS_SERVER_TOKENS_BUF];
    sws_str_t got = sws_server_tokens_apply(SWS_STR("edge"), SWS__SETTINGS__SERVER_TOKENS__ON,
                                            buf, sizeof(buf));
    assert_value(got, "edge/" SWS_VERSION);
}

static void test_build_adds_the_build_id(void **state)
{
    (void)state;
    char buf[SWS_SERVER_TOKENS_BUF], want[128];
    snprintf(want, sizeof(want), "edge/%s (%s)", SWS_VERSION, sws_build_id());
    sws_str_t got = sws_server_tokens_apply(SWS_STR("edge"), SWS__SETTINGS__SERVER_TOKENS__BUILD,
                                            buf, sizeof(buf));
    assert_value(got, want);
    assert_true(strlen(sws_build_id()) > 0);
}

/* server_header: false stays "no Server header" whatever the tokens. */
static void test_no_name_no_header(void **state)
{
    (void)state;
    char buf[SWS_SERVER_TOKENS_BUF];
    sws_str_t got = sws_server_tokens_apply(SWS_STR(""), SWS__SETTINGS__SERVER_TOKENS__BUILD,
                                            buf, sizeof(buf));
    assert_int_equal(got.len, 0);
}

static void test_too_long_goes_without_tokens(void **state)
{
    (void)state;
    char buf[8];
    sws_str_t name = SWS_STR("scalws");
    /* "scalws/0.1.0" needs 12 bytes: the name goes alone, never cut. */
    sws_str_t got = sws_server_tokens_apply(name, SWS__SETTINGS__SERVER_TOKENS__ON, buf,
                                            sizeof(buf));
    assert_ptr_equal(got.p, name.p);
    assert_value(got, "scalws");
    /* Exactly enough room is enough. */
    char exact[sizeof("scalws/" SWS_VERSION) - 1];
    got = sws_server_tokens_apply(name, SWS__SETTINGS__SERVER_TOKENS__ON, exact, sizeof(exact));
    assert_ptr_equal(got.p, exact);
    assert_value(got, "scalws/" SWS_VERSION);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_is_the_name_itself),
        cmocka_unit_test(test_on_adds_the_version),
        cmocka_unit_test(test_build_adds_the_build_id),
        cmocka_unit_test(test_no_name_no_header),
        cmocka_unit_test(test_too_long_goes_without_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
