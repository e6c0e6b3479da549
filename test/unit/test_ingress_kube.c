/* ingressd/kube.c, its policy without a network: the backoff schedule and
 * its jitter, the kind names, the LIST and WATCH request paths. The
 * client's requests themselves are tested against an HTTPS stand-in in
 * test/integration/test_kube_client.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ingressd/kube.h"

static void test_backoff_doubles_from_250ms_to_30s(void **state)
{
    (void)state;
    /* rnd % 401 == 200: the factor is exactly 1. */
    const uint32_t mid = 200;
    const unsigned want[] = { 0, 250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000 };

    for (unsigned f = 0; f < sizeof(want) / sizeof(want[0]); f++)
        assert_int_equal(sws_kube_backoff_ms(f, mid), want[f]);
    assert_int_equal(sws_kube_backoff_ms(1000, mid), 30000);
    assert_int_equal(sws_kube_backoff_ms(~0u, mid), 30000);
}

/* Every draw stays within +-20%, both ends are reached, and draws differ. */
static void test_backoff_jitter_within_20_percent(void **state)
{
    (void)state;
    unsigned lo = ~0u, hi = 0;

    for (uint32_t r = 0; r < 5000; r++) {
        unsigned ms = sws_kube_backoff_ms(3, r * 2654435761u);
        lo = ms < lo ? ms : lo;
        hi = ms > hi ? ms : hi;
    }
    assert_int_equal(sws_kube_backoff_ms(3, 0), 800);
    assert_int_equal(sws_kube_backoff_ms(3, 400), 1200);
    assert_true(lo >= 800 && hi <= 1200);
    assert_true(hi - lo > 300);
    assert_int_equal(sws_kube_backoff_ms(20, 400), 36000);
}

static void test_kind_names(void **state)
{
    (void)state;
    unsigned mask;
    char err[256];

    assert_string_equal(sws_kube_kind_name(SWS_KUBE_ENDPOINTSLICE), "endpointslices");
    assert_int_equal(sws_kube_kinds_parse("ingresses,secrets", &mask, err, sizeof(err)), 0);
    assert_int_equal(mask, (1u << SWS_KUBE_INGRESS) | (1u << SWS_KUBE_SECRET));
    assert_int_equal(sws_kube_kinds_parse("services,pods", &mask, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown kind \"pods\""));
    assert_int_equal(sws_kube_kinds_parse("", &mask, err, sizeof(err)), -1);
}

static void test_list_paths(void **state)
{
    (void)state;
    char p[512];

    assert_int_equal(sws_kube_list_path(p, sizeof(p), SWS_KUBE_INGRESS, NULL, 500, NULL), 0);
    assert_string_equal(p, "/apis/networking.k8s.io/v1/ingresses?limit=500");
    assert_int_equal(sws_kube_list_path(p, sizeof(p), SWS_KUBE_SERVICE, "web", 2, "eyJ2Ijo+/="), 0);
    assert_string_equal(p, "/api/v1/namespaces/web/services?limit=2&continue=eyJ2Ijo%2B%2F%3D");
    /* IngressClass is cluster-scoped: the namespace does not apply. */
    assert_int_equal(sws_kube_list_path(p, sizeof(p), SWS_KUBE_INGRESSCLASS, "web", 500, NULL), 0);
    assert_string_equal(p, "/apis/networking.k8s.io/v1/ingressclasses?limit=500");
    assert_int_equal(sws_kube_list_path(p, sizeof(p), SWS_KUBE_SECRET, "", 500, NULL), 0);
    assert_string_equal(p, "/api/v1/secrets?fieldSelector=type%3Dkubernetes.io%2Ftls&limit=500");
    assert_int_equal(sws_kube_list_path(p, 40, SWS_KUBE_SECRET, "", 500, NULL), -1);
}

static void test_watch_paths(void **state)
{
    (void)state;
    char p[512];

    assert_int_equal(sws_kube_watch_path(p, sizeof(p), SWS_KUBE_ENDPOINTSLICE, "web", "1234", 300), 0);
    assert_string_equal(p, "/apis/discovery.k8s.io/v1/namespaces/web/endpointslices?watch=1"
                           "&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=1234");
    assert_int_equal(sws_kube_watch_path(p, sizeof(p), SWS_KUBE_SECRET, NULL, "7", 60), 0);
    assert_string_equal(p, "/api/v1/secrets?fieldSelector=type%3Dkubernetes.io%2Ftls&watch=1"
                           "&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_doubles_from_250ms_to_30s),
        cmocka_unit_test(test_backoff_jitter_within_20_percent),
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_list_paths),
        cmocka_unit_test(test_watch_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
