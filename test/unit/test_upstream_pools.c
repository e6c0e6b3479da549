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
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
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

/* The loop, connection set and view a test adopts tables into. */
typedef struct fixture {
    sws_loop_t loop;
    sws_upstream_set_t set;
    sws_upstream_pools_t view;
} fixture_t;

static void fixture_init(fixture_t *f)
{
    *f = (fixture_t){ 0 };
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_upstream_set_init(&f->set, &f->loop);
}

static void fixture_close(fixture_t *f)
{
    sws_upstream_pools_free(&f->view);
    sws_upstream_set_close(&f->set);
    sws_loop_close(&f->loop);
}

/* rs (freed) as generation gen, adopted into f's view. */
static void adopt_rs(fixture_t *f, Sws__RouteSet *rs, uint64_t gen)
{
    char err[256];
    if (sws_table_build(arena, sizeof(arena), gen, rs, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    sws__route_set__free_unpacked(rs, NULL);
    assert_int_equal(sws_upstream_pools_adopt(&f->view, (const sws_table_t *)arena, &f->set, err,
                                              sizeof(err)), 0);
}

/* Pools "a" (two members) and "b" (one); with_b_2: b gets a second one. */
static Sws__RouteSet *two_pools(int with_b_2)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Pool *a = rs_pool(rs, "a");
    pool_member(a, "127.0.0.1:1", 1);
    pool_member(a, "127.0.0.1:2", 1);
    Sws__Pool *b = rs_pool(rs, "b");
    pool_member(b, "127.0.0.1:3", 1);
    if (with_b_2)
        pool_member(b, "127.0.0.1:4", 1);
    return rs;
}

/* This worker's state of a member, as requests and health leave it. */
static void mark_busy(sws_upstream_peer_t *peer)
{
    peer->active = 3;
    peer->requests = 7;
    peer->current = 5;
    peer->health.failures = 2;
}

static void assert_busy(const sws_upstream_peer_t *peer)
{
    assert_int_equal(peer->active, 3);
    assert_int_equal(peer->requests, 7);
    assert_int_equal(peer->current, 5);
    assert_int_equal(peer->health.failures, 2);
}

static void test_unchanged_pool_is_kept_with_its_members_state(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    adopt_rs(&f, two_pools(0), 1);
    sws_upstream_peer_t *a_peers = f.view.pools[0].bal.peers;
    sws_upstream_member_t *a_members = f.view.pools[0].members;
    sws_upstream_peer_t *b_peers = f.view.pools[1].bal.peers;
    mark_busy(&a_peers[1]);
    mark_busy(&b_peers[0]);
    int a_idle = idle_conn(&f.set, a_peers[0].id);
    int b_idle = idle_conn(&f.set, b_peers[0].id);

    adopt_rs(&f, two_pools(1), 2); /* only b changed */
    assert_int_equal(f.view.npools, 2);
    /* a is the same view, not a copy: nothing of it was rebuilt. */
    assert_ptr_equal(f.view.pools[0].bal.peers, a_peers);
    assert_ptr_equal(f.view.pools[0].members, a_members);
    assert_busy(&f.view.pools[0].bal.peers[1]);
    assert_int_equal(f.view.pools[0].bal.peers[0].active, 0);
    /* b was rebuilt with its new member; the one it kept keeps its state. */
    assert_ptr_not_equal(f.view.pools[1].bal.peers, b_peers);
    assert_int_equal(f.view.pools[1].bal.npeers, 2);
    assert_busy(&f.view.pools[1].bal.peers[0]);
    assert_int_equal(f.view.pools[1].bal.peers[1].requests, 0);
    assert_string_equal(f.view.pools[1].members[1].text, "127.0.0.1:4");
    assert_false(peer_closed(a_idle));
    assert_false(peer_closed(b_idle));
    close(a_idle);
    close(b_idle);
    fixture_close(&f);
}

/* Same members (same ids) with another weight, state or setting: the pool
 * changed, and the view says what the table says. */
static void test_changed_weight_state_or_setting_rebuilds_the_pool(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    adopt_rs(&f, two_pools(0), 1);
    mark_busy(&f.view.pools[0].bal.peers[0]);

    Sws__RouteSet *rs = two_pools(0);
    rs->pools[0]->members[0]->weight = 5;
    adopt_rs(&f, rs, 2);
    assert_int_equal(f.view.pools[0].bal.peers[0].weight, 5);
    assert_busy(&f.view.pools[0].bal.peers[0]); /* carried by id */

    rs = two_pools(0);
    rs->pools[0]->members[0]->weight = 5;
    rs->pools[0]->members[1]->state = SWS__MEMBER__STATE__DRAINING;
    adopt_rs(&f, rs, 3);
    assert_int_equal(f.view.pools[0].bal.peers[1].state, SWS_UPSTREAM_DRAINING);

    rs = two_pools(0);
    rs->pools[0]->members[0]->weight = 5;
    rs->pools[0]->members[1]->state = SWS__MEMBER__STATE__DRAINING;
    rs->pools[0]->retries = 0;
    rs->pools[0]->keepalive = 4;
    adopt_rs(&f, rs, 4);
    assert_int_equal(f.view.pools[0].retries, 0);
    assert_int_equal(f.view.pools[0].conf.keepalive, 4);
    assert_busy(&f.view.pools[0].bal.peers[0]);
    fixture_close(&f);
}

/* A member's address changed under the same id (a source may set ids,
 * ADR 0013): the pool is rebuilt and connects to the new address. */
static void test_address_under_the_same_id_rebuilds_the_pool(void **state)
{
    (void)state;
    fixture_t f;
    fixture_init(&f);
    Sws__RouteSet *rs = two_pools(0);
    rs->pools[1]->members[0]->id = 42;
    adopt_rs(&f, rs, 1);
    rs = two_pools(0);
    rs->pools[1]->members[0]->id = 42;
    free(rs->pools[1]->members[0]->address);
    rs->pools[1]->members[0]->address = strdup("127.0.0.1:9");
    adopt_rs(&f, rs, 2);
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&f.view.pools[1].members[0].addr.sa;
    assert_int_equal(ntohs(v4->sin_port), 9);
    fixture_close(&f);
}

/* Pools reordered, one added in front and one removed: each is found by
 * name, the unchanged ones kept, the removed one's idle connections closed. */
static void test_reordered_pools_are_found_by_name(void **state)
{
    (void)state;
    static const char *const names1[] = { "b", "c", "d", "e" };
    static const char *const names2[] = { "a", "e", "c", "b" };
    fixture_t f;
    fixture_init(&f);
    Sws__RouteSet *rs = rs_new();
    for (size_t i = 0; i < 4; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%zu", 10 + (size_t)(names1[i][0] - 'a'));
        pool_member(rs_pool(rs, names1[i]), addr, 1);
    }
    adopt_rs(&f, rs, 1);
    sws_upstream_peer_t *peers[4];
    for (size_t i = 0; i < 4; i++)
        peers[i] = f.view.pools[i].bal.peers;
    int d_idle = idle_conn(&f.set, f.view.pools[2].bal.peers[0].id);

    rs = rs_new();
    for (size_t i = 0; i < 4; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "127.0.0.1:%zu", 10 + (size_t)(names2[i][0] - 'a'));
        pool_member(rs_pool(rs, names2[i]), addr, 1);
    }
    adopt_rs(&f, rs, 2);
    assert_string_equal(f.view.pools[0].name, "a");
    assert_ptr_equal(f.view.pools[1].bal.peers, peers[3]); /* e */
    assert_ptr_equal(f.view.pools[2].bal.peers, peers[1]); /* c */
    assert_ptr_equal(f.view.pools[3].bal.peers, peers[0]); /* b */
    assert_true(peer_closed(d_idle));
    close(d_idle);
    fixture_close(&f);
}

/* ---- size ---- */

#define LARGE_POOLS 10000
#define LARGE_MEMBERS_PER_POOL 10

/* An ingress-sized set: pool p-N with 10 members 10.A.B.1-10:8080;
 * changed: pool p-changed's first member is another address. */
static Sws__RouteSet *large_set(uint32_t changed)
{
    Sws__RouteSet *rs = rs_new();
    for (uint32_t i = 0; i < LARGE_POOLS; i++) {
        char name[32], addr[48];
        snprintf(name, sizeof(name), "bench_svc-%u_80", i);
        Sws__Pool *p = rs_pool(rs, name);
        for (uint32_t m = 0; m < LARGE_MEMBERS_PER_POOL; m++) {
            snprintf(addr, sizeof(addr), "10.%u.%u.%u:8080", i / 256, i % 256,
                     m + 1 + (i == changed && m == 0 ? 100 : 0));
            pool_member(p, addr, 1);
        }
    }
    return rs;
}

/* Apart, so that callgrind can count it alone
 * (--toggle-collect=adopt_generation_measured). */
__attribute__((noinline)) static void adopt_generation_measured(fixture_t *f, const void *table)
{
    char err[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(sws_upstream_pools_adopt(&f->view, table, &f->set, err, sizeof(err)), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Printed, never judged: the machine is shared. */
    printf("adopt: %d pools, one changed: %.2f ms\n", LARGE_POOLS,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
}

static void test_large_table_one_pool_changed_rebuilds_one(void **state)
{
    (void)state;
    const uint32_t changed = 4321;
    fixture_t f;
    size_t size;
    fixture_init(&f);
    void *t1 = rs_table(large_set(UINT32_MAX), 1, &size);
    char err[256];
    assert_int_equal(sws_upstream_pools_adopt(&f.view, t1, &f.set, err, sizeof(err)), 0);
    sws_upstream_peer_t **before = malloc(LARGE_POOLS * sizeof(*before));
    assert_non_null(before);
    for (uint32_t i = 0; i < LARGE_POOLS; i++)
        before[i] = f.view.pools[i].bal.peers;
    void *t2 = rs_table(large_set(changed), 2, &size);
    adopt_generation_measured(&f, t2);
    uint32_t rebuilt = 0;
    for (uint32_t i = 0; i < LARGE_POOLS; i++)
        rebuilt += f.view.pools[i].bal.peers != before[i];
    assert_int_equal(rebuilt, 1);
    assert_ptr_not_equal(f.view.pools[changed].bal.peers, before[changed]);
    assert_string_equal(f.view.pools[changed].members[0].text, "10.16.225.101:8080");
    free(before);
    free(t1);
    free(t2);
    fixture_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_connect_to_the_addresses_the_table_parsed),
        cmocka_unit_test(test_idle_connections_of_members_that_left_are_closed),
        cmocka_unit_test(test_unchanged_pool_is_kept_with_its_members_state),
        cmocka_unit_test(test_changed_weight_state_or_setting_rebuilds_the_pool),
        cmocka_unit_test(test_address_under_the_same_id_rebuilds_the_pool),
        cmocka_unit_test(test_reordered_pools_are_found_by_name),
        cmocka_unit_test(test_large_table_one_pool_changed_rebuilds_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
