/* Kubernetes objects for the ingressd unit tests, in the shapes `kubectl
 * get -o json` prints (the fields ingressd reads and the usual others),
 * written as JSON text and fed to a store as the Kubernetes client would
 * (ingressd/kube_types.h). And the one way the tests judge a RouteSet: build
 * the real table from it and look requests up. Header-only: only the
 * test_ingress_* binaries link ingressd. Include after <cmocka.h>. */
#ifndef SWS_TEST_SUPPORT_INGRESS_OBJECTS_H
#define SWS_TEST_SUPPORT_INGRESS_OBJECTS_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingressd/store.h"
#include "ingressd/translate.h"
#include "shm/routeset_check.h"
#include "shm/table.h"

/* printf into a malloc'ed string (free()). */
static inline char *kfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *kfmt(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    return s;
}

/* An event of kind with the object text (NULL for LIST_BEGIN / LIST_END);
 * text is freed. */
static inline void kevent(sws_ingress_store_t *st, sws_kube_kind_t kind, sws_kube_event_t ev,
                          char *text)
{
    json_t *o = NULL;
    if (text != NULL) {
        json_error_t e;
        o = json_loads(text, 0, &e);
        if (o == NULL)
            fail_msg("fixture is not JSON (%s): %s", e.text, text);
        free(text);
    }
    sws_ingress_store_event(st, kind, ev, o);
    json_decref(o);
}

#define KUPSERT(st, kind, text) kevent((st), (kind), SWS_KUBE_UPSERT, (text))

static inline char *k_meta(const char *ns, const char *name, const char *rv, const char *extra)
{
    return kfmt("\"metadata\": {\"name\": \"%s\", %s%s%s\"resourceVersion\": \"%s\", "
                "\"uid\": \"0b9c6f4e-%s\"%s%s}",
                name, ns[0] ? "\"namespace\": \"" : "", ns, ns[0] ? "\", " : "", rv, name,
                extra[0] ? ", " : "", extra);
}

/* An IngressClass; is_default adds the default-class annotation. */
static inline char *k_class(const char *name, const char *controller, int is_default)
{
    char *md = k_meta("", name, "1",
                      is_default ? "\"annotations\": "
                                   "{\"ingressclass.kubernetes.io/is-default-class\": \"true\"}"
                                 : "");
    char *s = kfmt("{\"apiVersion\": \"networking.k8s.io/v1\", \"kind\": \"IngressClass\", %s, "
                   "\"spec\": {\"controller\": \"%s\"}}",
                   md, controller);
    free(md);
    return s;
}

/* A ClusterIP Service; ports: the JSON array of spec.ports. */
static inline char *k_service(const char *ns, const char *name, const char *ports)
{
    char *md = k_meta(ns, name, "10", "\"creationTimestamp\": \"2026-11-30T10:00:00Z\"");
    char *s = kfmt("{\"apiVersion\": \"v1\", \"kind\": \"Service\", %s, \"spec\": "
                   "{\"type\": \"ClusterIP\", \"clusterIP\": \"10.96.0.10\", "
                   "\"clusterIPs\": [\"10.96.0.10\"], \"ipFamilies\": [\"IPv4\"], "
                   "\"selector\": {\"app\": \"%s\"}, \"ports\": %s, "
                   "\"sessionAffinity\": \"None\"}, \"status\": {\"loadBalancer\": {}}}",
                   md, name, ports);
    free(md);
    return s;
}

/* One endpoint of a slice as the endpoints controller writes it. */
static inline char *k_endpoint(const char *ip, int ready, int terminating)
{
    return kfmt("{\"addresses\": [\"%s\"], \"conditions\": {\"ready\": %s, \"serving\": %s, "
                "\"terminating\": %s}, \"nodeName\": \"node-1\", \"targetRef\": "
                "{\"kind\": \"Pod\", \"name\": \"pod-%s\", \"namespace\": \"default\"}}",
                ip, ready ? "true" : "false", ready || terminating ? "true" : "false",
                terminating ? "true" : "false", ip);
}

/* An EndpointSlice of Service svc; ports and endpoints: JSON arrays. */
static inline char *k_slice(const char *ns, const char *name, const char *rv, const char *svc,
                            const char *family, const char *ports, const char *endpoints)
{
    char *labels = kfmt("\"labels\": {\"endpointslice.kubernetes.io/managed-by\": "
                        "\"endpointslice-controller.k8s.io\", \"kubernetes.io/service-name\": "
                        "\"%s\"}, \"generateName\": \"%s-\"",
                        svc, svc);
    char *md = k_meta(ns, name, rv, labels);
    char *s = kfmt("{\"apiVersion\": \"discovery.k8s.io/v1\", \"kind\": \"EndpointSlice\", %s, "
                   "\"addressType\": \"%s\", \"ports\": %s, \"endpoints\": %s}",
                   md, family, ports, endpoints);
    free(labels);
    free(md);
    return s;
}

/* An Ingress; annotations: "" or JSON members; spec: the JSON object. */
static inline char *k_ingress(const char *ns, const char *name, const char *created,
                              const char *annotations, const char *spec)
{
    char *extra = kfmt("\"creationTimestamp\": \"%s\", \"generation\": 1%s%s%s", created,
                       annotations[0] ? ", \"annotations\": {" : "", annotations,
                       annotations[0] ? "}" : "");
    char *md = k_meta(ns, name, "100", extra);
    char *s = kfmt("{\"apiVersion\": \"networking.k8s.io/v1\", \"kind\": \"Ingress\", %s, "
                   "\"spec\": %s, \"status\": {\"loadBalancer\": {}}}",
                   md, spec);
    free(extra);
    free(md);
    return s;
}

/* A backend JSON object for service svc on port number or name. */
static inline char *k_backend(const char *svc, int port, const char *port_name)
{
    return port_name != NULL
               ? kfmt("{\"service\": {\"name\": \"%s\", \"port\": {\"name\": \"%s\"}}}", svc, port_name)
               : kfmt("{\"service\": {\"name\": \"%s\", \"port\": {\"number\": %d}}}", svc, port);
}

/* A kubernetes.io/tls Secret holding cert and key (PEM text). */
static inline char *k_tls_secret(const char *ns, const char *name, const char *cert,
                                 size_t cert_len, const char *key, size_t key_len)
{
    char *c = malloc(4 * (cert_len / 3 + 1) + 1), *k = malloc(4 * (key_len / 3 + 1) + 1);
    assert_non_null(c);
    assert_non_null(k);
    EVP_EncodeBlock((unsigned char *)c, (const unsigned char *)cert, (int)cert_len);
    EVP_EncodeBlock((unsigned char *)k, (const unsigned char *)key, (int)key_len);
    char *md = k_meta(ns, name, "7", "");
    char *s = kfmt("{\"apiVersion\": \"v1\", \"kind\": \"Secret\", %s, \"type\": "
                   "\"kubernetes.io/tls\", \"data\": {\"tls.crt\": \"%s\", \"tls.key\": \"%s\"}}",
                   md, c, k);
    free(c);
    free(k);
    free(md);
    return s;
}

/* ---- judging a RouteSet by the table built from it ---- */

typedef struct ktable {
    Sws__RouteSet *rs;
    sws_ingress_translate_stats_t stats;
    void *arena;
} ktable_t;

/* Translate st for class "scalws", check the RouteSet and build a table. */
static inline void ktable_build(ktable_t *kt, const sws_ingress_store_t *st)
{
    sws_routeset_refusal_t why;
    char err[512];
    kt->rs = sws_ingress_translate(st, "scalws", 1, 0, &kt->stats);
    assert_non_null(kt->rs);
    if (sws_routeset_check(kt->rs, &why) != 0)
        fail_msg("RouteSet refused: %s: %s", why.path, why.msg);
    size_t size = sws_table_size(kt->rs);
    kt->arena = aligned_alloc(8, (size + 7) & ~(size_t)7);
    assert_non_null(kt->arena);
    if (sws_table_build(kt->arena, size, 1, kt->rs, err, sizeof(err)) != 0)
        fail_msg("table build: %s", err);
}

static inline void ktable_free(ktable_t *kt)
{
    sws_ingress_translate_free(kt->rs);
    free(kt->arena);
    *kt = (ktable_t){ 0 };
}

/* The pool a request for host and path goes to, or NULL (404). */
static inline const char *kserved(const ktable_t *kt, const char *host, const char *path)
{
    const sws_table_t *t = kt->arena;
    const sws_route_t *r = sws_table_lookup(t, host, strlen(host), path, strlen(path));
    if (r == NULL)
        return NULL;
    assert_int_equal(r->action, SWS_ACTION_PROXY);
    return sws_table_str(t, sws_table_pool(t, r->pool)->name);
}

/* The pool of that name in the table, or NULL. */
static inline const sws_pool_t *kpool(const ktable_t *kt, const char *name)
{
    const sws_table_t *t = kt->arena;
    for (uint32_t i = 0; i < sws_table_pool_count(t); i++)
        if (strcmp(sws_table_str(t, sws_table_pool(t, i)->name), name) == 0)
            return sws_table_pool(t, i);
    return NULL;
}

#endif
