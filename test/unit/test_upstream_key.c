/* worker/upstream_key.c: hash_key specs, cookie values, a request's key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "shm/routeset_check.h"
#include "worker/upstream_key.h"

#define S(lit) SWS_STR(lit)

static void assert_str(sws_str_t got, const char *want)
{
    if (got.len != strlen(want) || memcmp(got.p, want, got.len) != 0)
        fail_msg("got \"%.*s\", want \"%s\"", (int)got.len, got.p, want);
}

/* The key as the proxy makes it: the checker's parse of the spec (the
 * table's hash_kind and hash_name), whose kinds are the key's. */
static sws_upstream_key_t key_of(const char *spec)
{
    unsigned kind = 0;
    const char *name = NULL;
    assert_null(sws_routeset_hash_key_problem(spec, &kind, &name));
    return (sws_upstream_key_t){ .kind = (uint8_t)kind, .name = { name, strlen(name) } };
}

static void test_checker_kinds_are_the_keys(void **state)
{
    (void)state;
    sws_upstream_key_t k = key_of("client_ip");
    assert_int_equal(k.kind, SWS_UPSTREAM_KEY_CLIENT_IP);
    assert_int_equal(k.name.len, 0);
    k = key_of("header:X-User-Id");
    assert_int_equal(k.kind, SWS_UPSTREAM_KEY_HEADER);
    assert_str(k.name, "X-User-Id");
    k = key_of("cookie:session_id");
    assert_int_equal(k.kind, SWS_UPSTREAM_KEY_COOKIE);
    assert_str(k.name, "session_id");
}

static void expect_cookie(const char *header, const char *name, const char *want)
{
    sws_str_t v = { NULL, 0 };
    int found = sws_upstream_cookie_value((sws_str_t){ header, strlen(header) },
                                          (sws_str_t){ name, strlen(name) }, &v);
    if (want == NULL) {
        if (found)
            fail_msg("\"%s\" in \"%s\": found \"%.*s\", want none", name, header, (int)v.len, v.p);
        return;
    }
    if (!found)
        fail_msg("\"%s\" in \"%s\": not found, want \"%s\"", name, header, want);
    assert_str(v, want);
    assert_true(v.p >= header && v.p + v.len <= header + strlen(header));
}

static void test_cookie_value(void **state)
{
    (void)state;
    expect_cookie("a=1; b=2", "b", "2");
    expect_cookie("a=1; b=2", "a", "1");
    expect_cookie("b=2", "b", "2");
    expect_cookie("  b =\t2 ; c=3", "b", "2");     /* whitespace around is not part */
    expect_cookie("ab=1; b=2", "b", "2");          /* a name is whole, not a suffix */
    expect_cookie("bb=1; b=2", "b", "2");
    expect_cookie("b2=1", "b", NULL);              /* nor a prefix */
    expect_cookie("a=1;b=2;b=3", "b", "2");        /* the first */
    expect_cookie("flag; b=5", "b", "5");          /* a pair without '=' is skipped */
    expect_cookie("b; a=1", "b", NULL);
    expect_cookie("b=x=y", "b", "x=y");            /* only the first '=' splits */
    expect_cookie("b=\"q v\"", "b", "\"q v\"");    /* quotes are the value's */
    expect_cookie("b=; a=1", "b", "");             /* present, empty */
    expect_cookie("B=1", "b", NULL);               /* names are case-sensitive */
    expect_cookie("a=1; b=2;", "b", "2");
    expect_cookie("a=b", "b", NULL);               /* a value is not a name */
    expect_cookie("", "b", NULL);
    expect_cookie(";;;", "b", NULL);
    expect_cookie("=b", "b", NULL);
}

static const sws_header_t headers[] = {
    { S("Host"), S("example.com") },
    { S("x-user"), S("alice") },
    { S("Cookie"), S("theme=dark; lang=en") },
    { S("X-User"), S("bob") },
    { S("cookie"), S("sid=abc123; empty=") },
    { S("X-Empty"), S("") },
};
#define NHEADERS (sizeof(headers) / sizeof(headers[0]))

static int get(const char *spec, sws_str_t client, sws_str_t *out)
{
    sws_upstream_key_t k = key_of(spec);
    return sws_upstream_key_get(&k, headers, NHEADERS, client, out);
}

static void test_key_of_a_request(void **state)
{
    (void)state;
    sws_str_t out;
    const sws_str_t none = { "", 0 };
    assert_true(get("header:X-USER", none, &out));
    assert_str(out, "alice"); /* any case, the first field */
    assert_true(get("cookie:lang", none, &out));
    assert_str(out, "en");
    assert_true(get("cookie:sid", none, &out)); /* in the second Cookie field */
    assert_str(out, "abc123");
    assert_false(get("header:X-Missing", none, &out));
    assert_false(get("header:X-Empty", none, &out));
    assert_false(get("cookie:missing", none, &out));
    assert_false(get("cookie:empty", none, &out));
    assert_false(get("cookie:Host", none, &out)); /* a header is not a cookie */
}

static void test_client_ip_key_is_the_address(void **state)
{
    (void)state;
    static const unsigned char v4[4] = { 192, 0, 2, 7 };
    static const unsigned char mapped[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
                                              192, 0, 2, 7 };
    static const unsigned char v6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                          0, 0, 0xff, 0xff, 192, 0, 2, 7 };
    sws_str_t out;
    assert_true(get("client_ip", (sws_str_t){ (const char *)v4, 4 }, &out));
    assert_int_equal(out.len, 4);
    assert_memory_equal(out.p, v4, 4);
    assert_true(get("client_ip", (sws_str_t){ (const char *)mapped, 16 }, &out));
    assert_int_equal(out.len, 4); /* the same key as over IPv4 */
    assert_memory_equal(out.p, v4, 4);
    assert_true(get("client_ip", (sws_str_t){ (const char *)v6, 16 }, &out));
    assert_int_equal(out.len, 16);
    assert_false(get("client_ip", (sws_str_t){ "", 0 }, &out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_kinds_are_the_keys),
        cmocka_unit_test(test_cookie_value),
        cmocka_unit_test(test_key_of_a_request),
        cmocka_unit_test(test_client_ip_key_is_the_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
