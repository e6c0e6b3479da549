/*
 * ingressd/store.c: Kubernetes objects (as the API server sends them) in,
 * small checked structs out; LIST mark and sweep; what does not parse is
 * dropped alone; TLS Secrets decoded and checked; the change bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"
#include "support/ingress_objects.h"
#include "support/tls_pem.h"

static const char *const spec_full =
    "{\"ingressClassName\": \"scalws\","
    " \"defaultBackend\": {\"service\": {\"name\": \"fallback\", \"port\": {\"number\": 8080}}},"
    " \"tls\": [{\"hosts\": [\"shop.example.com\", \"*.example.com\"], \"secretName\": \"shop-tls\"}],"
    " \"rules\": [{\"host\": \"shop.example.com\", \"http\": {\"paths\": ["
    "   {\"path\": \"/cart\", \"pathType\": \"Exact\", \"backend\": {\"service\": {\"name\": \"cart\", \"port\": {\"number\": 80}}}},"
    "   {\"path\": \"/api/\", \"pathType\": \"Prefix\", \"backend\": {\"service\": {\"name\": \"api\", \"port\": {\"name\": \"http\"}}}},"
    "   {\"path\": \"/img\", \"pathType\": \"ImplementationSpecific\", \"backend\": {\"resource\": {\"apiGroup\": \"k8s.example.com\", \"kind\": \"Bucket\", \"name\": \"img\"}}}]}},"
    "  {\"http\": {\"paths\": [{\"path\": \"/\", \"pathType\": \"Prefix\", \"backend\": {\"service\": {\"name\": \"web\", \"port\": {\"number\": 80}}}}]}}]}";

static void test_ingress_reduced_to_what_translation_reads(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    KUPSERT(&st, SWS_KUBE_INGRESS,
            k_ingress("shop", "front", "2026-11-30T10:00:00Z",
                      "\"kubernetes.io/ingress.class\": \"other\"", spec_full));
    const sws_ingress_ingress_t *in = sws_ingress_store_get(&st, SWS_KUBE_INGRESS, "shop", "front");
    assert_non_null(in);
    assert_string_equal(in->obj.key, "shop/front");
    assert_string_equal(in->obj.version, "100");
    assert_string_equal(in->class_name, "scalws");
    assert_string_equal(in->legacy_class, "other");
    assert_int_equal(in->created, 1796032800); /* date -d 2026-11-30T10:00:00Z +%s */
    assert_string_equal(in->default_backend.service, "fallback");
    assert_int_equal(in->default_backend.port, 8080);
    assert_int_equal(in->ntls, 1);
    assert_int_equal(in->tls[0].nhosts, 2);
    assert_string_equal(in->tls[0].hosts[1], "*.example.com");
    assert_string_equal(in->tls[0].secret, "shop-tls");
    assert_int_equal(in->nrules, 2);
    assert_string_equal(in->rules[0].host, "shop.example.com");
    assert_string_equal(in->rules[1].host, "");
    assert_int_equal(in->rules[0].npaths, 3);
    const sws_ingress_path_t *p = in->rules[0].paths;
    assert_int_equal(p[0].type, SWS_INGRESS_PATH_EXACT);
    assert_string_equal(p[0].backend.service, "cart");
    assert_int_equal(p[0].backend.port, 80);
    assert_int_equal(p[1].type, SWS_INGRESS_PATH_PREFIX);
    assert_string_equal(p[1].path, "/api/");
    assert_int_equal(p[1].backend.port, 0);
    assert_string_equal(p[1].backend.port_name, "http");
    assert_int_equal(p[2].type, SWS_INGRESS_PATH_IMPLEMENTATION_SPECIFIC);
    assert_null(p[2].backend.service); /* a resource backend */
    assert_int_equal(st.refused, 0);
    sws_ingress_store_free(&st);
}

static void test_list_marks_and_sweeps_and_same_version_is_no_change(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    const char *ports = "[{\"name\": \"http\", \"port\": 80, \"protocol\": \"TCP\", \"targetPort\": 8080}]";
    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_LIST_BEGIN, NULL);
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "a", ports));
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "b", ports));
    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_LIST_END, NULL);
    assert_int_equal(sws_ingress_store_count(&st, SWS_KUBE_SERVICE), 2);
    assert_int_equal(sws_ingress_store_take_changes(&st), SWS_INGRESS_CHANGED(SWS_KUBE_SERVICE));
    assert_int_equal(sws_ingress_store_take_changes(&st), 0);

    /* A relist after 410 Gone: a is the same object, b was deleted
     * meanwhile and c added. */
    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_LIST_BEGIN, NULL);
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "a", ports));
    /* the same resourceVersion changes nothing */
    assert_int_equal(sws_ingress_store_take_changes(&st), 0);
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "c", ports));
    assert_int_equal(sws_ingress_store_take_changes(&st), SWS_INGRESS_CHANGED(SWS_KUBE_SERVICE));
    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_LIST_END, NULL);
    /* the sweep of b */
    assert_int_equal(sws_ingress_store_take_changes(&st), SWS_INGRESS_CHANGED(SWS_KUBE_SERVICE));
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "a"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "b"));
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "c"));

    /* A relist of another kind sweeps nothing here. */
    kevent(&st, SWS_KUBE_INGRESS, SWS_KUBE_LIST_BEGIN, NULL);
    kevent(&st, SWS_KUBE_INGRESS, SWS_KUBE_LIST_END, NULL);
    assert_int_equal(sws_ingress_store_count(&st, SWS_KUBE_SERVICE), 2);
    assert_int_equal(sws_ingress_store_take_changes(&st), 0);

    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_DELETE, k_service("default", "a", ports));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "a"));
    assert_int_equal(sws_ingress_store_take_changes(&st), SWS_INGRESS_CHANGED(SWS_KUBE_SERVICE));
    /* A delete of what is not there changes nothing. */
    kevent(&st, SWS_KUBE_SERVICE, SWS_KUBE_DELETE, k_service("default", "zz", ports));
    assert_int_equal(sws_ingress_store_take_changes(&st), 0);
    sws_ingress_store_free(&st);
}

static void test_object_that_does_not_parse_is_dropped_alone(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    const char *good = "{\"rules\": [{\"host\": \"a.example\"}]}";
    KUPSERT(&st, SWS_KUBE_INGRESS, k_ingress("default", "good", "2026-11-30T10:00:00Z", "", good));
    KUPSERT(&st, SWS_KUBE_INGRESS, k_ingress("default", "later-bad", "2026-11-30T10:00:00Z", "", good));
    assert_int_equal(sws_ingress_store_count(&st, SWS_KUBE_INGRESS), 2);

    static const char *const bad_specs[] = {
        "{\"rules\": {\"host\": \"a\"}}",                           /* not an array */
        "{\"rules\": [{\"host\": 7}]}",                             /* not a string */
        "{\"rules\": [{\"http\": {\"paths\": [{\"path\": \"/\", \"pathType\": \"Regex\", "
        "\"backend\": {\"service\": {\"name\": \"s\", \"port\": {\"number\": 80}}}}]}}]}",
        "{\"rules\": [{\"http\": {\"paths\": [{\"path\": \"/\", \"pathType\": \"Prefix\", "
        "\"backend\": {\"service\": {\"name\": \"s\", \"port\": {\"number\": 70000}}}}]}}]}",
        "{\"rules\": [{\"http\": {\"paths\": [{\"path\": \"/\", \"pathType\": \"Prefix\", "
        "\"backend\": {\"service\": {\"name\": \"s\", \"port\": {}}}}]}}]}",
        "{\"tls\": [{\"hosts\": [\"a\", null]}]}",
        "\"a string\"",
    };
    for (size_t i = 0; i < sizeof(bad_specs) / sizeof(*bad_specs); i++)
        KUPSERT(&st, SWS_KUBE_INGRESS,
                k_ingress("default", "bad", "2026-11-30T10:00:00Z", "", bad_specs[i]));
    KUPSERT(&st, SWS_KUBE_INGRESS, k_ingress("default", "bad", "yesterday", "", good));
    assert_int_equal(st.refused, sizeof(bad_specs) / sizeof(*bad_specs) + 1);
    /* Without a usable name nothing can be named, removed or kept. */
    KUPSERT(&st, SWS_KUBE_INGRESS, kfmt("{\"metadata\": {\"namespace\": \"default\"}}"));
    KUPSERT(&st, SWS_KUBE_INGRESS, kfmt("{\"metadata\": {\"name\": \"no-namespace\"}}"));
    KUPSERT(&st, SWS_KUBE_INGRESS, kfmt("[1, 2]"));
    kevent(&st, SWS_KUBE_INGRESS, SWS_KUBE_DELETE, kfmt("{}"));
    assert_int_equal(st.refused, sizeof(bad_specs) / sizeof(*bad_specs) + 4);
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_INGRESS, "default", "bad"));

    /* An update that does not parse removes the last good state: the API
     * server no longer holds it. */
    KUPSERT(&st, SWS_KUBE_INGRESS,
            kfmt("{\"metadata\": {\"name\": \"later-bad\", \"namespace\": \"default\", "
                 "\"resourceVersion\": \"101\"}, \"spec\": {\"rules\": 3}}"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_INGRESS, "default", "later-bad"));
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_INGRESS, "default", "good"));
    assert_int_equal(sws_ingress_store_count(&st, SWS_KUBE_INGRESS), 1);
    sws_ingress_store_free(&st);
}

static void test_endpoints_conditions_and_addresses(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    char *e1 = k_endpoint("10.0.0.1", 1, 0), *e2 = k_endpoint("10.0.0.2", 0, 1),
         *e3 = k_endpoint("10.0.0.3", 0, 0);
    char *eps = kfmt("[%s, %s, %s, {\"addresses\": [\"10.0.0.4\"]}]", e1, e2, e3);
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE,
            k_slice("default", "web-abc", "5", "web", "IPv4",
                    "[{\"name\": \"http\", \"port\": 8080, \"protocol\": \"TCP\"},"
                    " {\"name\": \"dns\", \"port\": 53, \"protocol\": \"UDP\"}]",
                    eps));
    const sws_ingress_slice_t *s =
        sws_ingress_store_get(&st, SWS_KUBE_ENDPOINTSLICE, "default", "web-abc");
    assert_non_null(s);
    assert_string_equal(s->service, "web");
    assert_int_equal(s->nports, 1); /* UDP is not routed */
    assert_string_equal(s->ports[0].name, "http");
    assert_int_equal(s->ports[0].port, 8080);
    assert_int_equal(s->nendpoints, 4);
    assert_true(s->endpoints[0].ready && !s->endpoints[0].terminating);
    assert_true(!s->endpoints[1].ready && s->endpoints[1].terminating);
    assert_true(!s->endpoints[2].ready && !s->endpoints[2].terminating);
    assert_true(s->endpoints[3].ready); /* no conditions: ready, as the API says */

    /* One address once, whatever its spelling; a repeat's conditions add up. */
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE,
            k_slice("default", "web-v6", "6", "web", "IPv6", "[{\"name\": \"http\", \"port\": 8080}]",
                    "[{\"addresses\": [\"fd00:0::0001\"], \"conditions\": {\"ready\": false, "
                    "\"terminating\": true}}, {\"addresses\": [\"fd00::1\"]}]"));
    s = sws_ingress_store_get(&st, SWS_KUBE_ENDPOINTSLICE, "default", "web-v6");
    assert_int_equal(s->nendpoints, 1);
    assert_string_equal(s->endpoints[0].address, "[fd00::1]");
    assert_true(s->endpoints[0].ready);

    /* An address of the other family refuses the slice. */
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE,
            k_slice("default", "web-bad", "7", "web", "IPv4", "[]", "[{\"addresses\": [\"fd00::1\"]}]"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_ENDPOINTSLICE, "default", "web-bad"));
    assert_int_equal(st.refused, 1);
    assert_int_equal(sws_ingress_store_take_changes(&st), SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE));
    free(e1);
    free(e2);
    free(e3);
    free(eps);
    sws_ingress_store_free(&st);
}

static void test_only_tls_secrets_kept_decoded_and_checked(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    test_pem_t a, b;
    sws_ingress_store_init(&st);
    test_pem_make(&a, 1, "shop.example.com");
    test_pem_make(&b, 1, "other.example.com");
    KUPSERT(&st, SWS_KUBE_SECRET, k_tls_secret("shop", "good", a.cert, a.cert_len, a.key, a.key_len));
    KUPSERT(&st, SWS_KUBE_SECRET, k_tls_secret("shop", "mismatch", a.cert, a.cert_len, b.key, b.key_len));
    KUPSERT(&st, SWS_KUBE_SECRET,
            kfmt("{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": "
                 "\"token\", \"namespace\": \"shop\"}, \"type\": \"Opaque\", \"data\": "
                 "{\"password\": \"c2VjcmV0\"}}"));
    KUPSERT(&st, SWS_KUBE_SECRET,
            kfmt("{\"metadata\": {\"name\": \"notb64\", \"namespace\": \"shop\"}, \"type\": "
                 "\"kubernetes.io/tls\", \"data\": {\"tls.crt\": \"!!!!\", \"tls.key\": \"\"}}"));

    const sws_ingress_secret_t *s = sws_ingress_store_get(&st, SWS_KUBE_SECRET, "shop", "good");
    assert_non_null(s);
    assert_null(s->problem);
    assert_int_equal(s->cert_len, a.cert_len);
    assert_memory_equal(s->cert, a.cert, a.cert_len);
    assert_int_equal(s->key_len, a.key_len);
    assert_memory_equal(s->key, a.key, a.key_len);
    s = sws_ingress_store_get(&st, SWS_KUBE_SECRET, "shop", "mismatch");
    assert_non_null(s);
    assert_non_null(s->problem);
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SECRET, "shop", "token"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SECRET, "shop", "notb64"));
    assert_int_equal(st.refused, 1);

    /* A Secret that stops being a TLS one is gone. */
    KUPSERT(&st, SWS_KUBE_SECRET,
            kfmt("{\"metadata\": {\"name\": \"good\", \"namespace\": \"shop\", "
                 "\"resourceVersion\": \"8\"}, \"type\": \"Opaque\"}"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SECRET, "shop", "good"));
    test_pem_free(&a);
    test_pem_free(&b);
    sws_ingress_store_free(&st);
}

static void test_ingressclass_is_cluster_scoped(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    KUPSERT(&st, SWS_KUBE_INGRESSCLASS, k_class("scalws", SWS_INGRESS_CONTROLLER, 1));
    KUPSERT(&st, SWS_KUBE_INGRESSCLASS, k_class("nginx", "k8s.io/ingress-nginx", 0));
    const sws_ingress_class_t *c = sws_ingress_store_get(&st, SWS_KUBE_INGRESSCLASS, "", "scalws");
    assert_non_null(c);
    assert_string_equal(c->controller, SWS_INGRESS_CONTROLLER);
    assert_true(c->is_default);
    c = sws_ingress_store_get(&st, SWS_KUBE_INGRESSCLASS, "", "nginx");
    assert_false(c->is_default);
    sws_ingress_store_free(&st);
}

#define STORE_SLICE_PORTS "[{\"name\": \"http\", \"port\": 8080}]"

static char *slice_of(const char *name, const char *rv, const char *svc)
{
    char *ep = k_endpoint("10.0.0.1", 1, 0), *eps = kfmt("[%s]", ep);
    char *s = k_slice("default", name, rv, svc, "IPv4", STORE_SLICE_PORTS, eps);
    free(ep);
    free(eps);
    return s;
}

static int touched(const sws_ingress_store_t *st, const char *key)
{
    return sws_map_get(sws_ingress_store_touched(st), key, strlen(key)) != NULL;
}

static void test_slices_by_service_in_name_order_and_the_services_touched(void **state)
{
    (void)state;
    sws_ingress_store_t st;
    sws_ingress_store_init(&st);
    /* Arrival order c, a, b: the index holds a, b, c. */
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-c", "1", "web"));
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-a", "1", "web"));
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-b", "1", "web"));
    const sws_ingress_slices_t *v = sws_ingress_store_slices(&st, "default/web", 11);
    assert_non_null(v);
    assert_int_equal(v->n, 3);
    assert_string_equal(v->v[0]->obj.name, "web-a");
    assert_string_equal(v->v[1]->obj.name, "web-b");
    assert_string_equal(v->v[2]->obj.name, "web-c");
    assert_true(touched(&st, "default/web"));
    sws_ingress_store_clear_touched(&st);
    assert_false(touched(&st, "default/web"));

    /* The same version again (a relist) touches nothing. */
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-a", "1", "web"));
    assert_int_equal(sws_ingress_store_touched(&st)->n, 0);
    /* A slice moving to another Service touches both. */
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-b", "2", "api"));
    assert_true(touched(&st, "default/web"));
    assert_true(touched(&st, "default/api"));
    assert_int_equal(sws_ingress_store_slices(&st, "default/web", 11)->n, 2);
    assert_int_equal(sws_ingress_store_slices(&st, "default/api", 11)->n, 1);
    sws_ingress_store_clear_touched(&st);

    /* Deleted, and swept by a LIST that no longer names them. */
    kevent(&st, SWS_KUBE_ENDPOINTSLICE, SWS_KUBE_DELETE, slice_of("web-b", "3", "api"));
    assert_true(touched(&st, "default/api"));
    assert_null(sws_ingress_store_slices(&st, "default/api", 11));
    kevent(&st, SWS_KUBE_ENDPOINTSLICE, SWS_KUBE_LIST_BEGIN, NULL);
    KUPSERT(&st, SWS_KUBE_ENDPOINTSLICE, slice_of("web-c", "1", "web"));
    kevent(&st, SWS_KUBE_ENDPOINTSLICE, SWS_KUBE_LIST_END, NULL);
    v = sws_ingress_store_slices(&st, "default/web", 11);
    assert_int_equal(v->n, 1);
    assert_string_equal(v->v[0]->obj.name, "web-c");
    assert_true(sws_ingress_store_take_changes(&st) ==
                SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE));
    sws_ingress_store_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingress_reduced_to_what_translation_reads),
        cmocka_unit_test(test_list_marks_and_sweeps_and_same_version_is_no_change),
        cmocka_unit_test(test_object_that_does_not_parse_is_dropped_alone),
        cmocka_unit_test(test_endpoints_conditions_and_addresses),
        cmocka_unit_test(test_only_tls_secrets_kept_decoded_and_checked),
        cmocka_unit_test(test_ingressclass_is_cluster_scoped),
        cmocka_unit_test(test_slices_by_service_in_name_order_and_the_services_touched),
    };
    sws_log_init("test", 2, SWS_LOG_CRIT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
