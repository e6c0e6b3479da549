/* core/escape.h: the word-at-a-time copy escapes exactly the bytes the
 * per-byte rule (sws_esc_needed) names, at every position of a word and
 * of the tail, for every class set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/escape.h"

#define LEN_MAX 19 /* two words and a tail */

static const unsigned class_sets[] = {
    SWS_ESC_CTL,
    SWS_ESC_CTL | SWS_ESC_HIGH | SWS_ESC_QUOTE,
    SWS_ESC_HIGH,
    SWS_ESC_QUOTE,
    SWS_ESC_CTL | SWS_ESC_QUOTE,
};

/* The rule, one byte at a time. */
static size_t reference(char *o, const char *p, size_t n, unsigned classes)
{
    char *start = o;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (sws_esc_needed(ch, classes))
            o = sws_put_esc_byte(o, ch);
        else
            *o++ = (char)ch;
    }
    return (size_t)(o - start);
}

static void check(const char *p, size_t n, unsigned classes)
{
    char want[SWS_ESC_MAX(LEN_MAX)], got[SWS_ESC_MAX(LEN_MAX)];
    size_t wn = reference(want, p, n, classes);
    size_t gn = (size_t)(sws_put_escaped(got, p, n, classes) - got);
    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, wn);
}

/* Every byte value at every position of a plain field of each length,
 * among neighbours that need nothing (where a word test could hide it)
 * and beside another byte of the same value. */
static void test_each_byte_at_each_position(void **state)
{
    (void)state;
    char field[LEN_MAX];
    for (size_t c = 0; c < sizeof(class_sets) / sizeof(class_sets[0]); c++) {
        for (size_t n = 1; n <= LEN_MAX; n++) {
            for (size_t pos = 0; pos < n; pos++) {
                for (unsigned v = 0; v < 256; v++) {
                    memset(field, 'a', n);
                    field[pos] = (char)v;
                    check(field, n, class_sets[c]);
                    if (pos + 1 < n) {
                        field[pos + 1] = (char)v;
                        check(field, n, class_sets[c]);
                    }
                }
            }
        }
    }
}

/* The bytes just around each class's edges, next to each other: a borrow
 * from one byte of a word must not hide or invent another. */
static void test_edges_side_by_side(void **state)
{
    (void)state;
    static const unsigned char edges[] = { 0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c,
                                           0x5d, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff };
    char field[8];
    for (size_t c = 0; c < sizeof(class_sets) / sizeof(class_sets[0]); c++)
        for (size_t a = 0; a < sizeof(edges); a++)
            for (size_t b = 0; b < sizeof(edges); b++)
                for (size_t pos = 0; pos + 1 < sizeof(field); pos++) {
                    memset(field, 'x', sizeof(field));
                    field[pos] = (char)edges[a];
                    field[pos + 1] = (char)edges[b];
                    check(field, sizeof(field), class_sets[c]);
                }
}

static void test_combined_line_fields(void **state)
{
    (void)state;
    char out[SWS_ESC_MAX(64)];
    const char *ua = "Mozilla/5.0 \"x\"\\\x01\xc3\xa9";
    char *end = sws_put_escaped(out, ua, strlen(ua), SWS_ESC_CTL | SWS_ESC_HIGH | SWS_ESC_QUOTE);
    *end = '\0';
    assert_string_equal(out, "Mozilla/5.0 \\x22x\\x22\\x5c\\x01\\xc3\\xa9");
    end = sws_put_escaped(out, ua, strlen(ua), SWS_ESC_CTL);
    *end = '\0';
    assert_string_equal(out, "Mozilla/5.0 \"x\"\\\\x01\xc3\xa9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_byte_at_each_position),
        cmocka_unit_test(test_edges_side_by_side),
        cmocka_unit_test(test_combined_line_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
