#include "worker/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "worker/tls.h"

/* Used until the first generation is adopted (shm/table.h). */
const sws_settings_t sws_conn_default_settings = SWS_SETTINGS_DEFAULTS;

/* Registered once, edge-triggered (conn.h). */
#define CONN_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

static void conn_on_event(sws_io_t *io, uint32_t events);
static void conn_on_timer(sws_timer_t *t);
static void conn_on_tls_idle(sws_timer_t *t);
static void conn_run(sws_conn_t *c);
static void conn_on_wake(sws_defer_t *d);
static void conn_update_timer(sws_conn_t *c);

void sws_conn_set_init(sws_conn_set_t *s, sws_loop_t *loop, const sws_proto_ops_t *proto,
                       sws_stream_handler_t handler, sws_shm_counters_t *counters)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->proto = proto;
    s->handler = handler;
    s->counters = counters;
    s->settings = &sws_conn_default_settings;
    sws_timer_queue_init(loop, &s->header_q, s->settings->header_timeout_ms);
    sws_timer_queue_init(loop, &s->body_q, s->settings->body_timeout_ms);
    sws_timer_queue_init(loop, &s->idle_q, s->settings->keepalive_timeout_ms);
    sws_timer_queue_init(loop, &s->send_q, s->settings->send_timeout_ms);
    sws_timer_queue_init(loop, &s->linger_q, SWS_CONN_LINGER_MS);
    sws_timer_queue_init(loop, &s->drain_q, SWS_CONN_DRAIN_IDLE_MS);
    sws_timer_queue_init(loop, &s->handshake_q, SWS_DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS);
    sws_timer_queue_init(loop, &s->tls_idle_q, SWS_CONN_TLS_BUFFERS_IDLE_MS);
}

void sws_conn_set_configure(sws_conn_set_t *s, const sws_table_t *t, const sws_settings_t *st,
                            sws_str_t server_name)
{
    s->table = t;
    s->settings = st != NULL ? st : &sws_conn_default_settings;
    s->server_name = server_name;
    sws_timer_queue_set_duration(&s->header_q, s->settings->header_timeout_ms);
    sws_timer_queue_set_duration(&s->body_q, s->settings->body_timeout_ms);
    sws_timer_queue_set_duration(&s->idle_q, s->settings->keepalive_timeout_ms);
    sws_timer_queue_set_duration(&s->send_q, s->settings->send_timeout_ms);
    if (t != NULL)
        sws_timer_queue_set_duration(&s->handshake_q, sws_table_tls(t)->handshake_timeout_ms);
}

static void conn_free(sws_conn_t *c)
{
    if (c->proto->destroy != NULL)
        c->proto->destroy(c);
    free(c->rbuf);
    free(c->obuf);
    free(c);
}

/* The protocol's state follows the connection in the same allocation. */
#define CONN_STATE_OFFSET \
    ((sizeof(sws_conn_t) + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t))

/* A connection with its buffers, from the free list when one is there. */
static sws_conn_t *conn_alloc(sws_conn_set_t *s)
{
    sws_conn_t *c = s->free_list;
    if (c != NULL) {
        s->free_list = c->next;
        s->nfree--;
        return c;
    }
    c = calloc(1, CONN_STATE_OFFSET + s->proto->state_size);
    if (c == NULL)
        return NULL;
    c->proto = s->proto;
    c->proto_state = (char *)c + CONN_STATE_OFFSET;
    if (c->proto->setup != NULL)
        c->proto->setup(c);
    return c; /* buffers come when it first reads or writes */
}

static void conn_arm(sws_conn_t *c, sws_timer_queue_t *q)
{
    sws_timer_arm(c->set->loop, q, &c->timer);
    c->timer_q = q;
}

sws_conn_t *sws_conn_open(sws_conn_set_t *s, int fd, const struct sockaddr *peer,
                          socklen_t peer_len)
{
    sws_conn_t *c = conn_alloc(s);
    if (c == NULL) {
        sws_log_error("connection dropped: out of memory");
        close(fd);
        return NULL;
    }
    c->io.fd = fd;
    c->io.cb = conn_on_event;
    sws_timer_init(&c->timer, conn_on_timer);
    sws_timer_init(&c->tls_idle, conn_on_tls_idle);
    sws_defer_init(&c->wake, conn_on_wake);
    c->timer_q = NULL;
    c->set = s;
    c->phase = SWS_CONN_ACTIVE;
    c->readable = c->rdhup = c->peer_eof = c->close_after = c->input_over = 0;
    c->wrote = c->got_input = c->head_started = c->tls = c->want_writable = c->running = 0;
    c->input_paused = 0;
    c->tls_handshaking = c->tls_read_wants_write = c->tls_socket_drained = 0;
    c->ssl = NULL;
    c->shut_wr = 0;
    c->switch_to = NULL;
    c->rpos = c->rend = c->msg_start = 0;
    c->olen = c->osent = 0;
    c->file_fd = -1;
    c->file_off = 0;
    c->file_left = 0;
    c->file_pipe = 0;
    c->bytes_out = c->acked_checked = 0;
    c->requests = 0;
    if (peer_len > sizeof(c->peer))
        peer_len = sizeof(c->peer);
    memset(&c->peer, 0, sizeof(c->peer));
    if (peer != NULL)
        memcpy(&c->peer, peer, peer_len);
    c->peer_len = peer_len;
    c->peer_text[0] = '\0';
    c->proto->init(c);

    if (sws_loop_add(s->loop, &c->io, CONN_EVENTS) < 0) {
        sws_log_error("epoll_ctl(ADD) for a connection: %s", strerror(errno));
        close(fd);
        c->next = s->free_list;
        s->free_list = c;
        s->nfree++;
        return NULL;
    }
    c->prev = NULL;
    c->next = s->live;
    if (s->live != NULL)
        s->live->prev = c;
    s->live = c;
    s->nlive++;
    /* The first head must arrive within the header timeout from accept. */
    conn_arm(c, &s->header_q);
    return c;
}

sws_conn_t *sws_conn_open_tls(sws_conn_set_t *s, int fd, const struct sockaddr *peer,
                              socklen_t peer_len)
{
    if (s->tls == NULL) {
        sws_log_debug("TLS connection refused: no table generation yet");
        close(fd);
        return NULL;
    }
    sws_conn_t *c = sws_conn_open(s, fd, peer, peer_len);
    if (c == NULL)
        return NULL;
    c->tls = 1;
    if (sws_tls_conn_start(c) < 0) {
        sws_conn_close(c);
        return NULL;
    }
    /* The header timer starts when the handshake is done. */
    conn_arm(c, &s->handshake_q);
    return c;
}

/* A switch asked for in this turn (sws_conn_switch_proto): 1 if done. */
static int conn_switch_pending(sws_conn_t *c)
{
    if (c->switch_to == NULL)
        return 0;
    c->proto = c->switch_to;
    c->proto_state = c->switch_state;
    c->switch_to = NULL;
    c->proto->init(c);
    return 1;
}

void sws_conn_close(sws_conn_t *c)
{
    sws_conn_set_t *s = c->set;
    if (c->phase == SWS_CONN_CLOSED)
        return;
    conn_switch_pending(c); /* the new protocol's close frees its state */
    sws_timer_disarm(&c->timer);
    c->timer_q = NULL;
    sws_timer_disarm(&c->tls_idle);
    sws_defer_cancel(&c->wake);
    sws_tls_shutdown(c); /* close_notify, when the session is whole */
    /* close() also removes the fd from epoll: a worker never dups it. */
    close(c->io.fd);
    c->io.fd = -1;
    if (c->ssl != NULL)
        sws_tls_conn_free(c);
    c->phase = SWS_CONN_CLOSED;
    c->want_writable = 0;
    c->proto->close(c); /* sees what of a file range was never sent */
    if (c->proto != s->proto) { /* switched: the first protocol closes its exchange too */
        c->proto = s->proto;
        c->proto_state = (char *)c + CONN_STATE_OFFSET;
        c->proto->close(c);
    }
    c->file_fd = -1;
    c->file_left = 0;
    c->file_pipe = 0;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->live = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->nlive--;
    c->prev = NULL;
    c->next = s->closed;
    s->closed = c;
}

/* A standard buffer from the cache, or a new one; NULL: out of memory. */
static char *buf_take(char **cache, unsigned *n, size_t size)
{
    return *n > 0 ? cache[--*n] : malloc(size);
}

/* Keep a buffer of the standard size for the next connection; free others
 * (and what the full cache cannot take). */
static void buf_give(char **cache, unsigned *n, char *buf, int standard)
{
    if (standard && *n < SWS_CONN_BUF_CACHE)
        cache[(*n)++] = buf;
    else
        free(buf);
}

static int conn_take_rbuf(sws_conn_t *c)
{
    sws_conn_set_t *s = c->set;
    c->rbuf = buf_take(s->rbufs, &s->nrbufs, SWS_CONN_READ_BUF);
    if (c->rbuf == NULL)
        return -1;
    c->rcap = SWS_CONN_READ_BUF;
    c->rpos = c->rend = c->msg_start = 0;
    return 0;
}

static int conn_take_obuf(sws_conn_t *c)
{
    sws_conn_set_t *s = c->set;
    c->obuf = buf_take(s->obufs, &s->nobufs, SWS_CONN_OUT_BUF);
    if (c->obuf == NULL)
        return -1;
    c->ocap = SWS_CONN_OUT_BUF;
    c->olen = c->osent = 0;
    return 0;
}

/* Give back what the connection holds but does not use: the read buffer
 * when no byte of it is unparsed or referenced, the output buffer when
 * nothing is queued. */
static void conn_buffers_release(sws_conn_t *c)
{
    sws_conn_set_t *s = c->set;
    if (c->rbuf != NULL && (c->phase == SWS_CONN_CLOSED ||
                            (c->rpos == c->rend && c->msg_start == c->rend))) {
        buf_give(s->rbufs, &s->nrbufs, c->rbuf, c->rcap == SWS_CONN_READ_BUF);
        c->rbuf = NULL;
        c->rcap = c->rpos = c->rend = c->msg_start = 0;
    }
    /* An output buffer grown for mid-size responses (up to the high-water
     * mark and its slack: conn_flush shrinks larger ones) stays with a live
     * connection, or each such response would cost a malloc, a realloc and
     * a free. */
    if (c->obuf != NULL && c->phase != SWS_CONN_CLOSED && c->ocap != SWS_CONN_OUT_BUF &&
        c->ocap <= SWS_CONN_OUT_MAX)
        return;
    if (c->obuf != NULL && (c->phase == SWS_CONN_CLOSED || c->olen == c->osent)) {
        buf_give(s->obufs, &s->nobufs, c->obuf, c->ocap == SWS_CONN_OUT_BUF);
        c->obuf = NULL;
        c->ocap = c->olen = c->osent = 0;
    }
}

void sws_conn_set_reap(sws_conn_set_t *s)
{
    while (s->closed != NULL) {
        sws_conn_t *c = s->closed;
        s->closed = c->next;
        /* Its buffers go to the cache (or, grown for one large head or
         * response, are freed), so a recycled connection holds none. */
        conn_buffers_release(c);
        if (s->nfree >= SWS_CONN_FREE_MAX) {
            conn_free(c);
            continue;
        }
        c->next = s->free_list;
        s->free_list = c;
        s->nfree++;
    }
}

static int conn_output_empty(const sws_conn_t *c)
{
    return c->osent == c->olen && c->file_left == 0;
}

static int conn_is_idle(const sws_conn_t *c)
{
    return c->phase == SWS_CONN_ACTIVE && c->proto->waiting_for(c) == SWS_PROTO_WAIT_IDLE &&
           c->rpos == c->rend &&
           conn_output_empty(c);
}

/* What a drain may end: an idle connection that has answered a request
 * (HTTP/2 at once after its GOAWAY, HTTP/1.1 after drain_q's wait). One
 * accepted just before the drain has its first request on the way (a
 * binary upgrade drains right after the last accepts): it is answered,
 * with Connection: close, or ends at its header timeout. */
static int conn_drain_closes(const sws_conn_t *c)
{
    return c->requests > 0 && conn_is_idle(c);
}

void sws_conn_set_drain(sws_conn_set_t *s)
{
    s->draining = 1;
    /* Set once: a reload while draining must not reorder the queue. */
    if (s->settings->keepalive_timeout_ms < SWS_CONN_DRAIN_IDLE_MS)
        sws_timer_queue_set_duration(&s->drain_q, s->settings->keepalive_timeout_ms);
    sws_conn_t *next;
    for (sws_conn_t *c = s->live; c != NULL; c = next) {
        next = c->next;
        /* A protocol that can say goodbye (HTTP/2's GOAWAY) does, also
         * on an idle connection: the client then knows not to retry. One
         * that cannot (HTTP/1.1) keeps an idle connection a little longer
         * (drain_q, see conn_update_timer): closing it under a client that
         * is sending its next request loses that request (a reset, or an
         * EOF where the answer should be). */
        if (c->proto->drain != NULL)
            c->proto->drain(c);
        else if (conn_drain_closes(c))
            conn_update_timer(c);
    }
}

unsigned sws_conn_set_count_idle(const sws_conn_set_t *s)
{
    unsigned n = 0;
    for (const sws_conn_t *c = s->live; c != NULL; c = c->next)
        n += conn_is_idle(c);
    return n;
}

unsigned sws_conn_set_close_all(sws_conn_set_t *s)
{
    unsigned n = 0;
    while (s->live != NULL) {
        sws_conn_close(s->live);
        n++;
    }
    return n;
}

void sws_conn_set_destroy(sws_conn_set_t *s)
{
    sws_conn_set_close_all(s);
    sws_conn_set_reap(s);
    while (s->free_list != NULL) {
        sws_conn_t *c = s->free_list;
        s->free_list = c->next;
        conn_free(c);
    }
    s->nfree = 0;
    while (s->nrbufs > 0)
        free(s->rbufs[--s->nrbufs]);
    while (s->nobufs > 0)
        free(s->obufs[--s->nobufs]);
}

const char *sws_conn_peer_text(sws_conn_t *c)
{
    if (c->peer_text[0] != '\0')
        return c->peer_text;
    const struct sockaddr *sa = (const struct sockaddr *)&c->peer;
    const char *ok = NULL;
    if (sa->sa_family == AF_INET)
        ok = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, c->peer_text,
                       sizeof(c->peer_text));
    else if (sa->sa_family == AF_INET6)
        ok = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, c->peer_text,
                       sizeof(c->peer_text));
    else if (sa->sa_family == AF_UNIX)
        ok = strcpy(c->peer_text, "unix");
    if (ok == NULL)
        strcpy(c->peer_text, "-");
    return c->peer_text;
}

int sws_conn_reserve(sws_conn_t *c, size_t n)
{
    if (c->obuf == NULL && conn_take_obuf(c) < 0)
        return -1;
    if (c->ocap - c->olen >= n)
        return 0;
    if (c->osent > 0) {
        memmove(c->obuf, c->obuf + c->osent, c->olen - c->osent);
        c->olen -= c->osent;
        c->osent = 0;
        if (c->ocap - c->olen >= n)
            return 0;
    }
    size_t cap = c->ocap;
    while (cap - c->olen < n)
        cap *= 2;
    if (cap > SWS_CONN_OUT_MAX && c->olen + n <= SWS_CONN_OUT_MAX)
        cap = SWS_CONN_OUT_MAX; /* a few framing bytes over the mark */
    char *p = realloc(c->obuf, cap);
    if (p == NULL)
        return -1;
    c->obuf = p;
    c->ocap = cap;
    return 0;
}

int sws_conn_append(sws_conn_t *c, const void *p, size_t n)
{
    if (sws_conn_reserve(c, n) < 0)
        return -1;
    memcpy(c->obuf + c->olen, p, n);
    c->olen += n;
    return 0;
}

size_t sws_conn_write_through(sws_conn_t *c, const void *p, size_t n)
{
    /* TLS encrypts from the output: the caller queues the bytes there. */
    if (c->phase != SWS_CONN_ACTIVE || c->file_left > 0 || c->sent_turn >= SWS_CONN_SEND_PER_RUN ||
        c->ssl != NULL)
        return 0;
    size_t queued = c->olen - c->osent;
    size_t room = SWS_CONN_SEND_PER_RUN - c->sent_turn;
    struct iovec iov[2] = {
        { queued > 0 ? c->obuf + c->osent : NULL, queued },
        { (void *)p, n < room ? n : room },
    };
    ssize_t w;
    do
        w = writev(c->io.fd, queued > 0 ? iov : iov + 1, queued > 0 ? 2 : 1);
    while (w < 0 && errno == EINTR);
    /* A broken socket is left for the connection's own write to find:
     * closing here would release the stream under its producer. */
    if (w <= 0)
        return 0;
    size_t done = (size_t)w;
    c->bytes_out += done;
    c->sent_turn += done;
    c->wrote = 1;
    if (done < queued) {
        c->osent += done;
        return 0;
    }
    c->osent = c->olen = 0;
    return done - queued;
}

void sws_conn_queue_file(sws_conn_t *c, int fd, off_t off, uint64_t len)
{
    if (len == 0 || c->file_left > 0)
        return;
    c->file_fd = fd;
    c->file_off = off;
    c->file_left = len;
    c->file_pipe = 0;
}

void sws_conn_queue_pipe(sws_conn_t *c, int fd, uint64_t len)
{
    if (len == 0 || c->file_left > 0)
        return;
    c->file_fd = fd;
    c->file_off = 0;
    c->file_left = len;
    c->file_pipe = 1;
}

/* The protocol's input_moved, when it keeps slices into the read buffer.
 * Not inlined: GCC then takes the old base, an integer, for a use of the
 * freed pointer (-Wuse-after-free). */
__attribute__((noinline)) static void conn_input_moved(sws_conn_t *c, uintptr_t old_base,
                                                       size_t old_cap, const char *new_base,
                                                       size_t shift)
{
    if (c->proto->input_moved != NULL)
        c->proto->input_moved(c, old_base, old_cap, new_base, shift);
}

/* The read buffer is full: drop what earlier requests used, or grow up to
 * what the settings allow a head. 0, or -1 when the head cannot fit. */
static int conn_make_room(sws_conn_t *c)
{
    if (c->msg_start > 0) {
        uint32_t shift = c->msg_start;
        conn_input_moved(c, (uintptr_t)c->rbuf, c->rcap, c->rbuf, shift);
        memmove(c->rbuf, c->rbuf + shift, c->rend - shift);
        c->rpos -= shift;
        c->rend -= shift;
        c->msg_start = 0;
        return 0;
    }
    size_t limit = (size_t)c->set->settings->max_header_size + 4096;
    if (c->rcap >= limit)
        return -1;
    size_t cap = (size_t)c->rcap * 2;
    if (cap > limit)
        cap = limit;
    uintptr_t old = (uintptr_t)c->rbuf;
    char *p = realloc(c->rbuf, cap);
    if (p == NULL)
        return -1;
    conn_input_moved(c, old, c->rcap, p, 0);
    c->rbuf = p;
    c->rcap = (uint32_t)cap;
    return 0;
}

/* 1: bytes arrived; 0: nothing more for now (drained, EOF, no room); -1:
 * the connection was closed. */
static int conn_read(sws_conn_t *c)
{
    if (c->rbuf == NULL && conn_take_rbuf(c) < 0) {
        sws_log_error("client %s: no memory for a read buffer", sws_conn_peer_text(c));
        sws_conn_close(c);
        return -1;
    }
    if (c->rend == c->rcap && conn_make_room(c) < 0) {
        c->proto->fail(c, 431, "request head does not fit the buffer");
        return 0;
    }
    size_t space = c->rcap - c->rend;
    ssize_t n = c->ssl != NULL ? sws_tls_read(c, c->rbuf + c->rend, space)
                               : read(c->io.fd, c->rbuf + c->rend, space);
    if (n > 0) {
        c->rend += (uint32_t)n;
        c->got_input = 1;
        /* Edge-triggered: a short read drained the socket, unless the peer
         * also shut down (then read on to see the EOF). Over TLS a read
         * returns one record: the socket read under it, and what OpenSSL
         * still holds, decide (ADR 0053). */
        if (!c->rdhup && (c->ssl != NULL ? sws_tls_drained(c) : (size_t)n < space))
            c->readable = 0;
        return 1;
    }
    if (n == 0) {
        c->readable = 0;
        c->peer_eof = 1;
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        c->readable = 0;
        return 0;
    }
    if (errno == EINTR)
        return 1;
    sws_log_debug("client %s: read: %s", sws_conn_peer_text(c), strerror(errno));
    sws_conn_close(c);
    return -1;
}

/* A write or sendfile returned n <= 0: 1 retry, 0 the socket is full, -1
 * the connection was closed (0 from sendfile: the file shrank under us, so
 * the promised length cannot be kept). */
static int conn_write_failed(sws_conn_t *c, ssize_t n, const char *what)
{
    if (n < 0 && errno == EINTR)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    sws_log_debug("client %s: %s: %s", sws_conn_peer_text(c), what,
                  n == 0 ? "file truncated" : strerror(errno));
    sws_conn_close(c);
    return -1;
}

/* The connection used its reads (or its file budget) for this turn while
 * input is still waiting (or the socket takes more): a client that sends as
 * fast as we read (a flood of empty lines, an endless pipeline), or reads
 * as fast as we send, must not keep the worker from its other connections
 * and its timers. Re-registering makes epoll report the pending input or
 * the free space again in the next iteration, since edge-triggered mode
 * would not. 0, or -1 when the connection was closed. */
static int conn_yield(sws_conn_t *c)
{
    c->yielded = 1;
    if (sws_loop_mod(c->set->loop, &c->io, CONN_EVENTS) == 0)
        return 0;
    sws_log_error("epoll_ctl(MOD) for a connection: %s", strerror(errno));
    sws_conn_close(c);
    return -1;
}

/* The one write of the output to the socket, plain or TLS. */
static ssize_t conn_send(sws_conn_t *c, const void *p, size_t n)
{
    return c->ssl != NULL ? sws_tls_write(c, p, n) : send(c->io.fd, p, n, MSG_NOSIGNAL);
}

/* TLS cannot sendfile or splice: the next piece of the file or pipe range
 * goes into the (empty) output, to be written from there. 1 when bytes were
 * queued, -1 closed. */
static int conn_tls_fill(sws_conn_t *c)
{
    size_t want = c->file_left < SWS_CONN_TLS_PIECE ? (size_t)c->file_left : SWS_CONN_TLS_PIECE;
    ssize_t n;

    if (sws_conn_reserve(c, want) < 0) {
        sws_log_error("client %s: no memory for a TLS piece", sws_conn_peer_text(c));
        sws_conn_close(c);
        return -1;
    }
    do
        n = c->file_pipe ? read(c->file_fd, c->obuf + c->olen, want)
                         : pread(c->file_fd, c->obuf + c->olen, want, c->file_off);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        /* The pipe holds the promised bytes (sws_conn_queue_pipe): none
         * there, like a file that shrank, breaks the promised length. */
        sws_log_debug("client %s: %s: %s", sws_conn_peer_text(c), c->file_pipe ? "pipe" : "pread",
                      n == 0 ? "file truncated" : strerror(errno));
        sws_conn_close(c);
        return -1;
    }
    c->olen += (size_t)n;
    c->file_left -= (uint64_t)n;
    if (!c->file_pipe)
        c->file_off += n;
    return 1;
}

/* Write what is queued. 0 (all written, the socket is full, or this turn's
 * file budget is spent and the connection yielded), -1 closed. */
static int conn_flush(sws_conn_t *c)
{
again:
    while (c->osent < c->olen) {
        if (c->sent_turn >= SWS_CONN_SEND_PER_RUN)
            return conn_yield(c);
        ssize_t n = conn_send(c, c->obuf + c->osent, c->olen - c->osent);
        if (n > 0) {
            c->osent += (size_t)n;
            c->bytes_out += (uint64_t)n;
            c->sent_turn += (size_t)n;
            c->wrote = 1;
            continue;
        }
        int r = conn_write_failed(c, n, "write");
        if (r <= 0)
            return r;
    }
    c->osent = c->olen = 0;
    if (c->ocap > SWS_CONN_OUT_MAX) {
        char *p = realloc(c->obuf, SWS_CONN_OUT_BUF);
        if (p != NULL) {
            c->obuf = p;
            c->ocap = SWS_CONN_OUT_BUF;
        }
    }
    if (c->ssl != NULL && c->file_left > 0) {
        if (c->sent_turn >= SWS_CONN_SEND_PER_RUN)
            return conn_yield(c);
        if (conn_tls_fill(c) < 0)
            return -1;
        goto again;
    }
    while (c->file_left > 0) {
        /* A fast reader would otherwise take the worker for as long as the
         * socket keeps up (hundreds of ms for a large file). */
        if (c->sent_turn >= SWS_CONN_SEND_PER_RUN)
            return conn_yield(c);
        size_t want = SWS_CONN_SEND_PER_RUN - c->sent_turn;
        if (want > c->file_left)
            want = (size_t)c->file_left;
        ssize_t n = c->file_pipe ? splice(c->file_fd, NULL, c->io.fd, NULL, want,
                                          SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
                                 : sendfile(c->io.fd, c->file_fd, &c->file_off, want);
        if (n > 0) {
            c->file_left -= (uint64_t)n;
            c->bytes_out += (uint64_t)n;
            c->sent_turn += (size_t)n;
            c->wrote = 1;
            continue;
        }
        int r = conn_write_failed(c, n, c->file_pipe ? "splice" : "sendfile");
        if (r <= 0)
            return r;
    }
    c->file_fd = -1;
    c->file_pipe = 0;
    return 0;
}

/* Lingering close: input after our last response is read and dropped until
 * the client's FIN (or the linger timer), so our response is not destroyed
 * by a reset caused by unread data. */
static void conn_linger_read(sws_conn_t *c)
{
    if (c->rbuf == NULL && conn_take_rbuf(c) < 0) {
        sws_conn_close(c);
        return;
    }
    for (unsigned i = 0; i < SWS_CONN_READS_PER_RUN; i++) {
        ssize_t n = read(c->io.fd, c->rbuf, c->rcap);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->readable = 0;
            return;
        }
        sws_conn_close(c);
        return;
    }
    conn_yield(c);
}

/* Our side ends (the peer may still send): TLS's close_notify first, so
 * that it goes before the FIN. */
static void conn_shut_wr(sws_conn_t *c)
{
    sws_tls_shutdown(c);
    shutdown(c->io.fd, SHUT_WR);
}

/* Everything is written and the connection must end. Closing with unread
 * input makes the kernel answer with a reset, which may destroy our
 * response before the client read it: so we linger, unless the client
 * already ended (peer_eof) or said its last request was the one answered
 * and nothing came after it (input_over, no input unparsed, the socket
 * drained at the last read). Bytes that arrive between that read and the
 * close break the client's own promise (RFC 9112 9.6); nginx closes at
 * once on the same evidence (its lingering_close "on"). */
static void conn_finish(sws_conn_t *c)
{
    if (c->peer_eof || (c->input_over && !c->readable && c->rpos == c->rend)) {
        sws_conn_close(c);
        return;
    }
    conn_shut_wr(c);
    c->phase = SWS_CONN_LINGER;
    conn_arm(c, &c->set->linger_q);
    /* A drained socket would only answer EAGAIN: the client's FIN, or its
     * data, brings an edge. */
    if (c->readable)
        conn_linger_read(c);
}

/* One timer, in the queue of what the connection waits for now. Header
 * deadlines run from the start of the head (not re-armed per read, so a
 * slow head cannot extend itself); body and send deadlines from the last
 * progress; idle from the last response. */
static void conn_update_timer(sws_conn_t *c)
{
    sws_conn_set_t *s = c->set;
    if (!conn_output_empty(c)) {
        if (c->timer_q != &s->send_q || c->wrote)
            conn_arm(c, &s->send_q);
        return;
    }
    switch (c->proto->waiting_for(c)) {
    case SWS_PROTO_WAIT_IDLE:
        if (s->draining && c->proto->drain == NULL && c->requests > 0) {
            /* Its next request gets an answer with Connection: close
             * (sws_conn_set_drain); none within drain_q's time, the close. */
            if (c->timer_q != &s->drain_q)
                conn_arm(c, &s->drain_q);
            break;
        }
        if (c->requests > 0 && (c->timer_q != &s->idle_q || c->wrote))
            conn_arm(c, &s->idle_q);
        break;
    case SWS_PROTO_WAIT_HEAD:
        if (c->timer_q != &s->header_q || c->head_started)
            conn_arm(c, &s->header_q);
        break;
    case SWS_PROTO_WAIT_BODY:
        if (c->timer_q != &s->body_q || c->got_input)
            conn_arm(c, &s->body_q);
        break;
    case SWS_PROTO_WAIT_WINDOW:
        if (c->timer_q != &s->body_q)
            conn_arm(c, &s->body_q);
        break;
    case SWS_PROTO_WAIT_RESPONSE:
        /* Nothing is due from the client: the producer's own timers run
         * (the proxy's upstream timeouts). */
        sws_timer_disarm(&c->timer);
        c->timer_q = NULL;
        break;
    case SWS_PROTO_WAIT_NOTHING:
        break;
    }
}

/* The protocol asked to hear when the output drained (a response in
 * progress waits for room, or for its file range to be sent). */
static void conn_tell_writable(sws_conn_t *c)
{
    if (c->want_writable && !sws_conn_output_blocked(c)) {
        c->want_writable = 0;
        c->proto->writable(c);
        conn_switch_pending(c);
    }
}

/* This turn wrote its share: the connection yielded (conn_yield) and goes
 * on in the next loop iteration. */
static int conn_budget_spent(const sws_conn_t *c)
{
    return c->sent_turn >= SWS_CONN_SEND_PER_RUN;
}

/* Read, parse, answer and write until the socket or the output blocks, or
 * this turn's budget is spent. 0, or -1 when the connection was closed. */
static int conn_pass(sws_conn_t *c)
{
    unsigned reads = 0;
    for (;;) {
        conn_tell_writable(c);
        if (!c->close_after)
            c->proto->on_input(c);
        if (conn_switch_pending(c))
            continue; /* the new protocol takes what is unparsed */
        if (sws_conn_output_blocked(c)) {
            if (conn_flush(c) < 0)
                return -1;
            if (sws_conn_output_blocked(c) || conn_budget_spent(c))
                return 0; /* EPOLLOUT, or the yield, will call us again */
            continue;
        }
        if (c->want_writable)
            continue; /* conn_tell_writable clears it */
        if (c->close_after || !c->readable || c->input_paused)
            return 0;
        if (reads++ == SWS_CONN_READS_PER_RUN)
            return conn_yield(c);
        if (conn_read(c) < 0)
            return -1;
    }
}

static void conn_turn(sws_conn_t *c);

/* A turn, marked so that what its protocol's producers write during it
 * does not ask for another. */
static void conn_run(sws_conn_t *c)
{
    c->running = 1;
    conn_turn(c);
    c->running = 0;
}

void sws_conn_switch_proto(sws_conn_t *c, const sws_proto_ops_t *ops, void *state)
{
    c->switch_to = ops;
    c->switch_state = state;
    if (!c->running)
        conn_switch_pending(c);
    sws_conn_wake(c);
}

void sws_conn_shutdown_write(sws_conn_t *c)
{
    if (c->shut_wr == 0)
        c->shut_wr = 1;
    sws_conn_wake(c);
}

void sws_conn_wake(sws_conn_t *c)
{
    if (!c->running && c->phase == SWS_CONN_ACTIVE)
        sws_loop_defer(c->set->loop, &c->wake);
}

static void conn_on_wake(sws_defer_t *d)
{
    sws_conn_t *c = sws_container_of(d, sws_conn_t, wake);
    if (c->phase == SWS_CONN_ACTIVE)
        conn_run(c);
}

/* The client closed its side (EPOLLRDHUP arrives even while its input is
 * paused, so a request waiting on a member hears of it) before its
 * response was produced: the protocol may cancel the exchange, and then
 * the connection closes now (ADR 0025). 1 when it closed. */
static int conn_client_gone(sws_conn_t *c)
{
    if (!(c->peer_eof || c->rdhup) || c->proto->client_gone == NULL ||
        c->proto->waiting_for(c) != SWS_PROTO_WAIT_RESPONSE || !c->proto->client_gone(c))
        return 0;
    sws_conn_close(c);
    return 1;
}

/* The TLS handshake before anything else: 1 done (now or before), 0
 * waiting for the socket, -1 closed. */
static int conn_handshake(sws_conn_t *c)
{
    if (!c->tls_handshaking)
        return 1;
    /* A step only on input, or on the room it waited for: the first event
     * of a new connection is often EPOLLOUT alone, before the ClientHello,
     * and a step would only read EAGAIN (the registration reports input
     * that came before it, edge-triggered or not). */
    if (!c->readable)
        return 0;
    int r = sws_tls_handshake(c);
    if (r < 0) {
        sws_conn_close(c);
        return -1;
    }
    if (r == 0) {
        c->readable = 0; /* OpenSSL's read found EAGAIN, or it waits for room */
        return 0;
    }
    conn_switch_pending(c); /* ALPN chose HTTP/2 */
    conn_arm(c, &c->set->header_q);
    /* The first request may have come with the last flight. */
    c->readable = c->rdhup || !sws_tls_drained(c);
    return 1;
}

static void conn_turn(sws_conn_t *c)
{
    if (c->phase == SWS_CONN_LINGER) {
        if (c->readable) /* not for the client's ACK of our FIN */
            conn_linger_read(c);
        return;
    }
    if (conn_handshake(c) <= 0)
        return;
    /* Armed by a turn, not re-armed by each: OpenSSL's record buffers go
     * back within a second after the last turn (ADR 0063), and a busy
     * connection loses them once a second. */
    if (c->ssl != NULL && !sws_timer_is_armed(&c->tls_idle))
        sws_timer_arm(c->set->loop, &c->set->tls_idle_q, &c->tls_idle);
    c->wrote = 0;
    c->got_input = 0;
    c->head_started = 0;
    c->sent_turn = 0;
    c->yielded = 0;
    do {
        if (conn_pass(c) < 0 || conn_client_gone(c))
            return;
        if (sws_conn_output_blocked(c)) {
            conn_update_timer(c);
            return;
        }
        /* The client is gone for input: answer what it completed, then
         * close (a response still being produced finishes first). */
        if (c->peer_eof && c->proto->waiting_for(c) != SWS_PROTO_WAIT_RESPONSE)
            c->close_after = 1;
        if (conn_flush(c) < 0)
            return;
        /* That write may have drained what a response waits on. */
    } while (c->want_writable && !sws_conn_output_blocked(c) && !conn_budget_spent(c));
    /* The budget ran out just as the output emptied, with more to come:
     * no write will be pending to bring us back, so ask for a turn. */
    if (c->want_writable && conn_budget_spent(c) && !c->yielded && conn_yield(c) < 0)
        return;
    if (!conn_output_empty(c)) {
        conn_update_timer(c);
        return;
    }
    if (c->shut_wr == 1) {
        conn_shut_wr(c);
        c->shut_wr = 2;
    }
    if (c->close_after) {
        conn_finish(c);
        return;
    }
    /* HTTP/1.1 waits a little for its next request (sws_conn_set_drain). */
    if (c->set->draining && c->proto->drain != NULL && conn_drain_closes(c)) {
        sws_conn_close(c);
        return;
    }
    if (c->proto->waiting_for(c) == SWS_PROTO_WAIT_IDLE)
        conn_buffers_release(c);
    conn_update_timer(c);
}

static void conn_on_event(sws_io_t *io, uint32_t events)
{
    sws_conn_t *c = sws_container_of(io, sws_conn_t, io);
    if (c->phase == SWS_CONN_CLOSED)
        return; /* closed earlier in this event batch */
    if (events & EPOLLERR) {
        sws_conn_close(c);
        return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))
        c->readable = 1;
    if (events & (EPOLLRDHUP | EPOLLHUP))
        c->rdhup = 1;
    if ((events & EPOLLOUT) && c->tls_read_wants_write)
        c->readable = 1; /* the read that waited for room goes on */
    conn_run(c);
}

/* The send timer fired: 1 if the client acknowledged bytes since the last
 * check (the connection's start, or the previous firing). EPOLLOUT comes
 * only once a good part of the kernel's send buffer is free, which a slow
 * reader with megabytes queued takes far longer than the timeout to do;
 * the acknowledged bytes (written minus still queued, SIOCOUTQ) show that
 * it is reading. Asked only here, so no request pays a syscall for it. */
static int conn_client_took_bytes(sws_conn_t *c)
{
    int queued = 0;
    if (ioctl(c->io.fd, SIOCOUTQ, &queued) < 0 || queued < 0)
        return 0;
    /* A Unix socket counts its buffers' overhead too: then no progress. */
    uint64_t acked = (uint64_t)queued < c->bytes_out ? c->bytes_out - (uint64_t)queued : 0;
    if (acked <= c->acked_checked)
        return 0;
    c->acked_checked = acked;
    return 1;
}

/* Between turns: OpenSSL keeps what holds bytes; the next turn arms
 * again. Whatever the protocol waits for: a tunnel or a long poll may sit
 * for hours. */
static void conn_on_tls_idle(sws_timer_t *t)
{
    sws_conn_t *c = sws_container_of(t, sws_conn_t, tls_idle);
    if (c->ssl != NULL)
        sws_tls_release_buffers(c);
}

static void conn_on_timer(sws_timer_t *t)
{
    sws_conn_t *c = sws_container_of(t, sws_conn_t, timer);
    sws_conn_set_t *s = c->set;
    sws_timer_queue_t *q = c->timer_q;
    c->timer_q = NULL;
    if (q == &s->send_q) {
        if (conn_client_took_bytes(c)) {
            conn_arm(c, q);
            return;
        }
        sws_log_info("client %s: send timeout, closing", sws_conn_peer_text(c));
        sws_conn_close(c);
        return;
    }
    if (q == &s->handshake_q) {
        sws_log_debug("client %s: TLS handshake timeout, closing", sws_conn_peer_text(c));
        sws_conn_close(c);
        return;
    }
    if (q == &s->header_q && c->proto->waiting_for(c) == SWS_PROTO_WAIT_IDLE) {
        sws_conn_close(c); /* connected, never sent a byte: nothing to answer */
        return;
    }
    if (q == &s->header_q || q == &s->body_q) {
        c->proto->fail(c, 408, q == &s->header_q ? "request head timeout" : "request body timeout");
        conn_run(c);
        return;
    }
    if (q == &s->idle_q && c->proto->drain != NULL) {
        c->proto->drain(c); /* its goodbye, then close_after */
        conn_run(c);
        return;
    }
    sws_conn_close(c); /* idle keep-alive, or the end of a lingering close */
}
