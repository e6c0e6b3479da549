/*
 * The translation of ingressd: the objects of the store (ingressd/store.h)
 * into one full RouteSet (proto/scalws.proto), what scalwsd serves for the
 * Ingresses of our class. docs/kubernetes.md says what is supported; the
 * rules, each a pure consequence of the store:
 *
 *   class    an Ingress is ours when its annotation kubernetes.io/ingress.class
 *            names our class; else when spec.ingressClassName names it and
 *            the IngressClass of that name has controller
 *            SWS_INGRESS_CONTROLLER; else, with neither, when that
 *            IngressClass is annotated as the default class.
 *   order    Ingresses by creationTimestamp, then namespace/name: the older
 *            one wins a conflict (the same host, path and pathType; a
 *            Prefix path with and without its trailing slash is one path),
 *            the later one's path is left out and logged.
 *   hosts    one Host per rule host (exact or "*.suffix"); rules without a
 *            host go to the catch-all host "*".
 *   paths    Exact: an exact route. Prefix and ImplementationSpecific,
 *            element-wise as the API defines Prefix: "/" is a prefix route
 *            "/"; "/p" (or "/p/") is a prefix route "/p/" and an exact route
 *            "/p" (unless an Exact "/p" of the host takes it: Exact wins),
 *            so "/p" matches "/p", "/p/" and "/p/x", never "/px". The
 *            table's longest-prefix-first order is the API's precedence.
 *            Paths are put in the normal form requests are matched in
 *            (core/path.h); one that has none is left out and logged.
 *   default  spec.defaultBackend: the prefix "/" of the catch-all host and
 *            of the Ingress's own hosts, where no rule (of any Ingress)
 *            has it.
 *   pools    a service backend is the pool "NS_SERVICE_PORT" (PORT the
 *            Service's port number, also when the Ingress names the port;
 *            longer than a pool name may be: cut, with a hash), members the
 *            endpoints of the Service's EndpointSlices on the port of that
 *            name: ready ones UP, terminating (not ready) ones DRAINING so
 *            requests in flight finish; member ids left 0, so the table
 *            derives them from the pool and the address (ADR 0013), the
 *            same in every translation. No ready endpoint: a pool without
 *            members (503).
 *   tls      spec.tls hosts get the certificate of the Secret (its own
 *            namespace, type kubernetes.io/tls, a pair that loads) when the
 *            host has rules; the oldest Ingress's Secret wins.
 *   broken   a backend without its Service or port, a Secret missing or
 *            that does not load, a host name the table refuses: that part
 *            is left out with a log line; the rest is served.
 *
 * Linear in the size of the store (hash maps throughout, one sort of the
 * Ingresses). Logs through core/log.h a warning per part left out (see
 * quiet below). ingressd's thread only.
 *
 * After a change of EndpointSlices only, nothing but the members of the
 * pools of the Services they belong to can differ: a translation kept
 * (sws_ingress_translation_t) redoes those pools' members and reuses the
 * rest, and the result is byte for byte what a full translation of the
 * store gives (docs/adr/0047-ingressd-incremental-endpoint-translation.md).
 */
#ifndef SWS_INGRESSD_TRANSLATE_H
#define SWS_INGRESSD_TRANSLATE_H

#include <stddef.h>
#include <stdint.h>

#include "ingressd/store.h"
#include "proto/scalws.pb-c.h"

typedef struct sws_ingress_translate_stats {
    size_t ingresses; /* of our class */
    size_t hosts, routes, pools, members;
    size_t skipped;   /* parts left out (each logged), conflicts included */
    size_t conflicts;
} sws_ingress_translate_stats_t;

/* The RouteSet for the Ingresses of class_name in st, with version set,
 * no Settings (the supervisor's merge keeps the file's, so ours would be
 * dropped there), and *stats filled (may be NULL). NULL only when memory ran out (logged). The caller owns the
 * result and frees it with sws_ingress_translate_free; it holds no
 * pointer into the store.
 * quiet: do not log the parts left out. No part is left out because of
 * an EndpointSlice, so after a change of EndpointSlices only (the store's
 * change bits, ingressd/store.h) the loop passes 1: the same lines again
 * every time endpoints move would flood the log. */
Sws__RouteSet *sws_ingress_translate(const sws_ingress_store_t *st, const char *class_name,
                                     uint64_t version, int quiet,
                                     sws_ingress_translate_stats_t *stats);

/* Free a RouteSet sws_ingress_translate returned (NULL is fine). */
void sws_ingress_translate_free(Sws__RouteSet *rs);

/* A full translation kept for the changes that follow: its RouteSet and,
 * per Service, the pools made from it. Owns its RouteSet; holds no
 * pointer into the store. */
typedef struct sws_ingress_translation sws_ingress_translation_t;

/* sws_ingress_translate's result, kept. NULL only when memory ran out
 * (logged). */
sws_ingress_translation_t *sws_ingress_translation_new(const sws_ingress_store_t *st,
                                                       const char *class_name, uint64_t version,
                                                       int quiet);

/* Bring x up to st after EndpointSlices alone changed: since x was made
 * or last brought up, the store's change bits were
 * SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE) at most and
 * sws_ingress_store_touched(st) names their Services (ingressd/store.h).
 * The members of those Services' pools are made anew, the version set;
 * the rest is x's. Then x's RouteSet is what sws_ingress_translate(st,
 * class_name, version, ...) gives, byte for byte. Logs nothing (no part
 * is left out because of an EndpointSlice). 0, or -1 when memory ran out:
 * x is then half brought up, only fit for sws_ingress_translation_free. */
int sws_ingress_translation_endpoints(sws_ingress_translation_t *x, const sws_ingress_store_t *st,
                                      uint64_t version);

/* The RouteSet (x's, valid until x changes or is freed). */
const Sws__RouteSet *sws_ingress_translation_routes(const sws_ingress_translation_t *x);

/* Its figures, as sws_ingress_translate gives them. */
const sws_ingress_translate_stats_t *sws_ingress_translation_stats(const sws_ingress_translation_t *x);

/* The pools (in x's RouteSet) the last sws_ingress_translation_endpoints
 * made anew, each once, and their count in *n: what a publisher needs to
 * compare (ingressd/publish.h sws_ingress_pub_pools). None after _new. */
Sws__Pool *const *sws_ingress_translation_changed(const sws_ingress_translation_t *x, size_t *n);

/* NULL is fine. */
void sws_ingress_translation_free(sws_ingress_translation_t *x);

/* The pool name of Service ns/service port port (the rule above), into
 * out (at least SWS_ROUTESET_POOL_NAME_MAX + 1 bytes). */
void sws_ingress_pool_name(const char *ns, const char *service, uint32_t port, char *out,
                           size_t outsize);

#endif
