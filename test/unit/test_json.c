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

static void test_writer_escapes_quotes_controls_and_high_bytes(void **state)
{
    (void)state;
    sws_json_out_t o = { 0 };
    sws_json_str(&o, "a\"b\\c\n\x01\x7f\xc3\xa9", 10);
    sws_json_lit(&o, " ");
    sws_json_u64(&o, 18446744073709551615ull);
    sws_json_raw(&o, "", 1);
    assert_false(o.oom);
    assert_string_equal(o.p, "\"a\\\"b\\\\c\\u000a\\u0001\\u007f\\u00c3\\u00a9\" "
                             "18446744073709551615");
    sws_json_out_free(&o);
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
        cmocka_unit_test(test_writer_escapes_quotes_controls_and_high_bytes),
        cmocka_unit_test(test_writer_grows_past_its_first_buffer),
        cmocka_unit_test(test_error_body),
        cmocka_unit_test(test_reader_takes_scalars_and_decodes_strings),
        cmocka_unit_test(test_reader_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
