/* worker/tunnel.c: one direction of a tunnel (sws_tunnel_pump) between
 * two socketpairs, standing for the client and the upstream: bytes move
 * in order, a full destination stops the reading of the source (the
 * bytes wait in the source's socket, not in memory), a FIN is passed on
 * after the bytes before it, a reset ends it, the reads per turn are
 * bounded. The whole tunnel through the proxy is test_tunnel.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/tunnel.h"

typedef struct fixture {
    int src_peer, src; /* the sender writes src_peer; the tunnel reads src */
    int dst, dst_peer; /* the tunnel writes dst; the receiver reads dst_peer */
    char buf[SWS_TUNNEL_BUF];
    sws_tunnel_half_t h;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    int a[2], b[2];
    assert_non_null(f);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b), 0);
    f->src_peer = a[0];
    f->src = a[1];
    f->dst = b[0];
    f->dst_peer = b[1];
    f->h.buf = f->buf;
    f->h.readable = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    close(f->src_peer);
    close(f->src);
    close(f->dst);
    if (f->dst_peer >= 0)
        close(f->dst_peer);
    free(f);
    return 0;
}

static unsigned char pattern(uint64_t i)
{
    return (unsigned char)(i % 251u);
}

/* Write up to n pattern bytes from offset *off into fd until it is full. */
static void send_pattern(int fd, uint64_t *off, uint64_t n)
{
    unsigned char b[4096];
    while (n > 0) {
        size_t k = n < sizeof(b) ? (size_t)n : sizeof(b);
        for (size_t i = 0; i < k; i++)
            b[i] = pattern(*off + i);
        ssize_t w = write(fd, b, k);
        if (w < 0 && errno == EAGAIN)
            return;
        assert_true(w > 0);
        *off += (uint64_t)w;
        n -= (uint64_t)w;
    }
}

/* Read what is there, checking the pattern; bytes read. */
static uint64_t recv_pattern(int fd, uint64_t *off)
{
    unsigned char b[4096];
    uint64_t total = 0;
    for (;;) {
        ssize_t n = read(fd, b, sizeof(b));
        if (n <= 0)
            return total;
        for (ssize_t i = 0; i < n; i++)
            if (b[i] != pattern(*off + (uint64_t)i))
                fail_msg("byte %llu out of order", (unsigned long long)(*off + (uint64_t)i));
        *off += (uint64_t)n;
        total += (uint64_t)n;
    }
}

static int unread(int fd)
{
    int n = -1;
    assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
    return n;
}

static void test_bytes_move_in_order(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0, got = 0;
    int progress = 0;
    send_pattern(f->src_peer, &sent, 100000);
    for (int i = 0; i < 100 && got < sent; i++) {
        f->h.readable = 1;
        assert_int_not_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 4, &progress),
                             SWS_TUNNEL_ERROR);
        recv_pattern(f->dst_peer, &got);
    }
    assert_int_equal(got, sent);
    assert_int_equal(f->h.moved, sent);
    assert_true(progress);
    assert_false(f->h.eof);
}

/* A receiver that reads nothing: the pump fills its socket, keeps at most
 * one buffer, and leaves the rest in the sender's socket; once the
 * receiver reads, everything arrives, in order. */
static void test_full_destination_stops_reading_the_source(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0, got = 0;
    int progress = 0;
    /* Fill the sender's socket, pump, again, until the receiver's is full
     * too and the pump holds what it could not write. */
    for (int round = 0; round < 100 && f->h.len == 0; round++) {
        send_pattern(f->src_peer, &sent, 8u << 20); /* until the sender's socket is full */
        for (int i = 0; i < 1000; i++) {
            f->h.readable = 1;
            if (sws_tunnel_pump(&f->h, f->src, f->dst, 1000, &progress) == SWS_TUNNEL_WAIT)
                break;
        }
    }
    send_pattern(f->src_peer, &sent, 8u << 20);
    assert_true(f->h.len > 0);             /* holding bytes the receiver cannot take ... */
    assert_true(f->h.len <= SWS_TUNNEL_BUF); /* ... one buffer of them at most ... */
    assert_true(unread(f->src) > 0);       /* ... and not reading the sender meanwhile */
    int before = unread(f->src);
    f->h.readable = 1;
    progress = 0;
    assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 1000, &progress), SWS_TUNNEL_WAIT);
    assert_false(progress);
    assert_int_equal(unread(f->src), before);
    for (int i = 0; i < 10000 && got < sent; i++) {
        recv_pattern(f->dst_peer, &got);
        f->h.readable = 1;
        assert_int_not_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 1000, &progress),
                             SWS_TUNNEL_ERROR);
        send_pattern(f->src_peer, &sent, 0);
    }
    recv_pattern(f->dst_peer, &got);
    assert_int_equal(got, sent);
}

/* The sender's FIN reaches the receiver after every byte before it, and
 * the other direction of the destination stays open (a half-close). */
static void test_fin_passed_on_after_the_bytes(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0, got = 0;
    int progress = 0;
    send_pattern(f->src_peer, &sent, 5000);
    shutdown(f->src_peer, SHUT_WR);
    for (int i = 0; i < 10 && !f->h.shut; i++) {
        f->h.readable = 1;
        assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 4, &progress), SWS_TUNNEL_WAIT);
    }
    assert_true(f->h.eof);
    assert_true(f->h.shut);
    assert_int_equal(recv_pattern(f->dst_peer, &got), 5000);
    char b;
    assert_int_equal(read(f->dst_peer, &b, 1), 0);    /* the FIN, after the bytes */
    assert_int_equal(write(f->dst_peer, "r", 1), 1);  /* the way back is still open */
    assert_int_equal(read(f->dst, &b, 1), 1);
}

static void test_reads_per_turn_are_bounded(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0;
    int progress = 0;
    send_pattern(f->src_peer, &sent, 20 * SWS_TUNNEL_BUF);
    assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 2, &progress), SWS_TUNNEL_MORE);
    assert_true(f->h.moved <= 2 * SWS_TUNNEL_BUF);
    assert_true(f->h.readable);
}

/* A read shorter than the buffer drained the socket: no recv only to hear
 * EAGAIN (the next bytes bring a new edge); but with a FIN announced
 * (hup) the pump reads on and sees it. */
static void test_short_read_drains_unless_a_fin_follows(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0, got = 0;
    int progress = 0;
    send_pattern(f->src_peer, &sent, 100);
    /* One read allowed: a second attempt would make it MORE. */
    assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 1, &progress), SWS_TUNNEL_WAIT);
    assert_false(f->h.readable);
    assert_int_equal(recv_pattern(f->dst_peer, &got), 100);
    send_pattern(f->src_peer, &sent, 100);
    shutdown(f->src_peer, SHUT_WR);
    f->h.readable = f->h.hup = 1;
    assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 4, &progress), SWS_TUNNEL_WAIT);
    assert_true(f->h.eof);
    assert_true(f->h.shut);
}

/* A receiver that is gone: the write fails, the tunnel is to end. */
static void test_reset_destination_is_an_error(void **state)
{
    fixture_t *f = *state;
    uint64_t sent = 0;
    int progress = 0;
    close(f->dst_peer);
    f->dst_peer = -1;
    send_pattern(f->src_peer, &sent, 100);
    assert_int_equal(sws_tunnel_pump(&f->h, f->src, f->dst, 4, &progress), SWS_TUNNEL_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bytes_move_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_destination_stops_reading_the_source, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fin_passed_on_after_the_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reads_per_turn_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_destination_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_read_drains_unless_a_fin_follows, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
