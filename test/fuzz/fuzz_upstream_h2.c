/* libFuzzer target: a member's bytes as the HTTP/2 client to members reads
 * them (worker/upstream_h2.c: nghttp2's client session and our callbacks:
 * the response head and its fields, the body under flow control, the
 * trailers, GOAWAY, RST_STREAM, a stream closed or refused), on a
 * socketpair adopted as the member's connection, so that nothing touches
 * the network.
 *
 * Input: byte 0 bit 0: the user holds the body it gets (the window opens
 * when it says so, a turn later); bit 1: the request has a body of 3
 * bytes and trailers; bit 2: a second request on the same connection;
 * byte 1: where the member's bytes are cut into two writes (the loop
 * turns between them); the rest: what the member sends (a server's
 * SETTINGS first, for nghttp2 to go further). The member then closes.
 *
 * Beyond crashes and sanitizer reports it checks: each request gets
 * exactly one end or failure, nothing after it, and the connection is
 * gone once the member closed (no stream left behind). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "worker/upstream_h2.h"

#define MEMBER 7
#define TURNS 64

typedef struct user {
    sws_upstream_h2_stream_t *hs;
    int hold;
    int body_given;
    unsigned done; /* end or failed calls */
    int held;
} user_t;

static int u_head(void *data, unsigned status, const sws_header_t *h, unsigned n, uint64_t len)
{
    (void)status;
    (void)len;
    user_t *u = data;
    if (u->done)
        abort();
    volatile char sink = 0;
    for (unsigned i = 0; i < n; i++) /* every slice readable (ASan) */
        for (size_t k = 0; k < h[i].name.len + h[i].value.len; k++)
            sink ^= k < h[i].name.len ? h[i].name.p[k] : h[i].value.p[k - h[i].name.len];
    (void)sink;
    return 0;
}

static int u_data(void *data, const char *p, size_t n)
{
    user_t *u = data;
    if (u->done || (n > 0 && p == NULL))
        abort();
    if (u->hold)
        u->held = 1;
    return u->hold ? 1 : 0;
}

static void u_end(void *data, const sws_header_t *t, unsigned n)
{
    (void)t;
    (void)n;
    user_t *u = data;
    u->done++;
    u->hs = NULL;
}

static void u_failed(void *data, sws_upstream_h2_fail_t kind, const char *why)
{
    (void)kind;
    user_t *u = data;
    if (why == NULL)
        abort();
    u->done++;
    u->hs = NULL;
}

static size_t u_body(void *data, char *buf, size_t len, int *eof)
{
    user_t *u = data;
    size_t n = 0;
    if (!u->body_given && len >= 3) {
        memcpy(buf, "abc", 3);
        n = 3;
        u->body_given = 1;
    }
    *eof = u->body_given;
    return n;
}

static const sws_header_t trailers[] = { { SWS_STR("x-sum"), SWS_STR("3") } };

static unsigned u_trailers(void *data, const sws_header_t **t)
{
    (void)data;
    *t = trailers;
    return 1;
}

static const sws_upstream_h2_ops_t ops = {
    .head = u_head,
    .data = u_data,
    .end = u_end,
    .failed = u_failed,
    .body = u_body,
    .trailers = u_trailers,
};

static const char head[] = "POST /pkg.Svc/Call HTTP/1.1\r\n"
                           "Host: member\r\n"
                           "Content-Type: application/grpc\r\n"
                           "\r\n";

/* The member's side (fd -1: closed): drop what the client wrote. */
static void drain(int fd)
{
    char buf[4096];
    while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
        ;
}

static void turns(sws_loop_t *loop, int fd, user_t *u, unsigned nu, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        drain(fd);
        for (unsigned k = 0; k < nu; k++)
            if (u[k].held && u[k].hs != NULL) {
                u[k].held = 0;
                sws_upstream_h2_consumed(u[k].hs);
            }
        sws_loop_run_once(loop, 0);
    }
}

static void put(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL); /* the client may have closed */
        if (w <= 0)
            return; /* the socket is full: the rest is not sent */
        p += w;
        n -= (size_t)w;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t flags = data[0];
    size_t cut = data[1];
    data += 2;
    size -= 2;
    if (cut > size)
        cut = size;

    sws_loop_t loop;
    sws_upstream_set_t ups = { 0 };
    sws_upstream_h2_set_t h2 = { 0 };
    if (sws_loop_init(&loop) < 0)
        abort();
    sws_upstream_set_init(&ups, &loop);
    sws_upstream_h2_set_init(&h2, &ups);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    sws_upstream_conf_t conf = sws_upstream_conf_default;
    if (sws_upstream_h2_adopt(&h2, MEMBER, sv[0], &conf) < 0)
        abort();

    user_t u[2] = { { .hold = flags & 1 }, { .hold = flags & 1 } };
    unsigned nu = (flags & 4) ? 2 : 1;
    sws_upstream_h2_req_t req = { head, sizeof(head) - 1, (flags & 2) != 0, 1, "m" };
    sws_upstream_addr_t none = { .len = 0 };
    char err[128];
    sws_upstream_h2_fail_t kind;
    for (unsigned k = 0; k < nu; k++) {
        u[k].hs = sws_upstream_h2_submit(&h2, MEMBER, &none, NULL, &conf, &req, &ops, &u[k], &kind,
                                         err, sizeof(err));
        if (u[k].hs == NULL) /* the adopted connection takes both: never a connect */
            abort();
    }
    turns(&loop, sv[1], u, nu, 2);
    put(sv[1], data, cut);
    turns(&loop, sv[1], u, nu, 2);
    put(sv[1], data + cut, size - cut);
    turns(&loop, sv[1], u, nu, 4);
    close(sv[1]);
    turns(&loop, -1, u, nu, TURNS);
    for (unsigned k = 0; k < nu; k++)
        if (u[k].done != 1)
            abort(); /* no answer, or two */
    if (sws_upstream_h2_count(&h2, MEMBER, NULL) != 0)
        abort(); /* the member closed: nothing may stay open */

    sws_upstream_h2_set_close(&h2);
    sws_upstream_set_close(&ups);
    sws_loop_close(&loop);
    return 0;
}
