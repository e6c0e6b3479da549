/*
 * The object store of ingressd (ingressd/store.h): Kubernetes JSON, which
 * is outside input, checked and reduced to the structs the translation
 * reads.
 */
#include "ingressd/store.h"

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base64.h"
#include "core/err.h"
#include "core/fmt.h"
#include "core/log.h"
#include "core/tls_pem.h"

#define ERRLEN 256

static const char *const kind_names[SWS_KUBE_KINDS] = {
    [SWS_KUBE_INGRESS] = "Ingress",
    [SWS_KUBE_INGRESSCLASS] = "IngressClass",
    [SWS_KUBE_SERVICE] = "Service",
    [SWS_KUBE_ENDPOINTSLICE] = "EndpointSlice",
    [SWS_KUBE_SECRET] = "Secret",
};

const char *sws_ingress_kind_name(sws_kube_kind_t kind)
{
    return (unsigned)kind < SWS_KUBE_KINDS ? kind_names[kind] : "?";
}

/* ---- reading JSON: each getter takes where (the path of the parent, for
 * messages); an absent member or null gives the default ---- */

static const json_t *member(const json_t *o, const char *key)
{
    const json_t *v = o != NULL ? json_object_get(o, key) : NULL;
    return json_is_null(v) ? NULL : v;
}

static int get_string(const json_t *o, const char *where, const char *key, size_t max,
                      const char *dflt, char **out, char *err, size_t errlen)
{
    const json_t *v = member(o, key);
    const char *s = dflt;
    *out = NULL;
    if (v != NULL) {
        if (!json_is_string(v) || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v))
            return sws_errf(err, errlen, "%s%s: expected a string of at most %zu bytes without NUL",
                            where, key, max);
        s = json_string_value(v);
    }
    if (s == NULL)
        return 0;
    if ((*out = strdup(s)) == NULL)
        return sws_errf(err, errlen, "out of memory");
    return 0;
}

/* A sub-object, or *out NULL when absent. */
static int get_object(const json_t *o, const char *where, const char *key, const json_t **out,
                      char *err, size_t errlen)
{
    *out = member(o, key);
    if (*out != NULL && !json_is_object(*out))
        return sws_errf(err, errlen, "%s%s: expected an object", where, key);
    return 0;
}

/* An array of at most max elements, or *out NULL when absent. */
static int get_array(const json_t *o, const char *where, const char *key, size_t max,
                     const json_t **out, char *err, size_t errlen)
{
    *out = member(o, key);
    if (*out != NULL && (!json_is_array(*out) || json_array_size(*out) > max))
        return sws_errf(err, errlen, "%s%s: expected an array of at most %zu elements", where,
                        key, max);
    return 0;
}

static int get_bool(const json_t *o, const char *where, const char *key, int dflt, uint8_t *out,
                    char *err, size_t errlen)
{
    const json_t *v = member(o, key);
    if (v != NULL && !json_is_boolean(v))
        return sws_errf(err, errlen, "%s%s: expected true or false", where, key);
    *out = (uint8_t)(v != NULL ? json_is_true(v) : dflt);
    return 0;
}

/* A port number 1..65535; 0 when absent. */
static int get_port(const json_t *o, const char *where, const char *key, uint32_t *out,
                    char *err, size_t errlen)
{
    const json_t *v = member(o, key);
    *out = 0;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
        return sws_errf(err, errlen, "%s%s: expected a port number 1..65535", where, key);
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* "2026-12-01T19:57:18Z" (RFC 3339 as the API server writes it). */
static int parse_time(const char *s, int64_t *out)
{
    struct tm tm = { 0 };
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL)
        return -1;
    if (*end == '.')
        for (end++; *end >= '0' && *end <= '9'; end++)
            ;
    if (strcmp(end, "Z") != 0)
        return -1;
    *out = (int64_t)timegm(&tm);
    return 0;
}

/* A host name as the table compares it: lowercase, no trailing dot (the
 * API server validates them lowercase already; this store trusts none of
 * it, and two spellings of one name would be two hosts the RouteSet check
 * refuses together). */
static void host_fold(char *h)
{
    size_t n = strlen(h);
    for (size_t i = 0; i < n; i++)
        if (h[i] >= 'A' && h[i] <= 'Z')
            h[i] = (char)(h[i] - 'A' + 'a');
    if (n > 1 && h[n - 1] == '.')
        h[n - 1] = '\0';
}

/* ---- metadata ---- */

static void obj_free_header(sws_ingress_obj_t *h)
{
    free(h->ns);
    free(h->name);
    free(h->key);
    free(h->version);
}

/* namespace, name, key and resourceVersion into *h. */
static int parse_metadata(const json_t *o, sws_kube_kind_t kind, sws_ingress_obj_t *h,
                          char *err, size_t errlen)
{
    const json_t *md;
    *h = (sws_ingress_obj_t){ .kind = kind };
    if (!json_is_object(o))
        return sws_errf(err, errlen, "not a JSON object");
    if (get_object(o, "", "metadata", &md, err, errlen) < 0)
        return -1;
    if (md == NULL)
        return sws_errf(err, errlen, "metadata: missing");
    if (get_string(md, "metadata.", "name", SWS_INGRESS_NAME_MAX, NULL, &h->name, err, errlen) < 0 ||
        get_string(md, "metadata.", "namespace", SWS_INGRESS_NAME_MAX, "", &h->ns, err, errlen) < 0 ||
        get_string(md, "metadata.", "resourceVersion", SWS_INGRESS_VALUE_MAX, "", &h->version, err,
                   errlen) < 0)
        goto fail;
    if (h->name == NULL || h->name[0] == '\0') {
        sws_errf(err, errlen, "metadata.name: missing");
        goto fail;
    }
    if (kind == SWS_KUBE_INGRESSCLASS)
        h->ns[0] = '\0'; /* cluster-scoped: a namespace means nothing */
    else if (h->ns[0] == '\0') {
        sws_errf(err, errlen, "metadata.namespace: missing");
        goto fail;
    }
    if (asprintf(&h->key, "%s/%s", h->ns, h->name) < 0) {
        h->key = NULL;
        sws_errf(err, errlen, "out of memory");
        goto fail;
    }
    return 0;
fail:
    obj_free_header(h);
    *h = (sws_ingress_obj_t){ .kind = kind };
    return -1;
}

/* metadata.annotations[key] or metadata.labels[key] as a string. */
static int get_meta_string(const json_t *o, const char *map, const char *key, char **out,
                           char *err, size_t errlen)
{
    const json_t *md = member(o, "metadata"), *m;
    char where[32];
    snprintf(where, sizeof(where), "metadata.%s.", map);
    if (get_object(md, "metadata.", map, &m, err, errlen) < 0)
        return -1;
    return get_string(m, where, key, SWS_INGRESS_VALUE_MAX, NULL, out, err, errlen);
}

/* ---- freeing ---- */

static void backend_free(sws_ingress_backend_t *b)
{
    free(b->service);
    free(b->port_name);
}

static void ingress_free(sws_ingress_ingress_t *in)
{
    free(in->class_name);
    free(in->legacy_class);
    backend_free(&in->default_backend);
    for (size_t r = 0; r < in->nrules; r++) {
        sws_ingress_rule_t *rule = &in->rules[r];
        free(rule->host);
        for (size_t p = 0; p < rule->npaths; p++) {
            free(rule->paths[p].path);
            backend_free(&rule->paths[p].backend);
        }
        free(rule->paths);
    }
    free(in->rules);
    for (size_t t = 0; t < in->ntls; t++) {
        for (size_t h = 0; h < in->tls[t].nhosts; h++)
            free(in->tls[t].hosts[h]);
        free(in->tls[t].hosts);
        free(in->tls[t].secret);
    }
    free(in->tls);
}

static void ports_free(sws_ingress_port_t *ports, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ports[i].name);
    free(ports);
}

static void obj_free(sws_ingress_obj_t *h)
{
    if (h == NULL)
        return;
    switch (h->kind) {
    case SWS_KUBE_INGRESS:
        ingress_free((sws_ingress_ingress_t *)h);
        break;
    case SWS_KUBE_INGRESSCLASS:
        free(((sws_ingress_class_t *)h)->controller);
        break;
    case SWS_KUBE_SERVICE: {
        sws_ingress_service_t *s = (sws_ingress_service_t *)h;
        ports_free(s->ports, s->nports);
        break;
    }
    case SWS_KUBE_ENDPOINTSLICE: {
        sws_ingress_slice_t *s = (sws_ingress_slice_t *)h;
        free(s->service);
        ports_free(s->ports, s->nports);
        free(s->endpoints);
        break;
    }
    case SWS_KUBE_SECRET: {
        sws_ingress_secret_t *s = (sws_ingress_secret_t *)h;
        free(s->cert);
        free(s->key);
        free(s->problem);
        break;
    }
    default:
        break;
    }
    obj_free_header(h);
    free(h);
}

/* ---- Ingress ---- */

/* An IngressBackend: {service: {name, port: {number | name}}} or a
 * resource backend (kept as "no service"). */
static int parse_backend(const json_t *o, const char *where, sws_ingress_backend_t *b,
                         char *err, size_t errlen)
{
    const json_t *svc, *port;
    char at[96];
    snprintf(at, sizeof(at), "%sservice.", where);
    if (get_object(o, where, "service", &svc, err, errlen) < 0)
        return -1;
    if (svc == NULL)
        return 0;
    if (get_string(svc, at, "name", SWS_INGRESS_NAME_MAX, NULL, &b->service, err, errlen) < 0 ||
        get_object(svc, at, "port", &port, err, errlen) < 0)
        return -1;
    snprintf(at, sizeof(at), "%sservice.port.", where);
    if (get_port(port, at, "number", &b->port, err, errlen) < 0 ||
        get_string(port, at, "name", SWS_INGRESS_NAME_MAX, NULL, &b->port_name, err, errlen) < 0)
        return -1;
    if (b->service == NULL || b->service[0] == '\0')
        return sws_errf(err, errlen, "%sservice.name: missing", where);
    if (b->port == 0 && (b->port_name == NULL || b->port_name[0] == '\0'))
        return sws_errf(err, errlen, "%sservice.port: expected a number or a name", where);
    return 0;
}

static int parse_path_type(const json_t *o, const char *where, sws_ingress_path_type_t *out,
                           char *err, size_t errlen)
{
    char *t;
    if (get_string(o, where, "pathType", 32, "ImplementationSpecific", &t, err, errlen) < 0)
        return -1;
    int rc = 0;
    if (strcmp(t, "Exact") == 0)
        *out = SWS_INGRESS_PATH_EXACT;
    else if (strcmp(t, "Prefix") == 0)
        *out = SWS_INGRESS_PATH_PREFIX;
    else if (strcmp(t, "ImplementationSpecific") == 0)
        *out = SWS_INGRESS_PATH_IMPLEMENTATION_SPECIFIC;
    else
        rc = sws_errf(err, errlen, "%spathType: expected Exact, Prefix or ImplementationSpecific",
                      where);
    free(t);
    return rc;
}

static int parse_rule(const json_t *o, size_t r, sws_ingress_rule_t *rule, char *err,
                      size_t errlen)
{
    const json_t *http, *paths;
    char where[96];
    snprintf(where, sizeof(where), "spec.rules[%zu].", r);
    if (!json_is_object(o))
        return sws_errf(err, errlen, "spec.rules[%zu]: expected an object", r);
    if (get_string(o, where, "host", SWS_INGRESS_NAME_MAX, "", &rule->host, err, errlen) < 0 ||
        get_object(o, where, "http", &http, err, errlen) < 0)
        return -1;
    host_fold(rule->host);
    snprintf(where, sizeof(where), "spec.rules[%zu].http.", r);
    if (get_array(http, where, "paths", SWS_INGRESS_LIST_MAX, &paths, err, errlen) < 0)
        return -1;
    if (paths == NULL || json_array_size(paths) == 0)
        return 0;
    if ((rule->paths = calloc(json_array_size(paths), sizeof(*rule->paths))) == NULL)
        return sws_errf(err, errlen, "out of memory");
    for (size_t p = 0; p < json_array_size(paths); p++) {
        const json_t *po = json_array_get(paths, p), *be;
        sws_ingress_path_t *path = &rule->paths[rule->npaths++];
        snprintf(where, sizeof(where), "spec.rules[%zu].http.paths[%zu].", r, p);
        if (!json_is_object(po))
            return sws_errf(err, errlen, "spec.rules[%zu].http.paths[%zu]: expected an object", r, p);
        if (get_string(po, where, "path", SWS_INGRESS_PATH_MAX, "/", &path->path, err, errlen) < 0 ||
            parse_path_type(po, where, &path->type, err, errlen) < 0 ||
            get_object(po, where, "backend", &be, err, errlen) < 0)
            return -1;
        snprintf(where, sizeof(where), "spec.rules[%zu].http.paths[%zu].backend.", r, p);
        if (be == NULL)
            return sws_errf(err, errlen, "%s: missing", where);
        if (parse_backend(be, where, &path->backend, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int parse_tls(const json_t *o, size_t t, sws_ingress_tls_t *tls, char *err, size_t errlen)
{
    const json_t *hosts;
    char where[64];
    snprintf(where, sizeof(where), "spec.tls[%zu].", t);
    if (!json_is_object(o))
        return sws_errf(err, errlen, "spec.tls[%zu]: expected an object", t);
    if (get_string(o, where, "secretName", SWS_INGRESS_NAME_MAX, "", &tls->secret, err, errlen) < 0 ||
        get_array(o, where, "hosts", SWS_INGRESS_LIST_MAX, &hosts, err, errlen) < 0)
        return -1;
    if (hosts == NULL || json_array_size(hosts) == 0)
        return 0;
    if ((tls->hosts = calloc(json_array_size(hosts), sizeof(*tls->hosts))) == NULL)
        return sws_errf(err, errlen, "out of memory");
    for (size_t h = 0; h < json_array_size(hosts); h++) {
        const json_t *v = json_array_get(hosts, h);
        if (!json_is_string(v) || json_string_length(v) > SWS_INGRESS_NAME_MAX ||
            strlen(json_string_value(v)) != json_string_length(v))
            return sws_errf(err, errlen, "%shosts[%zu]: expected a host name", where, h);
        if ((tls->hosts[tls->nhosts] = strdup(json_string_value(v))) == NULL)
            return sws_errf(err, errlen, "out of memory");
        host_fold(tls->hosts[tls->nhosts++]);
    }
    return 0;
}

static int parse_ingress(const json_t *o, sws_ingress_ingress_t *in, char *err, size_t errlen)
{
    const json_t *spec, *rules, *tls, *be, *md = member(o, "metadata");
    char *created = NULL;

    in->created = INT64_MAX;
    if (get_string(md, "metadata.", "creationTimestamp", 64, NULL, &created, err, errlen) < 0)
        return -1;
    if (created != NULL && parse_time(created, &in->created) < 0) {
        free(created);
        return sws_errf(err, errlen, "metadata.creationTimestamp: expected an RFC 3339 UTC time");
    }
    free(created);
    if (get_meta_string(o, "annotations", "kubernetes.io/ingress.class", &in->legacy_class, err,
                        errlen) < 0 ||
        get_object(o, "", "spec", &spec, err, errlen) < 0)
        return -1;
    if (spec == NULL)
        return sws_errf(err, errlen, "spec: missing");
    if (get_string(spec, "spec.", "ingressClassName", SWS_INGRESS_NAME_MAX, NULL, &in->class_name,
                   err, errlen) < 0 ||
        get_object(spec, "spec.", "defaultBackend", &be, err, errlen) < 0 ||
        (be != NULL && parse_backend(be, "spec.defaultBackend.", &in->default_backend, err, errlen) < 0) ||
        get_array(spec, "spec.", "rules", SWS_INGRESS_LIST_MAX, &rules, err, errlen) < 0 ||
        get_array(spec, "spec.", "tls", SWS_INGRESS_LIST_MAX, &tls, err, errlen) < 0)
        return -1;
    if (rules != NULL && json_array_size(rules) > 0) {
        if ((in->rules = calloc(json_array_size(rules), sizeof(*in->rules))) == NULL)
            return sws_errf(err, errlen, "out of memory");
        for (size_t r = 0; r < json_array_size(rules); r++)
            if (parse_rule(json_array_get(rules, r), r, &in->rules[in->nrules++], err, errlen) < 0)
                return -1;
    }
    if (tls != NULL && json_array_size(tls) > 0) {
        if ((in->tls = calloc(json_array_size(tls), sizeof(*in->tls))) == NULL)
            return sws_errf(err, errlen, "out of memory");
        for (size_t t = 0; t < json_array_size(tls); t++)
            if (parse_tls(json_array_get(tls, t), t, &in->tls[in->ntls++], err, errlen) < 0)
                return -1;
    }
    return 0;
}

/* ---- IngressClass, Service, EndpointSlice ---- */

static int parse_class(const json_t *o, sws_ingress_class_t *c, char *err, size_t errlen)
{
    const json_t *spec;
    char *dflt = NULL;
    if (get_object(o, "", "spec", &spec, err, errlen) < 0 ||
        get_string(spec, "spec.", "controller", SWS_INGRESS_VALUE_MAX, "", &c->controller, err,
                   errlen) < 0 ||
        get_meta_string(o, "annotations", "ingressclass.kubernetes.io/is-default-class", &dflt,
                        err, errlen) < 0)
        return -1;
    c->is_default = dflt != NULL && strcmp(dflt, "true") == 0;
    free(dflt);
    return 0;
}

/* ports[] of a Service or an EndpointSlice: TCP ones with a number (an
 * EndpointSlice port without one means "all ports": not routable here). */
static int parse_ports(const json_t *ports, const char *where, sws_ingress_port_t **out,
                       size_t *n, char *err, size_t errlen)
{
    char at[64];
    if (ports == NULL || json_array_size(ports) == 0)
        return 0;
    if ((*out = calloc(json_array_size(ports), sizeof(**out))) == NULL)
        return sws_errf(err, errlen, "out of memory");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        const json_t *po = json_array_get(ports, i);
        sws_ingress_port_t *p = &(*out)[*n];
        char *proto;
        snprintf(at, sizeof(at), "%sports[%zu].", where, i);
        if (!json_is_object(po))
            return sws_errf(err, errlen, "%sports[%zu]: expected an object", where, i);
        if (get_string(po, at, "protocol", 16, "TCP", &proto, err, errlen) < 0)
            return -1;
        int tcp = strcmp(proto, "TCP") == 0;
        free(proto);
        if (get_port(po, at, "port", &p->port, err, errlen) < 0 ||
            get_string(po, at, "name", SWS_INGRESS_NAME_MAX, "", &p->name, err, errlen) < 0)
            return -1;
        if (!tcp || p->port == 0) {
            free(p->name);
            *p = (sws_ingress_port_t){ 0 };
            continue;
        }
        (*n)++;
    }
    return 0;
}

static int parse_service(const json_t *o, sws_ingress_service_t *s, char *err, size_t errlen)
{
    const json_t *spec, *ports;
    if (get_object(o, "", "spec", &spec, err, errlen) < 0 ||
        get_array(spec, "spec.", "ports", SWS_INGRESS_LIST_MAX, &ports, err, errlen) < 0)
        return -1;
    return parse_ports(ports, "spec.", &s->ports, &s->nports, err, errlen);
}

static int parse_endpoint(const json_t *eo, size_t i, int family, sws_ingress_slice_endpoint_t *ep,
                          int *keep, char *err, size_t errlen)
{
    const json_t *addrs, *cond;
    unsigned char ip[16];
    char where[64], text[INET6_ADDRSTRLEN];
    snprintf(where, sizeof(where), "endpoints[%zu].", i);
    *keep = 0;
    if (!json_is_object(eo))
        return sws_errf(err, errlen, "endpoints[%zu]: expected an object", i);
    if (get_array(eo, where, "addresses", 100, &addrs, err, errlen) < 0 ||
        get_object(eo, where, "conditions", &cond, err, errlen) < 0)
        return -1;
    snprintf(where, sizeof(where), "endpoints[%zu].conditions.", i);
    if (get_bool(cond, where, "ready", 1, &ep->ready, err, errlen) < 0 ||
        get_bool(cond, where, "terminating", 0, &ep->terminating, err, errlen) < 0)
        return -1;
    if (addrs == NULL || json_array_size(addrs) == 0)
        return 0;
    /* The API: consumers use the first address; the others are the same
     * endpoint. */
    const json_t *a = json_array_get(addrs, 0);
    if (!json_is_string(a) || inet_pton(family, json_string_value(a), ip) != 1)
        return sws_errf(err, errlen, "endpoints[%zu].addresses[0]: expected an %s address", i,
                        family == AF_INET ? "IPv4" : "IPv6");
    inet_ntop(family, ip, text, sizeof(text));
    snprintf(ep->address, sizeof(ep->address), family == AF_INET ? "%s" : "[%s]", text);
    *keep = 1;
    return 0;
}

static int parse_slice(const json_t *o, sws_ingress_slice_t *s, char *err, size_t errlen)
{
    const json_t *ports, *eps;
    char *type;
    int family;
    if (get_meta_string(o, "labels", "kubernetes.io/service-name", &s->service, err, errlen) < 0 ||
        get_string(o, "", "addressType", 16, "", &type, err, errlen) < 0)
        return -1;
    family = strcmp(type, "IPv4") == 0 ? AF_INET : strcmp(type, "IPv6") == 0 ? AF_INET6 : AF_UNSPEC;
    free(type);
    if (s->service == NULL && (s->service = strdup("")) == NULL)
        return sws_errf(err, errlen, "out of memory");
    if (get_array(o, "", "ports", SWS_INGRESS_LIST_MAX, &ports, err, errlen) < 0 ||
        get_array(o, "", "endpoints", SWS_INGRESS_ENDPOINTS_MAX, &eps, err, errlen) < 0 ||
        parse_ports(ports, "", &s->ports, &s->nports, err, errlen) < 0)
        return -1;
    /* FQDN slices name hosts, not addresses: nothing to route to here. */
    if (family == AF_UNSPEC || eps == NULL || json_array_size(eps) == 0)
        return 0;
    if ((s->endpoints = calloc(json_array_size(eps), sizeof(*s->endpoints))) == NULL)
        return sws_errf(err, errlen, "out of memory");
    sws_map_t seen = { 0 }; /* address -> endpoint */
    int rc = 0;
    for (size_t i = 0; i < json_array_size(eps) && rc == 0; i++) {
        sws_ingress_slice_endpoint_t *ep = &s->endpoints[s->nendpoints], *first;
        int keep;
        if ((rc = parse_endpoint(json_array_get(eps, i), i, family, ep, &keep, err, errlen)) < 0 ||
            !keep)
            continue;
        /* An address once per slice, as the translation relies on (one
         * member per address and port): a repeat adds its conditions. */
        size_t len = strlen(ep->address);
        if ((first = sws_map_get(&seen, ep->address, len)) != NULL) {
            first->ready |= ep->ready;
            first->terminating |= ep->terminating;
            continue;
        }
        if (sws_map_put(&seen, ep->address, len, ep) < 0)
            rc = sws_errf(err, errlen, "out of memory");
        s->nendpoints++;
    }
    sws_map_free(&seen);
    return rc;
}

/* ---- Secret ---- */

/* data[key], base64, decoded into *out (NUL-terminated, *len without it);
 * *out NULL when absent. */
static int get_base64(const json_t *data, const char *key, unsigned char **out, size_t *len,
                      char *err, size_t errlen)
{
    const json_t *v = member(data, key);
    *out = NULL;
    *len = 0;
    if (v == NULL)
        return 0;
    size_t n = json_is_string(v) ? json_string_length(v) : 0;
    const char *s = json_string_value(v);
    if (!json_is_string(v) || n % 4 != 0 || n / 4 * 3 > SWS_INGRESS_PEM_MAX ||
        strlen(s) != n)
        return sws_errf(err, errlen, "data.%s: expected base64 of at most %u bytes", key,
                        SWS_INGRESS_PEM_MAX);
    int rc = sws_base64_decode(s, n, SWS_BASE64_STRICT, out, len);
    if (rc == -2)
        return sws_errf(err, errlen, "out of memory");
    if (rc < 0)
        return sws_errf(err, errlen, "data.%s: expected base64", key);
    return 0;
}

/* Whether the pair loads as the RouteSet check loads it; NULL or why not. */
static char *secret_problem(const sws_ingress_secret_t *s)
{
    char why[ERRLEN], *p = NULL;
    int key_type;
    sws_tls_pem_part_t part;
    if (s->cert == NULL || s->key == NULL)
        return strdup(s->cert == NULL ? "it has no data.tls.crt" : "it has no data.tls.key");
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL)
        return strdup("out of memory");
    if (sws_tls_pem_use(ctx, s->cert, s->cert_len, s->key, s->key_len, &key_type, &part, why,
                        sizeof(why)) < 0)
        p = strdup(why);
    SSL_CTX_free(ctx);
    return p;
}

/* 1 when the object is a TLS Secret (and parsed into s), 0 when it is of
 * another type (not kept), -1 when it does not parse. */
static int parse_secret(const json_t *o, sws_ingress_secret_t *s, char *err, size_t errlen)
{
    const json_t *data;
    char *type;
    if (get_string(o, "", "type", SWS_INGRESS_VALUE_MAX, "", &type, err, errlen) < 0)
        return -1;
    int tls = strcmp(type, "kubernetes.io/tls") == 0;
    free(type);
    if (!tls)
        return 0;
    if (get_object(o, "", "data", &data, err, errlen) < 0 ||
        get_base64(data, "tls.crt", &s->cert, &s->cert_len, err, errlen) < 0 ||
        get_base64(data, "tls.key", &s->key, &s->key_len, err, errlen) < 0)
        return -1;
    s->problem = secret_problem(s);
    return 1;
}

/* ---- the events ---- */

static const size_t kind_sizes[SWS_KUBE_KINDS] = {
    [SWS_KUBE_INGRESS] = sizeof(sws_ingress_ingress_t),
    [SWS_KUBE_INGRESSCLASS] = sizeof(sws_ingress_class_t),
    [SWS_KUBE_SERVICE] = sizeof(sws_ingress_service_t),
    [SWS_KUBE_ENDPOINTSLICE] = sizeof(sws_ingress_slice_t),
    [SWS_KUBE_SECRET] = sizeof(sws_ingress_secret_t),
};

/* The object o as a new struct of kind (header already parsed into h and
 * moved in), *out NULL when it is not kept (a Secret of another type);
 * -1 with why. */
static int parse_object(const json_t *o, sws_ingress_obj_t *h, sws_ingress_obj_t **out,
                        char *err, size_t errlen)
{
    int rc = 0;
    sws_ingress_obj_t *obj = calloc(1, kind_sizes[h->kind]);
    *out = NULL;
    if (obj == NULL) {
        obj_free_header(h);
        return sws_errf(err, errlen, "out of memory");
    }
    *obj = *h;
    switch (h->kind) {
    case SWS_KUBE_INGRESS:
        rc = parse_ingress(o, (sws_ingress_ingress_t *)obj, err, errlen);
        break;
    case SWS_KUBE_INGRESSCLASS:
        rc = parse_class(o, (sws_ingress_class_t *)obj, err, errlen);
        break;
    case SWS_KUBE_SERVICE:
        rc = parse_service(o, (sws_ingress_service_t *)obj, err, errlen);
        break;
    case SWS_KUBE_ENDPOINTSLICE:
        rc = parse_slice(o, (sws_ingress_slice_t *)obj, err, errlen);
        break;
    case SWS_KUBE_SECRET:
        rc = parse_secret(o, (sws_ingress_secret_t *)obj, err, errlen);
        if (rc == 0) {
            obj_free(obj);
            return 0;
        }
        break;
    default:
        rc = -1;
        break;
    }
    if (rc < 0) {
        obj_free(obj);
        return -1;
    }
    *out = obj;
    return 0;
}

static void note_change(sws_ingress_store_t *st, sws_kube_kind_t kind)
{
    st->changed |= SWS_INGRESS_CHANGED(kind);
}

/* ---- the index of EndpointSlices by Service, the touched Services ---- */

static void touch(sws_ingress_store_t *st, const char *key, size_t len)
{
    if (sws_map_get(&st->touched, key, len) != NULL)
        return;
    char *k = strndup(key, len);
    if (k == NULL || sws_map_put(&st->touched, k, len, k) < 0) {
        free(k);
        st->changed |= SWS_INGRESS_CHANGED_UNKNOWN;
    }
}

static int index_add(sws_ingress_store_t *st, const sws_ingress_slice_t *s, const char *key,
                     size_t len)
{
    sws_ingress_slices_t *v = sws_map_get(&st->slices, key, len);
    if (v == NULL) {
        if ((v = calloc(1, sizeof(*v) + len + 1)) == NULL)
            return -1;
        memcpy(v->key, key, len + 1);
        if (sws_map_put(&st->slices, v->key, len, v) < 0) {
            free(v);
            return -1;
        }
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 2;
        const sws_ingress_slice_t **p = realloc(v->v, cap * sizeof(*p));
        if (p == NULL)
            return -1; /* an empty list stays: index_del and free take it */
        v->v = p;
        v->cap = cap;
    }
    /* A Service has few slices (100 endpoints each by default). */
    size_t at = v->n;
    while (at > 0 && strcmp(v->v[at - 1]->obj.name, s->obj.name) > 0)
        at--;
    memmove(&v->v[at + 1], &v->v[at], (v->n - at) * sizeof(*v->v));
    v->v[at] = s;
    v->n++;
    return 0;
}

static void index_del(sws_ingress_store_t *st, const sws_ingress_slice_t *s, const char *key,
                      size_t len)
{
    sws_ingress_slices_t *v = sws_map_get(&st->slices, key, len);
    for (size_t i = 0; v != NULL && i < v->n; i++) {
        if (v->v[i] != s)
            continue;
        memmove(&v->v[i], &v->v[i + 1], (v->n - i - 1) * sizeof(*v->v));
        v->n--;
        break;
    }
    if (v != NULL && v->n == 0) {
        sws_map_del(&st->slices, key, len);
        free(v->v);
        free(v);
    }
}

/* An EndpointSlice leaves (old) and one comes in (new), either NULL:
 * the index follows and their Services are touched. Other kinds: nothing.
 * -1 when memory ran out indexing new (the caller drops it). */
static int slice_moved(sws_ingress_store_t *st, const sws_ingress_obj_t *old,
                       const sws_ingress_obj_t *new)
{
    const sws_ingress_slice_t *o = (const void *)old, *n = (const void *)new;
    char key[SWS_INGRESS_KEY_MAX];
    size_t len;
    if ((old != NULL ? old : new)->kind != SWS_KUBE_ENDPOINTSLICE)
        return 0;
    if (o != NULL && o->service[0] != '\0') {
        len = sws_ingress_key(key, o->obj.ns, o->service);
        index_del(st, o, key, len);
        touch(st, key, len);
    }
    if (n != NULL && n->service[0] != '\0') {
        len = sws_ingress_key(key, n->obj.ns, n->service);
        touch(st, key, len);
        if (index_add(st, n, key, len) < 0) {
            index_del(st, n, key, len); /* an empty list it made */
            return -1;
        }
    }
    return 0;
}

static void remove_key(sws_ingress_store_t *st, sws_kube_kind_t kind, const char *key)
{
    sws_ingress_obj_t *old = sws_map_del(&st->objs[kind], key, strlen(key));
    if (old != NULL) {
        slice_moved(st, old, NULL);
        obj_free(old);
        note_change(st, kind);
    }
}

static void upsert(sws_ingress_store_t *st, sws_kube_kind_t kind, const json_t *o)
{
    char err[ERRLEN];
    sws_ingress_obj_t h, *obj, *old;
    sws_map_t *m = &st->objs[kind];

    if (parse_metadata(o, kind, &h, err, sizeof(err)) < 0) {
        st->refused++;
        sws_log_warn("%s refused: %s", kind_names[kind], err);
        return;
    }
    old = sws_map_get(m, h.key, strlen(h.key));
    if (old != NULL && h.version[0] != '\0' && strcmp(old->version, h.version) == 0) {
        old->epoch = st->epoch[kind]; /* the same object again (a relist) */
        obj_free_header(&h);
        return;
    }
    char key[2 * SWS_INGRESS_NAME_MAX + 2];
    snprintf(key, sizeof(key), "%s", h.key);
    if (parse_object(o, &h, &obj, err, sizeof(err)) < 0) {
        st->refused++;
        sws_log_warn("%s %s refused, %s: %s", kind_names[kind], key,
                     old != NULL ? "its last state removed" : "ignored", err);
        remove_key(st, kind, key);
        return;
    }
    if (obj == NULL) { /* not kept */
        remove_key(st, kind, key);
        return;
    }
    obj->epoch = st->epoch[kind];
    if (sws_map_put(m, obj->key, strlen(obj->key), obj) < 0) {
        sws_log_error("%s %s dropped: out of memory", kind_names[kind], key);
        obj_free(obj);
        remove_key(st, kind, key);
        return;
    }
    if (slice_moved(st, old, obj) < 0) {
        sws_log_error("%s %s dropped: out of memory", kind_names[kind], key);
        sws_map_del(m, obj->key, strlen(obj->key));
        obj_free(obj);
    }
    obj_free(old);
    note_change(st, kind);
}

static void delete(sws_ingress_store_t *st, sws_kube_kind_t kind, const json_t *o)
{
    char err[ERRLEN];
    sws_ingress_obj_t h;
    if (parse_metadata(o, kind, &h, err, sizeof(err)) < 0) {
        sws_log_warn("a deleted %s not understood: %s", kind_names[kind], err);
        return;
    }
    remove_key(st, kind, h.key);
    obj_free_header(&h);
}

/* Remove what the LIST that just ended did not name. */
static void sweep(sws_ingress_store_t *st, sws_kube_kind_t kind)
{
    sws_map_t *m = &st->objs[kind];
    const sws_map_slot_t *s;
    size_t it = 0, n = 0;
    sws_ingress_obj_t **gone = malloc((m->n ? m->n : 1) * sizeof(*gone));
    if (gone == NULL) {
        sws_log_error("out of memory: %s objects deleted during the lost watch stay",
                      kind_names[kind]);
        return;
    }
    while ((s = sws_map_next(m, &it)) != NULL)
        if (((sws_ingress_obj_t *)s->val)->epoch != st->epoch[kind])
            gone[n++] = s->val;
    for (size_t i = 0; i < n; i++) {
        sws_map_del(m, gone[i]->key, strlen(gone[i]->key));
        slice_moved(st, gone[i], NULL);
        obj_free(gone[i]);
        note_change(st, kind);
    }
    free(gone);
}

void sws_ingress_store_event(void *ctx, sws_kube_kind_t kind, sws_kube_event_t ev,
                             const json_t *obj)
{
    sws_ingress_store_t *st = ctx;
    if ((unsigned)kind >= SWS_KUBE_KINDS)
        return;
    switch (ev) {
    case SWS_KUBE_LIST_BEGIN:
        st->epoch[kind]++;
        break;
    case SWS_KUBE_UPSERT:
        upsert(st, kind, obj);
        break;
    case SWS_KUBE_DELETE:
        delete(st, kind, obj);
        break;
    case SWS_KUBE_LIST_END:
        sweep(st, kind);
        break;
    }
}

void sws_ingress_store_init(sws_ingress_store_t *st)
{
    *st = (sws_ingress_store_t){ 0 };
}

void sws_ingress_store_free(sws_ingress_store_t *st)
{
    for (int k = 0; k < SWS_KUBE_KINDS; k++) {
        const sws_map_slot_t *s;
        size_t it = 0;
        while ((s = sws_map_next(&st->objs[k], &it)) != NULL)
            obj_free(s->val);
        sws_map_free(&st->objs[k]);
    }
    const sws_map_slot_t *s;
    size_t it = 0;
    while ((s = sws_map_next(&st->slices, &it)) != NULL) {
        free(((sws_ingress_slices_t *)s->val)->v);
        free(s->val);
    }
    sws_map_free(&st->slices);
    sws_ingress_store_clear_touched(st);
    *st = (sws_ingress_store_t){ 0 };
}

void sws_ingress_store_clear_touched(sws_ingress_store_t *st)
{
    const sws_map_slot_t *s;
    size_t it = 0;
    while ((s = sws_map_next(&st->touched, &it)) != NULL)
        free(s->val);
    sws_map_free(&st->touched);
}

unsigned sws_ingress_store_take_changes(sws_ingress_store_t *st)
{
    unsigned c = st->changed;
    st->changed = 0;
    return c;
}

/* Not snprintf: a translation makes a key for every backend. */
size_t sws_ingress_key(char *out, const char *ns, const char *name)
{
    char *o = sws_put(SWS_PUT_LIT(sws_put(out, ns, strlen(ns)), "/"), name, strlen(name));
    *o = '\0';
    return (size_t)(o - out);
}

const void *sws_ingress_store_get(const sws_ingress_store_t *st, sws_kube_kind_t kind,
                                  const char *ns, const char *name)
{
    char key[SWS_INGRESS_KEY_MAX];
    if ((unsigned)kind >= SWS_KUBE_KINDS || strlen(ns) > SWS_INGRESS_NAME_MAX ||
        strlen(name) > SWS_INGRESS_NAME_MAX)
        return NULL;
    return sws_map_get(&st->objs[kind], key, sws_ingress_key(key, ns, name));
}

const void *sws_ingress_store_next(const sws_ingress_store_t *st, sws_kube_kind_t kind,
                                   size_t *it)
{
    const sws_map_slot_t *s = sws_map_next(&st->objs[kind], it);
    return s != NULL ? s->val : NULL;
}
