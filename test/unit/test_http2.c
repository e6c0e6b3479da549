/* worker/http2.c on worker/conn.c: a real connection over a socketpair
 * that starts as HTTP/1 and switches on the h2c preface, driven by the
 * event loop, and an nghttp2 client session in the test speaking to it.
 * A handler answers "METHOD path host=HOST body=N"; /hold answers only
 * when the test says so. No table, no supervisor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "core/log.h"
#include "worker/conn.h"
#include "worker/http1.h"
#include "worker/http2.h"
#include "worker/stream.h"

#define MAX_IDS 512

typedef struct reply {
    int status;
    char body[256];
    size_t body_len;
    uint64_t body_total; /* all DATA bytes, also beyond body[] */
    int mixed;           /* a DATA byte differed from the body's first */
    int closed;
    uint32_t close_error;
} reply_t;

typedef struct fixture {
    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters;
    sws_settings_t st;
    int peer;
    sws_conn_t *conn;
    nghttp2_session *client;
    reply_t replies[MAX_IDS];  /* by (stream id - 1) / 2 */
    int goaway;                /* a GOAWAY came */
    uint32_t goaway_error;
    int32_t goaway_last;
    int eof;
    char raw[512];             /* the first bytes the server sent */
    size_t raw_len;
    sws_stream_t *held;        /* /hold's stream, not answered yet */
    int hold_window;           /* the client gives its window back only when told */
    unsigned handled;          /* requests the handler saw */
    /* /sink's bodies: a consumer that takes every byte (never full) and
     * passes them on only when the test drains it. */
    struct sink {
        sws_stream_t *st;      /* NULL once the handler answered it */
        size_t held;           /* taken, not passed on */
        uint64_t total;
    } sinks[MAX_IDS];
    unsigned nsinks;
    size_t sink_held;          /* all sinks' held */
} fixture_t;

static fixture_t *current;

static reply_t *reply_of(fixture_t *f, int32_t id)
{
    assert_true(id > 0 && (id - 1) / 2 < MAX_IDS);
    return &f->replies[(id - 1) / 2];
}

static const sws_stream_source_t hold_source = { 0 };

static struct sink *sink_of(fixture_t *f, const sws_stream_t *st)
{
    for (unsigned i = 0; i < f->nsinks; i++)
        if (f->sinks[i].st == st)
            return &f->sinks[i];
    fail_msg("no sink for this stream");
    return NULL;
}

static int sink_data(sws_stream_t *st, const char *p, size_t n)
{
    (void)p;
    struct sink *k = sink_of(current, st);
    k->held += n;
    k->total += n;
    current->sink_held += n;
    return 0; /* never full: only the connection's budget holds the client */
}

static void sink_end(sws_stream_t *st)
{
    (void)st;
}

static const sws_stream_body_ops_t sink_body = { .data = sink_data, .end = sink_end };

static void head_handler(sws_stream_t *st)
{
    if (!sws_str_eq(st->req.path, SWS_STR("/sink")))
        return;
    assert_true(current->nsinks < MAX_IDS);
    current->sinks[current->nsinks++] = (struct sink){ .st = st };
    sws_stream_set_body(st, &sink_body);
}

/* Each sink still open passes on what it holds (sws_stream_body_resume,
 * as the proxy does once its upstream took the bytes). */
static void sinks_drain(fixture_t *f)
{
    for (unsigned i = 0; i < f->nsinks; i++) {
        struct sink *k = &f->sinks[i];
        if (k->st == NULL || k->held == 0)
            continue;
        f->sink_held -= k->held;
        k->held = 0;
        sws_stream_body_resume(k->st);
    }
}

static void handler(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    current->handled++;
    if (sws_str_eq(r->path, SWS_STR("/sink"))) {
        struct sink *k = sink_of(current, st);
        current->sink_held -= k->held; /* released with the stream */
        k->held = 0;
        k->st = NULL;
    }
    if (sws_str_eq(r->path, SWS_STR("/hold"))) {
        sws_stream_set_source(st, &hold_source, NULL); /* answers later */
        current->held = st;
        return;
    }
    char path[64]; /* the slice has no NUL of its own */
    snprintf(path, sizeof(path), "%.*s", (int)r->path.len, r->path.p);
    unsigned fill_len;
    char fill_byte;
    if (sscanf(path, "/fill/%u/%c", &fill_len, &fill_byte) == 2) {
        static char fill[20000];
        assert_true(fill_len <= sizeof(fill));
        memset(fill, fill_byte, fill_len);
        sws_stream_respond(st, 200, NULL, 0, fill, fill_len);
        return;
    }
    if (sws_str_eq(r->path, SWS_STR("/big"))) {
        static char big[200000];
        memset(big, 'b', sizeof(big));
        sws_stream_respond(st, 200, NULL, 0, big, sizeof(big));
        return;
    }
    char body[256];
    int n = snprintf(body, sizeof(body), "%.*s %.*s host=%.*s body=%llu", (int)r->method.len,
                     r->method.p, (int)r->path.len, r->path.p, (int)r->host.len, r->host.p,
                     (unsigned long long)r->request_body_bytes);
    if (sws_str_eq(r->path, SWS_STR("/long"))) /* the fields, their values' lengths */
        for (unsigned i = 0; i < r->nheaders && n < 200; i++)
            n += snprintf(body + n, sizeof(body) - (size_t)n, "%s%.*s:%zu", i == 0 ? " fields=" : ",",
                          (int)r->headers[i].name.len, r->headers[i].name.p,
                          r->headers[i].value.len);
    for (unsigned i = 0; i < r->ntrailers && n < 200; i++) {
        const sws_header_t *t = &r->headers[r->nheaders + i];
        int shown = t->value.len > 16 ? 0 : (int)t->value.len; /* a long one: its length */
        n += snprintf(body + n, sizeof(body) - (size_t)n, "%s%.*s:%.*s#%zu", i == 0 ? " trailers=" : ",",
                      (int)t->name.len, t->name.p, shown, t->value.p, t->value.len);
    }
    const sws_str_t *cookie = sws_request_header(r, "cookie");
    if (cookie != NULL && n < 200)
        n += snprintf(body + n, sizeof(body) - (size_t)n, " cookie=%.*s", (int)cookie->len,
                      cookie->p);
    static const sws_header_t field = { SWS_STR("X-Test"), SWS_STR("1") };
    sws_stream_respond(st, 200, &field, 1, body, (size_t)n);
}

/* ---- the client ---- */

static ssize_t client_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags,
                           void *user)
{
    (void)s;
    (void)flags;
    fixture_t *f = user;
    ssize_t n = write(f->peer, data, len);
    if (n < 0 && errno == EAGAIN)
        return NGHTTP2_ERR_WOULDBLOCK;
    return n < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : n;
}

static int client_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                         size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                         void *user)
{
    (void)s;
    (void)flags;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        char v[8] = { 0 };
        memcpy(v, value, valuelen < 7 ? valuelen : 7);
        int status = atoi(v);
        if (status >= 200)
            reply_of(user, frame->hd.stream_id)->status = status;
    }
    return 0;
}

static int client_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                       size_t len, void *user)
{
    (void)s;
    (void)flags;
    reply_t *r = reply_of(user, id);
    for (size_t i = 0; i < len; i++)
        r->mixed |= data[i] != (r->body_total > 0 ? (uint8_t)r->body[0] : data[0]);
    size_t room = sizeof(r->body) - 1 - r->body_len;
    memcpy(r->body + r->body_len, data, len < room ? len : room);
    r->body_len += len < room ? len : room;
    r->body_total += len;
    return 0;
}

static int client_close(nghttp2_session *s, int32_t id, uint32_t error, void *user)
{
    (void)s;
    reply_t *r = reply_of(user, id);
    r->closed = 1;
    r->close_error = error;
    return 0;
}

static int client_frame(nghttp2_session *s, const nghttp2_frame *frame, void *user)
{
    (void)s;
    fixture_t *f = user;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        f->goaway++;
        f->goaway_error = frame->goaway.error_code;
        f->goaway_last = frame->goaway.last_stream_id;
    }
    return 0;
}

static void client_new(fixture_t *f, const nghttp2_settings_entry *iv, size_t niv)
{
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    assert_int_equal(nghttp2_option_new(&opt), 0);
    /* Until the server's SETTINGS arrive the client would hold itself to
     * 100 streams: a test of the server's own limit needs more. */
    nghttp2_option_set_peer_max_concurrent_streams(opt, 1000);
    nghttp2_option_set_no_auto_window_update(opt, f->hold_window);
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_send_callback(cb, client_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, client_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, client_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, client_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, client_frame);
    assert_int_equal(nghttp2_session_client_new2(&f->client, cb, f, opt), 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    assert_int_equal(nghttp2_submit_settings(f->client, NGHTTP2_FLAG_NONE, iv, niv), 0);
}

/* What the server sent goes to the client session. */
static void client_read(fixture_t *f)
{
    for (;;) {
        uint8_t buf[16384];
        ssize_t n = read(f->peer, buf, sizeof(buf));
        if (n == 0)
            f->eof = 1;
        if (n <= 0)
            return;
        size_t keep = sizeof(f->raw) - 1 - f->raw_len;
        memcpy(f->raw + f->raw_len, buf, (size_t)n < keep ? (size_t)n : keep);
        f->raw_len += (size_t)n < keep ? (size_t)n : keep;
        if (f->client != NULL)
            nghttp2_session_mem_recv(f->client, buf, (size_t)n);
    }
}

static void pump(fixture_t *f)
{
    for (int i = 0; i < 32; i++) {
        if (f->client != NULL)
            nghttp2_session_send(f->client);
        assert_int_equal(sws_loop_run_once(&f->loop, 0), 0);
        sws_conn_set_reap(&f->set);
        client_read(f);
    }
}

/* Wait (bounded) for timers: the loop blocks until the next deadline. */
static void run_until_eof(fixture_t *f, int max_iterations)
{
    for (int i = 0; i < max_iterations && !f->eof; i++) {
        if (f->client != NULL)
            nghttp2_session_send(f->client);
        assert_int_equal(sws_loop_run_once(&f->loop, 100), 0);
        sws_conn_set_reap(&f->set);
        client_read(f);
    }
}

static int32_t request(fixture_t *f, const char *method, const char *path,
                       nghttp2_data_provider *body)
{
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)method, 7, strlen(method), 0 },
        { (uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0 },
        { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
        { (uint8_t *)":authority", (uint8_t *)"a.test", 10, 6, 0 },
    };
    int32_t id = nghttp2_submit_request(f->client, NULL, nv, 4, body, NULL);
    assert_true(id > 0);
    return id;
}

static size_t body_left; /* what body_read still sends, without a source of its own */

/* A body of 'x': src->ptr, when set, is this stream's size_t left. */
static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)s;
    (void)id;
    (void)user;
    size_t *left = src->ptr != NULL ? src->ptr : &body_left;
    size_t n = len < *left ? len : *left;
    memset(buf, 'x', n);
    *left -= n;
    if (*left == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    int sv[2];
    assert_non_null(f);
    current = f;
    sws_log_init("test", 2, SWS_LOG_ERROR);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_conn_set_init(&f->set, &f->loop, &sws_http1_proto, handler, &f->counters);
    f->set.h2_proto = &sws_http2_proto;
    f->set.head_handler = head_handler;
    f->st = sws_conn_default_settings;
    f->st.body_timeout_ms = 300;
    sws_conn_set_configure(&f->set, NULL, &f->st, SWS_STR("scalws-test"));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    f->peer = sv[1];
    f->conn = sws_conn_open(&f->set, sv[0], NULL, 0);
    assert_non_null(f->conn);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_conn_set_destroy(&f->set);
    sws_loop_close(&f->loop);
    nghttp2_session_del(f->client);
    close(f->peer);
    free(f);
    return 0;
}

static void apply(fixture_t *f)
{
    sws_conn_set_configure(&f->set, NULL, &f->st, f->set.server_name);
}

/* ---- tests ---- */

static void test_prior_knowledge_switches_and_answers(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    int32_t id = request(f, "GET", "/a/../b?q=1", NULL);
    pump(f);
    reply_t *r = reply_of(f, id);
    assert_int_equal(f->conn->proto, &sws_http2_proto);
    assert_int_equal(r->status, 200);
    assert_true(r->closed);
    assert_int_equal(r->close_error, NGHTTP2_NO_ERROR);
    /* The path is normalized by the dispatch, not here: the handler sees
     * what the client sent before '?', and :authority as the host. */
    assert_string_equal(r->body, "GET /a/../b host=a.test body=0");
    assert_int_equal(f->counters.requests, 1);
}

/* fuzz_http2 found the empty, bufferless case. */
static void test_preface_match(void **state)
{
    (void)state;
    assert_int_equal(sws_http2_preface_match(NULL, 0), 0);
    assert_int_equal(sws_http2_preface_match("PRI * HT", 8), 0);
    assert_int_equal(sws_http2_preface_match("PRI * HTTP/2.0\r\nHost", 20), -1);
    assert_int_equal(sws_http2_preface_match("GET / HTTP/1.1\r\n", 16), -1);
    assert_int_equal(sws_http2_preface_match(SWS_HTTP2_PREFACE "\0\0", SWS_HTTP2_PREFACE_LEN + 2),
                     1);
}

static void test_preface_cut_into_reads_still_switches(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(write(f->peer, SWS_HTTP2_PREFACE, 10), 10);
    pump(f);
    assert_int_equal(f->conn->proto, &sws_http1_proto);
    assert_int_equal(f->eof, 0);
    assert_int_equal(write(f->peer, SWS_HTTP2_PREFACE + 10, SWS_HTTP2_PREFACE_LEN - 10),
                     (ssize_t)(SWS_HTTP2_PREFACE_LEN - 10));
    pump(f);
    assert_int_equal(f->conn->proto, &sws_http2_proto);
}

static void test_no_h2_proto_keeps_http1_answer(void **state)
{
    fixture_t *f = *state;
    f->set.h2_proto = NULL;
    assert_int_equal(write(f->peer, SWS_HTTP2_PREFACE, SWS_HTTP2_PREFACE_LEN),
                     (ssize_t)SWS_HTTP2_PREFACE_LEN);
    pump(f);
    assert_non_null(strstr(f->raw, "HTTP/1.1 505 "));
}

static void test_concurrent_streams_on_one_connection(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    int32_t ids[10];
    char path[16];
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof(path), "/s%d", i);
        ids[i] = request(f, "GET", path, NULL);
    }
    pump(f);
    for (int i = 0; i < 10; i++) {
        char want[64];
        snprintf(want, sizeof(want), "GET /s%d host=a.test body=0", i);
        assert_int_equal(reply_of(f, ids[i])->status, 200);
        assert_string_equal(reply_of(f, ids[i])->body, want);
    }
    assert_int_equal(f->counters.requests, 10);
    assert_int_equal(f->set.inflight, 0);
}

/* body_read, then the trailers a gRPC client sends after its message
 * (the stream ends with them, not with the last DATA). */
static ssize_t body_read_trailers(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                                  uint32_t *flags, nghttp2_data_source *src, void *user)
{
    ssize_t n = body_read(s, id, buf, len, flags, src, user);
    if (*flags & NGHTTP2_DATA_FLAG_EOF) {
        static char pad[1500]; /* grows the header buffer after the first two */
        memset(pad, 'p', sizeof(pad));
        const nghttp2_nv t[] = {
            { (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, 0 },
            { (uint8_t *)"x-checksum", (uint8_t *)"abc", 10, 3, 0 },
            { (uint8_t *)"x-pad", (uint8_t *)pad, 5, sizeof(pad), 0 },
        };
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        assert_int_equal(nghttp2_submit_trailer(s, id, t, 3), 0); /* copies */
    }
    return n;
}

/* The request's trailers reach the handler after its fields (a proxy to
 * an HTTP/2 member passes them on), across a header buffer that grows. */
static void test_request_trailers_are_kept(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    nghttp2_data_provider dp = { .read_callback = body_read_trailers };
    body_left = 3 * SWS_HTTP2_WINDOW;
    int32_t id = request(f, "POST", "/up", &dp);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    char want[128];
    snprintf(want, sizeof(want),
             "POST /up host=a.test body=%u trailers=grpc-status:0#1,x-checksum:abc#3,x-pad:#1500",
             3 * SWS_HTTP2_WINDOW);
    assert_string_equal(reply_of(f, id)->body, want);
}

/* Trailers beyond the head's limits (max_header_size counts head and
 * trailers together) reset their stream, never cut: the connection
 * serves the next request. */
static void test_request_trailers_over_the_limit_reset_the_stream(void **state)
{
    fixture_t *f = *state;
    f->st.max_header_size = 1024;
    apply(f);
    client_new(f, NULL, 0);
    nghttp2_data_provider dp = { .read_callback = body_read_trailers };
    body_left = 10;
    int32_t id = request(f, "POST", "/up", &dp);
    pump(f);
    assert_true(reply_of(f, id)->closed);
    assert_int_equal(reply_of(f, id)->close_error, NGHTTP2_INTERNAL_ERROR);
    assert_int_equal(reply_of(f, id)->status, 0);
    int32_t id2 = request(f, "GET", "/next", NULL);
    pump(f);
    assert_int_equal(reply_of(f, id2)->status, 200);
}

static void test_request_body_larger_than_the_window(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    nghttp2_data_provider dp = { .read_callback = body_read };
    body_left = 3 * SWS_HTTP2_WINDOW; /* needs the window given back */
    int32_t id = request(f, "POST", "/up", &dp);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    char want[64];
    snprintf(want, sizeof(want), "POST /up host=a.test body=%u", 3 * SWS_HTTP2_WINDOW);
    assert_string_equal(reply_of(f, id)->body, want);
}

static void test_body_over_max_body_size_413(void **state)
{
    fixture_t *f = *state;
    f->st.max_body_size = 1000;
    apply(f);
    client_new(f, NULL, 0);
    nghttp2_data_provider dp = { .read_callback = body_read };
    body_left = 5000;
    int32_t id = request(f, "POST", "/up", &dp);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 413);
    assert_true(reply_of(f, id)->closed);
    /* The connection goes on. */
    int32_t id2 = request(f, "GET", "/next", NULL);
    pump(f);
    assert_int_equal(reply_of(f, id2)->status, 200);
}

static void test_header_list_over_max_header_size_431(void **state)
{
    fixture_t *f = *state;
    f->st.max_header_size = 1024;
    apply(f);
    client_new(f, NULL, 0);
    static char big[2000];
    memset(big, 'v', sizeof(big));
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0 },
        { (uint8_t *)":path", (uint8_t *)"/", 5, 1, 0 },
        { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
        { (uint8_t *)":authority", (uint8_t *)"a.test", 10, 6, 0 },
        { (uint8_t *)"x-big", (uint8_t *)big, 5, sizeof(big), 0 },
    };
    int32_t id = nghttp2_submit_request(f->client, NULL, nv, 5, NULL, NULL);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 431);
    int32_t id2 = request(f, "GET", "/next", NULL);
    pump(f);
    assert_int_equal(reply_of(f, id2)->status, 200);
}

/* A field that grows the stream's header buffer: the slices made before
 * follow it (ASan saw the name left behind). */
static void test_long_field_kept_whole(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    static char big[3000];
    memset(big, 'v', sizeof(big));
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0 },
        { (uint8_t *)":path", (uint8_t *)"/long", 5, 5, 0 },
        { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
        { (uint8_t *)":authority", (uint8_t *)"a.test", 10, 6, 0 },
        /* as long as "expect", so that looking for it reads the name */
        { (uint8_t *)"x-long", (uint8_t *)big, 6, sizeof(big), 0 },
        { (uint8_t *)"x-after", (uint8_t *)"1", 7, 1, 0 },
    };
    int32_t id = nghttp2_submit_request(f->client, NULL, nv, 6, NULL, NULL);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    assert_string_equal(reply_of(f, id)->body, "GET /long host=a.test body=0 fields=x-long:3000,x-after:1");
}

static void test_split_cookies_joined_in_place(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0 },
        { (uint8_t *)":path", (uint8_t *)"/long", 5, 5, 0 },
        { (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
        { (uint8_t *)":authority", (uint8_t *)"a.test", 10, 6, 0 },
        { (uint8_t *)"cookie", (uint8_t *)"a=1", 6, 3, 0 },
        { (uint8_t *)"x-mid", (uint8_t *)"22", 5, 2, 0 },
        { (uint8_t *)"cookie", (uint8_t *)"", 6, 0, 0 },
        { (uint8_t *)"cookie", (uint8_t *)"b=2", 6, 3, 0 },
    };
    int32_t id = nghttp2_submit_request(f->client, NULL, nv, 8, NULL, NULL);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    assert_string_equal(reply_of(f, id)->body,
                        "GET /long host=a.test body=0 fields=cookie:10,x-mid:2 cookie=a=1; ; b=2");
}

static void test_streams_beyond_the_limit_refused(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    /* All sent before the server's SETTINGS reach the client, so the
     * client does not hold them back itself. */
    int32_t ids[SWS_HTTP2_MAX_STREAMS + 4];
    for (unsigned i = 0; i < SWS_HTTP2_MAX_STREAMS + 4; i++)
        ids[i] = request(f, "GET", "/hold", NULL);
    nghttp2_session_send(f->client);
    pump(f);
    unsigned refused = 0, open = 0;
    for (unsigned i = 0; i < SWS_HTTP2_MAX_STREAMS + 4; i++) {
        reply_t *r = reply_of(f, ids[i]);
        if (r->closed && r->close_error == NGHTTP2_REFUSED_STREAM)
            refused++;
        else if (!r->closed)
            open++;
    }
    assert_int_equal(refused, 4);
    assert_int_equal(open, SWS_HTTP2_MAX_STREAMS);
    assert_int_equal(f->goaway, 0);
}

static void test_rapid_reset_gets_enhance_your_calm(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    pump(f);
    for (unsigned i = 0; i < 2 * SWS_HTTP2_RESET_FLOOR && !f->goaway; i++) {
        int32_t id = request(f, "GET", "/hold", NULL);
        nghttp2_session_send(f->client);
        nghttp2_submit_rst_stream(f->client, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        pump(f);
    }
    assert_int_equal(f->goaway, 1);
    assert_int_equal(f->goaway_error, NGHTTP2_ENHANCE_YOUR_CALM);
    run_until_eof(f, 50);
    assert_true(f->eof);
}

static void test_some_resets_are_fine(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    for (unsigned i = 0; i < 3 * SWS_HTTP2_RESET_FLOOR; i++) {
        int32_t id = request(f, "GET", i % 3 == 0 ? "/hold" : "/x", NULL);
        if (i % 3 == 0) {
            nghttp2_session_send(f->client);
            nghttp2_submit_rst_stream(f->client, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        }
        pump(f);
    }
    assert_int_equal(f->goaway, 0);
}

/* Answered streams in between do not dilute the resets (the old rule,
 * more than half of the streams opened, never tripped on this). */
static void test_resets_between_answered_streams_get_enhance_your_calm(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    pump(f);
    for (unsigned i = 0; i < SWS_HTTP2_RESET_WINDOW && !f->goaway; i++) {
        request(f, "GET", "/x", NULL);
        int32_t id = request(f, "GET", "/hold", NULL);
        nghttp2_session_send(f->client);
        pump(f);
        nghttp2_submit_rst_stream(f->client, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        pump(f);
    }
    assert_int_equal(f->goaway, 1);
    assert_int_equal(f->goaway_error, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* A request and its reset in one read: the handler never runs. */
static void test_request_reset_in_its_read_not_handled(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    pump(f);
    int32_t id = request(f, "GET", "/hold", NULL);
    nghttp2_session_send(f->client); /* in the socket, not read yet */
    nghttp2_submit_rst_stream(f->client, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    int32_t next = request(f, "GET", "/x", NULL);
    pump(f);
    assert_int_equal(f->handled, 1);
    assert_null(f->held);
    assert_int_equal(reply_of(f, next)->status, 200);
}

static void test_drain_sends_goaway_and_finishes_streams(void **state)
{
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    int32_t id = request(f, "GET", "/hold", NULL);
    pump(f);
    assert_non_null(f->held);
    sws_conn_set_drain(&f->set);
    pump(f);
    assert_int_equal(f->goaway, 2); /* the notice, then the one naming the last stream */
    assert_int_equal(f->goaway_error, NGHTTP2_NO_ERROR);
    assert_int_equal(f->goaway_last, id);
    assert_int_equal(f->eof, 0); /* the stream in flight goes on */
    sws_stream_respond(f->held, 200, NULL, 0, "late", 4);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    assert_string_equal(reply_of(f, id)->body, "late");
    run_until_eof(f, 50);
    assert_true(f->eof);
}

static void test_zero_window_reader_closed_by_timeout(void **state)
{
    fixture_t *f = *state;
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0 } };
    client_new(f, iv, 1);
    int32_t id = request(f, "GET", "/big", NULL);
    pump(f);
    assert_int_equal(reply_of(f, id)->status, 200);
    assert_int_equal(reply_of(f, id)->body_total, 0);
    run_until_eof(f, 50); /* body_timeout_ms 300 */
    assert_true(f->eof);
    assert_int_equal(f->set.inflight, 0);
}

static void test_large_response_paced_by_the_window(void **state)
{
    enum { WINDOW = 16384 };
    fixture_t *f = *state;
    f->hold_window = 1;
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW } };
    client_new(f, iv, 1);
    int32_t id = request(f, "GET", "/big", NULL);
    reply_t *r = reply_of(f, id);
    uint64_t given = 0; /* bytes the client gave back to its window */
    for (int i = 0; i < 2 * 200000 / WINDOW + 10 && !r->closed; i++) {
        pump(f);
        /* Held, the window lets a window's worth out, and the server fills
         * it: no more (paced), no less (the stream resumed). */
        assert_true(r->body_total <= given + WINDOW);
        assert_true(r->closed || r->body_total == given + WINDOW);
        assert_int_equal(nghttp2_session_consume(f->client, id, r->body_total - given), 0);
        given = r->body_total;
    }
    assert_true(r->closed);
    assert_int_equal(r->body_total, 200000);
    assert_int_equal(r->close_error, NGHTTP2_NO_ERROR);
}

/* Streams reuse the memory of those released before them (spares, with
 * their buffers): a stream reset with body bytes still unsent leaves
 * none of them to the next, and streams of different sizes in flight
 * together, a round after another, each get their own body exactly. */
static void test_spare_streams_start_clean(void **state)
{
    enum { WINDOW = 1000, ROUNDS = 3, STREAMS = 8 };
    fixture_t *f = *state;
    f->hold_window = 1;
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW } };
    client_new(f, iv, 1);
    /* 3000 bytes into a 1000-byte window: 2000 wait in the stream's buffer
     * when the client resets it. */
    int32_t cut = request(f, "GET", "/fill/3000/a", NULL);
    pump(f);
    assert_int_equal(reply_of(f, cut)->body_total, WINDOW);
    assert_int_equal(nghttp2_submit_rst_stream(f->client, NGHTTP2_FLAG_NONE, cut, NGHTTP2_CANCEL),
                     0);
    assert_int_equal(nghttp2_session_consume_connection(f->client, WINDOW), 0);
    pump(f);
    static const unsigned sizes[STREAMS] = { 10, 2500, 1, 900, 4000, 17, 1800, 3 };
    for (int round = 0; round < ROUNDS; round++) {
        int32_t ids[STREAMS];
        uint64_t given[STREAMS] = { 0 };
        for (int i = 0; i < STREAMS; i++) {
            char path[32];
            /* Sizes rotate by round, so each stream's memory served another size before. */
            snprintf(path, sizeof(path), "/fill/%u/%c", sizes[(i + round) % STREAMS],
                     'b' + round * STREAMS + i);
            ids[i] = request(f, "GET", path, NULL);
        }
        int open = STREAMS;
        for (int k = 0; k < 50 && open > 0; k++) {
            pump(f);
            open = 0;
            for (int i = 0; i < STREAMS; i++) {
                reply_t *r = reply_of(f, ids[i]);
                size_t got = (size_t)(r->body_total - given[i]);
                if (got > 0 && r->closed) /* its window is gone with it, not the connection's */
                    assert_int_equal(nghttp2_session_consume_connection(f->client, got), 0);
                else if (got > 0)
                    assert_int_equal(nghttp2_session_consume(f->client, ids[i], got), 0);
                given[i] = r->body_total;
                open += !r->closed;
            }
        }
        for (int i = 0; i < STREAMS; i++) {
            reply_t *r = reply_of(f, ids[i]);
            assert_true(r->closed);
            assert_int_equal(r->status, 200);
            assert_int_equal(r->body_total, sizes[(i + round) % STREAMS]);
            assert_int_equal(r->body[0], 'b' + round * STREAMS + i);
            assert_false(r->mixed);
        }
    }
    assert_int_equal(f->set.inflight, 0);
}

/* Finding 7: 100 streams whose consumer takes every byte and passes none
 * on would each get window after window. The connection's budget holds
 * them all together; as the consumers pass bytes on, the window comes
 * back and every body completes. */
static void test_request_bodies_held_within_the_connection_budget(void **state)
{
    enum { STREAMS = 100, BODY = 256 * 1024 };
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    static size_t left[STREAMS];
    int32_t ids[STREAMS];
    for (int i = 0; i < STREAMS; i++) {
        left[i] = BODY;
        nghttp2_data_provider dp = { .source.ptr = &left[i], .read_callback = body_read };
        ids[i] = request(f, "POST", "/sink", &dp);
    }
    pump(f);
    assert_int_equal(f->nsinks, STREAMS);
    assert_true(f->sink_held <= SWS_HTTP2_BODY_BUDGET);
    assert_true(f->sink_held > SWS_HTTP2_BODY_BUDGET / 2); /* the client used the budget */
    int done = 0;
    for (int round = 0; round < 2 * STREAMS * BODY / (int)SWS_HTTP2_BODY_BUDGET + 20 && !done;
         round++) {
        sinks_drain(f);
        pump(f);
        assert_true(f->sink_held <= SWS_HTTP2_BODY_BUDGET);
        done = 1;
        for (int i = 0; i < STREAMS; i++)
            done &= reply_of(f, ids[i])->closed;
    }
    assert_true(done);
    for (int i = 0; i < STREAMS; i++) {
        assert_int_equal(reply_of(f, ids[i])->status, 200);
        assert_string_equal(reply_of(f, ids[i])->body, "POST /sink host=a.test body=262144");
    }
    assert_int_equal(f->set.inflight, 0);
}

/* A body nghttp2's client never sends: the test writes its DATA. */
static ssize_t body_deferred(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                             uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)s;
    (void)id;
    (void)buf;
    (void)len;
    (void)flags;
    (void)src;
    (void)user;
    return NGHTTP2_ERR_DEFERRED;
}

/* A frame header (RFC 9113 4.1) for DATA. */
static void data_frame_head(uint8_t *h, size_t len, int32_t id)
{
    h[0] = (uint8_t)(len >> 16);
    h[1] = (uint8_t)(len >> 8);
    h[2] = (uint8_t)len;
    h[3] = NGHTTP2_DATA;
    h[4] = 0;
    h[5] = (uint8_t)((uint32_t)id >> 24);
    h[6] = (uint8_t)(id >> 16);
    h[7] = (uint8_t)(id >> 8);
    h[8] = (uint8_t)id;
}

/* A client that ignores the window (DATA written past nghttp2's client,
 * each stream within its own window, all together past the budget) is a
 * connection error: FLOW_CONTROL_ERROR, and no byte over the budget is
 * taken. */
static void test_body_past_the_connection_window_is_flow_control_error(void **state)
{
    enum { STREAMS = 20, FRAME = 16384 };
    fixture_t *f = *state;
    client_new(f, NULL, 0);
    nghttp2_data_provider later = { .read_callback = body_deferred };
    int32_t ids[STREAMS];
    for (int i = 0; i < STREAMS; i++)
        ids[i] = request(f, "POST", "/sink", &later);
    pump(f);
    assert_int_equal(f->nsinks, STREAMS);
    static uint8_t frame[9 + FRAME];
    memset(frame + 9, 'x', FRAME);
    for (int i = 0; i < STREAMS && !f->goaway && !f->eof; i++) {
        for (size_t sent = 0; sent < SWS_HTTP2_WINDOW && !f->goaway && !f->eof;) {
            size_t len = SWS_HTTP2_WINDOW - sent < FRAME ? SWS_HTTP2_WINDOW - sent : FRAME;
            data_frame_head(frame, len, ids[i]);
            size_t off = 0;
            for (int tries = 0; off < 9 + len && tries < 1000 && !f->goaway && !f->eof; tries++) {
                ssize_t n = write(f->peer, frame + off, 9 + len - off);
                if (n > 0)
                    off += (size_t)n;
                else
                    pump(f); /* the socket is full: let the server read */
            }
            sent += len;
        }
    }
    pump(f);
    assert_int_equal(f->goaway, 1);
    assert_int_equal(f->goaway_error, NGHTTP2_FLOW_CONTROL_ERROR);
    assert_true(f->sink_held <= SWS_HTTP2_BODY_BUDGET);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_prior_knowledge_switches_and_answers, setup,
                                        teardown),
        cmocka_unit_test(test_preface_match),
        cmocka_unit_test_setup_teardown(test_preface_cut_into_reads_still_switches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_h2_proto_keeps_http1_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_streams_on_one_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_request_body_larger_than_the_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_request_trailers_are_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_trailers_over_the_limit_reset_the_stream,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_over_max_body_size_413, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_list_over_max_header_size_431, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_long_field_kept_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_cookies_joined_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_streams_beyond_the_limit_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rapid_reset_gets_enhance_your_calm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_some_resets_are_fine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resets_between_answered_streams_get_enhance_your_calm,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_reset_in_its_read_not_handled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drain_sends_goaway_and_finishes_streams, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_zero_window_reader_closed_by_timeout, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_request_bodies_held_within_the_connection_budget,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_past_the_connection_window_is_flow_control_error,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_spare_streams_start_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_response_paced_by_the_window, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
