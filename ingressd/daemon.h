/*
 * ingressd watching a cluster: the Kubernetes client (ingressd/kube.h)
 * feeds the object store (ingressd/store.h); once every kind has been
 * listed, each change is translated (ingressd/translate.h) and published
 * to scalwsd (ingressd/publish.h); --health serves /healthz and /readyz
 * (ingressd/health.h). One thread, one sws loop.
 *
 * Coalescing: the first change after a publication arms a timer of
 * SWS_INGRESSD_COALESCE_MS; when it fires, everything that changed
 * meanwhile goes out as one translation and one delta. So a burst of API
 * events costs one translation per window, and a single endpoint change
 * reaches the publisher at most the window (plus the translation) after
 * the event arrived: the bound is 50 ms.
 *
 * Nothing is published before the first LIST of every kind has completed:
 * a partial store (Ingresses without their endpoints yet) would publish
 * empty pools, and scalwsd would answer 503 where it served before. An
 * empty cluster is published too (scalwsd becomes ready with no route of
 * the cluster).
 *
 * SIGTERM, SIGINT and SIGQUIT stop it: the publisher's sockets are closed
 * (its ipc files removed); scalwsd keeps serving what it has.
 * Caller: ingressd's main, once.
 */
#ifndef SWS_INGRESSD_DAEMON_H
#define SWS_INGRESSD_DAEMON_H

#include "ingressd/options.h"

#define SWS_INGRESSD_COALESCE_MS 10u

/* Run until a stop signal: 0; 1 when the start failed (logged). */
int sws_ingressd_run(const sws_ingressd_options_t *o);

#endif
