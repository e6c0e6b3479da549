/*
 * The endpoint of the routes publication (ingressd --publish, scalwsd's
 * ingress.subscribe) and the two ZeroMQ addresses it stands for
 * (docs/adr/0037-ingress-clone-pattern.md): deltas and heartbeats on the
 * first, snapshots on the second.
 *
 *   ipc:///PATH           ipc:///PATH and ipc:///PATH.snapshot
 *   tcp://HOST:PORT       tcp://HOST:PORT and tcp://HOST:PORT+1; HOST a
 *                         loopback address (127.0.0.0/8, [::1]): the
 *                         publication has no authentication
 *
 * Pure functions: the publisher and the subscriber derive the same pair.
 */
#ifndef SWS_SHM_INGRESS_ENDPOINT_H
#define SWS_SHM_INGRESS_ENDPOINT_H

#include <stddef.h>

#define SWS_INGRESS_DEFAULT_ENDPOINT "ipc:///run/scalws/routes.sock"
#define SWS_INGRESS_SNAPSHOT_SUFFIX ".snapshot"
#define SWS_INGRESS_ENDPOINT_MAX 160u /* bytes of each address, with the NUL */

typedef struct sws_ingress_endpoint {
    char updates[SWS_INGRESS_ENDPOINT_MAX];  /* the PUB/SUB address */
    char snapshot[SWS_INGRESS_ENDPOINT_MAX]; /* the ROUTER/DEALER address */
    const char *ipc_path;                    /* in updates: the socket file; NULL for tcp */
} sws_ingress_endpoint_t;

/* Parse text into *ep. 0, or -1 with a sentence in err naming what is
 * accepted. */
int sws_ingress_endpoint_parse(const char *text, sws_ingress_endpoint_t *ep, char *err,
                               size_t errlen);

#endif
