/* libFuzzer target: the HTTP/1.1 request path (llhttp, worker/http1.c's own
 * checks, worker/conn.c's reads and buffers) on a real connection over a
 * socketpair, with the input cut into reads at points the input chooses.
 *
 * Input: byte 0 (low 4 bits) is the number n of chosen cuts; the next n
 * bytes are the lengths of the first n reads (each byte + 1); the rest is
 * the last read. The client then shuts down its side.
 *
 * Beyond crashes and sanitizer reports it checks:
 *   - what the handler sees: a path, field names that are tokens, a body
 *     within max_body_size;
 *   - the answers do not depend on how the input was cut: the same bytes
 *     sent in one read get the same answers (Date lines and the 100
 *     Continue, which is sent only when the body is not already there,
 *     set aside).
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
#include "test/fuzz/cuts.h"

#define OUT_CAP (256u * 1024)

typedef struct run {
    char out[OUT_CAP]; /* what the client received */
    size_t out_len;
    int truncated;     /* more than OUT_CAP arrived: not compared */
} run_t;

static sws_settings_t settings;

static void check_request(const sws_request_t *r)
{
    if (r->path.len == 0)
        abort();
    for (unsigned i = 0; i < r->nheaders; i++) {
        sws_str_t n = r->headers[i].name;
        if (n.len == 0)
            abort();
        for (size_t k = 0; k < n.len; k++)
            if (!sws_is_tchar((unsigned char)n.p[k]))
                abort();
    }
    if (r->request_body_bytes > r->settings->max_body_size)
        abort();
}

/* Answers with what it parsed, so a difference in parsing is a difference
 * in the output. */
static void handler(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    check_request(r);
    char body[256];
    int n = snprintf(body, sizeof(body), "%.*s %.*s host=%.*s body=%llu",
                     (int)r->method.len, r->method.p, (int)(r->path.len > 64 ? 64 : r->path.len),
                     r->path.p, (int)(r->host.len > 64 ? 64 : r->host.len), r->host.p,
                     (unsigned long long)r->request_body_bytes);
    sws_stream_respond(st, 200, NULL, 0, body, (size_t)n);
}

static void drain(int fd, run_t *run)
{
    for (;;) {
        char tmp[16384];
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n <= 0)
            return;
        if (run->out_len + (size_t)n > OUT_CAP) {
            run->truncated = 1;
            continue;
        }
        memcpy(run->out + run->out_len, tmp, (size_t)n);
        run->out_len += (size_t)n;
    }
}

static void turn(sws_loop_t *loop, sws_conn_set_t *set, int peer, run_t *run)
{
    for (int i = 0; i < 8; i++) {
        if (sws_loop_run_once(loop, 0) < 0)
            abort();
        sws_conn_set_reap(set);
        drain(peer, run);
    }
}

/* Send the pieces, one read each, then EOF; collect the answers. */
static void run_pieces(const uint8_t *data, const size_t *cuts, size_t ncuts, run_t *run)
{
    static sws_shm_counters_t counters;
    sws_loop_t loop;
    sws_conn_set_t set;
    int sv[2];
    run->out_len = 0;
    run->truncated = 0;
    if (sws_loop_init(&loop) < 0)
        abort();
    sws_conn_set_init(&set, &loop, &sws_http1_proto, handler, &counters);
    sws_conn_set_configure(&set, NULL, &settings, SWS_STR("fuzz"));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    if (sws_conn_open(&set, sv[0], NULL, 0) == NULL)
        abort();
    size_t off = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = cuts[i];
        for (int stalls = 0; off < end && stalls < 64;) {
            ssize_t n = send(sv[1], data + off, end - off, MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno == EAGAIN)
                stalls++;
            else
                break; /* the server closed: the rest is not read */
            turn(&loop, &set, sv[1], run);
        }
        off = end;
    }
    shutdown(sv[1], SHUT_WR);
    turn(&loop, &set, sv[1], run);
    sws_conn_set_destroy(&set);
    sws_loop_close(&loop);
    close(sv[1]);
}

/* The answers without what may legitimately differ between cuts. */
static size_t normalize(const run_t *run, char *dst)
{
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    size_t len = 0;
    for (size_t i = 0; i < run->out_len;) {
        const char *p = run->out + i;
        size_t left = run->out_len - i;
        if (left >= sizeof(cont) - 1 && memcmp(p, cont, sizeof(cont) - 1) == 0) {
            i += sizeof(cont) - 1;
            continue;
        }
        if (left >= 6 && memcmp(p, "Date: ", 6) == 0 && (i == 0 || p[-1] == '\n')) {
            const char *lf = memchr(p, '\n', left);
            i = lf != NULL ? (size_t)(lf - run->out) + 1 : run->out_len;
            continue;
        }
        dst[len++] = *p;
        i++;
    }
    return len;
}

static run_t split_run, whole_run;
static char split_norm[OUT_CAP], whole_norm[OUT_CAP];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        sws_log_init("fuzz", 2, SWS_LOG_CRIT);
        settings = sws_conn_default_settings;
        /* Small limits, so inputs reach them. */
        settings.max_request_line = 256;
        settings.max_header_size = 2048;
        settings.max_headers = 16;
        settings.max_body_size = 1024;
        ready = 1;
    }
    const uint8_t *req;
    size_t len, cuts[FUZZ_CUTS_MAX + 1], ncuts;
    if (fuzz_cuts(data, size, &req, &len, cuts, &ncuts) < 0)
        return 0;

    run_pieces(req, cuts, ncuts, &split_run);
    size_t whole_cut = len;
    run_pieces(req, &whole_cut, 0, &whole_run);
    if (split_run.truncated || whole_run.truncated)
        return 0;
    size_t a = normalize(&split_run, split_norm), b = normalize(&whole_run, whole_norm);
    if (a != b || memcmp(split_norm, whole_norm, a) != 0) {
        fprintf(stderr, "answers differ with the cuts:\n--- cut:\n%.*s\n--- whole:\n%.*s\n",
                (int)a, split_norm, (int)b, whole_norm);
        abort();
    }
    return 0;
}
