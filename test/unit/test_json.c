/* core/json.c: the writer's escaping (its output is always valid JSON)
 * and the flat-object reader's acceptances and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/json.h"

static void test_writer_escapes_quotes_and_controls(void **state)
{
    (void)state;
    sws_json_out_t o = { 0 };
    sws_json_str(&o, "a\"b\\c\n\x01\x7f\x00z", 10);
    sws_json_lit(&o, " ");
    sws_json_u64(&o, 18446744073709551615ull);
    sws_json_raw(&o, "", 1);
    assert_false(o.oom);
    assert_string_equal(o.p, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f\\u0000z\" "
                             "18446744073709551615");
    sws_json_out_free(&o);
}

static void assert_str_written(const char *in, size_t n, const char *want)
{
    sws_json_out_t o = { 0 };
    sws_json_str(&o, in, n);
    sws_json_raw(&o, "", 1);
    assert_false(o.oom);
    assert_string_equal(o.p, want);
    sws_json_out_free(&o);
}

/* Valid UTF-8 (2, 3 and 4 bytes, the first and last code points of each
 * length) is written as it is: a name "café" reads back as "café", not as
 * "cafÃ©". */
static void test_writer_passes_valid_utf8(void **state)
{
    (void)state;
    static const char in[] = "caf\xc3\xa9 \xc2\x80\xdf\xbf \xe0\xa0\x80\xe6\x97\xa5\xef\xbf\xbf "
                             "\xf0\x90\x80\x80\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf";
    char want[sizeof(in) + 2];
    snprintf(want, sizeof(want), "\"%s\"", in);
    assert_str_written(in, sizeof(in) - 1, want);
}

/* A byte that is not part of valid UTF-8 is \u00XX, one per byte: a stray
 * continuation, a lead byte that cannot start (0xc0, 0xc1, 0xf5-0xff), an
 * overlong form, a surrogate, past U+10FFFF, a sequence cut by the end or
 * by an ASCII byte. What follows the bad byte is read afresh. */
static void test_writer_escapes_each_invalid_byte(void **state)
{
    (void)state;
    assert_str_written("\x80\xbf", 2, "\"\\u0080\\u00bf\"");
    assert_str_written("\xc0\xaf\xc1\xbf\xf5\xff", 6,
                       "\"\\u00c0\\u00af\\u00c1\\u00bf\\u00f5\\u00ff\"");
    assert_str_written("\xe0\x80\xaf", 3, "\"\\u00e0\\u0080\\u00af\"");
    assert_str_written("\xed\xa0\x80", 3, "\"\\u00ed\\u00a0\\u0080\"");
    assert_str_written("\xf4\x90\x80\x80", 4, "\"\\u00f4\\u0090\\u0080\\u0080\"");
    assert_str_written("\xf0\x80\x80\x80", 4, "\"\\u00f0\\u0080\\u0080\\u0080\"");
    assert_str_written("\xe6\x97", 2, "\"\\u00e6\\u0097\"");
    assert_str_written("\xc3" "a\xc3\xa9", 4, "\"\\u00c3" "a\xc3\xa9\"");
    /* A cut sequence then a valid one: the valid one stays whole. */
    assert_str_written("\xf0\x9f\xf0\x9f\x98\x80", 6, "\"\\u00f0\\u009f\xf0\x9f\x98\x80\"");
}

/* The worst case is SWS_JSON_ESC_MAX: every byte escaped, and the
 * reservation of sws_json_str holds it. */
static void test_put_escaped_worst_case(void **state)
{
    (void)state;
    char in[64], out[SWS_JSON_ESC_MAX(sizeof(in))];
    memset(in, 0xff, sizeof(in));
    char *end = sws_json_put_escaped(out, in, sizeof(in));
    assert_int_equal(end - out, SWS_JSON_ESC_MAX(sizeof(in)));
}

static void test_writer_grows_past_its_first_buffer(void **state)
{
    (void)state;
    sws_json_out_t o = { 0 };
    char big[5000];
    memset(big, '"', sizeof(big));
    sws_json_str(&o, big, sizeof(big));
    assert_int_equal(o.len, 2 + 2 * sizeof(big));
    sws_json_out_free(&o);
}

static void test_error_body(void **state)
{
    (void)state;
    sws_json_out_t o = { 0 };
    sws_json_error(&o, "no \"x\"");
    sws_json_raw(&o, "", 1);
    assert_string_equal(o.p, "{\"error\": \"no \\\"x\\\"\"}\n");
    sws_json_out_free(&o);
}

static size_t parse_ok(const char *text, sws_json_field_t *f)
{
    size_t n = 99;
    char err[128] = "";
    int rc = sws_json_parse_flat(text, strlen(text), f, &n, err, sizeof(err));
    if (rc != 0)
        fail_msg("%s: %s", text, err);
    return n;
}

static void test_reader_takes_scalars_and_decodes_strings(void **state)
{
    (void)state;
    sws_json_field_t f[SWS_JSON_FIELDS_MAX];
    size_t n = parse_ok(" {\"weight\" : 2, \"state\":\"dr\\u00e9\\n\\/\\ud83d\\ude00\", "
                        "\"a\": -1.5e+3, \"t\": true, \"f\": false, \"z\": null}\r\n", f);
    assert_int_equal(n, 6);
    assert_string_equal(sws_json_field(f, n, "weight")->value, "2");
    assert_int_equal(sws_json_field(f, n, "weight")->type, SWS_JSON_NUMBER);
    assert_string_equal(sws_json_field(f, n, "state")->value, "dr\xc3\xa9\n/\xf0\x9f\x98\x80");
    assert_string_equal(sws_json_field(f, n, "a")->value, "-1.5e+3");
    assert_int_equal(sws_json_field(f, n, "t")->type, SWS_JSON_TRUE);
    assert_int_equal(sws_json_field(f, n, "f")->type, SWS_JSON_FALSE);
    assert_int_equal(sws_json_field(f, n, "z")->type, SWS_JSON_NULL);
    assert_null(sws_json_field(f, n, "nope"));
    assert_int_equal(parse_ok("{}", f), 0);
}

static void refused(const char *text, const char *why)
{
    sws_json_field_t f[SWS_JSON_FIELDS_MAX];
    size_t n;
    char err[128] = "";
    assert_int_equal(sws_json_parse_flat(text, strlen(text), f, &n, err, sizeof(err)), -1);
    if (strcmp(err, why) != 0)
        fail_msg("%s: got \"%s\", want \"%s\"", text, err, why);
}

static void test_reader_refusals(void **state)
{
    (void)state;
    refused("", "bad JSON: expected an object, got the end");
    refused("{\"a\": 1} x", "bad JSON: bytes after the object");
    refused("{\"a\": 1,}", "bad JSON: expected a key at byte 8");
    refused("{\"a\" 1}", "bad JSON: expected ':' at byte 5");
    refused("{\"a\": [1]}", "\"a\": nested objects and arrays are not accepted");
    refused("{\"a\": 1, \"a\": 2}", "\"a\" is written twice");
    refused("{\"a\": 01}", "bad JSON: expected ',' or '}' at byte 7");
    refused("{\"a\": 1.}", "bad JSON: no digit after a decimal point");
    refused("{\"a\": -}", "bad JSON: a number without digits");
    refused("{\"a\": 1e}", "bad JSON: no digit in an exponent");
    refused("{\"a\": tru}", "bad JSON: expected a value for \"a\"");
    refused("{\"a\": \"x\ty\"}", "bad JSON: a control byte inside a string");
    refused("{\"a\": \"\\u0000\"}", "bad JSON: \\u0000 is not accepted");
    refused("{\"a\": \"\\ud800\"}", "bad JSON: a high surrogate without its low one");
    refused("{\"a\": \"\\udc00\"}", "bad JSON: a lone low surrogate");
    refused("{\"a\": \"\\x\"}", "bad JSON: unknown escape \\x");
    refused("{\"a\": \"\\u12\"}", "bad JSON: \\u needs four hex digits");
    refused("{\"a\": \"abc", "bad JSON: a string without its closing quote");
    refused("{\"0123456789012345678901234567890123\": 1}", "a key longer than 31 bytes");
    refused("{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1}",
            "more than 8 fields");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writer_escapes_quotes_and_controls),
        cmocka_unit_test(test_writer_passes_valid_utf8),
        cmocka_unit_test(test_writer_escapes_each_invalid_byte),
        cmocka_unit_test(test_put_escaped_worst_case),
        cmocka_unit_test(test_writer_grows_past_its_first_buffer),
        cmocka_unit_test(test_error_body),
        cmocka_unit_test(test_reader_takes_scalars_and_decodes_strings),
        cmocka_unit_test(test_reader_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
