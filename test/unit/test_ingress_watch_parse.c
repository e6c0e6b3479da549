/* ingressd/watch_parse.c: a watch stream gives the same events however it
 * is cut into reads; a bookmark and a 410 ERROR come out as such; an
 * over-long, broken or truncated line is an error, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingressd/watch_parse.h"

/* A stream as the API server writes it (kubectl get --watch -o json). */
static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Ingress\",\"metadata\":{\"name\":\"a\","
    "\"namespace\":\"default\",\"resourceVersion\":\"101\"},\"spec\":{\"rules\":[{\"host\":"
    "\"a.example\"}]}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Ingress\",\"metadata\":{\"name\":\"a\","
    "\"namespace\":\"default\",\"resourceVersion\":\"102\"}}}\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Ingress\",\"metadata\":{"
    "\"resourceVersion\":\"150\"}}}\r\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Ingress\",\"metadata\":{\"name\":\"a\","
    "\"namespace\":\"default\",\"resourceVersion\":\"151\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
    "\"Failure\",\"message\":\"too old resource version: 100 (151)\",\"reason\":\"Expired\","
    "\"code\":410}}\n";

static const char *const want[] = {
    "ADDED a 101", "MODIFIED a 102", "BOOKMARK - 150", "DELETED a 151", "ERROR 410",
};
#define NWANT (sizeof(want) / sizeof(want[0]))

typedef struct seen {
    char ev[16][64];
    size_t n;
    int stop_at; /* return 7 on that event (1-based); 0: never */
} seen_t;

static int record(void *ctx, sws_watch_type_t type, json_t *obj)
{
    seen_t *s = ctx;
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));

    assert_true(s->n < 16);
    if (type == SWS_WATCH_ERROR)
        snprintf(s->ev[s->n], sizeof(s->ev[0]), "ERROR %lld",
                 (long long)json_integer_value(json_object_get(obj, "code")));
    else
        snprintf(s->ev[s->n], sizeof(s->ev[0]), "%s %s %s", sws_watch_type_name(type),
                 name ? name : "-", rv ? rv : "-");
    s->n++;
    return s->stop_at != 0 && (size_t)s->stop_at == s->n ? 7 : 0;
}

static void assert_all_events(const seen_t *s)
{
    assert_int_equal(s->n, NWANT);
    for (size_t i = 0; i < NWANT; i++)
        assert_string_equal(s->ev[i], want[i]);
}

static void test_stream_in_one_piece(void **state)
{
    (void)state;
    sws_watch_parser_t p;
    seen_t s = { 0 };
    char err[256];

    sws_watch_parser_init(&p, 4096);
    assert_int_equal(sws_watch_feed(&p, stream, sizeof(stream) - 1, record, &s, err,
                                    sizeof(err)), 0);
    assert_int_equal(sws_watch_finish(&p, err, sizeof(err)), 0);
    assert_all_events(&s);
    sws_watch_parser_free(&p);
}

/* Two reads, cut at every byte; and three, the second cut sweeping too. */
static void test_cut_at_every_byte_gives_the_same_events(void **state)
{
    (void)state;
    size_t n = sizeof(stream) - 1;
    char err[256];

    for (size_t cut = 0; cut <= n; cut++) {
        for (size_t cut2 = cut; cut2 <= n; cut2 += 17) {
            sws_watch_parser_t p;
            seen_t s = { 0 };
            sws_watch_parser_init(&p, 4096);
            assert_int_equal(sws_watch_feed(&p, stream, cut, record, &s, err, sizeof(err)), 0);
            assert_int_equal(sws_watch_feed(&p, stream + cut, cut2 - cut, record, &s, err,
                                            sizeof(err)), 0);
            assert_int_equal(sws_watch_feed(&p, stream + cut2, n - cut2, record, &s, err,
                                            sizeof(err)), 0);
            assert_int_equal(sws_watch_finish(&p, err, sizeof(err)), 0);
            assert_all_events(&s);
            sws_watch_parser_free(&p);
        }
    }
}

static void test_byte_at_a_time(void **state)
{
    (void)state;
    sws_watch_parser_t p;
    seen_t s = { 0 };
    char err[256];

    sws_watch_parser_init(&p, 4096);
    for (size_t i = 0; i < sizeof(stream) - 1; i++)
        assert_int_equal(sws_watch_feed(&p, stream + i, 1, record, &s, err, sizeof(err)), 0);
    assert_all_events(&s);
    sws_watch_parser_free(&p);
}

/* The bound holds whether the long line comes whole or in pieces, and the
 * events before it are delivered. */
static void test_over_long_line_is_an_error(void **state)
{
    (void)state;
    size_t big = 10000;
    char *line = malloc(big + 1);
    char err[256];

    memset(line, ' ', big);
    memcpy(line, "{\"type\":\"ADDED\",\"object\":{", 26);
    line[big] = '\n';
    for (size_t piece = 1; piece <= big + 1; piece = piece * 3 + 1) {
        sws_watch_parser_t p;
        seen_t s = { 0 };
        int rc = 0;
        sws_watch_parser_init(&p, 1000);
        assert_int_equal(sws_watch_feed(&p, stream, 200, record, &s, err, sizeof(err)), 0);
        for (size_t at = 0; at < big + 1 && rc == 0; at += piece)
            rc = sws_watch_feed(&p, line + at, at + piece > big + 1 ? big + 1 - at : piece,
                                record, &s, err, sizeof(err));
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, "longer than 1000 bytes"));
        assert_int_equal(s.n, 1);
        assert_true(p.cap <= 1000);
        sws_watch_parser_free(&p);
    }
    free(line);
}

static void test_bad_lines_are_errors(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        const char *why;
    } cases[] = {
        { "{\"type\":\"ADDED\",\"object\":{}\n", "not JSON" },
        { "[1,2]\n", "without a \"type\"" },
        { "{\"type\":\"ADDED\"}\n", "without a \"type\"" },
        { "{\"type\":\"ADDED\",\"object\":\"x\"}\n", "without a \"type\"" },
        { "{\"type\":\"RENAMED\",\"object\":{}}\n", "unknown type \"RENAMED\"" },
        { "{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}\n", "not JSON" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sws_watch_parser_t p;
        seen_t s = { 0 };
        char err[256] = "";
        sws_watch_parser_init(&p, 4096);
        assert_int_equal(sws_watch_feed(&p, cases[i].line, strlen(cases[i].line), record, &s,
                                        err, sizeof(err)), -1);
        if (strstr(err, cases[i].why) == NULL)
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, cases[i].why);
        assert_int_equal(s.n, 0);
        sws_watch_parser_free(&p);
    }
}

static void test_stream_ending_inside_an_event_is_an_error(void **state)
{
    (void)state;
    sws_watch_parser_t p;
    seen_t s = { 0 };
    char err[256];

    sws_watch_parser_init(&p, 4096);
    assert_int_equal(sws_watch_feed(&p, stream, 250, record, &s, err, sizeof(err)), 0);
    assert_int_equal(sws_watch_finish(&p, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "ended inside an event"));
    assert_int_equal(s.n, 1);
    sws_watch_parser_reset(&p);
    assert_int_equal(sws_watch_finish(&p, err, sizeof(err)), 0);
    sws_watch_parser_free(&p);
}

/* The callback stops the feed (a 410: nothing after it counts). */
static void test_callback_stops_the_feed(void **state)
{
    (void)state;
    sws_watch_parser_t p;
    seen_t s = { .stop_at = 2 };
    char err[256];

    sws_watch_parser_init(&p, 4096);
    assert_int_equal(sws_watch_feed(&p, stream, sizeof(stream) - 1, record, &s, err,
                                    sizeof(err)), 7);
    assert_int_equal(s.n, 2);
    sws_watch_parser_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_in_one_piece),
        cmocka_unit_test(test_cut_at_every_byte_gives_the_same_events),
        cmocka_unit_test(test_byte_at_a_time),
        cmocka_unit_test(test_over_long_line_is_an_error),
        cmocka_unit_test(test_bad_lines_are_errors),
        cmocka_unit_test(test_stream_ending_inside_an_event_is_an_error),
        cmocka_unit_test(test_callback_stops_the_feed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
