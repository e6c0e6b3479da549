/* worker/upstream_pools.c: a worker's view of the pools of a table built
 * from a RouteSet, with the members' socket addresses made from what the
 * table parsed (there is no second parser in the worker). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "shm/table.h"
#include "support/routeset_build.h"
#include "worker/upstream_pools.h"

#define ARENA (64u << 10)

static _Alignas(8) char arena[ARENA];

static void member(Sws__Pool *pool, const char *address)
{
    Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
    m->address = strdup(address);
    m->weight = 1;
    PUSH(pool->members, pool->n_members, m);
}

static void test_members_connect_to_the_addresses_the_table_parsed(void **state)
{
    (void)state;
    char err[256];
    Sws__RouteSet *rs = rs_new();
    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("app");
    member(pool, "127.0.0.1:8080");
    member(pool, "[0:0::1]:9000");
    member(pool, "api.internal:80"); /* a name a source did not resolve */
    PUSH(rs->pools, rs->n_pools, pool);
    if (sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    sws__route_set__free_unpacked(rs, NULL);

    sws_loop_t loop;
    sws_upstream_set_t set = { 0 };
    sws_upstream_pools_t view = { 0 };
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_upstream_set_init(&set, &loop);
    sws_log_set_level(SWS_LOG_CRIT); /* not the unresolved name's line */
    assert_int_equal(sws_upstream_pools_adopt(&view, (const sws_table_t *)arena, &set, err,
                                              sizeof(err)), 0);
    assert_int_equal(view.npools, 1);
    sws_upstream_pool_t *p = &view.pools[0];
    assert_int_equal(p->bal.npeers, 3);

    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&p->members[0].addr.sa;
    assert_int_equal(p->members[0].addr.len, sizeof(*v4));
    assert_int_equal(v4->sin_family, AF_INET);
    assert_int_equal(ntohs(v4->sin_port), 8080);
    assert_int_equal(ntohl(v4->sin_addr.s_addr), INADDR_LOOPBACK);
    assert_string_equal(p->members[0].text, "127.0.0.1:8080");

    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&p->members[1].addr.sa;
    assert_int_equal(p->members[1].addr.len, sizeof(*v6));
    assert_int_equal(v6->sin6_family, AF_INET6);
    assert_int_equal(ntohs(v6->sin6_port), 9000);
    assert_memory_equal(&v6->sin6_addr, &in6addr_loopback, sizeof(in6addr_loopback));
    assert_int_equal(p->bal.peers[1].state, SWS_UPSTREAM_UP);

    /* A name nobody resolved takes no request. */
    assert_int_equal(p->members[2].addr.len, 0);
    assert_int_equal(p->bal.peers[2].state, SWS_UPSTREAM_DOWN);

    sws_upstream_pools_free(&view);
    sws_upstream_set_close(&set);
    sws_loop_close(&loop);
}

/* Build a table of pools {name: addresses} into arena and adopt it. */
static void adopt_pools(sws_upstream_pools_t *view, sws_upstream_set_t *set,
                        const char *const (*pools)[3], size_t n, uint64_t gen)
{
    char err[256];
    Sws__RouteSet *rs = rs_new();
    for (size_t i = 0; i < n; i++) {
        Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
        pool->name = strdup(pools[i][0]);
        for (size_t k = 1; k < 3 && pools[i][k] != NULL; k++)
            member(pool, pools[i][k]);
        PUSH(rs->pools, rs->n_pools, pool);
    }
    if (sws_table_build(arena, sizeof(arena), gen, rs, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    sws__route_set__free_unpacked(rs, NULL);
    assert_int_equal(sws_upstream_pools_adopt(view, (const sws_table_t *)arena, set, err,
                                              sizeof(err)), 0);
}

/* An idle connection: one end of a socketpair (the other end returned). */
static int idle_conn(sws_upstream_set_t *set, uint64_t member_id)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(sws_upstream_adopt(set, member_id, sv[0]), 0);
    return sv[1];
}

/* Whether the far end saw its connection closed (EOF), without waiting. */
static int peer_closed(int fd)
{
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static void test_idle_connections_of_members_that_left_are_closed(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_upstream_set_t set = { 0 };
    sws_upstream_pools_t view = { 0 };
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_upstream_set_init(&set, &loop);
    static const char *const one[][3] = {
        { "a", "127.0.0.1:1", "127.0.0.1:2" },
        { "b", "127.0.0.1:3", NULL },
    };
    adopt_pools(&view, &set, one, 2, 1);
    int stays = idle_conn(&set, view.pools[0].bal.peers[1].id); /* a's 127.0.0.1:2 */
    int goes = idle_conn(&set, view.pools[0].bal.peers[0].id);  /* a's 127.0.0.1:1 */
    int pool_goes = idle_conn(&set, view.pools[1].bal.peers[0].id);
    /* Pool a loses a member and moves behind a new pool; pool b is gone. */
    static const char *const two[][3] = {
        { "c", "127.0.0.1:4", NULL },
        { "a", "127.0.0.1:2", NULL },
    };
    adopt_pools(&view, &set, two, 2, 2);
    assert_false(peer_closed(stays));
    assert_true(peer_closed(goes));
    assert_true(peer_closed(pool_goes));
    close(stays);
    close(goes);
    close(pool_goes);
    sws_upstream_pools_free(&view);
    sws_upstream_set_close(&set);
    sws_loop_close(&loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_connect_to_the_addresses_the_table_parsed),
        cmocka_unit_test(test_idle_connections_of_members_that_left_are_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
