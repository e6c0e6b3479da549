/*
 * The seam between ingressd's Kubernetes client (kube.c: LIST and WATCH)
 * and its object store (store.c): the kinds ingressd reads and the events
 * the client delivers for them.
 *
 * The client calls one sws_kube_event_fn per event, in the order the API
 * server sent them, from ingressd's single thread:
 *   SWS_KUBE_LIST_BEGIN   a full LIST of KIND starts (first start, or a
 *                         relist after 410 Gone or a lost watch); obj NULL
 *   SWS_KUBE_UPSERT       one object of KIND, from the LIST or from a watch
 *                         ADDED / MODIFIED event; obj is the whole object
 *   SWS_KUBE_DELETE       a watch DELETED event; obj is the last state
 *   SWS_KUBE_LIST_END     the LIST of KIND is complete: every object of
 *                         KIND not upserted since LIST_BEGIN is gone; obj NULL
 * BOOKMARK events only move the client's resourceVersion: never delivered.
 * obj is borrowed for the call (jansson json_t; the callee takes a
 * reference with json_incref if it keeps it).
 */
#ifndef SWS_INGRESSD_KUBE_TYPES_H
#define SWS_INGRESSD_KUBE_TYPES_H

#include <jansson.h>

typedef enum {
    SWS_KUBE_INGRESS,       /* networking.k8s.io/v1 ingresses */
    SWS_KUBE_INGRESSCLASS,  /* networking.k8s.io/v1 ingressclasses (cluster-scoped) */
    SWS_KUBE_SERVICE,       /* v1 services */
    SWS_KUBE_ENDPOINTSLICE, /* discovery.k8s.io/v1 endpointslices */
    SWS_KUBE_SECRET,        /* v1 secrets (only type kubernetes.io/tls is kept) */
    SWS_KUBE_KINDS
} sws_kube_kind_t;

typedef enum {
    SWS_KUBE_LIST_BEGIN,
    SWS_KUBE_UPSERT,
    SWS_KUBE_DELETE,
    SWS_KUBE_LIST_END
} sws_kube_event_t;

typedef void (*sws_kube_event_fn)(void *ctx, sws_kube_kind_t kind, sws_kube_event_t ev,
                                  const json_t *obj);

#endif
