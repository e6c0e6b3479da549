/* core/http_token.c: the table of known field names and their rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/http_token.h"

/* The table is well formed: each entry at its id, a lowercase token name,
 * found by its own name in any case. */
static void test_table_is_consistent(void **state)
{
    (void)state;
    for (unsigned i = 0; i < SWS_TK_COUNT; i++) {
        const sws_http_token_t *t = &sws_http_tokens[i];
        assert_int_equal(t->id, i);
        assert_true(t->name.len > 0);
        char upper[64];
        assert_true(t->name.len < sizeof(upper));
        for (size_t j = 0; j < t->name.len; j++) {
            unsigned char c = (unsigned char)t->name.p[j];
            assert_true(sws_is_tchar(c));
            assert_true((c >= 'a' && c <= 'z') || c == '-'); /* what the lookup's folding assumes */
            upper[j] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
        }
        assert_ptr_equal(sws_http_token_find(t->name.p, t->name.len), t);
        assert_ptr_equal(sws_http_token_find(upper, t->name.len), t);
    }
}

static void test_unknown_names_and_prefixes_are_not_found(void **state)
{
    (void)state;
    static const char *const other[] = { "", "h", "hos", "hostx", "x-host", "content-type",
                                         "connectio", "transfer-encodings", "te ", "t" };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        assert_null(sws_http_token_find(other[i], strlen(other[i])));
    /* Case folding is of letters only: CR is no '-', '@' no '`'. */
    assert_null(sws_http_token_find("keep\ralive", 10));
    assert_null(sws_http_token_find("Connectio\x0e", 10));
    /* Only the given bytes count: "hostname" cut to 4 is Host. */
    assert_int_equal(sws_http_token_find("hostname", 4)->id, SWS_TK_HOST);
}

/* Every byte value at every position of every name: a name is found only
 * with each byte its own or, for a letter, its capital (the lookup
 * compares eight bytes at a time by masks: no other byte may pass). */
static void test_a_name_is_found_only_by_its_letters_in_either_case(void **state)
{
    (void)state;
    for (unsigned i = 0; i < SWS_TK_COUNT; i++) {
        const sws_http_token_t *t = &sws_http_tokens[i];
        char name[64];
        memcpy(name, t->name.p, t->name.len);
        for (size_t j = 0; j < t->name.len; j++) {
            unsigned char own = (unsigned char)t->name.p[j];
            for (unsigned b = 0; b < 256; b++) {
                name[j] = (char)b;
                int same = b == own || (own >= 'a' && own <= 'z' && b == own - 32u);
                const sws_http_token_t *got = sws_http_token_find(name, t->name.len);
                if (same)
                    assert_ptr_equal(got, t);
                else
                    assert_true(got != t);
            }
            name[j] = (char)own;
        }
    }
}

/* The rules as data: what a proxy drops, what HTTP/2 refuses, what only
 * the protocol writes, what may appear once. */
static void test_flags(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned flags;
    } want[] = {
        { "Connection", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN | SWS_TKF_FRAMING },
        { "Transfer-Encoding", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN | SWS_TKF_FRAMING },
        { "Content-Length", SWS_TKF_SINGLE | SWS_TKF_FRAMING },
        { "Host", SWS_TKF_SINGLE },
        { "Keep-Alive", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN },
        { "Upgrade", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN },
        { "Proxy-Connection", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN },
        { "TE", SWS_TKF_HOP_BY_HOP },
        { "Expect", 0 },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const sws_http_token_t *t = sws_http_token_find(want[i].name, strlen(want[i].name));
        assert_non_null(t);
        assert_int_equal(t->flags, want[i].flags);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_is_consistent),
        cmocka_unit_test(test_unknown_names_and_prefixes_are_not_found),
        cmocka_unit_test(test_a_name_is_found_only_by_its_letters_in_either_case),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
