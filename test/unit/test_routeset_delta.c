/* shm/routeset_delta.c: the deltas of the ingress clone pattern.
 * apply(make(A, B), A) == B (but for version) over generated sets, through
 * the wire. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "shm/routeset_delta.h"
#include "support/routeset_build.h"

static uint32_t rng_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 8) % n;
}

/* A set of up to 12 hosts and 6 pools, drawn from small name spaces so
 * that two draws share keys, some equal and some not. */
static Sws__RouteSet *generated(void)
{
    Sws__RouteSet *rs = rs_new();
    char name[64];
    int used[12] = { 0 };
    for (unsigned i = 0, n = rnd(12); i < n; i++) {
        unsigned k = rnd(12);
        if (used[k]++)
            continue;
        snprintf(name, sizeof(name), "h%u.example a%u.example", k, k);
        Sws__Host *h = rs_host(rs, name);
        snprintf(name, sizeof(name), "body %u", rnd(3));
        host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/", name);
    }
    int pused[6] = { 0 };
    for (unsigned i = 0, n = rnd(6); i < n; i++) {
        unsigned k = rnd(6);
        if (pused[k]++)
            continue;
        snprintf(name, sizeof(name), "pool-%u", k);
        Sws__Pool *p = rs_pool(rs, name);
        for (unsigned m = 0, nm = rnd(4); m < nm; m++) {
            snprintf(name, sizeof(name), "10.0.0.%u:80", m);
            pool_member(p, name, 1 + rnd(2));
        }
    }
    rs->version = rnd(3); /* ingressd bumps it per translation */
    sws_routeset_canonicalize(rs);
    return rs;
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    protobuf_c_message_pack(m, buf);
    return buf;
}

static Sws__RouteSet *copy_of(const Sws__RouteSet *rs)
{
    Sws__RouteSet *c = sws_routeset_copy(rs);
    assert_non_null(c);
    return c;
}

/* The delta d as the subscriber gets it: packed into an IngressMessage
 * and unpacked. */
static Sws__IngressMessage *over_the_wire(Sws__RouteDelta *d)
{
    Sws__IngressMessage msg = SWS__INGRESS_MESSAGE__INIT;
    msg.body_case = SWS__INGRESS_MESSAGE__BODY_DELTA;
    msg.delta = d;
    size_t len;
    uint8_t *buf = packed(&msg.base, &len);
    Sws__IngressMessage *got = sws__ingress_message__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(got);
    assert_int_equal(got->body_case, SWS__INGRESS_MESSAGE__BODY_DELTA);
    return got;
}

static void assert_same_set(const Sws__RouteSet *a, const Sws__RouteSet *b)
{
    assert_true(sws_routeset_same_message(&a->base, &b->base));
}

/* got is want but for version, which a delta does not carry: got keeps
 * the base's. */
static void assert_same_set_but_version(Sws__RouteSet *got, const Sws__RouteSet *want,
                                        const Sws__RouteSet *base)
{
    assert_int_equal(got->version, base->version);
    got->version = want->version;
    assert_same_set(got, want);
    got->version = base->version;
}

static void test_apply_of_make_gives_the_new_set(void **state)
{
    (void)state;
    for (int round = 0; round < 500; round++) {
        Sws__RouteSet *a = generated(), *b = generated();
        Sws__RouteDelta d;
        int changes = sws_routeset_delta_make(a, b, &d);
        assert_true(changes >= 0);
        Sws__RouteSet *state_set = copy_of(a);
        if (changes == 0) {
            assert_same_set_but_version(state_set, b, a);
        } else {
            Sws__IngressMessage *wire = over_the_wire(&d);
            sws_routeset_delta_release(&d);
            sws_routeset_applied_t applied;
            char err[256] = "";
            if (sws_routeset_delta_apply(state_set, wire->delta, &applied, err, sizeof(err)) < 0)
                fail_msg("round %d: %s", round, err);
            state_set = sws_routeset_applied_commit(&applied, state_set, wire->delta);
            sws__ingress_message__free_unpacked(wire, NULL);
            assert_same_set_but_version(state_set, b, a);
        }
        sws__route_set__free_unpacked(state_set, NULL);
        sws__route_set__free_unpacked(a, NULL);
        sws__route_set__free_unpacked(b, NULL);
    }
}

/* The case the shape is for: one endpoint changes among many hosts. */
static void test_member_change_is_one_pool(void **state)
{
    (void)state;
    Sws__RouteSet *a = rs_new();
    char name[64];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "h%04d.example", i);
        host_respond(rs_host(a, name), SWS__ROUTE__MATCH__PREFIX, "/", "x");
        snprintf(name, sizeof(name), "pool-%04d", i);
        pool_member(rs_pool(a, name), "10.0.0.1:80", 1);
    }
    sws_routeset_canonicalize(a);
    Sws__RouteSet *b = copy_of(a);
    free(b->pools[500]->members[0]->address);
    b->pools[500]->members[0]->address = strdup("10.0.0.2:80");
    Sws__RouteDelta d;
    assert_int_equal(sws_routeset_delta_make(a, b, &d), 1);
    assert_int_equal(d.n_upsert_pools, 1);
    assert_string_equal(d.upsert_pools[0]->name, "pool-0500");
    assert_int_equal(d.n_upsert_hosts + d.n_remove_hosts + d.n_remove_pools, 0);
    Sws__IngressMessage msg = SWS__INGRESS_MESSAGE__INIT;
    msg.body_case = SWS__INGRESS_MESSAGE__BODY_DELTA;
    msg.delta = &d;
    assert_true(protobuf_c_message_get_packed_size(&msg.base) < 64);
    sws_routeset_delta_release(&d);
    Sws__RouteSet *same = copy_of(a);
    assert_int_equal(sws_routeset_delta_make(a, same, &d), 0);
    sws__route_set__free_unpacked(same, NULL);
    sws__route_set__free_unpacked(a, NULL);
    sws__route_set__free_unpacked(b, NULL);
}

/* Settings and tls are the supervisor's file's (ingress_merge.h): a
 * delta has no field for them, so a change there alone is no change. */
static void test_settings_and_tls_are_no_change(void **state)
{
    (void)state;
    Sws__RouteSet *a = rs_new();
    host_respond(rs_host(a, "a.example"), SWS__ROUTE__MATCH__PREFIX, "/", "a");
    Sws__RouteSet *b = copy_of(a);
    b->settings->server_name[0] = 'S';
    b->tls = NEW(Sws__Tls, SWS__TLS__INIT);
    Sws__RouteDelta d;
    assert_int_equal(sws_routeset_delta_make(a, b, &d), 0);
    sws__route_set__free_unpacked(a, NULL);
    sws__route_set__free_unpacked(b, NULL);
}

/* A delta that does not fit the state is refused whole: the subscriber
 * then asks for a snapshot. */
static void test_inconsistent_delta_refused_and_base_kept(void **state)
{
    (void)state;
    Sws__RouteSet *base = rs_new();
    host_respond(rs_host(base, "a.example"), SWS__ROUTE__MATCH__PREFIX, "/", "a");
    rs_pool(base, "p1");
    sws_routeset_canonicalize(base);
    Sws__RouteSet *before = copy_of(base);
    char err[256] = "";
    sws_routeset_applied_t applied;

    char *gone[] = { "b.example" };
    Sws__RouteDelta d = SWS__ROUTE_DELTA__INIT;
    d.remove_hosts = gone;
    d.n_remove_hosts = 1;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "\"b.example\", which is not there"));

    char *twice[] = { "p1", "p1" };
    sws__route_delta__init(&d);
    d.remove_pools = twice;
    d.n_remove_pools = 2;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "twice"));

    /* The publisher sends its lists in key order; the apply merges them as
     * they are, so another order is refused, not sorted. */
    char *unsorted[] = { "p1", "a.example" };
    sws__route_delta__init(&d);
    d.remove_hosts = unsorted;
    d.n_remove_hosts = 2;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "removes the host \"a.example\" out of key order"));
    Sws__Pool zp = SWS__POOL__INIT, ap = SWS__POOL__INIT, *pups[] = { &zp, &ap };
    zp.name = "z";
    ap.name = "a";
    sws__route_delta__init(&d);
    d.upsert_pools = pups;
    d.n_upsert_pools = 2;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "upserts the pool \"a\" out of key order"));

    Sws__Host nameless = SWS__HOST__INIT, *ups[] = { &nameless };
    sws__route_delta__init(&d);
    d.upsert_hosts = ups;
    d.n_upsert_hosts = 1;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), -1);

    /* A good one, aborted: nothing changes either. */
    char *p1[] = { "p1" };
    sws__route_delta__init(&d);
    d.remove_pools = p1;
    d.n_remove_pools = 1;
    assert_int_equal(sws_routeset_delta_apply(base, &d, &applied, err, sizeof(err)), 0);
    assert_int_equal(applied.next->n_pools, 0);
    sws_routeset_applied_abort(&applied);
    assert_same_set(base, before);
    sws__route_set__free_unpacked(base, NULL);
    sws__route_set__free_unpacked(before, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_of_make_gives_the_new_set),
        cmocka_unit_test(test_member_change_is_one_pool),
        cmocka_unit_test(test_settings_and_tls_are_no_change),
        cmocka_unit_test(test_inconsistent_delta_refused_and_base_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
