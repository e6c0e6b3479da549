/*
 * ingressd/translate.c, judged by behaviour: each store is translated, the
 * RouteSet passes the one RouteSet check, the real table is built from it
 * (shm/table.c) and requests are looked up in it. The pathType cases are
 * the examples table of the Ingress documentation
 * (kubernetes.io/docs/concepts/services-networking/ingress/#examples).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"
#include "shm/routeset_delta.h"
#include "support/ingress_objects.h"
#include "support/tls_pem.h"

#define HTTP_PORTS "[{\"name\": \"http\", \"port\": 80, \"protocol\": \"TCP\", \"targetPort\": 8080}]"
#define SLICE_PORTS "[{\"name\": \"http\", \"port\": 8080, \"protocol\": \"TCP\"}]"
#define T0 "2026-11-30T10:00:00Z"
#define T1 "2026-11-30T11:00:00Z"

/* The IngressClass "scalws" of our controller. */
static void our_class(sws_ingress_store_t *st, int is_default)
{
    KUPSERT(st, SWS_KUBE_INGRESSCLASS, k_class("scalws", SWS_INGRESS_CONTROLLER, is_default));
}

/* Service ns/name on port 80 ("http") with one ready endpoint ip:8080. */
static void service(sws_ingress_store_t *st, const char *ns, const char *name, const char *ip)
{
    char *ep = k_endpoint(ip, 1, 0), *eps = kfmt("[%s]", ep), *slice = kfmt("%s-x1", name);
    KUPSERT(st, SWS_KUBE_SERVICE, k_service(ns, name, HTTP_PORTS));
    KUPSERT(st, SWS_KUBE_ENDPOINTSLICE, k_slice(ns, slice, "3", name, "IPv4", SLICE_PORTS, eps));
    free(ep);
    free(eps);
    free(slice);
}

/* A backend "SERVICE" (port 80) or "SERVICE:PORTNAME", as JSON. */
static char *backend_of(const char *svc)
{
    const char *colon = strchr(svc, ':');
    if (colon == NULL)
        return k_backend(svc, 80, NULL);
    char *name = strndup(svc, (size_t)(colon - svc)), *be = k_backend(name, 0, colon + 1);
    free(name);
    return be;
}

/* An Ingress of class scalws: one rule for host with paths "TYPE PATH
 * BACKEND", ';'-separated (TYPE E, P or I; BACKEND as backend_of), and
 * the default backend dflt (NULL: none). */
static char *rule_ingress_default(const char *ns, const char *name, const char *created,
                                  const char *host, const char *paths, const char *dflt)
{
    char *list = kfmt("%s", ""), *copy = strdup(paths), *save = NULL;
    for (char *p = strtok_r(copy, ";", &save); p != NULL; p = strtok_r(NULL, ";", &save)) {
        char type, path[256], svc[64];
        assert_int_equal(sscanf(p, " %c %255s %63s", &type, path, svc), 3);
        const char *t = type == 'E' ? "Exact" : type == 'P' ? "Prefix" : "ImplementationSpecific";
        char *be = backend_of(svc);
        char *next = kfmt("%s%s{\"path\": \"%s\", \"pathType\": \"%s\", \"backend\": %s}", list,
                          list[0] ? ", " : "", path, t, be);
        free(be);
        free(list);
        list = next;
    }
    free(copy);
    char *hostfield = host[0] ? kfmt("\"host\": \"%s\", ", host) : kfmt("%s", "");
    char *be = dflt != NULL ? backend_of(dflt) : NULL;
    char *dfield = be != NULL ? kfmt("\"defaultBackend\": %s, ", be) : kfmt("%s", "");
    char *spec = kfmt("{\"ingressClassName\": \"scalws\", %s\"rules\": [{%s\"http\": "
                      "{\"paths\": [%s]}}]}",
                      dfield, hostfield, list);
    char *in = k_ingress(ns, name, created, "", spec);
    free(list);
    free(hostfield);
    free(be);
    free(dfield);
    free(spec);
    return in;
}

static char *rule_ingress(const char *ns, const char *name, const char *created, const char *host,
                          const char *paths)
{
    return rule_ingress_default(ns, name, created, host, paths, NULL);
}

/* ---- pathType: the documentation's examples ---- */

typedef struct path_case {
    const char *paths;   /* "TYPE PATH SERVICE;..." */
    const char *request;
    const char *want;    /* the service that serves it, NULL: none (404) */
} path_case_t;

static const path_case_t path_cases[] = {
    { "P / s0", "/", "s0" }, /* Prefix / : (all paths) */
    { "P / s0", "/anything/at/all", "s0" },
    { "E /foo s0", "/foo", "s0" },
    { "E /foo s0", "/bar", NULL },
    { "E /foo s0", "/foo/", NULL },
    { "E /foo/ s0", "/foo", NULL },
    { "P /foo s0", "/foo", "s0" },
    { "P /foo s0", "/foo/", "s0" },
    { "P /foo/ s0", "/foo", "s0" },
    { "P /foo/ s0", "/foo/", "s0" },
    { "P /aaa/bb s0", "/aaa/bbb", NULL },
    { "P /aaa/bbb s0", "/aaa/bbb", "s0" },
    { "P /aaa/bbb/ s0", "/aaa/bbb", "s0" },    /* ignores the trailing slash */
    { "P /aaa/bbb s0", "/aaa/bbb/", "s0" },    /* matches the trailing slash */
    { "P /aaa/bbb s0", "/aaa/bbb/ccc", "s0" }, /* matches the subpath */
    { "P /aaa/bbb s0", "/aaa/bbbxyz", NULL },  /* not a string prefix */
    { "P / s0; P /aaa s1", "/aaa/ccc", "s1" },
    { "P / s0; P /aaa s1; P /aaa/bbb s2", "/aaa/bbb", "s2" },
    { "P / s0; P /aaa s1; P /aaa/bbb s2", "/ccc", "s0" },
    { "P /aaa s0", "/ccc", NULL }, /* the default backend's, when there is one */
    { "P /foo s0; E /foo s1", "/foo", "s1" }, /* Exact preferred */
    { "E /foo s1; P /foo s0", "/foo", "s1" },
    { "P /foo s0; E /foo s1", "/foo/", "s0" },
    /* Paths in another form are served in their normal form; some
     * normalize to a prefix of themselves. */
    { "P // s0", "/ccc", "s0" },
    { "P /aaa/. s0", "/aaa/bbb", "s0" },
    { "E /aaa/. s0", "/aaa/", "s0" },
    { "P /aaa//bbb s0", "/aaa/bbb/ccc", "s0" },
    /* ImplementationSpecific is Prefix here. */
    { "I /aaa/bbb s0", "/aaa/bbb/ccc", "s0" },
    { "I /aaa/bbb s0", "/aaa/bbbxyz", NULL },
};

/* Most tests' cluster: a store holding our IngressClass (not the
 * default), and the table a test builds from it; both freed after. */
typedef struct cluster {
    sws_ingress_store_t st;
    ktable_t kt;
} cluster_t;

static int cluster_setup(void **state)
{
    cluster_t *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    sws_ingress_store_init(&fx->st);
    our_class(&fx->st, 0);
    *state = fx;
    return 0;
}

static int cluster_teardown(void **state)
{
    cluster_t *fx = *state;
    ktable_free(&fx->kt);
    sws_ingress_store_free(&fx->st);
    free(fx);
    return 0;
}

static void test_path_types_as_the_documentation_examples(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(path_cases) / sizeof(*path_cases); i++) {
        const path_case_t *c = &path_cases[i];
        sws_ingress_store_t st;
        ktable_t kt;
        char want[64];
        sws_ingress_store_init(&st);
        our_class(&st, 0);
        service(&st, "default", "s0", "10.0.0.1");
        service(&st, "default", "s1", "10.0.0.2");
        service(&st, "default", "s2", "10.0.0.3");
        KUPSERT(&st, SWS_KUBE_INGRESS, rule_ingress("default", "ex", T0, "ex.test", c->paths));
        ktable_build(&kt, &st);
        const char *got = kserved(&kt, "ex.test", c->request);
        if (c->want != NULL)
            snprintf(want, sizeof(want), "default_%s_80", c->want);
        if (c->want == NULL ? got != NULL : got == NULL || strcmp(got, want) != 0)
            fail_msg("paths \"%s\", request %s: served by %s, want %s", c->paths, c->request,
                     got ? got : "nothing", c->want ? want : "nothing");
        ktable_free(&kt);
        sws_ingress_store_free(&st);
    }
}

/* ---- class selection ---- */

static void class_store(sws_ingress_store_t *st)
{
    sws_ingress_store_init(st);
    service(st, "default", "web", "10.0.0.1");
    const char *rule = "{\"host\": \"%s.test\", \"http\": {\"paths\": [{\"path\": \"/\", "
                       "\"pathType\": \"Prefix\", \"backend\": {\"service\": {\"name\": \"web\", "
                       "\"port\": {\"number\": 80}}}}]}}";
    char *ra = kfmt(rule, "a"), *rb = kfmt(rule, "b"), *rc = kfmt(rule, "c"), *rd = kfmt(rule, "d"),
         *re = kfmt(rule, "e");
    char *sa = kfmt("{\"ingressClassName\": \"scalws\", \"rules\": [%s]}", ra);
    char *sb = kfmt("{\"ingressClassName\": \"nginx\", \"rules\": [%s]}", rb);
    char *sc = kfmt("{\"rules\": [%s]}", rc);
    char *sd = kfmt("{\"rules\": [%s]}", rd);
    char *se = kfmt("{\"rules\": [%s]}", re);
    KUPSERT(st, SWS_KUBE_INGRESS, k_ingress("default", "a", T0, "", sa));
    KUPSERT(st, SWS_KUBE_INGRESS, k_ingress("default", "b", T0, "", sb));
    KUPSERT(st, SWS_KUBE_INGRESS,
            k_ingress("default", "c", T0, "\"kubernetes.io/ingress.class\": \"scalws\"", sc));
    KUPSERT(st, SWS_KUBE_INGRESS, k_ingress("default", "d", T0, "", sd));
    KUPSERT(st, SWS_KUBE_INGRESS,
            k_ingress("default", "e", T0, "\"kubernetes.io/ingress.class\": \"nginx\"", se));
    char *all[] = { ra, rb, rc, rd, re, sa, sb, sc, sd, se };
    for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
        free(all[i]);
}

/* Which of hosts a..e are served: "ac" and so on. */
static void served_hosts(const ktable_t *kt, char *out)
{
    for (char h = 'a'; h <= 'e'; h++) {
        char host[16];
        snprintf(host, sizeof(host), "%c.test", h);
        if (kserved(kt, host, "/") != NULL)
            *out++ = h;
    }
    *out = '\0';
}

static void test_class_selection(void **state)
{
    (void)state;
    static const struct {
        const char *controller; /* of IngressClass scalws; NULL: none */
        int is_default;
        const char *want;
    } cases[] = {
        { SWS_INGRESS_CONTROLLER, 0, "ac" }, /* by name, and by the legacy annotation */
        { SWS_INGRESS_CONTROLLER, 1, "acd" }, /* the default class takes the classless */
        { "k8s.io/ingress-nginx", 1, "c" },   /* not our controller: the annotation only */
        { NULL, 0, "c" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        sws_ingress_store_t st;
        ktable_t kt;
        char got[8];
        class_store(&st);
        if (cases[i].controller != NULL)
            KUPSERT(&st, SWS_KUBE_INGRESSCLASS,
                    k_class("scalws", cases[i].controller, cases[i].is_default));
        ktable_build(&kt, &st);
        served_hosts(&kt, got);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: hosts %s served, want %s", i, got, cases[i].want);
        ktable_free(&kt);
        sws_ingress_store_free(&st);
    }
}

/* ---- endpoints and ports ---- */

static const sws_member_t *member(const ktable_t *kt, const sws_pool_t *p, const char *addr)
{
    const sws_member_t *m = sws_table_members(kt->arena, p);
    for (uint32_t i = 0; i < p->nmembers; i++)
        if (strcmp(sws_table_str(kt->arena, m[i].address), addr) == 0)
            return &m[i];
    return NULL;
}

static void test_ready_members_up_terminating_draining_others_out(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    char *e1 = k_endpoint("10.0.0.1", 1, 0), *e2 = k_endpoint("10.0.0.2", 0, 1),
         *e3 = k_endpoint("10.0.0.3", 0, 0), *e4 = k_endpoint("10.0.0.4", 1, 0);
    char *eps1 = kfmt("[%s, %s, %s]", e1, e2, e3);
    /* A second slice of the Service repeats 10.0.0.1 (slices are being
     * replaced) and adds 10.0.0.4. */
    char *eps2 = kfmt("[%s, %s]", e4, e1);
    KUPSERT(st, SWS_KUBE_SERVICE, k_service("default", "web", HTTP_PORTS));
    KUPSERT(st, SWS_KUBE_ENDPOINTSLICE, k_slice("default", "web-1", "3", "web", "IPv4", SLICE_PORTS, eps1));
    KUPSERT(st, SWS_KUBE_ENDPOINTSLICE, k_slice("default", "web-2", "3", "web", "IPv4", SLICE_PORTS, eps2));
    KUPSERT(st, SWS_KUBE_SERVICE, k_service("default", "empty", HTTP_PORTS));
    KUPSERT(st, SWS_KUBE_INGRESS,
            rule_ingress("default", "ex", T0, "ex.test", "P / web; P /empty empty"));
    ktable_build(kt, st);

    const sws_pool_t *p = kpool(kt, "default_web_80");
    assert_non_null(p);
    assert_int_equal(p->nmembers, 3);
    assert_int_equal(member(kt, p, "10.0.0.1:8080")->state, SWS__MEMBER__STATE__UP);
    assert_int_equal(member(kt, p, "10.0.0.2:8080")->state, SWS__MEMBER__STATE__DRAINING);
    assert_null(member(kt, p, "10.0.0.3:8080"));
    assert_int_equal(member(kt, p, "10.0.0.4:8080")->state, SWS__MEMBER__STATE__UP);

    /* No ready endpoint: the route is there, its pool empty (503). */
    assert_string_equal(kserved(kt, "ex.test", "/empty/x"), "default_empty_80");
    assert_int_equal(kpool(kt, "default_empty_80")->nmembers, 0);
    free(e1);
    free(e2);
    free(e3);
    free(e4);
    free(eps1);
    free(eps2);
}

static void test_port_by_name_and_number_through_service_and_slice(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    char *ep = k_endpoint("10.0.0.9", 1, 0), *eps = kfmt("[%s]", ep);
    KUPSERT(st, SWS_KUBE_SERVICE,
            k_service("default", "app",
                      "[{\"name\": \"http\", \"port\": 80, \"targetPort\": 8080},"
                      " {\"name\": \"admin\", \"port\": 9000, \"targetPort\": \"admin-port\"}]"));
    KUPSERT(st, SWS_KUBE_ENDPOINTSLICE,
            k_slice("default", "app-1", "3", "app", "IPv4",
                    "[{\"name\": \"admin\", \"port\": 9090}, {\"name\": \"http\", \"port\": 8080}]",
                    eps));
    char *by_name = k_backend("app", 0, "admin"), *by_number = k_backend("app", 80, NULL);
    char *spec = kfmt("{\"ingressClassName\": \"scalws\", \"rules\": [{\"host\": \"ex.test\", "
                      "\"http\": {\"paths\": [{\"path\": \"/admin\", \"pathType\": \"Prefix\", "
                      "\"backend\": %s}, {\"path\": \"/\", \"pathType\": \"Prefix\", "
                      "\"backend\": %s}, {\"path\": \"/nope\", \"pathType\": \"Prefix\", "
                      "\"backend\": {\"service\": {\"name\": \"app\", \"port\": {\"name\": "
                      "\"metrics\"}}}}]}}]}",
                      by_name, by_number);
    KUPSERT(st, SWS_KUBE_INGRESS, k_ingress("default", "ex", T0, "", spec));
    ktable_build(kt, st);
    assert_string_equal(kserved(kt, "ex.test", "/admin/users"), "default_app_9000");
    assert_non_null(member(kt, kpool(kt, "default_app_9000"), "10.0.0.9:9090"));
    assert_string_equal(kserved(kt, "ex.test", "/x"), "default_app_80");
    assert_non_null(member(kt, kpool(kt, "default_app_80"), "10.0.0.9:8080"));
    /* A port the Service does not have: that path left out, the rest served. */
    assert_string_equal(kserved(kt, "ex.test", "/nope"), "default_app_80");
    assert_int_equal(kt->stats.skipped, 1);
    free(ep);
    free(eps);
    free(by_name);
    free(by_number);
    free(spec);
}

static void test_member_ids_stable_across_translations(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    uint64_t id_before;
    service(st, "default", "web", "10.0.0.1");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "ex", T0, "ex.test", "P / web"));
    ktable_build(kt, st);
    id_before = member(kt, kpool(kt, "default_web_80"), "10.0.0.1:8080")->id;
    ktable_free(kt);

    /* More endpoints, another Ingress first: the member keeps its id. */
    char *e0 = k_endpoint("10.0.0.0", 1, 0), *e1 = k_endpoint("10.0.0.1", 1, 0);
    char *eps = kfmt("[%s, %s]", e0, e1);
    KUPSERT(st, SWS_KUBE_ENDPOINTSLICE, k_slice("default", "web-x1", "4", "web", "IPv4", SLICE_PORTS, eps));
    service(st, "default", "aaa", "10.0.0.1");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "aaa", "2026-01-01T00:00:00Z", "a.test", "P / aaa"));
    ktable_build(kt, st);
    const sws_pool_t *p = kpool(kt, "default_web_80");
    assert_int_equal(p->nmembers, 2);
    assert_true(member(kt, p, "10.0.0.1:8080")->id == id_before);
    /* The same address in another pool is another member. */
    assert_true(member(kt, kpool(kt, "default_aaa_80"), "10.0.0.1:8080")->id != id_before);
    free(e0);
    free(e1);
    free(eps);
}

/* ---- conflicts, broken parts, default backend, TLS ---- */

static void test_conflict_goes_to_the_older_ingress(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        sws_ingress_store_t st;
        ktable_t kt;
        sws_ingress_store_init(&st);
        our_class(&st, 0);
        service(&st, "default", "old", "10.0.0.1");
        service(&st, "team", "new", "10.0.0.2");
        /* The same host and path (a trailing slash does not make a Prefix
         * another path); the newer Ingress keeps its other path. */
        char *older = rule_ingress("default", "older", T0, "ex.test", "P /shop old");
        char *newer = rule_ingress("team", "newer", T1, "ex.test", "P /shop/ new; E /new new");
        KUPSERT(&st, SWS_KUBE_INGRESS, order ? older : newer);
        KUPSERT(&st, SWS_KUBE_INGRESS, order ? newer : older);
        ktable_build(&kt, &st);
        assert_string_equal(kserved(&kt, "ex.test", "/shop"), "default_old_80");
        assert_string_equal(kserved(&kt, "ex.test", "/shop/cart"), "default_old_80");
        assert_string_equal(kserved(&kt, "ex.test", "/new"), "team_new_80");
        assert_int_equal(kt.stats.conflicts, 1);
        ktable_free(&kt);
        sws_ingress_store_free(&st);
    }
}

static void test_same_age_conflict_goes_by_namespace_and_name(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    service(st, "b", "web", "10.0.0.1");
    service(st, "a", "web", "10.0.0.2");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("b", "x", T0, "ex.test", "E /p web"));
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("a", "z", T0, "ex.test", "E /p web"));
    ktable_build(kt, st);
    assert_string_equal(kserved(kt, "ex.test", "/p"), "a_web_80");
}

static void test_broken_ingress_beside_a_good_one(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    service(st, "default", "web", "10.0.0.1");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "good", T1, "good.test", "P / web"));
    /* A Service that does not exist, a path with no normal form, a host
     * the table refuses: each part left out, the good part of the same
     * Ingress served. */
    KUPSERT(st, SWS_KUBE_INGRESS,
            rule_ingress("default", "broken", T0, "good.test",
                         "P /gone missing; P /../up web; E /fine web"));
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "badhost", T0, "bad_host!", "P / web"));
    ktable_build(kt, st);
    assert_string_equal(kserved(kt, "good.test", "/"), "default_web_80");
    assert_string_equal(kserved(kt, "good.test", "/gone"), "default_web_80"); /* the / prefix */
    assert_string_equal(kserved(kt, "good.test", "/fine"), "default_web_80");
    assert_int_equal(kt->rs->n_hosts, 1);
    assert_int_equal(kt->stats.skipped, 3);
    assert_int_equal(kt->stats.ingresses, 3);
}

static void test_default_backend_takes_what_no_rule_takes(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    service(st, "default", "api", "10.0.0.1");
    service(st, "default", "fallback", "10.0.0.2");
    service(st, "default", "root", "10.0.0.3");
    KUPSERT(st, SWS_KUBE_INGRESS,
            k_ingress("default", "ex", T0, "",
                      "{\"ingressClassName\": \"scalws\", \"defaultBackend\": {\"service\": "
                      "{\"name\": \"fallback\", \"port\": {\"number\": 80}}}, \"rules\": "
                      "[{\"host\": \"a.test\", \"http\": {\"paths\": [{\"path\": \"/api\", "
                      "\"pathType\": \"Prefix\", \"backend\": {\"service\": {\"name\": \"api\", "
                      "\"port\": {\"number\": 80}}}}]}}, {\"host\": \"bare.test\"}]}"));
    /* A younger Ingress's rule for "/" of b.test beats any default backend. */
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "b", T1, "a.test", "P / root"));
    ktable_build(kt, st);
    assert_string_equal(kserved(kt, "a.test", "/api/v1"), "default_api_80");
    assert_string_equal(kserved(kt, "a.test", "/other"), "default_root_80");
    assert_string_equal(kserved(kt, "bare.test", "/x"), "default_fallback_80");
    assert_string_equal(kserved(kt, "unknown.test", "/x"), "default_fallback_80");
}

static void test_tls_hosts_get_the_secret_certificate(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    test_pem_t shop, other;
    uint32_t n;
    test_pem_make(&shop, 1, "shop.test");
    test_pem_make(&other, 0, "other.test");
    service(st, "default", "web", "10.0.0.1");
    KUPSERT(st, SWS_KUBE_SECRET, k_tls_secret("default", "shop-tls", shop.cert, shop.cert_len, shop.key, shop.key_len));
    KUPSERT(st, SWS_KUBE_SECRET, k_tls_secret("default", "broken-tls", other.cert, other.cert_len, shop.key, shop.key_len));
    const char *rules = "\"rules\": [{\"host\": \"shop.test\", \"http\": {\"paths\": [{\"path\": "
                        "\"/\", \"pathType\": \"Prefix\", \"backend\": {\"service\": {\"name\": "
                        "\"web\", \"port\": {\"number\": 80}}}}]}}, {\"host\": \"other.test\", "
                        "\"http\": {\"paths\": [{\"path\": \"/\", \"pathType\": \"Prefix\", "
                        "\"backend\": {\"service\": {\"name\": \"web\", \"port\": {\"number\": 80}}}}]}}]";
    char *spec = kfmt("{\"ingressClassName\": \"scalws\", \"tls\": [{\"hosts\": [\"shop.test\"], "
                      "\"secretName\": \"shop-tls\"}, {\"hosts\": [\"other.test\"], \"secretName\": "
                      "\"broken-tls\"}, {\"hosts\": [\"none.test\"], \"secretName\": \"missing\"}], %s}",
                      rules);
    KUPSERT(st, SWS_KUBE_INGRESS, k_ingress("default", "ex", T0, "", spec));
    ktable_build(kt, st);
    uint32_t h = sws_table_tls_host(kt->arena, "shop.test", 9);
    assert_int_not_equal(h, 0);
    const sws_tcert_t *c = sws_table_host_certs(kt->arena, h - 1, &n);
    assert_int_equal(n, 1);
    assert_int_equal(c[0].cert_pem.len, shop.cert_len);
    assert_memory_equal(sws_table_str(kt->arena, c[0].cert_pem), shop.cert, shop.cert_len);
    /* A Secret whose pair does not load, one that is missing: no
     * certificate, the routes still served. */
    h = sws_table_tls_host(kt->arena, "other.test", 10);
    assert_int_not_equal(h, 0);
    sws_table_host_certs(kt->arena, h - 1, &n);
    assert_int_equal(n, 0);
    assert_string_equal(kserved(kt, "other.test", "/"), "default_web_80");
    assert_int_equal(kt->stats.skipped, 2);
    free(spec);
    test_pem_free(&shop);
    test_pem_free(&other);
}

static void test_host_spellings_are_one_host(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    service(st, "default", "web", "10.0.0.1");
    service(st, "default", "api", "10.0.0.2");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "a", T0, "Shop.Test.", "P / web"));
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "b", T1, "shop.test", "P /api api"));
    ktable_build(kt, st); /* the check refuses one name twice */
    assert_int_equal(kt->rs->n_hosts, 1);
    assert_string_equal(kserved(kt, "shop.test", "/api/x"), "default_api_80");
    assert_string_equal(kserved(kt, "SHOP.test", "/"), "default_web_80");
}

/* The parts left out are logged, unless the caller says only endpoints
 * moved (quiet): then the same lines would come again at every move. */
static void test_quiet_translation_logs_nothing(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    sws_ingress_translate_stats_t stats;
    char buf[4096];
    FILE *log = tmpfile();
    assert_non_null(log);
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "ex", T0, "ex.test", "P / missing"));
    sws_log_init("test", fileno(log), SWS_LOG_WARN);
    for (int quiet = 1; quiet >= 0; quiet--) {
        Sws__RouteSet *rs = sws_ingress_translate(st, "scalws", 1, quiet, &stats);
        assert_non_null(rs);
        assert_int_equal(stats.skipped, 1);
        sws_ingress_translate_free(rs);
        size_t n = (size_t)pread(fileno(log), buf, sizeof(buf) - 1, 0);
        buf[n] = '\0';
        if (quiet)
            assert_int_equal(n, 0);
        else
            assert_non_null(strstr(buf, "Ingress default/ex: spec.rules[0].http.paths[0] left out: "
                                        "Service default/missing not found"));
    }
    sws_log_init("test", 2, SWS_LOG_CRIT);
    fclose(log);
}

/* ---- settings ---- */

/* The supervisor's merge keeps the file's Settings, so the RouteSet
 * carries none, and the check and the table take it without. */
static void test_routeset_carries_no_settings(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    ktable_t *kt = &fx->kt;
    service(st, "default", "s0", "10.0.0.1");
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "ex", T0, "ex.test", "P / s0"));
    ktable_build(kt, st);
    assert_null(kt->rs->settings);
    assert_string_equal(kserved(kt, "ex.test", "/"), "default_s0_80");
}

/* ---- endpoint changes, incrementally ---- */

/* The Services of the endpoint test: namespace, name, spec.ports and the
 * ports of their slices. */
typedef struct churn_svc {
    const char *ns, *name, *ports, *slice_ports;
} churn_svc_t;

#define WEB_PORTS "[{\"name\": \"http\", \"port\": 80}, {\"name\": \"admin\", \"port\": 9090}]"
#define WEB_SLICE_PORTS "[{\"name\": \"http\", \"port\": 8080}, {\"name\": \"admin\", \"port\": 9091}]"
#define GRPC_PORTS "[{\"name\": \"grpc\", \"port\": 50051}]"

static const churn_svc_t churn_svcs[] = {
    { "default", "web", WEB_PORTS, WEB_SLICE_PORTS },   /* two ports, one by name */
    { "default", "api", HTTP_PORTS, SLICE_PORTS },      /* two Ingresses share it */
    { "default", "named", GRPC_PORTS, GRPC_PORTS },     /* a port by name only */
    { "default", "gone", HTTP_PORTS, SLICE_PORTS },     /* its slices all vanish */
    { "default", "lonely", HTTP_PORTS, SLICE_PORTS },   /* no Ingress names it */
    { "other", "web", HTTP_PORTS, SLICE_PORTS },        /* the same name elsewhere */
};
#define CHURN_SVCS (sizeof(churn_svcs) / sizeof(churn_svcs[0]))
#define CHURN_SLICES 3  /* per Service */
#define CHURN_STEPS 400

/* The Ingresses of the endpoint test, on the Services above. */
static void churn_ingresses(sws_ingress_store_t *st)
{
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", "ing-a", T0, "a.test",
                                               "P / web; E /admin web:admin; P /api api"));
    KUPSERT(st, SWS_KUBE_INGRESS,
            rule_ingress_default("default", "ing-b", T1, "b.test", "P / api", "gone"));
    KUPSERT(st, SWS_KUBE_INGRESS,
            rule_ingress("default", "ing-c", T0, "c.test", "P / named:grpc; P /g gone"));
    KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("other", "ing-o", T0, "o.test", "P / web"));
}

/* A deterministic generator: the test is the same sequence every run. */
static uint32_t churn_rand(uint64_t *seed)
{
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*seed >> 33);
}

/* Slice i of Service sv, labelled for Service label (sv's own or another
 * of its namespace), with up to 4 endpoints from 6 addresses (so slices of
 * one Service share some), ready, terminating or neither. */
static char *churn_slice(const churn_svc_t *sv, unsigned i, const char *label, unsigned rv,
                         uint64_t *seed)
{
    char name[64], version[16], *eps = kfmt("%s", "");
    unsigned n = churn_rand(seed) % 5;
    for (unsigned e = 0; e < n; e++) {
        char ip[32];
        unsigned r = churn_rand(seed);
        snprintf(ip, sizeof(ip), "10.9.0.%u", 1 + r % 6);
        char *ep = k_endpoint(ip, (r >> 8) % 3 == 0 ? 0 : 1, (r >> 12) % 2);
        char *next = kfmt("%s%s%s", eps, eps[0] ? ", " : "", ep);
        free(ep);
        free(eps);
        eps = next;
    }
    snprintf(name, sizeof(name), "%s-s%u", sv->name, i);
    snprintf(version, sizeof(version), "%u", rv);
    char *list = kfmt("[%s]", eps);
    char *slice = k_slice(sv->ns, name, version, label, "IPv4", sv->slice_ports, list);
    free(eps);
    free(list);
    return slice;
}

/* After the events since the last call: the translation kept, brought up
 * incrementally, against a full translation of the same store. */
static void churn_compare(sws_ingress_translation_t *x, sws_ingress_store_t *st, uint64_t version,
                          unsigned step)
{
    sws_ingress_translate_stats_t stats;
    unsigned bits = sws_ingress_store_take_changes(st);
    if (bits != 0 && bits != SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE))
        fail_msg("step %u: change bits %#x, not EndpointSlices alone", step, bits);
    assert_int_equal(sws_ingress_translation_endpoints(x, st, version), 0);
    sws_ingress_store_clear_touched(st);
    Sws__RouteSet *full = sws_ingress_translate(st, "scalws", version, 1, &stats);
    assert_non_null(full);
    const Sws__RouteSet *inc = sws_ingress_translation_routes(x);
    if (!sws_routeset_same_message(&inc->base, &full->base)) {
        for (size_t i = 0; i < full->n_pools && i < inc->n_pools; i++)
            if (!sws_routeset_same_message(&inc->pools[i]->base, &full->pools[i]->base))
                fail_msg("step %u: pool %s: %zu members incrementally, %zu in full", step,
                         full->pools[i]->name, inc->pools[i]->n_members,
                         full->pools[i]->n_members);
        fail_msg("step %u: the incremental RouteSet is not the full one", step);
    }
    assert_int_equal(sws_ingress_translation_stats(x)->members, stats.members);
    sws_ingress_translate_free(full);
}

static void test_endpoint_changes_incrementally_as_a_full_translation(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    uint64_t seed = 10, version = 1;
    unsigned rv = 10, changed_sets = 0;
    for (size_t i = 0; i < CHURN_SVCS; i++)
        KUPSERT(st, SWS_KUBE_SERVICE,
                k_service(churn_svcs[i].ns, churn_svcs[i].name, churn_svcs[i].ports));
    churn_ingresses(st);
    sws_ingress_store_take_changes(st);
    sws_ingress_translation_t *x = sws_ingress_translation_new(st, "scalws", version, 1);
    assert_non_null(x);
    sws_ingress_store_clear_touched(st);
    assert_int_equal(sws_ingress_translation_stats(x)->pools, 6);

    for (unsigned step = 0; step < CHURN_STEPS; step++) {
        Sws__RouteSet *before = sws_routeset_copy(sws_ingress_translation_routes(x));
        /* A burst of 1 to 3 events, as one coalescing window sees. */
        for (unsigned e = 0, n = 1 + churn_rand(&seed) % 3; e < n; e++) {
            const churn_svc_t *sv = &churn_svcs[churn_rand(&seed) % CHURN_SVCS];
            unsigned i = churn_rand(&seed) % CHURN_SLICES, op = churn_rand(&seed) % 10;
            const char *label = sv->name;
            if (op == 9) /* the slice moves to another Service of its namespace */
                label = strcmp(sv->ns, "default") != 0 ? sv->name
                        : strcmp(sv->name, "api") == 0 ? "gone" : "api";
            char *slice = churn_slice(sv, i, label, ++rv, &seed);
            kevent(st, SWS_KUBE_ENDPOINTSLICE, op >= 6 && op < 9 ? SWS_KUBE_DELETE : SWS_KUBE_UPSERT,
                   slice);
        }
        churn_compare(x, st, ++version, step);
        /* The test means something only if most steps change the set. */
        before->version = version;
        changed_sets += !sws_routeset_same_message(&before->base,
                                                   &sws_ingress_translation_routes(x)->base);
        sws__route_set__free_unpacked(before, NULL);
    }
    /* Every slice of "gone" deleted: its pools stay, without members. */
    for (unsigned i = 0; i < CHURN_SLICES; i++)
        kevent(st, SWS_KUBE_ENDPOINTSLICE, SWS_KUBE_DELETE,
               churn_slice(&churn_svcs[3], i, "gone", ++rv, &seed));
    churn_compare(x, st, ++version, CHURN_STEPS);
    const Sws__RouteSet *rs = sws_ingress_translation_routes(x);
    for (size_t p = 0; p < rs->n_pools; p++)
        if (strcmp(rs->pools[p]->name, "default_gone_80") == 0)
            assert_int_equal(rs->pools[p]->n_members, 0);
    assert_true(changed_sets > CHURN_STEPS / 2);
    sws_ingress_translation_free(x);
}

/* ---- size ---- */

#define LARGE_INGRESSES 10000
#define LARGE_ENDPOINTS_PER_SERVICE 10

static void test_large_store_translates(void **state)
{
    cluster_t *fx = *state;
    sws_ingress_store_t *st = &fx->st;
    sws_ingress_translate_stats_t stats;
    struct timespec t0, t1;
    char *ep[LARGE_ENDPOINTS_PER_SERVICE];
    for (int i = 0; i < LARGE_INGRESSES; i++) {
        char name[32], host[64], ip[32], paths[128];
        snprintf(name, sizeof(name), "app-%d", i);
        snprintf(host, sizeof(host), "app-%d.example.com", i);
        for (int e = 0; e < LARGE_ENDPOINTS_PER_SERVICE; e++) {
            snprintf(ip, sizeof(ip), "10.%d.%d.%d", i / 256, i % 256, e + 1);
            ep[e] = k_endpoint(ip, 1, 0);
        }
        char *eps = kfmt("[%s, %s, %s, %s, %s, %s, %s, %s, %s, %s]", ep[0], ep[1], ep[2], ep[3],
                         ep[4], ep[5], ep[6], ep[7], ep[8], ep[9]);
        char *slice = kfmt("%s-x", name);
        KUPSERT(st, SWS_KUBE_SERVICE, k_service("default", name, HTTP_PORTS));
        KUPSERT(st, SWS_KUBE_ENDPOINTSLICE, k_slice("default", slice, "3", name, "IPv4", SLICE_PORTS, eps));
        snprintf(paths, sizeof(paths), "P / %s; E /health %s", name, name);
        KUPSERT(st, SWS_KUBE_INGRESS, rule_ingress("default", name, T0, host, paths));
        for (int e = 0; e < LARGE_ENDPOINTS_PER_SERVICE; e++)
            free(ep[e]);
        free(eps);
        free(slice);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    Sws__RouteSet *rs = sws_ingress_translate(st, "scalws", 1, 0, &stats);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_non_null(rs);
    assert_int_equal(stats.ingresses, LARGE_INGRESSES);
    assert_int_equal(stats.hosts, LARGE_INGRESSES);
    assert_int_equal(stats.pools, LARGE_INGRESSES);
    assert_int_equal(stats.routes, 2 * LARGE_INGRESSES);
    assert_int_equal(stats.members, LARGE_INGRESSES * LARGE_ENDPOINTS_PER_SERVICE);
    /* Printed, never judged: the machine is shared. */
    printf("translate: %d Ingresses, %zu endpoints: %.1f ms\n", LARGE_INGRESSES, stats.members,
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    sws_ingress_translate_free(rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_types_as_the_documentation_examples),
        cmocka_unit_test(test_class_selection),
        cmocka_unit_test_setup_teardown(test_ready_members_up_terminating_draining_others_out, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_port_by_name_and_number_through_service_and_slice, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_member_ids_stable_across_translations, cluster_setup, cluster_teardown),
        cmocka_unit_test(test_conflict_goes_to_the_older_ingress),
        cmocka_unit_test_setup_teardown(test_same_age_conflict_goes_by_namespace_and_name, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_broken_ingress_beside_a_good_one, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_default_backend_takes_what_no_rule_takes, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_tls_hosts_get_the_secret_certificate, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_host_spellings_are_one_host, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_quiet_translation_logs_nothing, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_routeset_carries_no_settings, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_endpoint_changes_incrementally_as_a_full_translation, cluster_setup, cluster_teardown),
        cmocka_unit_test_setup_teardown(test_large_store_translates, cluster_setup, cluster_teardown),
    };
    sws_log_init("test", 2, SWS_LOG_CRIT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
