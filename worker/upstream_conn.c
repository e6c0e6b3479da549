/* Upstream connections and the per-worker idle pool (upstream_conn.h). */
#include "worker/upstream_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"

#include <openssl/ssl.h>

const sws_upstream_conf_t sws_upstream_conf_default = {
    .keepalive = SWS_UPSTREAM_KEEPALIVE_DEFAULT,
    .timeout_ms = {
        [SWS_UPSTREAM_T_CONNECT] = SWS_UPSTREAM_CONNECT_TIMEOUT_MS,
        [SWS_UPSTREAM_T_SEND] = SWS_UPSTREAM_SEND_TIMEOUT_MS,
        [SWS_UPSTREAM_T_READ] = SWS_UPSTREAM_READ_TIMEOUT_MS,
        [SWS_UPSTREAM_T_IDLE] = SWS_UPSTREAM_IDLE_TIMEOUT_MS,
    },
};

static void conn_on_io(sws_io_t *io, uint32_t events);
static void conn_on_timer(sws_timer_t *t);
static void set_reap(sws_defer_t *d);

/* The queue of this duration: kept, made, or when the set has all it may
 * keep, the nearest longer one (a timeout late rather than early), else
 * the longest. */
static sws_timer_queue_t *queue_for(sws_upstream_set_t *s, uint64_t ms)
{
    sws_timer_queue_t *longer = NULL, *longest = NULL;
    for (unsigned i = 0; i < s->nq; i++) {
        sws_timer_queue_t *q = &s->q[i];
        if (q->duration_ms == ms)
            return q;
        if (q->duration_ms > ms && (longer == NULL || q->duration_ms < longer->duration_ms))
            longer = q;
        if (longest == NULL || q->duration_ms > longest->duration_ms)
            longest = q;
    }
    if (s->nq < SWS_UPSTREAM_MAX_QUEUES) {
        sws_timer_queue_t *q = &s->q[s->nq++];
        sws_timer_queue_init(s->loop, q, ms);
        return q;
    }
    return longer != NULL ? longer : longest;
}

void sws_upstream_set_init(sws_upstream_set_t *s, sws_loop_t *loop)
{
    s->loop = loop;
    sws_defer_init(&s->reap, set_reap);
    /* The defaults' queues exist from the start: the common case never
     * makes one. */
    for (int i = 0; i < SWS_UPSTREAM_T_COUNT; i++)
        queue_for(s, sws_upstream_conf_default.timeout_ms[i]);
}

static sws_upstream_bucket_t *bucket_find(sws_upstream_set_t *s, uint64_t id)
{
    for (sws_upstream_bucket_t *b = s->buckets; b != NULL; b = b->next)
        if (b->member_id == id)
            return b;
    return NULL;
}

static void bucket_forget_session(sws_upstream_bucket_t *b)
{
    sws_upstream_tls_session_free(b->session);
    sws_upstream_tls_ctx_free(b->session_ctx);
    b->session = NULL;
    b->session_ctx = NULL;
}

/* Keep the session of a TLS connection that did an exchange, to offer it
 * on the member's next connection (a full handshake costs the member and
 * us several times a resumed one). */
static void bucket_keep_session(sws_upstream_bucket_t *b, SSL *ssl)
{
    /* Every put comes here: a connection that resumed the kept session
     * (or was put before) holds it still, and keeping it again would cost
     * two up-refs and two frees per proxied request for nothing. */
    if (SSL_get0_session(ssl) == b->session && SSL_get_SSL_CTX(ssl) == b->session_ctx)
        return;
    SSL_SESSION *sess = sws_upstream_tls_session(ssl);
    if (sess == NULL)
        return;
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    SSL_CTX_up_ref(ctx); /* held: its address cannot name a later context */
    bucket_forget_session(b);
    b->session = sess;
    b->session_ctx = ctx;
}

static sws_upstream_bucket_t *bucket_get(sws_upstream_set_t *s, uint64_t id)
{
    sws_upstream_bucket_t *b = bucket_find(s, id);
    if (b != NULL || (b = calloc(1, sizeof(*b))) == NULL)
        return b;
    b->member_id = id;
    b->next = s->buckets;
    s->buckets = b;
    return b;
}

static void idle_unlink(sws_upstream_conn_t *u)
{
    sws_upstream_bucket_t *b = u->bucket;
    if (u->prev != NULL)
        u->prev->next = u->next;
    else
        b->head = u->next;
    if (u->next != NULL)
        u->next->prev = u->prev;
    else
        b->tail = u->prev;
    u->prev = u->next = NULL;
    u->bucket = NULL;
    b->n--;
    u->set->nidle--;
}

/* Close the fd now, free u after the current batch of events (one of
 * them may still name it); an idle one leaves its bucket first. */
static void conn_free(sws_upstream_conn_t *u)
{
    sws_upstream_set_t *s = u->set;
    if (u->closed)
        return;
    if (u->bucket != NULL)
        idle_unlink(u);
    sws_timer_disarm(&u->timer);
    sws_loop_del(s->loop, &u->io);
    if (u->ssl != NULL && !u->connecting) {
        sws_upstream_bucket_t *b = bucket_get(s, u->member_id);
        if (b != NULL)
            bucket_keep_session(b, u->ssl);
    }
    sws_upstream_tls_free(u->ssl); /* no close_notify: the member reads the close */
    u->ssl = NULL;
    close(u->io.fd);
    u->io.fd = -1;
    u->closed = 1;
    u->ops = NULL;
    s->nopen--;
    u->next = s->closed;
    s->closed = u;
    sws_loop_defer(s->loop, &s->reap);
}

static void set_free_closed(sws_upstream_set_t *s)
{
    while (s->closed != NULL) {
        sws_upstream_conn_t *u = s->closed;
        s->closed = u->next;
        free(u);
    }
}

static void set_reap(sws_defer_t *d)
{
    set_free_closed(sws_container_of(d, sws_upstream_set_t, reap));
}

void sws_upstream_close(sws_upstream_conn_t *u)
{
    conn_free(u);
}

void sws_upstream_set_close(sws_upstream_set_t *s)
{
    while (s->buckets != NULL) {
        sws_upstream_bucket_t *b = s->buckets;
        while (b->head != NULL)
            conn_free(b->head);
        bucket_forget_session(b);
        s->buckets = b->next;
        free(b);
    }
    /* Outside the loop: no event can name them any more. */
    sws_defer_cancel(&s->reap);
    set_free_closed(s);
}

/* Whether an idle connection is still usable: no FIN and no stray byte
 * arrived (both make it unusable for a new request). Its events say so
 * (any event closes an idle connection, a FIN seen while it was held keeps
 * it out of the pool): only when the loop may still hold one for it is
 * the socket asked, with a MSG_PEEK read (docs/adr/0021). */
static int idle_usable(sws_upstream_conn_t *u)
{
    return !sws_loop_io_pending(u->set->loop, &u->io) || sws_upstream_drained(u);
}

int sws_upstream_drained(sws_upstream_conn_t *u)
{
    char b;
    if (u->ssl != NULL && sws_upstream_tls_pending(u->ssl))
        return 0;
    ssize_t n = recv(u->io.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static sws_upstream_conn_t *idle_take(sws_upstream_set_t *s, uint64_t id, int tls)
{
    sws_upstream_bucket_t *b = bucket_find(s, id);
    while (b != NULL && b->tail != NULL) {
        sws_upstream_conn_t *u = b->tail; /* the most recent: the least likely timed out */
        idle_unlink(u);
        sws_timer_disarm(&u->timer);
        /* A reload may switch a pool between http and https, keeping
         * its members' ids. */
        if ((u->ssl != NULL) == tls && idle_usable(u))
            return u;
        conn_free(u);
    }
    return NULL;
}

/* A connection on fd (connected or connecting), registered once. NULL
 * with fd closed and err set. */
static sws_upstream_conn_t *conn_wrap(sws_upstream_set_t *s, uint64_t id, int fd, char *err,
                                      size_t errlen)
{
    sws_upstream_conn_t *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        close(fd);
        return sws_errf(err, errlen, "out of memory"), NULL;
    }
    u->io.fd = fd;
    u->io.cb = conn_on_io;
    u->set = s;
    u->member_id = id;
    u->conf = sws_upstream_conf_default;
    sws_timer_init(&u->timer, conn_on_timer);
    if (sws_loop_add(s->loop, &u->io, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) < 0) {
        sws_errf(err, errlen, "epoll_ctl: %s", strerror(errno));
        close(fd);
        free(u);
        return NULL;
    }
    s->nopen++;
    return u;
}

/* A new connection to addr. ack_with_request: hold the handshake's last
 * ACK for the first bytes written (sws_upstream_write), so that it goes
 * with them instead of alone just before them (ADR 0068). */
static sws_upstream_conn_t *conn_new(sws_upstream_set_t *s, uint64_t id,
                                     const sws_upstream_addr_t *addr, int ack_with_request,
                                     char *err, size_t errlen)
{
    int fd = socket(addr->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sws_errf(err, errlen, "socket: %s", strerror(errno)), NULL;
    int one = 1, zero = 0;
    /* Requests and heads are written whole: Nagle would only delay them. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (ack_with_request)
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
    int connecting = 0;
    if (connect(fd, (const struct sockaddr *)&addr->sa, addr->len) < 0) {
        if (errno != EINPROGRESS) {
            sws_errf(err, errlen, "connect: %s", strerror(errno));
            close(fd);
            return NULL;
        }
        connecting = 1;
    }
    sws_upstream_conn_t *u = conn_wrap(s, id, fd, err, errlen);
    if (u != NULL) {
        u->connecting = (uint8_t)connecting;
        u->ack_held = (uint8_t)(ack_with_request != 0);
    }
    return u;
}

static sws_upstream_conn_t *conn_hand(sws_upstream_conn_t *u, const sws_upstream_ops_t *ops,
                                      void *data)
{
    if (u != NULL) {
        u->ops = ops;
        u->data = data;
    }
    return u;
}

/* The TLS side of a new connection: its SSL, offering the member's last
 * session made under the same context, and the handshake begun when the
 * TCP connect is done already. 0, or -1 with err. */
static int conn_tls(sws_upstream_conn_t *u, const sws_upstream_tls_t *tls, char *err,
                    size_t errlen)
{
    sws_upstream_bucket_t *b = bucket_find(u->set, u->member_id);
    SSL_SESSION *offer = b != NULL && b->session_ctx == tls->ctx ? b->session : NULL;
    u->ssl = sws_upstream_tls_new(tls, u->io.fd, offer, err, errlen);
    if (u->ssl == NULL)
        return -1;
    if (u->connecting)
        return 0;
    u->connecting = 1;
    return sws_upstream_connected(u, err, errlen) < 0 ? -1 : 0;
}

sws_upstream_conn_t *sws_upstream_open(sws_upstream_set_t *s, uint64_t member_id,
                                       const sws_upstream_addr_t *addr,
                                       const sws_upstream_tls_t *tls,
                                       const sws_upstream_ops_t *ops, void *data, char *err,
                                       size_t errlen)
{
    /* Over TLS the first bytes are OpenSSL's ClientHello, not ours. */
    sws_upstream_conn_t *u = conn_new(s, member_id, addr, tls == NULL, err, errlen);
    if (u == NULL)
        return NULL;
    if (tls != NULL && conn_tls(u, tls, err, errlen) < 0) {
        conn_free(u);
        return NULL;
    }
    return conn_hand(u, ops, data);
}

sws_upstream_conn_t *sws_upstream_get_tls(sws_upstream_set_t *s, uint64_t member_id,
                                          const sws_upstream_addr_t *addr,
                                          const sws_upstream_tls_t *tls,
                                          const sws_upstream_ops_t *ops, void *data, char *err,
                                          size_t errlen)
{
    sws_upstream_conn_t *u = idle_take(s, member_id, tls != NULL);
    if (u == NULL)
        return sws_upstream_open(s, member_id, addr, tls, ops, data, err, errlen);
    u->reused = 1;
    return conn_hand(u, ops, data);
}

sws_upstream_conn_t *sws_upstream_get(sws_upstream_set_t *s, uint64_t member_id,
                                      const sws_upstream_addr_t *addr,
                                      const sws_upstream_ops_t *ops, void *data, char *err,
                                      size_t errlen)
{
    return sws_upstream_get_tls(s, member_id, addr, NULL, ops, data, err, errlen);
}

int sws_upstream_adopt(sws_upstream_set_t *s, uint64_t member_id, int fd)
{
    char err[64];
    sws_upstream_conn_t *u = conn_wrap(s, member_id, fd, err, sizeof(err));
    if (u == NULL)
        return -1;
    sws_upstream_put(u);
    return 0;
}

int sws_upstream_connected(sws_upstream_conn_t *u, char *err, size_t errlen)
{
    if (!u->handshaking) {
        int soerr = 0;
        socklen_t len = sizeof(soerr);
        if (getsockopt(u->io.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            soerr = errno;
        if (soerr != 0)
            return sws_errf(err, errlen, "connect: %s", strerror(soerr));
        if (u->ssl == NULL) {
            u->connecting = 0;
            return 0;
        }
        u->handshaking = 1;
    }
    int rc = sws_upstream_tls_handshake(u->ssl, err, errlen);
    if (rc != 0)
        return rc;
    u->handshaking = 0;
    u->connecting = 0;
    return 0;
}

ssize_t sws_upstream_read(sws_upstream_conn_t *u, void *buf, size_t len)
{
    if (u->ssl != NULL)
        return sws_upstream_tls_read(u->ssl, buf, len);
    return recv(u->io.fd, buf, len, 0);
}

int sws_upstream_shutdown_write(sws_upstream_conn_t *u)
{
    if (u->ssl != NULL)
        sws_upstream_tls_close_notify(u->ssl);
    return shutdown(u->io.fd, SHUT_WR);
}

ssize_t sws_upstream_write(sws_upstream_conn_t *u, const void *buf, size_t len)
{
    if (u->ssl != NULL)
        return sws_upstream_tls_write(u->ssl, buf, len);
    ssize_t n = send(u->io.fd, buf, len, MSG_NOSIGNAL);
    if (n > 0 && u->ack_held) {
        /* The handshake's ACK went with these bytes. Quick ACKs again for
         * the answer, as on any new connection: a member that writes it
         * in pieces with Nagle on would wait for a delayed one. */
        int one = 1;
        u->ack_held = 0;
        setsockopt(u->io.fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
    }
    return n;
}

void sws_upstream_configure(sws_upstream_conn_t *u, const sws_upstream_conf_t *conf)
{
    u->conf = *conf;
}

void sws_upstream_close_idle(sws_upstream_set_t *s, uint64_t member_id)
{
    sws_upstream_bucket_t *b = bucket_find(s, member_id);
    while (b != NULL && b->head != NULL)
        conn_free(b->head);
    if (b != NULL)
        bucket_forget_session(b);
    if (s->close_idle_hook != NULL)
        s->close_idle_hook(s->close_idle_arg, member_id);
}

void sws_upstream_arm(sws_upstream_conn_t *u, enum sws_upstream_timer which)
{
    /* Armed several times per request: the queue found last time serves
     * while the duration is the same (a queue's never changes). */
    sws_timer_queue_t *q = u->q[which];
    if (q == NULL || q->duration_ms != u->conf.timeout_ms[which])
        q = u->q[which] = queue_for(u->set, u->conf.timeout_ms[which]);
    u->timer_which = (uint8_t)which;
    sws_timer_arm(u->set->loop, q, &u->timer);
}

void sws_upstream_disarm(sws_upstream_conn_t *u)
{
    sws_timer_disarm(&u->timer);
}

void sws_upstream_put(sws_upstream_conn_t *u)
{
    sws_upstream_set_t *s = u->set;
    /* A FIN reported while it was held is not reported again (edge-
     * triggered): the connection would look usable. */
    if (u->conf.keepalive == 0 || u->peer_closed) {
        conn_free(u);
        return;
    }
    sws_upstream_bucket_t *b = bucket_get(s, u->member_id);
    if (b == NULL) {
        conn_free(u);
        return;
    }
    if (u->ssl != NULL)
        bucket_keep_session(b, u->ssl);

    while (b->n >= u->conf.keepalive)
        conn_free(b->head);
    u->ops = NULL;
    u->data = NULL;
    u->bucket = b;
    u->next = NULL;
    u->prev = b->tail;
    if (b->tail != NULL)
        b->tail->next = u;
    else
        b->head = u;
    b->tail = u;
    b->n++;
    s->nidle++;
    sws_upstream_arm(u, SWS_UPSTREAM_T_IDLE);
}

void sws_upstream_keep_session(sws_upstream_conn_t *u)
{
    if (u->ssl == NULL || u->connecting)
        return;
    sws_upstream_bucket_t *b = bucket_get(u->set, u->member_id);
    if (b != NULL)
        bucket_keep_session(b, u->ssl);
}

static void conn_on_io(sws_io_t *io, uint32_t events)
{
    sws_upstream_conn_t *u = sws_container_of(io, sws_upstream_conn_t, io);
    if (u->closed)
        return;
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        u->peer_closed = 1;
    if (u->ops != NULL) {
        u->ops->on_event(u, events);
        return;
    }
    /* Idle: only a close or a stray byte wakes it (an EPOLLOUT edge can
     * follow the last write of its exchange: nothing to do). */
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        conn_free(u);
}

static void conn_on_timer(sws_timer_t *t)
{
    sws_upstream_conn_t *u = sws_container_of(t, sws_upstream_conn_t, timer);
    if (u->ops != NULL)
        u->ops->on_timeout(u, (enum sws_upstream_timer)u->timer_which);
    else
        conn_free(u);
}
