/*
 * The object store of ingressd: the Kubernetes objects the translation
 * needs (ingressd/translate.h), kept per kind by namespace/name, each
 * reduced to small C structs when it arrives.
 *
 * It consumes the events of ingressd/kube_types.h: sws_ingress_store_event
 * is a sws_kube_event_fn (ctx: the store). An object is outside input: its
 * JSON is checked (types, lengths, ranges) while it is parsed; one that
 * does not parse is logged with its kind, namespace and name and dropped
 * (a stored object of that name is removed: its last good state is no
 * longer what the API server holds), and nothing else changes.
 * LIST_BEGIN .. LIST_END mark and sweep: an object of the kind that the
 * LIST did not upsert is removed at LIST_END.
 *
 * Kept: Ingress (class, annotations that select it, rules, TLS, default
 * backend, creationTimestamp), IngressClass (controller, the default-class
 * annotation), Service (its TCP ports), EndpointSlice
 * (its Service, ports, endpoints with their first address and ready /
 * terminating conditions), Secret of type kubernetes.io/tls only (tls.crt
 * and tls.key base64-decoded, and whether the pair loads, checked once
 * here with the loader the RouteSet check uses: core/tls_pem.h).
 *
 * Changes: every upsert that changes an object (a new resourceVersion) and
 * every removal sets its kind's bit in `changed`;
 * the loop coalesces a burst by translating once when it sees the bits,
 * then clears them (sws_ingress_store_take_changes); changed ==
 * SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE) says only endpoints moved,
 * and `touched` then names every Service they moved in (an EndpointSlice
 * that changes its Service touches both), so a translation can redo only
 * those Services' pools (ingressd/translate.h,
 * docs/adr/0047-ingressd-incremental-endpoint-translation.md).
 *
 * Index: the EndpointSlices of each Service (label
 * kubernetes.io/service-name), in name order, so every translation reads
 * them in one order, whatever order they arrived in.
 *
 * Ownership: the store owns every object and string in it; pointers the
 * getters return stay valid until the next event. ingressd's one thread only.
 */
#ifndef SWS_INGRESSD_STORE_H
#define SWS_INGRESSD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ingressd/kube_types.h"
#include "core/map.h"

/* The limits of what an object may hold (beyond them it is refused): the
 * API server's own validation is stricter for names (DNS-1123); these
 * bound memory and keep a broken or hostile server from costing more. */
#define SWS_INGRESS_NAME_MAX 253u        /* metadata.name, hosts, Secret and Service names */
#define SWS_INGRESS_PATH_MAX 2048u       /* an Ingress path */
#define SWS_INGRESS_VALUE_MAX 1024u      /* annotations we read, resourceVersion, ... */
#define SWS_INGRESS_LIST_MAX 10000u      /* rules, paths, TLS entries, ports per object */
#define SWS_INGRESS_ENDPOINTS_MAX 10000u /* endpoints of one slice (the API: 1000) */
#define SWS_INGRESS_PEM_MAX (1u << 20)   /* tls.crt, tls.key, decoded */

/* The IngressClass controller ingressd serves. */
#define SWS_INGRESS_CONTROLLER "scalws.io/ingress-controller"

#define SWS_INGRESS_CHANGED(kind) (1u << (kind))
/* Memory ran out noting a touched Service: only a full translation is
 * right until the bits are taken again. */
#define SWS_INGRESS_CHANGED_UNKNOWN (1u << SWS_KUBE_KINDS)

/* What every stored object starts with. */
typedef struct sws_ingress_obj {
    sws_kube_kind_t kind;
    char *ns;      /* "" for a cluster-scoped kind (IngressClass) */
    char *name;
    char *key;     /* "NS/NAME": the map key */
    char *version; /* metadata.resourceVersion ("" when absent) */
    uint64_t epoch; /* the LIST it was last seen in (mark and sweep) */
} sws_ingress_obj_t;

typedef enum sws_ingress_path_type {
    SWS_INGRESS_PATH_EXACT,
    SWS_INGRESS_PATH_PREFIX,
    SWS_INGRESS_PATH_IMPLEMENTATION_SPECIFIC, /* served as Prefix */
} sws_ingress_path_type_t;

/* A service backend: port by number (port > 0) or by name. */
typedef struct sws_ingress_backend {
    char *service;    /* NULL: no service backend (a resource backend: unsupported) */
    uint32_t port;    /* 1..65535, or 0 and port_name */
    char *port_name;
} sws_ingress_backend_t;

typedef struct sws_ingress_path {
    char *path;       /* as written ("/" when absent) */
    sws_ingress_path_type_t type;
    sws_ingress_backend_t backend;
} sws_ingress_path_t;

typedef struct sws_ingress_rule {
    char *host;       /* "" when the rule has none; lowercased, no trailing dot */
    size_t npaths;
    sws_ingress_path_t *paths;
} sws_ingress_rule_t;

typedef struct sws_ingress_tls {
    size_t nhosts;
    char **hosts;     /* lowercased, no trailing dot */
    char *secret;     /* "" when absent */
} sws_ingress_tls_t;

typedef struct sws_ingress_ingress {
    sws_ingress_obj_t obj;
    char *class_name;     /* spec.ingressClassName, NULL when absent */
    char *legacy_class;   /* annotation kubernetes.io/ingress.class, NULL when absent */
    int64_t created;      /* creationTimestamp, seconds since the epoch; INT64_MAX: absent */
    sws_ingress_backend_t default_backend; /* .service NULL: none */
    size_t nrules;
    sws_ingress_rule_t *rules;
    size_t ntls;
    sws_ingress_tls_t *tls;
} sws_ingress_ingress_t;

typedef struct sws_ingress_class {
    sws_ingress_obj_t obj;
    char *controller;     /* spec.controller ("" when absent) */
    int is_default;       /* annotation ingressclass.kubernetes.io/is-default-class: "true" */
} sws_ingress_class_t;

typedef struct sws_ingress_port {
    char *name;           /* "" when unnamed */
    uint32_t port;        /* 1..65535 */
} sws_ingress_port_t;

typedef struct sws_ingress_service {
    sws_ingress_obj_t obj;
    size_t nports;
    sws_ingress_port_t *ports; /* spec.ports: name and port (TCP only) */
} sws_ingress_service_t;

typedef struct sws_ingress_slice_endpoint {
    char address[48];     /* addresses[0]: "10.0.0.1" or "[fd00::1]", ready to append ":PORT" */
    uint8_t ready;        /* conditions.ready (absent: true) */
    uint8_t terminating;  /* conditions.terminating (absent: false) */
} sws_ingress_slice_endpoint_t;

typedef struct sws_ingress_slice {
    sws_ingress_obj_t obj;
    char *service;        /* label kubernetes.io/service-name ("" when absent) */
    size_t nports;
    sws_ingress_port_t *ports; /* name as the Service's port name; TCP only */
    size_t nendpoints;
    sws_ingress_slice_endpoint_t *endpoints; /* IPv4 and IPv6 slices (FQDN ones are dropped);
                                          each address once, conditions of repeats merged */
} sws_ingress_slice_t;

/* The EndpointSlices of one Service, by name (byte order). */
typedef struct sws_ingress_slices {
    const sws_ingress_slice_t **v;
    size_t n, cap;
    char key[]; /* "NS/SERVICE" (sws_ingress_key): the index's key */
} sws_ingress_slices_t;

typedef struct sws_ingress_secret {
    sws_ingress_obj_t obj;
    unsigned char *cert, *key; /* PEM, decoded from data."tls.crt" / "tls.key" */
    size_t cert_len, key_len;
    char *problem;        /* NULL when the pair loads, else why not */
} sws_ingress_secret_t;

typedef struct sws_ingress_store {
    sws_map_t objs[SWS_KUBE_KINDS]; /* "NS/NAME" -> sws_ingress_*_t */
    uint64_t epoch[SWS_KUBE_KINDS];         /* of the LIST in progress or last done */
    unsigned changed;                       /* SWS_INGRESS_CHANGED bits since taken */
    sws_map_t slices;               /* "NS/SERVICE" -> sws_ingress_slices_t */
    sws_map_t touched;              /* "NS/SERVICE" -> the key itself (owned):
                                               Services whose slices changed since cleared */
    uint64_t refused;                       /* objects that did not parse, ever */
} sws_ingress_store_t;

/* A zeroed store is empty and valid. */
void sws_ingress_store_init(sws_ingress_store_t *st);
void sws_ingress_store_free(sws_ingress_store_t *st);

/* A sws_kube_event_fn; ctx is the store. */
void sws_ingress_store_event(void *ctx, sws_kube_kind_t kind, sws_kube_event_t ev,
                             const json_t *obj);

/* The changed bits since the last call, cleared. */
unsigned sws_ingress_store_take_changes(sws_ingress_store_t *st);

/* The Services whose EndpointSlices changed since the last clear: walk
 * with sws_map_next, each slot's key is "NS/SERVICE". Complete
 * unless SWS_INGRESS_CHANGED_UNKNOWN is among the bits. Clearing is the
 * caller's, once it has used them (the bits are taken apart: a caller
 * that translates everything clears them unread). */
static inline const sws_map_t *sws_ingress_store_touched(const sws_ingress_store_t *st)
{
    return &st->touched;
}
void sws_ingress_store_clear_touched(sws_ingress_store_t *st);

/* The EndpointSlices of the Service of key "NS/SERVICE" (len bytes), or
 * NULL when it has none. */
static inline const sws_ingress_slices_t *sws_ingress_store_slices(const sws_ingress_store_t *st,
                                                                   const char *key, size_t len)
{
    return sws_map_get(&st->slices, key, len);
}

/* The object of kind at ns/name (ns "" for an IngressClass), or NULL. */
const void *sws_ingress_store_get(const sws_ingress_store_t *st, sws_kube_kind_t kind,
                                  const char *ns, const char *name);

/* "NS/NAME", the key of an object, into out (SWS_INGRESS_KEY_MAX bytes);
 * its length. ns and name at most SWS_INGRESS_NAME_MAX bytes each. */
#define SWS_INGRESS_KEY_MAX (2 * SWS_INGRESS_NAME_MAX + 2)
size_t sws_ingress_key(char *out, const char *ns, const char *name);

/* The objects of kind, in no order: *it starts at 0; NULL after the last. */
const void *sws_ingress_store_next(const sws_ingress_store_t *st, sws_kube_kind_t kind,
                                   size_t *it);

static inline size_t sws_ingress_store_count(const sws_ingress_store_t *st, sws_kube_kind_t kind)
{
    return st->objs[kind].n;
}

/* The kind's name as the API writes it ("Ingress", "EndpointSlice", ...). */
const char *sws_ingress_kind_name(sws_kube_kind_t kind);

#endif
