/* supervisor/resolve.c: member names into addresses. getaddrinfo is only
 * asked about "localhost" (/etc/hosts); the rest is the pure collection
 * of an answer built here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/resolve.h"

typedef struct answer {
    struct addrinfo ai[40];
    struct sockaddr_in v4[40];
    struct sockaddr_in6 v6[40];
    size_t n;
} answer_t;

/* Append an address to the answer (text: an IPv4 or IPv6 literal). */
static void add(answer_t *a, const char *text)
{
    struct addrinfo *ai = &a->ai[a->n];
    memset(ai, 0, sizeof(*ai));
    if (strchr(text, ':') != NULL) {
        a->v6[a->n].sin6_family = AF_INET6;
        assert_int_equal(inet_pton(AF_INET6, text, &a->v6[a->n].sin6_addr), 1);
        ai->ai_family = AF_INET6;
        ai->ai_addr = (struct sockaddr *)&a->v6[a->n];
    } else {
        a->v4[a->n].sin_family = AF_INET;
        assert_int_equal(inet_pton(AF_INET, text, &a->v4[a->n].sin_addr), 1);
        ai->ai_family = AF_INET;
        ai->ai_addr = (struct sockaddr *)&a->v4[a->n];
    }
    if (a->n > 0)
        a->ai[a->n - 1].ai_next = ai;
    a->n++;
}

static void test_collect_sorts_dedups_and_formats(void **state)
{
    (void)state;
    answer_t a = { 0 };
    sws_resolved_t r;
    /* As getaddrinfo answers for SOCK_STREAM over /etc/hosts and DNS:
     * mixed families, the same address more than once. */
    add(&a, "::1");
    add(&a, "10.0.0.2");
    add(&a, "10.0.0.1");
    add(&a, "10.0.0.2");
    add(&a, "fd00::1");
    sws_resolve_collect(a.ai, 8080, &r);
    assert_int_equal(r.n, 4);
    assert_string_equal(r.addr[0], "10.0.0.1:8080");
    assert_string_equal(r.addr[1], "10.0.0.2:8080");
    assert_string_equal(r.addr[2], "[::1]:8080");
    assert_string_equal(r.addr[3], "[fd00::1]:8080");
    sws_resolve_collect(NULL, 80, &r);
    assert_int_equal(r.n, 0);
}

static void test_collect_keeps_at_most_the_limit(void **state)
{
    (void)state;
    answer_t a = { 0 };
    sws_resolved_t r;
    for (int i = 39; i >= 0; i--) {
        char ip[16];
        snprintf(ip, sizeof(ip), "10.0.1.%d", i);
        add(&a, ip);
    }
    sws_resolve_collect(a.ai, 1, &r);
    assert_int_equal(r.n, SWS_ROUTESET_RESOLVED_MAX);
    assert_string_equal(r.addr[0], "10.0.1.0:1");
    assert_string_equal(r.addr[SWS_ROUTESET_RESOLVED_MAX - 1], "10.0.1.31:1");
}

static void test_localhost_resolves_and_invalid_is_never_looked_up(void **state)
{
    (void)state;
    sws_routeset_addr_t name;
    sws_resolved_t r;
    char err[256];
    assert_null(sws_routeset_address_problem("localhost:8080", 1, &name));
    assert_int_equal(sws_resolve_member(&name, &r, err, sizeof(err)), 0);
    assert_true(r.n >= 1);
    for (size_t i = 0; i < r.n; i++)
        assert_true(strcmp(r.addr[i], "127.0.0.1:8080") == 0 ||
                    strcmp(r.addr[i], "[::1]:8080") == 0);

    static const char *const invalid[] = { "nonexistent.invalid:80", "A.INVALID.:80",
                                           "invalid:80" };
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        assert_null(sws_routeset_address_problem(invalid[i], 1, &name));
        assert_int_equal(sws_resolve_member(&name, &r, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "never does"));
        assert_int_equal(r.n, 0);
    }
}

static void test_fill_replaces_the_members_list(void **state)
{
    (void)state;
    Sws__Member m = SWS__MEMBER__INIT;
    sws_resolved_t r = { .n = 2 };
    snprintf(r.addr[0], sizeof(r.addr[0]), "10.0.0.1:80");
    snprintf(r.addr[1], sizeof(r.addr[1]), "[::1]:80");
    assert_int_equal(sws_resolve_fill(&m, &r), 0);
    assert_int_equal(m.n_resolved, 2);
    assert_string_equal(m.resolved[1], "[::1]:80");
    assert_int_equal(sws_resolve_bytes(&r), 2 * sizeof(char *) + 12 + 9);
    r.n = 1;
    assert_int_equal(sws_resolve_fill(&m, &r), 0);
    assert_int_equal(m.n_resolved, 1);
    assert_string_equal(m.resolved[0], "10.0.0.1:80");
    free(m.resolved[0]);
    free(m.resolved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collect_sorts_dedups_and_formats),
        cmocka_unit_test(test_collect_keeps_at_most_the_limit),
        cmocka_unit_test(test_localhost_resolves_and_invalid_is_never_looked_up),
        cmocka_unit_test(test_fill_replaces_the_members_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
