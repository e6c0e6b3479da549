/*
 * The supervisor's subscription to ingressd's routes (`ingress:
 * {subscribe: ENDPOINT}`): the subscriber side of the ZeroMQ clone
 * pattern (docs/adr/0037-ingress-clone-pattern.md).
 *
 * A SUB socket takes deltas and heartbeats, a DEALER socket asks for
 * snapshots; both are ZeroMQ descriptors on the supervisor's loop (read to
 * exhaustion on every wake-up: libzmq's descriptor is edge-like), with a
 * timer every SWS_INGRESS_SUB_TICK_MS for the silences. Nothing blocks.
 *
 * What it keeps: the ingress RouteSet (the clone of ingressd's), its
 * sequence number and publisher id, and a copy of the file's RouteSet as
 * published last. Each snapshot or in-order delta makes a candidate ingress
 * set; the candidate merged with the file (supervisor/ingress_merge.h)
 * goes to publish(), the supervisor's one publication path, whose table
 * build passes it through the RouteSet checker first (or, when no arena is
 * free, the checker alone); only then does it become the state. A message that
 * fails anywhere is logged and refused whole, and a snapshot is asked for.
 * A gap in the sequence or a new publisher id: a snapshot is asked for,
 * and the last table stays served meanwhile. When every arena is still
 * held (SWS_SHM_BUSY) the state moves on and the publication is retried
 * every SWS_INGRESS_SUB_TICK_MS.
 *
 * Readiness (GET /readyz): from the first snapshot applied on, for the
 * life of the process, whatever happens to ingressd later (the ADR says
 * why).
 *
 * Caller: the supervisor only. Not thread-safe. Every function takes a
 * NULL sub (not subscribed) and does nothing, or answers "ready".
 */
#ifndef SWS_SUPERVISOR_INGRESS_SUB_H
#define SWS_SUPERVISOR_INGRESS_SUB_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/loop.h"
#include "proto/scalws.pb-c.h"
#include "supervisor/ingress_merge.h"

#define SWS_INGRESS_SUB_TICK_MS 100u
#define SWS_INGRESS_SUB_SILENCE_MS 3000u  /* no message: "publisher silent" */
#define SWS_INGRESS_SUB_ASK_AGAIN_MS 1000u /* a snapshot request unanswered */
#define SWS_INGRESS_SUB_QUEUE_MAX 256u     /* deltas kept while a snapshot is awaited */
#define SWS_INGRESS_SUB_MSG_MAX (256 << 20) /* bytes of one message (ZMQ_MAXMSGSIZE) */

/* Publish rs as the next generation: 0, SWS_SHM_BUSY (no free arena: try
 * again later), or -1 with err (refused). */
typedef int (*sws_ingress_publish_fn)(void *ctx, const Sws__RouteSet *rs, char *err,
                                      size_t errlen);

typedef struct sws_ingress_sub sws_ingress_sub_t;

/* Connect to endpoint (checked by the config reader) and ask for a
 * snapshot. NULL with err when libzmq could not be set up. */
sws_ingress_sub_t *sws_ingress_sub_start(sws_loop_t *loop, const char *endpoint,
                                         sws_ingress_publish_fn publish, void *ctx, char *err,
                                         size_t errlen);

void sws_ingress_sub_stop(sws_ingress_sub_t *sub);

/* The file's routes merged with the ingress state, for a publication of
 * the file (start, reload): a view, freed with sws_ingress_merge_free.
 * With a NULL sub, the file alone. 0, or -1 when memory ran out. */
int sws_ingress_sub_merge(const sws_ingress_sub_t *sub, const Sws__RouteSet *file,
                          sws_ingress_merge_t *m);

/* file (borrowed) was published: keep a copy, merged into every later
 * ingress publication. 0, or -1 when memory ran out (logged; the previous
 * copy stays). */
int sws_ingress_sub_file_published(sws_ingress_sub_t *sub, const Sws__RouteSet *file);

/* 1 when a snapshot has been applied (or sub is NULL); else 0 and *why a
 * static sentence. */
int sws_ingress_sub_ready(const sws_ingress_sub_t *sub, const char **why);

/* ", \"ingress\": {...}" for GET /v1/status (nothing when sub is NULL). */
void sws_ingress_sub_status(const sws_ingress_sub_t *sub, sws_json_out_t *o);

/* ---- the clone pattern's rule, pure ---- */

typedef struct sws_ingress_seq {
    int synced;          /* a snapshot was applied and no gap seen since */
    uint64_t sequence;   /* the last applied */
    uint64_t publisher;  /* whose */
} sws_ingress_seq_t;

typedef enum sws_ingress_verdict {
    SWS_INGRESS_APPLY,   /* the next state */
    SWS_INGRESS_IGNORE,  /* old news (a duplicate, an older snapshot, a heartbeat in step) */
    SWS_INGRESS_QUEUE,   /* a delta while a snapshot is awaited: keep it */
    SWS_INGRESS_GAP,     /* a sequence missed: ask for a snapshot */
    SWS_INGRESS_RESTART, /* a new publisher: ask for a snapshot */
} sws_ingress_verdict_t;

/* What to do with a message of kind (snapshot, delta, heartbeat) numbered
 * sequence from publisher, in state s. */
sws_ingress_verdict_t sws_ingress_judge(const sws_ingress_seq_t *s,
                                        Sws__IngressMessage__BodyCase kind, uint64_t sequence,
                                        uint64_t publisher);

#endif
