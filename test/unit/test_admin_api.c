/* supervisor/admin_api.c: the admin API's endpoints on a RouteSet built in
 * code and a real shm region, with the publication the supervisor would
 * do (sws_shm_publish, then sws_admin_api_published). Each refusal is
 * checked to have published nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "shm/routeset_delta.h"
#include "shm/shm.h"
#include "supervisor/admin_api.h"
#include "support/routeset_build.h"

#define ARENA (64u << 10)
#define WORKERS 2

typedef struct fixture {
    sws_shm_t shm;
    sws_admin_api_t api;
    unsigned publishes; /* successful ones, start excluded */
    int busy;           /* publish answers this (SWS_SHM_BUSY, ...) when not 0 */
    sws_admin_reply_t reply;
} fixture_t;

static int test_publish(void *ctx, const Sws__RouteSet *rs, uint64_t *gen, char *err,
                        size_t errlen)
{
    fixture_t *f = ctx;
    if (f->busy != 0)
        return snprintf(err, errlen, f->busy == SWS_SHM_BUSY ? "every arena is held"
                                                              : "the server is stopping"),
               f->busy;
    int rc = sws_shm_publish(&f->shm, rs, gen, err, errlen);
    if (rc == 0) {
        f->publishes++;
        sws_admin_api_published(&f->api, rs, *gen, SWS_PUBLISHED_BY_ADMIN);
    }
    return rc;
}

static void add_member(Sws__Pool *pool, uint64_t id, const char *addr, uint32_t weight)
{
    Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
    m->id = id;
    m->address = strdup(addr);
    m->weight = weight;
    PUSH(pool->members, pool->n_members, m);
}

/* Pool "api" with 127.0.0.1:9001 (id 1) and [::1]:9002 (id 5); pool "empty";
 * one host. Published as generation 1. */
static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    char err[256];
    assert_non_null(f);
    assert_int_equal(sws_shm_create(&f->shm, ARENA, 4, WORKERS, err, sizeof(err)), 0);
    Sws__RouteSet *rs = rs_new();
    rs->settings->log_level = strdup("info");
    host_respond(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__PREFIX, "/", "hi");
    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("api");
    add_member(pool, 1, "127.0.0.1:9001", 1);
    add_member(pool, 5, "[::1]:9002", 3);
    PUSH(rs->pools, rs->n_pools, pool);
    pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("empty");
    PUSH(rs->pools, rs->n_pools, pool);

    f->api.shm = &f->shm;
    f->api.nworkers = WORKERS;
    f->api.publish = test_publish;
    f->api.publish_ctx = f;
    uint64_t gen;
    assert_int_equal(sws_shm_publish(&f->shm, rs, &gen, err, sizeof(err)), 0);
    assert_int_equal(sws_admin_api_published(&f->api, rs, gen, SWS_PUBLISHED_BY_FILE), 0);
    sws__route_set__free_unpacked(rs, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    sws_json_out_free(&f->reply.body);
    sws_admin_api_free(&f->api);
    sws_shm_close(&f->shm);
    free(f);
    return 0;
}

/* The reply's body as a C string (the fixture keeps the reply). */
static const char *call(fixture_t *f, const char *method, const char *target, const char *body)
{
    sws_json_out_free(&f->reply.body);
    sws_admin_api_handle(&f->api, method, target, body, body != NULL ? strlen(body) : 0,
                         &f->reply);
    sws_json_raw(&f->reply.body, "", 1);
    assert_false(f->reply.body.oom);
    f->reply.body.len--;
    return f->reply.body.p;
}

static const Sws__Pool *pool_of(fixture_t *f, const char *name)
{
    const Sws__RouteSet *rs = sws_admin_api_routes(&f->api);
    assert_non_null(rs);
    for (size_t i = 0; i < rs->n_pools; i++)
        if (strcmp(rs->pools[i]->name, name) == 0)
            return rs->pools[i];
    fail_msg("no pool %s", name);
    return NULL;
}

static void test_status_names_published_and_held_generations(void **state)
{
    fixture_t *f = *state;
    sws_shm_reader_acquire(&f->shm, 1, 1234);
    sws_shm_counters(&f->shm, 1)->connections_accepted = 7;
    sws_shm_counters(&f->shm, 1)->connections_active = 2;
    sws_shm_counters(&f->shm, 1)->requests = 40;
    f->api.accept_policy = "least-loaded";
    assert_string_equal(call(f, "GET", "/v1/status", NULL),
                        "{\"generation\": 1, \"admin_changes\": 0, "
                        "\"accept_policy\": \"least-loaded\", \"workers\": ["
                        "{\"index\": 0, \"generation\": 0, \"connections_accepted\": 0, "
                        "\"connections_active\": 0, \"requests\": 0}, "
                        "{\"index\": 1, \"generation\": 1, \"connections_accepted\": 7, "
                        "\"connections_active\": 2, \"requests\": 40}]}\n");
    assert_int_equal(f->reply.status, 200);
}

static void test_probes_health_always_ready_once_a_table_is_served(void **state)
{
    fixture_t *f = *state;
    assert_string_equal(call(f, "GET", "/healthz", NULL), "{\"status\": \"ok\"}\n");
    assert_int_equal(f->reply.status, 200);
    assert_string_equal(call(f, "GET", "/readyz", NULL), "{\"status\": \"ok\"}\n");
    assert_int_equal(f->reply.status, 200);
    call(f, "POST", "/readyz", NULL);
    assert_int_equal(f->reply.status, 405);
    /* Before the first publication. */
    uint8_t *packed = f->api.packed;
    f->api.packed = NULL;
    assert_string_equal(call(f, "GET", "/readyz", NULL),
                        "{\"error\": \"not ready: no routing table published yet\"}\n");
    assert_int_equal(f->reply.status, 503);
    call(f, "GET", "/healthz", NULL);
    assert_int_equal(f->reply.status, 200);
    f->api.packed = packed;
}

static void test_without_the_token_only_the_probes_answer(void **state)
{
    fixture_t *f = *state;
    static const char *const closed[][2] = {
        { "GET", "/v1/status" }, { "GET", "/v1/pools" }, { "HEAD", "/v1/pools" },
        { "PUT", "/v1/pools/api/members/127.0.0.1:9" }, { "DELETE", "/v1/pools/api/members/x:1" },
        { "POST", "/v1/upgrade" }, { "GET", "/nothing" }, { "GET", "/v1/nothing" },
    };
    for (size_t i = 0; i < sizeof(closed) / sizeof(closed[0]); i++) {
        f->api.auth = SWS_ADMIN_AUTH_MISSING;
        assert_string_equal(call(f, closed[i][0], closed[i][1], "{}"),
                            "{\"error\": \"this listener needs Authorization: Bearer TOKEN, the "
                            "token of server.admin.token_file\"}\n");
        assert_int_equal(f->reply.status, 401);
        assert_string_equal(f->reply.challenge, "Bearer realm=\"scalws-admin\"");
        f->api.auth = SWS_ADMIN_AUTH_WRONG;
        assert_string_equal(call(f, closed[i][0], closed[i][1], "{}"),
                            "{\"error\": \"wrong bearer token\"}\n");
        assert_int_equal(f->reply.status, 401);
        assert_string_equal(f->reply.challenge,
                            "Bearer realm=\"scalws-admin\", error=\"invalid_token\"");
    }
    assert_int_equal(pool_of(f, "api")->n_members, 2);
    call(f, "GET", "/healthz", NULL);
    assert_int_equal(f->reply.status, 200);
    assert_null(f->reply.challenge);
    call(f, "HEAD", "/readyz", NULL);
    assert_int_equal(f->reply.status, 200);
    f->api.auth = SWS_ADMIN_AUTH_OK;
    call(f, "GET", "/v1/pools", NULL);
    assert_int_equal(f->reply.status, 200);
    assert_null(f->reply.challenge);
}

#define NO_LIVE ", \"health\": \"up\", \"down_workers\": 0, \"connections\": 0, \"idle\": 0, " \
                "\"in_flight\": 0, \"requests\": 0, \"failures\": 0, \"workers\": []"

static void test_pools_lists_members_with_ids_and_states(void **state)
{
    fixture_t *f = *state;
    assert_string_equal(call(f, "GET", "/v1/pools", NULL),
                        "{\"generation\": 1, \"pools\": [{\"name\": \"api\", \"members\": ["
                        "{\"id\": 1, \"address\": \"127.0.0.1:9001\", \"weight\": 1, \"state\": \"up\""
                        NO_LIVE "}, "
                        "{\"id\": 5, \"address\": \"[::1]:9002\", \"weight\": 3, \"state\": \"up\""
                        NO_LIVE "}]}, "
                        "{\"name\": \"empty\", \"members\": []}]}\n");
}

/* What two workers published for member 5 (in another order than the
 * table's: the hint misses) is summed and listed per worker; member 1,
 * which no worker published, shows zeros. */
static void test_pools_sums_and_lists_what_workers_published(void **state)
{
    fixture_t *f = *state;
    sws_shm_member_stats_t w0[] = {
        { .id = 5, .requests = 10, .failures = 1, .active = 2, .idle = 3 },
    };
    sws_shm_member_stats_t w1[] = {
        { .id = 99, .requests = 1 },
        { .id = 5, .requests = 30, .failures = 4, .active = 1, .idle = 0,
          .down_until_ms = UINT64_MAX / 2 },
    };
    sws_shm_member_stats_write(&f->shm, 0, w0, 1);
    sws_shm_member_stats_write(&f->shm, 1, w1, 2);
    const char *body = call(f, "GET", "/v1/pools", NULL);
    assert_int_equal(f->reply.status, 200);
    assert_non_null(strstr(body, "\"state\": \"up\"" NO_LIVE "}, "));
    const char *m5 = strstr(body, "\"id\": 5,");
    assert_non_null(m5);
    assert_non_null(strstr(m5, "\"state\": \"up\", \"health\": \"down\", \"down_workers\": 1, "
                               "\"connections\": 6, \"idle\": 3, \"in_flight\": 3, "
                               "\"requests\": 40, \"failures\": 5, \"workers\": ["
                               "{\"index\": 0, \"health\": \"up\", \"connections\": 5, "
                               "\"idle\": 3, \"in_flight\": 2, \"requests\": 10, \"failures\": 1}, "
                               "{\"index\": 1, \"health\": \"down\", \"down_for_ms\": "));
    assert_non_null(strstr(m5, ", \"connections\": 1, \"idle\": 0, \"in_flight\": 1, "
                               "\"requests\": 30, \"failures\": 4}]}"));

    /* A reaped worker's figures are gone with it. */
    sws_shm_reader_clear(&f->shm, 1);
    body = call(f, "GET", "/v1/pools", NULL);
    assert_non_null(strstr(body, "\"in_flight\": 2, \"requests\": 10, \"failures\": 1, "
                                 "\"workers\": [{\"index\": 0, "));
}

static void test_put_adds_a_member_with_a_new_id_and_publishes(void **state)
{
    fixture_t *f = *state;
    const char *body = call(f, "PUT", "/v1/pools/api/members/10.0.0.7:80",
                            "{\"weight\": 4, \"state\": \"draining\"}");
    assert_int_equal(f->reply.status, 201);
    char want[256];
    snprintf(want, sizeof(want),
             "{\"generation\": 2, \"pool\": \"api\", \"added\": {\"id\": %llu, "
             "\"address\": \"10.0.0.7:80\", \"weight\": 4, \"state\": \"draining\"}}\n",
             (unsigned long long)sws_member_id("api", "10.0.0.7:80"));
    assert_string_equal(body, want);
    assert_int_equal(f->publishes, 1);
    assert_int_equal(sws_shm_current_generation(&f->shm), 2);
    const Sws__Pool *p = pool_of(f, "api");
    assert_int_equal(p->n_members, 3);
    assert_int_equal(p->members[2]->id, 0); /* the table derives it */
    /* The table workers read has it too. */
    const sws_table_t *t = sws_shm_reader_acquire(&f->shm, 0, 1);
    assert_int_equal(sws_table_generation(t), 2);
    assert_int_equal(sws_table_pool(t, 0)->nmembers, 3);
    assert_int_equal(f->api.changes, 1);
}

static void test_put_without_body_adds_weight_1_up(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/empty/members/127.0.0.1:8080", NULL);
    assert_int_equal(f->reply.status, 201);
    const Sws__Member *m = pool_of(f, "empty")->members[0];
    assert_string_equal(m->address, "127.0.0.1:8080");
    assert_int_equal(m->weight, 1);
    assert_int_equal(m->state, SWS__MEMBER__STATE__UP);
}

/* A name is resolved by the PUT (from /etc/hosts: localhost), each address
 * a member of the table with the name beside it; a PUT of the same name
 * that resolves to the same addresses changes nothing; a name that does
 * not resolve changes nothing either (ADR 0024). */
static void test_put_resolves_a_name_into_members(void **state)
{
    fixture_t *f = *state;
    const char *body = call(f, "PUT", "/v1/pools/empty/members/LocalHost:8080", NULL);
    assert_int_equal(f->reply.status, 201);
    assert_non_null(strstr(body, "\"added\": {\"address\": \"LocalHost:8080\", \"resolved\": "
                                 "[{\"id\": "));
    const Sws__Member *m = pool_of(f, "empty")->members[0];
    assert_true(m->n_resolved >= 1);
    assert_string_equal(m->resolved[0], "127.0.0.1:8080"); /* IPv4 first */

    body = call(f, "GET", "/v1/pools", NULL);
    const char *e = strstr(body, "{\"name\": \"empty\", \"members\": [{\"id\": ");
    assert_non_null(e);
    assert_non_null(strstr(e, ", \"address\": \"127.0.0.1:8080\", \"name\": \"LocalHost:8080\", "
                              "\"weight\": 1, \"state\": \"up\", \"health\": "));
    /* Its id is the table's: the workers' figures are found under it. */
    sws_shm_reader_acquire(&f->shm, 0, 1);
    uint64_t id = strtoull(e + strlen("{\"name\": \"empty\", \"members\": [{\"id\": "), NULL, 10);
    sws_shm_member_stats_t w0 = { .id = id, .requests = 77 };
    sws_shm_member_stats_write(&f->shm, 0, &w0, 1);
    assert_non_null(strstr(call(f, "GET", "/v1/pools", NULL), "\"requests\": 77"));

    call(f, "PUT", "/v1/pools/empty/members/localhost:8080", NULL);
    assert_int_equal(f->reply.status, 200); /* the same member, the same addresses */
    assert_int_equal(f->publishes, 1);

    body = call(f, "PUT", "/v1/pools/empty/members/nonexistent.invalid:80", NULL);
    assert_int_equal(f->reply.status, 422);
    assert_non_null(strstr(body, "does not resolve"));
    assert_int_equal(f->publishes, 1);
    assert_int_equal(pool_of(f, "empty")->n_members, 1);
}

static void test_put_updates_only_the_fields_given(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/api/members/%5B::1%5D:9002", "{\"state\": \"draining\"}");
    assert_int_equal(f->reply.status, 200);
    const Sws__Member *m = pool_of(f, "api")->members[1];
    assert_int_equal(m->id, 5);
    assert_int_equal(m->weight, 3);
    assert_int_equal(m->state, SWS__MEMBER__STATE__DRAINING);
    assert_int_equal(f->publishes, 1);
}

static void test_put_that_changes_nothing_publishes_nothing(void **state)
{
    fixture_t *f = *state;
    assert_non_null(strstr(call(f, "PUT", "/v1/pools/api/members/127.0.0.1:9001",
                                "{\"weight\": 1, \"state\": \"up\"}"), "\"unchanged\""));
    assert_int_equal(f->reply.status, 200);
    assert_int_equal(f->publishes, 0);
}

static void test_delete_removes_the_member(void **state)
{
    fixture_t *f = *state;
    call(f, "DELETE", "/v1/pools/api/members/127.0.0.1:9001", NULL);
    assert_int_equal(f->reply.status, 200);
    const Sws__Pool *p = pool_of(f, "api");
    assert_int_equal(p->n_members, 1);
    assert_int_equal(p->members[0]->id, 5);
    /* Added back, it is the table's member of that address again. */
    call(f, "PUT", "/v1/pools/api/members/127.0.0.1:9001", NULL);
    assert_int_equal(f->reply.status, 201);
    assert_int_equal(pool_of(f, "api")->members[1]->id, 0);
}

/* Each refusal: its status, its message, and nothing published. */
static void refused(fixture_t *f, const char *method, const char *target, const char *body,
                    unsigned status, const char *error)
{
    const char *got = call(f, method, target, body);
    char want[512];
    snprintf(want, sizeof(want), "{\"error\": \"%s\"}\n", error);
    assert_string_equal(got, want);
    assert_int_equal(f->reply.status, status);
    assert_int_equal(f->publishes, 0);
    assert_int_equal(sws_shm_current_generation(&f->shm), 1);
    assert_int_equal(pool_of(f, "api")->n_members, 2);
}

static void test_bad_input_is_refused_and_changes_nothing(void **state)
{
    fixture_t *f = *state;
    refused(f, "PUT", "/v1/pools/nope/members/127.0.0.1:1", NULL, 404, "no pool \\\"nope\\\"");
    refused(f, "DELETE", "/v1/pools/api/members/127.0.0.1:1", NULL, 404,
            "pool \\\"api\\\" has no member \\\"127.0.0.1:1\\\"");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1", NULL, 400,
            "member \\\"127.0.0.1\\\": the port is missing (expected HOST:PORT)");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:70000", NULL, 400,
            "member \\\"127.0.0.1:70000\\\": the port must be a number from 1 to 65535");
    refused(f, "PUT", "/v1/pools/api/members/::1:80", NULL, 400,
            "member \\\"::1:80\\\": an IPv6 address needs brackets, as in [::1]:8080");
    refused(f, "PUT", "/v1/pools/api/members/a..b:80", NULL, 400,
            "member \\\"a..b:80\\\": has an empty label (two dots, or a dot at either end)");
    refused(f, "PUT", "/v1/pools/api/members/1.2.3.400:80", NULL, 400,
            "member \\\"1.2.3.400:80\\\": not an IPv4 address");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": 2", 400,
            "bad JSON: expected ',' or '}', got the end");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": 2, \"color\": 1}", 400,
            "unknown field \\\"color\\\" (known: weight, state)");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": 0}", 400,
            "weight: expected a whole number from 1 to 1000");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": 1.5}", 400,
            "weight: expected a whole number from 1 to 1000");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": \"2\"}", 400,
            "weight: expected a whole number from 1 to 1000");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"state\": \"down\"}", 400,
            "state: \\\"down\\\" is the health checks' verdict, not set here: use "
            "\\\"draining\\\" or DELETE");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "[1]", 400,
            "bad JSON: expected an object at byte 0");
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", "{\"weight\": {}}", 400,
            "\\\"weight\\\": nested objects and arrays are not accepted");
    refused(f, "POST", "/v1/pools/api/members/127.0.0.1:1", NULL, 405,
            "method POST not allowed here (allowed: PUT, DELETE)");
    assert_string_equal(f->reply.allow, "PUT, DELETE");
    refused(f, "DELETE", "/v1/status", NULL, 405,
            "method DELETE not allowed here (allowed: GET, HEAD)");
    refused(f, "GET", "/v2/status", NULL, 404, "no such endpoint (see docs/admin-api.md)");
    refused(f, "GET", "/v1/pools/api", NULL, 404, "no such endpoint (see docs/admin-api.md)");
    refused(f, "GET", "/v1//status", NULL, 400, "bad request target");
    refused(f, "GET", "/v1/pools/%zz", NULL, 400, "bad request target");
    refused(f, "GET", "/v1/pools/a%00", NULL, 400, "bad request target");
    refused(f, "GET", "*", NULL, 400, "bad request target");
    /* Found by fuzz_admin: a seventh segment was stored past the array. */
    refused(f, "PUT", "/v1/pools/api/members/127.0/0.1:9001/x", NULL, 400,
            "bad request target");
    refused(f, "GET", "/a/b/c/d/e/f/g/h", NULL, 400, "bad request target");
}

static void test_busy_arenas_answer_503_and_change_nothing(void **state)
{
    fixture_t *f = *state;
    f->busy = SWS_SHM_BUSY;
    refused(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", NULL, 503,
            "every arena is held; nothing changed: retry");
    f->busy = SWS_ADMIN_UNAVAILABLE;
    refused(f, "DELETE", "/v1/pools/api/members/127.0.0.1:9001", NULL, 503,
            "the server is stopping; nothing changed");
    assert_int_equal(f->api.changes, 0);
}

static void test_the_file_replaces_admin_changes(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", NULL);
    assert_int_equal(f->api.changes, 1);
    /* A reload publishes the file's RouteSet: the API now shows it. */
    Sws__RouteSet *rs = rs_new();
    rs->settings->log_level = strdup("info");
    host_respond(rs_host(rs, "a.test"), SWS__ROUTE__MATCH__PREFIX, "/", "hi");
    uint64_t gen;
    char err[256];
    assert_int_equal(sws_shm_publish(&f->shm, rs, &gen, err, sizeof(err)), 0);
    assert_int_equal(sws_admin_api_published(&f->api, rs, gen, SWS_PUBLISHED_BY_FILE), 0);
    sws__route_set__free_unpacked(rs, NULL);
    assert_int_equal(f->api.changes, 0);
    assert_string_equal(call(f, "GET", "/v1/pools", NULL), "{\"generation\": 3, \"pools\": []}\n");
}

/* An ingress publication merges the file's copy, so it too replaces the
 * API's changes; the log names ingressd, not the file. */
static void test_an_ingress_publication_says_it_replaces_admin_changes(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", NULL);
    assert_int_equal(f->api.changes, 1);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int saved = sws_log_fd();
    sws_log_set_fd(fds[1]);
    sws_log_set_level(SWS_LOG_NOTICE);
    Sws__RouteSet *rs = sws_routeset_copy(sws_admin_api_routes(&f->api));
    assert_non_null(rs);
    assert_int_equal(sws_admin_api_published(&f->api, rs, f->api.generation + 1,
                                             SWS_PUBLISHED_BY_INGRESS), 0);
    sws__route_set__free_unpacked(rs, NULL);
    sws_log_set_level(SWS_LOG_CRIT);
    sws_log_set_fd(saved);
    close(fds[1]);
    char line[512] = "";
    assert_true(read(fds[0], line, sizeof(line) - 1) > 0);
    close(fds[0]);
    assert_non_null(strstr(line, "from ingressd (merged with the file's routes) replaces the 1 "
                                 "change(s)"));
    assert_int_equal(f->api.changes, 0);
}

/* Addresses follow the RouteSet checker's rules, the file's: what it
 * refuses is a 400 that changes nothing, and a member written another way
 * ("[0::1]" for "[::1]") is the member that is there. */
static void test_member_addresses_are_the_checkers(void **state)
{
    fixture_t *f = *state;
    static const char *const bad[] = { "a.example:0", ":80", "a..b:80", "[::1:80", "[zz]:80",
                                       "a.example:" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char target[128];
        snprintf(target, sizeof(target), "/v1/pools/api/members/%s", bad[i]);
        call(f, "PUT", target, "{\"weight\": 1}");
        assert_int_equal(f->reply.status, 400);
    }
    call(f, "PUT", "/v1/pools/api/members/svc_1.invalid:80", "{\"weight\": 1}");
    assert_int_equal(f->reply.status, 422); /* a name the file takes too, if it resolves */
    call(f, "PUT", "/v1/pools/api/members/10.0.0.7:80", "{\"weight\": 1}");
    assert_int_equal(f->reply.status, 201);
    call(f, "PUT", "/v1/pools/api/members/[0::1]:9002", "{\"weight\": 3}");
    assert_int_equal(f->reply.status, 200); /* unchanged: the member [::1]:9002 */
    assert_int_equal(f->publishes, 1);
    assert_int_equal(pool_of(f, "api")->n_members, 3);
}

/* A member added by the API gets the id the table derives from pool and
 * address, as one from the file would: a removed member's id is never
 * handed to another address. */
static void test_added_member_ids_are_derived_not_counted(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/api/members/10.0.0.7:80", "{}");
    call(f, "DELETE", "/v1/pools/api/members/10.0.0.7:80", NULL);
    assert_int_equal(f->reply.status, 200);
    const char *body = call(f, "PUT", "/v1/pools/api/members/10.0.0.8:80", "{}");
    char want[64];
    snprintf(want, sizeof(want), "{\"id\": %llu,",
             (unsigned long long)sws_member_id("api", "10.0.0.8:80"));
    assert_non_null(strstr(body, want));
    assert_int_not_equal(sws_member_id("api", "10.0.0.8:80"), sws_member_id("api", "10.0.0.7:80"));
}

/* The supervisor hands its publication already packed (the copy a binary
 * upgrade sends): the admin API keeps those bytes, reads the same pools
 * from them, and a publication from the file still replaces the admin
 * API's changes. */
static void test_a_packed_publication_reads_as_the_routeset(void **state)
{
    fixture_t *f = *state;
    call(f, "PUT", "/v1/pools/api/members/127.0.0.1:1", NULL);
    assert_int_equal(f->api.changes, 1);
    const Sws__Pool *api = pool_of(f, "api");
    size_t members = api->n_members;
    char *pools = strdup(call(f, "GET", "/v1/pools", NULL));
    assert_non_null(pools);
    const Sws__RouteSet *rs = sws_admin_api_routes(&f->api);
    size_t len = sws__route_set__get_packed_size(rs);
    uint8_t *packed = malloc(len);
    assert_non_null(packed);
    sws__route_set__pack(rs, packed);
    uint64_t gen = f->api.generation;
    assert_int_equal(sws_admin_api_published_packed(&f->api, packed, len, gen,
                                                    SWS_PUBLISHED_BY_FILE), 0);
    free(packed); /* the admin API keeps its own copy */
    assert_int_equal(f->api.changes, 0);
    assert_int_equal(pool_of(f, "api")->n_members, members);
    assert_string_equal(call(f, "GET", "/v1/pools", NULL), pools);
    free(pools);
}

int main(void)
{
    sws_log_set_level(SWS_LOG_CRIT);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_status_names_published_and_held_generations),
        T(test_probes_health_always_ready_once_a_table_is_served),
        T(test_without_the_token_only_the_probes_answer),
        T(test_pools_lists_members_with_ids_and_states),
        T(test_pools_sums_and_lists_what_workers_published),
        T(test_put_adds_a_member_with_a_new_id_and_publishes),
        T(test_put_without_body_adds_weight_1_up),
        T(test_put_resolves_a_name_into_members),
        T(test_put_updates_only_the_fields_given),
        T(test_put_that_changes_nothing_publishes_nothing),
        T(test_delete_removes_the_member),
        T(test_bad_input_is_refused_and_changes_nothing),
        T(test_busy_arenas_answer_503_and_change_nothing),
        T(test_the_file_replaces_admin_changes),
        T(test_an_ingress_publication_says_it_replaces_admin_changes),
        T(test_member_addresses_are_the_checkers),
        T(test_added_member_ids_are_derived_not_counted),
        T(test_a_packed_publication_reads_as_the_routeset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
