/* libFuzzer target: HTTP/2 frames from a client (worker/http2.c, nghttp2's
 * session, worker/conn.c's reads and output) on a real connection over a
 * socketpair that switched from HTTP/1 on the h2c preface.
 *
 * Input: byte 0 (low 4 bits) is the number n of chosen cuts; the next n
 * bytes are the lengths of the first n reads (each byte + 1); the rest,
 * after the preface the target sends itself, is what the client sends
 * (its SETTINGS first, in a well-formed input), in those reads; then the
 * client shuts down its side. Requests with a body go to a consumer that
 * says it is full every other piece and resumes at once (the window is
 * given back late); the others are answered at once, but for paths that
 * start with "/h", answered by the next turn of the loop (a producer that
 * outlives the turn, as the proxy; forgotten if its stream is released
 * first).
 *
 * Beyond crashes and sanitizer reports it checks what the handler sees: a
 * path, field names present, a body within max_body_size; and that every
 * stream is released once the connection is gone (the set's inflight).
 * No network, no file system, nothing logged per input. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "core/str.h"
#include "worker/conn.h"
#include "worker/http1.h"
#include "worker/http2.h"
#include "test/fuzz/cuts.h"

static sws_settings_t settings;

static void check_request(const sws_request_t *r)
{
    if (r->path.len == 0)
        abort();
    for (unsigned i = 0; i < r->nheaders; i++)
        if (r->headers[i].name.len == 0)
            abort();
    if (r->request_body_bytes > r->settings->max_body_size)
        abort();
}

/* Streams whose producer answers later (HELD_MAX at a time). */
#define HELD_MAX 8
static sws_stream_t *held[HELD_MAX];

static void held_proceed(sws_stream_t *st)
{
    (void)st;
}

static void held_dispose(sws_stream_t *st)
{
    for (unsigned i = 0; i < HELD_MAX; i++)
        if (held[i] == st)
            held[i] = NULL;
}

static const sws_stream_source_t held_source = { .proceed = held_proceed,
                                                 .dispose = held_dispose };

static int hold(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    if (r->path.len < 2 || memcmp(r->path.p, "/h", 2) != 0)
        return 0;
    for (unsigned i = 0; i < HELD_MAX; i++) {
        if (held[i] == NULL) {
            held[i] = st;
            sws_stream_set_source(st, &held_source, NULL);
            return 1;
        }
    }
    return 0;
}

static void answer(sws_stream_t *st);

static void held_answer(void)
{
    for (unsigned i = 0; i < HELD_MAX; i++) {
        sws_stream_t *st = held[i];
        held[i] = NULL;
        if (st != NULL)
            answer(st);
    }
}

static void handler(sws_stream_t *st)
{
    check_request(&st->req);
    if (!hold(st))
        answer(st);
}

static void answer(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    char body[128];
    int n = snprintf(body, sizeof(body), "%.*s body=%llu", (int)(r->path.len > 64 ? 64 : r->path.len),
                     r->path.p, (unsigned long long)r->request_body_bytes);
    static const sws_header_t trailer = { SWS_STR("X-T"), SWS_STR("1") };
    if (sws_stream_head(st, 200, NULL, 0, SWS_STREAM_LENGTH_UNKNOWN) == 0 &&
        sws_stream_write(st, body, (size_t)n) == 0)
        sws_stream_end(st, &trailer, r->method_id == 1 /* GET */);
}

static unsigned pieces;

static int body_data(sws_stream_t *st, const char *p, size_t n)
{
    (void)p;
    (void)n;
    check_request(&st->req);
    if (++pieces % 2 == 0)
        return 0;
    sws_stream_body_resume(st); /* the windows come back at the next sweep, after this call */
    return 1;
}

static void body_end(sws_stream_t *st)
{
    handler(st);
}

static const sws_stream_body_ops_t body_ops = { .data = body_data, .end = body_end };

static void head_handler(sws_stream_t *st)
{
    check_request(&st->req);
    if (st->req.path.len > 1)
        sws_stream_set_body(st, &body_ops);
}

static void turn(sws_loop_t *loop, sws_conn_set_t *set, int peer)
{
    for (int i = 0; i < 8; i++) {
        if (sws_loop_run_once(loop, 0) < 0)
            abort();
        held_answer();
        sws_conn_set_reap(set);
        char tmp[16384];
        while (read(peer, tmp, sizeof(tmp)) > 0)
            ;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    static sws_shm_counters_t counters;
    if (!ready) {
        sws_log_init("fuzz", 2, SWS_LOG_CRIT);
        settings = sws_conn_default_settings;
        /* Small limits, so inputs reach them. */
        settings.max_header_size = 1024;
        settings.max_headers = 16;
        settings.max_body_size = 4096;
        ready = 1;
    }
    const uint8_t *in;
    size_t len, cuts[FUZZ_CUTS_MAX + 1], ncuts;
    if (fuzz_cuts(data, size, &in, &len, cuts, &ncuts) < 0)
        return 0;

    sws_loop_t loop;
    sws_conn_set_t set;
    int sv[2];
    if (sws_loop_init(&loop) < 0)
        abort();
    sws_conn_set_init(&set, &loop, &sws_http1_proto, handler, &counters);
    set.h2_proto = &sws_http2_proto;
    set.head_handler = head_handler;
    sws_conn_set_configure(&set, NULL, &settings, SWS_STR("fuzz"));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    if (sws_conn_open(&set, sv[0], NULL, 0) == NULL)
        abort();
    if (send(sv[1], SWS_HTTP2_PREFACE, SWS_HTTP2_PREFACE_LEN, MSG_NOSIGNAL) !=
        (ssize_t)SWS_HTTP2_PREFACE_LEN)
        abort();
    size_t off = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = cuts[i];
        for (int stalls = 0; off < end && stalls < 64;) {
            ssize_t n = send(sv[1], in + off, end - off, MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno == EAGAIN)
                stalls++;
            else
                break; /* the server closed: the rest is not read */
            turn(&loop, &set, sv[1]);
        }
        off = end;
    }
    shutdown(sv[1], SHUT_WR);
    turn(&loop, &set, sv[1]);
    sws_conn_set_close_all(&set);
    if (set.inflight != 0)
        abort();
    sws_conn_set_destroy(&set);
    sws_loop_close(&loop);
    close(sv[1]);
    return 0;
}
