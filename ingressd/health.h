/*
 * ingressd's health endpoint (--health HOST:PORT): GET /healthz for the
 * kubelet's liveness probe and GET /readyz for its readiness probe, one
 * request per connection, answered from what the daemon says of itself
 * (a callback), then closed.
 *
 * Any address may be given, not only loopback as for scalwsd's admin API:
 * a kubelet probes the pod's IP. What it answers is harmless to show (the
 * state of the watches, the sequence published), and it takes nothing.
 *
 * The listener and connections are the admin API's (supervisor/admin.h,
 * sws_admin_serve): one bounded request per connection, at most
 * SWS_ADMIN_MAX_CONNS open, each closed SWS_ADMIN_TIMEOUT_MS after its
 * accept.
 * Ownership: the health server owns its listener and connections; loop
 * is borrowed (it outlives the server). ingressd's thread only.
 */
#ifndef SWS_INGRESSD_HEALTH_H
#define SWS_INGRESSD_HEALTH_H

#include <stddef.h>

#include "core/json.h"
#include "core/loop.h"

typedef struct sws_ingress_health sws_ingress_health_t;

/* Fills the body of GET /healthz or /readyz (a JSON object, written into
 * out) and returns the status: 200, or 503 when not ready (readyz). */
typedef unsigned (*sws_ingress_health_fn)(void *ctx, int readyz, sws_json_out_t *out);

/* Listen on address ("HOST:PORT"). NULL with err. */
sws_ingress_health_t *sws_ingress_health_start(sws_loop_t *loop, const char *address,
                                               sws_ingress_health_fn fn, void *ctx, char *err,
                                               size_t errlen);

/* Close the listener and every connection. NULL is fine. */
void sws_ingress_health_stop(sws_ingress_health_t *h);

#endif
