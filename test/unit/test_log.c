/* core/log.c: line format, level filter, level names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

static size_t drain(int fd, char *buf, size_t cap)
{
    ssize_t n = read(fd, buf, cap - 1);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return (size_t)n;
}

/* What the logger wrote since the last read is exactly one line, of more
 * than min_len bytes (a cut line still ends in its newline). */
static size_t read_one_line(int fd, char *buf, size_t cap, size_t min_len)
{
    size_t n = drain(fd, buf, cap);
    assert_true(n > min_len);
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', n - 1));
    return n;
}

static void test_line_format_and_filter(void **state)
{
    (void)state;
    int p[2];
    char buf[4096];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    sws_log_init("worker 3", p[1], SWS_LOG_NOTICE);

    sws_log_info("not shown %d", 1);
    assert_int_equal(drain(p[0], buf, sizeof(buf)), 0);

    sws_log_warn("bind %s: %s", "127.0.0.1:8080", "Address already in use");
    size_t n = drain(p[0], buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(buf[n - 1], '\n');
    assert_non_null(strstr(buf, "[warn] worker 3["));
    assert_non_null(strstr(buf, "]: bind 127.0.0.1:8080: Address already in use\n"));
    assert_int_equal(buf[4], '-'); /* starts with an ISO date */
    assert_int_equal(buf[10], 'T');

    /* An over-long message is cut but stays one line. */
    char big[5000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sws_log_error("%s", big);
    read_one_line(p[0], buf, sizeof(buf), 1000);

    sws_log_init("test", 2, SWS_LOG_INFO);
    close(p[0]);
    close(p[1]);
}

/* A request path with %0a or %1b, decoded, must not end the line or reach a
 * terminal: the logger escapes every control byte and DEL, whatever the
 * call site. */
static void test_control_bytes_are_escaped(void **state)
{
    (void)state;
    int p[2];
    char buf[8192];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    sws_log_init("worker 0", p[1], SWS_LOG_INFO);

    sws_log_info("static: \"%s\" refused", "a\n2026-11-30T00:00:00.000Z [crit] forged\x1b[2J\x7f\t\r");
    size_t n = read_one_line(p[0], buf, sizeof(buf), 0);
    for (size_t i = 0; i + 1 < n; i++)
        assert_true((unsigned char)buf[i] >= 0x20 && (unsigned char)buf[i] != 0x7f);
    assert_non_null(strstr(buf, "\"a\\x0a2026-11-30T00:00:00.000Z [crit] forged\\x1b[2J\\x7f\\x09\\x0d\" refused\n"));

    /* UTF-8 and backslashes are not control bytes: kept as they are. */
    sws_log_info("caf\xc3\xa9 C:\\x");
    n = drain(p[0], buf, sizeof(buf));
    assert_non_null(strstr(buf, "]: caf\xc3\xa9 C:\\x\n"));

    /* The worst case, every byte escaped, is cut but stays one line. */
    char ctl[3000];
    memset(ctl, '\n', sizeof(ctl) - 1);
    ctl[sizeof(ctl) - 1] = '\0';
    sws_log_error("%s", ctl);
    read_one_line(p[0], buf, sizeof(buf), 1000);

    sws_log_init("test", 2, SWS_LOG_INFO);
    close(p[0]);
    close(p[1]);
}

static void test_level_names(void **state)
{
    (void)state;
    sws_log_level_t l;
    assert_int_equal(sws_log_level_parse("debug", &l), 0);
    assert_int_equal(l, SWS_LOG_DEBUG);
    assert_int_equal(sws_log_level_parse("warn", &l), 0);
    assert_int_equal(l, SWS_LOG_WARN);
    assert_int_equal(sws_log_level_parse("warning", &l), 0);
    assert_int_equal(l, SWS_LOG_WARN);
    assert_int_equal(sws_log_level_parse("error", &l), 0);
    assert_int_equal(l, SWS_LOG_ERROR);
    assert_int_equal(sws_log_level_parse("loud", &l), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_format_and_filter),
        cmocka_unit_test(test_control_bytes_are_escaped),
        cmocka_unit_test(test_level_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
