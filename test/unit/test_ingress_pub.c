/* ingressd/publish.c: the publisher of the clone pattern, seen from a SUB
 * and a DEALER socket of the test's, over ipc in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "ingressd/publish.h"
#include "shm/routeset_delta.h"
#include "support/routeset_build.h"

#define WAIT_MS 5000

typedef struct fixture {
    char dir[64];
    char endpoint[128];
    sws_ingress_pub_t *pub;
    void *ctx, *sub, *dealer;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/scalws-pub-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    /* A directory that does not exist yet: the publisher makes it. */
    snprintf(f->endpoint, sizeof(f->endpoint), "ipc://%s/run/routes.sock", f->dir);
    char err[256] = "";
    f->pub = sws_ingress_pub_open(f->endpoint, 0x1234, err, sizeof(err));
    if (f->pub == NULL)
        fail_msg("open: %s", err);
    f->ctx = zmq_ctx_new();
    f->sub = zmq_socket(f->ctx, ZMQ_SUB);
    f->dealer = zmq_socket(f->ctx, ZMQ_DEALER);
    char snap[160];
    snprintf(snap, sizeof(snap), "%s.snapshot", f->endpoint);
    assert_int_equal(zmq_setsockopt(f->sub, ZMQ_SUBSCRIBE, "", 0), 0);
    assert_int_equal(zmq_connect(f->sub, f->endpoint), 0);
    assert_int_equal(zmq_connect(f->dealer, snap), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    int zero = 0;
    zmq_setsockopt(f->sub, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(f->dealer, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_close(f->sub);
    zmq_close(f->dealer);
    zmq_ctx_term(f->ctx);
    sws_ingress_pub_close(f->pub);
    char path[128];
    snprintf(path, sizeof(path), "%s/run", f->dir);
    rmdir(path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The next message on sock other than a heartbeat, the publisher's
 * requests answered meanwhile; NULL after wait_ms. */
static Sws__IngressMessage *next_within(fixture_t *f, void *sock, uint64_t wait_ms)
{
    uint64_t until = mono_ms() + wait_ms;
    while (mono_ms() < until) {
        sws_ingress_pub_on_readable(f->pub);
        zmq_pollitem_t item = { .socket = sock, .events = ZMQ_POLLIN };
        if (zmq_poll(&item, 1, 10) == 1) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            assert_true(zmq_msg_recv(&m, sock, 0) >= 0);
            Sws__IngressMessage *got =
                sws__ingress_message__unpack(NULL, zmq_msg_size(&m), zmq_msg_data(&m));
            zmq_msg_close(&m);
            assert_non_null(got);
            if (got->body_case != SWS__INGRESS_MESSAGE__BODY_HEARTBEAT)
                return got;
            sws__ingress_message__free_unpacked(got, NULL);
        }
    }
    return NULL;
}

static Sws__IngressMessage *next_msg(fixture_t *f, void *sock)
{
    return next_within(f, sock, WAIT_MS);
}

/* Heartbeats until one arrives: the SUB socket has joined (ZeroMQ's slow
 * joiner), so every later message reaches it. */
static void wait_joined(fixture_t *f)
{
    uint64_t until = mono_ms() + WAIT_MS;
    for (;;) {
        assert_true(mono_ms() < until);
        sws_ingress_pub_tick(f->pub, sws_ingress_pub_deadline_ms(f->pub));
        zmq_pollitem_t item = { .socket = f->sub, .events = ZMQ_POLLIN };
        if (zmq_poll(&item, 1, 20) == 1)
            break;
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    assert_true(zmq_msg_recv(&m, f->sub, 0) >= 0);
    Sws__IngressMessage *hb = sws__ingress_message__unpack(NULL, zmq_msg_size(&m),
                                                           zmq_msg_data(&m));
    zmq_msg_close(&m);
    assert_non_null(hb);
    assert_int_equal(hb->body_case, SWS__INGRESS_MESSAGE__BODY_HEARTBEAT);
    assert_int_equal(hb->heartbeat->publisher, 0x1234);
    sws__ingress_message__free_unpacked(hb, NULL);
}

static Sws__RouteSet *two_hosts(const char *body)
{
    Sws__RouteSet *rs = rs_new();
    /* Out of order: the snapshot comes sorted by first name. */
    host_respond(rs_host(rs, "b.example"), SWS__ROUTE__MATCH__PREFIX, "/", body);
    host_respond(rs_host(rs, "a.example"), SWS__ROUTE__MATCH__PREFIX, "/", "a");
    return rs;
}

static void ask_snapshot(fixture_t *f)
{
    assert_int_equal(zmq_send(f->dealer, "", 0, 0), 0);
}

static void test_sockets_are_0600_in_a_made_directory(void **state)
{
    fixture_t *f = *state;
    struct stat st;
    char path[160];
    snprintf(path, sizeof(path), "%s/run/routes.sock", f->dir);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "%s/run/routes.sock.snapshot", f->dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_deltas_numbered_only_on_change_and_snapshot_on_request(void **state)
{
    fixture_t *f = *state;
    char err[256];
    wait_joined(f);
    /* Before any routes, a request gets no answer (an empty snapshot
     * would make scalwsd ready without the cluster's routes). */
    ask_snapshot(f);
    assert_null(next_within(f, f->dealer, 300));

    Sws__RouteSet *a = two_hosts("one"), *b = two_hosts("two");
    a->tls = NEW(Sws__Tls, SWS__TLS__INIT);
    assert_int_equal(sws_ingress_pub_routes(f->pub, a, err, sizeof(err)), 1);
    Sws__IngressMessage *m = next_msg(f, f->sub);
    assert_non_null(m);
    assert_int_equal(m->body_case, SWS__INGRESS_MESSAGE__BODY_DELTA);
    assert_int_equal(m->delta->sequence, 1);
    assert_int_equal(m->delta->n_upsert_hosts, 2);
    sws__ingress_message__free_unpacked(m, NULL);
    ask_snapshot(f);
    m = next_msg(f, f->dealer);
    assert_non_null(m);
    assert_int_equal(m->body_case, SWS__INGRESS_MESSAGE__BODY_SNAPSHOT);
    assert_int_equal(m->snapshot->sequence, 1);
    assert_int_equal(m->snapshot->publisher, 0x1234);
    assert_string_equal(m->snapshot->routes->hosts[0]->names[0], "a.example");
    /* a has settings and tls; the supervisor takes its own (ingress_merge.h). */
    assert_non_null(a->settings);
    assert_null(m->snapshot->routes->settings);
    assert_null(m->snapshot->routes->tls);
    sws__ingress_message__free_unpacked(m, NULL);

    /* The same set again: nothing goes out. */
    assert_int_equal(sws_ingress_pub_routes(f->pub, a, err, sizeof(err)), 0);
    assert_int_equal(sws_ingress_pub_sequence(f->pub), 1);
    /* One host changed: one host in the delta. */
    assert_int_equal(sws_ingress_pub_routes(f->pub, b, err, sizeof(err)), 1);
    m = next_msg(f, f->sub);
    assert_non_null(m);
    assert_int_equal(m->body_case, SWS__INGRESS_MESSAGE__BODY_DELTA);
    assert_int_equal(m->delta->sequence, 2);
    assert_int_equal(m->delta->n_upsert_hosts, 1);
    assert_string_equal(m->delta->upsert_hosts[0]->names[0], "b.example");
    sws__ingress_message__free_unpacked(m, NULL);

    /* A forced gap: the next delta is 4. */
    sws_ingress_pub_skip_sequence(f->pub);
    assert_int_equal(sws_ingress_pub_routes(f->pub, a, err, sizeof(err)), 1);
    assert_int_equal(sws_ingress_pub_sequence(f->pub), 4);
    sws__route_set__free_unpacked(a, NULL);
    sws__route_set__free_unpacked(b, NULL);
}

/* Three pools out of name order, one member each, and a host. */
static Sws__RouteSet *three_pools(void)
{
    Sws__RouteSet *rs = two_hosts("one");
    pool_member(rs_pool(rs, "p-c"), "10.0.0.3:80", 1);
    pool_member(rs_pool(rs, "p-a"), "10.0.0.1:80", 1);
    pool_member(rs_pool(rs, "p-b"), "10.0.0.2:80", 1);
    rs->version = 1;
    return rs;
}

static void test_pools_alone_send_what_the_full_set_would(void **state)
{
    fixture_t *f = *state;
    char err[256];
    wait_joined(f);
    Sws__RouteSet *rs = three_pools();
    assert_int_equal(sws_ingress_pub_routes(f->pub, rs, err, sizeof(err)), 1);
    Sws__IngressMessage *m = next_msg(f, f->sub);
    assert_non_null(m);
    sws__ingress_message__free_unpacked(m, NULL);

    /* p-c and p-a change, p-b is named but the same: the delta holds the
     * two in name order, nothing else. */
    Sws__Pool *c = rs->pools[0], *a = rs->pools[1], *b = rs->pools[2];
    pool_member(c, "10.0.0.33:80", 1);
    a->members[0]->state = SWS__MEMBER__STATE__DRAINING;
    rs->version = 2;
    Sws__Pool *named[] = { c, b, a };
    assert_int_equal(sws_ingress_pub_pools(f->pub, rs, named, 3, err, sizeof(err)), 1);
    m = next_msg(f, f->sub);
    assert_non_null(m);
    assert_int_equal(m->body_case, SWS__INGRESS_MESSAGE__BODY_DELTA);
    assert_int_equal(m->delta->sequence, 2);
    assert_int_equal(m->delta->n_upsert_hosts + m->delta->n_remove_hosts +
                         m->delta->n_remove_pools, 0);
    assert_int_equal(m->delta->n_upsert_pools, 2);
    assert_string_equal(m->delta->upsert_pools[0]->name, "p-a");
    assert_string_equal(m->delta->upsert_pools[1]->name, "p-c");
    assert_int_equal(m->delta->upsert_pools[1]->n_members, 2);
    sws__ingress_message__free_unpacked(m, NULL);

    /* The snapshot is the whole new set, version included, as
     * sws_ingress_pub_routes would have left it: without settings. */
    Sws__RouteSet *want = sws_routeset_copy(rs);
    assert_non_null(want);
    sws__settings__free_unpacked(want->settings, NULL);
    want->settings = NULL;
    sws_routeset_canonicalize(want);
    ask_snapshot(f);
    m = next_msg(f, f->dealer);
    assert_non_null(m);
    assert_int_equal(m->body_case, SWS__INGRESS_MESSAGE__BODY_SNAPSHOT);
    assert_true(sws_routeset_same_message(&m->snapshot->routes->base, &want->base));
    sws__ingress_message__free_unpacked(m, NULL);
    sws__route_set__free_unpacked(want, NULL);

    /* Named again unchanged: nothing goes out. */
    assert_int_equal(sws_ingress_pub_pools(f->pub, rs, named, 3, err, sizeof(err)), 0);
    assert_int_equal(sws_ingress_pub_sequence(f->pub), 2);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_tcp_must_be_loopback(void **state)
{
    (void)state;
    char err[256] = "";
    assert_null(sws_ingress_pub_open("tcp://192.0.2.1:5555", 1, err, sizeof(err)));
    assert_non_null(strstr(err, "not a loopback address"));
    assert_null(sws_ingress_pub_open("ipc://relative.sock", 1, err, sizeof(err)));
    assert_non_null(strstr(err, "must be absolute"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sockets_are_0600_in_a_made_directory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deltas_numbered_only_on_change_and_snapshot_on_request,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_pools_alone_send_what_the_full_set_would, setup,
                                        teardown),
        cmocka_unit_test(test_tcp_must_be_loopback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
