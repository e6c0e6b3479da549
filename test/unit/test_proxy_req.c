/* worker/proxy_req.c: the request head a proxy sends upstream. Its use on
 * a live connection (what an upstream reads) is in test_proxy.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "worker/proxy_req.h"

static void test_request_size_is_exact(void **state)
{
    (void)state;
    sws_request_t r = { 0 };
    r.method = SWS_STR("PUT");
    r.path = SWS_STR("/p");
    r.query = SWS_STR("a=b");
    r.host = SWS_STR("h");
    r.headers[0] = (sws_header_t){ SWS_STR("Transfer-Encoding"), SWS_STR("chunked") };
    r.headers[1] = (sws_header_t){ SWS_STR("connection"), SWS_STR(" ,x-a ,, X-B") };
    r.headers[2] = (sws_header_t){ SWS_STR("X-A"), SWS_STR("1") };
    r.headers[3] = (sws_header_t){ SWS_STR("x-b"), SWS_STR("2") };
    r.headers[4] = (sws_header_t){ SWS_STR("X-C"), SWS_STR("3") };
    r.headers[5] = (sws_header_t){ SWS_STR("Expect"), SWS_STR("100-continue") };
    r.nheaders = 6;
    sws_proxy_req_opts_t o = { .host_header = SWS_STR("backend.internal"),
                               .client_ip = SWS_STR("::1"), .tls = 1, .body_len = 7 };
    char out[1024];
    size_t n = sws_proxy_req_size(&r, &o);
    assert_true(n < sizeof(out));
    memset(out, 0, sizeof(out));
    assert_int_equal(sws_proxy_req_write(out, &r, &o), n);
    assert_int_equal(strlen(out), n);
    assert_string_equal(out, "PUT /p?a=b HTTP/1.1\r\nHost: backend.internal\r\nX-C: 3\r\n"
                             "X-Forwarded-For: ::1\r\nX-Forwarded-Proto: https\r\n"
                             "X-Forwarded-Host: h\r\nX-Real-IP: ::1\r\nContent-Length: 7\r\n\r\n");
    /* One walk: into the hinted room it fits; into less room nothing is
     * written past it and the length says how much is needed. */
    char one[1024];
    assert_true(sws_proxy_req_size_hint(&r, &o) >= n);
    assert_int_equal(sws_proxy_req_write_in(one, sws_proxy_req_size_hint(&r, &o), &r, &o), n);
    assert_memory_equal(one, out, n);
    memset(one, 'z', sizeof(one));
    assert_int_equal(sws_proxy_req_write_in(one, 10, &r, &o), n);
    assert_int_equal(one[10], 'z');
}

/* X-Forwarded-For carries every value the client's fields held, in
 * order, then the client; without a host_header the client's Host goes
 * on; a request without framing gets no Content-Length. */
static void test_forwarded_for_appends_and_host_passes(void **state)
{
    (void)state;
    sws_request_t r = { 0 };
    r.method = SWS_STR("GET");
    r.path = SWS_STR("/");
    r.host = SWS_STR("site:8080");
    r.headers[0] = (sws_header_t){ SWS_STR("Host"), SWS_STR("site:8080") };
    r.headers[1] = (sws_header_t){ SWS_STR("x-forwarded-for"), SWS_STR("1.1.1.1, 2.2.2.2") };
    r.headers[2] = (sws_header_t){ SWS_STR("X-Forwarded-For"), SWS_STR("3.3.3.3") };
    r.headers[3] = (sws_header_t){ SWS_STR("X-Forwarded-Proto"), SWS_STR("https") };
    r.nheaders = 4;
    sws_proxy_req_opts_t o = { .client_ip = SWS_STR("127.0.0.1") };
    char out[1024];
    out[sws_proxy_req_write(out, &r, &o)] = '\0';
    assert_string_equal(out, "GET / HTTP/1.1\r\nHost: site:8080\r\n"
                             "X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1\r\n"
                             "X-Forwarded-Proto: http\r\nX-Forwarded-Host: site:8080\r\n"
                             "X-Real-IP: 127.0.0.1\r\n\r\n");
}

/* A client naming X-Forwarded-For in Connection drops its own values,
 * not ours. */
static void test_forwarded_for_named_by_connection(void **state)
{
    (void)state;
    sws_request_t r = { 0 };
    r.method = SWS_STR("GET");
    r.path = SWS_STR("/");
    r.headers[0] = (sws_header_t){ SWS_STR("Connection"), SWS_STR("X-Forwarded-For") };
    r.headers[1] = (sws_header_t){ SWS_STR("X-Forwarded-For"), SWS_STR("9.9.9.9") };
    r.nheaders = 2;
    sws_proxy_req_opts_t o = { .client_ip = SWS_STR("::1") };
    char out[1024];
    out[sws_proxy_req_write(out, &r, &o)] = '\0';
    assert_null(strstr(out, "9.9.9.9"));
    assert_non_null(strstr(out, "\r\nX-Forwarded-For: ::1\r\n"));
}


/* An upgrade keeps its Upgrade and gets "Connection: upgrade", and only
 * those: what else the client's Connection names is still dropped; the
 * size stays exact with the expectation and Via added. */
static void test_upgrade_expect_and_via_fields(void **state)
{
    (void)state;
    sws_request_t r = { 0 };
    r.method = SWS_STR("GET");
    r.path = SWS_STR("/ws");
    r.version_major = r.version_minor = 1;
    r.headers[0] = (sws_header_t){ SWS_STR("Connection"), SWS_STR("keep-alive, Upgrade, X-Hop") };
    r.headers[1] = (sws_header_t){ SWS_STR("Upgrade"), SWS_STR("websocket") };
    r.headers[2] = (sws_header_t){ SWS_STR("X-Hop"), SWS_STR("1") };
    r.headers[3] = (sws_header_t){ SWS_STR("Via"), SWS_STR("1.0 fred") };
    r.headers[4] = (sws_header_t){ SWS_STR("Expect"), SWS_STR("100-continue") };
    r.headers[5] = (sws_header_t){ SWS_STR("via"), SWS_STR("1.1 p.example") };
    r.nheaders = 6;
    sws_proxy_req_opts_t o = { .client_ip = SWS_STR("::1") };
    assert_true(sws_proxy_req_upgrade(&r, &o.upgrade));
    assert_int_equal(o.upgrade.len, 9);
    o.expect_continue = 1;
    o.via = SWS_STR("scalws");
    char out[1024];
    size_t n = sws_proxy_req_size(&r, &o);
    memset(out, 0, sizeof(out));
    assert_int_equal(sws_proxy_req_write(out, &r, &o), n);
    assert_int_equal(strlen(out), n);
    /* No Host came: an empty one goes out (an HTTP/1.1 request needs one). */
    assert_string_equal(out, "GET /ws HTTP/1.1\r\nHost: \r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                             "Expect: 100-continue\r\nVia: 1.0 fred, 1.1 p.example, 1.1 scalws\r\n"
                             "X-Forwarded-For: ::1\r\nX-Forwarded-Proto: http\r\n"
                             "X-Real-IP: ::1\r\n\r\n");
    /* Without the options: no Upgrade, no Expect, the client's Via as it came. */
    sws_proxy_req_opts_t plain = { .client_ip = SWS_STR("::1") };
    out[sws_proxy_req_write(out, &r, &plain)] = '\0';
    assert_null(strstr(out, "pgrade"));
    assert_null(strstr(out, "Expect"));
    assert_non_null(strstr(out, "\r\nVia: 1.0 fred\r\nvia: 1.1 p.example\r\n"));
}

/* Which requests are tunnelled: HTTP/1.1, Upgrade, "upgrade" among the
 * Connection tokens, not h2c. */
static void test_which_upgrades_are_tunnelled(void **state)
{
    (void)state;
    sws_request_t r = { 0 };
    sws_str_t proto;
    r.version_major = r.version_minor = 1;
    r.headers[0] = (sws_header_t){ SWS_STR("Upgrade"), SWS_STR("echo") };
    r.nheaders = 1;
    assert_false(sws_proxy_req_upgrade(&r, &proto)); /* no Connection: upgrade */
    r.headers[1] = (sws_header_t){ SWS_STR("Connection"), SWS_STR("UPGRADE") };
    r.nheaders = 2;
    assert_true(sws_proxy_req_upgrade(&r, &proto));
    r.version_minor = 0;
    assert_false(sws_proxy_req_upgrade(&r, &proto));
    r.version_minor = 1;
    r.headers[0].value = SWS_STR("H2C");
    assert_false(sws_proxy_req_upgrade(&r, &proto));
}

/* The tokens of several Connection fields, gathered once, name what the
 * fields name; with more tokens than the array holds, every one still
 * counts (the fields are asked). */
static void test_connection_tokens_gathered_once(void **state)
{
    (void)state;
    sws_header_t h[3] = {
        { SWS_STR("Connection"), SWS_STR("keep-alive, X-One") },
        { SWS_STR("X-One"), SWS_STR("1") },
        { SWS_STR("connection"), SWS_STR(" x-two ,") },
    };
    sws_proxy_conn_tokens_t ct;
    sws_proxy_conn_tokens_init(&ct, h, 3);
    assert_true(sws_proxy_conn_tokens_name(&ct, SWS_STR("x-one")));
    assert_true(sws_proxy_conn_tokens_name(&ct, SWS_STR("X-TWO")));
    assert_true(sws_proxy_conn_tokens_name(&ct, SWS_STR("Keep-Alive")));
    assert_false(sws_proxy_conn_tokens_name(&ct, SWS_STR("x-on")));
    assert_false(sws_proxy_conn_tokens_name(&ct, SWS_STR("connection")));

    /* Tokens t0 ... t19: more than SWS_PROXY_CONN_TOKENS. */
    char many[256] = "";
    for (int i = 0; i < SWS_PROXY_CONN_TOKENS + 4; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%st%d", i ? "," : "", i);
    sws_header_t m[1] = { { SWS_STR("Connection"), { many, strlen(many) } } };
    sws_proxy_conn_tokens_init(&ct, m, 1);
    assert_true(sws_proxy_conn_tokens_name(&ct, SWS_STR("t0")));
    assert_true(sws_proxy_conn_tokens_name(&ct, SWS_STR("t19")));
    assert_false(sws_proxy_conn_tokens_name(&ct, SWS_STR("t20")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_size_is_exact),
        cmocka_unit_test(test_forwarded_for_appends_and_host_passes),
        cmocka_unit_test(test_forwarded_for_named_by_connection),
        cmocka_unit_test(test_upgrade_expect_and_via_fields),
        cmocka_unit_test(test_which_upgrades_are_tunnelled),
        cmocka_unit_test(test_connection_tokens_gathered_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
