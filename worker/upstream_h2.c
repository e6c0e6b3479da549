/* HTTP/2 to upstream members (upstream_h2.h). */
#include "worker/upstream_h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/err.h"
#include "core/http_token.h"
#include "core/log.h"
#include "core/str.h"
#include "worker/stream.h"
#include "worker/upstream_pools.h"

/* Bytes read from the socket per call: one HTTP/2 frame of the default
 * SETTINGS_MAX_FRAME_SIZE plus its header. */
#define READ_CHUNK (16u * 1024 + 9u)

/* The connection's receive window: a stream's own (the protocol's 64 KiB
 * default) bounds what one slow client holds; the connection's is wide
 * enough that streams held back by slow clients leave room to the others
 * (as nginx's grpc module does with its 2^31-1). */
#define CONN_WINDOW (16 * 1024 * 1024)

/* The frames nghttp2 gives one per nghttp2_session_mem_send call are
 * gathered here, so that the requests a loop iteration queued on a
 * connection go in one write, not one send(2) per HEADERS frame. */
#define OBUF (16u * 1024)

/* Streams kept for reuse per worker (about 2.5 KiB each), and the hbuf
 * one keeps: a burst leaves at most this much behind. */
#define SPARE_MAX 256u
#define SPARE_HBUF (4u * 1024)

/* Why a request does not go to a member whose connection says 0. */
#define ZERO_WHY "the member announces SETTINGS_MAX_CONCURRENT_STREAMS 0"

/* What the member did wrong, as nghttp2 words it (a field's name and
 * value included), kept for the log line of the request it breaks. */
#define WHY_MAX 160
#define INVALID_WHY "invalid response: "

/* What an interim head costs beside its fields (SWS_UPSTREAM_H2_MAX_INTERIM):
 * its status line as an HTTP/1 client gets it, so that field-less 100s
 * count too. */
#define INTERIM_LINE (sizeof("HTTP/1.1 100 Continue\r\n\r\n") - 1)

/* A timer that is not armed (enum sws_upstream_timer otherwise). */
#define NO_TIMER (-1)

/* A response field: offsets into the stream's hbuf, which may move. */
typedef struct field_at {
    uint32_t name, name_len, value, value_len;
} field_at_t;

struct sws_upstream_h2_stream {
    sws_upstream_h2_conn_t *c;
    int32_t id;
    const sws_upstream_h2_ops_t *ops;
    void *data;                    /* the user's; NULL: given up or done (detached) */
    uint8_t sent;                  /* its HEADERS went out */
    uint8_t local_ended;           /* our END_STREAM went out */
    uint8_t got_head;              /* the final head was given */
    uint8_t deferred;              /* the body provider waits for ops->body */
    const char *invalid;           /* why we reset it (a head we cannot relay): a
                                    * literal, or `why` */
    char why[sizeof(INVALID_WHY) + WHY_MAX]; /* what nghttp2 found wrong */
    size_t held;                   /* body bytes given and not consumed */
    size_t interim;                /* bytes of the interim heads' fields so far */
    uint64_t waited_ms;            /* since when it waits for the member: sent, or moved */
    unsigned status;
    uint64_t length;
    unsigned nf;
    size_t hlen;
    sws_upstream_h2_stream_t *prev, *next; /* the connection's streams; `next`: the spares */
    /* Kept when the stream is reused (stream_get clears what is above):
     * f[0, nf) and hbuf[0, hlen) are all a response gave. */
    char *hbuf;                    /* the request's head until its HEADERS went (they
                                    * point into it: NO_COPY), then the response's fields */
    size_t hcap;
    field_at_t f[SWS_UPSTREAM_H2_MAX_FIELDS];
};

struct sws_upstream_h2_conn {
    sws_upstream_h2_set_t *set;
    sws_upstream_conn_t *u;        /* NULL once closed */
    nghttp2_session *ng;
    uint64_t member_id;
    unsigned nstreams;             /* ours on it, not closed yet */
    uint8_t connecting;
    uint8_t send_blocked;          /* bytes wait for the socket (EPOLLOUT) */
    uint8_t goaway;                /* the member sent GOAWAY: no new streams */
    uint8_t retiring;              /* no new streams: the member left the table, or
                                    * nghttp2 took no more (stream ids ran out) */
    uint8_t closed;
    uint8_t in_room;               /* in the set's room list */
    uint8_t zero;                  /* the member's SETTINGS_MAX_CONCURRENT_STREAMS is 0 */
    uint8_t moved;                 /* a stream moved since the timer was armed (stream_moved) */
    char error[WHY_MAX];           /* nghttp2's last word on what the member did
                                    * wrong (on_error), until a stream or the
                                    * connection's failure takes it */
    int timer;                     /* armed enum sws_upstream_timer, or NO_TIMER */
    size_t ooff, olen;             /* obuf[ooff, olen) is not written yet */
    const uint8_t *out;            /* then this frame, nghttp2's, too large for obuf: */
    size_t out_len;                /* valid until the next mem_send, which waits for it */
    sws_upstream_h2_stream_t *streams;
    sws_upstream_h2_stream_t *parked; /* failed before their HEADERS went (zero): nghttp2
                                       * holds them, cancelled, until the session goes */
    char member[SWS_UPSTREAM_MEMBER_TEXT]; /* as logged */
    sws_defer_t kick;              /* send what calls outside an event queued */
    sws_upstream_h2_conn_t *prev, *next; /* the set's open ones; `next`: its dead list */
    sws_upstream_h2_conn_t *room_prev, *room_next; /* the set's that take a stream */
    uint8_t obuf[OBUF];
};

static void conn_settle(sws_upstream_h2_conn_t *c, int progress);

/* Whether c takes one more stream: open, no GOAWAY, not retiring, fewer
 * of ours than the member's SETTINGS_MAX_CONCURRENT_STREAMS. */
static int conn_has_room(const sws_upstream_h2_conn_t *c)
{
    return !c->closed && !c->goaway && !c->retiring &&
           c->nstreams < nghttp2_session_get_remote_settings(
                             c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

/* Keep c in the set's room list exactly while it has room, so that a
 * request looks at those only, not at every connection: called wherever
 * one of conn_has_room's terms changes. */
static void conn_room_update(sws_upstream_h2_conn_t *c)
{
    sws_upstream_h2_set_t *s = c->set;
    int want = conn_has_room(c);
    if (want == c->in_room)
        return;
    c->in_room = (uint8_t)want;
    if (want) {
        c->room_prev = NULL;
        c->room_next = s->room;
        if (s->room != NULL)
            s->room->room_prev = c;
        s->room = c;
        return;
    }
    if (c->room_prev != NULL)
        c->room_prev->room_next = c->room_next;
    else
        s->room = c->room_next;
    if (c->room_next != NULL)
        c->room_next->room_prev = c->room_prev;
    c->room_prev = c->room_next = NULL;
}

/* ---- streams ---- */

static void stream_unlink(sws_upstream_h2_stream_t *hs)
{
    sws_upstream_h2_conn_t *c = hs->c;
    if (hs->prev != NULL)
        hs->prev->next = hs->next;
    else
        c->streams = hs->next;
    if (hs->next != NULL)
        hs->next->prev = hs->prev;
    c->nstreams--;
    conn_room_update(c);
}

static void stream_destroy(sws_upstream_h2_stream_t *hs)
{
    free(hs->hbuf);
    free(hs);
}

/* A stream for a request: a spare one (its hbuf kept), else a new one. */
static sws_upstream_h2_stream_t *stream_get(sws_upstream_h2_set_t *s)
{
    sws_upstream_h2_stream_t *hs = s->spare;
    if (hs == NULL)
        return calloc(1, sizeof(*hs));
    s->spare = hs->next;
    s->nspare--;
    memset(hs, 0, offsetof(sws_upstream_h2_stream_t, hbuf));
    return hs;
}

/* nghttp2 is done with it (closed, not sent, or the session deleted). */
static void stream_free(sws_upstream_h2_set_t *s, sws_upstream_h2_stream_t *hs)
{
    if (s->nspare >= SPARE_MAX) {
        stream_destroy(hs);
        return;
    }
    if (hs->hcap > SPARE_HBUF) { /* one large head does not stay with every spare */
        free(hs->hbuf);
        hs->hbuf = NULL;
        hs->hcap = 0;
    }
    hs->next = s->spare;
    s->spare = hs;
    s->nspare++;
}

/* hbuf holds need bytes (its bytes kept). 0, or -1 (out of memory). */
static int hbuf_reserve(sws_upstream_h2_stream_t *hs, size_t need)
{
    if (need <= hs->hcap)
        return 0;
    size_t cap = hs->hcap < 1024 ? 1024 : hs->hcap;
    while (cap < need)
        cap *= 2;
    char *b = realloc(hs->hbuf, cap);
    if (b == NULL)
        return -1;
    hs->hbuf = b;
    hs->hcap = cap;
    return 0;
}

/* A request's stream before nghttp2 opened it (its HEADERS not sent): no
 * stream user data yet, so a walk. */
static sws_upstream_h2_stream_t *stream_by_id(sws_upstream_h2_conn_t *c, int32_t id)
{
    for (sws_upstream_h2_stream_t *hs = c->streams; hs != NULL; hs = hs->next)
        if (hs->id == id)
            return hs;
    return NULL;
}

/* The user is gone: the window opens for what it held (the connection's
 * share too, or the member would stall every stream). */
static void stream_detach(sws_upstream_h2_stream_t *hs)
{
    hs->data = NULL;
    if (hs->held > 0 && !hs->c->closed)
        nghttp2_session_consume(hs->c->ng, hs->id, hs->held);
    hs->held = 0;
}

static void stream_fail(sws_upstream_h2_stream_t *hs, sws_upstream_h2_fail_t kind,
                        const char *why)
{
    void *data = hs->data;
    if (data == NULL)
        return;
    stream_detach(hs);
    hs->ops->failed(data, kind, why);
}

/* The fields collected, as the user sees them. */
static unsigned stream_fields(const sws_upstream_h2_stream_t *hs, sws_header_t *out)
{
    for (unsigned i = 0; i < hs->nf; i++)
        out[i] = (sws_header_t){ { hs->hbuf + hs->f[i].name, hs->f[i].name_len },
                                 { hs->hbuf + hs->f[i].value, hs->f[i].value_len } };
    return hs->nf;
}

static void stream_end(sws_upstream_h2_stream_t *hs, int with_trailers)
{
    sws_header_t t[SWS_UPSTREAM_H2_MAX_FIELDS];
    unsigned n = with_trailers ? stream_fields(hs, t) : 0;
    void *data = hs->data;
    sws_upstream_h2_conn_t *c = hs->c;
    /* An answer before the end of our body makes the rest moot
     * (RFC 9113 8.1): stop sending it. */
    if (!hs->local_ended)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_NO_ERROR);
    stream_detach(hs);
    /* As an HTTP/1.1 exchange given back does (ADR 0030): by now a TLS
     * 1.3 member has sent its ticket. */
    if (c->u != NULL)
        sws_upstream_keep_session(c->u);
    hs->ops->end(data, t, n);
}

/* ---- nghttp2 callbacks (no connection is closed or freed inside them) ---- */

static sws_upstream_h2_stream_t *live_stream(nghttp2_session *ng, int32_t id)
{
    sws_upstream_h2_stream_t *hs = nghttp2_session_get_stream_user_data(ng, id);
    return hs != NULL && hs->data != NULL ? hs : NULL;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    (void)user;
    sws_upstream_h2_stream_t *hs = live_stream(ng, frame->hd.stream_id);
    if (hs != NULL && frame->hd.type == NGHTTP2_HEADERS) {
        hs->nf = 0;
        hs->hlen = 0;
        if (!hs->got_head) {
            hs->status = 0;
            hs->length = SWS_STREAM_LENGTH_UNKNOWN;
        }
    }
    return 0;
}

static int field_add(sws_upstream_h2_stream_t *hs, const uint8_t *name, size_t namelen,
                     const uint8_t *value, size_t valuelen)
{
    size_t need = hs->hlen + namelen + valuelen;
    if (hs->nf >= SWS_UPSTREAM_H2_MAX_FIELDS || need > SWS_UPSTREAM_H2_MAX_HEAD) {
        hs->invalid = "response head or trailers too large";
        return -1;
    }
    if (hbuf_reserve(hs, need) < 0) {
        hs->invalid = "out of memory for the response head";
        return -1;
    }
    field_at_t *f = &hs->f[hs->nf++];
    f->name = (uint32_t)hs->hlen;
    f->name_len = (uint32_t)namelen;
    memcpy(hs->hbuf + hs->hlen, name, namelen);
    hs->hlen += namelen;
    f->value = (uint32_t)hs->hlen;
    f->value_len = (uint32_t)valuelen;
    memcpy(hs->hbuf + hs->hlen, value, valuelen);
    hs->hlen += valuelen;
    return 0;
}

/* nghttp2 checked the fields (names lowercase, pseudo-fields first and
 * known, a content-length that the body will match). */
static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags;
    (void)user;
    sws_upstream_h2_stream_t *hs = live_stream(ng, frame->hd.stream_id);
    if (hs == NULL || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    sws_str_t n = { (const char *)name, namelen };
    if (namelen > 0 && name[0] == ':') {
        if (sws_str_caseeq_lit(n, ":status") && valuelen == 3)
            hs->status = (unsigned)(value[0] - '0') * 100 + (unsigned)(value[1] - '0') * 10 +
                         (unsigned)(value[2] - '0');
        return 0;
    }
    if (!hs->got_head && sws_str_caseeq_lit(n, "content-length")) {
        uint64_t v = 0;
        for (size_t i = 0; i < valuelen; i++)
            v = v * 10 + (uint64_t)(value[i] - '0'); /* digits: nghttp2 checked them */
        hs->length = v;
    }
    if (field_add(hs, name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    return 0;
}

/* A HEADERS frame is complete: a head (interim or final) or the trailers. */
static void headers_done(sws_upstream_h2_stream_t *hs, int end_stream)
{
    if (hs->got_head) { /* trailers: they end the stream (nghttp2 checked) */
        stream_end(hs, 1);
        return;
    }
    if (hs->status < 200 &&
        (hs->interim += hs->hlen + INTERIM_LINE) > SWS_UPSTREAM_H2_MAX_INTERIM) {
        hs->invalid = "interim (1xx) heads beyond 16 KiB";
        nghttp2_submit_rst_stream(hs->c->ng, NGHTTP2_FLAG_NONE, hs->id,
                                  NGHTTP2_ENHANCE_YOUR_CALM);
        return;
    }
    sws_header_t h[SWS_UPSTREAM_H2_MAX_FIELDS];
    unsigned n = stream_fields(hs, h);
    if (hs->status >= 200)
        hs->got_head = 1;
    if (hs->ops->head(hs->data, hs->status, h, n, hs->length) < 0)
        return; /* the user gave the stream up */
    if (end_stream && hs->data != NULL)
        stream_end(hs, 0);
}

/* The member's SETTINGS_MAX_CONCURRENT_STREAMS went to 0: it takes no
 * stream (ADR 0056). Streams it has finish. Those nghttp2 holds back for
 * a slot would wait for one that may never come, until the read timeout
 * blamed the member with the wrong cause: they fail now as never sent
 * (CONNECT: another member may take them, passive health counts it), and
 * no request opens another connection to the member while this one says 0
 * (conn_refusing). Logged once per connection, not per request. */
static void conn_zero_update(sws_upstream_h2_conn_t *c)
{
    uint32_t max =
        nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    if ((max == 0) == c->zero)
        return;
    c->zero = (uint8_t)(max == 0);
    if (!c->zero) {
        sws_log_info("upstream h2: member %s raised SETTINGS_MAX_CONCURRENT_STREAMS to %u",
                     c->member, (unsigned)max);
        return;
    }
    sws_log_warn("upstream h2: member %s announces SETTINGS_MAX_CONCURRENT_STREAMS 0: "
                 "no requests to it until it raises it", c->member);
    /* Parked first, failed after: a failed() may send its request again,
     * which must not find them on the connection. */
    sws_upstream_h2_stream_t *hs, *next;
    for (hs = c->streams; hs != NULL; hs = next) {
        next = hs->next;
        if (hs->sent)
            continue;
        stream_unlink(hs);
        /* Dropped from nghttp2's queue: never sent, even if the setting
         * rises (nghttp2 keeps the frame, pointing into hbuf, until
         * then: the stream is freed only with the session). */
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_CANCEL);
        hs->next = c->parked;
        c->parked = hs;
    }
    for (hs = c->parked; hs != NULL; hs = hs->next) /* those parked before are detached */
        stream_fail(hs, SWS_UPSTREAM_H2_CONNECT, ZERO_WHY);
}

/* Whether a frame, either way, moves a stream on: a head, body bytes, an
 * end or a reset. Only these re-arm the read timer (and the send timer
 * while a body waits for the member's window): PING, SETTINGS,
 * WINDOW_UPDATE or empty DATA frames, which a member may send forever
 * while it answers nothing, do not (conn_timer). */
static int stream_moved(const nghttp2_frame *frame)
{
    if (frame->hd.stream_id == 0)
        return 0;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_RST_STREAM:
        return 1;
    case NGHTTP2_DATA:
        return frame->hd.length > 0 || (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
    default:
        return 0;
    }
}

/* A frame either way: the connection's timer and the stream's wait move
 * on with it when it moves a stream. */
static void conn_stream_moved(sws_upstream_h2_conn_t *c, const nghttp2_frame *frame)
{
    if (!stream_moved(frame))
        return;
    c->moved = 1;
    sws_upstream_h2_stream_t *hs = live_stream(c->ng, frame->hd.stream_id);
    if (hs != NULL)
        hs->waited_ms = sws_loop_now_ms(c->set->ups->loop);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    sws_upstream_h2_conn_t *c = user;
    int end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    sws_upstream_h2_stream_t *hs;
    conn_stream_moved(c, frame);
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if ((hs = live_stream(ng, frame->hd.stream_id)) != NULL)
            headers_done(hs, end_stream);
        break;
    case NGHTTP2_DATA:
        if (end_stream && (hs = live_stream(ng, frame->hd.stream_id)) != NULL)
            stream_end(hs, 0);
        break;
    case NGHTTP2_GOAWAY:
        /* nghttp2 closes our streams above its last-stream-id with
         * REFUSED_STREAM (on_stream_close): they go elsewhere. */
        c->goaway = 1;
        conn_room_update(c);
        break;
    case NGHTTP2_SETTINGS: /* its SETTINGS_MAX_CONCURRENT_STREAMS may have changed */
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            conn_zero_update(c);
        conn_room_update(c);
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *ng, uint8_t flags, int32_t id,
                              const uint8_t *data, size_t len, void *user)
{
    (void)flags;
    (void)user;
    sws_upstream_h2_stream_t *hs = live_stream(ng, id);
    if (hs == NULL) {
        nghttp2_session_consume(ng, id, len); /* nobody takes them */
        return 0;
    }
    /* Counted before the call: the user may take them (consumed) inside it. */
    hs->held += len;
    int rc = hs->ops->data(hs->data, (const char *)data, len);
    if (rc == 0 && hs->data != NULL) {
        nghttp2_session_consume(ng, id, hs->held);
        hs->held = 0;
    }
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    sws_upstream_h2_conn_t *c = user;
    conn_stream_moved(c, frame);
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR &&
        c->error[0] == '\0') /* nghttp2 ends the session: the member broke the protocol */
        snprintf(c->error, sizeof(c->error), "%s%s%.*s",
                 nghttp2_http2_strerror(frame->goaway.error_code),
                 frame->goaway.opaque_data_len > 0 ? ": " : "",
                 (int)frame->goaway.opaque_data_len, (const char *)frame->goaway.opaque_data);
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    sws_upstream_h2_stream_t *hs = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (hs == NULL)
        return 0;
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        hs->local_ended = 1;
    if (frame->hd.type == NGHTTP2_HEADERS && !hs->sent) {
        hs->sent = 1;
        /* Given up before its request could go (still connecting): it
         * went with the connection's first bytes; the member drops it. */
        if (hs->data == NULL)
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_CANCEL);
    }
    return 0;
}

/* A request that could not go (a GOAWAY came first): never opened, so
 * nghttp2 does not close it; it is refused, and ours to free. */
static int on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *frame, int code,
                             void *user)
{
    (void)ng;
    sws_upstream_h2_conn_t *c = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    sws_upstream_h2_stream_t *hs = stream_by_id(c, frame->hd.stream_id);
    if (hs == NULL)
        return 0;
    char why[96];
    snprintf(why, sizeof(why), "request not sent: %s", nghttp2_strerror(code));
    stream_unlink(hs);
    stream_fail(hs, SWS_UPSTREAM_H2_REFUSED, why);
    stream_free(c->set, hs);
    return 0;
}

/* nghttp2 says what it found wrong (a field it refuses, a frame where
 * none may come): kept for the stream (on_invalid_frame_recv) and the
 * connection (conn_why) that fail because of it, until the event that
 * brought it is settled (conn_settle). */
static int on_error(nghttp2_session *ng, int code, const char *msg, size_t len, void *user)
{
    (void)ng;
    (void)code;
    sws_upstream_h2_conn_t *c = user;
    snprintf(c->error, sizeof(c->error), "%.*s", (int)len, msg);
    return 0;
}

/* A frame that breaks HTTP's rules: nghttp2 resets its stream and says
 * why here, or in on_error just before; the stream's failure is logged
 * with that. One that breaks the protocol ends the connection, whose
 * GOAWAY says why (on_frame_send). */
static int on_invalid_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, int code,
                                 void *user)
{
    sws_upstream_h2_conn_t *c = user;
    sws_upstream_h2_stream_t *hs = live_stream(ng, frame->hd.stream_id);
    if (hs == NULL || hs->invalid != NULL ||
        (code != NGHTTP2_ERR_HTTP_HEADER && code != NGHTTP2_ERR_HTTP_MESSAGING))
        return 0;
    snprintf(hs->why, sizeof(hs->why), INVALID_WHY "%s",
             c->error[0] != '\0' ? c->error : nghttp2_strerror(code));
    hs->invalid = hs->why;
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    sws_upstream_h2_conn_t *c = user;
    sws_upstream_h2_stream_t *hs = nghttp2_session_get_stream_user_data(ng, id);
    if (hs == NULL)
        return 0;
    stream_unlink(hs);
    if (hs->data != NULL && hs->invalid != NULL) {
        stream_fail(hs, SWS_UPSTREAM_H2_INVALID, hs->invalid); /* freed below, after */
    } else if (hs->data != NULL) {
        char why[96];
        sws_upstream_h2_fail_t kind;
        if (code == NGHTTP2_REFUSED_STREAM || !hs->sent) {
            kind = SWS_UPSTREAM_H2_REFUSED;
            snprintf(why, sizeof(why), "stream refused (%s)",
                     c->goaway ? "GOAWAY" : nghttp2_http2_strerror(code));
        } else {
            kind = code == NGHTTP2_PROTOCOL_ERROR ? SWS_UPSTREAM_H2_INVALID
                                                  : SWS_UPSTREAM_H2_BROKEN;
            snprintf(why, sizeof(why), "stream reset (%s)", nghttp2_http2_strerror(code));
        }
        stream_fail(hs, kind, why);
    }
    stream_free(c->set, hs);
    return 0;
}

/* The request body, as the member's window allows. */
static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    sws_upstream_h2_stream_t *hs = src->ptr;
    if (hs->data == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* given up: reset */
    int eof = 0;
    size_t n = hs->ops->body(hs->data, (char *)buf, len, &eof);
    if (hs->data == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (!eof) {
        if (n > 0)
            return (ssize_t)n;
        hs->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    const sws_header_t *t = NULL;
    unsigned nt = hs->ops->trailers != NULL ? hs->ops->trailers(hs->data, &t) : 0;
    if (nt > 0) {
        nghttp2_nv nv[SWS_REQUEST_MAX_HEADERS];
        unsigned k = 0;
        for (unsigned i = 0; i < nt && k < SWS_REQUEST_MAX_HEADERS; i++)
            nv[k++] = (nghttp2_nv){ (uint8_t *)t[i].name.p, (uint8_t *)t[i].value.p,
                                    t[i].name.len, t[i].value.len, NGHTTP2_NV_FLAG_NONE };
        if (nghttp2_submit_trailer(ng, id, nv, k) == 0)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

/* ---- the connection ---- */

static void conn_unlink(sws_upstream_h2_conn_t *c)
{
    sws_upstream_h2_set_t *s = c->set;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Close now; the session and the memory go at the set's reap (a caller
 * up the stack may be an nghttp2 call on this session). Streams still
 * held by users must have been failed (conn_fail). */
static void conn_close(sws_upstream_h2_conn_t *c)
{
    sws_upstream_h2_set_t *s = c->set;
    if (c->closed)
        return;
    c->closed = 1;
    conn_room_update(c);
    conn_unlink(c);
    sws_defer_cancel(&c->kick);
    sws_upstream_close(c->u);
    c->u = NULL;
    c->next = s->dead;
    s->dead = c;
    sws_loop_defer(s->ups->loop, &s->reap);
}

/* Why the connection ends, into buf: what, and nghttp2's word on what
 * the member did wrong when it ended the session for that. */
static const char *conn_why(sws_upstream_h2_conn_t *c, const char *what, char *buf,
                            size_t len)
{
    if (c->error[0] == '\0')
        return what;
    snprintf(buf, len, "%s: %s", what, c->error);
    return buf;
}

/* The connection is lost: every stream on it fails (one never sent is
 * refused, whatever broke: the member did not see it), then it closes. */
static void conn_fail(sws_upstream_h2_conn_t *c, sws_upstream_h2_fail_t kind, const char *why)
{
    if (c->closed)
        return;
    c->goaway = 1; /* a retry from a failed() below must go elsewhere */
    conn_room_update(c);
    for (sws_upstream_h2_stream_t *hs = c->streams; hs != NULL; hs = hs->next) {
        sws_upstream_h2_fail_t k = kind == SWS_UPSTREAM_H2_BROKEN && !hs->sent
                                       ? SWS_UPSTREAM_H2_REFUSED
                                       : kind;
        stream_fail(hs, k, hs->invalid != NULL ? hs->invalid : why);
    }
    conn_close(c);
}

/* A request body that has bytes for the member (neither ended nor
 * waiting for its client) while the member's window, the stream's or
 * the connection's, is shut. */
static int stream_window_shut(const sws_upstream_h2_stream_t *hs)
{
    nghttp2_session *ng = hs->c->ng;
    return hs->sent && !hs->local_ended && !hs->deferred &&
           (nghttp2_session_get_stream_remote_window_size(ng, hs->id) <= 0 ||
            nghttp2_session_get_remote_window_size(ng) <= 0);
}

/* Whether hs waits for the member (its answer, or the window its body
 * needs), not for its client. */
static int stream_waits(const sws_upstream_h2_stream_t *hs)
{
    return hs->data != NULL && hs->held == 0 && !hs->deferred;
}

/* The connection's timer is re-armed whenever a stream moves, so a
 * stream starved beside a moving one would wait as long as the other
 * moves: when one moved, a stream that has waited a whole read timeout
 * (send, for a body the window holds) fails alone, reset with CANCEL, as
 * the timer would have failed it. So a starved stream waits at most two
 * timeouts (ADR 0069). */
static void conn_expire_starved(sws_upstream_h2_conn_t *c)
{
    uint64_t now = sws_loop_now_ms(c->set->ups->loop);
    sws_upstream_h2_stream_t *hs, *next;
    for (hs = c->streams; hs != NULL; hs = next) {
        next = hs->next;
        if (!stream_waits(hs))
            continue;
        int shut = stream_window_shut(hs);
        if (now - hs->waited_ms <
            c->u->conf.timeout_ms[shut ? SWS_UPSTREAM_T_SEND : SWS_UPSTREAM_T_READ])
            continue;
        const sws_upstream_h2_ops_t *ops = hs->ops;
        void *data = hs->data;
        sws_upstream_h2_cancel(hs); /* a failed() below may send it again, here too */
        if (shut)
            ops->failed(data, SWS_UPSTREAM_H2_SEND_TIMEOUT, "send timed out");
        else
            ops->failed(data, SWS_UPSTREAM_H2_READ_TIMEOUT, "read timed out");
    }
}

/* progress: bytes went to the socket. The send timer for a full socket
 * is re-armed by them; the read timer, and the send timer for a body the
 * member's window holds, only by a stream that moved (stream_moved):
 * bytes of connection chatter, the PING ACKs we write as well, move no
 * request on. */
static void conn_timer(sws_upstream_h2_conn_t *c, int progress)
{
    int want = NO_TIMER;
    if (c->connecting) {
        want = SWS_UPSTREAM_T_CONNECT;
    } else if (c->send_blocked) {
        want = SWS_UPSTREAM_T_SEND;
    } else if (c->nstreams == 0) {
        want = SWS_UPSTREAM_T_IDLE;
    } else {
        /* The member is waited for by a stream that is neither held by
         * its client (held bytes) nor waiting for its client's body: for
         * its answer, or for the window its body needs. */
        for (sws_upstream_h2_stream_t *hs = c->streams; hs != NULL; hs = hs->next) {
            if (!stream_waits(hs))
                continue;
            if (stream_window_shut(hs)) {
                want = SWS_UPSTREAM_T_SEND;
                break;
            }
            want = SWS_UPSTREAM_T_READ;
        }
    }
    int rearm = want != c->timer || (c->send_blocked ? progress : c->moved);
    if (want == NO_TIMER) {
        if (c->timer != NO_TIMER)
            sws_upstream_disarm(c->u);
    } else if (rearm) {
        sws_upstream_arm(c->u, (enum sws_upstream_timer)want);
    }
    c->timer = want;
    c->moved = 0;
}

/* What nghttp2 has for the member, copied into obuf while it fits; a
 * frame that does not fit stays nghttp2's (c->out). 0, or -1 when the
 * connection failed. */
static int conn_gather(sws_upstream_h2_conn_t *c)
{
    while (c->olen < OBUF) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->ng, &d);
        if (n < 0) {
            conn_fail(c, SWS_UPSTREAM_H2_INVALID, nghttp2_strerror((int)n));
            return -1;
        }
        if (c->closed)
            return -1;
        if (n == 0)
            break;
        if ((size_t)n > OBUF - c->olen) {
            c->out = d;
            c->out_len = (size_t)n;
            break;
        }
        memcpy(c->obuf + c->olen, d, (size_t)n);
        c->olen += (size_t)n;
    }
    return 0;
}

static int conn_pending(const sws_upstream_h2_conn_t *c)
{
    return c->olen > 0 || c->out_len > 0;
}

/* Write what nghttp2 has for the member until the socket is full. 0, or
 * -1 when the connection failed. */
static int conn_flush(sws_upstream_h2_conn_t *c, int *progress)
{
    if (c->connecting)
        return 0;
    for (;;) {
        if (!conn_pending(c) && conn_gather(c) < 0)
            return -1;
        int from_obuf = c->olen > 0;
        const uint8_t *p = from_obuf ? c->obuf + c->ooff : c->out;
        size_t len = from_obuf ? c->olen - c->ooff : c->out_len;
        if (len == 0)
            break;
        ssize_t w = sws_upstream_write(c->u, p, len);
        if (w > 0) {
            if (!from_obuf) {
                c->out += w;
                c->out_len -= (size_t)w;
            } else if ((c->ooff += (size_t)w) == c->olen) {
                c->ooff = c->olen = 0;
            }
            *progress = 1;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->send_blocked = 1;
            return 0;
        }
        conn_fail(c, SWS_UPSTREAM_H2_BROKEN, w < 0 ? strerror(errno) : "send wrote nothing");
        return -1;
    }
    c->send_blocked = 0;
    return 0;
}

/* Read until the socket is empty, feeding nghttp2 (flow control, not
 * reading, is what holds a member back); events: the epoll ones that
 * woke us. 0, or -1 when it failed. */
static int conn_read(sws_upstream_h2_conn_t *c, uint32_t events, int *progress)
{
    uint8_t buf[READ_CHUNK];
    for (;;) {
        ssize_t n = sws_upstream_read(c->u, buf, sizeof(buf));
        if (n > 0) {
            *progress = 1;
            ssize_t r = nghttp2_session_mem_recv(c->ng, buf, (size_t)n);
            if (r < 0) {
                char why[WHY_MAX + 64];
                conn_fail(c, SWS_UPSTREAM_H2_INVALID,
                          conn_why(c, nghttp2_strerror((int)r), why, sizeof(why)));
                return -1;
            }
            /* A short read in the clear emptied the socket (over TLS the
             * SSL may hold more): a later byte brings a new edge, so the
             * read that would answer EAGAIN is saved, unless the member's
             * FIN or an error came too and must be read. */
            if ((size_t)n < sizeof(buf) && c->u->ssl == NULL &&
                !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                return 0;
            continue;
        }
        if (n == 0) {
            conn_fail(c, SWS_UPSTREAM_H2_BROKEN, "closed by the member");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        conn_fail(c, SWS_UPSTREAM_H2_BROKEN, strerror(errno));
        return -1;
    }
}

static unsigned idle_count(const sws_upstream_h2_set_t *s, uint64_t member_id)
{
    unsigned n = 0;
    for (const sws_upstream_h2_conn_t *c = s->conns; c != NULL; c = c->next)
        n += c->member_id == member_id && c->nstreams == 0 && !c->zero;
    return n;
}

/* After any activity: a connection without streams that may not stay
 * idle closes; the others get the timer they now need. */
static void conn_settle(sws_upstream_h2_conn_t *c, int progress)
{
    if (c->closed)
        return;
    if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng) &&
        !conn_pending(c)) {
        char why[WHY_MAX + 64];
        conn_fail(c, c->error[0] != '\0' ? SWS_UPSTREAM_H2_INVALID : SWS_UPSTREAM_H2_BROKEN,
                  conn_why(c, "session ended", why, sizeof(why)));
        return;
    }
    c->error[0] = '\0'; /* what it said is logged by now, or concerned a stream only */
    if (c->moved) {
        conn_expire_starved(c);
        if (c->closed) /* a request sent again may have ended it */
            return;
    }
    /* One that says 0 stays (until its idle timeout) whatever keepalive
     * allows: it is what keeps requests from opening more (conn_refusing). */
    if (c->nstreams == 0 && (c->goaway || c->retiring ||
                             (!c->zero && idle_count(c->set, c->member_id) > c->u->conf.keepalive))) {
        conn_close(c);
        return;
    }
    conn_timer(c, progress);
}

static void conn_on_event(sws_upstream_conn_t *u, uint32_t events)
{
    sws_upstream_h2_conn_t *c = u->data;
    char err[128];
    int progress = 0;
    if (c->connecting) {
        /* The TLS handshake waits for either direction; a connect only
         * for EPOLLOUT. */
        if (!u->handshaking && !(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int rc = sws_upstream_connected(u, err, sizeof(err));
        if (rc == 1)
            return; /* under the connect timer still */
        if (rc < 0 || (u->ssl != NULL && sws_upstream_tls_alpn_h2(u->ssl, err, sizeof(err)) < 0)) {
            conn_fail(c, SWS_UPSTREAM_H2_CONNECT, err);
            return;
        }
        c->connecting = 0;
        progress = 1;
        /* The member's first frames may have come with its last
         * handshake flight: drained by no read yet, they bring no new
         * edge. */
        if (u->ssl != NULL)
            events |= EPOLLIN;
    }
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && conn_read(c, events, &progress) < 0)
        return;
    if (conn_flush(c, &progress) < 0)
        return;
    conn_settle(c, progress);
}

static void conn_on_timeout(sws_upstream_conn_t *u, enum sws_upstream_timer which)
{
    sws_upstream_h2_conn_t *c = u->data;
    switch (which) {
    case SWS_UPSTREAM_T_CONNECT:
        conn_fail(c, SWS_UPSTREAM_H2_CONNECT_TIMEOUT, "connect timed out");
        break;
    case SWS_UPSTREAM_T_SEND:
        conn_fail(c, SWS_UPSTREAM_H2_SEND_TIMEOUT, "send timed out");
        break;
    case SWS_UPSTREAM_T_READ:
        conn_fail(c, SWS_UPSTREAM_H2_READ_TIMEOUT, "read timed out");
        break;
    default:
        conn_close(c); /* idle */
        break;
    }
}

static const sws_upstream_ops_t conn_ops = {
    .on_event = conn_on_event,
    .on_timeout = conn_on_timeout,
};

/* Send what a call outside the connection's events queued (a request, a
 * reset, a window update, more body). */
static void conn_kick(sws_defer_t *d)
{
    sws_upstream_h2_conn_t *c = sws_container_of(d, sws_upstream_h2_conn_t, kick);
    int progress = 0;
    if (conn_flush(c, &progress) == 0)
        conn_settle(c, progress);
}

static void set_reap(sws_defer_t *d)
{
    sws_upstream_h2_set_t *s = sws_container_of(d, sws_upstream_h2_set_t, reap);
    while (s->dead != NULL) {
        sws_upstream_h2_conn_t *c = s->dead;
        s->dead = c->next;
        nghttp2_session_del(c->ng); /* first: its frames may point into the streams' hbuf */
        while (c->streams != NULL) {
            sws_upstream_h2_stream_t *hs = c->streams;
            c->streams = hs->next;
            stream_free(s, hs);
        }
        while (c->parked != NULL) {
            sws_upstream_h2_stream_t *hs = c->parked;
            c->parked = hs->next;
            stream_free(s, hs);
        }
        free(c);
    }
}

static nghttp2_session *session_new(sws_upstream_h2_conn_t *c)
{
    nghttp2_session_callbacks *cb;
    nghttp2_option *opt;
    nghttp2_session *ng = NULL;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame_recv);
    nghttp2_session_callbacks_set_error_callback2(cb, on_error);
    /* Windows open as the clients take the bytes (the top). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (nghttp2_session_client_new2(&ng, cb, c, opt) != 0)
        ng = NULL;
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (ng == NULL)
        return NULL;
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 } };
    if (nghttp2_submit_settings(ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(ng, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        nghttp2_session_del(ng);
        return NULL;
    }
    return ng;
}

/* A connection on u (held, its events ours from now on). NULL with err
 * set (u is closed). */
static sws_upstream_h2_conn_t *conn_new(sws_upstream_h2_set_t *s, sws_upstream_conn_t *u,
                                        const sws_upstream_conf_t *conf, const char *member,
                                        char *err, size_t errlen)
{
    sws_upstream_h2_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->ng = session_new(c)) == NULL) {
        free(c);
        sws_upstream_close(u);
        sws_errf(err, errlen, "out of memory for an HTTP/2 connection");
        return NULL;
    }
    c->set = s;
    c->u = u;
    c->member_id = u->member_id;
    snprintf(c->member, sizeof(c->member), "%s", member != NULL ? member : "-");
    c->timer = NO_TIMER;
    u->ops = &conn_ops;
    u->data = c;
    sws_upstream_configure(u, conf);
    c->connecting = u->connecting;
    sws_defer_init(&c->kick, conn_kick);
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    conn_room_update(c);
    return c;
}

static sws_upstream_h2_conn_t *conn_open(sws_upstream_h2_set_t *s, uint64_t member_id,
                                         const sws_upstream_addr_t *addr,
                                         const sws_upstream_tls_t *tls,
                                         const sws_upstream_conf_t *conf, const char *member,
                                         char *err, size_t errlen)
{
    /* Always a new socket: an idle one of the set speaks HTTP/1. */
    sws_upstream_conn_t *u =
        sws_upstream_open(s->ups, member_id, addr, tls, &conn_ops, NULL, err, errlen);
    return u == NULL ? NULL : conn_new(s, u, conf, member, err, errlen);
}

int sws_upstream_h2_adopt(sws_upstream_h2_set_t *s, uint64_t member_id, int fd,
                          const sws_upstream_conf_t *conf)
{
    char err[128];
    sws_upstream_addr_t none = { .len = 0 };
    if (sws_upstream_adopt(s->ups, member_id, fd) < 0)
        return -1;
    sws_upstream_conn_t *u =
        sws_upstream_get(s->ups, member_id, &none, &conn_ops, NULL, err, sizeof(err));
    if (u == NULL)
        return -1;
    sws_upstream_h2_conn_t *c = conn_new(s, u, conf, NULL, err, sizeof(err));
    if (c == NULL)
        return -1;
    sws_loop_defer(s->ups->loop, &c->kick); /* its preface */
    return 0;
}

/* An open connection to the member that takes one more stream, over TLS
 * or not as asked (a reload may switch a pool, keeping its members' ids). */
static sws_upstream_h2_conn_t *conn_with_room(sws_upstream_h2_set_t *s, uint64_t member_id,
                                              int tls)
{
    for (sws_upstream_h2_conn_t *c = s->room; c != NULL; c = c->room_next)
        if (c->member_id == member_id && (c->u->ssl != NULL) == tls)
            return c;
    return NULL;
}

/* An open connection to the member that says it takes no stream (its
 * SETTINGS_MAX_CONCURRENT_STREAMS is 0): asked only when none has room,
 * where a new connection would be opened otherwise. */
static const sws_upstream_h2_conn_t *conn_refusing(const sws_upstream_h2_set_t *s,
                                                   uint64_t member_id, int tls)
{
    for (const sws_upstream_h2_conn_t *c = s->conns; c != NULL; c = c->next)
        if (c->member_id == member_id && c->zero && !c->goaway && !c->retiring &&
            (c->u->ssl != NULL) == tls)
            return c;
    return NULL;
}

/* ---- the request's head ---- */

/* Fields HTTP/2 forbids (connection-specific: Transfer-Encoding, which
 * proxy_req.c writes for a body of unknown length that DATA frames here)
 * and TE, which goes only as the `te: trailers` we add. The one Host
 * proxy_req.c writes becomes :authority. */
static int field_dropped(sws_str_t name)
{
    const sws_http_token_t *t = sws_http_token_find(name.p, name.len);
    return t != NULL && ((t->flags & SWS_TKF_H2_FORBIDDEN) || t->id == SWS_TK_TE);
}

/* A request field, not copied by nghttp2: names are literals or lie in
 * the stream's hbuf, which is left alone until nghttp2 is done with the
 * HEADERS frame (sent, not sent, or the session deleted; ADR 0051). */
#define NV_STR(n, v)                                                      \
    ((nghttp2_nv){ (uint8_t *)(n).p, (uint8_t *)(v).p, (n).len, (v).len, \
                   NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE })

/* The fields of a head proxy_req.c writes: the client's, at most 11 it
 * adds (Host, Connection, Upgrade, Expect, Via, the four X-Forwarded-*
 * and X-Real-IP, the framing), the 4 pseudo-fields and te. */
#define NV_MAX (SWS_REQUEST_MAX_HEADERS + 16u)

/* The HTTP/1.1 head in h (ours, mutable: names are lowercased in place)
 * as HTTP/2 fields into nv (room for max: the head's lines and 5); how
 * many, or -1 when it is not a head proxy_req.c writes. nv[3] is kept
 * for :authority (pseudo-fields come first), closed up when there is no
 * Host. */
static int head_to_nv(char *h, size_t len, int te_trailers, int https, nghttp2_nv *nv,
                      size_t max)
{
    char *end = h + len, *p = h;
    char *sp1 = memchr(p, ' ', len);
    char *sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
    char *eol = sp2 != NULL ? memchr(sp2, '\n', (size_t)(end - sp2)) : NULL;
    if (eol == NULL || max < 5)
        return -1;
    nv[0] = NV_STR(SWS_STR(":method"), ((sws_str_t){ p, (size_t)(sp1 - p) }));
    nv[1] = NV_STR(SWS_STR(":scheme"), https ? SWS_STR("https") : SWS_STR("http"));
    nv[2] = NV_STR(SWS_STR(":path"), ((sws_str_t){ sp1 + 1, (size_t)(sp2 - sp1 - 1) }));
    int has_authority = 0;
    size_t k = 4;
    for (p = eol + 1; p < end && *p != '\r'; p = eol + 1) {
        eol = memchr(p, '\n', (size_t)(end - p));
        char *colon = memchr(p, ':', (size_t)(end - p));
        if (eol == NULL || colon == NULL || colon + 2 > eol - 1 || k + 1 >= max)
            return -1;
        for (char *q = p; q < colon; q++)
            if (*q >= 'A' && *q <= 'Z')
                *q = (char)(*q - 'A' + 'a');
        sws_str_t name = { p, (size_t)(colon - p) };
        sws_str_t value = { colon + 2, (size_t)(eol - 1 - (colon + 2)) };
        if (sws_str_caseeq_lit(name, "host")) {
            /* An empty Host (an HTTP/1.0 client sent none) is no
             * :authority: RFC 9113 8.3.1 refuses an empty one. */
            if (!has_authority && value.len > 0) {
                nv[3] = NV_STR(SWS_STR(":authority"), value);
                has_authority = 1;
            }
        } else if (!field_dropped(name)) {
            nv[k++] = NV_STR(name, value);
        }
    }
    if (te_trailers)
        nv[k++] = NV_STR(SWS_STR("te"), SWS_STR("trailers"));
    if (!has_authority) {
        memmove(&nv[3], &nv[4], (k - 4) * sizeof(nv[0]));
        k--;
    }
    return (int)k;
}

/* ---- the user's side ---- */

sws_upstream_h2_stream_t *sws_upstream_h2_submit(sws_upstream_h2_set_t *s, uint64_t member_id,
                                                 const sws_upstream_addr_t *addr,
                                                 const sws_upstream_tls_t *tls,
                                                 const sws_upstream_conf_t *conf,
                                                 const sws_upstream_h2_req_t *req,
                                                 const sws_upstream_h2_ops_t *ops, void *data,
                                                 sws_upstream_h2_fail_t *kind, char *err,
                                                 size_t errlen)
{
    sws_upstream_h2_stream_t *hs = stream_get(s);
    if (hs == NULL || hbuf_reserve(hs, req->head_len) < 0) {
        if (hs != NULL)
            stream_free(s, hs);
        *kind = SWS_UPSTREAM_H2_INVALID;
        sws_errf(err, errlen, "out of memory for an HTTP/2 request");
        return NULL;
    }
    /* A copy the stream owns: names are lowercased in it, and nghttp2
     * reads the fields from it when it sends the HEADERS frame. */
    memcpy(hs->hbuf, req->head, req->head_len);
    nghttp2_nv nv[NV_MAX];
    int n = head_to_nv(hs->hbuf, req->head_len, req->te_trailers, tls != NULL, nv, NV_MAX);
    if (n < 0) {
        stream_free(s, hs);
        *kind = SWS_UPSTREAM_H2_INVALID;
        sws_errf(err, errlen, "the request head cannot be sent over HTTP/2");
        return NULL;
    }
    sws_upstream_h2_conn_t *c = conn_with_room(s, member_id, tls != NULL);
    if (c == NULL && conn_refusing(s, member_id, tls != NULL) != NULL) {
        stream_free(s, hs);
        *kind = SWS_UPSTREAM_H2_CONNECT;
        sws_errf(err, errlen, ZERO_WHY);
        return NULL;
    }
    if (c == NULL)
        c = conn_open(s, member_id, addr, tls, conf, req->member, err, errlen);
    if (c == NULL) {
        stream_free(s, hs);
        *kind = SWS_UPSTREAM_H2_CONNECT;
        return NULL;
    }
    sws_upstream_configure(c->u, conf); /* the latest request's pool settings */
    hs->c = c;
    hs->ops = ops;
    hs->data = data;
    hs->length = SWS_STREAM_LENGTH_UNKNOWN;
    hs->waited_ms = sws_loop_now_ms(s->ups->loop);
    nghttp2_data_provider dp = { .source.ptr = hs, .read_callback = body_read };
    int32_t id = nghttp2_submit_request(c->ng, NULL, nv, (size_t)n, req->has_body ? &dp : NULL,
                                        hs);
    if (id < 0) {
        stream_free(s, hs);
        /* What fails here (stream ids used up, memory) fails again on this
         * connection: left selectable, it would fail every later request
         * to the member, each counted against the member's health. */
        c->retiring = 1;
        conn_room_update(c);
        *kind = SWS_UPSTREAM_H2_REFUSED;
        sws_errf(err, errlen, "HTTP/2 request not queued: %s", nghttp2_strerror(id));
        conn_settle(c, 0);
        return NULL;
    }
    hs->id = id;
    hs->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = hs;
    c->streams = hs;
    c->nstreams++;
    conn_room_update(c);
    if (c->connecting)
        conn_timer(c, 0);
    else
        sws_loop_defer(s->ups->loop, &c->kick);
    return hs;
}

void sws_upstream_h2_cancel(sws_upstream_h2_stream_t *hs)
{
    if (hs == NULL || hs->data == NULL)
        return;
    sws_upstream_h2_conn_t *c = hs->c;
    stream_detach(hs);
    if (c->closed)
        return;
    /* One whose HEADERS has not gone yet is reset once it went
     * (on_frame_send): nghttp2 has no stream to reset before. */
    if (hs->sent)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_CANCEL);
    sws_loop_defer(c->set->ups->loop, &c->kick);
}

void sws_upstream_h2_resume(sws_upstream_h2_stream_t *hs)
{
    sws_upstream_h2_conn_t *c = hs->c;
    if (hs->data == NULL || c->closed || !hs->deferred)
        return;
    hs->deferred = 0;
    hs->waited_ms = sws_loop_now_ms(c->set->ups->loop); /* it waits for the member again */
    nghttp2_session_resume_data(c->ng, hs->id);
    sws_loop_defer(c->set->ups->loop, &c->kick);
}

void sws_upstream_h2_consumed(sws_upstream_h2_stream_t *hs)
{
    sws_upstream_h2_conn_t *c = hs->c;
    if (hs->data == NULL || c->closed || hs->held == 0)
        return;
    nghttp2_session_consume(c->ng, hs->id, hs->held);
    hs->held = 0;
    hs->waited_ms = sws_loop_now_ms(c->set->ups->loop); /* it waits for the member again */
    sws_loop_defer(c->set->ups->loop, &c->kick);
}

void sws_upstream_h2_close_idle(sws_upstream_h2_set_t *s, uint64_t member_id)
{
    sws_upstream_h2_conn_t *next;
    for (sws_upstream_h2_conn_t *c = s->conns; c != NULL; c = next) {
        next = c->next;
        if (c->member_id != member_id)
            continue;
        c->retiring = 1;
        conn_room_update(c);
        if (c->nstreams == 0)
            conn_close(c);
    }
}

static void close_idle_hook(void *arg, uint64_t member_id)
{
    sws_upstream_h2_close_idle(arg, member_id);
}

unsigned sws_upstream_h2_count(const sws_upstream_h2_set_t *s, uint64_t member_id,
                               unsigned *idle)
{
    unsigned n = 0;
    for (const sws_upstream_h2_conn_t *c = s->conns; c != NULL; c = c->next)
        n += c->member_id == member_id;
    if (idle != NULL)
        *idle = idle_count(s, member_id);
    return n;
}

void sws_upstream_h2_set_init(sws_upstream_h2_set_t *s, sws_upstream_set_t *ups)
{
    s->ups = ups;
    sws_defer_init(&s->reap, set_reap);
    ups->close_idle_hook = close_idle_hook;
    ups->close_idle_arg = s;
}

void sws_upstream_h2_set_close(sws_upstream_h2_set_t *s)
{
    if (s->ups == NULL)
        return;
    while (s->conns != NULL)
        conn_close(s->conns); /* no user is left to tell */
    sws_defer_cancel(&s->reap);
    set_reap(&s->reap);
    while (s->spare != NULL) {
        sws_upstream_h2_stream_t *hs = s->spare;
        s->spare = hs->next;
        stream_destroy(hs);
    }
    s->nspare = 0;
    s->ups->close_idle_hook = NULL;
}
