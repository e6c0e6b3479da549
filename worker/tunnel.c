/* The byte tunnel after a 101 (tunnel.h, ADR 0020). */
#include "worker/tunnel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/log.h"
#include "worker/conn.h"

struct sws_tunnel {
    sws_stream_t *st;         /* the exchange: its log line is written when the tunnel ends */
    sws_conn_t *c;            /* the client's connection, switched to sws_tunnel_proto */
    sws_upstream_conn_t *u;   /* ours, closed with the tunnel */
    sws_tunnel_half_t up;     /* client -> upstream */
    uint8_t down_eof;         /* the upstream sent its FIN (passed on by conn.c) */
    uint8_t down_readable;    /* the upstream may have bytes (as sws_tunnel_half_t.readable) */
    uint8_t down_hup;         /* ... and a FIN behind them */
    uint8_t ended;            /* the client connection closes after its output */
    uint64_t taken;           /* taken() at the last expiry of the timer */
    char *early;              /* upstream bytes that came with the 101, for the client */
    size_t early_len;
};

enum sws_tunnel_pump_result sws_tunnel_pump(sws_tunnel_half_t *h, int from, int to,
                                            unsigned reads, int *progress)
{
    unsigned done = 0;
    for (;;) {
        while (h->len > 0) {
            ssize_t n = h->to_u != NULL ? sws_upstream_write(h->to_u, h->out, h->len)
                                        : send(to, h->out, h->len, MSG_NOSIGNAL);
            if (n > 0) {
                h->out += n;
                h->len -= (size_t)n;
                h->moved += (uint64_t)n;
                *progress = 1;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return SWS_TUNNEL_WAIT; /* the buffer stays full: `from` is not read */
            return SWS_TUNNEL_ERROR;
        }
        if (h->eof) {
            if (!h->shut) {
                /* The peer may have closed already: nothing left to tell it. */
                if ((h->to_u != NULL ? sws_upstream_shutdown_write(h->to_u)
                                     : shutdown(to, SHUT_WR)) < 0 && errno != ENOTCONN)
                    return SWS_TUNNEL_ERROR;
                h->shut = 1;
            }
            return SWS_TUNNEL_WAIT;
        }
        if (!h->readable)
            return SWS_TUNNEL_WAIT;
        if (done++ == reads)
            return SWS_TUNNEL_MORE;
        ssize_t n = recv(from, h->buf, SWS_TUNNEL_BUF, 0);
        if (n > 0) {
            h->out = h->buf;
            h->len = (size_t)n;
            if ((size_t)n < SWS_TUNNEL_BUF && !h->hup)
                h->readable = 0;
            continue;
        }
        if (n == 0) {
            h->eof = 1;
            h->readable = 0;
            *progress = 1;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            h->readable = 0;
            return SWS_TUNNEL_WAIT;
        }
        return SWS_TUNNEL_ERROR;
    }
}

/* Upstream -> client, straight into the connection's output, up to its
 * high-water mark and no further (so the mark is the bound this way, not
 * the mark plus a read); at the mark conn.c calls writable once it
 * drained. */
static enum sws_tunnel_pump_result pump_down(sws_tunnel_t *t, int *progress)
{
    sws_conn_t *c = t->c;
    for (unsigned i = 0; !t->down_eof && t->down_readable; i++) {
        size_t want = sws_conn_out_room(c);
        if (want == 0) {
            c->want_writable = 1;
            return SWS_TUNNEL_WAIT;
        }
        if (i == SWS_TUNNEL_READS_PER_RUN)
            return SWS_TUNNEL_MORE;
        if (want > SWS_TUNNEL_BUF)
            want = SWS_TUNNEL_BUF;
        if (sws_conn_reserve(c, want) < 0)
            return SWS_TUNNEL_ERROR;
        ssize_t n = sws_upstream_read(t->u, c->obuf + c->olen, want);
        if (n > 0) {
            c->olen += (size_t)n;
            t->st->req.body_bytes += (uint64_t)n;
            *progress = 1;
            if ((size_t)n < want && !t->down_hup)
                t->down_readable = 0;
            continue;
        }
        if (n == 0) {
            t->down_eof = 1;
            *progress = 1;
            sws_conn_shutdown_write(c); /* after what is queued */
            return SWS_TUNNEL_WAIT;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            t->down_readable = 0;
            return SWS_TUNNEL_WAIT;
        }
        return SWS_TUNNEL_ERROR;
    }
    return SWS_TUNNEL_WAIT;
}

/* The tunnel is over: the client connection closes once its output is
 * written (at once when it is gone: the write fails), and its close ends
 * the upstream's (tunnel_close). Never closes from here, so no caller
 * (conn.c's turn, an upstream event) finds its connection freed. */
static void tunnel_end(sws_tunnel_t *t, const char *why)
{
    sws_conn_t *c = t->c;
    t->ended = 1;
    sws_upstream_disarm(t->u);
    if (why != NULL)
        sws_log_info("client %s: tunnel to %s: %s", sws_conn_peer_text(c),
                     t->st->req.upstream.addr, why);
    c->close_after = 1;
    c->peer_eof = 1; /* conn_finish closes at once: no lingering read for a request */
    sws_conn_wake(c);
}

/* Bytes fd holds that its peer has not taken (SIOCOUTQ; 0 when unknown). */
static uint64_t unsent(int fd)
{
    int n = 0;
    return ioctl(fd, SIOCOUTQ, &n) == 0 && n > 0 ? (uint64_t)n : 0;
}

/* What the two peers took so far: bytes that left the kernel's buffers
 * (and the connection's output) toward them. A slow reader drains those
 * without a turn of the tunnel's, which reads again only once the output
 * is below its mark; the timer asks this, two system calls per expiry,
 * none per byte. Only compared for change. */
static uint64_t taken(const sws_tunnel_t *t)
{
    const sws_conn_t *c = t->c;
    return t->st->req.body_bytes - (c->olen - c->osent) - unsent(c->io.fd) + t->up.moved -
           unsent(t->u->io.fd);
}

/* The timer while the tunnel waits: the pool's idle timeout, or once one
 * side's FIN was passed on, its read timeout (the other side's last bytes
 * and FIN are an answer awaited, as HAProxy's `timeout client-fin` /
 * `server-fin` bound; ADR 0027). */
static void tunnel_arm(sws_tunnel_t *t)
{
    int half = t->up.shut || t->down_eof;
    sws_upstream_arm(t->u, half ? SWS_UPSTREAM_T_READ : SWS_UPSTREAM_T_IDLE);
}

/* Relay both ways as far as the sockets and the buffers allow. */
static void tunnel_run(sws_tunnel_t *t)
{
    sws_conn_t *c = t->c;
    if (t->ended)
        return;
    int progress = 0;
    t->up.readable = c->readable;
    t->up.hup = c->rdhup;
    enum sws_tunnel_pump_result up =
        sws_tunnel_pump(&t->up, c->io.fd, t->u->io.fd, SWS_TUNNEL_READS_PER_RUN, &progress);
    c->readable = t->up.readable;
    t->st->req.request_body_bytes = t->up.moved;
    if (up == SWS_TUNNEL_ERROR) {
        tunnel_end(t, strerror(errno));
        return;
    }
    enum sws_tunnel_pump_result down = pump_down(t, &progress);
    if (down == SWS_TUNNEL_ERROR) {
        tunnel_end(t, strerror(errno));
        return;
    }
    if (t->up.shut && t->down_eof) {
        tunnel_end(t, NULL);
        return;
    }
    if (progress)
        tunnel_arm(t);
    /* Reads left for the next turn: re-registering the upstream makes
     * epoll report it again in the next iteration (edge-triggered would
     * not), and its event runs both ways. */
    if ((up == SWS_TUNNEL_MORE || down == SWS_TUNNEL_MORE) &&
        sws_loop_mod(t->c->set->loop, &t->u->io, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) < 0) {
        tunnel_end(t, strerror(errno));
        return;
    }
    if (progress || c->want_writable)
        sws_conn_wake(c); /* nothing when inside the connection's turn */
}

/* ---- the upstream connection's callbacks ---- */

static void upstream_event(sws_upstream_conn_t *u, uint32_t events)
{
    sws_tunnel_t *t = u->data;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        t->down_readable = 1;
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        t->down_hup = 1;
    tunnel_run(t);
}

static void upstream_timeout(sws_upstream_conn_t *u, enum sws_upstream_timer which)
{
    sws_tunnel_t *t = u->data;
    uint64_t now = taken(t);
    if (now != t->taken) { /* bytes still drain toward a peer: not idle */
        t->taken = now;
        tunnel_arm(t);
        return;
    }
    tunnel_end(t, which == SWS_UPSTREAM_T_READ ? "half-closed, read timeout" : "idle timeout");
}

static const sws_upstream_ops_t tunnel_upstream_ops = {
    .on_event = upstream_event,
    .on_timeout = upstream_timeout,
};

sws_tunnel_t *sws_tunnel_new(sws_stream_t *st, sws_upstream_conn_t *u, const char *early,
                             size_t n)
{
    sws_tunnel_t *t = malloc(sizeof(*t) + SWS_TUNNEL_BUF + n);
    if (t == NULL) {
        sws_upstream_close(u);
        return NULL;
    }
    memset(t, 0, sizeof(*t));
    t->st = st;
    t->u = u;
    t->up.buf = (char *)(t + 1);
    t->up.to_u = u;
    t->early = t->up.buf + SWS_TUNNEL_BUF;
    memcpy(t->early, early, n);
    t->early_len = n;
    t->down_readable = 1; /* the proxy may have left bytes behind the 101 in the socket */
    u->ops = &tunnel_upstream_ops;
    u->data = t;
    return t;
}

void sws_tunnel_free(sws_tunnel_t *t)
{
    sws_upstream_close(t->u);
    free(t);
}

/* ---- the client connection's protocol (worker/proto.h) ---- */

/* The switch: bytes the client sent after its request head are the
 * tunnel's first, the upstream's early bytes go out after the 101. */
static void tunnel_init(sws_conn_t *c)
{
    sws_tunnel_t *t = c->proto_state;
    t->c = c;
    c->input_paused = 1; /* conn.c reads nothing: the tunnel reads the socket */
    if (c->rend > c->rpos) {
        t->up.out = c->rbuf + c->rpos;
        t->up.len = c->rend - c->rpos;
    }
    if (t->early_len > 0) {
        if (sws_conn_append(c, t->early, t->early_len) < 0) {
            tunnel_end(t, "out of memory");
            return;
        }
        t->st->req.body_bytes += t->early_len;
    }
    t->taken = taken(t);
    tunnel_arm(t);
}

static void tunnel_on_input(sws_conn_t *c)
{
    tunnel_run(c->proto_state);
}

static void tunnel_fail(sws_conn_t *c, unsigned status, const char *why)
{
    (void)status;
    tunnel_end(c->proto_state, why);
}

/* Nothing is due from the client as a request: conn.c runs no timer but
 * its send timeout; the idle timer is the upstream connection's. */
static enum sws_proto_wait tunnel_waiting_for(const sws_conn_t *c)
{
    (void)c;
    return SWS_PROTO_WAIT_RESPONSE;
}

/* The connection closed: so does the upstream's; the log counts what
 * reached the client's socket, not what was still queued. */
static void tunnel_close(sws_conn_t *c)
{
    sws_tunnel_t *t = c->proto_state;
    sws_request_t *r = &t->st->req;
    size_t queued = c->olen - c->osent;
    r->body_bytes -= queued <= r->body_bytes ? queued : r->body_bytes;
    r->request_body_bytes = t->up.moved;
    sws_tunnel_free(t);
}

const sws_proto_ops_t sws_tunnel_proto = {
    .state_size = 0,
    /* No setup nor destroy: the tunnel's memory is its own, not the
     * set's. No input_moved: conn.c moves input only when it reads, and
     * it reads nothing while input_paused is set. */
    .init = tunnel_init,
    .on_input = tunnel_on_input,
    .writable = tunnel_on_input,
    .fail = tunnel_fail,
    .waiting_for = tunnel_waiting_for,
    .close = tunnel_close,
};
