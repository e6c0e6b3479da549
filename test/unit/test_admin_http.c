/* supervisor/admin_http.c: one admin request through llhttp, fed whole
 * and byte by byte, and each bound answered with its status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/admin_http.h"

static sws_admin_req_state_t feed_all(sws_admin_req_t *r, const char *text, size_t n, int bytewise)
{
    sws_admin_req_init(r);
    if (!bytewise)
        return sws_admin_req_feed(r, text, n);
    sws_admin_req_state_t st = SWS_ADMIN_REQ_MORE;
    for (size_t i = 0; i < n && st == SWS_ADMIN_REQ_MORE; i++)
        st = sws_admin_req_feed(r, text + i, 1);
    return st;
}

static void test_put_with_body_whole_and_bytewise(void **state)
{
    (void)state;
    static const char req[] = "PUT /v1/pools/a/members/127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n"
                              "Content-Length: 13\r\n\r\n{\"weight\": 2}GET / HTTP/1.1\r\n";
    static sws_admin_req_t r;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        assert_int_equal(feed_all(&r, req, sizeof(req) - 1, bytewise), SWS_ADMIN_REQ_DONE);
        assert_string_equal(r.method, "PUT");
        assert_string_equal(r.target, "/v1/pools/a/members/127.0.0.1:1");
        assert_int_equal(r.body_len, 13);
        assert_memory_equal(r.body, "{\"weight\": 2}", 13);
    }
    /* What follows the first request is ignored. */
    assert_int_equal(sws_admin_req_feed(&r, "x", 1), SWS_ADMIN_REQ_DONE);
}

static void test_chunked_body(void **state)
{
    (void)state;
    static const char req[] = "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "3\r\n{\"a\r\n5\r\n\": 1}\r\n0\r\n\r\n";
    static sws_admin_req_t r;
    assert_int_equal(feed_all(&r, req, sizeof(req) - 1, 1), SWS_ADMIN_REQ_DONE);
    assert_int_equal(r.body_len, 8);
    assert_memory_equal(r.body, "{\"a\": 1}", 8);
}

static void refused(const char *req, size_t n, unsigned status)
{
    static sws_admin_req_t r;
    assert_int_equal(feed_all(&r, req, n, 0), SWS_ADMIN_REQ_ERROR);
    assert_int_equal(r.status, status);
    assert_non_null(r.why);
}

static void test_bounds_and_bad_requests(void **state)
{
    (void)state;
    char *big = malloc(SWS_ADMIN_MAX_REQUEST + 64);
    assert_non_null(big);
    refused("GARBAGE\r\n\r\n", 11, 400);

    int n = snprintf(big, 256, "PUT /x HTTP/1.1\r\nContent-Length: %u\r\n\r\n",
                     SWS_ADMIN_MAX_BODY + 1);
    refused(big, (size_t)n, 413);

    n = snprintf(big, 64, "GET /");
    memset(big + n, 'a', SWS_ADMIN_MAX_TARGET);
    refused(big, (size_t)n + SWS_ADMIN_MAX_TARGET, 414);

    /* A head that never ends is cut at the request bound. */
    n = snprintf(big, 64, "GET / HTTP/1.1\r\n");
    for (size_t i = (size_t)n; i + 8 <= SWS_ADMIN_MAX_REQUEST + 8; i += 8)
        memcpy(big + i, "X-A: b\r\n", 8);
    refused(big, SWS_ADMIN_MAX_REQUEST + 8, 413);
    free(big);

    /* A chunked body past the bound. */
    static sws_admin_req_t r;
    static const char head[] = "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    char chunk[1100];
    int cn = snprintf(chunk, sizeof(chunk), "400\r\n");
    memset(chunk + cn, 'x', 1024);
    memcpy(chunk + cn + 1024, "\r\n", 2);
    sws_admin_req_init(&r);
    sws_admin_req_state_t st = sws_admin_req_feed(&r, head, sizeof(head) - 1);
    for (int i = 0; i < 5 && st == SWS_ADMIN_REQ_MORE; i++)
        st = sws_admin_req_feed(&r, chunk, (size_t)cn + 1026);
    assert_int_equal(st, SWS_ADMIN_REQ_ERROR);
    assert_int_equal(r.status, 413);
}

static void test_eof_before_the_end_is_an_error(void **state)
{
    (void)state;
    static sws_admin_req_t r;
    static const char req[] = "PUT /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nab";
    assert_int_equal(feed_all(&r, req, sizeof(req) - 1, 0), SWS_ADMIN_REQ_MORE);
    assert_int_equal(sws_admin_req_eof(&r), SWS_ADMIN_REQ_ERROR);
    assert_int_equal(r.status, 400);
}

static void test_authorization_is_kept_whole_and_bytewise(void **state)
{
    (void)state;
    static const char req[] = "GET /v1/pools HTTP/1.1\r\nHost: x\r\nX-Authorization: no\r\n"
                              "AUTHORIZATION:  Bearer abc \r\nAuthorizationX: no\r\n"
                              "Authorizatio: no\r\n\r\n";
    static sws_admin_req_t r;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        assert_int_equal(feed_all(&r, req, sizeof(req) - 1, bytewise), SWS_ADMIN_REQ_DONE);
        assert_true(r.has_authorization);
        /* llhttp drops the leading spaces; the check drops the trailing. */
        assert_int_equal(r.authorization_len, 11);
        assert_memory_equal(r.authorization, "Bearer abc ", 11);
    }
    static const char none[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(feed_all(&r, none, sizeof(none) - 1, 0), SWS_ADMIN_REQ_DONE);
    assert_false(r.has_authorization);
    static const char empty[] = "GET / HTTP/1.1\r\nAuthorization:\r\n\r\n";
    assert_int_equal(feed_all(&r, empty, sizeof(empty) - 1, 0), SWS_ADMIN_REQ_DONE);
    assert_true(r.has_authorization);
    assert_int_equal(r.authorization_len, 0);
}

static void test_authorization_twice_too_long_or_in_a_trailer(void **state)
{
    (void)state;
    static const char twice[] = "GET / HTTP/1.1\r\nAuthorization: Bearer a\r\n"
                                "authorization: Bearer b\r\n\r\n";
    refused(twice, sizeof(twice) - 1, 400);

    char big[SWS_ADMIN_MAX_AUTHORIZATION + 128];
    int n = snprintf(big, 64, "GET / HTTP/1.1\r\nAuthorization: Bearer ");
    memset(big + n, 'a', SWS_ADMIN_MAX_AUTHORIZATION);
    memcpy(big + n + SWS_ADMIN_MAX_AUTHORIZATION, "\r\n\r\n", 4);
    refused(big, (size_t)n + SWS_ADMIN_MAX_AUTHORIZATION + 4, 431);

    static const char trailer[] = "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                  "2\r\n{}\r\n0\r\nAuthorization: Bearer a\r\n\r\n";
    static sws_admin_req_t r;
    assert_int_equal(feed_all(&r, trailer, sizeof(trailer) - 1, 0), SWS_ADMIN_REQ_DONE);
    assert_false(r.has_authorization);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_with_body_whole_and_bytewise),
        cmocka_unit_test(test_chunked_body),
        cmocka_unit_test(test_bounds_and_bad_requests),
        cmocka_unit_test(test_eof_before_the_end_is_an_error),
        cmocka_unit_test(test_authorization_is_kept_whole_and_bytewise),
        cmocka_unit_test(test_authorization_twice_too_long_or_in_a_trailer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
