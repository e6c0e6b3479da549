/* worker/conn.c: how a connection shares its worker (the send budget per
 * loop turn) and when its send timer gives up. A real connection over a
 * socketpair, driven by the event loop; a handler answers every request
 * with a file body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "worker/conn.h"

/* A budget and a half: the body takes two turns. */
#define BODY_SIZE (SWS_CONN_SEND_PER_RUN / 2 * 3)
/* The server's send buffer holds the whole body, and a Unix socket polls
 * writable only while less than a quarter of it is in use: so only the
 * budget stops the first flush early, and the socket still polls writable
 * after it. */
#define SERVER_SNDBUF (4 * (BODY_SIZE + 65536))

typedef struct fixture {
    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters;
    int file;             /* the body every response sends */
    int peer;             /* the client's end */
    int sndbuf_ok;        /* the kernel granted SERVER_SNDBUF */
    sws_conn_t *conn;
} fixture_t;

static fixture_t *current;

static void file_handler(sws_request_t *r)
{
    int fd = dup(current->file);
    assert_true(fd >= 0);
    sws_response_sendfile(r, 200, NULL, 0, fd, 0, BODY_SIZE);
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    int sv[2];
    assert_non_null(f);
    sws_log_init("test", 2, SWS_LOG_ERROR);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_conn_set_init(&f->set, &f->loop, file_handler, &f->counters);
    f->file = memfd_create("body", MFD_CLOEXEC);
    assert_true(f->file >= 0);
    char *body = malloc(BODY_SIZE);
    assert_non_null(body);
    for (size_t i = 0; i < BODY_SIZE; i++)
        body[i] = (char)('a' + i % 26);
    assert_int_equal(write(f->file, body, BODY_SIZE), BODY_SIZE);
    free(body);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    /* Past net.core.wmem_max only with CAP_NET_ADMIN (FORCE); the kernel
     * doubles what it is asked for. */
    int sndbuf = SERVER_SNDBUF / 2;
    socklen_t len = sizeof(sndbuf);
    if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
        assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
    f->sndbuf_ok = sndbuf >= (int)SERVER_SNDBUF;
    f->peer = sv[1];
    f->conn = sws_conn_open(&f->set, sv[0], NULL, 0);
    assert_non_null(f->conn);
    current = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_conn_set_destroy(&f->set);
    sws_loop_close(&f->loop);
    close(f->peer);
    close(f->file);
    free(f);
    return 0;
}

static void send_request(fixture_t *f)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(write(f->peer, req, sizeof(req) - 1), sizeof(req) - 1);
}

/* Everything the peer has received so far (bounded by the body and a head). */
static size_t drain_peer(fixture_t *f)
{
    static char buf[1 << 16];
    size_t total = 0;
    for (int i = 0; i < 10000; i++) {
        ssize_t n = read(f->peer, buf, sizeof(buf));
        if (n <= 0)
            break;
        total += (size_t)n;
    }
    return total;
}

/* A turn for the connection: the request, or the room its yield left. */
static void one_turn(fixture_t *f)
{
    if (!f->sndbuf_ok)
        skip(); /* no CAP_NET_ADMIN and a small net.core.wmem_max */
    assert_int_equal(sws_loop_run_once(&f->loop, 1000), 0);
}

static void test_one_turn_sends_at_most_the_budget(void **state)
{
    fixture_t *f = *state;
    send_request(f);
    one_turn(f);
    /* The socket could take it all; the connection stopped at its budget. */
    assert_int_equal(f->conn->file_left, BODY_SIZE - SWS_CONN_SEND_PER_RUN);
}

static void test_rest_follows_in_the_next_turn_without_an_edge(void **state)
{
    fixture_t *f = *state;
    send_request(f);
    one_turn(f);
    assert_true(f->conn->file_left > 0);
    /* The peer has read nothing, so no new EPOLLOUT edge came: the
     * connection's yield alone brings it back. */
    one_turn(f);
    assert_int_equal(f->conn->file_left, 0);
    size_t got = drain_peer(f);
    assert_true(got > BODY_SIZE && got < BODY_SIZE + 512); /* a head and the body */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_turn_sends_at_most_the_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rest_follows_in_the_next_turn_without_an_edge,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
