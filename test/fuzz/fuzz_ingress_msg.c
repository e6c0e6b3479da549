/*
 * Fuzz target: a message from ingressd, as the supervisor's subscription
 * takes it (supervisor/ingress_sub.c): bytes decoded as an IngressMessage,
 * then
 *   a delta      applied to a fixed base set (shm/routeset_delta.h), the
 *                candidate merged with a fixed file set
 *                (supervisor/ingress_merge.h) and checked
 *                (sws_routeset_check), then committed or aborted as the
 *                check says; a candidate that passed must come back from
 *                make(base, candidate) applied to base, byte for byte;
 *   a snapshot   canonicalized, merged, checked;
 *   any          judged by the clone pattern's rule (sws_ingress_judge).
 * Everything allocated is freed: the leak checker sees an ownership slip.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "shm/routeset_check.h"
#include "shm/routeset_delta.h"
#include "supervisor/ingress_merge.h"
#include "supervisor/ingress_sub.h"

static uint8_t *base_bytes;
static size_t base_len;
static Sws__RouteSet *file_set;

/* The base: two hosts and two pools, as ingressd would have sent them. */
static Sws__RouteSet *make_base(void)
{
    static char *names_a[] = { "a.example" }, *names_b[] = { "b.example", "*.b.example" };
    static char *paths[] = { "/" };
    static Sws__Member m1 = SWS__MEMBER__INIT, m2 = SWS__MEMBER__INIT;
    static Sws__Member *members[] = { &m1, &m2 };
    static Sws__Pool p1 = SWS__POOL__INIT, p2 = SWS__POOL__INIT;
    static Sws__Pool *pools[] = { &p1, &p2 };
    static Sws__Proxy proxy = SWS__PROXY__INIT;
    static Sws__Respond respond = SWS__RESPOND__INIT;
    static Sws__Route r1 = SWS__ROUTE__INIT, r2 = SWS__ROUTE__INIT;
    static Sws__Route *routes_a[] = { &r1 }, *routes_b[] = { &r2 };
    static Sws__Host ha = SWS__HOST__INIT, hb = SWS__HOST__INIT;
    static Sws__Host *hosts[] = { &ha, &hb };
    static Sws__Settings settings = SWS__SETTINGS__INIT;
    static Sws__RouteSet rs = SWS__ROUTE_SET__INIT;
    m1.address = "127.0.0.1:8001";
    m2.address = "127.0.0.1:8002";
    p1.name = "ns.app.80";
    p1.members = members;
    p1.n_members = 2;
    p2.name = "ns.web.80";
    proxy.pool = "ns.app.80";
    r1.path = paths[0];
    r1.action_case = SWS__ROUTE__ACTION_PROXY;
    r1.proxy = &proxy;
    respond.status = 200;
    r2.path = paths[0];
    r2.action_case = SWS__ROUTE__ACTION_RESPOND;
    r2.respond = &respond;
    ha.names = names_a;
    ha.n_names = 1;
    ha.routes = routes_a;
    ha.n_routes = 1;
    hb.names = names_b;
    hb.n_names = 2;
    hb.routes = routes_b;
    hb.n_routes = 1;
    rs.settings = &settings;
    rs.hosts = hosts;
    rs.n_hosts = 2;
    rs.pools = pools;
    rs.n_pools = 2;
    return &rs;
}

static Sws__RouteSet *unpacked_copy(const Sws__RouteSet *rs)
{
    Sws__RouteSet *c = sws_routeset_copy(rs);
    if (c == NULL)
        abort();
    return c;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    Sws__RouteSet *base = make_base();
    sws_routeset_canonicalize(base);
    base_len = sws__route_set__get_packed_size(base);
    base_bytes = malloc(base_len + 1);
    if (base_bytes == NULL)
        abort();
    sws__route_set__pack(base, base_bytes);
    /* The file: one host of the base's name, so the merge shadows it. */
    file_set = unpacked_copy(base);
    for (size_t i = 1; i < file_set->n_hosts; i++)
        sws__host__free_unpacked(file_set->hosts[i], NULL);
    file_set->n_hosts = 1;
    return 0;
}

static int merged_passes(const Sws__RouteSet *ingress)
{
    sws_ingress_merge_t m;
    sws_routeset_refusal_t why;
    if (sws_ingress_merge(file_set, ingress, &m) < 0)
        return 0;
    int ok = sws_routeset_check(&m.rs, &why) == 0;
    sws_ingress_merge_free(&m);
    return ok;
}

/* make(base, next) applied to base gives next again. */
static void roundtrip(const Sws__RouteSet *base, const Sws__RouteSet *next)
{
    Sws__RouteDelta d;
    char err[256];
    if (sws_routeset_delta_make(base, next, &d) < 0)
        abort();
    /* apply leaves base as it is: the set make read serves again. */
    sws_routeset_applied_t a;
    if (sws_routeset_delta_apply(base, &d, &a, err, sizeof(err)) < 0)
        abort();
    /* The entries are next's, borrowed: only the shell moves. */
    Sws__RouteSet *shell = a.next;
    if (!sws_routeset_same_message(&shell->base, &next->base))
        abort();
    free(a.garbage);
    free(shell->hosts);
    free(shell->pools);
    free(shell);
    sws_routeset_delta_release(&d);
}

static void on_delta(Sws__RouteDelta *d)
{
    Sws__RouteSet *base = sws__route_set__unpack(NULL, base_len, base_bytes);
    char err[256];
    sws_routeset_applied_t a;
    if (base == NULL)
        abort();
    if (sws_routeset_delta_apply(base, d, &a, err, sizeof(err)) < 0) {
        sws__route_set__free_unpacked(base, NULL);
        return;
    }
    if (!merged_passes(a.next)) {
        sws_routeset_applied_abort(&a);
        sws__route_set__free_unpacked(base, NULL);
        return;
    }
    Sws__RouteSet *ref = sws__route_set__unpack(NULL, base_len, base_bytes);
    if (ref == NULL)
        abort();
    roundtrip(ref, a.next);
    sws__route_set__free_unpacked(ref, NULL);
    Sws__RouteSet *state = sws_routeset_applied_commit(&a, base, d);
    sws__route_set__free_unpacked(state, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Sws__IngressMessage *m = sws__ingress_message__unpack(NULL, size, data);
    if (m == NULL)
        return 0;
    static const sws_ingress_seq_t at = { 1, 7, 42 };
    uint64_t seq = 0, publisher = 0;
    if (m->body_case == SWS__INGRESS_MESSAGE__BODY_DELTA) {
        seq = m->delta->sequence;
        publisher = m->delta->publisher;
        on_delta(m->delta);
    } else if (m->body_case == SWS__INGRESS_MESSAGE__BODY_SNAPSHOT) {
        seq = m->snapshot->sequence;
        publisher = m->snapshot->publisher;
        if (m->snapshot->routes != NULL) {
            sws_routeset_canonicalize(m->snapshot->routes);
            merged_passes(m->snapshot->routes);
        }
    } else if (m->body_case == SWS__INGRESS_MESSAGE__BODY_HEARTBEAT) {
        seq = m->heartbeat->sequence;
        publisher = m->heartbeat->publisher;
    }
    /* Any message's numbers, judged: the judge has no refusal to check,
     * only the sanitizers' verdict. */
    (void)sws_ingress_judge(&at, m->body_case, seq, publisher);
    sws__ingress_message__free_unpacked(m, NULL);
    return 0;
}
