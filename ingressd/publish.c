#include "ingressd/publish.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "core/err.h"
#include "core/log.h"
#include "shm/ingress_endpoint.h"
#include "shm/ingress_zmq.h"
#include "shm/routeset_delta.h"

/* Messages queued per subscriber before PUB drops (the subscriber sees
 * the gap and takes a snapshot). */
#define PUB_SNDHWM 10000
/* Requests answered per wake-up before ZMQ_EVENTS is read again: every
 * request queued is answered, a burst just takes several rounds. */
#define ROUTER_FRAMES_MAX 8

struct sws_ingress_pub {
    void *ctx;
    void *pub;                  /* deltas, heartbeats */
    void *router;               /* snapshot requests */
    sws_ingress_endpoint_t ep;
    uint64_t id;
    uint64_t sequence;          /* of the last delta sent */
    int skip;                   /* tests: the next delta skips a number */
    Sws__RouteSet *current;     /* owned, canonical; NULL before the first set */
    uint8_t *snapshot;          /* the packed snapshot of current (cache); NULL: stale */
    size_t snapshot_len;
    uint64_t heartbeat_due_ms;
};

/* ---- opening ---- */

static int make_ipc_dir(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    const char *d = dirname(dir);
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        return sws_errf(err, errlen, "create %s: %s", d, strerror(errno));
    return 0;
}

/* Bind sock at addr; an ipc socket file is made 0600 (umask at bind, so
 * it is never wider for a moment: libzmq binds in this thread). */
static int bind_one(void *sock, const char *addr, int ipc, char *err, size_t errlen)
{
    mode_t old = ipc ? umask(0177) : 0;
    int rc = zmq_bind(sock, addr);
    int e = errno;
    if (ipc)
        umask(old);
    if (rc < 0)
        return sws_errf(err, errlen, "bind %s: %s", addr, zmq_strerror(e));
    return 0;
}

sws_ingress_pub_t *sws_ingress_pub_open(const char *endpoint, uint64_t id, char *err,
                                        size_t errlen)
{
    sws_ingress_pub_t *pub = calloc(1, sizeof(*pub));
    if (pub == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (sws_ingress_endpoint_parse(endpoint, &pub->ep, err, errlen) < 0 ||
        (pub->ep.ipc_path != NULL && make_ipc_dir(pub->ep.ipc_path, err, errlen) < 0))
        goto fail;
    pub->id = id;
    while (pub->id == 0 && getrandom(&pub->id, sizeof(pub->id), 0) != (ssize_t)sizeof(pub->id)) {
        if (errno != EINTR) {
            sws_errf(err, errlen, "getrandom: %s", strerror(errno));
            goto fail;
        }
    }
    int hwm = PUB_SNDHWM, zero = 0;
    pub->ctx = zmq_ctx_new();
    pub->pub = pub->ctx != NULL ? zmq_socket(pub->ctx, ZMQ_PUB) : NULL;
    pub->router = pub->ctx != NULL ? zmq_socket(pub->ctx, ZMQ_ROUTER) : NULL;
    if (pub->pub == NULL || pub->router == NULL) {
        sws_errf(err, errlen, "zmq: %s", zmq_strerror(errno));
        goto fail;
    }
    zmq_setsockopt(pub->pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(pub->pub, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(pub->router, ZMQ_LINGER, &zero, sizeof(zero));
    int ipc = pub->ep.ipc_path != NULL;
    if (bind_one(pub->pub, pub->ep.updates, ipc, err, errlen) < 0 ||
        bind_one(pub->router, pub->ep.snapshot, ipc, err, errlen) < 0)
        goto fail;
    return pub;
fail:
    sws_ingress_pub_close(pub);
    return NULL;
}

void sws_ingress_pub_close(sws_ingress_pub_t *pub)
{
    if (pub == NULL)
        return;
    if (pub->pub != NULL)
        zmq_close(pub->pub);
    if (pub->router != NULL)
        zmq_close(pub->router);
    if (pub->ctx != NULL)
        zmq_ctx_term(pub->ctx);
    if (pub->ep.ipc_path != NULL) {
        unlink(pub->ep.ipc_path);
        unlink(pub->ep.snapshot + strlen("ipc://"));
    }
    if (pub->current != NULL)
        sws__route_set__free_unpacked(pub->current, NULL);
    free(pub->snapshot);
    free(pub);
}

int sws_ingress_pub_fd(const sws_ingress_pub_t *pub)
{
    int fd = -1;
    size_t len = sizeof(fd);
    zmq_getsockopt(pub->router, ZMQ_FD, &fd, &len);
    return fd;
}

uint64_t sws_ingress_pub_sequence(const sws_ingress_pub_t *pub) { return pub->sequence; }
uint64_t sws_ingress_pub_id(const sws_ingress_pub_t *pub) { return pub->id; }
uint64_t sws_ingress_pub_deadline_ms(const sws_ingress_pub_t *pub) { return pub->heartbeat_due_ms; }
void sws_ingress_pub_skip_sequence(sws_ingress_pub_t *pub) { pub->skip = 1; }

/* ---- sending ---- */

/* msg packed and sent as one frame on the PUB socket (snapshots go
 * their own way, to the ROUTER). A full queue drops it: the subscriber
 * sees the gap or asks again. */
static void send_msg(void *sock, const Sws__IngressMessage *msg, const char *what)
{
    size_t len = sws__ingress_message__get_packed_size(msg);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        sws_log_error("publish: out of memory for a %zu-byte %s", len, what);
        return;
    }
    sws__ingress_message__pack(msg, buf);
    if (zmq_send(sock, buf, len, ZMQ_DONTWAIT) < 0 && errno != EAGAIN)
        sws_log_warn("publish: %s not sent: %s", what, zmq_strerror(errno));
    free(buf);
}

static void send_heartbeat(sws_ingress_pub_t *pub)
{
    Sws__RouteHeartbeat hb = SWS__ROUTE_HEARTBEAT__INIT;
    hb.sequence = pub->sequence;
    hb.publisher = pub->id;
    Sws__IngressMessage msg = SWS__INGRESS_MESSAGE__INIT;
    msg.body_case = SWS__INGRESS_MESSAGE__BODY_HEARTBEAT;
    msg.heartbeat = &hb;
    send_msg(pub->pub, &msg, "heartbeat");
}

void sws_ingress_pub_tick(sws_ingress_pub_t *pub, uint64_t now_ms)
{
    if (now_ms < pub->heartbeat_due_ms)
        return;
    send_heartbeat(pub);
    pub->heartbeat_due_ms = now_ms + SWS_INGRESS_HEARTBEAT_MS;
}

/* The packed snapshot of the current set, made once per sequence. */
static int snapshot_bytes(sws_ingress_pub_t *pub)
{
    if (pub->snapshot != NULL)
        return 0;
    Sws__RouteSnapshot snap = SWS__ROUTE_SNAPSHOT__INIT;
    snap.sequence = pub->sequence;
    snap.publisher = pub->id;
    snap.routes = pub->current;
    Sws__IngressMessage msg = SWS__INGRESS_MESSAGE__INIT;
    msg.body_case = SWS__INGRESS_MESSAGE__BODY_SNAPSHOT;
    msg.snapshot = &snap;
    pub->snapshot_len = sws__ingress_message__get_packed_size(&msg);
    pub->snapshot = malloc(pub->snapshot_len > 0 ? pub->snapshot_len : 1);
    if (pub->snapshot == NULL) {
        sws_log_error("publish: out of memory for a %zu-byte snapshot", pub->snapshot_len);
        return -1;
    }
    sws__ingress_message__pack(&msg, pub->snapshot);
    return 0;
}

/* One request: [identity][...][payload]; answered [identity][snapshot]. */
static void answer_request(sws_ingress_pub_t *pub)
{
    zmq_msg_t id;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, pub->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return;
    }
    /* The rest of the message: a SnapshotRequest has no fields, so its
     * bytes need no reading; bounded by what the peer sent. */
    if (zmq_msg_more(&id))
        sws_ingress_zmq_skip_rest(pub->router, ROUTER_FRAMES_MAX);
    if (pub->current != NULL && snapshot_bytes(pub) == 0) {
        zmq_send(pub->router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        if (zmq_send(pub->router, pub->snapshot, pub->snapshot_len, ZMQ_DONTWAIT) < 0 &&
            errno != EAGAIN && errno != EHOSTUNREACH)
            sws_log_warn("publish: snapshot not sent: %s", zmq_strerror(errno));
    }
    zmq_msg_close(&id);
}

void sws_ingress_pub_on_readable(sws_ingress_pub_t *pub)
{
    /* Edge-like: read ZMQ_EVENTS until no request is left, or the next
     * one will never wake us. */
    while (sws_ingress_zmq_readable(pub->router))
        answer_request(pub);
}

/* d numbered and sent. */
static void send_delta(sws_ingress_pub_t *pub, Sws__RouteDelta *d)
{
    pub->sequence += pub->skip ? 2 : 1;
    pub->skip = 0;
    d->sequence = pub->sequence;
    d->publisher = pub->id;
    Sws__IngressMessage msg = SWS__INGRESS_MESSAGE__INIT;
    msg.body_case = SWS__INGRESS_MESSAGE__BODY_DELTA;
    msg.delta = d;
    send_msg(pub->pub, &msg, "delta");
}

/* An owned canonical copy of rs (the caller's arrays stay in its order),
 * without settings and tls: the supervisor takes its own from its file
 * (ingress_merge.h), and a delta has no field for them, so a snapshot
 * carries none either. */
static Sws__RouteSet *canonical_copy(const Sws__RouteSet *rs)
{
    Sws__RouteSet *copy = sws_routeset_copy(rs);
    if (copy == NULL)
        return NULL;
    if (copy->settings != NULL)
        sws__settings__free_unpacked(copy->settings, NULL);
    if (copy->tls != NULL)
        sws__tls__free_unpacked(copy->tls, NULL);
    copy->settings = NULL;
    copy->tls = NULL;
    sws_routeset_canonicalize(copy);
    return copy;
}

int sws_ingress_pub_routes(sws_ingress_pub_t *pub, const Sws__RouteSet *rs, char *err,
                           size_t errlen)
{
    Sws__RouteSet *next = canonical_copy(rs);
    if (next == NULL)
        return sws_errf(err, errlen, "out of memory copying a RouteSet");
    Sws__RouteDelta d;
    int changes = sws_routeset_delta_make(pub->current, next, &d);
    if (changes < 0) {
        sws__route_set__free_unpacked(next, NULL);
        return sws_errf(err, errlen, "out of memory computing a delta");
    }
    /* The first set is a change even when empty: snapshots start then. */
    if (changes == 0 && pub->current != NULL) {
        sws__route_set__free_unpacked(next, NULL);
        return 0;
    }
    send_delta(pub, &d);
    /* After the send: the removal keys point into the previous set. */
    sws_routeset_delta_release(&d);
    if (pub->current != NULL)
        sws__route_set__free_unpacked(pub->current, NULL);
    pub->current = next;
    free(pub->snapshot);
    pub->snapshot = NULL;
    return 1;
}

/* ---- a change of pools only ---- */

/* The index of the pool named name in the current set (sorted by name),
 * or -1. */
static ssize_t current_pool(const sws_ingress_pub_t *pub, const char *name)
{
    size_t lo = 0, hi = pub->current->n_pools;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(pub->current->pools[mid]->name, name);
        if (c == 0)
            return (ssize_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

typedef struct pool_up {
    size_t at;       /* in the current set */
    Sws__Pool *copy; /* what replaces it */
} pool_up_t;

static int by_position(const void *a, const void *b)
{
    const pool_up_t *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

int sws_ingress_pub_pools(sws_ingress_pub_t *pub, const Sws__RouteSet *rs, Sws__Pool *const *pools,
                          size_t npools, char *err, size_t errlen)
{
    if (pub->current == NULL)
        return sws_ingress_pub_routes(pub, rs, err, errlen);
    pool_up_t *ups = malloc((npools + 1) * sizeof(*ups));
    Sws__Pool **list = malloc((npools + 1) * sizeof(*list));
    size_t n = 0;
    int rc = 0;
    if (ups == NULL || list == NULL) {
        rc = sws_errf(err, errlen, "out of memory computing a delta");
        goto done;
    }
    for (size_t i = 0; i < npools; i++) {
        ssize_t at = current_pool(pub, pools[i]->name);
        if (at < 0) {
            sws_log_warn("publish: pool %s is new: comparing the whole set", pools[i]->name);
            rc = 2;
            goto done;
        }
        if (sws_routeset_same_message((const ProtobufCMessage *)pub->current->pools[at],
                                      (const ProtobufCMessage *)pools[i]))
            continue;
        /* Unpacked-shaped, as the current set's entries are. */
        ups[n].copy = (Sws__Pool *)sws_routeset_copy_message(&pools[i]->base);
        if (ups[n].copy == NULL) {
            rc = sws_errf(err, errlen, "out of memory copying a pool");
            goto done;
        }
        ups[n++].at = (size_t)at;
    }
    if (n == 0)
        goto done;
    /* A delta's upserts in key order (routeset_delta.h): the set's order. */
    qsort(ups, n, sizeof(*ups), by_position);
    for (size_t i = 0; i < n; i++)
        list[i] = ups[i].copy;
    Sws__RouteDelta d = SWS__ROUTE_DELTA__INIT;
    d.upsert_pools = list;
    d.n_upsert_pools = n;
    send_delta(pub, &d);
    for (size_t i = 0; i < n; i++) {
        sws__pool__free_unpacked(pub->current->pools[ups[i].at], NULL);
        pub->current->pools[ups[i].at] = ups[i].copy;
    }
    n = 0; /* the copies are the set's now */
    pub->current->version = rs->version;
    free(pub->snapshot);
    pub->snapshot = NULL;
    rc = 1;
done:
    for (size_t i = 0; i < n; i++)
        sws__pool__free_unpacked(ups[i].copy, NULL);
    free(ups);
    free(list);
    return rc == 2 ? sws_ingress_pub_routes(pub, rs, err, errlen) : rc;
}
