/*
 * The two ZeroMQ loops both ends of the routes publication need
 * (ingressd/publish.c, supervisor/ingress_sub.c; docs/adr/0037-ingress-
 * clone-pattern.md), written once.
 *
 * Caller: the socket's owner, on its loop's thread (a ZeroMQ socket is not
 * thread safe). Nothing blocks: every receive is ZMQ_DONTWAIT.
 */
#ifndef SWS_SHM_INGRESS_ZMQ_H
#define SWS_SHM_INGRESS_ZMQ_H

/* 1 when sock has a message to read, else 0 (an error counts as none).
 * Its descriptor is edge-like: an owner woken by it reads while this says
 * 1, or the next message never wakes it. */
int sws_ingress_zmq_readable(void *sock);

/* Read and drop the rest of a message whose last frame read had "more"
 * set, at most max frames (a bound on what a peer can make us read). */
void sws_ingress_zmq_skip_rest(void *sock, unsigned max);

#endif
