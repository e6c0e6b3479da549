/* worker/proxy.c (with worker/proxy_req.c and worker/upstream_conn.c under
 * it): a real
 * client connection on a socketpair, a table with a proxy route built in
 * code, and fake upstreams: loopback listeners this test accepts on, reads
 * from and answers by hand, all driven by the worker's event loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "shm/table.h"
#include "support/routeset_build.h"
#include "worker/conn.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/http1.h"
#include "worker/proxy.h"
#include "worker/proxy_req.h"
#include "worker/upstream_conn.h"

#define NUP 3      /* fake upstreams; the pool has f->nmembers of them (2 unless a test says) */
#define NARENA 4   /* table generations a test may build */
#define OUT_MAX (8u << 20)

typedef struct fixture {
    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters;
    sws_worker_ctx_t ctx;
    sws_settings_t st;
    void *arena;          /* the generation in use */
    void *arenas[NARENA]; /* every one built: a request may hold an older one */
    unsigned ngen;
    unsigned nmembers;
    int listen_fd[NUP];   /* the fake upstreams; -1: a member nobody listens on */
    int port[NUP];
    int client;           /* the client's end of the socketpair */
    sws_conn_t *conn;
    char *out;            /* everything the server sent the client */
    size_t out_len;
    int eof;
} fixture_t;

/* ---- a counting shim: the MSG_PEEK reads the proxy makes, and the
 * reads and writes on the sockets a test watches ---- */

static unsigned peeks;
static int watched[2] = { -1, -1 }; /* the server's ends: client, upstream */
static unsigned io_calls[2];

/* When fin_on_read[0] is read, fin_on_read[1] (a fake upstream's end) is
 * closed first, once: a FIN that reaches the proxy's socket after the
 * loop's epoll_wait and before the request is written (ADR 0021). */
static int fin_on_read[2] = { -1, -1 };

static void count_io(int fd)
{
    for (int i = 0; i < 2; i++)
        if (fd >= 0 && fd == watched[i])
            io_calls[i]++;
    if (fd >= 0 && fd == fin_on_read[0]) {
        close(fin_on_read[1]);
        fin_on_read[0] = fin_on_read[1] = -1;
    }
}

typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static recv_fn real;
    if (real == NULL)
        real = (recv_fn)dlsym(RTLD_NEXT, "recv");
    if (flags & MSG_PEEK)
        peeks++;
    count_io(fd);
    return real(fd, buf, len, flags);
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    static send_fn real;
    if (real == NULL)
        real = (send_fn)dlsym(RTLD_NEXT, "send");
    count_io(fd);
    return real(fd, buf, len, flags);
}

ssize_t read(int fd, void *buf, size_t len)
{
    static read_fn real;
    if (real == NULL)
        real = (read_fn)dlsym(RTLD_NEXT, "read");
    count_io(fd);
    return real(fd, buf, len);
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static write_fn real;
    if (real == NULL)
        real = (write_fn)dlsym(RTLD_NEXT, "write");
    count_io(fd);
    return real(fd, buf, len);
}

/* ---- setup ---- */

static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* What a test changes in the pool or the route before the table is built. */
typedef void (*tweak_fn)(Sws__Pool *pool, Sws__Route *route);

static Sws__Pool *add_pool(Sws__RouteSet *rs, fixture_t *f)
{
    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("app");
    /* As the configuration fills them (the table keeps a 0). */
    pool->keepalive = SWS_DEFAULT_POOL_KEEPALIVE;
    pool->retries = SWS_DEFAULT_POOL_RETRIES;
    for (unsigned i = 0; i < f->nmembers; i++) {
        char addr[64];
        Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->port[i]);
        m->id = 100 + (uint64_t)i;
        m->address = strdup(addr);
        m->weight = 1;
        PUSH(pool->members, pool->n_members, m);
    }
    PUSH(rs->pools, rs->n_pools, pool);
    return pool;
}

/* A new table generation: host "*", every path proxied to pool "app"
 * (f->nmembers members), as tweak changes it; the connection set and the
 * worker context's pools adopt it, as worker.c does. */
static void build_table(fixture_t *f, tweak_fn tweak)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "*");
    Sws__Route *r = host_route(h, SWS__ROUTE__MATCH__PREFIX, "/");
    Sws__Proxy *px = NEW(Sws__Proxy, SWS__PROXY__INIT);
    px->pool = strdup("app");
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = px;
    Sws__Pool *pool = add_pool(rs, f);
    if (tweak != NULL)
        tweak(pool, r);
    char err[256] = "";
    size_t size = sws_table_size(rs);
    assert_true(f->ngen < NARENA);
    f->arena = aligned_alloc(8, (size + 7) & ~(size_t)7);
    assert_non_null(f->arena);
    f->arenas[f->ngen++] = f->arena;
    if (sws_table_build(f->arena, size, f->ngen, rs, err, sizeof(err)) != 0)
        fail_msg("table: %s", err);
    sws__route_set__free_unpacked(rs, NULL);
    if (f->set.loop != NULL)
        sws_conn_set_configure(&f->set, f->arena, &f->st, SWS_STR("scalws-test"));
    if (sws_upstream_pools_adopt(&f->ctx.pools, f->arena, &f->ctx.upstreams, err, sizeof(err)))
        fail_msg("pools: %s", err);
}

/* The pool's balancer in the worker's view. */
static sws_upstream_balancer_t *balancer(fixture_t *f)
{
    assert_int_equal(f->ctx.pools.npools, 1);
    return &f->ctx.pools.pools[0].bal;
}

/* The next request goes to member 0 (round robin starts over). */
static void rr_reset(fixture_t *f)
{
    sws_upstream_balancer_t *b = balancer(f);
    for (uint32_t i = 0; i < b->npeers; i++)
        b->peers[i].current = 0;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    int sv[2];
    assert_non_null(f);
    f->out = malloc(OUT_MAX);
    assert_non_null(f->out);
    sws_log_init("test", 2, getenv("TEST_LOG") ? SWS_LOG_DEBUG : SWS_LOG_CRIT);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    for (int i = 0; i < NUP; i++)
        f->listen_fd[i] = listener(&f->port[i]);
    f->nmembers = 2;
    sws_upstream_set_init(&f->ctx.upstreams, &f->loop);
    build_table(f, NULL);
    sws_conn_set_init(&f->set, &f->loop, &sws_http1_proto, sws_handlers_dispatch, &f->counters);
    f->set.ctx = &f->ctx;
    f->set.head_handler = sws_handlers_dispatch_head;
    f->st = sws_conn_default_settings;
    f->st.max_body_size = 64u << 20; /* room for a body larger than all the buffers */
    sws_conn_set_configure(&f->set, f->arena, &f->st, SWS_STR("scalws-test"));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    f->client = sv[1];
    f->conn = sws_conn_open(&f->set, sv[0], NULL, 0);
    assert_non_null(f->conn);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_conn_set_close_all(&f->set);
    sws_conn_set_reap(&f->set);
    sws_worker_ctx_close(&f->ctx);
    assert_int_equal(f->ctx.upstreams.nopen, 0);
    sws_conn_set_destroy(&f->set);
    sws_loop_close(&f->loop);
    for (int i = 0; i < NUP; i++)
        if (f->listen_fd[i] >= 0)
            close(f->listen_fd[i]);
    if (f->client >= 0)
        close(f->client);
    for (unsigned i = 0; i < f->ngen; i++)
        free(f->arenas[i]);
    free(f->out);
    free(f);
    return 0;
}

/* ---- driving the loop, the client and the upstreams ---- */

static void drain_client(fixture_t *f)
{
    for (; f->client >= 0;) {
        if (f->out_len + 1 >= OUT_MAX)
            fail_msg("the server sent more than %u bytes", OUT_MAX);
        ssize_t n = read(f->client, f->out + f->out_len, OUT_MAX - 1 - f->out_len);
        if (n > 0) {
            f->out_len += (size_t)n;
            continue;
        }
        if (n == 0)
            f->eof = 1;
        break;
    }
    f->out[f->out_len] = '\0';
}

/* Loop iterations without sleeping: every step is local. read_client: also
 * read what the client was sent (a test of backpressure does not). */
static void pump_opt(fixture_t *f, int read_client)
{
    for (int i = 0; i < 16; i++) {
        assert_int_equal(sws_loop_run_once(&f->loop, 0), 0);
        sws_conn_set_reap(&f->set);
        if (read_client)
            drain_client(f);
    }
}

static void pump(fixture_t *f)
{
    pump_opt(f, 1);
}

static void client_send(fixture_t *f, const char *s)
{
    assert_int_equal(write(f->client, s, strlen(s)), (ssize_t)strlen(s));
    pump(f);
}

/* The next connection to upstream i, or -1 when none came (after the
 * loop had its chances to make one). */
static int up_accept(fixture_t *f, int i)
{
    for (int k = 0; k < 8; k++) {
        int fd = accept4(f->listen_fd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        pump(f);
    }
    return -1;
}

/* Read a request head (up to its blank line) from an upstream
 * connection into buf. */
static void up_read_head(fixture_t *f, int fd, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < 64 && strstr(buf, "\r\n\r\n") == NULL; k++) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n > 0) {
            len += (size_t)n;
            buf[len] = '\0';
            continue;
        }
        if (n == 0)
            fail_msg("the proxy closed before its request ended: \"%s\"", buf);
        pump(f);
    }
    if (strstr(buf, "\r\n\r\n") == NULL)
        fail_msg("no complete request head upstream: \"%s\"", buf);
}

static void up_write(fixture_t *f, int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
    pump(f);
}

/* Whether the proxy closed the upstream connection fd (read gives 0). */
static int up_closed(int fd)
{
    char b[256];
    ssize_t n;
    while ((n = read(fd, b, sizeof(b))) > 0)
        ;
    return n == 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Accept on upstream i, read the request, answer it. The upstream fd. */
static int up_serve(fixture_t *f, int i, const char *answer)
{
    char req[4096];
    int fd = up_accept(f, i);
    if (fd < 0)
        fail_msg("no connection to upstream %d", i);
    up_read_head(f, fd, req, sizeof(req));
    up_write(f, fd, answer);
    return fd;
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: a\r\n\r\n"
#define OK5 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"

static void retries_0(Sws__Pool *pool, Sws__Route *route);

/* ---- the relay ---- */

static void test_request_forwarded_without_hop_by_hop_fields(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, "GET /x/../b?q=1 HTTP/1.1\r\nHost: a.example\r\nConnection: keep-alive, "
                   "X-Drop\r\nX-Drop: 1\r\nTE: trailers\r\nUpgrade: h2c\r\nKeep-Alive: 5\r\n"
                   "Proxy-Connection: x\r\nX-Keep: yes\r\nX-Forwarded-For: 10.0.0.1\r\n"
                   "X-Real-IP: 6.6.6.6\r\n\r\n");
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "GET /b?q=1 HTTP/1.1\r\nHost: a.example\r\n", 38) == 0);
    assert_non_null(strstr(req, "\r\nX-Keep: yes\r\n"));
    assert_non_null(strstr(req, "\r\nX-Forwarded-For: 10.0.0.1, -\r\n"));
    assert_non_null(strstr(req, "\r\nX-Forwarded-Proto: http\r\n"));
    assert_non_null(strstr(req, "\r\nX-Forwarded-Host: a.example\r\n"));
    assert_non_null(strstr(req, "\r\nX-Real-IP: -\r\n"));
    assert_null(strstr(req, "6.6.6.6"));
    assert_null(strcasestr(req, "connection:"));
    assert_null(strcasestr(req, "x-drop"));
    assert_null(strcasestr(req, "\nte:"));
    assert_null(strcasestr(req, "upgrade:"));
    assert_null(strcasestr(req, "keep-alive"));
    assert_null(strcasestr(req, "content-length"));
    up_write(f, fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: X-Secret\r\n"
                    "X-Secret: s\r\nKeep-Alive: timeout=5\r\nUpgrade: h9\r\nServer: up\r\nDate: then\r\n"
                    "X-Up: 1\r\n\r\nhello");
    assert_non_null(strstr(f->out, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(f->out, "\r\nX-Up: 1\r\n"));
    assert_non_null(strstr(f->out, "\r\nContent-Length: 5\r\n"));
    assert_null(strstr(f->out, "X-Secret"));
    assert_null(strstr(f->out, "timeout=5"));
    assert_null(strstr(f->out, "h9"));
    assert_null(strstr(f->out, "Server: up"));
    assert_null(strstr(f->out, "Date: then"));
    assert_non_null(strstr(f->out, "\r\n\r\nhello"));
    assert_false(f->eof);
    close(fd);
}

static void test_keepalive_upstream_connection_is_reused(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 1);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    /* The second request, to the same member, comes on the same upstream
     * connection. */
    rr_reset(f);
    client_send(f, GET("/two"));
    assert_int_equal(f->ctx.upstreams.nidle, 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "GET /two ", 9) == 0);
    up_write(f, fd, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    assert_int_equal(up_accept(f, 0), -1);
    assert_int_equal(up_accept(f, 1), -1);
    close(fd);
}

static void test_idle_connection_closed_by_upstream_is_dropped(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    close(fd);
    pump(f);
    assert_int_equal(f->ctx.upstreams.nidle, 0);
    /* The next request opens a new connection, and is answered. */
    rr_reset(f);
    client_send(f, GET("/two"));
    fd = up_serve(f, 0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    close(fd);
}

/* The loop delivered every event of the idle connection (none came): it
 * is taken again without a system call. */
static void test_reused_upstream_connection_costs_no_peek(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    rr_reset(f);
    peeks = 0;
    client_send(f, GET("/two"));
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "GET /two ", 9) == 0);
    assert_int_equal(peeks, 0);
    up_write(f, fd, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    close(fd);
}

/* A keep-alive request on a pooled connection costs four reads and
 * writes: the client's request read once (a short read means drained: no
 * read until the next edge), written upstream once, the answer read once
 * (it ended: no read until EAGAIN) and written to the client once. */
static void test_keepalive_request_costs_one_read_and_write_each_way(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    rr_reset(f);
    watched[0] = f->conn->io.fd;
    watched[1] = f->ctx.upstreams.buckets->head->io.fd;
    io_calls[0] = io_calls[1] = 0;
    client_send(f, GET("/two"));
    up_read_head(f, fd, req, sizeof(req));
    up_write(f, fd, OK5);
    watched[0] = watched[1] = -1;
    assert_int_equal(count(f->out, "200 OK"), 2);
    assert_int_equal(io_calls[0], 2); /* the request in, the answer out */
    assert_int_equal(io_calls[1], 2); /* the request out, the answer in */
    close(fd);
}

/* The upstream's FIN came with its answer, in one event: nothing reports
 * it again, so the connection never joins the pool. */
static void test_fin_with_the_answer_keeps_connection_out_of_pool(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/one"));
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_int_equal(write(fd, OK5, strlen(OK5)), (ssize_t)strlen(OK5));
    assert_int_equal(shutdown(fd, SHUT_WR), 0);
    pump(f);
    assert_int_equal(count(f->out, "200 OK"), 1);
    assert_int_equal(f->ctx.upstreams.nidle, 0);
    assert_true(up_closed(fd));
    close(fd);
}

/* The idle connection's FIN is in the same batch as the request that
 * would take it, after it: the socket is asked (one MSG_PEEK), and the
 * request goes on a new connection to the same member. */
static void test_idle_connection_closed_in_the_same_batch_is_not_reused(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    rr_reset(f);
    peeks = 0;
    const char *two = GET("/two");
    assert_int_equal(write(f->client, two, strlen(two)), (ssize_t)strlen(two));
    close(fd);
    pump(f);
    assert_int_equal(peeks, 1);
    fd = up_serve(f, 0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    assert_int_equal(up_accept(f, 1), -1);
    close(fd);
}

/* Member 0 answered GET /one on a connection now in the idle pool, and
 * the next request goes to member 0 again. Its fake upstream's end. */
static int pooled_one(fixture_t *f)
{
    rr_reset(f);
    client_send(f, GET("/one"));
    int fd = up_serve(f, 0, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    rr_reset(f);
    return fd;
}

/* The member closes the pooled connection the request went out on before
 * answering (its keep-alive timeout fired as the request came): the
 * request goes once more, on a new connection to the same member, even
 * with `retries: 0`, and the member's health is not charged (ADR 0026). */
static void test_pooled_connection_closed_before_answering_goes_on_a_new_one(void **state)
{
    fixture_t *f = *state;
    char req[4096], want[128];
    build_table(f, retries_0);
    int fd = pooled_one(f);
    client_send(f, GET("/two"));
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "GET /two ", 9) == 0);
    close(fd);
    pump(f);
    fd = up_serve(f, 0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    assert_null(strstr(f->out, " 502 "));
    assert_int_equal(up_accept(f, 1), -1);
    assert_int_equal(balancer(f)->peers[0].health.failures, 0);
    const sws_request_upstream_t *u = &sws_http1_of(f->conn)->stream.req.upstream;
    snprintf(want, sizeof(want), "127.0.0.1:%d, 127.0.0.1:%d", f->port[0], f->port[0]);
    assert_string_equal(u->addr, want);
    assert_string_equal(u->status, "-, 200");
    close(fd);
}

/* The FIN reaches the pooled connection after the loop's epoll_wait and
 * before the request is written on it: no event said so, the request goes
 * out (no peek) and meets the close; it goes once more on a new
 * connection. */
static void test_pooled_connection_closed_before_the_request_went_out(void **state)
{
    fixture_t *f = *state;
    build_table(f, retries_0);
    int fd = pooled_one(f);
    peeks = 0;
    fin_on_read[0] = f->conn->io.fd;
    fin_on_read[1] = fd;
    client_send(f, GET("/two"));
    assert_int_equal(fin_on_read[0], -1); /* the FIN came as the request was read */
    assert_int_equal(peeks, 0);
    fd = up_serve(f, 0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    assert_null(strstr(f->out, " 502 "));
    assert_int_equal(balancer(f)->peers[0].health.failures, 0);
    close(fd);
}

/* A POST that went out on a pooled connection the member then closed may
 * have been processed: it is not sent again (ADR 0014), whatever the
 * connection; a 502, and the member's health is not charged for a close
 * that says nothing of it. */
static void test_post_on_a_pooled_connection_closed_is_not_repeated(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    int fd = pooled_one(f);
    client_send(f, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "POST /p ", 8) == 0);
    close(fd);
    pump(f);
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
    assert_int_equal(up_accept(f, 0), -1);
    assert_int_equal(up_accept(f, 1), -1);
    assert_int_equal(balancer(f)->peers[0].health.failures, 0);
}

static void test_chunked_response_with_trailers(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
                            "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n");
    assert_non_null(strstr(f->out, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n"));
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    close(fd);
}

static void test_close_delimited_response_ends_and_is_not_pooled(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 200 OK\r\n\r\nuntil close");
    close(fd);
    pump(f);
    /* The client's protocol frames it (chunked here). */
    assert_non_null(strstr(f->out, "\r\n\r\nb\r\nuntil close\r\n0\r\n\r\n"));
    assert_int_equal(f->ctx.upstreams.nidle, 0);
    assert_false(f->eof);
}

/* The member's 1xx go to the client in order, before the final answer
 * (ADR 0020: the 100 answers an Expect the proxy forwarded). */
static void test_interim_answers_are_relayed(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                            "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
    const char *interim = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n";
    assert_true(f->out_len > strlen(interim));
    assert_memory_equal(f->out, interim, strlen(interim));
    assert_non_null(strstr(f->out, "HTTP/1.1 201 Created\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\nok"));
    close(fd);
}

static void test_head_and_304_carry_no_body(void **state)
{
    fixture_t *f = *state;
    client_send(f, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
    int fd = up_serve(f, 0, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    assert_non_null(strstr(f->out, "\r\nContent-Length: 100\r\n"));
    assert_true(f->out_len > 4 && memcmp(f->out + f->out_len - 4, "\r\n\r\n", 4) == 0);
    /* The upstream connection is in sync: the next answer parses. */
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    char req[4096];
    rr_reset(f);
    client_send(f, GET("/c"));
    up_read_head(f, fd, req, sizeof(req));
    up_write(f, fd, "HTTP/1.1 304 Not Modified\r\nETag: \"e\"\r\n\r\n");
    assert_non_null(strstr(f->out, "HTTP/1.1 304 Not Modified\r\n"));
    assert_true(memcmp(f->out + f->out_len - 4, "\r\n\r\n", 4) == 0);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    close(fd);
}

static void test_slow_client_stops_upstream_reads(void **state)
{
    fixture_t *f = *state;
    enum { BODY = 4 << 20 };
    char head[128], req[4096];
    static char chunk[64 * 1024];
    memset(chunk, 'x', sizeof(chunk));
    client_send(f, GET("/big"));
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    /* A fixed send buffer (no autotuning to megabytes), so what the
     * kernel holds between the two ends stays well below the body. */
    int sndbuf = 64 * 1024;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
    up_read_head(f, fd, req, sizeof(req));
    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BODY);
    assert_int_equal(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    /* The client reads nothing: the upstream's writes must stall, and the
     * stream hold at most one read of the upstream. */
    size_t sent = 0;
    for (int k = 0; k < 256 && sent < BODY; k++) {
        size_t want = BODY - sent < sizeof(chunk) ? BODY - sent : sizeof(chunk);
        ssize_t n = write(fd, chunk, want);
        if (n > 0)
            sent += (size_t)n;
        pump_opt(f, 0);
    }
    assert_true(sent < BODY);
    sws_stream_t *st = &sws_http1_of(f->conn)->stream;
    assert_true(st->pend_len <= SWS_PROXY_BUF);
    /* Now the client reads: the rest flows, in order and whole. */
    for (int k = 0; k < 4096 && sent < BODY; k++) {
        size_t want = BODY - sent < sizeof(chunk) ? BODY - sent : sizeof(chunk);
        ssize_t n = write(fd, chunk, want);
        if (n > 0)
            sent += (size_t)n;
        pump(f);
    }
    pump(f);
    assert_int_equal(sent, BODY);
    const char *body = strstr(f->out, "\r\n\r\n");
    assert_non_null(body);
    assert_int_equal(f->out_len - (size_t)(body + 4 - f->out), BODY);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    close(fd);
}

static void test_upstream_closing_mid_body_cuts_the_response(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
    close(fd);
    pump(f);
    assert_non_null(strstr(f->out, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(f->out, "\r\n\r\nonly ten b"));
    assert_true(f->eof); /* the client sees a short body, not a complete one */
    assert_int_equal(count(f->out, "HTTP/1.1"), 1);
}

static void test_client_gone_cancels_the_attempt_at_once(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/"));
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_int_equal(balancer(f)->peers[0].active, 1);
    /* The client leaves before any answer (ADR 0025): the attempt is
     * cancelled now, not when the member answers or times out; the
     * connection is not pooled and the member's health is not charged. */
    close(f->client);
    f->client = -1;
    pump(f);
    assert_true(up_closed(fd));
    assert_int_equal(f->ctx.upstreams.nopen, 0);
    assert_int_equal(balancer(f)->peers[0].active, 0);
    assert_int_equal(balancer(f)->peers[0].health.failures, 0);
    close(fd);
}

/* ---- failures and retries ---- */

/* Upstream i refuses connections from now on. */
static void refuse_member(fixture_t *f, int i)
{
    close(f->listen_fd[i]);
    f->listen_fd[i] = -1;
}

static void test_connect_refused_is_retried_on_another_member(void **state)
{
    fixture_t *f = *state;
    refuse_member(f, 0);
    rr_reset(f);
    client_send(f, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    int fd = up_serve(f, 1, OK5);
    assert_non_null(strstr(f->out, "200 OK"));
    close(fd);
}

static void test_no_member_answers_gives_502(void **state)
{
    fixture_t *f = *state;
    refuse_member(f, 0);
    refuse_member(f, 1);
    client_send(f, GET("/"));
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
}

/* An upstream that reads the request and closes: a GET goes to the other
 * member, a POST is not sent again. */
static void test_broken_after_request_retries_get_only(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    rr_reset(f);
    client_send(f, GET("/"));
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    close(fd);
    pump(f);
    fd = up_serve(f, 1, OK5);
    assert_int_equal(count(f->out, "200 OK"), 1);
    close(fd);

    rr_reset(f);
    client_send(f, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_true(strncmp(req, "POST / ", 7) == 0);
    assert_non_null(strstr(req, "\r\nContent-Length: 0\r\n"));
    close(fd);
    pump(f);
    assert_int_equal(up_accept(f, 0), -1);
    assert_int_equal(up_accept(f, 1), -1);
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
}

static void test_503_is_retried_for_get_not_for_post(void **state)
{
    fixture_t *f = *state;
    rr_reset(f);
    client_send(f, GET("/"));
    int a = up_serve(f, 0, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    int b = up_serve(f, 1, OK5);
    assert_non_null(strstr(f->out, "200 OK"));
    assert_null(strstr(f->out, "503"));
    close(a);
    close(b);

    rr_reset(f);
    f->out_len = 0;
    client_send(f, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    a = up_serve(f, 0, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    assert_non_null(strstr(f->out, "HTTP/1.1 503 "));
    assert_int_equal(up_accept(f, 1), -1);
    close(a);
}

/* Every attempt stalls: the read timeout answers 504 after 1 + retries
 * attempts, never a second time to the member that just failed while the
 * other is up. */
static void read_timeout_20ms(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->timeouts = NEW(Sws__Pool__Timeouts, SWS__POOL__TIMEOUTS__INIT);
    pool->timeouts->connect_ms = SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS;
    pool->timeouts->send_ms = SWS_DEFAULT_POOL_SEND_TIMEOUT_MS;
    pool->timeouts->read_ms = 20;
    pool->timeouts->idle_ms = SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS;
}

static void test_read_timeout_gives_504_after_retries(void **state)
{
    fixture_t *f = *state;
    enum { RETRIES = SWS_DEFAULT_POOL_RETRIES };
    int fds[1 + RETRIES];
    int members[1 + RETRIES];
    char req[4096];
    build_table(f, read_timeout_20ms);
    rr_reset(f);
    client_send(f, GET("/"));
    for (int k = 0; k <= RETRIES; k++) {
        fds[k] = -1;
        /* Wait (bounded) for the timer to move the request on. */
        for (int w = 0; w < 50 && fds[k] < 0; w++) {
            for (int i = 0; i < NUP && fds[k] < 0; i++) {
                fds[k] = accept4(f->listen_fd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                members[k] = i;
            }
            if (fds[k] < 0)
                assert_int_equal(sws_loop_run_once(&f->loop, 50), 0);
        }
        if (fds[k] < 0)
            fail_msg("attempt %d never came", k);
        up_read_head(f, fds[k], req, sizeof(req));
        if (k > 0)
            assert_int_not_equal(members[k], members[k - 1]);
    }
    for (int w = 0; w < 50 && strstr(f->out, "HTTP/1.1") == NULL; w++) {
        assert_int_equal(sws_loop_run_once(&f->loop, 50), 0);
        drain_client(f);
    }
    assert_non_null(strstr(f->out, "HTTP/1.1 504 "));
    for (int k = 0; k <= RETRIES; k++)
        close(fds[k]);
}

static void test_invalid_response_gives_502(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx");
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
    close(fd);
}

/* A status below 100 parses (llhttp takes any three digits) but is no
 * answer: 502, not a client left waiting with no timer (found in review:
 * it was handed to the stream as an interim answer, which refused it). */
static void test_status_below_100_gives_502(void **state)
{
    fixture_t *f = *state;
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 099 Odd\r\n\r\n");
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
    close(fd);
}

/* ---- request bodies ---- */

/* Read an upstream's request (head and body) until `until` is in it. */
static void up_read_until(fixture_t *f, int fd, char *buf, size_t cap, const char *until)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < 64 && strstr(buf, until) == NULL; k++) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n > 0) {
            len += (size_t)n;
            buf[len] = '\0';
            continue;
        }
        pump(f);
    }
    if (strstr(buf, until) == NULL)
        fail_msg("upstream never got \"%s\": \"%s\"", until, buf);
}

static void test_request_body_with_length_streams_through(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab");
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_until(f, fd, req, sizeof(req), "\r\n\r\nab");
    assert_non_null(strstr(req, "\r\nContent-Length: 5\r\n"));
    client_send(f, "cde");
    up_read_until(f, fd, req, sizeof(req), "cde");
    assert_null(strstr(f->out, "HTTP/1.1"));
    up_write(f, fd, OK5);
    assert_non_null(strstr(f->out, "200 OK"));
    /* In sync: the next request on both connections works. */
    rr_reset(f);
    client_send(f, GET("/n"));
    up_read_until(f, fd, req, sizeof(req), "GET /n ");
    up_write(f, fd, OK5);
    assert_int_equal(count(f->out, "200 OK"), 2);
    close(fd);
}

static void test_chunked_request_body_is_chunked_upstream(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nX-T: 1\r\n\r\n");
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_until(f, fd, req, sizeof(req), "0\r\n\r\n");
    assert_non_null(strstr(req, "\r\nTransfer-Encoding: chunked\r\n"));
    assert_null(strstr(req, "Content-Length"));
    assert_non_null(strstr(req, "\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
    assert_null(strstr(req, "X-T"));
    up_write(f, fd, OK5);
    assert_non_null(strstr(f->out, "200 OK"));
    close(fd);
}

/* The upstream does not read: the client's body stops at a bound (its
 * writes stall), then flows whole once the upstream reads. */
static void test_slow_upstream_stops_reading_the_client(void **state)
{
    fixture_t *f = *state;
    enum { BODY = 16 << 20 };
    static char chunk[64 * 1024], got[256 * 1024];
    char head[128];
    memset(chunk, 'y', sizeof(chunk));
    snprintf(head, sizeof(head), "PUT /big HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n",
             BODY);
    client_send(f, head);
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    size_t sent = 0, received = 0;
    for (int k = 0; k < 512 && sent < BODY; k++) {
        size_t want = BODY - sent < sizeof(chunk) ? BODY - sent : sizeof(chunk);
        ssize_t n = write(f->client, chunk, want);
        if (n > 0)
            sent += (size_t)n;
        pump(f);
    }
    assert_true(sent < BODY);
    assert_true(f->conn->input_paused);
    sws_stream_t *st = &sws_http1_of(f->conn)->stream;
    assert_true(st->body_full);
    /* Now the upstream reads: everything arrives, in order. */
    for (int k = 0; k < 100000 && received < BODY + 200; k++) {
        if (sent < BODY) {
            size_t want = BODY - sent < sizeof(chunk) ? BODY - sent : sizeof(chunk);
            ssize_t n = write(f->client, chunk, want);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t n = read(fd, got, sizeof(got));
        if (n > 0) {
            received += (size_t)n;
            continue;
        }
        pump(f);
        if (sent == BODY && n < 0 && received > BODY)
            break;
    }
    assert_int_equal(sent, BODY);
    assert_true(received > BODY);
    assert_true(received < BODY + 512); /* the head, then exactly the body */
    assert_int_equal(got[(received - 1) % sizeof(got)], 'y');
    up_write(f, fd, OK5);
    assert_non_null(strstr(f->out, "200 OK"));
    close(fd);
}

/* No member takes the request: the answer comes before the body was read,
 * so the connection closes after it (what follows cannot be trusted). */
static void test_answer_before_the_body_closes_the_connection(void **state)
{
    fixture_t *f = *state;
    refuse_member(f, 0);
    refuse_member(f, 1);
    client_send(f, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n"
                   "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    pump(f);
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
    assert_non_null(strstr(f->out, "\r\nConnection: close\r\n"));
    assert_int_equal(count(f->out, "HTTP/1.1"), 1);
    assert_true(f->eof);
}

/* A POST whose body went to a member that then broke is not sent again. */
static void test_post_with_body_not_repeated(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    rr_reset(f);
    client_send(f, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz");
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_until(f, fd, req, sizeof(req), "\r\n\r\nxyz");
    close(fd);
    pump(f);
    assert_int_equal(up_accept(f, 1), -1);
    assert_int_equal(up_accept(f, 0), -1);
    assert_non_null(strstr(f->out, "HTTP/1.1 502 "));
}

/* ---- the pool's settings and its balancer ---- */

/* Another client connection; its fd. */
static int client_open(fixture_t *f)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_non_null(sws_conn_open(&f->set, sv[0], NULL, 0));
    return sv[1];
}

static void client_write(fixture_t *f, int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
    pump(f);
}

/* What the client fd was sent so far, into buf. */
static void client_read(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
}

/* The member whose fake upstream got the next connection (each tried in
 * turn, bounded), its fd in *fd; -1 when none came. */
static int up_accept_any(fixture_t *f, int *fd)
{
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < NUP; i++) {
            if (f->listen_fd[i] < 0)
                continue;
            *fd = accept4(f->listen_fd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (*fd >= 0)
                return i;
        }
        pump(f);
    }
    return -1;
}

/* Send one GET (with extra header lines), serve it where it went, close
 * that upstream connection; the member. */
static int one_request(fixture_t *f, const char *extra)
{
    char req[4096], buf[512];
    int fd;
    snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", extra);
    size_t before = count(f->out, "200 OK");
    client_send(f, buf);
    int m = up_accept_any(f, &fd);
    if (m < 0)
        fail_msg("the request reached no upstream");
    up_read_head(f, fd, req, sizeof(req));
    up_write(f, fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    close(fd);
    pump(f);
    assert_int_equal(count(f->out, "200 OK"), before + 1);
    return m;
}

static void weights_2_1(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->members[0]->weight = 2;
    pool->keepalive = 0; /* a connection per request: each one shows its member */
}

static void test_round_robin_follows_the_weights(void **state)
{
    fixture_t *f = *state;
    build_table(f, weights_2_1);
    int n[NUP] = { 0 };
    for (int k = 0; k < 30; k++)
        n[one_request(f, "")]++;
    assert_int_equal(n[0], 20);
    assert_int_equal(n[1], 10);
    assert_int_equal(f->ctx.upstreams.nidle, 0); /* keepalive 0 */
}

static void hash_on_x_user(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->balance = SWS__POOL__BALANCE__HASH;
    pool->hash_key = strdup("header:x-user");
    pool->keepalive = 0;
}

static void test_hash_sends_a_key_to_one_member(void **state)
{
    fixture_t *f = *state;
    build_table(f, hash_on_x_user);
    int seen[NUP] = { 0 };
    for (int key = 0; key < 8; key++) {
        char extra[64];
        snprintf(extra, sizeof(extra), "X-User: user-%d\r\n", key);
        int first = one_request(f, extra);
        seen[first] = 1;
        for (int k = 0; k < 3; k++)
            assert_int_equal(one_request(f, extra), first);
    }
    assert_true(seen[0] && seen[1]); /* the keys are spread, not all on one */
}

static void least_conn(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->balance = SWS__POOL__BALANCE__LEAST_CONN;
}

/* A member busy with a request gets the next one only after the idle
 * member got one: round robin would alternate whatever the load. */
static void test_least_conn_picks_the_member_with_fewer_requests(void **state)
{
    fixture_t *f = *state;
    char req[4096], out[4096];
    int fd0, fd1;
    build_table(f, least_conn);
    int c2 = client_open(f);
    client_send(f, GET("/slow"));
    assert_int_equal(up_accept_any(f, &fd0), 0);
    up_read_head(f, fd0, req, sizeof(req));
    client_write(f, c2, GET("/a"));
    assert_int_equal(up_accept_any(f, &fd1), 1);
    up_read_head(f, fd1, req, sizeof(req));
    up_write(f, fd1, OK5);
    client_read(c2, out, sizeof(out));
    assert_non_null(strstr(out, "200 OK"));
    /* Member 0 still has /slow; member 1 none: /b goes to member 1 again
     * (on its idle connection). */
    client_write(f, c2, GET("/b"));
    up_read_head(f, fd1, req, sizeof(req));
    assert_true(strncmp(req, "GET /b ", 7) == 0);
    up_write(f, fd1, OK5);
    up_write(f, fd0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 1);
    close(fd0);
    close(fd1);
    close(c2);
}

static void health_2_fails(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->health = NEW(Sws__Pool__Health, SWS__POOL__HEALTH__INIT);
    pool->health->max_fails = 2;
    pool->health->fail_window_ms = 60000;
    pool->health->cooldown_ms = 60000;
    pool->keepalive = 0;
}

static void test_member_down_after_max_fails_gets_nothing(void **state)
{
    fixture_t *f = *state;
    close(f->listen_fd[0]); /* member 0 refuses connections */
    f->listen_fd[0] = -1;
    build_table(f, health_2_fails);
    sws_upstream_balancer_t *b = balancer(f);
    /* Each request fails on member 0 when it is picked and is retried on
     * member 1: the client sees no failure. */
    for (int k = 0; k < 10; k++)
        assert_int_equal(one_request(f, ""), 1);
    assert_true(sws_upstream_health_is_down(&b->peers[0].health));
    assert_int_equal(b->peers[0].health.failures, 2); /* none tried during the cooldown */
    assert_int_equal(b->peers[0].active, 0);
    assert_int_equal(b->peers[1].active, 0);
}

static void max_conns_1(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->max_conns = 1;
}

static void test_max_conns_limits_requests_per_member(void **state)
{
    fixture_t *f = *state;
    char req[4096], out[4096];
    int fd0, fd1;
    build_table(f, max_conns_1);
    int c2 = client_open(f), c3 = client_open(f);
    client_send(f, GET("/1"));
    assert_int_equal(up_accept_any(f, &fd0), 0);
    up_read_head(f, fd0, req, sizeof(req));
    client_write(f, c2, GET("/2"));
    assert_int_equal(up_accept_any(f, &fd1), 1);
    up_read_head(f, fd1, req, sizeof(req));
    /* Both members have their one request: the third has nowhere to go. */
    client_write(f, c3, GET("/3"));
    client_read(c3, out, sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 503 "));
    up_write(f, fd0, OK5);
    /* Member 0 is free again: the next request goes there. */
    client_write(f, c3, GET("/4"));
    up_read_head(f, fd0, req, sizeof(req));
    assert_true(strncmp(req, "GET /4 ", 7) == 0);
    close(fd0);
    close(fd1);
    close(c2);
    close(c3);
}

static void host_header(Sws__Pool *pool, Sws__Route *route)
{
    (void)pool;
    route->proxy->host_header = strdup("api.internal:8080");
}

static void test_host_header_replaces_the_clients(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    build_table(f, host_header);
    client_send(f, GET("/"));
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    assert_non_null(strstr(req, "\r\nHost: api.internal:8080\r\n"));
    assert_non_null(strstr(req, "\r\nX-Forwarded-Host: a\r\n"));
    up_write(f, fd, OK5);
    close(fd);
}

static void retries_0(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->retries = 0;
}

static void test_retries_0_means_one_attempt(void **state)
{
    fixture_t *f = *state;
    build_table(f, retries_0);
    client_send(f, GET("/"));
    int fd = up_serve(f, 0, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    assert_non_null(strstr(f->out, "HTTP/1.1 503 "));
    assert_int_equal(up_accept(f, 1), -1);
    close(fd);
}

static void three_members(Sws__Pool *pool, Sws__Route *route)
{
    (void)pool;
    (void)route;
}

/* A reload that adds a member keeps the others' turns: after member 0's
 * turn, member 1's comes, not member 0's again as a fresh start would
 * give. A reload that removes a member closes its idle connection. */
static void test_reload_carries_turns_and_closes_removed_members(void **state)
{
    fixture_t *f = *state;
    char req[4096];
    client_send(f, GET("/"));
    int fd0 = up_serve(f, 0, OK5);
    f->nmembers = 3;
    build_table(f, three_members);
    client_send(f, GET("/"));
    int fd1 = up_serve(f, 1, OK5);
    assert_int_equal(f->ctx.upstreams.nidle, 2);
    f->nmembers = 1; /* members 1 and 2 go */
    build_table(f, three_members);
    assert_int_equal(f->ctx.upstreams.nidle, 1);
    assert_true(up_closed(fd1));
    /* Member 0's connection stays and serves. */
    client_send(f, GET("/again"));
    up_read_head(f, fd0, req, sizeof(req));
    assert_true(strncmp(req, "GET /again ", 11) == 0);
    up_write(f, fd0, OK5);
    assert_int_equal(count(f->out, "200 OK"), 3);
    close(fd0);
    close(fd1);
}

/* Each attempt is in the request's upstream fields, for the access log. */
static void test_attempts_recorded_for_the_access_log(void **state)
{
    fixture_t *f = *state;
    char want[128];
    rr_reset(f);
    client_send(f, GET("/"));
    int fd0 = up_serve(f, 0, "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
    int fd1 = up_serve(f, 1, OK5);
    assert_int_equal(count(f->out, "200 OK"), 1);
    const sws_request_upstream_t *u = &sws_http1_of(f->conn)->stream.req.upstream;
    snprintf(want, sizeof(want), "127.0.0.1:%d, 127.0.0.1:%d", f->port[0], f->port[1]);
    assert_string_equal(u->addr, want);
    assert_string_equal(u->status, "503, 200");
    assert_non_null(strchr(u->ms, ','));
    close(fd0);
    close(fd1);
}

/* ---- tunnels (ADR 0020) ---- */

/* The pool's idle timeout for tunnels, short; read as the test says. */
static uint32_t tunnel_idle_ms, tunnel_read_ms;

static void tunnel_timeouts(Sws__Pool *pool, Sws__Route *route)
{
    (void)route;
    pool->timeouts = NEW(Sws__Pool__Timeouts, SWS__POOL__TIMEOUTS__INIT);
    pool->timeouts->connect_ms = SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS;
    pool->timeouts->send_ms = SWS_DEFAULT_POOL_SEND_TIMEOUT_MS;
    pool->timeouts->read_ms = tunnel_read_ms;
    pool->timeouts->idle_ms = tunnel_idle_ms;
}

/* An "Upgrade: echo" request that member 0 answers 101: a tunnel. The
 * member's end. */
static int tunnel_open(fixture_t *f, uint32_t idle_ms, uint32_t read_ms)
{
    char req[4096];
    tunnel_idle_ms = idle_ms;
    tunnel_read_ms = read_ms;
    build_table(f, tunnel_timeouts);
    rr_reset(f);
    client_send(f, "GET /t HTTP/1.1\r\nHost: a\r\nUpgrade: echo\r\nConnection: upgrade\r\n\r\n");
    int fd = up_accept(f, 0);
    assert_true(fd >= 0);
    up_read_head(f, fd, req, sizeof(req));
    up_write(f, fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n");
    assert_non_null(strstr(f->out, "HTTP/1.1 101 "));
    return fd;
}

/* Output queued on the client connection. */
static size_t queued(const fixture_t *f)
{
    return f->conn->olen - f->conn->osent;
}

/* The member sends until nothing moves: the client reads nothing, so its
 * socket, then the connection's output, then the member's socket fill. */
static void tunnel_fill(fixture_t *f, int ufd)
{
    static char blob[16384];
    int k;
    for (k = 0; k < 4096; k++) {
        ssize_t n = send(ufd, blob, sizeof(blob), MSG_DONTWAIT);
        pump_opt(f, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        assert_true(n > 0);
    }
    assert_true(k < 4096);
    assert_true(sws_conn_output_blocked(f->conn));
}

/* Run the loop (timers included) for ms, from now. */
static void run_for(fixture_t *f, uint64_t ms)
{
    sws_loop_update_time(&f->loop);
    uint64_t until = sws_loop_now_ms(&f->loop) + ms;
    for (int i = 0; i < 10000 && sws_loop_now_ms(&f->loop) < until; i++) {
        assert_int_equal(sws_loop_run_once(&f->loop, 5), 0);
        sws_conn_set_reap(&f->set);
    }
}

/* The member's bytes wait for a client that reads nothing: the output
 * toward it holds at most its high-water mark (64 KiB, what
 * docs/operations.md promises), also when the member's bytes come as a
 * burst just below the mark (a whole read's worth would go 16 KiB
 * over). */
static void test_tunnel_output_stays_within_the_mark(void **state)
{
    fixture_t *f = *state;
    static char blob[32768];
    int ufd = tunnel_open(f, SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS, SWS_DEFAULT_POOL_READ_TIMEOUT_MS);
    /* 1000 bytes at a time (short reads) until the client's socket is
     * full and the output is just below the mark. */
    for (int k = 0; k < 4096 && queued(f) < SWS_CONN_OUT_HWM - 1000; k++) {
        assert_int_equal(send(ufd, blob, 1000, MSG_DONTWAIT), 1000);
        pump_opt(f, 0);
    }
    assert_true(queued(f) >= SWS_CONN_OUT_HWM - 1000 && queued(f) < SWS_CONN_OUT_HWM);
    assert_int_equal(send(ufd, blob, sizeof(blob), MSG_DONTWAIT), (ssize_t)sizeof(blob));
    pump_opt(f, 0);
    assert_int_equal(queued(f), SWS_CONN_OUT_HWM);
    close(ufd);
}

/* Fire the one armed timer of the member connections now, as the loop
 * would at its deadline: a test then decides when an expiry comes, not
 * the wall clock (moving a deadline earlier would not do: the loop
 * sleeps by its cached next_expiry_ms). */
static void fire_upstream_timer(fixture_t *f)
{
    sws_upstream_set_t *s = &f->ctx.upstreams;
    for (unsigned i = 0; i < s->nq; i++) {
        sws_timer_t *t = s->q[i].head.next;
        if (t != &s->q[i].head) {
            sws_timer_disarm(t);
            t->cb(t);
            return;
        }
    }
    fail_msg("no member connection has a timer armed");
}

/* A slow reader keeps a busy tunnel open: bytes it takes from the
 * kernel's buffers are movement, though the tunnel reads nothing until the
 * output drains below its mark. Once nothing moves, the idle timer ends
 * the tunnel. */
static void test_tunnel_draining_to_a_slow_reader_is_not_idle(void **state)
{
    fixture_t *f = *state;
    static char b[40 * 1024]; /* more than a socket buffer's piece (skb) */
    /* The idle timeout is the default (minutes): every expiry below is
     * fired by the test. */
    int ufd = tunnel_open(f, SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS, SWS_DEFAULT_POOL_READ_TIMEOUT_MS);
    tunnel_fill(f, ufd);
    /* The client takes 40 KiB before each of two expiries: too little for
     * the socket to take more of the output, so the tunnel reads nothing. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(read(f->client, b, sizeof(b)), (ssize_t)sizeof(b));
        pump_opt(f, 0); /* whatever the read lets move, before the expiry */
        fire_upstream_timer(f);
        pump_opt(f, 0);
        /* Ended, the tunnel would close once the client's output drains
         * (it never does here): the connection's mark says it at once. */
        assert_false(f->conn->close_after);
    }
    assert_int_equal(queued(f), SWS_CONN_OUT_HWM); /* the tunnel moved nothing itself */
    fire_upstream_timer(f); /* nothing moved since the last: idle */
    assert_true(f->conn->close_after);
    for (int i = 0; i < 100 && !up_closed(ufd); i++) /* the client reads: all goes */
        pump(f);
    assert_true(up_closed(ufd));
    close(ufd);
}

/* After the client's FIN is passed on, the member's answer is awaited for
 * the pool's read timeout, not its idle one. */
static void test_half_closed_tunnel_waits_the_read_timeout(void **state)
{
    fixture_t *f = *state;
    char b[64];
    int ufd = tunnel_open(f, SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS, 100);
    assert_int_equal(shutdown(f->client, SHUT_WR), 0);
    pump(f);
    assert_int_equal(read(ufd, b, sizeof(b)), 0); /* the FIN, passed on */
    up_write(f, ufd, "late"); /* the answer still reaches the client */
    assert_non_null(strstr(f->out, "late"));
    for (int i = 0; i < 40 && !f->eof; i++) {
        run_for(f, 50);
        drain_client(f);
    }
    assert_true(f->eof);
    close(ufd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_request_forwarded_without_hop_by_hop_fields, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_upstream_connection_is_reused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reused_upstream_connection_costs_no_peek, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_request_costs_one_read_and_write_each_way,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fin_with_the_answer_keeps_connection_out_of_pool,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connection_closed_in_the_same_batch_is_not_reused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connection_closed_by_upstream_is_dropped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_pooled_connection_closed_before_answering_goes_on_a_new_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pooled_connection_closed_before_the_request_went_out,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_on_a_pooled_connection_closed_is_not_repeated,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_response_with_trailers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_delimited_response_ends_and_is_not_pooled,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_interim_answers_are_relayed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_below_100_gives_502, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_and_304_carry_no_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slow_client_stops_upstream_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_closing_mid_body_cuts_the_response, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_client_gone_cancels_the_attempt_at_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_connect_refused_is_retried_on_another_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_member_answers_gives_502, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_after_request_retries_get_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_503_is_retried_for_get_not_for_post, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_timeout_gives_504_after_retries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_invalid_response_gives_502, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_body_with_length_streams_through, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_chunked_request_body_is_chunked_upstream, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_slow_upstream_stops_reading_the_client, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_answer_before_the_body_closes_the_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_post_with_body_not_repeated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_robin_follows_the_weights, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hash_sends_a_key_to_one_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_least_conn_picks_the_member_with_fewer_requests, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_member_down_after_max_fails_gets_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_max_conns_limits_requests_per_member, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_host_header_replaces_the_clients, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_retries_0_means_one_attempt, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reload_carries_turns_and_closes_removed_members, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tunnel_output_stays_within_the_mark, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tunnel_draining_to_a_slow_reader_is_not_idle, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_half_closed_tunnel_waits_the_read_timeout, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_attempts_recorded_for_the_access_log, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
