/*
 * ingressd's health endpoint (ingressd/health.h). Smaller than the admin
 * API's server (supervisor/admin.c) on purpose: probes send one small GET
 * and read a small answer, so the answer is written with one write(2)
 * (well under a socket buffer) and the connection closed; there is no
 * output buffering, no linger, no body.
 */
#include "ingressd/health.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "supervisor/admin_http.h"
#include "supervisor/listen.h"
#include "worker/request.h"

#define HEALTH_MAX_CONNS 64
#define HEALTH_TIMEOUT_MS 5000
#define HEALTH_BACKLOG 64

typedef struct health_conn health_conn_t;

struct health_conn {
    sws_io_t io;
    sws_timer_t timer;
    sws_admin_req_t req;
    sws_ingress_health_t *h;
    health_conn_t *prev, *next;
};

struct sws_ingress_health {
    sws_loop_t *loop;
    sws_io_t listener;
    sws_timer_queue_t timeouts;
    sws_ingress_health_fn fn;
    void *ctx;
    health_conn_t *conns;
    unsigned nconns;
    char name[64];
};

static void listen_again(sws_ingress_health_t *h)
{
    if (h->nconns < HEALTH_MAX_CONNS)
        sws_loop_mod(h->loop, &h->listener, EPOLLIN);
}

static void conn_close(health_conn_t *c)
{
    sws_ingress_health_t *h = c->h;
    sws_timer_disarm(&c->timer);
    sws_loop_del(h->loop, &c->io);
    close(c->io.fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    h->nconns--;
    free(c);
    listen_again(h);
}

/* The answer, written once: a probe that does not take ~300 bytes at once
 * is not one we wait for. */
static void conn_answer(health_conn_t *c)
{
    sws_admin_req_t *r = &c->req;
    sws_json_out_t body = { 0 };
    unsigned status;
    int head_only = 0;

    if (r->state != SWS_ADMIN_REQ_DONE) {
        status = r->status;
        sws_json_error(&body, r->why);
    } else if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) {
        status = 405;
        sws_json_error(&body, "only GET and HEAD");
    } else if (strcmp(r->target, "/healthz") == 0 || strcmp(r->target, "/readyz") == 0) {
        head_only = r->method[0] == 'H';
        status = c->h->fn(c->h->ctx, r->target[1] == 'r', &body);
    } else {
        status = 404;
        sws_json_error(&body, "not found: GET /healthz or /readyz");
    }
    if (!body.oom) {
        char head[160];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                         status, sws_http_reason(status), body.len);
        sws_json_out_t out = { 0 };
        sws_json_raw(&out, head, (size_t)n);
        if (!head_only)
            sws_json_raw(&out, body.p != NULL ? body.p : "", body.len);
        if (!out.oom && write(c->io.fd, out.p, out.len) < 0)
            sws_log_debug("health %s: write: %s", c->h->name, strerror(errno));
        sws_json_out_free(&out);
    }
    sws_json_out_free(&body);
    conn_close(c);
}

static void on_conn(sws_io_t *io, uint32_t events)
{
    health_conn_t *c = sws_container_of(io, health_conn_t, io);
    char buf[2048];

    (void)events;
    for (;;) {
        ssize_t n = read(io->fd, buf, sizeof(buf));
        sws_admin_req_state_t st;
        if (n > 0)
            st = sws_admin_req_feed(&c->req, buf, (size_t)n);
        else if (n == 0)
            st = sws_admin_req_eof(&c->req);
        else if (errno == EINTR)
            continue;
        else if (errno == EAGAIN)
            return;
        else
            return conn_close(c);
        if (st == SWS_ADMIN_REQ_MORE)
            continue;
        if (n == 0 && c->req.total == 0)
            return conn_close(c); /* a TCP probe: connected and left */
        return conn_answer(c);
    }
}

static void on_timeout(sws_timer_t *t)
{
    conn_close(sws_container_of(t, health_conn_t, timer));
}

static void on_accept(sws_io_t *io, uint32_t events)
{
    sws_ingress_health_t *h = sws_container_of(io, sws_ingress_health_t, listener);

    (void)events;
    while (h->nconns < HEALTH_MAX_CONNS) {
        int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                sws_log_warn("health %s: accept: %s", h->name, strerror(errno));
            return;
        }
        health_conn_t *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            return;
        }
        c->h = h;
        c->io.fd = fd;
        c->io.cb = on_conn;
        sws_admin_req_init(&c->req);
        if (sws_loop_add(h->loop, &c->io, EPOLLIN) < 0) {
            close(fd);
            free(c);
            return;
        }
        sws_timer_init(&c->timer, on_timeout);
        sws_timer_arm(h->loop, &h->timeouts, &c->timer);
        c->next = h->conns;
        if (h->conns != NULL)
            h->conns->prev = c;
        h->conns = c;
        h->nconns++;
    }
    /* Full: the backlog holds the rest until a connection closes. */
    sws_loop_mod(h->loop, &h->listener, 0);
}

sws_ingress_health_t *sws_ingress_health_start(sws_loop_t *loop, const char *address,
                                               sws_ingress_health_fn fn, void *ctx, char *err,
                                               size_t errlen)
{
    struct sockaddr_storage ss;
    unsigned sslen;
    int one = 1;

    if (sws_listen_parse_address(address, &ss, &sslen, err, errlen) < 0)
        return NULL;
    sws_ingress_health_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    h->loop = loop;
    h->fn = fn;
    h->ctx = ctx;
    snprintf(h->name, sizeof(h->name), "%s", address);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&ss, sslen) < 0 || listen(fd, HEALTH_BACKLOG) < 0) {
        sws_errf(err, errlen, "--health %s: %s", address, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(h);
        return NULL;
    }
    h->listener.fd = fd;
    h->listener.cb = on_accept;
    if (sws_loop_add(loop, &h->listener, EPOLLIN) < 0) {
        sws_errf(err, errlen, "--health %s: epoll: %s", address, strerror(errno));
        close(fd);
        free(h);
        return NULL;
    }
    sws_timer_queue_init(loop, &h->timeouts, HEALTH_TIMEOUT_MS);
    return h;
}

void sws_ingress_health_stop(sws_ingress_health_t *h)
{
    if (h == NULL)
        return;
    while (h->conns != NULL)
        conn_close(h->conns);
    sws_loop_del(h->loop, &h->listener);
    close(h->listener.fd);
    sws_timer_queue_remove(h->loop, &h->timeouts);
    free(h);
}
