/* worker/upstream_h2.c against a fake member: a listening socket on
 * 127.0.0.1 and an nghttp2 server session driven by the test, in the same
 * thread as the worker's loop (each turn of one, then of the other). The
 * proxy's use of it, with a real backend, is test_proxy_h2.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/stream.h"
#include "worker/upstream_h2.h"

#define TURNS 2000 /* loop turns a step may take: bounded, never a sleep */
#define MEMBER 7

/* The fake member: its sessions (one per accepted connection) and what
 * they received. */
typedef struct member {
    int lfd;
    int fd[4];
    nghttp2_session *ng[4];
    unsigned nconn;
    uint32_t max_streams;      /* its SETTINGS_MAX_CONCURRENT_STREAMS */
    char fields[2048];         /* "name: value\n" of the last request head */
    size_t flen;
    unsigned requests;
    int32_t last_stream;
} member_t;

/* The user's side: what the client gave it. */
typedef struct user {
    unsigned status;
    size_t body;
    int hold;                  /* data() holds what it gets */
    int ended, failed;
    sws_upstream_h2_fail_t kind;
} user_t;

typedef struct fixture {
    sws_loop_t loop;
    sws_upstream_set_t ups;
    sws_upstream_h2_set_t h2;
    sws_upstream_addr_t addr;
    sws_upstream_conf_t conf;
    member_t m;
} fixture_t;

/* ---- the member ---- */

static int m_on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                       size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                       void *user)
{
    (void)ng;
    (void)frame;
    (void)flags;
    member_t *m = user;
    if (m->flen + namelen + valuelen + 3 < sizeof(m->fields)) {
        memcpy(m->fields + m->flen, name, namelen);
        m->flen += namelen;
        memcpy(m->fields + m->flen, ": ", 2);
        m->flen += 2;
        memcpy(m->fields + m->flen, value, valuelen);
        m->flen += valuelen;
        m->fields[m->flen++] = '\n';
        m->fields[m->flen] = '\0';
    }
    return 0;
}

static int m_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    (void)ng;
    member_t *m = user;
    m->flen = 0;
    m->fields[0] = '\0';
    m->requests++;
    m->last_stream = frame->hd.stream_id;
    return 0;
}

static void member_accept(member_t *m)
{
    int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    assert_true(m->nconn < 4);
    nghttp2_session_callbacks *cb;
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, m_on_header);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, m_on_begin_headers);
    nghttp2_session *ng;
    assert_int_equal(nghttp2_session_server_new(&ng, cb, m), 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, m->max_streams } };
    assert_int_equal(nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, 1), 0);
    m->fd[m->nconn] = fd;
    m->ng[m->nconn++] = ng;
}

/* One turn of the member: accept, read, write what its sessions have. */
static void member_turn(member_t *m)
{
    member_accept(m);
    for (unsigned i = 0; i < m->nconn; i++) {
        uint8_t buf[16384];
        ssize_t n;
        while ((n = read(m->fd[i], buf, sizeof(buf))) > 0)
            assert_int_equal(nghttp2_session_mem_recv(m->ng[i], buf, (size_t)n), n);
        const uint8_t *d;
        while ((n = nghttp2_session_mem_send(m->ng[i], &d)) > 0)
            assert_int_equal(write(m->fd[i], d, (size_t)n), n); /* small: the socket takes it */
    }
}

static void turn(fixture_t *f)
{
    member_turn(&f->m);
    assert_int_equal(sws_loop_run_once(&f->loop, 1), 0);
}

/* ---- the user's callbacks ---- */

static int u_head(void *data, unsigned status, const sws_header_t *h, unsigned n, uint64_t len)
{
    (void)h;
    (void)n;
    (void)len;
    ((user_t *)data)->status = status;
    return 0;
}

static int u_data(void *data, const char *p, size_t n)
{
    (void)p;
    user_t *u = data;
    u->body += n;
    return u->hold ? 1 : 0;
}

static void u_end(void *data, const sws_header_t *t, unsigned n)
{
    (void)t;
    (void)n;
    ((user_t *)data)->ended = 1;
}

static void u_failed(void *data, sws_upstream_h2_fail_t kind, const char *why)
{
    (void)why;
    user_t *u = data;
    u->failed = 1;
    u->kind = kind;
}

static size_t u_body(void *data, char *buf, size_t len, int *eof)
{
    (void)data;
    (void)buf;
    (void)len;
    *eof = 1;
    return 0;
}

static const sws_upstream_h2_ops_t ops = {
    .head = u_head, .data = u_data, .end = u_end, .failed = u_failed, .body = u_body,
};

/* ---- fixture ---- */

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_upstream_set_init(&f->ups, &f->loop);
    sws_upstream_h2_set_init(&f->h2, &f->ups);
    f->conf = sws_upstream_conf_default;
    f->m.max_streams = 100;
    f->m.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in *sin = (struct sockaddr_in *)&f->addr.sa;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->addr.len = sizeof(*sin);
    assert_int_equal(bind(f->m.lfd, (struct sockaddr *)sin, f->addr.len), 0);
    assert_int_equal(getsockname(f->m.lfd, (struct sockaddr *)sin, &f->addr.len), 0);
    assert_int_equal(listen(f->m.lfd, 8), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_upstream_h2_set_close(&f->h2);
    sws_upstream_set_close(&f->ups);
    sws_loop_close(&f->loop);
    for (unsigned i = 0; i < f->m.nconn; i++) {
        nghttp2_session_del(f->m.ng[i]);
        if (f->m.fd[i] >= 0)
            close(f->m.fd[i]);
    }
    close(f->m.lfd);
    free(f);
    return 0;
}

static const char head[] = "POST /pkg.Svc/Call?x=1 HTTP/1.1\r\n"
                           "Host: svc.local\r\n"
                           "Content-Type: application/grpc\r\n"
                           "Transfer-Encoding: chunked\r\n"
                           "X-Forwarded-For: 10.0.0.1\r\n"
                           "\r\n";

static sws_upstream_h2_stream_t *submit(fixture_t *f, user_t *u, int te)
{
    char err[128];
    sws_upstream_h2_fail_t kind;
    sws_upstream_h2_req_t req = { head, sizeof(head) - 1, 0, te, "m" };
    sws_upstream_h2_stream_t *hs =
        sws_upstream_h2_submit(&f->h2, MEMBER, &f->addr, NULL, &f->conf, &req, &ops, u, &kind, err,
                               sizeof(err));
    assert_non_null(hs);
    return hs;
}

/* submit, then turn until the member saw the request. */
static void submit_seen(fixture_t *f, user_t *u, int te)
{
    unsigned seen = f->m.requests;
    submit(f, u, te);
    for (unsigned i = 0; i < TURNS && f->m.requests == seen; i++)
        turn(f);
}

/* The member answers its last stream with a bare status. */
static void member_answers(fixture_t *f, const char *status)
{
    nghttp2_nv nv[] = { { (uint8_t *)":status", (uint8_t *)status, 7, strlen(status),
                          NGHTTP2_NV_FLAG_NONE } };
    assert_int_equal(nghttp2_submit_response(f->m.ng[0], f->m.last_stream, nv, 1, NULL), 0);
}

/* The member's body: *left bytes of 'x'. */
static ssize_t m_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                      uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng;
    (void)id;
    (void)user;
    size_t *left = src->ptr;
    size_t n = len < *left ? len : *left;
    memset(buf, 'x', n);
    *left -= n;
    if (*left == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- tests ---- */

/* The head proxy_req.c wrote becomes HTTP/2 fields: the request line's
 * parts as pseudo-fields, Host as :authority, names lowercase,
 * Transfer-Encoding gone, te: trailers when asked. */
static void test_head_mapped_onto_http2_fields(void **state)
{
    fixture_t *f = *state;
    user_t u = { 0 };
    submit_seen(f, &u, 1);
    assert_int_equal(f->m.requests, 1);
    assert_string_equal(f->m.fields, ":method: POST\n"
                                     ":scheme: http\n"
                                     ":path: /pkg.Svc/Call?x=1\n"
                                     ":authority: svc.local\n"
                                     "content-type: application/grpc\n"
                                     "x-forwarded-for: 10.0.0.1\n"
                                     "te: trailers\n");
    member_answers(f, "204");
    for (unsigned i = 0; i < TURNS && !u.ended; i++)
        turn(f);
    assert_true(u.ended);
    assert_int_equal(u.status, 204);
    unsigned idle;
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, &idle), 1);
    assert_int_equal(idle, 1); /* kept for the next request */
}

/* A head that cannot be mapped fails at once as INVALID, not as a
 * connect failure: the member is not at fault and no connection opens. */
static void test_unmappable_head_is_invalid_not_connect(void **state)
{
    fixture_t *f = *state;
    static const char bad[] = "GET /x HTTP/1.1\r\n"
                              "a field without a colon\r\n"
                              "\r\n";
    char err[128];
    sws_upstream_h2_fail_t kind = SWS_UPSTREAM_H2_CONNECT;
    sws_upstream_h2_req_t req = { bad, sizeof(bad) - 1, 0, 0, "m" };
    user_t u = { 0 };
    assert_null(sws_upstream_h2_submit(&f->h2, MEMBER, &f->addr, NULL, &f->conf, &req, &ops, &u,
                                       &kind, err, sizeof(err)));
    assert_int_equal(kind, SWS_UPSTREAM_H2_INVALID);
    assert_null(f->h2.conns);
}

/* The request's fields are the set's from submit on: the caller's head
 * may go at once, and a request given up before its HEADERS went (the
 * connection is new) still goes whole with the connection's first bytes,
 * from the stream's own copy, which stays until nghttp2 sent it (ADR
 * 0051), and is reset after; the user hears nothing more. */
static void test_fields_outlive_the_callers_head_and_a_cancel(void **state)
{
    fixture_t *f = *state;
    user_t u = { 0 };
    char *h = strdup(head);
    assert_non_null(h);
    char err[128];
    sws_upstream_h2_fail_t kind;
    sws_upstream_h2_req_t req = { h, strlen(h), 0, 0, "m" };
    sws_upstream_h2_stream_t *hs = sws_upstream_h2_submit(
        &f->h2, MEMBER, &f->addr, NULL, &f->conf, &req, &ops, &u, &kind, err, sizeof(err));
    assert_non_null(hs);
    memset(h, 'X', strlen(h));
    free(h);
    sws_upstream_h2_cancel(hs);
    for (unsigned i = 0; i < TURNS && f->m.requests == 0; i++)
        turn(f);
    assert_int_equal(f->m.requests, 1);
    assert_string_equal(f->m.fields, ":method: POST\n"
                                     ":scheme: http\n"
                                     ":path: /pkg.Svc/Call?x=1\n"
                                     ":authority: svc.local\n"
                                     "content-type: application/grpc\n"
                                     "x-forwarded-for: 10.0.0.1\n");
    for (unsigned i = 0; i < 50; i++)
        turn(f);
    nghttp2_stream *ms = nghttp2_session_find_stream(f->m.ng[0], f->m.last_stream);
    assert_true(ms == NULL || nghttp2_stream_get_state(ms) == NGHTTP2_STREAM_STATE_CLOSED);
    assert_false(u.ended || u.failed);
}

/* Streams go on the open connection while the member's
 * SETTINGS_MAX_CONCURRENT_STREAMS allows, then on a new one. */
static void test_new_connection_only_at_the_members_stream_limit(void **state)
{
    fixture_t *f = *state;
    f->m.max_streams = 2;
    user_t u[3] = { { 0 } };
    submit(f, &u[0], 0);
    /* Until its SETTINGS came, a member is taken to allow 100. */
    for (unsigned i = 0; i < TURNS && f->m.requests < 1; i++)
        turn(f);
    for (unsigned i = 0; i < 50; i++)
        turn(f); /* its SETTINGS reach the client */
    submit(f, &u[1], 0);
    submit(f, &u[2], 0);
    for (unsigned i = 0; i < TURNS && f->m.requests < 3; i++)
        turn(f);
    assert_int_equal(f->m.requests, 3);
    assert_int_equal(f->m.nconn, 2);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 2);
}

/* A connection whose stream slot freed is taken again: at one stream per
 * connection, the first connection's slot, freed by its answer, serves a
 * third request, and no third connection opens. */
static void test_freed_slot_takes_the_next_request(void **state)
{
    fixture_t *f = *state;
    f->m.max_streams = 1;
    user_t u[3] = { { 0 } };
    submit_seen(f, &u[0], 0);
    for (unsigned i = 0; i < 50; i++)
        turn(f); /* its SETTINGS reach the client */
    submit_seen(f, &u[1], 0);
    assert_int_equal(f->m.nconn, 2);
    f->m.last_stream = 1; /* the first connection's stream */
    member_answers(f, "200");
    for (unsigned i = 0; i < TURNS && !u[0].ended; i++)
        turn(f);
    assert_true(u[0].ended);
    submit_seen(f, &u[2], 0);
    assert_int_equal(f->m.requests, 3);
    assert_int_equal(f->m.nconn, 2);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 2);
}

/* A member that answers and closes at once: the answer ends the stream,
 * and its FIN, come in the same wake-up as the last bytes, closes the
 * connection (a short read in the clear saves the read that would say
 * EAGAIN, but not when the FIN came too: no new edge would tell). */
static void test_member_close_with_its_answer_is_seen(void **state)
{
    fixture_t *f = *state;
    user_t u = { 0 };
    submit_seen(f, &u, 0);
    member_answers(f, "200");
    member_turn(&f->m);
    close(f->m.fd[0]);
    f->m.fd[0] = -1;
    for (unsigned i = 0; i < TURNS && sws_upstream_h2_count(&f->h2, MEMBER, NULL) > 0; i++)
        assert_int_equal(sws_loop_run_once(&f->loop, 1), 0);
    assert_true(u.ended);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 0);
}

/* A member that leaves the table has its idle connections closed. */
static void test_member_gone_closes_its_idle_connections(void **state)
{
    fixture_t *f = *state;
    user_t u = { 0 };
    submit_seen(f, &u, 0);
    member_answers(f, "200");
    for (unsigned i = 0; i < TURNS && !u.ended; i++)
        turn(f);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 1);
    sws_upstream_close_idle(&f->ups, MEMBER); /* what a generation without it does */
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 0);
}

/* The member's GOAWAY below our stream: refused, for the user to send
 * elsewhere. */
static void test_goaway_below_our_stream_is_refused(void **state)
{
    fixture_t *f = *state;
    user_t u = { 0 };
    submit_seen(f, &u, 0);
    assert_int_equal(nghttp2_submit_goaway(f->m.ng[0], NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR,
                                           NULL, 0),
                     0);
    for (unsigned i = 0; i < TURNS && !u.failed; i++)
        turn(f);
    assert_true(u.failed);
    assert_int_equal(u.kind, SWS_UPSTREAM_H2_REFUSED);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 0); /* no stream left: closed */
}

/* Body bytes the user holds keep the member's window shut: it sends one
 * stream window (65535 bytes, the default) and no more until the user
 * says it took them. */
static void test_window_opens_only_as_the_user_takes(void **state)
{
    fixture_t *f = *state;
    user_t u = { .hold = 1 };
    sws_upstream_h2_stream_t *hs = submit(f, &u, 0);
    for (unsigned i = 0; i < TURNS && f->m.requests == 0; i++)
        turn(f);
    size_t left = 256 * 1024;
    nghttp2_data_provider dp = { .source.ptr = &left, .read_callback = m_body };
    nghttp2_nv nv[] = { { (uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE } };
    assert_int_equal(nghttp2_submit_response(f->m.ng[0], f->m.last_stream, nv, 1, &dp), 0);
    for (unsigned i = 0; i < TURNS && u.body < 65535; i++)
        turn(f);
    for (unsigned i = 0; i < 50; i++)
        turn(f); /* room for a window update that should not come */
    assert_int_equal(u.body, 65535);
    assert_false(u.ended);
    u.hold = 0;
    sws_upstream_h2_consumed(hs);
    for (unsigned i = 0; i < TURNS && !u.ended; i++)
        turn(f);
    assert_true(u.ended);
    assert_int_equal(u.body, 256 * 1024);
}

/* A submit that the set refuses at once: NULL, and why. */
static sws_upstream_h2_fail_t submit_refused(fixture_t *f, user_t *u)
{
    char err[128];
    sws_upstream_h2_fail_t kind = SWS_UPSTREAM_H2_INVALID;
    sws_upstream_h2_req_t req = { head, sizeof(head) - 1, 0, 0, "m" };
    assert_null(sws_upstream_h2_submit(&f->h2, MEMBER, &f->addr, NULL, &f->conf, &req, &ops, u,
                                       &kind, err, sizeof(err)));
    return kind;
}

/* A member announcing SETTINGS_MAX_CONCURRENT_STREAMS 0 from its first
 * SETTINGS (ADR 0056): the request fails (CONNECT when nghttp2 held it
 * for a slot; REFUSED when it went before the SETTINGS came and the
 * member refused it), not after a read timeout; the next fails at once,
 * on no new connection: the one that says 0 stays, keepalive 0 or not. */
static void test_member_announcing_zero_gets_no_request_nor_a_connection_each(void **state)
{
    fixture_t *f = *state;
    f->m.max_streams = 0;
    f->conf.keepalive = 0;
    user_t u[2] = { { 0 } };
    submit(f, &u[0], 0);
    for (unsigned i = 0; i < TURNS && !u[0].failed; i++)
        turn(f);
    assert_true(u[0].failed);
    assert_true(u[0].kind == SWS_UPSTREAM_H2_CONNECT || u[0].kind == SWS_UPSTREAM_H2_REFUSED);
    for (unsigned i = 0; i < 50; i++)
        turn(f); /* its SETTINGS reach the client */
    assert_int_equal(submit_refused(f, &u[1]), SWS_UPSTREAM_H2_CONNECT);
    for (unsigned i = 0; i < 50; i++)
        turn(f);
    assert_int_equal(f->m.nconn, 1);
    assert_int_equal(sws_upstream_h2_count(&f->h2, MEMBER, NULL), 1);
    assert_false(u[1].failed); /* refused by submit: no callback */
}

/* The limit lowered to 0 with a stream in flight: that stream finishes,
 * a new request fails at once on no new connection; raised again, the
 * connection takes the next one. */
static void test_zero_midway_lets_the_stream_in_flight_finish(void **state)
{
    fixture_t *f = *state;
    user_t u[3] = { { 0 } };
    submit(f, &u[0], 0);
    for (unsigned i = 0; i < TURNS && f->m.requests < 1; i++)
        turn(f);
    nghttp2_settings_entry zero[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0 } };
    assert_int_equal(nghttp2_submit_settings(f->m.ng[0], NGHTTP2_FLAG_NONE, zero, 1), 0);
    for (unsigned i = 0; i < 50; i++)
        turn(f);
    assert_int_equal(submit_refused(f, &u[1]), SWS_UPSTREAM_H2_CONNECT);
    nghttp2_nv nv[] = { { (uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE } };
    assert_int_equal(nghttp2_submit_response(f->m.ng[0], f->m.last_stream, nv, 1, NULL), 0);
    for (unsigned i = 0; i < TURNS && !u[0].ended; i++)
        turn(f);
    assert_true(u[0].ended);
    assert_false(u[0].failed);
    nghttp2_settings_entry raised[] = { { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 10 } };
    assert_int_equal(nghttp2_submit_settings(f->m.ng[0], NGHTTP2_FLAG_NONE, raised, 1), 0);
    for (unsigned i = 0; i < 50; i++)
        turn(f);
    submit(f, &u[2], 0);
    for (unsigned i = 0; i < TURNS && f->m.requests < 2; i++)
        turn(f);
    assert_int_equal(f->m.requests, 2);
    assert_int_equal(f->m.nconn, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_head_mapped_onto_http2_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unmappable_head_is_invalid_not_connect, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fields_outlive_the_callers_head_and_a_cancel, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_new_connection_only_at_the_members_stream_limit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_freed_slot_takes_the_next_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_close_with_its_answer_is_seen, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_member_gone_closes_its_idle_connections, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_goaway_below_our_stream_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_member_announcing_zero_gets_no_request_nor_a_connection_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_midway_lets_the_stream_in_flight_finish, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_window_opens_only_as_the_user_takes, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
