/*
 * ingressd's side of the routes publication: the ZeroMQ clone pattern
 * (docs/adr/0037-ingress-clone-pattern.md). Each full RouteSet the
 * translation makes goes in; numbered deltas, heartbeats and, on request,
 * snapshots go out.
 *
 * Sockets: a PUB socket (deltas, heartbeats) and a ROUTER socket (snapshot
 * requests), bound on the two addresses of the endpoint
 * (shm/ingress_endpoint.h). An ipc endpoint's directory is created when
 * missing (0755, its parent must exist) and both socket files are made
 * mode 0600.
 *
 * The loop is the caller's: no thread of ours (libzmq runs its own I/O
 * thread). The caller watches sws_ingress_pub_fd() for EPOLLIN and calls
 * sws_ingress_pub_on_readable() on every wake-up; libzmq's descriptor is
 * edge-like, so that call reads ZMQ_EVENTS and answers every request
 * queued, whatever woke it. It calls sws_ingress_pub_tick() when
 * sws_ingress_pub_deadline_ms() has passed (heartbeats, once a second).
 * Times are the caller's monotonic milliseconds.
 *
 * A subscriber asking for a snapshot before the first RouteSet went in
 * gets no answer (it asks again): an empty snapshot would make scalwsd
 * ready with none of the cluster's routes.
 *
 * Ownership: the publisher keeps its own copy of the last RouteSet
 * (canonical: shm/routeset_delta.h); the caller's stays the caller's.
 * Caller: ingressd's main loop (one publisher per process), and the tool
 * test/tools/routes_pub.c. Not thread-safe.
 */
#ifndef SWS_INGRESSD_PUBLISH_H
#define SWS_INGRESSD_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include "proto/scalws.pb-c.h"

#define SWS_INGRESS_HEARTBEAT_MS 1000u

typedef struct sws_ingress_pub sws_ingress_pub_t;

/* Bind both sockets of endpoint. NULL with a sentence in err. id: the
 * publisher's start id (0: 64 random bits). */
sws_ingress_pub_t *sws_ingress_pub_open(const char *endpoint, uint64_t id, char *err,
                                        size_t errlen);

/* Unbind, remove the ipc socket files, free. NULL is fine. */
void sws_ingress_pub_close(sws_ingress_pub_t *pub);

/* The descriptor to watch (EPOLLIN): the ROUTER socket's ZMQ_FD. */
int sws_ingress_pub_fd(const sws_ingress_pub_t *pub);

/* Answer every snapshot request queued. */
void sws_ingress_pub_on_readable(sws_ingress_pub_t *pub);

/* rs (borrowed) is the whole routing model now: publish what changed
 * since the last one as the next delta; nothing when nothing did. Its
 * hosts and pools only: settings and tls are not published. 1 when a
 * delta went out, 0 when nothing changed, -1 with err (memory; the
 * previous set stays, so the next call sends the difference). */
int sws_ingress_pub_routes(sws_ingress_pub_t *pub, const Sws__RouteSet *rs, char *err,
                           size_t errlen);

/* The same as sws_ingress_pub_routes(pub, rs, ...) when rs differs from
 * the last set given at most in its version and in the members of pools
 * (borrowed; pools of rs, each once, each a pool of the last set): what
 * an endpoint change gives (ingressd/translate.h
 * sws_ingress_translation_endpoints). Only those pools are compared,
 * copied and sent, so the cost is the change's, not the set's. A pool the
 * last set lacks (the contract broken) makes it compare rs whole. Before
 * the first set: sws_ingress_pub_routes. */
int sws_ingress_pub_pools(sws_ingress_pub_t *pub, const Sws__RouteSet *rs, Sws__Pool *const *pools,
                          size_t npools, char *err, size_t errlen);

/* The next heartbeat's time; tick sends it when now_ms has reached it. */
uint64_t sws_ingress_pub_deadline_ms(const sws_ingress_pub_t *pub);
void sws_ingress_pub_tick(sws_ingress_pub_t *pub, uint64_t now_ms);

uint64_t sws_ingress_pub_sequence(const sws_ingress_pub_t *pub);
uint64_t sws_ingress_pub_id(const sws_ingress_pub_t *pub);

/* Tests: the next delta skips a sequence number, as a lost message would
 * look to a subscriber. */
void sws_ingress_pub_skip_sequence(sws_ingress_pub_t *pub);

#endif
