/*
 * RouteSet deltas: what changed between two RouteSets, keyed so that an
 * endpoint change in a set of 10,000 hosts is one pool on the wire and a
 * merge of two sorted lists to apply (docs/adr/0037-ingress-clone-pattern.md).
 *
 * Keys: a host is known by its first name, a pool by its name (the
 * RouteSet checker makes both unique). A canonical RouteSet has its hosts
 * sorted by that key and its pools by name (byte order); the publisher
 * (ingressd/publish.h) keeps its sets canonical and so does apply, so that
 * apply(make(A, B), A) is B, byte for byte when packed, except version,
 * settings and tls: a delta carries none of them (ingressd bumps the
 * version per translation and publishes no settings or tls: the
 * supervisor has its file's), and apply keeps A's.
 *
 * Ownership: make borrows: the delta's arrays are its own (released with
 * sws_routeset_delta_release), the entries they point at are next's.
 * apply is a transaction: sws_routeset_delta_apply builds the candidate
 * without touching base or the delta; commit moves the delta's entries into
 * the candidate and frees what base lost; abort frees only the candidate's
 * arrays. A RouteSet handed to apply or commit is "unpacked-shaped": every
 * array and entry its own malloc block, as sws__route_set__unpack makes
 * them, so sws__route_set__free_unpacked frees it.
 *
 * Pure functions on memory: any process may call them. Caller: ingressd's
 * publisher (make), the supervisor's subscriber (apply), tests, fuzzers.
 */
#ifndef SWS_SHM_ROUTESET_DELTA_H
#define SWS_SHM_ROUTESET_DELTA_H

#include <stddef.h>

#include "proto/scalws.pb-c.h"

/* A deep copy of rs, unpacked-shaped (packed and unpacked), or NULL when
 * memory ran out: what a holder of a RouteSet it does not own keeps. */
Sws__RouteSet *sws_routeset_copy(const Sws__RouteSet *rs);

/* The same for any message of the schema (a Pool, a Host, ...). */
ProtobufCMessage *sws_routeset_copy_message(const ProtobufCMessage *m);

/* Whether a and b (either NULL) encode to the same bytes: the one notion
 * of "unchanged" (make's, and the tests' and fuzzers' of "the same set").
 * Memory running out counts as a change: a needless upsert, never a
 * missed one. */
int sws_routeset_same_message(const ProtobufCMessage *a, const ProtobufCMessage *b);

/* Sort rs's hosts by first name and its pools by name, in place (only the
 * pointer arrays move). A host without names sorts first under "". */
void sws_routeset_canonicalize(Sws__RouteSet *rs);

/* The delta from prev (NULL: the empty set) to next, both canonical, into
 * *d (sequence and publisher left 0: the caller numbers it). Returns the
 * number of changes (0: nothing changed, d holds nothing to release), or
 * -1 when memory ran out. */
int sws_routeset_delta_make(const Sws__RouteSet *prev, const Sws__RouteSet *next,
                            Sws__RouteDelta *d);

/* Free what make allocated in d (its arrays, not the entries). */
void sws_routeset_delta_release(Sws__RouteDelta *d);

typedef struct sws_routeset_applied {
    Sws__RouteSet *next;        /* the candidate (its shell and arrays owned) */
    ProtobufCMessage **garbage; /* base's entries next does not hold */
    size_t ngarbage;
} sws_routeset_applied_t;

/* Apply d to base (canonical); d's lists must be in strictly increasing
 * key order, as make emits them. 0 and *out, or -1 with a sentence in
 * err: a list out of that order (a key twice included), a removal of a
 * key base lacks, a key both upserted and removed, a host without names
 * (the subscriber then asks for a snapshot), or memory. */
int sws_routeset_delta_apply(const Sws__RouteSet *base, const Sws__RouteDelta *d,
                             sws_routeset_applied_t *out, char *err, size_t errlen);

/* Make the candidate the state: base's shell and lost entries are freed,
 * d's entries now belong to the result (d is left safe to free with
 * sws__route_delta__free_unpacked or as part of its IngressMessage).
 * Returns the new state. */
Sws__RouteSet *sws_routeset_applied_commit(sws_routeset_applied_t *a, Sws__RouteSet *base,
                                           Sws__RouteDelta *d);

/* Drop the candidate: base and d stay as they were. */
void sws_routeset_applied_abort(sws_routeset_applied_t *a);

#endif
