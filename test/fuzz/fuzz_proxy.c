/* libFuzzer target: an upstream's response as the proxy action parses and
 * relays it (llhttp HTTP_RESPONSE, worker/proxy.c's callbacks, the stream
 * and the HTTP/1 sink), on real connections over socketpairs: the
 * client's, and the upstream's, adopted into the worker's idle pool so
 * that nothing touches the network.
 *
 * Input: byte 0 bit 0 set: the client asks HEAD, else GET, or (bit 1) a
 * POST with a 3-byte body that streams through, or (bit 2) a GET asking
 * for an upgrade (a 101 makes it a tunnel, ADR 0020), or (bit 3) a POST
 * that waits for 100 Continue (forwarded as Expect); byte 1: where
 * the response is cut into two writes (the loop turns between them); the
 * rest is the response. The upstream then shuts down its side.
 *
 * Beyond crashes and sanitizer reports it checks: the client receives
 * either nothing or bytes that start with an HTTP/1.1 status line (a 502
 * when the upstream's answer was not HTTP), and every upstream connection
 * is closed or pooled when the exchange is over (none leaks). Retries are
 * off: one member, one attempt. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "proto/scalws.pb-c.h"
#include "shm/table.h"
#include "worker/conn.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/http1.h"
#include "worker/upstream_conn.h"

#define OUT_CAP (256u * 1024)
#define MEMBER_ID 7

static void *arena;
static char out[OUT_CAP];
static size_t out_len;

/* One host "*", one route "/" proxied to pool "p" with one member. */
static void build_table(void)
{
    Sws__Member m = SWS__MEMBER__INIT;
    m.id = MEMBER_ID;
    m.address = "127.0.0.1:9";
    m.weight = 1;
    Sws__Member *members[] = { &m };
    Sws__Pool pool = SWS__POOL__INIT;
    pool.name = "p";
    pool.members = members;
    pool.n_members = 1;
    Sws__Pool *pools[] = { &pool };
    Sws__Proxy px = SWS__PROXY__INIT;
    px.pool = "p";
    px.via = "fz"; /* a Via added to what is relayed */
    Sws__Route route = SWS__ROUTE__INIT;
    route.match = SWS__ROUTE__MATCH__PREFIX;
    route.path = "/";
    route.action_case = SWS__ROUTE__ACTION_PROXY;
    route.proxy = &px;
    Sws__Route *routes[] = { &route };
    char *names[] = { "*" };
    Sws__Host host = SWS__HOST__INIT;
    host.names = names;
    host.n_names = 1;
    host.routes = routes;
    host.n_routes = 1;
    Sws__Host *hosts[] = { &host };
    Sws__Settings settings = SWS__SETTINGS__INIT;
    settings.server_name = "fuzz";
    Sws__RouteSet rs = SWS__ROUTE_SET__INIT;
    rs.settings = &settings;
    rs.hosts = hosts;
    rs.n_hosts = 1;
    rs.pools = pools;
    rs.n_pools = 1;
    char err[256];
    size_t size = sws_table_size(&rs);
    arena = aligned_alloc(8, (size + 7) & ~(size_t)7);
    if (arena == NULL || sws_table_build(arena, size, 1, &rs, err, sizeof(err)) != 0)
        abort();
}

static void drain(int fd)
{
    char tmp[16384];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n <= 0)
            return;
        size_t take = (size_t)n < OUT_CAP - out_len ? (size_t)n : OUT_CAP - out_len;
        memcpy(out + out_len, tmp, take);
        out_len += take;
    }
}

static void turn(sws_loop_t *loop, sws_conn_set_t *set, int client, int upstream)
{
    char sink[16384];
    for (int i = 0; i < 8; i++) {
        if (sws_loop_run_once(loop, 0) < 0)
            abort();
        sws_conn_set_reap(set);
        drain(client);
        while (read(upstream, sink, sizeof(sink)) > 0) /* the request: not checked here */
            ;
    }
}

static void send_all(int fd, const uint8_t *p, size_t n, sws_loop_t *loop, sws_conn_set_t *set,
                     int client)
{
    for (int stalls = 0; n > 0 && stalls < 64;) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            stalls++;
        } else {
            return; /* the proxy closed: the rest is not read */
        }
        turn(loop, set, client, fd);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    static sws_shm_counters_t counters;
    if (!ready) {
        sws_log_init("fuzz", 2, SWS_LOG_CRIT);
        build_table();
        ready = 1;
    }
    if (size < 2)
        return 0;
    const char *req =
        (data[0] & 1)   ? "HEAD / HTTP/1.1\r\nHost: f\r\n\r\n"
        : (data[0] & 2) ? "POST / HTTP/1.1\r\nHost: f\r\nContent-Length: 3\r\n\r\nabc"
        : (data[0] & 4) ? "GET / HTTP/1.1\r\nHost: f\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nhi"
        : (data[0] & 8) ? "POST / HTTP/1.1\r\nHost: f\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
                        : "GET / HTTP/1.1\r\nHost: f\r\n\r\n";
    const uint8_t *resp = data + 2;
    size_t len = size - 2, cut = data[1] < len ? data[1] : len;

    sws_loop_t loop;
    sws_conn_set_t set;
    sws_worker_ctx_t ctx;
    int cl[2], up[2];
    memset(&ctx, 0, sizeof(ctx));
    out_len = 0;
    if (sws_loop_init(&loop) < 0)
        abort();
    sws_upstream_set_init(&ctx.upstreams, &loop);
    /* The pool's retries are 0 (not set in build_table): one attempt. */
    char err[128];
    if (sws_upstream_pools_adopt(&ctx.pools, arena, &ctx.upstreams, err, sizeof(err)) < 0)
        abort();
    sws_conn_set_init(&set, &loop, &sws_http1_proto, sws_handlers_dispatch, &counters);
    set.ctx = &ctx;
    set.head_handler = sws_handlers_dispatch_head;
    sws_conn_set_configure(&set, arena, NULL, SWS_STR("fuzz"));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, cl) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, up) < 0)
        abort();
    if (sws_upstream_adopt(&ctx.upstreams, MEMBER_ID, up[0]) < 0)
        abort();
    if (sws_conn_open(&set, cl[0], NULL, 0) == NULL)
        abort();
    if (write(cl[1], req, strlen(req)) != (ssize_t)strlen(req))
        abort();
    turn(&loop, &set, cl[1], up[1]);
    send_all(up[1], resp, cut, &loop, &set, cl[1]);
    send_all(up[1], resp + cut, len - cut, &loop, &set, cl[1]);
    shutdown(up[1], SHUT_WR);
    turn(&loop, &set, cl[1], up[1]);

    if (out_len > 0 && (out_len < 9 || memcmp(out, "HTTP/1.1 ", 9) != 0)) {
        fprintf(stderr, "the client got no status line: \"%.*s\"\n", (int)out_len, out);
        abort();
    }
    sws_conn_set_close_all(&set);
    sws_conn_set_reap(&set);
    sws_worker_ctx_close(&ctx);
    if (ctx.upstreams.nopen != 0)
        abort();
    sws_conn_set_destroy(&set);
    sws_loop_close(&loop);
    close(cl[1]);
    close(up[1]);
    return 0;
}
