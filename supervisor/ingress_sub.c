#include "supervisor/ingress_sub.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "shm/ingress_endpoint.h"
#include "shm/ingress_zmq.h"
#include "shm/routeset_check.h"
#include "shm/routeset_delta.h"
#include "shm/shm.h"

/* ---- the rule ---- */

sws_ingress_verdict_t sws_ingress_judge(const sws_ingress_seq_t *s,
                                        Sws__IngressMessage__BodyCase kind, uint64_t sequence,
                                        uint64_t publisher)
{
    switch (kind) {
    case SWS__INGRESS_MESSAGE__BODY_SNAPSHOT:
        /* A second answer to requests sent twice: only a newer one. */
        if (s->synced && publisher == s->publisher && sequence <= s->sequence)
            return SWS_INGRESS_IGNORE;
        return SWS_INGRESS_APPLY;
    case SWS__INGRESS_MESSAGE__BODY_DELTA:
        if (!s->synced)
            return SWS_INGRESS_QUEUE;
        if (publisher != s->publisher)
            return SWS_INGRESS_RESTART;
        if (sequence <= s->sequence)
            return SWS_INGRESS_IGNORE;
        return sequence == s->sequence + 1 ? SWS_INGRESS_APPLY : SWS_INGRESS_GAP;
    case SWS__INGRESS_MESSAGE__BODY_HEARTBEAT:
        if (!s->synced)
            return SWS_INGRESS_IGNORE;
        if (publisher != s->publisher)
            return SWS_INGRESS_RESTART;
        /* The publisher is further on than we are: a delta was lost. */
        return sequence > s->sequence ? SWS_INGRESS_GAP : SWS_INGRESS_IGNORE;
    default:
        return SWS_INGRESS_IGNORE;
    }
}

/* ---- the subscriber ---- */

/* A ZeroMQ socket's descriptor on the loop, and whose it is. */
typedef struct sub_io {
    sws_io_t io;
    struct sws_ingress_sub *sub;
} sub_io_t;

struct sws_ingress_sub {
    sws_loop_t *loop;
    sws_ingress_publish_fn publish;
    void *publish_ctx;
    sws_ingress_endpoint_t ep;
    void *ctx, *sub, *dealer;
    sub_io_t sub_io, dealer_io;
    sws_timer_queue_t tick_queue;
    sws_timer_t tick;

    sws_ingress_seq_t seq;
    int ready;                 /* a snapshot was applied once */
    int dirty;                 /* the state is ahead of the table (SWS_SHM_BUSY) */
    int silent;                /* said so in the log */
    Sws__RouteSet *state;      /* the ingress set (owned); NULL before the first snapshot */
    Sws__RouteSet *file;       /* the file's set as published last (owned copy) */
    Sws__IngressMessage *queue[SWS_INGRESS_SUB_QUEUE_MAX]; /* deltas awaiting the snapshot */
    unsigned nqueue;
    uint64_t asked_ms;         /* the last snapshot request; 0: none outstanding */
    uint64_t heard_ms;         /* the last message of any kind; 0: none yet */
    uint64_t started_ms;       /* the subscription's start: silence counts from it until a
                                * first message (asked_ms moves with each new request) */
    uint64_t applied_ms;       /* the last snapshot or delta applied; 0: none yet */
    uint64_t snapshots, deltas, refused;
    size_t shadowed[3];        /* the merge's counts last logged */
};

static uint64_t now_ms(const sws_ingress_sub_t *s)
{
    return sws_loop_now_ms(s->loop);
}

static void drop_queue(sws_ingress_sub_t *s)
{
    for (unsigned i = 0; i < s->nqueue; i++)
        sws__ingress_message__free_unpacked(s->queue[i], NULL);
    s->nqueue = 0;
}

static void ask_snapshot(sws_ingress_sub_t *s)
{
    Sws__SnapshotRequest req = SWS__SNAPSHOT_REQUEST__INIT;
    uint8_t buf[16];
    size_t len = sws__snapshot_request__pack(&req, buf);
    /* A DEALER with no peer yet queues it; a full queue drops it and the
     * tick asks again. */
    if (zmq_send(s->dealer, buf, len, ZMQ_DONTWAIT) < 0 && errno != EAGAIN)
        sws_log_warn("ingress: snapshot request to %s: %s", s->ep.snapshot, zmq_strerror(errno));
    s->asked_ms = now_ms(s);
}

static void resync(sws_ingress_sub_t *s)
{
    s->seq.synced = 0;
    drop_queue(s);
    ask_snapshot(s);
}

/* Merge candidate with the file, check, publish. 0 when published (or
 * left for the retry: BUSY), -1 refused (logged with what). */
static int publish_state(sws_ingress_sub_t *s, const Sws__RouteSet *candidate, const char *what,
                         int *busy)
{
    sws_ingress_merge_t m;
    char err[512];
    *busy = 0;
    if (sws_ingress_merge(s->file, candidate, &m) < 0) {
        sws_log_error("ingress: %s: out of memory merging with the file; not applied", what);
        return -1;
    }
    /* Said when it changes, not at every delta. */
    size_t counts[3] = { m.shadowed_names, m.shadowed_pools, m.dropped_hosts };
    if (memcmp(counts, s->shadowed, sizeof(counts)) != 0)
        sws_log_info("ingress: %s: the file keeps %zu host name(s) and %zu pool name(s) it "
                     "also defines (first: \"%s\"); %zu ingress host(s) not served", what,
                     m.shadowed_names, m.shadowed_pools,
                     m.first_shadowed != NULL ? m.first_shadowed : "", m.dropped_hosts);
    memcpy(s->shadowed, counts, sizeof(counts));
    /* The table build passes it through the RouteSet checker first and
     * refuses what that refuses (shm/table.h): checking here too would
     * double the largest cost of a delta (the check is most of it). No
     * free arena means no build: then the check, before the state moves;
     * but not for s->state itself, retried by the tick: it passed already
     * (it became the state only so), merged with the same file (a file
     * publication clears dirty). */
    int rc = s->publish(s->publish_ctx, &m.rs, err, sizeof(err));
    sws_routeset_refusal_t why;
    if (rc == SWS_SHM_BUSY && candidate != s->state && sws_routeset_check(&m.rs, &why) < 0)
        rc = sws_errf(err, sizeof(err), "%s%s%s", why.path, why.path[0] ? ": " : "", why.msg);
    sws_ingress_merge_free(&m);
    if (rc == SWS_SHM_BUSY) {
        *busy = 1;
        return 0;
    }
    if (rc < 0) {
        s->refused++;
        sws_log_error("ingress: %s refused: %s; still serving sequence %" PRIu64
                      "; asking for a snapshot", what, err, s->seq.sequence);
    }
    return rc < 0 ? -1 : 0;
}

static void applied(sws_ingress_sub_t *s, int busy)
{
    s->applied_ms = now_ms(s);
    s->dirty = busy;
}

static void apply_delta(sws_ingress_sub_t *s, Sws__RouteDelta *d)
{
    char what[96], err[256];
    snprintf(what, sizeof(what), "delta %" PRIu64, d->sequence);
    sws_routeset_applied_t a;
    if (sws_routeset_delta_apply(s->state, d, &a, err, sizeof(err)) < 0) {
        s->refused++;
        sws_log_error("ingress: %s refused: %s; asking for a snapshot", what, err);
        return resync(s);
    }
    int busy;
    if (publish_state(s, a.next, what, &busy) < 0) {
        sws_routeset_applied_abort(&a);
        return resync(s);
    }
    s->state = sws_routeset_applied_commit(&a, s->state, d);
    s->seq.sequence = d->sequence;
    s->deltas++;
    applied(s, busy);
}

static void apply_snapshot(sws_ingress_sub_t *s, Sws__RouteSnapshot *snap)
{
    char what[96];
    snprintf(what, sizeof(what), "snapshot %" PRIu64 " of publisher %016" PRIx64,
             snap->sequence, snap->publisher);
    Sws__RouteSet *next = snap->routes;
    static const Sws__RouteSet empty = SWS__ROUTE_SET__INIT;
    int busy;
    uint64_t t0 = sws_clock_us(); /* merge, check and build: the full set's price */
    if (next != NULL)
        sws_routeset_canonicalize(next);
    if (publish_state(s, next != NULL ? next : &empty, what, &busy) < 0)
        return resync(s);
    if (next == NULL && (next = sws_routeset_copy(&empty)) == NULL) {
        sws_log_error("ingress: %s: out of memory", what);
        return resync(s);
    }
    snap->routes = NULL; /* now ours */
    if (s->state != NULL)
        sws__route_set__free_unpacked(s->state, NULL);
    s->state = next;
    s->seq = (sws_ingress_seq_t){ 1, snap->sequence, snap->publisher };
    s->asked_ms = 0;
    s->ready = 1;
    s->snapshots++;
    applied(s, busy);
    sws_log_notice("ingress: %s applied (%zu hosts, %zu pools) in %" PRIu64 " us", what,
                   next->n_hosts, next->n_pools, sws_clock_us() - t0);
    /* The deltas that came while it was on its way: those after it, of
     * the same publisher; any other is old news. */
    unsigned n = s->nqueue;
    s->nqueue = 0;
    for (unsigned i = 0; i < n; i++) {
        Sws__IngressMessage *q = s->queue[i];
        if (s->seq.synced && q->delta->publisher == s->seq.publisher &&
            q->delta->sequence > s->seq.sequence) {
            if (q->delta->sequence == s->seq.sequence + 1) {
                apply_delta(s, q->delta);
            } else {
                sws_log_warn("ingress: gap after the snapshot (sequence %" PRIu64 ", then %" PRIu64
                             "); asking for another", s->seq.sequence, q->delta->sequence);
                resync(s);
            }
        }
        sws__ingress_message__free_unpacked(q, NULL);
    }
}

static uint64_t msg_sequence(const Sws__IngressMessage *m, uint64_t *publisher)
{
    switch (m->body_case) {
    case SWS__INGRESS_MESSAGE__BODY_SNAPSHOT:
        *publisher = m->snapshot->publisher;
        return m->snapshot->sequence;
    case SWS__INGRESS_MESSAGE__BODY_DELTA:
        *publisher = m->delta->publisher;
        return m->delta->sequence;
    case SWS__INGRESS_MESSAGE__BODY_HEARTBEAT:
        *publisher = m->heartbeat->publisher;
        return m->heartbeat->sequence;
    default:
        *publisher = 0;
        return 0;
    }
}

/* One decoded message; takes it. */
static void on_message(sws_ingress_sub_t *s, Sws__IngressMessage *m)
{
    uint64_t publisher, seq = msg_sequence(m, &publisher);
    if (s->silent)
        sws_log_notice("ingress: %s speaks again", s->ep.updates);
    s->silent = 0;
    /* The first message proves the SUB socket subscribed: a snapshot
     * asked for before then could be followed by deltas it never sees
     * (ZeroMQ's slow joiner), and cost a second snapshot. */
    if (s->heard_ms == 0 && !s->seq.synced)
        ask_snapshot(s);
    s->heard_ms = now_ms(s);
    switch (sws_ingress_judge(&s->seq, m->body_case, seq, publisher)) {
    case SWS_INGRESS_APPLY:
        if (m->body_case == SWS__INGRESS_MESSAGE__BODY_SNAPSHOT)
            apply_snapshot(s, m->snapshot);
        else
            apply_delta(s, m->delta);
        break;
    case SWS_INGRESS_QUEUE:
        if (s->nqueue < SWS_INGRESS_SUB_QUEUE_MAX) {
            s->queue[s->nqueue++] = m;
            return;
        }
        /* Too many to keep: the snapshot will be older than what follows. */
        sws_log_warn("ingress: more than %u deltas while waiting for a snapshot; asking again",
                     SWS_INGRESS_SUB_QUEUE_MAX);
        resync(s);
        break;
    case SWS_INGRESS_GAP:
        sws_log_warn("ingress: sequence %" PRIu64 " after %" PRIu64 ": messages lost; asking for "
                     "a snapshot (still serving sequence %" PRIu64 ")", seq, s->seq.sequence,
                     s->seq.sequence);
        resync(s);
        break;
    case SWS_INGRESS_RESTART:
        sws_log_notice("ingress: publisher %016" PRIx64 " replaces %016" PRIx64 " (ingressd "
                       "restarted); asking for a snapshot", publisher, s->seq.publisher);
        resync(s);
        break;
    case SWS_INGRESS_IGNORE:
        break;
    }
    sws__ingress_message__free_unpacked(m, NULL);
}

/* Every message queued on sock. */
static void drain(sws_ingress_sub_t *s, void *sock)
{
    while (sws_ingress_zmq_readable(sock)) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return;
        }
        int more = zmq_msg_more(&msg);
        Sws__IngressMessage *m =
            more ? NULL : sws__ingress_message__unpack(NULL, zmq_msg_size(&msg), zmq_msg_data(&msg));
        zmq_msg_close(&msg);
        /* A message of several frames is none of ours: read it to its end. */
        if (more)
            sws_ingress_zmq_skip_rest(sock, UINT_MAX);
        if (m == NULL || m->body_case == SWS__INGRESS_MESSAGE__BODY__NOT_SET ||
            (m->body_case == SWS__INGRESS_MESSAGE__BODY_SNAPSHOT) != (sock == s->dealer)) {
            s->refused++;
            sws_log_error("ingress: a message from %s that is not a RouteDelta, RouteHeartbeat "
                          "or (on the snapshot socket) a RouteSnapshot; refused, asking for a "
                          "snapshot", sock == s->dealer ? s->ep.snapshot : s->ep.updates);
            if (m != NULL)
                sws__ingress_message__free_unpacked(m, NULL);
            resync(s);
            continue;
        }
        on_message(s, m);
    }
}

static void drain_all(sws_ingress_sub_t *s)
{
    drain(s, s->sub);
    drain(s, s->dealer);
}

static void on_readable(sws_io_t *io, uint32_t events)
{
    (void)events;
    drain_all(sws_container_of(io, sub_io_t, io)->sub);
}

static void on_tick(sws_timer_t *t)
{
    sws_ingress_sub_t *s = sws_container_of(t, sws_ingress_sub_t, tick);
    uint64_t now = now_ms(s);
    if (s->dirty && s->state != NULL) {
        int busy;
        if (publish_state(s, s->state, "a publication left waiting", &busy) < 0)
            resync(s);
        s->dirty = busy;
    }
    if (s->asked_ms != 0 && now - s->asked_ms >= SWS_INGRESS_SUB_ASK_AGAIN_MS)
        ask_snapshot(s);
    uint64_t since = s->heard_ms != 0 ? s->heard_ms : s->started_ms;
    if (!s->silent && since != 0 && now - since >= SWS_INGRESS_SUB_SILENCE_MS) {
        s->silent = 1;
        sws_log_warn("ingress: nothing from %s for %u ms; still serving sequence %" PRIu64 "%s",
                     s->ep.updates, SWS_INGRESS_SUB_SILENCE_MS, s->seq.sequence,
                     s->ready ? "" : " (no snapshot yet: not ready)");
    }
    /* A wake-up libzmq did not signal (its descriptor is edge-like). */
    drain_all(s);
    sws_timer_arm(s->loop, &s->tick_queue, &s->tick);
}

/* ---- life ---- */

static int watch(sws_ingress_sub_t *s, void *sock, sub_io_t *w, char *err, size_t errlen)
{
    int fd = -1;
    size_t len = sizeof(fd);
    if (zmq_getsockopt(sock, ZMQ_FD, &fd, &len) < 0)
        return sws_errf(err, errlen, "ZMQ_FD: %s", zmq_strerror(errno));
    w->sub = s;
    w->io.fd = fd;
    w->io.cb = on_readable;
    if (sws_loop_add(s->loop, &w->io, EPOLLIN) < 0) {
        w->io.fd = -1;
        return sws_errf(err, errlen, "epoll: %s", strerror(errno));
    }
    return 0;
}

sws_ingress_sub_t *sws_ingress_sub_start(sws_loop_t *loop, const char *endpoint,
                                         sws_ingress_publish_fn publish, void *ctx, char *err,
                                         size_t errlen)
{
    sws_ingress_sub_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    s->loop = loop;
    s->publish = publish;
    s->publish_ctx = ctx;
    s->sub_io.io.fd = s->dealer_io.io.fd = -1;
    if (sws_ingress_endpoint_parse(endpoint, &s->ep, err, errlen) < 0) {
        free(s);
        return NULL;
    }
    int64_t maxsize = SWS_INGRESS_SUB_MSG_MAX;
    int zero = 0;
    s->ctx = zmq_ctx_new();
    s->sub = s->ctx != NULL ? zmq_socket(s->ctx, ZMQ_SUB) : NULL;
    s->dealer = s->ctx != NULL ? zmq_socket(s->ctx, ZMQ_DEALER) : NULL;
    if (s->sub == NULL || s->dealer == NULL ||
        zmq_setsockopt(s->sub, ZMQ_SUBSCRIBE, "", 0) < 0 ||
        zmq_setsockopt(s->sub, ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize)) < 0 ||
        zmq_setsockopt(s->dealer, ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize)) < 0 ||
        zmq_setsockopt(s->sub, ZMQ_LINGER, &zero, sizeof(zero)) < 0 ||
        zmq_setsockopt(s->dealer, ZMQ_LINGER, &zero, sizeof(zero)) < 0 ||
        zmq_connect(s->sub, s->ep.updates) < 0 || zmq_connect(s->dealer, s->ep.snapshot) < 0) {
        sws_errf(err, errlen, "ingress.subscribe %s: %s", endpoint, zmq_strerror(errno));
        sws_ingress_sub_stop(s);
        return NULL;
    }
    if (watch(s, s->sub, &s->sub_io, err, errlen) < 0 ||
        watch(s, s->dealer, &s->dealer_io, err, errlen) < 0) {
        sws_ingress_sub_stop(s);
        return NULL;
    }
    sws_timer_queue_init(loop, &s->tick_queue, SWS_INGRESS_SUB_TICK_MS);
    sws_timer_init(&s->tick, on_tick);
    sws_timer_arm(loop, &s->tick_queue, &s->tick);
    /* Asked at the first message heard (see on_message), or by the tick
     * SWS_INGRESS_SUB_ASK_AGAIN_MS from now if none comes. */
    s->asked_ms = s->started_ms = now_ms(s);
    sws_log_info("ingress: subscribed to %s (snapshots from %s)", s->ep.updates, s->ep.snapshot);
    return s;
}

void sws_ingress_sub_stop(sws_ingress_sub_t *s)
{
    if (s == NULL)
        return;
    if (s->tick_queue.duration_ms != 0) {
        sws_timer_disarm(&s->tick);
        sws_timer_queue_remove(s->loop, &s->tick_queue);
    }
    if (s->sub_io.io.fd >= 0)
        sws_loop_del(s->loop, &s->sub_io.io);
    if (s->dealer_io.io.fd >= 0)
        sws_loop_del(s->loop, &s->dealer_io.io);
    if (s->sub != NULL)
        zmq_close(s->sub);
    if (s->dealer != NULL)
        zmq_close(s->dealer);
    if (s->ctx != NULL)
        zmq_ctx_term(s->ctx);
    drop_queue(s);
    if (s->state != NULL)
        sws__route_set__free_unpacked(s->state, NULL);
    if (s->file != NULL)
        sws__route_set__free_unpacked(s->file, NULL);
    free(s);
}

int sws_ingress_sub_merge(const sws_ingress_sub_t *s, const Sws__RouteSet *file,
                          sws_ingress_merge_t *m)
{
    return sws_ingress_merge(file, s != NULL ? s->state : NULL, m);
}

int sws_ingress_sub_file_published(sws_ingress_sub_t *s, const Sws__RouteSet *file)
{
    if (s == NULL)
        return 0;
    /* That publication merged s->state: the tick has nothing left to
     * retry (and would merge it with the previous file). */
    s->dirty = 0;
    Sws__RouteSet *copy = sws_routeset_copy(file);
    if (copy == NULL) {
        sws_log_error("ingress: out of memory copying the file's routes; ingress updates merge "
                      "with the previous ones");
        return -1;
    }
    if (s->file != NULL)
        sws__route_set__free_unpacked(s->file, NULL);
    s->file = copy;
    return 0;
}

int sws_ingress_sub_ready(const sws_ingress_sub_t *s, const char **why)
{
    if (s == NULL || s->ready)
        return 1;
    *why = "no ingress snapshot applied yet";
    return 0;
}

static void put_age(sws_json_out_t *o, const char *key, size_t keylen, uint64_t at, uint64_t now)
{
    sws_json_raw(o, key, keylen);
    if (at == 0)
        sws_json_lit(o, "null");
    else
        sws_json_u64(o, now > at ? now - at : 0);
}

void sws_ingress_sub_status(const sws_ingress_sub_t *s, sws_json_out_t *o)
{
    if (s == NULL)
        return;
    uint64_t now = now_ms(s);
    char id[24];
    snprintf(id, sizeof(id), "%016" PRIx64, s->seq.publisher);
    sws_json_lit(o, ", \"ingress\": {\"endpoint\": ");
    sws_json_cstr(o, s->ep.updates);
    sws_json_lit(o, ", \"state\": ");
    sws_json_cstr(o, s->silent ? "silent" : s->seq.synced ? "in-step" : "awaiting-snapshot");
    if (s->ready)
        sws_json_lit(o, ", \"ready\": true");
    else
        sws_json_lit(o, ", \"ready\": false");
    sws_json_lit(o, ", \"sequence\": ");
    sws_json_u64(o, s->seq.sequence);
    sws_json_lit(o, ", \"publisher\": ");
    sws_json_cstr(o, s->ready ? id : "");
    put_age(o, ", \"applied_age_ms\": ", sizeof(", \"applied_age_ms\": ") - 1, s->applied_ms, now);
    put_age(o, ", \"heard_age_ms\": ", sizeof(", \"heard_age_ms\": ") - 1, s->heard_ms, now);
    sws_json_lit(o, ", \"snapshots\": ");
    sws_json_u64(o, s->snapshots);
    sws_json_lit(o, ", \"deltas\": ");
    sws_json_u64(o, s->deltas);
    sws_json_lit(o, ", \"refused\": ");
    sws_json_u64(o, s->refused);
    sws_json_lit(o, "}");
}
