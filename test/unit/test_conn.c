/* worker/conn.c: how a connection shares its worker (the send budget per
 * loop turn) and when its send timer gives up. A real connection over a
 * socketpair, driven by the event loop; a handler answers every request
 * with a file body. Then conn.c alone, with a fake protocol (worker/proto.h):
 * what it hands the protocol and what it asks of it. */
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
#include "worker/http1.h"
#include "worker/stream.h"

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

static void file_handler(sws_stream_t *st)
{
    int fd = dup(current->file);
    assert_true(fd >= 0);
    sws_stream_respond_file(st, 200, NULL, 0, fd, 0, BODY_SIZE);
}

/* A fixture whose set speaks proto and answers with handler, and a
 * socketpair: the server's end, not yet a connection, in *server_fd. */
static fixture_t *fixture_new(const sws_proto_ops_t *proto, sws_stream_handler_t handler,
                              int *server_fd)
{
    fixture_t *f = calloc(1, sizeof(*f));
    int sv[2];
    assert_non_null(f);
    sws_log_init("test", 2, SWS_LOG_ERROR);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_conn_set_init(&f->set, &f->loop, proto, handler, &f->counters);
    f->file = -1;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    f->peer = sv[1];
    *server_fd = sv[0];
    return f;
}

static void fixture_open(fixture_t *f, int server_fd, void **state)
{
    f->conn = sws_conn_open(&f->set, server_fd, NULL, 0);
    assert_non_null(f->conn);
    *state = f;
}

static int setup(void **state)
{
    int server_fd;
    fixture_t *f = fixture_new(&sws_http1_proto, file_handler, &server_fd);
    f->file = memfd_create("body", MFD_CLOEXEC);
    assert_true(f->file >= 0);
    char *body = malloc(BODY_SIZE);
    assert_non_null(body);
    for (size_t i = 0; i < BODY_SIZE; i++)
        body[i] = (char)('a' + i % 26);
    assert_int_equal(write(f->file, body, BODY_SIZE), BODY_SIZE);
    free(body);
    /* Past net.core.wmem_max only with CAP_NET_ADMIN (FORCE); the kernel
     * doubles what it is asked for. */
    int sndbuf = SERVER_SNDBUF / 2;
    socklen_t len = sizeof(sndbuf);
    if (setsockopt(server_fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
        assert_int_equal(setsockopt(server_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)),
                         0);
    assert_int_equal(getsockopt(server_fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
    f->sndbuf_ok = sndbuf >= (int)SERVER_SNDBUF;
    current = f;
    fixture_open(f, server_fd, state);
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_conn_set_destroy(&f->set);
    sws_loop_close(&f->loop);
    close(f->peer);
    if (f->file >= 0)
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
    /* The socket could take it all; the connection stopped at its budget,
     * which the head's bytes count against too. */
    assert_int_equal(f->conn->bytes_out, SWS_CONN_SEND_PER_RUN);
    assert_true(f->conn->file_left > BODY_SIZE - SWS_CONN_SEND_PER_RUN);
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

/* ---- conn.c with a fake protocol ---- */

/* The fake echoes its input upper-cased, and records what conn.c asked. */
static struct fake {
    int inits;
    size_t seen;
    enum sws_proto_wait wait;
    unsigned failed;      /* status of the last fail(), 0: none */
    int moved;            /* input_moved() calls */
    int keep_tail;        /* keep the last 4 input bytes (msg_start, kept) */
    int keep_all;         /* keep everything: msg_start stays 0 */
    sws_str_t kept;
    size_t kept_at;       /* offset of kept's first byte in the stream */
    size_t bulk;          /* answer the first input with this many bytes */
    int writables;        /* writable() calls */
    size_t queued_at_writable; /* output still queued when it came */
    size_t relay_left;    /* writable(): refill the output while this lasts */
    int closes, setups, destroys;
    int *state;           /* the connection's proto_state */
} fake;

static void fake_setup_state(sws_conn_t *c)
{
    fake.setups++;
    fake.state = c->proto_state;
    *fake.state = 42;
}

static void fake_init(sws_conn_t *c)
{
    (void)c;
    fake.inits++;
}

static void fake_on_input(sws_conn_t *c)
{
    uint32_t n = c->rend - c->rpos;
    for (uint32_t i = c->rpos; i < c->rend; i++) {
        char u = c->rbuf[i] >= 'a' && c->rbuf[i] <= 'z' ? (char)(c->rbuf[i] - 32) : c->rbuf[i];
        assert_int_equal(sws_conn_append(c, &u, 1), 0);
    }
    /* The slice is taken until the first move, which must carry it. */
    if (fake.keep_tail && n >= 4 && fake.moved == 0) {
        fake.kept = (sws_str_t){ c->rbuf + c->rend - 4, 4 };
        fake.kept_at = fake.seen + n - 4;
    }
    fake.seen += n;
    c->rpos = c->rend;
    if (fake.bulk > 0) {
        /* Far above the high-water mark: conn.c must hold the input back
         * and call writable() only once the output drained. */
        char *big = malloc(fake.bulk);
        assert_non_null(big);
        memset(big, 'b', fake.bulk);
        assert_int_equal(sws_conn_append(c, big, fake.bulk), 0);
        free(big);
        fake.bulk = 0;
        c->want_writable = 1;
        fake.wait = SWS_PROTO_WAIT_RESPONSE;
    }
    if (fake.keep_all)
        return;
    c->msg_start = fake.keep_tail && n >= 4 ? c->rend - 4 : c->rend;
}

static void fake_fail(sws_conn_t *c, unsigned status, const char *why)
{
    (void)why;
    fake.failed = status;
    fake.wait = SWS_PROTO_WAIT_NOTHING;
    c->close_after = 1;
}

static enum sws_proto_wait fake_waiting_for(const sws_conn_t *c)
{
    (void)c;
    return fake.wait;
}

static void fake_input_moved(sws_conn_t *c, uintptr_t old_base, size_t old_cap,
                             const char *new_base, size_t shift)
{
    (void)c;
    fake.moved++;
    sws_proto_slice_move(&fake.kept, old_base, old_cap, new_base, shift);
}

static void fake_writable(sws_conn_t *c)
{
    fake.writables++;
    fake.queued_at_writable = c->olen - c->osent;
    fake.wait = SWS_PROTO_WAIT_IDLE;
    if (fake.relay_left > 0) {
        /* A relay: as soon as the output drains, more is there. */
        static char piece[2 * SWS_CONN_OUT_HWM];
        size_t n = fake.relay_left < sizeof(piece) ? fake.relay_left : sizeof(piece);
        assert_int_equal(sws_conn_append(c, piece, n), 0);
        fake.relay_left -= n;
        c->want_writable = 1;
        fake.wait = SWS_PROTO_WAIT_RESPONSE;
    }
}

static void fake_close(sws_conn_t *c)
{
    (void)c;
    fake.closes++;
}

static void fake_destroy(sws_conn_t *c)
{
    assert_ptr_equal(c->proto_state, fake.state);
    fake.destroys++;
}

static const sws_proto_ops_t fake_proto = {
    .state_size = sizeof(int),
    .setup = fake_setup_state,
    .init = fake_init,
    .on_input = fake_on_input,
    .writable = fake_writable,
    .fail = fake_fail,
    .waiting_for = fake_waiting_for,
    .input_moved = fake_input_moved,
    .close = fake_close,
    .destroy = fake_destroy,
};

static void never_called(sws_stream_t *st)
{
    (void)st;
    fail_msg("conn.c called the request handler itself");
}

static int fake_setup(void **state)
{
    int server_fd;
    memset(&fake, 0, sizeof(fake));
    fixture_t *f = fixture_new(&fake_proto, never_called, &server_fd);
    fixture_open(f, server_fd, state);
    return 0;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
}

/* Turns until cond holds; at most 100, each waiting at most 1 s. */
#define RUN_UNTIL(f, cond)                                                    \
    do {                                                                      \
        int turns_ = 0;                                                       \
        while (!(cond)) {                                                     \
            if (turns_++ == 100)                                              \
                fail_msg("still not %s after 100 loop turns", #cond);         \
            assert_int_equal(sws_loop_run_once(&(f)->loop, 1000), 0);         \
        }                                                                     \
    } while (0)

static void test_fake_protocol_gets_the_input_and_its_output_is_sent(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(fake.inits, 1);
    write_all(f->peer, "hello", 5);
    RUN_UNTIL(f, fake.seen == 5);
    char buf[16] = { 0 };
    assert_int_equal(read(f->peer, buf, sizeof(buf)), 5);
    assert_string_equal(buf, "HELLO");
}

/* Compaction drops what the protocol is done with (before msg_start) and
 * tells it, so a slice it keeps follows its bytes. */
static void test_compaction_tells_the_protocol_where_its_bytes_went(void **state)
{
    fixture_t *f = *state;
    fake.keep_tail = 1;
    size_t n = SWS_CONN_READ_BUF + 100;
    char *data = malloc(n);
    assert_non_null(data);
    /* 23 letters: the compaction shift (a read buffer less 4) is no
     * multiple of it, so a slice left behind would show other letters. */
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 23);
    write_all(f->peer, data, n);
    RUN_UNTIL(f, fake.seen == n);
    assert_true(fake.moved >= 1);
    assert_int_equal(fake.kept.len, 4);
    assert_true(fake.kept.p >= f->conn->rbuf && fake.kept.p + 4 <= f->conn->rbuf + f->conn->rend);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(fake.kept.p[i], 'a' + (fake.kept_at + i) % 23);
    free(data);
}

/* A head the read buffer cannot hold is the protocol's to refuse (431). */
static void test_input_that_does_not_fit_is_failed_with_431(void **state)
{
    fixture_t *f = *state;
    fake.keep_all = 1;
    fake.wait = SWS_PROTO_WAIT_HEAD;
    size_t n = (size_t)f->set.settings->max_header_size + 8192;
    char *data = malloc(n);
    assert_non_null(data);
    memset(data, 'x', n);
    write_all(f->peer, data, n);
    RUN_UNTIL(f, fake.failed != 0);
    assert_int_equal(fake.failed, 431);
    free(data);
}

/* A protocol without a goodbye of its own (drain is NULL): a drain leaves
 * a busy connection alone, and one that has not answered a request yet
 * (accepted just before the stop: its first request is on the way), and
 * gives an idle one drain_q's time for its next request, instead of
 * closing it under a client that may be sending. */
static void test_drain_gives_an_idle_connection_time(void **state)
{
    fixture_t *f = *state;
    fake.wait = SWS_PROTO_WAIT_BODY;
    f->conn->requests = 1;
    sws_conn_set_drain(&f->set);
    assert_int_equal(f->conn->phase, SWS_CONN_ACTIVE);
    assert_ptr_not_equal(f->conn->timer_q, &f->set.drain_q);
    f->set.draining = 0;
    fake.wait = SWS_PROTO_WAIT_IDLE;
    f->conn->requests = 0;
    sws_conn_set_drain(&f->set);
    assert_int_equal(f->conn->phase, SWS_CONN_ACTIVE);
    assert_ptr_not_equal(f->conn->timer_q, &f->set.drain_q);
    f->set.draining = 0;
    f->conn->requests = 1;
    sws_conn_set_drain(&f->set);
    assert_int_equal(f->conn->phase, SWS_CONN_ACTIVE);
    assert_ptr_equal(f->conn->timer_q, &f->set.drain_q);
    assert_int_equal(sws_conn_set_count_idle(&f->set), 1);
}

/* A protocol whose answer waits on the output hears so (writable) once the
 * output drained, not before. */
static void test_writable_comes_once_the_output_drained(void **state)
{
    fixture_t *f = *state;
    int sndbuf = 0;
    socklen_t len = sizeof(sndbuf);
    assert_int_equal(getsockopt(f->conn->io.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
    /* More than the socket takes: the rest waits for the client. */
    fake.bulk = 4 * (size_t)sndbuf + 4 * SWS_CONN_OUT_HWM;
    write_all(f->peer, "x", 1);
    size_t got = 0;
    char buf[65536];
    for (int i = 0; i < 1000 && fake.writables == 0; i++) {
        ssize_t n = read(f->peer, buf, sizeof(buf));
        if (n > 0)
            got += (size_t)n;
        assert_int_equal(sws_loop_run_once(&f->loop, 100), 0);
    }
    assert_int_equal(fake.seen, 1);
    assert_int_equal(fake.writables, 1);
    assert_true(fake.queued_at_writable < SWS_CONN_OUT_HWM);
    assert_true(got > 0); /* the client had to read before it came */
}

/* A relay that refills the output whenever it drains is held to the
 * same budget per turn as a sendfile: the other connections get theirs. */
static void test_relay_is_held_to_the_send_budget(void **state)
{
    fixture_t *f = *state;
    int big = 64 << 20; /* FORCE: past wmem_max when we may (root) */
    if (setsockopt(f->conn->io.fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
        skip();
    fake.relay_left = 4 * SWS_CONN_SEND_PER_RUN;
    fake.bulk = 1; /* the first input starts it */
    write_all(f->peer, "x", 1);
    assert_int_equal(sws_loop_run_once(&f->loop, 1000), 0);
    assert_true(f->conn->bytes_out >= SWS_CONN_SEND_PER_RUN);
    assert_true(f->conn->bytes_out < SWS_CONN_SEND_PER_RUN + 2 * SWS_CONN_OUT_HWM);
    assert_true(fake.relay_left > 0);
    /* It goes on in the next turns, without a new edge from the client. */
    for (int i = 0; i < 20 && fake.relay_left > 0; i++)
        assert_int_equal(sws_loop_run_once(&f->loop, 1000), 0);
    assert_int_equal(fake.relay_left, 0);
}

/* The protocol's state lives with the connection: set up once with its
 * memory, told when the connection closes, freed with it. */
static void test_protocol_state_follows_the_connection(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(fake.setups, 1);
    assert_int_equal(*(int *)f->conn->proto_state, 42);
    sws_conn_close(f->conn);
    assert_int_equal(fake.closes, 1);
    sws_conn_close(f->conn); /* twice: told once */
    assert_int_equal(fake.closes, 1);
    sws_conn_set_reap(&f->set);
    assert_int_equal(fake.destroys, 0); /* kept for reuse */
    sws_conn_set_destroy(&f->set);
    assert_int_equal(fake.destroys, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_turn_sends_at_most_the_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rest_follows_in_the_next_turn_without_an_edge,
                                        setup, teardown),
    };
    const struct CMUnitTest fake_tests[] = {
        cmocka_unit_test_setup_teardown(test_fake_protocol_gets_the_input_and_its_output_is_sent,
                                        fake_setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_tells_the_protocol_where_its_bytes_went,
                                        fake_setup, teardown),
        cmocka_unit_test_setup_teardown(test_input_that_does_not_fit_is_failed_with_431,
                                        fake_setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_gives_an_idle_connection_time, fake_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_writable_comes_once_the_output_drained, fake_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_protocol_state_follows_the_connection, fake_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_relay_is_held_to_the_send_budget, fake_setup,
                                        teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed + cmocka_run_group_tests_name("conn.c with a fake protocol", fake_tests, NULL,
                                                NULL);
}
