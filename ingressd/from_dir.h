/*
 * Objects from files instead of the API server: every DIR/NAME.json, each one
 * object or a List of them (`kubectl get ingress,service,endpointslice
 * -A -o json > DIR/all.json` writes one), delivered to a store as one LIST
 * per kind (ingressd/kube_types.h events), in file name order. Objects of
 * kinds ingressd does not read are skipped. For `ingressd --from-dir` (a
 * look at what a cluster's objects translate to) and for tests.
 * ingressd's thread only.
 */
#ifndef SWS_INGRESSD_FROM_DIR_H
#define SWS_INGRESSD_FROM_DIR_H

#include <stddef.h>

#include "ingressd/kube_types.h"

/* Deliver the objects of dir to fn(ctx, ...). *nobjects gets how many were
 * delivered. 0, or -1 with one sentence in err (the directory cannot be
 * read, a file is not JSON: nothing is delivered then). */
int sws_ingress_from_dir(const char *dir, sws_kube_event_fn fn, void *ctx, size_t *nobjects,
                         char *err, size_t errlen);

#endif
