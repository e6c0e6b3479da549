/* core/path.c: the normalized request path (docs/adr/0006) as a table of
 * cases, the no-copy promise for paths already normal, and the decoding of
 * a normal path into a file name for the static action. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/path.h"

#define BAD NULL /* the expected normal form of a refused path */

typedef struct path_case {
    const char *in;
    const char *want; /* BAD: refused (400) */
} path_case_t;

static const path_case_t cases[] = {
    /* already normal: kept as is */
    { "/", "/" },
    { "/a/b.txt", "/a/b.txt" },
    { "/dir/", "/dir/" },
    { "/.well-known/x", "/.well-known/x" },
    { "/.../..a/a../.a", "/.../..a/a../.a" },
    { "/a;b=c,d:e@f!$&'()*+", "/a;b=c,d:e@f!$&'()*+" },
    { "/a%20b%2Bc", "/a%20b%2Bc" },
    { "/a%2Fb", "/a%2Fb" },
    /* unreserved characters decoded, whatever the case of the hex */
    { "/%70rivate/secret.txt", "/private/secret.txt" },
    { "/%50RIVATE", "/PRIVATE" },
    { "/%7euser/%7E", "/~user/~" },
    { "/%41%5a%61%7a%30%39%2d%2e%5f", "/AZaz09-._" },
    /* every other %XX kept, with uppercase hex */
    { "/a%2fb", "/a%2Fb" },
    { "/private%2fsecret.txt", "/private%2Fsecret.txt" },
    { "/%c3%a9t%C3%A9", "/%C3%A9t%C3%A9" },
    { "/%3b%3A%40%25%3f%23", "/%3B%3A%40%25%3F%23" },
    { "/%0a%1B%7f", "/%0A%1B%7F" },
    /* raw bytes a URI may not hold: encoded, one spelling with %XX */
    { "/caf\xc3\xa9", "/caf%C3%A9" },
    { "/a|b\\c^d`e{f}g\"h<i>j[k]", "/a%7Cb%5Cc%5Ed%60e%7Bf%7Dg%22h%3Ci%3Ej%5Bk%5D" },
    /* "//" merged */
    { "//", "/" },
    { "//private/secret.txt", "/private/secret.txt" },
    { "/a//b///c/", "/a/b/c/" },
    { "/a//", "/a/" },
    /* dot segments resolved, encoded or not */
    { "/.", "/" },
    { "/./", "/" },
    { "/./private/secret.txt", "/private/secret.txt" },
    { "/x/../private/secret.txt", "/private/secret.txt" },
    { "/a/b/..", "/a/" },
    { "/a/b/../", "/a/" },
    { "/a/./b/.", "/a/b/" },
    { "/a/b/../../c", "/c" },
    { "/a/%2e/b/%2E%2e/c", "/a/c" },
    { "/x/.%2E/private/", "/private/" },
    { "/a/..b/c..", "/a/..b/c.." },
    { "/a//..//b", "/b" },
    { "/a/%2e%2e%2fb", "/a/..%2Fb" }, /* %2F is no separator: one segment */
    /* refused */
    { "/..", BAD },
    { "/../", BAD },
    { "/%2e%2e/", BAD },
    { "/%2E%2E/secret.txt", BAD },
    { "/a/../..", BAD },
    { "/a/../../b", BAD },
    { "/./..", BAD },
    { "/a%00.html", BAD },
    { "/a%", BAD },
    { "/a%2", BAD },
    { "/a%zz", BAD },
    { "/a%g0", BAD },
    { "/a%%41", BAD },
    { "/a b", BAD },
    { "/a\tb", BAD },
    { "/a\x7f", BAD },
    { "/a\x01", BAD },
    { "/a#frag", BAD },
    { "", BAD },
    { "a/b", BAD },
    { "*", BAD },
};

/* Normalize in (its length given, so NUL can be inside), with room. */
static sws_path_rc_t normalize(const char *in, size_t len, char *out, size_t outsize,
                               sws_str_t *res, const char **why)
{
    return sws_path_normalize((sws_str_t){ in, len }, out, outsize, res, why);
}

static void test_table_of_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const path_case_t *c = &cases[i];
        char out[256];
        sws_str_t res = { NULL, 0 };
        const char *why = NULL;
        sws_path_rc_t rc = normalize(c->in, strlen(c->in), out, sizeof(out), &res, &why);
        if (c->want == BAD) {
            if (rc != SWS_PATH_BAD)
                fail_msg("\"%s\": not refused (rc %d, \"%.*s\")", c->in, (int)rc, (int)res.len,
                         res.p);
            if (why == NULL || why[0] == '\0')
                fail_msg("\"%s\": refused without a reason", c->in);
            continue;
        }
        if (rc != SWS_PATH_NORMAL && rc != SWS_PATH_CHANGED)
            fail_msg("\"%s\": rc %d (%s), want \"%s\"", c->in, (int)rc, why ? why : "", c->want);
        if (res.len != strlen(c->want) || memcmp(res.p, c->want, res.len) != 0)
            fail_msg("\"%s\": got \"%.*s\", want \"%s\"", c->in, (int)res.len, res.p, c->want);
        if ((rc == SWS_PATH_NORMAL) != (strcmp(c->in, c->want) == 0))
            fail_msg("\"%s\": rc %d does not say whether it changed", c->in, (int)rc);
    }
}

static void test_normal_form_is_a_fixed_point(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cases[i].want == BAD)
            continue;
        sws_str_t res;
        const char *why;
        const char *w = cases[i].want;
        if (normalize(w, strlen(w), NULL, 0, &res, &why) != SWS_PATH_NORMAL)
            fail_msg("\"%s\" (from \"%s\") is not normal itself", w, cases[i].in);
    }
}

static void test_normal_path_is_not_copied(void **state)
{
    (void)state;
    static const char in[] = "/static/css/site.css";
    sws_str_t res;
    const char *why;
    /* No room given: a normal path needs none and comes back as itself. */
    assert_int_equal(normalize(in, sizeof(in) - 1, NULL, 0, &res, &why), SWS_PATH_NORMAL);
    assert_ptr_equal(res.p, in);
    assert_int_equal(res.len, sizeof(in) - 1);
}

static void test_room_asked_only_when_the_path_changes(void **state)
{
    (void)state;
    sws_str_t res;
    const char *why;
    char small[8];
    assert_int_equal(normalize("//a", 3, NULL, 0, &res, &why), SWS_PATH_NEED_ROOM);
    assert_int_equal(normalize("/%41", 4, NULL, 0, &res, &why), SWS_PATH_NEED_ROOM);
    /* Room below SWS_PATH_OUT_MAX is no room: the output cannot overflow. */
    assert_int_equal(normalize("/a|b", 4, small, 4, &res, &why), SWS_PATH_NEED_ROOM);
    assert_int_equal(normalize("/a|b", 4, small, SWS_PATH_OUT_MAX(4), &res, &why),
                     SWS_PATH_CHANGED);
    assert_ptr_equal(res.p, small);
    /* Only dropping a dot segment at the end: a prefix of the input. */
    static const char dot[] = "/a/.";
    assert_int_equal(normalize(dot, 4, NULL, 0, &res, &why), SWS_PATH_CHANGED);
    assert_ptr_equal(res.p, dot);
    assert_int_equal(res.len, 3);
}

static void test_raw_nul_refused(void **state)
{
    (void)state;
    char out[16];
    sws_str_t res;
    const char *why = NULL;
    assert_int_equal(normalize("/a\0b", 4, out, sizeof(out), &res, &why), SWS_PATH_BAD);
    assert_non_null(why);
}

/* ---- decoding for the static action ---- */

static sws_path_decode_rc_t decode(const char *path, char *out, size_t outsize)
{
    size_t len = (size_t)-1;
    sws_path_decode_rc_t rc = sws_path_decode((sws_str_t){ path, strlen(path) }, out, outsize,
                                              &len);
    if (rc == SWS_PATH_DECODE_OK)
        assert_int_equal(len, strlen(out));
    return rc;
}

static void assert_decodes(const char *path, const char *want)
{
    char out[256];
    if (decode(path, out, sizeof(out)) != SWS_PATH_DECODE_OK)
        fail_msg("\"%s\": not decoded", path);
    assert_string_equal(out, want);
}

static void test_decode_gives_a_relative_name(void **state)
{
    (void)state;
    assert_decodes("/", "");
    assert_decodes("/a/b.txt", "a/b.txt");
    assert_decodes("/docs/", "docs/");
    assert_decodes("/a%20b%2Bc", "a b+c");
    assert_decodes("/~user/%C3%A9", "~user/\xc3\xa9");
    assert_decodes("/back%5Cslash", "back\\slash");
    assert_decodes("/100%25", "100%");
}

static void test_decode_refuses_an_encoded_slash(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(decode("/private%2Fsecret.txt", out, sizeof(out)), SWS_PATH_DECODE_SLASH);
    assert_int_equal(decode("/%2Fetc%2Fpasswd", out, sizeof(out)), SWS_PATH_DECODE_SLASH);
    assert_int_equal(decode("/..%2Fsecret.txt", out, sizeof(out)), SWS_PATH_DECODE_SLASH);
}

static void test_decode_too_long_for_buffer(void **state)
{
    (void)state;
    char out[4];
    assert_int_equal(decode("/abc", out, sizeof(out)), SWS_PATH_DECODE_OK);
    assert_int_equal(decode("/abcd", out, sizeof(out)), SWS_PATH_DECODE_TOO_LONG);
    assert_int_equal(decode("/a%20cd", out, sizeof(out)), SWS_PATH_DECODE_TOO_LONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_of_cases),
        cmocka_unit_test(test_normal_form_is_a_fixed_point),
        cmocka_unit_test(test_normal_path_is_not_copied),
        cmocka_unit_test(test_room_asked_only_when_the_path_changes),
        cmocka_unit_test(test_raw_nul_refused),
        cmocka_unit_test(test_decode_gives_a_relative_name),
        cmocka_unit_test(test_decode_refuses_an_encoded_slash),
        cmocka_unit_test(test_decode_too_long_for_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
