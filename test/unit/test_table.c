/* shm/table.c: building a generation from a RouteSet, and looking up routes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/hash.h"
#include "core/log.h"
#include "shm/table.h"
#include "support/routeset_build.h"
#include "support/settings_assert.h"
#include "support/tls_pem.h"

/* ---- building tables ------------------------------------------------- */

typedef struct built {
    void *arena;
    const sws_table_t *t;
} built_t;

static built_t build(const Sws__RouteSet *rs)
{
    char err[256] = "";
    size_t size = sws_table_size(rs);
    built_t b = { aligned_alloc(8, (size + 7) & ~(size_t)7), NULL };
    assert_non_null(b.arena);
    if (sws_table_build(b.arena, size, 7, rs, err, sizeof(err)) != 0)
        fail_msg("build failed: %s", err);
    b.t = b.arena;
    return b;
}

static void assert_build_fails(const Sws__RouteSet *rs, const char *expect)
{
    char err[256] = "";
    static uint64_t arena[4096];
    assert_true(sws_table_size(rs) <= sizeof(arena));
    int rc = sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err));
    if (rc == 0)
        fail_msg("build succeeded, expected \"%s\"", expect);
    if (strstr(err, expect) == NULL)
        fail_msg("error \"%s\" does not say \"%s\"", err, expect);
}

/* The body of the route found for host and path, or "-" for none. */
static const char *who(const sws_table_t *t, const char *host, const char *path)
{
    const sws_route_t *r = sws_table_lookup(t, host, strlen(host), path, strlen(path));
    if (r == NULL)
        return "-";
    assert_int_equal(r->action, SWS_ACTION_RESPOND);
    return sws_table_str(t, r->body);
}

/* ---- hosts ------------------------------------------------------------ */

static Sws__RouteSet *hosts_fixture(int with_catchall)
{
    Sws__RouteSet *rs = rs_new();
    host_respond(rs_host(rs, "a.example.com"), SWS__ROUTE__MATCH__PREFIX, "/", "exact");
    host_respond(rs_host(rs, "*.example.com"), SWS__ROUTE__MATCH__PREFIX, "/", "wild");
    host_respond(rs_host(rs, "*.b.example.com other.ORG."), SWS__ROUTE__MATCH__PREFIX, "/",
                 "wild-b");
    if (with_catchall)
        host_respond(rs_host(rs, "*"), SWS__ROUTE__MATCH__PREFIX, "/", "any");
    return rs;
}

/* A lookup and the body of the route it must find ("-": none). */
typedef struct lookup_case {
    const char *host, *path, *want;
} lookup_case_t;

static void check_cases(const Sws__RouteSet *rs, const lookup_case_t *c, size_t n)
{
    built_t b = build(rs);
    for (size_t i = 0; i < n; i++)
        if (strcmp(who(b.t, c[i].host, c[i].path), c[i].want) != 0)
            fail_msg("host \"%s\" path \"%s\": got \"%s\", want \"%s\"", c[i].host, c[i].path,
                     who(b.t, c[i].host, c[i].path), c[i].want);
    free(b.arena);
}

#define CHECK_CASES(rs, cases) check_cases((rs), (cases), sizeof(cases) / sizeof((cases)[0]))

static void test_host_precedence(void **state)
{
    (void)state;
    static const lookup_case_t cases[] = {
        { "a.example.com", "/", "exact" },
        { "x.example.com", "/", "wild" },
        { "x.y.example.com", "/", "wild" },
        /* The longest wildcard wins, and "*.b" does not match "b" itself. */
        { "x.b.example.com", "/", "wild-b" },
        { "z.x.b.example.com", "/", "wild-b" },
        { "b.example.com", "/", "wild" },
        { "example.com", "/", "any" },
        { "nope.org", "/", "any" },
        { "other.org", "/", "wild-b" },
        { "", "/", "any" }, /* no Host */
    };
    Sws__RouteSet *rs = hosts_fixture(1);
    CHECK_CASES(rs, cases);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_host_case_port_and_dot(void **state)
{
    (void)state;
    static const lookup_case_t cases[] = {
        { "A.Example.COM", "/", "exact" },
        { "a.example.com:8080", "/", "exact" },
        { "a.example.com.", "/", "exact" },
        { "a.example.com.:80", "/", "exact" },
        { "X.B.EXAMPLE.COM:443", "/", "wild-b" },
        { "OTHER.org", "/", "wild-b" },
        { "[::1]:8080", "/", "any" },
        { ":8080", "/", "any" },
        /* Only the host part counts: a longer name is a different name. */
        { "a.example.com.evil", "/", "any" },
    };
    Sws__RouteSet *rs = hosts_fixture(1);
    CHECK_CASES(rs, cases);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_host_without_catchall(void **state)
{
    (void)state;
    static const lookup_case_t cases[] = {
        { "a.example.com", "/", "exact" },
        { "example.com", "/", "-" },
        { "", "/", "-" },
        { "nope.org", "/x", "-" },
    };
    Sws__RouteSet *rs = hosts_fixture(0);
    CHECK_CASES(rs, cases);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_many_hosts(void **state)
{
    (void)state;
    Sws__RouteSet *rs = rs_new();
    char name[64];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "host%d.example.com", i);
        host_respond(rs_host(rs, name), SWS__ROUTE__MATCH__PREFIX, "/", name);
    }
    built_t b = build(rs);
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "host%d.example.com", i);
        assert_string_equal(who(b.t, name, "/"), name);
    }
    assert_string_equal(who(b.t, "host500.example.com", "/"), "-");
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

/* ---- paths ------------------------------------------------------------ */

static void test_paths_exact_then_longest_prefix(void **state)
{
    (void)state;
    static const lookup_case_t cases[] = {
        { "h", "/docs/api/v1", "api" },
        { "h", "/docs/api/", "api" },
        { "h", "/docs/", "docs-exact" },
        { "h", "/docs/a", "docs" }, /* the first of two equal prefixes */
        { "h", "/docs", "root" },
        { "h", "/x", "x-exact" },
        { "h", "/xy", "root" },
        { "h", "/DOCS/", "root" }, /* paths are bytes */
        { "h", "/", "root" },
    };
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "*");
    /* Configured shortest first: the table must order them. */
    host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/", "root");
    host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/docs/", "docs");
    host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/docs/api/", "api");
    host_respond(h, SWS__ROUTE__MATCH__EXACT, "/docs/", "docs-exact");
    host_respond(h, SWS__ROUTE__MATCH__EXACT, "/x", "x-exact");
    CHECK_CASES(rs, cases);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_no_route_for_path(void **state)
{
    (void)state;
    static const lookup_case_t cases[] = {
        { "a.test", "/api/x", "api" },
        { "a.test", "/health/", "-" },
        { "a.test", "/ap", "-" },
        { "a.test", "", "-" },
        { "empty.test", "/", "-" },
    };
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "a.test");
    host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/api/", "api");
    host_respond(h, SWS__ROUTE__MATCH__EXACT, "/health", "health");
    rs_host(rs, "empty.test"); /* a host without routes */
    CHECK_CASES(rs, cases);
    sws__route_set__free_unpacked(rs, NULL);
}

/* ---- actions, strings, position independence ------------------------- */

static Sws__RouteSet *actions_fixture(void)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "site.test");
    h->https_redirect = 1;
    Sws__Route *r = host_respond(h, SWS__ROUTE__MATCH__EXACT, "/hello", "hi\n");
    respond_header(r, "Content-Type", "text/plain");
    respond_header(r, "X-Test", "1");

    r = host_static(h, SWS__ROUTE__MATCH__PREFIX, "/static/", "/srv/www//");
    r->static_->follow_symlinks = 1;

    Sws__Host *h2 = rs_host(rs, "other.test");
    r = host_redirect(h2, SWS__ROUTE__MATCH__PREFIX, "/old/", 308, "https://new.test/");
    r->https_redirect = 1;
    host_respond(h2, SWS__ROUTE__MATCH__PREFIX, "/", "plain");

    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("backend");
    for (int i = 0; i < 2; i++) {
        Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
        m->id = 100 + (uint64_t)i;
        m->address = strdup(i ? "127.0.0.1:9002" : "127.0.0.1:9001");
        m->weight = 10 * (uint32_t)(i + 1);
        m->state = i ? SWS__MEMBER__STATE__DRAINING : SWS__MEMBER__STATE__UP;
        PUSH(pool->members, pool->n_members, m);
    }
    Sws__Pool *unused = NEW(Sws__Pool, SWS__POOL__INIT);
    unused->name = strdup("unused");
    PUSH(rs->pools, rs->n_pools, unused);
    PUSH(rs->pools, rs->n_pools, pool);
    r = host_route(h2, SWS__ROUTE__MATCH__PREFIX, "/api/");
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
    r->proxy->pool = strdup("backend");
    r->proxy->host_header = strdup("api.internal");
    r->proxy->via = strdup("edge");
    return rs;
}

/* Every string in a table is its bytes and then a NUL. */
static void assert_tstr(const sws_table_t *t, sws_tstr_t s, const char *want)
{
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(sws_table_str(t, s), want, s.len);
    assert_int_equal(sws_table_str(t, s)[s.len], '\0');
}

static void check_actions(const sws_table_t *t)
{
    const sws_route_t *r = sws_table_lookup(t, "site.test", 9, "/hello", 6);
    assert_non_null(r);
    assert_int_equal(r->action, SWS_ACTION_RESPOND);
    assert_int_equal(r->match, SWS_MATCH_EXACT);
    assert_int_equal(r->status, 200);
    assert_int_equal(r->https_redirect, 1); /* from the host */
    assert_tstr(t, r->path, "/hello");
    assert_tstr(t, r->body, "hi\n");
    /* Header fields as name/value strings, in the configured order. */
    assert_int_equal(r->nfields, 2);
    const sws_tfield_t *tf = sws_table_fields(t, r);
    assert_tstr(t, tf[0].name, "Content-Type");
    assert_tstr(t, tf[0].value, "text/plain");
    assert_tstr(t, tf[1].name, "X-Test");
    assert_tstr(t, tf[1].value, "1");

    r = sws_table_lookup(t, "site.test", 9, "/static/a.css", 13);
    assert_non_null(r);
    assert_int_equal(r->action, SWS_ACTION_STATIC);
    assert_int_equal(r->follow_symlinks, 1);
    assert_tstr(t, r->root, "/srv/www");
    assert_tstr(t, r->index, "index.html");
    assert_int_equal(r->nfields, 0);

    r = sws_table_lookup(t, "other.test", 10, "/old/x", 6);
    assert_non_null(r);
    assert_int_equal(r->action, SWS_ACTION_REDIRECT);
    assert_int_equal(r->status, 308);
    assert_int_equal(r->https_redirect, 1); /* from the route */
    assert_tstr(t, r->location, "https://new.test/");

    r = sws_table_lookup(t, "other.test", 10, "/x", 2);
    assert_non_null(r);
    assert_int_equal(r->https_redirect, 0);

    r = sws_table_lookup(t, "other.test", 10, "/api/v1", 7);
    assert_non_null(r);
    assert_int_equal(r->action, SWS_ACTION_PROXY);
    assert_int_equal(sws_table_pool_count(t), 2);
    const sws_pool_t *p = sws_table_pool(t, r->pool);
    assert_tstr(t, p->name, "backend");
    assert_int_equal(p->nmembers, 2);
    const sws_member_t *m = sws_table_members(t, p);
    assert_int_equal(m[0].id, 100);
    assert_tstr(t, m[0].address, "127.0.0.1:9001");
    assert_int_equal(m[1].weight, 20);
    assert_int_equal(m[1].state, SWS__MEMBER__STATE__DRAINING);
    assert_int_equal(sws_table_pool(t, 0)->nmembers, 0);
    assert_tstr(t, r->host_header, "api.internal");
    assert_tstr(t, r->via, "edge");
    r = sws_table_lookup(t, "other.test", 10, "/old/x", 6);
    assert_tstr(t, r->host_header, ""); /* not a proxy route */
    assert_tstr(t, r->via, "");
}

/* A pool with every setting given, one with none: the table holds each
 * value, or the default of table.h; member addresses arrive parsed. */
static Sws__RouteSet *pools_fixture(void)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Pool *given = NEW(Sws__Pool, SWS__POOL__INIT), *bare = NEW(Sws__Pool, SWS__POOL__INIT);
    static const char *const addrs[] = { "10.0.0.1:8080", "[::1]:9000", "Backend.Internal.:80" };

    given->name = strdup("given");
    given->balance = SWS__POOL__BALANCE__HASH;
    given->hash_key = strdup("cookie:sid");
    given->keepalive = 0;
    given->retries = 5;
    given->max_conns = 100;
    given->timeouts = NEW(Sws__Pool__Timeouts, SWS__POOL__TIMEOUTS__INIT);
    given->timeouts->connect_ms = 1;
    given->timeouts->send_ms = 2;
    given->timeouts->read_ms = 3;
    given->timeouts->idle_ms = 4;
    given->health = NEW(Sws__Pool__Health, SWS__POOL__HEALTH__INIT);
    given->health->max_fails = 7;
    given->health->fail_window_ms = 8;
    given->health->cooldown_ms = 9;
    for (size_t i = 0; i < 3; i++) {
        Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
        m->address = strdup(addrs[i]);
        m->weight = (uint32_t)i; /* 0: the default */
        PUSH(given->members, given->n_members, m);
    }
    bare->name = strdup("bare");
    bare->keepalive = SWS_DEFAULT_POOL_KEEPALIVE;
    bare->retries = SWS_DEFAULT_POOL_RETRIES;
    PUSH(rs->pools, rs->n_pools, given);
    PUSH(rs->pools, rs->n_pools, bare);
    host_respond(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__PREFIX, "/", "a");
    return rs;
}

static void test_pool_settings(void **state)
{
    (void)state;
    Sws__RouteSet *rs = pools_fixture();
    built_t b = build(rs);
    const sws_pool_t *p = sws_table_pool(b.t, 0);

    assert_tstr(b.t, p->name, "given");
    assert_int_equal(p->balance, SWS_BALANCE_HASH);
    assert_int_equal(p->hash_kind, SWS_HASH_COOKIE);
    assert_tstr(b.t, p->hash_name, "sid");
    assert_int_equal(p->keepalive, 0);
    assert_int_equal(p->retries, 5);
    assert_int_equal(p->max_conns, 100);
    assert_int_equal(p->connect_timeout_ms, 1);
    assert_int_equal(p->send_timeout_ms, 2);
    assert_int_equal(p->read_timeout_ms, 3);
    assert_int_equal(p->idle_timeout_ms, 4);
    assert_int_equal(p->max_fails, 7);
    assert_int_equal(p->fail_window_ms, 8);
    assert_int_equal(p->cooldown_ms, 9);

    p = sws_table_pool(b.t, 1);
    assert_tstr(b.t, p->name, "bare");
    assert_int_equal(p->balance, SWS_BALANCE_ROUND_ROBIN);
    assert_int_equal(p->hash_kind, SWS_HASH_NONE);
    assert_tstr(b.t, p->hash_name, "");
    assert_int_equal(p->keepalive, SWS_DEFAULT_POOL_KEEPALIVE);
    assert_int_equal(p->retries, SWS_DEFAULT_POOL_RETRIES);
    assert_int_equal(p->max_conns, 0);
    assert_int_equal(p->connect_timeout_ms, SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS);
    assert_int_equal(p->send_timeout_ms, SWS_DEFAULT_POOL_SEND_TIMEOUT_MS);
    assert_int_equal(p->read_timeout_ms, SWS_DEFAULT_POOL_READ_TIMEOUT_MS);
    assert_int_equal(p->idle_timeout_ms, SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS);
    assert_int_equal(p->max_fails, SWS_DEFAULT_POOL_MAX_FAILS);
    assert_int_equal(p->fail_window_ms, SWS_DEFAULT_POOL_FAIL_WINDOW_MS);
    assert_int_equal(p->cooldown_ms, SWS_DEFAULT_POOL_COOLDOWN_MS);
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_member_addresses_parsed(void **state)
{
    (void)state;
    Sws__RouteSet *rs = pools_fixture();
    built_t b = build(rs);
    const sws_member_t *m = sws_table_members(b.t, sws_table_pool(b.t, 0));

    assert_tstr(b.t, m[0].address, "10.0.0.1:8080");
    assert_int_equal(m[0].family, AF_INET);
    assert_tstr(b.t, m[0].host, "10.0.0.1");
    assert_int_equal(m[0].port, 8080);
    assert_memory_equal(m[0].ip, ((uint8_t[]){ 10, 0, 0, 1 }), 4);
    assert_int_equal(m[0].weight, SWS_DEFAULT_POOL_WEIGHT); /* 0: the default */
    assert_int_equal(m[1].family, AF_INET6);
    assert_tstr(b.t, m[1].host, "::1");
    assert_int_equal(m[1].port, 9000);
    assert_int_equal(m[1].ip[15], 1);
    assert_int_equal(m[1].weight, 1);
    assert_tstr(b.t, m[2].address, "Backend.Internal.:80"); /* as given */
    assert_int_equal(m[2].family, AF_UNSPEC);
    assert_tstr(b.t, m[2].host, "backend.internal");
    assert_int_equal(m[2].port, 80);
    assert_int_equal(m[2].weight, 2);
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

/* Ids: derived from (pool, canonical address) when the RouteSet gives
 * none, so a reload that adds, removes or reorders members, or writes an
 * address another way, keeps every other member's id; a member in two
 * pools has two ids. */
static void test_member_ids_stable(void **state)
{
    (void)state;
    Sws__RouteSet *rs = pools_fixture();
    built_t b1 = build(rs);
    const sws_member_t *m1 = sws_table_members(b1.t, sws_table_pool(b1.t, 0));
    uint64_t ids[3] = { m1[0].id, m1[1].id, m1[2].id };

    assert_int_equal(ids[0], sws_member_id("given", "10.0.0.1:8080"));
    assert_int_equal(ids[1], sws_member_id("given", "[::1]:9000"));
    assert_int_equal(ids[2], sws_member_id("given", "backend.internal:80"));
    assert_int_not_equal(ids[0], ids[1]);
    assert_int_not_equal(ids[0], sws_member_id("bare", "10.0.0.1:8080"));
    /* The pool name and the address do not run into each other. */
    assert_int_not_equal(sws_member_id("ab", "c:1"), sws_member_id("a", "bc:1"));

    /* Next generation: the first member gone, the others swapped and
     * spelt differently, one added. */
    Sws__Pool *pool = rs->pools[0];
    Sws__Member *gone = pool->members[0];
    pool->members[0] = pool->members[2];
    pool->members[2] = gone;
    free(gone->address);
    gone->address = strdup("10.0.0.2:8080");
    free(pool->members[1]->address);
    pool->members[1]->address = strdup("[0::1]:9000");
    built_t b2 = build(rs);
    const sws_member_t *m2 = sws_table_members(b2.t, sws_table_pool(b2.t, 0));
    assert_int_equal(m2[0].id, ids[2]);
    assert_int_equal(m2[1].id, ids[1]);
    assert_int_not_equal(m2[2].id, ids[0]);

    /* A source's own id is kept as given. */
    pool->members[2]->id = 77;
    built_t b3 = build(rs);
    assert_int_equal(sws_table_members(b3.t, sws_table_pool(b3.t, 0))[2].id, 77);
    free(b1.arena);
    free(b2.arena);
    free(b3.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

/* The digest of a pool (ADR 0048) is its content, not where it lies: a
 * host added before it moves every string and keeps it; any setting,
 * member, weight or state changed changes it. */
static uint64_t given_digest(const Sws__RouteSet *rs)
{
    built_t b = build(rs);
    uint64_t d = sws_table_pool(b.t, 0)->digest;
    free(b.arena);
    return d;
}

static void test_pool_digest_is_content_not_position(void **state)
{
    (void)state;
    Sws__RouteSet *rs = pools_fixture();
    uint64_t d = given_digest(rs);
    assert_int_not_equal(d, 0);
    built_t b = build(rs);
    assert_int_not_equal(sws_table_pool(b.t, 1)->digest, d); /* the other pool */
    free(b.arena);
    host_respond(rs_host(rs, "first.test second.test"), SWS__ROUTE__MATCH__PREFIX, "/", "moved");
    assert_int_equal(given_digest(rs), d);

    rs->pools[0]->members[1]->weight = 9;
    assert_int_not_equal(given_digest(rs), d);
    rs->pools[0]->members[1]->weight = 1;
    assert_int_equal(given_digest(rs), d);
    rs->pools[0]->members[1]->state = SWS__MEMBER__STATE__DRAINING;
    assert_int_not_equal(given_digest(rs), d);
    rs->pools[0]->members[1]->state = SWS__MEMBER__STATE__UP;
    rs->pools[0]->health->cooldown_ms = 10;
    assert_int_not_equal(given_digest(rs), d);
    rs->pools[0]->health->cooldown_ms = 9;
    free(rs->pools[0]->hash_key);
    rs->pools[0]->hash_key = strdup("cookie:sie");
    assert_int_not_equal(given_digest(rs), d);
    free(rs->pools[0]->hash_key);
    rs->pools[0]->hash_key = strdup("cookie:sid");
    free(rs->pools[0]->members[2]->address);
    rs->pools[0]->members[2]->address = strdup("backend.internal:81");
    assert_int_not_equal(given_digest(rs), d);
    Sws__Member *last = rs->pools[0]->members[--rs->pools[0]->n_members];
    assert_int_not_equal(given_digest(rs), d);
    sws__member__free_unpacked(last, NULL);
    sws__route_set__free_unpacked(rs, NULL);
}

/* A name with resolved addresses (ADR 0024) is one member per address,
 * in their order, each with the name as its address, its own host and ip,
 * the name's weight and state, and an id from pool, name and address; the
 * size computed ahead is exact (build checks it). */
static void test_resolved_name_is_a_member_per_address(void **state)
{
    (void)state;
    Sws__RouteSet *rs = pools_fixture();
    Sws__Member *name = rs->pools[0]->members[2]; /* "Backend.Internal.:80", weight 2 */
    name->state = SWS__MEMBER__STATE__DRAINING;
    PUSH(name->resolved, name->n_resolved, strdup("10.9.0.1:80"));
    PUSH(name->resolved, name->n_resolved, strdup("[fd00::9]:80"));
    built_t b = build(rs);
    const sws_pool_t *p = sws_table_pool(b.t, 0);
    const sws_member_t *m = sws_table_members(b.t, p);

    assert_int_equal(p->nmembers, 4);
    assert_int_equal(sws_table_pool(b.t, 1)->first_member, 4);
    assert_int_equal(m[1].resolved, 0);
    for (int i = 2; i < 4; i++) {
        assert_tstr(b.t, m[i].address, "Backend.Internal.:80");
        assert_int_equal(m[i].resolved, 1);
        assert_int_equal(m[i].weight, 2);
        assert_int_equal(m[i].state, SWS__MEMBER__STATE__DRAINING);
        assert_int_equal(m[i].port, 80);
    }
    assert_int_equal(m[2].family, AF_INET);
    assert_tstr(b.t, m[2].host, "10.9.0.1");
    assert_int_equal(m[3].family, AF_INET6);
    assert_tstr(b.t, m[3].host, "fd00::9");
    assert_int_equal(m[3].ip[15], 9);
    assert_int_equal(m[2].id,
                     sws_member_resolved_id("given", "backend.internal:80", "10.9.0.1:80"));
    assert_int_equal(m[3].id,
                     sws_member_resolved_id("given", "backend.internal:80", "[fd00::9]:80"));
    assert_int_not_equal(m[2].id, sws_member_id("given", "10.9.0.1:80"));
    assert_int_not_equal(m[2].id, m[3].id);
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_actions_and_strings(void **state)
{
    (void)state;
    Sws__RouteSet *rs = actions_fixture();
    built_t b = build(rs);
    check_actions(b.t);
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_position_independent(void **state)
{
    (void)state;
    Sws__RouteSet *rs = actions_fixture();
    size_t size = sws_table_size(rs);
    built_t b = build(rs);
    sws__route_set__free_unpacked(rs, NULL); /* the table needs nothing from it */

    void *moved = aligned_alloc(8, (size + 7) & ~(size_t)7);
    assert_non_null(moved);
    memcpy(moved, b.arena, size);
    memset(b.arena, 0xa5, size); /* a pointer into the old copy would now read garbage */
    check_actions(moved);
    assert_int_equal(sws_table_generation(moved), 7);
    free(moved);
    free(b.arena);
}

static void test_settings_round_trip(void **state)
{
    (void)state;
    Sws__RouteSet *rs = rs_new();
    Sws__Settings *s = rs->settings;
    /* Every value distinct, so a field copied into its neighbour shows. */
    s->max_request_line = 8192;
    s->max_header_size = 16384;
    s->max_headers = 100;
    s->max_body_size = 5ULL << 32; /* more than 32 bits survive */
    s->header_timeout_ms = 11000;
    s->body_timeout_ms = 12000;
    s->keepalive_timeout_ms = 13000;
    s->send_timeout_ms = 14000;
    s->keepalive_requests = 1000;
    s->shutdown_timeout_ms = 120000; /* workers read it when SIGQUIT arrives */
    s->access_log = NEW(Sws__AccessLog, SWS__ACCESS_LOG__INIT);
    s->access_log->format = SWS__ACCESS_LOG__FORMAT__JSON;
    s->access_log->path = strdup("/var/log/scalws/access.log");
    built_t b = build(rs);

    const sws_settings_t *got = sws_table_settings(b.t);
    assert_settings_numbers(got, s);
    assert_int_equal(got->access_log_format, SWS__ACCESS_LOG__FORMAT__JSON);
    assert_tstr(b.t, got->server_name, "scalws");
    assert_tstr(b.t, got->access_log_path, "/var/log/scalws/access.log");
    assert_int_equal(sws_settings_log_level(got), -1); /* not set: workers keep theirs */
    free(b.arena);

    /* A reload's log level reaches the workers through the table. */
    s->log_level = strdup("debug");
    b = build(rs);
    assert_int_equal(sws_settings_log_level(sws_table_settings(b.t)), SWS_LOG_DEBUG);
    free(b.arena);
    free(s->log_level);
    s->log_level = strdup("crit");
    b = build(rs);
    assert_int_equal(sws_settings_log_level(sws_table_settings(b.t)), SWS_LOG_CRIT);
    free(b.arena);
    free(s->log_level);
    s->log_level = strdup("loud");
    assert_build_fails(rs, "settings.log_level: expected debug, info, notice, warn or error, got \"loud\"");
    free(s->log_level);
    s->log_level = strdup("");

    /* "-" is standard output, which the table says as "". */
    free(s->access_log->path);
    s->access_log->path = strdup("-");
    b = build(rs);
    assert_tstr(b.t, sws_table_settings(b.t)->access_log_path, "");
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
}

/* ---- errors ----------------------------------------------------------- */

static void test_arena_too_small(void **state)
{
    (void)state;
    Sws__RouteSet *rs = actions_fixture();
    size_t size = sws_table_size(rs);
    char *arena = aligned_alloc(8, size + 64);
    char err[256] = "", want[128];
    assert_non_null(arena);
    memset(arena, 0x5a, size + 64);

    assert_int_equal(sws_table_build(arena, size - 8, 1, rs, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "table needs %zu bytes, arena has %zu; raise server.table_size",
             size, size - 8);
    assert_string_equal(err, want);
    assert_int_equal((unsigned char)arena[0], 0x5a); /* nothing written */

    /* The size given is enough, and the build stays inside it. */
    assert_int_equal(sws_table_build(arena, size, 1, rs, err, sizeof(err)), 0);
    for (size_t i = size; i < size + 64; i++)
        assert_int_equal((unsigned char)arena[i], 0x5a);
    free(arena);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_rejects_invalid(void **state)
{
    (void)state;
    Sws__RouteSet *rs = rs_new();
    Sws__Route *r = host_respond(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__REGEX, "/x.*", "x");
    assert_build_fails(rs, "hosts[0].routes[0].match: regex paths are not supported yet");
    r->match = SWS__ROUTE__MATCH__PREFIX;
    r->respond->status = 0;
    assert_build_fails(rs, "respond.status: expected a number from 200 to 599, got 0");
    r->respond->status = 200;
    respond_header(r, "X-Bad", "a\r\nSet-Cookie: x");
    assert_build_fails(rs, "a header value must not contain CR, LF");
    free(r->respond->headers[0]->name);
    r->respond->headers[0]->name = strdup("X Bad:");
    assert_build_fails(rs, "\"X Bad:\": a header name may contain only");
    sws__route_set__free_unpacked(rs, NULL);

    rs = rs_new();
    host_respond(rs_host(rs, "A.test"), SWS__ROUTE__MATCH__PREFIX, "/", "1");
    host_respond(rs_host(rs, "a.TEST"), SWS__ROUTE__MATCH__PREFIX, "/", "2");
    assert_build_fails(rs, "hosts[1].names[0]: host name \"a.TEST\" is already used");
    sws__route_set__free_unpacked(rs, NULL);

    rs = rs_new();
    rs_host(rs, "a.*.test");
    assert_build_fails(rs, "\"a.*.test\": a wildcard must be \"*.\" followed by a name");
    sws__route_set__free_unpacked(rs, NULL);

    rs = rs_new();
    r = host_route(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__PREFIX, "/api/");
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
    r->proxy->pool = strdup("missing");
    assert_build_fails(rs, "proxy.pool: no pool is named \"missing\"");
    sws__route_set__free_unpacked(rs, NULL);

    rs = rs_new();
    host_static(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__PREFIX, "/s/", "relative/dir");
    assert_build_fails(rs, "static.root: expected an absolute path");
    sws__route_set__free_unpacked(rs, NULL);
}

/* ---- TLS ------------------------------------------------------------ */

static void assert_cert_is(const sws_table_t *t, const sws_tcert_t *c, const test_pem_t *pem)
{
    assert_int_equal(c->cert_pem.len, pem->cert_len);
    assert_memory_equal(sws_table_str(t, c->cert_pem), pem->cert, pem->cert_len);
    assert_int_equal(c->key_pem.len, pem->key_len);
    assert_memory_equal(sws_table_str(t, c->key_pem), pem->key, pem->key_len);
}

/* SNI picks by exact name, then a wildcard of one label, never the
 * catch-all; the PEM bytes and the server.tls defaults are in the table. */
static void test_tls_hosts_and_certificates(void **state)
{
    (void)state;
    test_pem_t a, wild, def;
    test_pem_make(&a, 1, "a.example.com");
    test_pem_make(&wild, 1, "*.example.com");
    test_pem_make(&def, 1, "default");
    Sws__RouteSet *rs = hosts_fixture(1);
    PUSH(rs->hosts[0]->certificates, rs->hosts[0]->n_certificates, test_pem_certificate(&a, &a));
    PUSH(rs->hosts[1]->certificates, rs->hosts[1]->n_certificates, test_pem_certificate(&wild, &wild));

    built_t b = build(rs);
    static const struct {
        const char *name;
        uint32_t host;
    } cases[] = {
        { "a.example.com", 1 }, { "A.Example.COM.", 1 }, { "x.example.com", 2 },
        { "x.y.example.com", 0 }, /* a wildcard covers one label */
        { "example.com", 0 },     { "x.b.example.com", 3 }, { "other.org", 3 },
        { "nope.org", 0 },        /* the catch-all has no say */
        { "", 0 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t got = sws_table_tls_host(b.t, cases[i].name, strlen(cases[i].name));
        if (got != cases[i].host)
            fail_msg("\"%s\": host %u, want %u", cases[i].name, got, cases[i].host);
    }
    uint32_t n;
    assert_cert_is(b.t, sws_table_host_certs(b.t, 0, &n), &a);
    assert_int_equal(n, 1);
    assert_cert_is(b.t, sws_table_host_certs(b.t, 1, &n), &wild);
    assert_int_equal(n, 1);
    sws_table_host_certs(b.t, 2, &n);
    assert_int_equal(n, 0);
    assert_int_equal(sws_table_host_count(b.t), 4);
    assert_null(sws_table_default_cert(b.t));
    const sws_tls_settings_t *ts = sws_table_tls(b.t);
    assert_int_equal(ts->protocols, SWS_TLS_PROTO_1_2 | SWS_TLS_PROTO_1_3);
    assert_int_equal(ts->handshake_timeout_ms, SWS_DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS);
    assert_int_equal(ts->ticket_key_rotation_ms, SWS_DEFAULT_TLS_TICKET_KEY_ROTATION_MS);
    assert_int_equal(ts->session_tickets, 1);
    assert_string_equal(sws_table_str(b.t, ts->ciphers), SWS_DEFAULT_TLS_CIPHERS);
    assert_string_equal(sws_table_str(b.t, ts->ciphersuites), SWS_DEFAULT_TLS_CIPHERSUITES);
    free(b.arena);

    /* Given settings and a default certificate. */
    rs->tls = NEW(Sws__Tls, SWS__TLS__INIT);
    rs->tls->ciphers = strdup("ECDHE-ECDSA-AES128-GCM-SHA256");
    rs->tls->ciphersuites = strdup("TLS_AES_256_GCM_SHA384");
    rs->tls->protocols = calloc(1, sizeof(*rs->tls->protocols));
    rs->tls->protocols[0] = SWS__TLS__PROTOCOL__TLSV1_3;
    rs->tls->n_protocols = 1;
    rs->tls->handshake_timeout_ms = 1500;
    rs->tls->session_tickets = 0;
    rs->tls->default_certificate = test_pem_certificate(&def, &def);
    b = build(rs);
    ts = sws_table_tls(b.t);
    assert_int_equal(ts->protocols, SWS_TLS_PROTO_1_3);
    assert_int_equal(ts->handshake_timeout_ms, 1500);
    assert_int_equal(ts->session_tickets, 0);
    assert_string_equal(sws_table_str(b.t, ts->ciphers), "ECDHE-ECDSA-AES128-GCM-SHA256");
    assert_string_equal(sws_table_str(b.t, ts->ciphersuites), "TLS_AES_256_GCM_SHA384");
    assert_non_null(sws_table_default_cert(b.t));
    assert_cert_is(b.t, sws_table_default_cert(b.t), &def);
    assert_cert_is(b.t, sws_table_host_certs(b.t, 0, &n), &a);
    free(b.arena);
    sws__route_set__free_unpacked(rs, NULL);
    test_pem_free(&a);
    test_pem_free(&wild);
    test_pem_free(&def);
}

/* ---- size ---- */

#define LARGE_HOSTS 10000
#define LARGE_MEMBERS_PER_POOL 10

/* What ingressd makes of 10,000 Ingresses with 10 endpoints each: a host
 * per Ingress with "/" as a prefix and an exact route (ADR 0038) to its
 * pool, named and sorted as ingressd names them. */
static Sws__RouteSet *large_set(void)
{
    Sws__RouteSet *rs = rs_new();
    for (uint32_t i = 0; i < LARGE_HOSTS; i++) {
        char name[48], addr[48];
        snprintf(name, sizeof(name), "ing-%05u.bench.test", i);
        Sws__Host *h = rs_host(rs, name);
        snprintf(name, sizeof(name), "bench_svc-%05u_80", i);
        for (int exact = 0; exact < 2; exact++) {
            Sws__Route *r =
                host_route(h, exact ? SWS__ROUTE__MATCH__EXACT : SWS__ROUTE__MATCH__PREFIX, "/");
            r->action_case = SWS__ROUTE__ACTION_PROXY;
            r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
            r->proxy->pool = strdup(name);
        }
        Sws__Pool *p = rs_pool(rs, name);
        p->keepalive = SWS_DEFAULT_POOL_KEEPALIVE;
        p->retries = SWS_DEFAULT_POOL_RETRIES;
        for (uint32_t m = 0; m < LARGE_MEMBERS_PER_POOL; m++) {
            snprintf(addr, sizeof(addr), "10.%u.%u.%u:8080", i / 256, i % 256, m + 1);
            pool_member(p, addr, 1);
        }
    }
    return rs;
}

/* Apart, so that callgrind can count it alone
 * (--toggle-collect=build_measured): what sws_shm_publish does. */
__attribute__((noinline)) static void build_measured(void *arena, size_t arena_size,
                                                     const Sws__RouteSet *rs)
{
    char err[256] = "";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (sws_table_build(arena, arena_size, 2, rs, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* Printed, never judged: the machine is shared. */
    printf("build: %d hosts, %d members: %.1f ms\n", LARGE_HOSTS,
           LARGE_HOSTS * LARGE_MEMBERS_PER_POOL,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
}

static void test_large_set_builds(void **state)
{
    (void)state;
    Sws__RouteSet *rs = large_set();
    size_t arena_size = sws_table_size(rs);
    void *arena = aligned_alloc(8, arena_size);
    assert_non_null(arena);
    memset(arena, 0xa5, arena_size); /* an arena used before */
    build_measured(arena, arena_size, rs);
    const sws_table_t *t = arena;
    assert_int_equal(sws_table_host_count(t), LARGE_HOSTS);
    assert_int_equal(sws_table_pool_count(t), LARGE_HOSTS);
    const sws_route_t *r = sws_table_lookup(t, "ing-04321.bench.test", 20, "/x", 2);
    assert_non_null(r);
    assert_int_equal(r->action, SWS_ACTION_PROXY);
    assert_tstr(t, sws_table_pool(t, r->pool)->name, "bench_svc-04321_80");
    free(arena);
    sws__route_set__free_unpacked(rs, NULL);
}

/* The build's shortcuts (the check's counts instead of a second parse of
 * every address) write the same bytes as before them: an FNV-1a of each
 * table, built into a zeroed arena, as the build of 0040948 wrote it
 * (ADR 0049), then with the layout changes since (the pool's tls field,
 * Settings' server_tokens). A change of layout updates these values; a
 * change of them without one is a defect. */
static uint64_t table_fnv(Sws__RouteSet *rs)
{
    char err[256] = "";
    size_t size = sws_table_size(rs);
    char *arena = aligned_alloc(8, size);
    assert_non_null(arena);
    memset(arena, 0, size);
    if (sws_table_build(arena, size, 3, rs, err, sizeof(err)) != 0)
        fail_msg("build: %s", err);
    uint64_t h = sws_fnv1a(SWS_FNV1A_INIT, arena, size);
    free(arena);
    sws__route_set__free_unpacked(rs, NULL);
    return h;
}

static Sws__RouteSet *resolved_fixture(void)
{
    Sws__RouteSet *rs = pools_fixture();
    Sws__Member *name = rs->pools[0]->members[2];
    PUSH(name->resolved, name->n_resolved, strdup("10.9.0.1:80"));
    PUSH(name->resolved, name->n_resolved, strdup("[fd00::9]:80"));
    return rs;
}

static void test_table_bytes_as_before(void **state)
{
    (void)state;
    static const struct {
        Sws__RouteSet *(*make)(void);
        uint64_t fnv;
    } sets[] = {
        { actions_fixture, 0x7b54d461999a789eull },
        { pools_fixture, 0x0173ea09436f2fc8ull },
        { resolved_fixture, 0x01ef97f03d5212ecull },
        { large_set, 0x02d8dd22b4583770ull },
    };
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        uint64_t h = table_fnv(sets[i].make());
        if (h != sets[i].fnv)
            fail_msg("set %zu: table bytes %016llx, were %016llx", i, (unsigned long long)h,
                     (unsigned long long)sets[i].fnv);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_precedence),
        cmocka_unit_test(test_host_case_port_and_dot),
        cmocka_unit_test(test_host_without_catchall),
        cmocka_unit_test(test_many_hosts),
        cmocka_unit_test(test_paths_exact_then_longest_prefix),
        cmocka_unit_test(test_no_route_for_path),
        cmocka_unit_test(test_actions_and_strings),
        cmocka_unit_test(test_pool_settings),
        cmocka_unit_test(test_member_addresses_parsed),
        cmocka_unit_test(test_member_ids_stable),
        cmocka_unit_test(test_pool_digest_is_content_not_position),
        cmocka_unit_test(test_large_set_builds),
        cmocka_unit_test(test_table_bytes_as_before),
        cmocka_unit_test(test_resolved_name_is_a_member_per_address),
        cmocka_unit_test(test_position_independent),
        cmocka_unit_test(test_settings_round_trip),
        cmocka_unit_test(test_arena_too_small),
        cmocka_unit_test(test_rejects_invalid),
        cmocka_unit_test(test_tls_hosts_and_certificates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
