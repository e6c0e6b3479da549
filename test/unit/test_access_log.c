/* worker/access_log.c: the exact combined and JSON lines, escaping of what a
 * client sends (no forged lines, always valid JSON), buffering and flushing,
 * and where the lines go when the configuration changes. Each test logs to
 * files in its own temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "proto/scalws.pb-c.h"
#include "worker/access_log.h"

#define OFF SWS__ACCESS_LOG__FORMAT__OFF
#define COMBINED SWS__ACCESS_LOG__FORMAT__COMBINED
#define JSON SWS__ACCESS_LOG__FORMAT__JSON

/* 30/Nov/2026:02:33:30 UTC */
#define NOW ((time_t)1796006010)

typedef struct fixture {
    char dir[64];
    char path[128];  /* dir/access.log */
    char path2[128]; /* dir/other.log */
    char opened[128]; /* the path log.fd was opened for, as the supervisor does */
    sws_access_log_t log;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -1;
    strcpy(f->dir, "/tmp/sws-access-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/access.log", f->dir);
    snprintf(f->path2, sizeof(f->path2), "%s/other.log", f->dir);
    sws_access_log_init(&f->log);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_access_log_close(&f->log);
    unlink(f->path);
    unlink(f->path2);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* What the supervisor and the worker do together: the supervisor opens the
 * file when the log is on and the path is new, the worker takes the
 * descriptor and the table's format. */
static void configure(fixture_t *f, unsigned format, const char *path)
{
    if (format != OFF && (f->log.fd < 0 || strcmp(f->opened, path) != 0)) {
        char err[256];
        int fd = sws_log_file_open(path, 1, err, sizeof(err));
        assert_true(fd >= 0);
        sws_access_log_set_fd(&f->log, fd);
        snprintf(f->opened, sizeof(f->opened), "%s", path);
    }
    assert_int_equal(sws_access_log_set_format(&f->log, format), 0);
}

/* The whole file as a NUL-terminated string (empty when it does not
 * exist); *len gets its size. The caller frees. */
static char *slurp(const char *path, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        buf = malloc((size_t)st.st_size + 1);
        assert_non_null(buf);
        while (n < (size_t)st.st_size) {
            ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
            assert_true(r > 0);
            n += (size_t)r;
        }
        close(fd);
    } else {
        assert_int_equal(errno, ENOENT);
        buf = malloc(1);
        assert_non_null(buf);
    }
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

static void assert_file(const char *path, const char *want)
{
    size_t len;
    char *got = slurp(path, &len);
    assert_int_equal(len, strlen(want));
    assert_string_equal(got, want);
    free(got);
}

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

static void empty_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    close(fd);
}

/* ---- requests built by hand ---- */

static sws_str_t S(const char *s)
{
    return (sws_str_t){ s, strlen(s) };
}

static void req_init(sws_request_t *r, const char *method, const char *target,
                     const char *host)
{
    memset(r, 0, sizeof(*r));
    r->method = S(method);
    r->target = S(target);
    r->host = S(host);
    r->version_major = 1;
    r->version_minor = 1;
    r->status = 200;
}

static void req_header_n(sws_request_t *r, const char *name, const char *value, size_t len)
{
    assert_true(r->nheaders < SWS_REQUEST_MAX_HEADERS);
    r->headers[r->nheaders].name = S(name);
    r->headers[r->nheaders].value = (sws_str_t){ value, len };
    r->nheaders++;
}

static void req_header(sws_request_t *r, const char *name, const char *value)
{
    req_header_n(r, name, value, strlen(value));
}

/* Log r alone in format at NOW and flush: the file then holds its line. */
static void log_one(fixture_t *f, unsigned format, const sws_request_t *r, const char *remote,
                    uint64_t duration_ms)
{
    configure(f, format, f->path);
    sws_access_log_request(&f->log, r, remote, NOW, duration_ms);
    sws_access_log_flush(&f->log);
}

/* The combined line of req_init(&r, "GET", "/", "") from ip at NOW. */
#define PLAIN_LINE(ip) ip " - - [30/Nov/2026:02:33:30 +0000] \"GET / HTTP/1.1\" 200 0 \"-\" \"-\"\n"

/* ---- a strict reader for the JSON lines ----
 *
 * The log writes a flat object of strings and unsigned integers on one line,
 * in ASCII only. This reader accepts exactly that much of RFC 8259 and fails
 * the test on anything else, so a line that a real JSON parser would reject
 * (raw control bytes, a bad escape, a stray quote) cannot pass. */

#define JSON_MAX_FIELDS 16
#define JSON_MAX_STR (2 * SWS_ACCESS_LOG_FIELD_MAX)

typedef struct json_field {
    char key[32];
    int is_num;
    uint64_t num;
    char str[JSON_MAX_STR]; /* the bytes sent: raw text as it is, \u00XX as byte XX */
    size_t len;
} json_field_t;

typedef struct json_obj {
    json_field_t f[JSON_MAX_FIELDS];
    unsigned n;
} json_obj_t;

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static const char *json_string(const char *p, const char *end, char *out, size_t cap, size_t *len)
{
    static const char simple_in[] = "\"\\/bfnrt";
    static const char simple_out[] = "\"\\/\b\f\n\r\t";
    size_t n = 0;
    if (p >= end || *p != '"')
        fail_msg("JSON: expected a string at \"%.20s\"", p);
    for (p++; p < end && *p != '"'; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f)
            fail_msg("JSON: raw byte 0x%02x inside a string", ch);
        if (n == cap)
            fail_msg("JSON: string longer than %zu", cap);
        if (ch != '\\') {
            out[n++] = (char)ch;
            continue;
        }
        if (++p >= end)
            break;
        const char *s = strchr(simple_in, *p);
        if (*p != '\0' && s != NULL) {
            out[n++] = simple_out[s - simple_in];
            continue;
        }
        if (*p != 'u' || end - p < 5)
            fail_msg("JSON: bad escape \\%c", *p);
        unsigned v = 0;
        for (int i = 1; i <= 4; i++) {
            int h = hexval(p[i]);
            if (h < 0)
                fail_msg("JSON: bad \\u escape");
            v = v * 16 + (unsigned)h;
        }
        /* Controls and invalid bytes only: a character is never escaped,
         * so \u00XX is the byte XX, whatever XX. */
        if (v > 0xff)
            fail_msg("JSON: unexpected \\u%04x", v);
        if (v >= 0x20 && v < 0x7f)
            fail_msg("JSON: printable ASCII escaped (\\u%04x)", v);
        out[n++] = (char)v;
        p += 4;
    }
    if (p >= end)
        fail_msg("JSON: unterminated string");
    *len = n;
    return p + 1;
}

static const char *json_number(const char *p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *start = p;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            fail_msg("JSON: number overflows");
        v = v * 10 + d;
    }
    if (p == start || (*start == '0' && p - start > 1))
        fail_msg("JSON: bad number at \"%.20s\"", start);
    *out = v;
    return p;
}

/* Parse one line (object + '\n', nothing after) into o. */
static void json_parse_line(const char *line, size_t len, json_obj_t *o)
{
    const char *p = line, *end = line + len;
    memset(o, 0, sizeof(*o));
    if (len < 3 || line[0] != '{' || line[len - 2] != '}' || line[len - 1] != '\n')
        fail_msg("JSON: not one object on one line: %.60s", line);
    end = line + len - 2; /* the closing brace */
    p++;
    while (p < end) {
        if (o->n == JSON_MAX_FIELDS)
            fail_msg("JSON: too many fields");
        json_field_t *fl = &o->f[o->n++];
        size_t klen;
        p = json_string(p, end, fl->key, sizeof(fl->key) - 1, &klen);
        fl->key[klen] = '\0';
        if (p >= end || *p++ != ':')
            fail_msg("JSON: expected ':' after \"%s\"", fl->key);
        if (p < end && *p == '"') {
            p = json_string(p, end, fl->str, sizeof(fl->str), &fl->len);
        } else {
            fl->is_num = 1;
            p = json_number(p, end, &fl->num);
        }
        if (p < end && *p++ != ',')
            fail_msg("JSON: expected ',' after \"%s\"", fl->key);
        if (p == end && p[-1] == ',')
            fail_msg("JSON: trailing comma");
    }
}

static const json_field_t *json_get(const json_obj_t *o, const char *key)
{
    const json_field_t *found = NULL;
    for (unsigned i = 0; i < o->n; i++) {
        if (strcmp(o->f[i].key, key) != 0)
            continue;
        if (found != NULL)
            fail_msg("JSON: key \"%s\" twice", key);
        found = &o->f[i];
    }
    if (found == NULL)
        fail_msg("JSON: no key \"%s\"", key);
    return found;
}

static void assert_json_str(const json_obj_t *o, const char *key, const char *want, size_t len)
{
    const json_field_t *fl = json_get(o, key);
    assert_false(fl->is_num);
    assert_int_equal(fl->len, len);
    assert_memory_equal(fl->str, want, len);
}

static void assert_json_num(const json_obj_t *o, const char *key, uint64_t want)
{
    const json_field_t *fl = json_get(o, key);
    assert_true(fl->is_num);
    assert_int_equal(fl->num, want);
}

/* The one line in path, parsed. */
static void json_parse_file(const char *path, json_obj_t *o)
{
    size_t len;
    char *line = slurp(path, &len);
    assert_true(len > 0);
    assert_ptr_equal(memchr(line, '\n', len), line + len - 1);
    json_parse_line(line, len, o);
    free(line);
}

/* A line a reader splits on '\n' cannot be forged: exactly one newline, at
 * the end, and only printable ASCII before it. */
static void assert_one_clean_line(const char *line, size_t len)
{
    assert_true(len > 0);
    assert_int_equal(line[len - 1], '\n');
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < 0x20 || ch > 0x7e)
            fail_msg("byte 0x%02x at %zu of the line", ch, i);
    }
}

/* ---- the lines ---- */

static void test_combined_line(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/index.html?x=1", "example.com");
    req_header(&r, "Accept", "*/*");
    req_header(&r, "User-Agent", "curl/8.5.0");
    r.body_bytes = 13;
    log_one(f, COMBINED, &r, "127.0.0.1", 3);
    assert_file(f->path, "127.0.0.1 - - [30/Nov/2026:02:33:30 +0000] "
                         "\"GET /index.html?x=1 HTTP/1.1\" 200 13 \"-\" \"curl/8.5.0\"\n");
}

static void test_combined_referer_http10_no_user_agent(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "HEAD", "/missing", "");
    r.version_minor = 0;
    r.status = 404;
    req_header(&r, "Referer", "http://example.com/from");
    log_one(f, COMBINED, &r, "::1", 0);
    assert_file(f->path, "::1 - - [30/Nov/2026:02:33:30 +0000] \"HEAD /missing HTTP/1.0\" 404 0 "
                         "\"http://example.com/from\" \"-\"\n");
}

/* A refused version is logged as the client wrote it, not as HTTP/1.1. */
static void test_refused_version_logged_as_carried(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    r.version_major = 9;
    r.version_minor = 9;
    r.status = 505;
    log_one(f, COMBINED, &r, "127.0.0.1", 0);
    assert_file(f->path, "127.0.0.1 - - [30/Nov/2026:02:33:30 +0000] \"GET / HTTP/9.9\" 505 0 "
                         "\"-\" \"-\"\n");
}

/* A request refused before its line was parsed (400, 414) has no target:
 * nginx writes "-" for the request line. */
static void test_combined_without_request_line(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "", "", "");
    r.status = 400;
    r.body_bytes = 150;
    log_one(f, COMBINED, &r, "10.0.0.1", 0);
    assert_file(f->path, "10.0.0.1 - - [30/Nov/2026:02:33:30 +0000] \"-\" 400 150 \"-\" \"-\"\n");
}

static void test_json_line(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "POST", "/api?q=1", "example.com");
    req_header(&r, "user-agent", "it/1");
    r.status = 201;
    r.body_bytes = 42;
    r.request_body_bytes = 5;
    log_one(f, JSON, &r, "192.0.2.7", 7);
    const char *want = "{\"ts\":\"2026-11-30T02:33:30Z\",\"remote\":\"192.0.2.7\",\"method\":\"POST\","
                       "\"path\":\"/api?q=1\",\"proto\":\"HTTP/1.1\",\"status\":201,\"bytes\":42,"
                       "\"request_bytes\":5,\"duration_ms\":7,\"host\":\"example.com\",\"ua\":\"it/1\"}\n";
    assert_file(f->path, want);

    /* What the log wrote is JSON a strict reader takes, field by field. */
    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    json_parse_file(f->path, o);
    assert_int_equal(o->n, 11);
    assert_json_str(o, "method", "POST", 4);
    assert_json_num(o, "status", 201);
    assert_json_num(o, "bytes", 42);
    assert_json_num(o, "request_bytes", 5);
    assert_json_num(o, "duration_ms", 7);
    free(o);
}

/* A proxied request: the upstream lists (one entry per attempt) follow
 * the user agent in combined, as three more keys in JSON. */
static void test_proxied_request_has_upstream_fields(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/p", "example.com");
    snprintf(r.upstream.addr, sizeof(r.upstream.addr), "127.0.0.1:8081, [::1]:8082");
    snprintf(r.upstream.status, sizeof(r.upstream.status), "502, 200");
    snprintf(r.upstream.ms, sizeof(r.upstream.ms), "1, 12");
    log_one(f, COMBINED, &r, "127.0.0.1", 13);
    assert_file(f->path, "127.0.0.1 - - [30/Nov/2026:02:33:30 +0000] \"GET /p HTTP/1.1\" 200 0 "
                         "\"-\" \"-\" \"127.0.0.1:8081, [::1]:8082\" \"502, 200\" \"1, 12\"\n");
    empty_file(f->path);
    log_one(f, JSON, &r, "127.0.0.1", 13);
    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    json_parse_file(f->path, o);
    assert_int_equal(o->n, 14);
    assert_json_str(o, "upstream_addr", "127.0.0.1:8081, [::1]:8082", 26);
    assert_json_str(o, "upstream_status", "502, 200", 8);
    assert_json_str(o, "upstream_ms", "1, 12", 5);
    free(o);
}

/* Missing headers are empty strings, numbers are numbers up to 2^64-1. */
static void test_json_empty_fields_and_big_numbers(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    req_init(&r, "GET", "", "");
    r.version_minor = 0;
    r.status = 0;
    r.body_bytes = UINT64_MAX;
    log_one(f, JSON, &r, "", UINT64_MAX);
    json_parse_file(f->path, o);
    assert_int_equal(o->n, 11);
    assert_json_str(o, "ts", "2026-11-30T02:33:30Z", 20);
    assert_json_str(o, "remote", "", 0);
    assert_json_str(o, "method", "GET", 3);
    assert_json_str(o, "path", "", 0);
    assert_json_str(o, "proto", "HTTP/1.0", 8);
    assert_json_num(o, "status", 0);
    assert_json_num(o, "bytes", UINT64_MAX);
    assert_json_num(o, "duration_ms", UINT64_MAX);
    assert_json_str(o, "host", "", 0);
    assert_json_str(o, "ua", "", 0);
    free(o);
}

/* The stamps are cached per second: the cache must not hand out a stale
 * second, including for the epoch (the zeroed cache's own second). */
static void test_timestamps_follow_the_clock(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    configure(f, COMBINED, f->path);
    sws_access_log_request(&f->log, &r, "a", 0, 0);
    sws_access_log_request(&f->log, &r, "b", 1709251199, 0);
    sws_access_log_request(&f->log, &r, "c", 1709251199, 0);
    sws_access_log_request(&f->log, &r, "d", 1709251200, 0);
    configure(f, JSON, f->path);
    sws_access_log_request(&f->log, &r, "e", 1709251200, 0);
    sws_access_log_request(&f->log, &r, "f", 0, 0);
    sws_access_log_flush(&f->log);

    size_t len;
    char *got = slurp(f->path, &len);
    const char *want[] = {
        "a - - [01/Jan/1970:00:00:00 +0000] ",
        "b - - [29/Feb/2024:23:59:59 +0000] ",
        "c - - [29/Feb/2024:23:59:59 +0000] ",
        "d - - [01/Mar/2024:00:00:00 +0000] ",
        "{\"ts\":\"2024-03-01T00:00:00Z\",\"remote\":\"e\"",
        "{\"ts\":\"1970-01-01T00:00:00Z\",\"remote\":\"f\"",
    };
    char *line = got;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        if (strncmp(line, want[i], strlen(want[i])) != 0)
            fail_msg("line %zu: %.*s", i, (int)(nl - line), line);
        line = nl + 1;
    }
    assert_string_equal(line, "");
    free(got);
}

/* ---- hostile input ---- */

/* A User-Agent that tries to end the line and forge a second one, and every
 * other kind of byte that needs escaping. */
static const char EVIL_UA[] = "evil\"\\\r\n6.6.6.6 - - [01/Jan/1970:00:00:00 +0000] "
                              "\"GET /forged HTTP/1.1\" 200 0 \"-\" \"-\"\n"
                              "\x01\t\x1b\x7f\x80\xff\xc3\xa9 end";
static const char EVIL_TARGET[] = "/a b\"c\\d\r\ne\x00z";
static const char EVIL_HOST[] = "h\"\\\x00\x1f";
static const char EVIL_REFERER[] = "x\ny";

static void evil_request(sws_request_t *r)
{
    req_init(r, "GET", "", "");
    r->target = (sws_str_t){ EVIL_TARGET, sizeof(EVIL_TARGET) - 1 };
    r->host = (sws_str_t){ EVIL_HOST, sizeof(EVIL_HOST) - 1 };
    req_header_n(r, "User-Agent", EVIL_UA, sizeof(EVIL_UA) - 1);
    req_header(r, "Referer", EVIL_REFERER);
}

/* Combined: nginx's \xHH, so a reader can undo it and nothing the client
 * sent can end the line or close a quoted field. */
static void test_combined_escapes_hostile_bytes(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    evil_request(&r);
    log_one(f, COMBINED, &r, "127.0.0.1", 0);

    size_t len;
    char *got = slurp(f->path, &len);
    assert_one_clean_line(got, len);
    assert_string_equal(
        got, "127.0.0.1 - - [30/Nov/2026:02:33:30 +0000] "
             "\"GET /a b\\x22c\\x5cd\\x0d\\x0ae\\x00z HTTP/1.1\" 200 0 \"x\\x0ay\" "
             "\"evil\\x22\\x5c\\x0d\\x0a6.6.6.6 - - [01/Jan/1970:00:00:00 +0000] "
             "\\x22GET /forged HTTP/1.1\\x22 200 0 \\x22-\\x22 \\x22-\\x22\\x0a"
             "\\x01\\x09\\x1b\\x7f\\x80\\xff\\xc3\\xa9 end\"\n");
    free(got);
}

/* One line of JSON for a reader that splits on '\n' and then decodes UTF-8:
 * no control byte before the newline. (Valid UTF-8 is checked by the exact
 * lines of test_json_utf8_passes_invalid_bytes_escaped.) */
static void assert_one_json_line(const char *line, size_t len)
{
    assert_true(len > 0);
    assert_int_equal(line[len - 1], '\n');
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if (ch < 0x20 || ch == 0x7f)
            fail_msg("byte 0x%02x at %zu of the line", ch, i);
    }
}

/* JSON: the line parses, and every string reads back as the bytes the
 * client sent (valid UTF-8 as text, the rest through \u00XX). */
static void test_json_escapes_hostile_bytes(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    evil_request(&r);
    log_one(f, JSON, &r, "127.0.0.1", 0);

    size_t len;
    char *got = slurp(f->path, &len);
    assert_one_json_line(got, len);
    free(got);
    json_parse_file(f->path, o);
    assert_int_equal(o->n, 11);
    assert_json_str(o, "path", EVIL_TARGET, sizeof(EVIL_TARGET) - 1);
    assert_json_str(o, "host", EVIL_HOST, sizeof(EVIL_HOST) - 1);
    assert_json_str(o, "ua", EVIL_UA, sizeof(EVIL_UA) - 1);
    assert_json_str(o, "remote", "127.0.0.1", 9);
    free(o);
}

/* Valid UTF-8 is written as it is (no mojibake for a reader that decodes
 * JSON), control characters as \u00HH, and so is a byte that is not part
 * of valid UTF-8 (stray continuation, overlong form, surrogate, past
 * U+10FFFF, cut sequence); the backslash is \\, so a client sending the
 * text "\u00e9" is not mistaken for the byte 0xe9. */
static void test_json_utf8_passes_invalid_bytes_escaped(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    static const char target[] = "/caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80"
                                 "|\x80\xff\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xe9|\\u00e9|\x01\x7f|\xc3";
    req_init(&r, "GET", target, "");
    log_one(f, JSON, &r, "1.1.1.1", 0);

    size_t len;
    char *got = slurp(f->path, &len);
    const char *want_path =
        "\"path\":\"/caf\xc3\xa9/\xe6\x97\xa5\xf0\x9f\x98\x80"
        "|\\u0080\\u00ff\\u00c0\\u00af\\u00ed\\u00a0\\u0080\\u00f4\\u0090\\u0080\\u0080\\u00e9"
        "|\\\\u00e9|\\u0001\\u007f|\\u00c3\",";
    if (strstr(got, want_path) == NULL)
        fail_msg("no %s in %s", want_path, got);
    assert_one_json_line(got, len);
    free(got);

    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    json_parse_file(f->path, o);
    assert_json_str(o, "path", target, sizeof(target) - 1);
    free(o);
}

/* A very long User-Agent is cut to SWS_ACCESS_LOG_FIELD_MAX bytes; the line
 * stays one line and the JSON stays valid. */
static void test_long_user_agent_is_cut(void **state)
{
    fixture_t *f = *state;
    size_t big = 100000;
    char *ua = malloc(big);
    assert_non_null(ua);
    for (size_t i = 0; i < big; i++)
        ua[i] = (char)('a' + i % 26);
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    req_header_n(&r, "User-Agent", ua, big);

    log_one(f, COMBINED, &r, "127.0.0.1", 0);
    size_t len;
    char *got = slurp(f->path, &len);
    assert_one_clean_line(got, len);
    const char *q = strstr(got, "\"-\" \"");
    assert_non_null(q);
    q += 5;
    assert_int_equal(got + len - 2 - q, SWS_ACCESS_LOG_FIELD_MAX);
    assert_memory_equal(q, ua, SWS_ACCESS_LOG_FIELD_MAX);
    assert_string_equal(got + len - 2, "\"\n");
    free(got);

    json_obj_t *o = malloc(sizeof(*o));
    assert_non_null(o);
    empty_file(f->path);
    log_one(f, JSON, &r, "127.0.0.1", 0);
    json_parse_file(f->path, o);
    assert_json_str(o, "ua", ua, SWS_ACCESS_LOG_FIELD_MAX);
    free(o);
    free(ua);
}

/* The worst line a client can cause (every field at the cut, every byte
 * escaped to six) stays within SWS_ACCESS_LOG_LINE_MAX, the room the log
 * keeps free; ASan would see a write past the buffer. */
static void test_worst_case_line_fits_line_max(void **state)
{
    fixture_t *f = *state;
    size_t big = SWS_ACCESS_LOG_FIELD_MAX + 100;
    char *bytes = malloc(big + 1);
    assert_non_null(bytes);
    memset(bytes, 0x01, big);
    bytes[big] = '\0';
    sws_request_t r;
    req_init(&r, "GET", "", "");
    r.method = r.target = r.host = (sws_str_t){ bytes, big };
    req_header_n(&r, "User-Agent", bytes, big);
    req_header_n(&r, "Referer", bytes, big);
    r.status = UINT32_MAX;
    r.body_bytes = UINT64_MAX;

    unsigned formats[] = { JSON, COMBINED };
    for (size_t i = 0; i < 2; i++) {
        empty_file(f->path);
        configure(f, formats[i], f->path);
        sws_access_log_request(&f->log, &r, bytes, NOW, UINT64_MAX);
        assert_true(f->log.len > 5 * SWS_ACCESS_LOG_FIELD_MAX * 4);
        assert_true(f->log.len <= SWS_ACCESS_LOG_LINE_MAX);
        sws_access_log_flush(&f->log);
        size_t len;
        char *got = slurp(f->path, &len);
        assert_one_clean_line(got, len);
        free(got);
    }
    free(bytes);
}

/* ---- off, buffering ---- */

static void test_off_writes_nothing(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");

    /* Not configured yet: off. */
    sws_access_log_request(&f->log, &r, "127.0.0.1", NOW, 0);
    assert_int_equal(f->log.len, 0);
    sws_access_log_flush(&f->log);

    /* Off with a path: the file is not even created. */
    log_one(f, OFF, &r, "127.0.0.1", 0);
    assert_int_equal(file_size(f->path), -1);

    /* Turned off with lines buffered: those still reach the file, later
     * requests do not. */
    configure(f, COMBINED, f->path);
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
    configure(f, OFF, f->path);
    sws_access_log_request(&f->log, &r, "2.2.2.2", NOW, 0);
    assert_int_equal(f->log.len, 0);
    sws_access_log_flush(&f->log);
    assert_file(f->path, PLAIN_LINE("1.1.1.1"));
}

static void test_nothing_written_before_flush(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    configure(f, COMBINED, f->path);
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
    sws_access_log_request(&f->log, &r, "2.2.2.2", NOW, 0);
    sws_access_log_request(&f->log, &r, "3.3.3.3", NOW, 0);
    assert_int_equal(file_size(f->path), 0);
    assert_true(f->log.len > 0);

    const char *want = PLAIN_LINE("1.1.1.1")
                       PLAIN_LINE("2.2.2.2")
                       PLAIN_LINE("3.3.3.3");
    sws_access_log_flush(&f->log);
    assert_int_equal(f->log.len, 0);
    assert_file(f->path, want);
    sws_access_log_flush(&f->log); /* nothing left: nothing written twice */
    assert_file(f->path, want);
}

/* Lines of mixed sizes until the buffer has filled several times: a flush
 * happens exactly when fewer than SWS_ACCESS_LOG_LINE_MAX bytes are free
 * (never earlier: no syscall per request), it happens before the line is
 * appended, and file + buffer always hold every line so far, whole and in
 * order. */
static void test_full_buffer_flushes_first(void **state)
{
    fixture_t *f = *state;
    size_t cap = 4 * SWS_ACCESS_LOG_BUF;
    char *all = malloc(cap);
    assert_non_null(all);
    size_t all_len = 0;
    char *ua = malloc(SWS_ACCESS_LOG_FIELD_MAX);
    assert_non_null(ua);
    memset(ua, '"', SWS_ACCESS_LOG_FIELD_MAX); /* escaped to 4 bytes each */

    configure(f, COMBINED, f->path);
    unsigned flushes = 0;
    for (unsigned i = 0; i < 2000 && flushes < 3; i++) {
        sws_request_t r;
        char target[32];
        snprintf(target, sizeof(target), "/%u", i);
        req_init(&r, "GET", target, "");
        req_header_n(&r, "User-Agent", ua, i % 3 == 0 ? SWS_ACCESS_LOG_FIELD_MAX : 10);

        size_t before_len = f->log.len;
        off_t before_size = file_size(f->path);
        sws_access_log_request(&f->log, &r, "127.0.0.1", NOW, 0);
        int flushed = file_size(f->path) != before_size;
        int must = SWS_ACCESS_LOG_BUF - before_len < SWS_ACCESS_LOG_LINE_MAX;
        assert_int_equal(flushed, must);
        flushes += (unsigned)flushed;

        /* The new line is the whole tail of the buffer. */
        size_t line_len = flushed ? f->log.len : f->log.len - before_len;
        assert_true(f->log.len <= SWS_ACCESS_LOG_BUF);
        assert_true(all_len + line_len <= cap);
        memcpy(all + all_len, f->log.buf + f->log.len - line_len, line_len);
        all_len += line_len;

        size_t file_len;
        char *got = slurp(f->path, &file_len);
        assert_int_equal(file_len + f->log.len, all_len);
        assert_memory_equal(got, all, file_len);
        assert_memory_equal(f->log.buf, all + file_len, f->log.len);
        assert_true(file_len == 0 || got[file_len - 1] == '\n');
        free(got);
    }
    assert_int_equal(flushes, 3);
    sws_access_log_flush(&f->log);
    size_t file_len;
    char *got = slurp(f->path, &file_len);
    assert_int_equal(file_len, all_len);
    assert_memory_equal(got, all, all_len);
    free(got);
    free(ua);
    free(all);
}

/* ---- destinations ---- */

static void test_reopens_when_the_path_changes(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    configure(f, COMBINED, f->path);
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);

    /* Buffered lines belong to the file they were logged for. */
    configure(f, COMBINED, f->path2);
    sws_access_log_request(&f->log, &r, "2.2.2.2", NOW, 0);
    const char *line1 = PLAIN_LINE("1.1.1.1");
    const char *line2 = PLAIN_LINE("2.2.2.2");
    assert_file(f->path, line1);
    assert_int_equal(file_size(f->path2), 0);

    /* The same path again (a reload that changed only the format): same
     * file, nothing lost or written twice. */
    int fd = f->log.fd;
    configure(f, JSON, f->path2);
    assert_int_equal(f->log.fd, fd);
    sws_access_log_request(&f->log, &r, "3.3.3.3", NOW, 0);
    sws_access_log_flush(&f->log);
    size_t len;
    char *got = slurp(f->path2, &len);
    assert_true(len > strlen(line2));
    assert_memory_equal(got, line2, strlen(line2));
    assert_true(strncmp(got + strlen(line2), "{\"ts\":", 6) == 0);
    free(got);
    assert_file(f->path, line1);
}

static void test_appends_to_an_existing_file(void **state)
{
    fixture_t *f = *state;
    int fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "old\n", 4), 4);
    close(fd);

    sws_request_t r;
    req_init(&r, "GET", "/", "");
    log_one(f, COMBINED, &r, "1.1.1.1", 0);
    assert_file(f->path, "old\n" PLAIN_LINE("1.1.1.1"));
}

/* "" and "-" are standard output, which the log writes to through a
 * descriptor of its own and never closes. Standard output is a pipe for
 * the length of the test. */
static void test_stdout_is_used_not_closed(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    fflush(stdout);
    int saved = dup(1);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], 1), 1);

    char err[256];
    int fd = sws_log_file_open("-", 1, err, sizeof(err));
    assert_true(fd > 2);
    sws_access_log_set_fd(&f->log, fd);
    int rc1 = sws_access_log_set_format(&f->log, COMBINED);
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
    int rc2 = sws_access_log_set_format(&f->log, JSON); /* the same destination */
    sws_access_log_request(&f->log, &r, "2.2.2.2", NOW, 0);
    sws_access_log_close(&f->log);
    int still_open = fcntl(1, F_GETFD) != -1;
    char out[1024];
    ssize_t n = read(p[0], out, sizeof(out) - 1);

    dup2(saved, 1);
    close(saved);
    close(p[0]);
    close(p[1]);
    assert_int_equal(rc1, 0);
    assert_int_equal(rc2, 0);
    assert_true(still_open);
    assert_true(n > 0);
    out[n] = '\0';
    const char *line1 = PLAIN_LINE("1.1.1.1");
    assert_memory_equal(out, line1, strlen(line1));
    assert_true(strncmp(out + strlen(line1), "{\"ts\":", 6) == 0);
    sws_access_log_init(&f->log); /* closed above; teardown closes again */
}

/* A write that fails (a full disk) drops the buffered lines: the worker
 * keeps serving and later lines are buffered as usual. */
static void test_failed_write_drops_lines(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    if (access("/dev/full", W_OK) != 0) {
        print_message("skipped: no writable /dev/full to make a write fail (%s)\n",
                      strerror(errno));
        skip();
    }
    configure(f, COMBINED, "/dev/full");
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
    sws_access_log_flush(&f->log);
    assert_int_equal(f->log.len, 0);
    sws_access_log_request(&f->log, &r, "2.2.2.2", NOW, 0);
    assert_true(f->log.len > 0);
}

/* A destination that stops reading (a pipe nobody drains) never blocks:
 * the pipe gets a non-blocking description of its own (the one standard
 * output shares with other processes stays blocking), what it does not
 * take stays buffered, lines that find no room are dropped and counted
 * and reported, and the reader gets whole lines only. */
static void test_unread_pipe_drops_whole_lines(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    int p[2], logp[2];
    assert_int_equal(pipe2(p, 0), 0); /* blocking, as a shell makes it */
    assert_int_equal(pipe2(logp, O_NONBLOCK), 0);
    fflush(stdout);
    int saved = dup(1);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], 1), 1);
    char err[256];
    int fd = sws_log_file_open("-", 1, err, sizeof(err));
    int shared_blocking = (fcntl(1, F_GETFL) & O_NONBLOCK) == 0;
    dup2(saved, 1);
    close(saved);
    close(p[1]);
    assert_true(fd > 2);
    assert_true(shared_blocking);
    assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);

    sws_log_init("worker 0", logp[1], SWS_LOG_INFO);
    sws_access_log_set_fd(&f->log, fd);
    assert_int_equal(sws_access_log_set_format(&f->log, COMBINED), 0);
    unsigned logged = 0;
    while (logged < 100000 && f->log.dropped == 0) {
        sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
        logged++;
        if (f->log.dropped == 0)
            sws_access_log_flush(&f->log);
    }
    assert_int_equal(f->log.dropped, 1);
    sws_access_log_flush(&f->log); /* reports at once, the first time */
    char msg[1024];
    ssize_t n = read(logp[0], msg, sizeof(msg) - 1);
    sws_log_init("test", 2, SWS_LOG_INFO);
    close(logp[0]);
    close(logp[1]);
    assert_true(n > 0);
    msg[n] = '\0';
    assert_non_null(strstr(msg, "[warn] worker 0["));
    assert_non_null(strstr(msg, "]: access log: 1 line dropped in the last 1 s "
                                "(destination not reading)\n"));

    /* What the reader gets and what is still buffered are every line
     * not dropped, in order, with no gap inside a line. */
    const char *line = PLAIN_LINE("1.1.1.1");
    size_t line_len = strlen(line);
    size_t got = 0;
    char buf[4096];
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    while ((n = read(p[0], buf, sizeof(buf))) > 0) {
        for (ssize_t i = 0; i < n; i++)
            assert_int_equal(buf[i], line[(got + (size_t)i) % line_len]);
        got += (size_t)n;
    }
    assert_int_equal(got + f->log.len, (size_t)(logged - 1) * line_len);
    close(p[0]);
}

/* After a quiet stretch, a new drop is counted from now, not from the last
 * report (an hour ago): the report says "in the last 1 s". */
static void test_drop_report_counts_from_the_new_drop(void **state)
{
    fixture_t *f = *state;
    sws_request_t r;
    req_init(&r, "GET", "/", "");
    if (access("/dev/full", W_OK) != 0) {
        print_message("skipped: no writable /dev/full (%s)\n", strerror(errno));
        skip();
    }
    configure(f, COMBINED, "/dev/full");
    f->log.reported_ms = 1; /* a report long ago (the monotonic clock's first ms) */
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    sws_log_init("worker 0", p[1], SWS_LOG_INFO);
    sws_access_log_request(&f->log, &r, "1.1.1.1", NOW, 0);
    sws_access_log_flush(&f->log);
    char msg[1024];
    ssize_t n = read(p[0], msg, sizeof(msg) - 1);
    sws_log_init("test", 2, SWS_LOG_INFO);
    close(p[0]);
    close(p[1]);
    assert_true(n > 0);
    msg[n] = '\0';
    assert_non_null(strstr(msg, "]: access log: 1 line dropped in the last 1 s "
                                "(No space left on device)\n"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_combined_line),
        T(test_combined_referer_http10_no_user_agent),
        T(test_refused_version_logged_as_carried),
        T(test_combined_without_request_line),
        T(test_proxied_request_has_upstream_fields),
        T(test_json_line),
        T(test_json_empty_fields_and_big_numbers),
        T(test_timestamps_follow_the_clock),
        T(test_combined_escapes_hostile_bytes),
        T(test_json_escapes_hostile_bytes),
        T(test_json_utf8_passes_invalid_bytes_escaped),
        T(test_long_user_agent_is_cut),
        T(test_worst_case_line_fits_line_max),
        T(test_off_writes_nothing),
        T(test_nothing_written_before_flush),
        T(test_full_buffer_flushes_first),
        T(test_reopens_when_the_path_changes),
        T(test_appends_to_an_existing_file),
        T(test_stdout_is_used_not_closed),
        T(test_failed_write_drops_lines),
        T(test_unread_pipe_drops_whole_lines),
        T(test_drop_report_counts_from_the_new_drop),
    };
    sws_log_init("test", 2, SWS_LOG_INFO);
    signal(SIGPIPE, SIG_IGN); /* as in a worker: a closed reader is EPIPE */
    return cmocka_run_group_tests_name("access log", tests, NULL, NULL);
}
