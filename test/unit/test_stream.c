/* worker/stream.c and the actions on it: each action (respond, static,
 * redirect) answers into a fake sink that applies backpressure (it takes a
 * few bytes, then refuses until the test resumes the stream), so what
 * reaches the client is the stream's pacing, not a protocol's. No socket,
 * no protocol: the sink checks order and content as the bytes come. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "shm/table.h"
#include "support/routeset_build.h"
#include "worker/conn.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/http1.h"
#include "worker/stream.h"

#define BIG_FILE (100u << 20)   /* the static file that must move with bounded memory */
#define RESPOND_BODY 10000u     /* a respond body of several sink quotas */
#define SINK_PIECE 4096u        /* the sink's own buffer: what it reads a file range into */

/* Byte i of every body the tests serve: not periodic in any power of two,
 * so a piece out of place or repeated shows. */
static unsigned char pattern(uint64_t i)
{
    return (unsigned char)(i % 251u);
}

/* ---- the fake sink ---- */

static struct sink {
    size_t quota;         /* body bytes it takes before refusing */
    unsigned heads;
    unsigned status;
    uint64_t length;
    char fields[512];     /* "Name: value\n" each, as handed over */
    uint64_t got;         /* body bytes taken, each checked against pattern() */
    int check_pattern;    /* 0: keep the body in text instead (error pages) */
    char text[1024];
    int ends;
    char trailers[128];
    int fail_reads;       /* file(): refuse with EIO this many times */
    int retracts, aborts;
    char interims[64];    /* "NNN," for each interim head, in order */
    const void *switched; /* the state an upgrade handed over */
    int fd_seen;          /* the fd a file range came from */
} sink;

static void take(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sink.check_pattern && p[i] != pattern(sink.got + i))
            fail_msg("body byte %llu is %u, expected %u", (unsigned long long)(sink.got + i),
                     p[i], pattern(sink.got + i));
        if (!sink.check_pattern && sink.got + i < sizeof(sink.text) - 1)
            sink.text[sink.got + i] = (char)p[i];
    }
    sink.got += n;
}

static int fake_head(sws_stream_t *st, const sws_header_t *h, unsigned n, size_t room)
{
    (void)room;
    sink.heads++;
    sink.status = st->req.status;
    sink.length = st->length;
    sink.fields[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        size_t at = strlen(sink.fields);
        snprintf(sink.fields + at, sizeof(sink.fields) - at, "%.*s: %.*s\n", (int)h[i].name.len,
                 h[i].name.p, (int)h[i].value.len, h[i].value.p);
    }
    return 0;
}

static size_t fake_data(sws_stream_t *st, const char *p, size_t n)
{
    (void)st;
    if (n > sink.quota)
        n = sink.quota;
    take((const unsigned char *)p, n);
    sink.quota -= n;
    return n;
}

static int64_t fake_file(sws_stream_t *st, int fd, off_t off, uint64_t len)
{
    (void)st;
    unsigned char buf[SINK_PIECE];
    sink.fd_seen = fd;
    if (sink.fail_reads > 0) {
        sink.fail_reads--;
        errno = EIO;
        return -1;
    }
    size_t n = len < sink.quota ? (size_t)len : sink.quota;
    if (n > sizeof(buf))
        n = sizeof(buf);
    if (n == 0)
        return 0;
    assert_int_equal(pread(fd, buf, n, off), (ssize_t)n);
    take(buf, n);
    sink.quota -= n;
    return (int64_t)n;
}

static int fake_end(sws_stream_t *st, const sws_header_t *t, unsigned n)
{
    (void)st;
    if (sink.quota == 0)
        return 0; /* the end takes room too: it waits like the body */
    for (unsigned i = 0; i < n; i++) {
        size_t at = strlen(sink.trailers);
        snprintf(sink.trailers + at, sizeof(sink.trailers) - at, "%.*s=%.*s;",
                 (int)t[i].name.len, t[i].name.p, (int)t[i].value.len, t[i].value.p);
    }
    sink.ends++;
    return 1;
}

static int fake_retract(sws_stream_t *st)
{
    (void)st;
    sink.retracts++;
    sink.heads--;
    return sink.got == 0 ? 0 : -1;
}

static int fake_interim(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n)
{
    (void)st, (void)h, (void)n;
    size_t at = strlen(sink.interims);
    snprintf(sink.interims + at, sizeof(sink.interims) - at, "%u,", status);
    return 0;
}

static int fake_upgrade(sws_stream_t *st, const sws_proto_ops_t *ops, void *state)
{
    (void)st, (void)ops;
    sink.switched = state;
    return 0;
}

static void fake_abort(sws_stream_t *st)
{
    (void)st;
    sink.aborts++;
}

static const sws_stream_sink_t fake_sink = {
    .head = fake_head,
    .data = fake_data,
    .file = fake_file,
    .end = fake_end,
    .retract = fake_retract,
    .interim = fake_interim,
    .upgrade = fake_upgrade,
    .abort = fake_abort,
};

/* ---- a worker without sockets ---- */

typedef struct fixture {
    char dir[64];          /* the static root */
    void *table;
    size_t table_size;
    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters;
    sws_worker_ctx_t ctx;
    sws_conn_t conn;       /* never opened: the stream's owner for counting */
    sws_stream_t st;
} fixture_t;

static void write_pattern_file(const char *path, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    static unsigned char buf[1 << 20];
    for (uint64_t off = 0; off < size; off += sizeof(buf)) {
        size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(off + i);
        assert_int_equal(write(fd, buf, n), (ssize_t)n);
    }
    close(fd);
}

/* host "*": respond /hello (a patterned body and two fields), static
 * /files/ with a temporary directory as its root (files in its files/),
 * redirect /old. */
static void *build_table(const char *dir, size_t *table_size)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "*");
    char *body = malloc(RESPOND_BODY + 1);
    assert_non_null(body);
    for (size_t i = 0; i < RESPOND_BODY; i++)
        body[i] = (char)pattern(i);
    body[RESPOND_BODY] = '\0';
    Sws__Route *r = host_respond(h, SWS__ROUTE__MATCH__EXACT, "/hello", "");
    free(r->respond->body.data);
    r->respond->body.data = (uint8_t *)body;
    r->respond->body.len = RESPOND_BODY;
    respond_header(r, "Content-Type", "application/octet-stream");
    respond_header(r, "X-Route", "hello");

    host_static(h, SWS__ROUTE__MATCH__PREFIX, "/files/", dir);
    host_redirect(h, SWS__ROUTE__MATCH__EXACT, "/old", 301, "https://new.test/");
    return rs_table(rs, 1, table_size);
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    sws_log_init("test", 2, SWS_LOG_ERROR);
    strcpy(f->dir, "/tmp/sws-stream-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char files[96];
    snprintf(files, sizeof(files), "%s/files", f->dir); /* root + the request's path */
    assert_int_equal(mkdir(files, 0755), 0);
    f->table = build_table(f->dir, &f->table_size);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_conn_set_init(&f->set, &f->loop, &sws_http1_proto, sws_handlers_dispatch, &f->counters);
    sws_conn_set_configure(&f->set, f->table, NULL, SWS_STR("scalws-test"));
    f->set.ctx = &f->ctx;
    f->conn.set = &f->set;
    f->conn.io.fd = -1;
    sws_stream_init(&f->st);
    memset(&sink, 0, sizeof(sink));
    sink.check_pattern = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char path[128];
    sws_stream_release(&f->st);
    sws_stream_free(&f->st, 0);
    sws_worker_ctx_close(&f->ctx);
    sws_loop_close(&f->loop);
    snprintf(path, sizeof(path), "%s/files/big.bin", f->dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/files/small.bin", f->dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/files", f->dir);
    rmdir(path);
    rmdir(f->dir);
    free(f->table);
    free(f);
    return 0;
}

/* A request for path as a protocol starts it, handed to handler: the
 * worker's dispatch (a complete request), or its head handler (the head
 * of a request with a body). */
static void start_request(fixture_t *f, const char *method, const char *path,
                          sws_stream_handler_t handler)
{
    sws_stream_t *st = &f->st;
    sws_stream_start(st, &f->conn, &fake_sink);
    sws_request_t *r = &st->req;
    r->method = (sws_str_t){ method, strlen(method) };
    r->is_head = strcmp(method, "HEAD") == 0;
    r->target = r->path = (sws_str_t){ path, strlen(path) };
    r->host = SWS_STR("site.test");
    r->keep_alive = 1;
    r->table = f->table;
    r->settings = f->set.settings;
    handler(st);
}

/* A complete GET (or HEAD) for path. */
static void request(fixture_t *f, const char *method, const char *path)
{
    start_request(f, method, path, sws_handlers_dispatch);
}

/* The head of a POST for path: the route is looked up then. */
static void post_head(fixture_t *f, const char *path)
{
    start_request(f, "POST", path, sws_handlers_dispatch_head);
    assert_int_equal(sink.heads, 0); /* a local action answers at the body's end */
}

/* Resume with quotas of 1 to 4096 bytes until the stream ended; returns
 * the largest copy of body the stream held meanwhile. */
static size_t pump(fixture_t *f, uint64_t max_rounds)
{
    sws_stream_t *st = &f->st;
    size_t held = st->pend_cap;
    for (uint64_t round = 0; !sws_stream_ended(st); round++) {
        if (round == max_rounds)
            fail_msg("not ended after %llu resumes (%llu bytes)", (unsigned long long)round,
                     (unsigned long long)sink.got);
        sink.quota = 1 + (size_t)(round * 7919 % SINK_PIECE);
        sws_stream_resume(st);
        if (st->pend_cap > held)
            held = st->pend_cap;
    }
    return held;
}

/* ---- the actions under backpressure ---- */

/* 100 MB of file through a sink that takes at most 4 KiB a time: every
 * byte in order, and the stream never holds a byte of it in memory (the
 * range stays a range; the sink's own 4 KiB buffer is all there is). */
static void test_static_file_moves_at_the_sinks_pace_with_bounded_memory(void **state)
{
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/files/big.bin", f->dir);
    write_pattern_file(path, BIG_FILE);
    sink.quota = 3; /* the handler's own call: a few bytes, then full */
    request(f, "GET", "/files/big.bin");
    assert_int_equal(sink.heads, 1);
    assert_int_equal(sink.status, 200);
    assert_int_equal(sink.length, BIG_FILE);
    assert_non_null(strstr(sink.fields, "Accept-Ranges: bytes\n"));
    assert_non_null(strstr(sink.fields, "Content-Type: application/octet-stream\n"));
    assert_int_equal(sink.got, 3);
    assert_false(sws_stream_ended(&f->st));
    assert_true(sws_stream_blocked(&f->st));

    size_t held = pump(f, BIG_FILE);
    assert_int_equal(held, 0);
    assert_int_equal(sink.got, BIG_FILE);
    assert_int_equal(f->st.req.body_bytes, BIG_FILE);
    assert_int_equal(sink.ends, 1);
    /* The fd is the stream's until the release, which closes it. */
    assert_true(fcntl(sink.fd_seen, F_GETFD) >= 0);
    sws_stream_release(&f->st);
    assert_int_equal(fcntl(sink.fd_seen, F_GETFD), -1);
    assert_int_equal(f->counters.requests, 1);
}

/* A range of the same kind of file: only its bytes, at the sink's pace. */
static void test_static_range_is_paced_too(void **state)
{
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/files/small.bin", f->dir);
    write_pattern_file(path, 100000);
    sws_stream_start(&f->st, &f->conn, &fake_sink);
    sink.quota = 0;
    /* The request carries a Range field: 0-49999 is 50,000 bytes. */
    sws_request_t *r = &f->st.req;
    static const char range[] = "bytes=0-49999";
    r->headers[0] = (sws_header_t){ SWS_STR("Range"), SWS_STR(range) };
    r->nheaders = 1;
    r->method = SWS_STR("GET");
    r->path = r->target = SWS_STR("/files/small.bin");
    r->host = SWS_STR("site.test");
    r->table = f->table;
    r->settings = f->set.settings;
    sws_handlers_dispatch(&f->st);
    assert_int_equal(sink.status, 206);
    assert_int_equal(sink.length, 50000);
    assert_non_null(strstr(sink.fields, "Content-Range: bytes 0-49999/100000\n"));
    assert_int_equal(pump(f, 100000), 0);
    assert_int_equal(sink.got, 50000);
}

/* ---- routing a request with a body ---- */

/* Routed once, at its head: the dispatch at the end of the body answers
 * from the route found then. Shown by renaming the route's path in the
 * table in between: a second lookup would miss it and answer 404. */
static void test_request_with_a_body_is_routed_once(void **state)
{
    fixture_t *f = *state;
    post_head(f, "/hello");
    char *at = memmem(f->table, f->table_size, "/hello", 6);
    assert_non_null(at);
    assert_null(memmem(at + 1, f->table_size - (size_t)(at + 1 - (char *)f->table), "/hello", 6));
    at[5] = 'p';
    sink.quota = RESPOND_BODY + 1;
    sws_handlers_dispatch(&f->st); /* the body is over: the protocol's dispatch */
    assert_int_equal(sink.status, 200);
    assert_non_null(strstr(sink.fields, "X-Route: hello\n"));
    assert_int_equal(sink.got, RESPOND_BODY);
    assert_true(sws_stream_ended(&f->st));
}

/* A reload between the head and the end of the body: the generation the
 * request was routed in is no longer guaranteed, so it is routed again in
 * the one the worker holds at the end (here /hello answers "two"). */
static void test_reload_during_the_body_routes_in_the_new_generation(void **state)
{
    fixture_t *f = *state;
    Sws__RouteSet *rs = rs_new();
    host_respond(rs_host(rs, "*"), SWS__ROUTE__MATCH__EXACT, "/hello", "two");
    size_t size;
    void *gen2 = rs_table(rs, 2, &size);

    post_head(f, "/hello");
    f->st.req.table = gen2; /* as the protocol sets it: the generation held now */
    sink.check_pattern = 0;
    sink.quota = 100;
    sws_handlers_dispatch(&f->st);
    assert_int_equal(sink.status, 200);
    assert_null(strstr(sink.fields, "X-Route"));
    assert_string_equal(sink.text, "two");
    assert_true(sws_stream_ended(&f->st));
    sws_stream_release(&f->st);
    free(gen2);
}

/* The respond body (from the table, which a reload may replace) is copied
 * once into the stream when the sink cannot take it, then paced: in
 * order, and the copy is no larger than the body's size class. */
static void test_respond_body_is_paced_in_order(void **state)
{
    fixture_t *f = *state;
    sink.quota = 7;
    request(f, "GET", "/hello");
    assert_int_equal(sink.status, 200);
    assert_int_equal(sink.length, RESPOND_BODY);
    assert_string_equal(sink.fields,
                        "Content-Type: application/octet-stream\nX-Route: hello\n");
    assert_int_equal(sink.got, 7);
    size_t held = pump(f, RESPOND_BODY);
    assert_true(held >= RESPOND_BODY - 7 && held <= 2 * RESPOND_BODY);
    assert_int_equal(sink.got, RESPOND_BODY);
    assert_int_equal(sink.ends, 1);
}

/* Interim answers go to the sink before the head, any number of them; a
 * 100 answers the client's wait (expect_continue); none after the head,
 * and 101 only as an upgrade, which hands the state over and logs the
 * exchange as 101 when it is released. */
static void test_interim_answers_and_the_upgrade(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    static int tunnel_state;
    sws_stream_start(st, &f->conn, &fake_sink);
    st->expect_continue = 1;
    assert_int_equal(sws_stream_interim(st, 103, NULL, 0), 0);
    assert_true(st->expect_continue);
    assert_int_equal(sws_stream_interim(st, 100, NULL, 0), 0);
    assert_false(st->expect_continue);
    assert_int_equal(sws_stream_interim(st, 101, NULL, 0), -1); /* that is an upgrade */
    assert_int_equal(sws_stream_interim(st, 200, NULL, 0), -1);
    sws_stream_respond(st, 204, NULL, 0, NULL, 0);
    assert_int_equal(sws_stream_interim(st, 103, NULL, 0), -1); /* after the head */
    assert_string_equal(sink.interims, "103,100,");
    sws_stream_release(st);

    sws_stream_start(st, &f->conn, &fake_sink);
    assert_int_equal(sws_stream_upgrade(st, NULL, 0, &sws_http1_proto, &tunnel_state), 0);
    assert_string_equal(sink.interims, "103,100,101,");
    assert_ptr_equal(sink.switched, &tunnel_state);
    assert_int_equal(st->req.status, 101);
    assert_false(sws_stream_ended(st)); /* open until the connection closes */
    unsigned before = f->counters.requests;
    sws_stream_release(st);
    assert_int_equal(f->counters.requests, before + 1);
}

/* HEAD: the head GET would get, no body byte. */
static void test_respond_head_has_length_and_no_body(void **state)
{
    fixture_t *f = *state;
    sink.quota = 0;
    request(f, "HEAD", "/hello");
    pump(f, 10);
    assert_int_equal(sink.status, 200);
    assert_int_equal(sink.length, RESPOND_BODY);
    assert_int_equal(sink.got, 0);
    assert_int_equal(f->st.req.body_bytes, 0);
    assert_int_equal(sink.ends, 1);
}

/* A redirect is a head with a Location field and an end, even through a
 * sink with no room for body. */
static void test_redirect_is_a_location_field(void **state)
{
    fixture_t *f = *state;
    sink.quota = 0;
    request(f, "GET", "/old");
    assert_int_equal(sink.status, 301);
    assert_string_equal(sink.fields, "Location: https://new.test/\n");
    pump(f, 10);
    assert_int_equal(sink.got, 0);
    assert_int_equal(sink.ends, 1);
}

/* A file that cannot be read after its head went to the sink: the head is
 * taken back and the client gets a 500 instead. */
static void test_unreadable_file_turns_into_a_500(void **state)
{
    fixture_t *f = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/files/small.bin", f->dir);
    write_pattern_file(path, 1000);
    sink.fail_reads = 1;
    sink.check_pattern = 0;
    sink.quota = 4096;
    request(f, "GET", "/files/small.bin");
    assert_int_equal(sink.retracts, 1);
    assert_int_equal(sink.heads, 1);
    assert_int_equal(sink.status, 500);
    pump(f, 100);
    assert_non_null(strstr(sink.text, "<h1>500 Internal Server Error</h1>"));
    assert_int_equal(fcntl(sink.fd_seen, F_GETFD), -1); /* closed when replaced */
}

/* ---- a producer that makes its body piece by piece ---- */

#define PIECE 3000u
#define PIECES 40u

static struct producer {
    unsigned written;     /* pieces written */
    int proceeds;
    int proceeded_while_blocked;
    int disposed;
} producer;

static void producer_write(sws_stream_t *st)
{
    unsigned char buf[PIECE];
    while (!sws_stream_blocked(st) && producer.written < PIECES) {
        for (size_t i = 0; i < PIECE; i++)
            buf[i] = pattern((uint64_t)producer.written * PIECE + i);
        assert_int_equal(sws_stream_write(st, buf, PIECE), 0);
        producer.written++;
    }
    if (producer.written == PIECES) {
        static const sws_header_t t = { SWS_STR("X-Sum"), SWS_STR("ok") };
        assert_int_equal(sws_stream_end(st, &t, 1), 0);
    }
}

static void producer_proceed(sws_stream_t *st)
{
    producer.proceeds++;
    if (sws_stream_blocked(st))
        producer.proceeded_while_blocked++;
    producer_write(st);
}

static void producer_dispose(sws_stream_t *st)
{
    (void)st;
    producer.disposed++;
}

static const sws_stream_source_t producer_source = { producer_proceed, producer_dispose };

/* The producer is told when it may write more, and only then; so the
 * stream never holds more than one of its pieces, and the trailers come
 * after the last byte. */
static void test_source_is_resumed_when_the_sink_drained(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    memset(&producer, 0, sizeof(producer));
    sws_stream_start(st, &f->conn, &fake_sink);
    st->req.method = SWS_STR("GET");
    sink.quota = 100;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, SWS_STREAM_LENGTH_UNKNOWN), 0);
    sws_stream_set_source(st, &producer_source, NULL);
    producer_write(st);
    assert_int_equal(producer.written, 1);
    size_t held = pump(f, (uint64_t)PIECE * PIECES);
    assert_true(held <= 2 * PIECE);
    assert_int_equal(producer.written, PIECES);
    assert_true(producer.proceeds >= 1);
    assert_int_equal(producer.proceeded_while_blocked, 0);
    assert_int_equal(sink.got, (uint64_t)PIECE * PIECES);
    assert_string_equal(sink.trailers, "X-Sum=ok;");
    sws_stream_release(st);
    assert_int_equal(producer.disposed, 1);
}

/* ---- pipe ranges and room (the proxy's splice path) ---- */

static int64_t fake_pipe(sws_stream_t *st, int fd, uint64_t len)
{
    (void)st;
    unsigned char buf[SINK_PIECE];
    if (len > sink.quota)
        return 0; /* all or nothing */
    assert_true(len <= sizeof(buf));
    assert_int_equal(read(fd, buf, (size_t)len), (ssize_t)len);
    take(buf, (size_t)len);
    sink.quota -= (size_t)len;
    return (int64_t)len;
}

static size_t fake_room(const sws_stream_t *st)
{
    (void)st;
    return sink.quota;
}

static const sws_stream_sink_t pipe_sink = {
    .head = fake_head,
    .data = fake_data,
    .file = fake_file,
    .pipe = fake_pipe,
    .room = fake_room,
    .end = fake_end,
    .retract = fake_retract,
    .abort = fake_abort,
};

static unsigned pipe_proceeds;

static void pipe_proceed(sws_stream_t *st)
{
    (void)st;
    pipe_proceeds++;
}

static const sws_stream_source_t pipe_source = { .proceed = pipe_proceed };

/* Fill a pipe with the body bytes [from, from + n). */
static void pipe_fill(int wr, uint64_t from, size_t n)
{
    unsigned char buf[SINK_PIECE];
    assert_true(n <= sizeof(buf));
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(from + i);
    assert_int_equal(write(wr, buf, n), (ssize_t)n);
}

/* A pipe range the sink cannot take yet is held (the stream is blocked,
 * nothing copied), goes out whole on resume, and the source hears
 * proceed only at the resume after that: until then the bytes may still
 * be in the pipe (the sink empties it in its own time). The end follows
 * the range. */
static void test_pipe_range_is_held_and_proceed_waits_for_the_sink(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pipe_proceeds = 0;
    sws_stream_start(st, &f->conn, &pipe_sink);
    st->req.method = SWS_STR("GET");
    sink.quota = 1000;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 3000), 0);
    assert_true(sws_stream_can_pipe(st));
    sws_stream_set_source(st, &pipe_source, NULL);
    assert_int_equal(sws_stream_write(st, (const char[]){ (char)pattern(0) }, 1), 0);
    assert_int_equal(sws_stream_room(st), 999);
    pipe_fill(fds[1], 1, 2999);
    assert_int_equal(sws_stream_send_pipe(st, fds[0], 2999), 0);
    assert_true(sws_stream_blocked(st));
    assert_int_equal(sws_stream_room(st), 0);
    assert_int_equal(st->pend_len, 0); /* a range, never a copy */
    sink.quota = 4000;
    sws_stream_resume(st);
    assert_int_equal(sink.got, 3000);
    assert_int_equal(pipe_proceeds, 0); /* the sink took it just now */
    sws_stream_resume(st);
    assert_int_equal(pipe_proceeds, 1);
    assert_int_equal(st->req.body_bytes, 3000);
    /* A range held by the stream: the end waits behind it. */
    sws_stream_release(st);
    sws_stream_start(st, &f->conn, &pipe_sink);
    st->req.method = SWS_STR("GET");
    sink.quota = 0;
    sink.got = 0;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 50), 0);
    pipe_fill(fds[1], 0, 50);
    assert_int_equal(sws_stream_send_pipe(st, fds[0], 50), 0);
    assert_int_equal(sws_stream_end(st, NULL, 0), 0);
    assert_int_equal(sink.ends, 0);
    sink.quota = 51; /* the fake sink's end takes room too */
    sws_stream_resume(st);
    assert_int_equal(sink.got, 50);
    assert_true(sws_stream_ended(st));
    close(fds[0]);
    close(fds[1]);
}

static void test_pipe_taken_at_once_still_waits_for_the_next_resume(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pipe_proceeds = 0;
    sws_stream_start(st, &f->conn, &pipe_sink);
    st->req.method = SWS_STR("GET");
    sink.quota = 100;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 200), 0);
    sws_stream_set_source(st, &pipe_source, NULL);
    pipe_fill(fds[1], 0, 100);
    assert_int_equal(sws_stream_send_pipe(st, fds[0], 100), 0);
    assert_false(sws_stream_blocked(st));
    sws_stream_resume(st); /* the sink emptied it */
    assert_int_equal(pipe_proceeds, 1);
    close(fds[0]);
    close(fds[1]);
}

/* No pipe where the sink has no pipe operation, the length is unknown or
 * the response has no body; a producer that tries anyway cuts it. */
static void test_pipe_refused_where_it_cannot_go(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    sws_stream_start(st, &f->conn, &pipe_sink);
    st->req.method = SWS_STR("GET");
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, SWS_STREAM_LENGTH_UNKNOWN), 0);
    assert_false(sws_stream_can_pipe(st));
    sws_stream_release(st);
    sws_stream_start(st, &f->conn, &pipe_sink);
    st->req.method = SWS_STR("HEAD");
    st->req.is_head = 1;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 100000), 0);
    assert_false(sws_stream_can_pipe(st));
    sws_stream_release(st);
    sws_stream_start(st, &f->conn, &fake_sink);
    st->req.method = SWS_STR("GET");
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 100000), 0);
    assert_false(sws_stream_can_pipe(st));
    assert_int_equal(sws_stream_room(st), SIZE_MAX); /* a sink that does not say */
    assert_int_equal(sws_stream_send_pipe(st, 0, 10), -1);
    assert_int_equal(sink.aborts, 1);
}

/* ---- what the stream refuses ---- */

static void test_interim_status_becomes_500_and_a_second_head_is_refused(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    sws_stream_start(st, &f->conn, &fake_sink);
    sink.quota = 1000;
    assert_int_equal(sws_stream_head(st, 103, NULL, 0, 0), 0);
    assert_int_equal(sink.status, 500);
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 0), -1);
    assert_int_equal(sink.heads, 1);
}

static void test_body_longer_than_its_length_is_cut(void **state)
{
    fixture_t *f = *state;
    sws_stream_t *st = &f->st;
    sws_stream_start(st, &f->conn, &fake_sink);
    sink.quota = 1000;
    sink.check_pattern = 0;
    assert_int_equal(sws_stream_head(st, 200, NULL, 0, 4), 0);
    assert_int_equal(sws_stream_write(st, "12345", 5), -1);
    assert_int_equal(sink.aborts, 1);
    assert_int_equal(sink.got, 0);
    assert_true(sws_stream_ended(st));
    assert_int_equal(st->req.keep_alive, 0);
}

/* A stream is counted once, when released, also when cut short. */
static void test_release_counts_once(void **state)
{
    fixture_t *f = *state;
    sink.quota = 0;
    request(f, "GET", "/hello");
    assert_int_equal(f->counters.requests, 0); /* not before the release */
    assert_int_equal(f->set.inflight, 1);
    sws_stream_release(&f->st);
    sws_stream_release(&f->st);
    assert_int_equal(f->set.inflight, 0);
    assert_int_equal(f->counters.requests, 1);
    assert_int_equal(f->conn.requests, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_static_file_moves_at_the_sinks_pace_with_bounded_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_range_is_paced_too, setup, teardown),
        cmocka_unit_test_setup_teardown(test_respond_body_is_paced_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_with_a_body_is_routed_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_during_the_body_routes_in_the_new_generation,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_interim_answers_and_the_upgrade, setup, teardown),
        cmocka_unit_test_setup_teardown(test_respond_head_has_length_and_no_body, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_redirect_is_a_location_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreadable_file_turns_into_a_500, setup, teardown),
        cmocka_unit_test_setup_teardown(test_source_is_resumed_when_the_sink_drained, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_interim_status_becomes_500_and_a_second_head_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_longer_than_its_length_is_cut, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_release_counts_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_range_is_held_and_proceed_waits_for_the_sink,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_taken_at_once_still_waits_for_the_next_resume,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_refused_where_it_cannot_go, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
