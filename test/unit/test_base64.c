/* core/base64.c: padded base64, line breaks only where the caller allows
 * them (kubeconfig data), every malformed input refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

/* Decode text; its result must be want (NULL: refused). */
static void expect(const char *text, int whitespace, const char *want)
{
    unsigned char *out = (unsigned char *)"unset";
    size_t len = 99;
    int rc = sws_base64_decode(text, strlen(text), whitespace, &out, &len);
    if (want == NULL) {
        if (rc != -1)
            fail_msg("\"%s\" (whitespace %d): %d, want -1", text, whitespace, rc);
        assert_null(out);
        assert_int_equal(len, 0);
        return;
    }
    if (rc != 0)
        fail_msg("\"%s\" (whitespace %d): %d, want \"%s\"", text, whitespace, rc, want);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(out, want, len);
    assert_int_equal(out[len], '\0');
    free(out);
}

static void test_padding(void **state)
{
    (void)state;
    for (int ws = SWS_BASE64_STRICT; ws <= SWS_BASE64_LINES; ws++) {
        expect("", ws, "");
        expect("QQ==", ws, "A");
        expect("QUI=", ws, "AB");
        expect("QUJD", ws, "ABC");
        expect("QUJDRA==", ws, "ABCD");
        expect("QQ", ws, NULL);     /* padding left out */
        expect("QQ=", ws, NULL);
        expect("QUJDR", ws, NULL);
        expect("QQ==QUJD", ws, NULL); /* data after the padding */
    }
}

static void test_whitespace_only_where_allowed(void **state)
{
    (void)state;
    /* kubectl's line breaks, CRLF included, and a trailing newline */
    expect("Q0EgUEVNCg==\n", SWS_BASE64_LINES, "CA PEM\n");
    expect("QUJD\r\nREVG\nR0g=\n", SWS_BASE64_LINES, "ABCDEFGH");
    expect(" QUJD\tREVG ", SWS_BASE64_LINES, "ABCDEF");
    expect("QUJD\nREVG", SWS_BASE64_STRICT, NULL);
    expect("QUJD REVG", SWS_BASE64_STRICT, NULL);
    expect("QUJD\n", SWS_BASE64_STRICT, NULL);
}

static void test_invalid_input(void **state)
{
    (void)state;
    for (int ws = SWS_BASE64_STRICT; ws <= SWS_BASE64_LINES; ws++) {
        expect("QU*D", ws, NULL);
        expect("QUJD-garbage", ws, NULL); /* OpenSSL alone stops at '-' */
        expect("QUJD----", ws, NULL);
        expect("QUJD\x80\x80\x80\x80", ws, NULL);
        expect("QU_D", ws, NULL);         /* the URL alphabet is not this one */
    }
    /* a NUL inside the given length is not base64 either */
    unsigned char *out;
    size_t len;
    assert_int_equal(sws_base64_decode("QU\0D", 4, SWS_BASE64_STRICT, &out, &len), -1);
    assert_null(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padding),
        cmocka_unit_test(test_whitespace_only_where_allowed),
        cmocka_unit_test(test_invalid_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
