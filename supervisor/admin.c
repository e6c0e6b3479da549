#include "supervisor/admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/err.h"
#include "core/fmt.h"
#include "core/log.h"
#include "supervisor/admin_http.h"
#include "supervisor/admin_token.h"
#include "supervisor/listen.h"
#include "worker/request.h" /* sws_http_reason: one table of reason phrases */

#define ADMIN_BACKLOG 16
#define ADMIN_READ_CHUNK 4096
#define ADMIN_LINGER_MAX (64u << 10) /* bytes read and dropped after the answer */

typedef struct admin_listener {
    sws_io_t io;
    sws_admin_t *admin;
    char name[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* as configured */
    int is_unix;
    dev_t dev; /* the socket file we created: removed at stop only if still it */
    ino_t ino;
} admin_listener_t;

typedef struct admin_conn {
    sws_io_t io;
    sws_admin_t *admin;
    sws_timer_t timer;
    struct admin_conn *prev, *next;
    sws_admin_req_t req;
    sws_json_out_t out; /* the whole response once the request is read */
    size_t sent;
    int lingering;      /* answered: reading to the client's end (see conn_linger) */
    size_t discarded;
    const admin_listener_t *listener; /* accepted on it */
} admin_conn_t;

/* A refusal said at most once per REFUSED_LOG_PERIOD_MS, with how many
 * there were since the line before. */
typedef struct admin_tally {
    uint64_t count;
    uint64_t said_ms; /* when the log last said so (0: never) */
} admin_tally_t;

struct sws_admin {
    sws_loop_t *loop;
    sws_admin_handle_fn handle; /* the admin API's, or sws_admin_serve's caller's */
    void *handle_ctx;
    sws_admin_api_t api;
    admin_listener_t *listeners;
    unsigned nlisteners;
    admin_conn_t *conns;
    unsigned nconns;
    sws_timer_queue_t timeouts;
    int keep_files; /* sws_admin_release: a new binary serves the socket files now */
    admin_tally_t refused;      /* connections closed at once: all slots held */
    admin_tally_t unauthorized; /* requests answered 401 */
    /* server.admin.token_file: TCP listeners need the token; token_len 0
     * with need_token: it could not be read, so nothing passes. Wiped
     * when replaced and at the stop. */
    int need_token;
    uint8_t token[SWS_ADMIN_TOKEN_MAX];
    size_t token_len;
};

/* An operator whose curl gets a reset or a 401 must find why in the log,
 * once per period, not once per connection (they may come in a flood). */
#define REFUSED_LOG_PERIOD_MS 10000u

/* ---- addresses ---- */

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return 0;
}

int sws_admin_parse_address(const char *text, sws_admin_addr_t *addr, char *err, size_t errlen)
{
    memset(addr, 0, sizeof(*addr));
    if (text[0] == '/') {
        struct sockaddr_un *un = (struct sockaddr_un *)&addr->ss;
        if (strlen(text) >= sizeof(un->sun_path))
            return sws_errf(err, errlen, "\"%s\": a Unix socket path has at most %zu bytes",
                            text, sizeof(un->sun_path) - 1);
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, text);
        addr->len = (socklen_t)sizeof(*un);
        return 0;
    }
    unsigned len = 0;
    if (sws_listen_parse_address(text, &addr->ss, &len, err, errlen) < 0)
        return -1;
    addr->len = (socklen_t)len;
    if (!is_loopback(&addr->ss))
        return sws_errf(err, errlen,
                        "\"%s\" is not a loopback address: the admin API speaks plain HTTP, so "
                        "its token would cross the network in clear; use a Unix socket path, "
                        "127.0.0.1:PORT or [::1]:PORT", text);
    return 0;
}

/* ---- opening ---- */

/* A socket file at path: removed when nobody accepts on it any more (the
 * process that made it died), kept (and an error) when someone does. */
static int clear_stale_socket(const char *path, const struct sockaddr_storage *ss,
                              socklen_t len, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : sws_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return sws_errf(err, errlen, "%s exists and is not a socket; not replaced", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sws_errf(err, errlen, "socket: %s", strerror(errno));
    int rc = connect(fd, (const struct sockaddr *)ss, len);
    int e = errno;
    close(fd);
    /* EAGAIN: its backlog is full, so someone listens. */
    if (rc == 0 || e == EAGAIN)
        return sws_errf(err, errlen, "%s: another process serves it; not replaced", path);
    if (e != ECONNREFUSED)
        return sws_errf(err, errlen, "%s: %s", path, strerror(e));
    if (unlink(path) < 0 && errno != ENOENT)
        return sws_errf(err, errlen, "remove the stale socket %s: %s", path, strerror(errno));
    return 0;
}

/* The socket's directory, created when missing (its parent must exist):
 * /run is a tmpfs, so /run/scalws is gone after every boot. */
static int make_socket_dir(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *d = dirname(dir);
    if (mkdir(d, 0755) < 0 && errno != EEXIST)
        return sws_errf(err, errlen, "create %s: %s", d, strerror(errno));
    return 0;
}

static int open_unix(admin_listener_t *l, const sws_admin_addr_t *a, char *err, size_t errlen)
{
    const char *path = ((const struct sockaddr_un *)&a->ss)->sun_path;
    if (make_socket_dir(path, err, errlen) < 0 ||
        clear_stale_socket(path, &a->ss, a->len, err, errlen) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sws_errf(err, errlen, "socket: %s", strerror(errno));
    /* Created 0600, never wider for a moment: the umask is the one way to
     * set a socket file's mode at bind. */
    mode_t old = umask(0177);
    int rc = bind(fd, (const struct sockaddr *)&a->ss, a->len);
    int e = errno;
    umask(old);
    struct stat st;
    if (rc < 0 || stat(path, &st) < 0 || listen(fd, ADMIN_BACKLOG) < 0) {
        e = rc < 0 ? e : errno;
        if (rc == 0)
            unlink(path);
        close(fd);
        return sws_errf(err, errlen, "bind %s: %s", path, strerror(e));
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->is_unix = 1;
    l->io.fd = fd;
    return 0;
}

static int open_inet(admin_listener_t *l, const sws_admin_addr_t *a, char *err, size_t errlen)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0)
        return sws_errf(err, errlen, "socket: %s", strerror(errno));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0 || listen(fd, ADMIN_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        return sws_errf(err, errlen, "bind %s: %s", l->name, strerror(e));
    }
    l->io.fd = fd;
    return 0;
}

/* ---- connections ---- */

static void conn_close(admin_conn_t *c)
{
    sws_admin_t *admin = c->admin;
    sws_timer_disarm(&c->timer);
    sws_loop_del(admin->loop, &c->io);
    close(c->io.fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        admin->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    admin->nconns--;
    sws_json_out_free(&c->out);
    /* It may hold the token: not left in freed memory. */
    explicit_bzero(c->req.authorization, sizeof(c->req.authorization));
    free(c);
}

/* The whole response into c->out: head, then the JSON body (none for
 * HEAD). */
static void conn_respond(admin_conn_t *c, const sws_admin_reply_t *reply, int head_only)
{
    char head[320];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n%s%s%s%s%s%sConnection: close\r\n\r\n",
                     reply->status, sws_http_reason(reply->status), reply->body.len,
                     reply->allow != NULL ? "Allow: " : "",
                     reply->allow != NULL ? reply->allow : "", reply->allow != NULL ? "\r\n" : "",
                     reply->challenge != NULL ? "WWW-Authenticate: " : "",
                     reply->challenge != NULL ? reply->challenge : "",
                     reply->challenge != NULL ? "\r\n" : "");
    /* The values are our own constants: a cut head is a bug, not input. */
    if (n < 0 || (size_t)n >= sizeof(head)) {
        c->out.oom = 1;
        return;
    }
    sws_json_raw(&c->out, head, (size_t)n);
    if (!head_only)
        sws_json_raw(&c->out, reply->body.p != NULL ? reply->body.p : "", reply->body.len);
}

static void note_unauthorized(sws_admin_t *admin, const admin_listener_t *l,
                              const sws_admin_req_t *r, sws_admin_auth_t auth);

/* The request's credentials: the Unix socket's mode guards it, a TCP
 * listener needs the token once token_file is set. */
static sws_admin_auth_t conn_auth(const admin_conn_t *c)
{
    const sws_admin_t *admin = c->admin;
    const sws_admin_req_t *r = &c->req;
    if (c->listener->is_unix || !admin->need_token)
        return SWS_ADMIN_AUTH_OK;
    return sws_admin_token_check(admin->token, admin->token_len,
                                 r->has_authorization ? r->authorization : NULL,
                                 r->authorization_len);
}

static void conn_answer(admin_conn_t *c)
{
    sws_admin_reply_t reply;
    sws_admin_req_t *r = &c->req;
    int head_only = 0;
    if (r->state == SWS_ADMIN_REQ_DONE) {
        head_only = strcmp(r->method, "HEAD") == 0;
        c->admin->api.peer_unix = c->listener->is_unix;
        c->admin->api.auth = conn_auth(c);
        c->admin->handle(c->admin->handle_ctx, r->method, r->target, r->body, r->body_len,
                         &reply);
        if (reply.status == 401)
            note_unauthorized(c->admin, c->listener, r, c->admin->api.auth);
    } else {
        memset(&reply, 0, sizeof(reply));
        reply.status = r->status;
        sws_json_error(&reply.body, r->why);
    }
    conn_respond(c, &reply, head_only);
    sws_json_out_free(&reply.body);
}

/* After the answer: our side is shut, and what the client still sends
 * (the rest of a body refused as too large) is read and dropped until it
 * closes. Closing with unread bytes would reset the connection, and the
 * client could lose the answer it has not read yet. Bounded in bytes
 * here and in time by the connection's timer. */
static void conn_linger(admin_conn_t *c)
{
    char buf[ADMIN_READ_CHUNK];
    for (;;) {
        ssize_t n = read(c->io.fd, buf, sizeof(buf));
        if (n > 0 && (c->discarded += (size_t)n) <= ADMIN_LINGER_MAX)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        return conn_close(c);
    }
}

/* Write what is left; then linger (or close when the client went away). */
static void conn_flush(admin_conn_t *c)
{
    while (c->sent < c->out.len) {
        ssize_t n = write(c->io.fd, c->out.p + c->sent, c->out.len - c->sent);
        if (n > 0) {
            c->sent += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            sws_loop_mod(c->admin->loop, &c->io, EPOLLOUT);
            return;
        } else {
            return conn_close(c);
        }
    }
    shutdown(c->io.fd, SHUT_WR);
    c->lingering = 1;
    sws_loop_mod(c->admin->loop, &c->io, EPOLLIN);
    conn_linger(c);
}

static void on_conn(sws_io_t *io, uint32_t events)
{
    admin_conn_t *c = sws_container_of(io, admin_conn_t, io);
    if (c->lingering)
        return conn_linger(c);
    if (c->out.len > 0 || c->out.oom) {
        if (c->out.oom)
            conn_close(c);
        else
            conn_flush(c);
        return;
    }
    (void)events;
    char buf[ADMIN_READ_CHUNK];
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
        /* A client that left before its request ended gets no answer. */
        if (n == 0 && st == SWS_ADMIN_REQ_ERROR && c->req.total == 0)
            return conn_close(c);
        conn_answer(c);
        if (c->out.oom)
            return conn_close(c);
        return conn_flush(c);
    }
}

static void on_conn_timeout(sws_timer_t *t)
{
    admin_conn_t *c = sws_container_of(t, admin_conn_t, timer);
    conn_close(c);
}

/* Count one more; the count to say now (then zeroed), or 0 when the
 * last line is less than a period old. */
static uint64_t tally_due(sws_admin_t *admin, admin_tally_t *t)
{
    uint64_t now = sws_loop_now_ms(admin->loop);
    t->count++;
    if (t->said_ms != 0 && now - t->said_ms < REFUSED_LOG_PERIOD_MS)
        return 0;
    uint64_t n = t->count;
    t->count = 0;
    t->said_ms = now != 0 ? now : 1;
    return n;
}

static void note_refused(sws_admin_t *admin, const admin_listener_t *l)
{
    uint64_t n = tally_due(admin, &admin->refused);
    if (n > 0)
        sws_log_warn("admin API: %s: %llu connection(s) closed at once: %u open, the most "
                     "served at a time (each is closed %u s after it was accepted)", l->name,
                     (unsigned long long)n, admin->nconns, SWS_ADMIN_TIMEOUT_MS / 1000);
}

/* A guesser may send thousands a second: one line per period. */
static void note_unauthorized(sws_admin_t *admin, const admin_listener_t *l,
                              const sws_admin_req_t *r, sws_admin_auth_t auth)
{
    uint64_t n = tally_due(admin, &admin->unauthorized);
    if (n > 0)
        sws_log_warn("admin API: %s: %llu request(s) answered 401 (the last: %s %s, %s); "
                     "this listener needs the token of server.admin.token_file", l->name,
                     (unsigned long long)n, r->method, r->target,
                     auth == SWS_ADMIN_AUTH_WRONG ? "a wrong bearer token"
                                                  : "no bearer token");
}

static void on_accept(sws_io_t *io, uint32_t events)
{
    (void)events;
    admin_listener_t *l = sws_container_of(io, admin_listener_t, io);
    sws_admin_t *admin = l->admin;
    for (;;) {
        int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                sws_log_warn("admin API: accept on %s: %s", l->name, strerror(errno));
            return;
        }
        admin_conn_t *c = admin->nconns < SWS_ADMIN_MAX_CONNS ? malloc(sizeof(*c)) : NULL;
        if (c == NULL) {
            close(fd);
            note_refused(admin, l);
            continue;
        }
        memset(c, 0, sizeof(*c));
        c->admin = admin;
        c->io.fd = fd;
        c->io.cb = on_conn;
        c->listener = l;
        sws_admin_req_init(&c->req);
        if (sws_loop_add(admin->loop, &c->io, EPOLLIN) < 0) {
            close(fd);
            free(c);
            continue;
        }
        sws_timer_init(&c->timer, on_conn_timeout);
        sws_timer_arm(admin->loop, &admin->timeouts, &c->timer);
        c->next = admin->conns;
        if (c->next != NULL)
            c->next->prev = c;
        admin->conns = c;
        admin->nconns++;
    }
}

/* ---- life ---- */

void sws_admin_set_accept_policy(sws_admin_t *admin, const char *policy)
{
    if (admin != NULL)
        admin->api.accept_policy = policy;
}

static sws_admin_t *admin_new(sws_loop_t *loop, size_t nlisten, sws_admin_handle_fn handle,
                              void *ctx)
{
    sws_admin_t *admin = calloc(1, sizeof(*admin));
    admin_listener_t *ls = calloc(nlisten, sizeof(*ls));
    if (admin == NULL || ls == NULL) {
        free(admin);
        free(ls);
        return NULL;
    }
    admin->loop = loop;
    admin->listeners = ls;
    admin->handle = handle;
    admin->handle_ctx = ctx;
    sws_timer_queue_init(loop, &admin->timeouts, SWS_ADMIN_TIMEOUT_MS);
    return admin;
}

/* Open the next listener on a (name: as given, for logs and the socket
 * file's removal). 0, or -1 with err. */
static int admin_listen(sws_admin_t *admin, const char *name, const sws_admin_addr_t *a,
                        int inherited, char *err, size_t errlen)
{
    admin_listener_t *l = &admin->listeners[admin->nlisteners];
    memset(l, 0, sizeof(*l));
    l->admin = admin;
    l->io.cb = on_accept;
    snprintf(l->name, sizeof(l->name), "%s", name);
    int rc = 0;
    struct stat st;
    if (inherited >= 0) {
        /* A binary upgrade's: already bound and listening, its queue kept;
         * the socket file is ours to remove at the stop. */
        l->io.fd = inherited;
        l->is_unix = a->ss.ss_family == AF_UNIX;
        if (l->is_unix && stat(l->name, &st) == 0) {
            l->dev = st.st_dev;
            l->ino = st.st_ino;
        }
    } else {
        rc = a->ss.ss_family == AF_UNIX ? open_unix(l, a, err, errlen)
                                        : open_inet(l, a, err, errlen);
    }
    if (rc == 0 && sws_loop_add(admin->loop, &l->io, EPOLLIN) < 0) {
        rc = sws_errf(err, errlen, "epoll: %s", strerror(errno));
        close(l->io.fd);
        if (l->is_unix)
            unlink(l->name);
    }
    if (rc == 0)
        admin->nlisteners++;
    return rc;
}

/* A loopback port is open to every local user (in a pod, to every
 * container): say so once per listener that nothing else guards. */
static void warn_unguarded(const sws_admin_t *admin)
{
    for (unsigned i = 0; i < admin->nlisteners && !admin->need_token; i++) {
        if (!admin->listeners[i].is_unix)
            sws_log_warn("admin API on %s: no server.admin.token_file, so any local user may "
                         "change pool members and start an upgrade through it",
                         admin->listeners[i].name);
    }
}

static void forget_token(sws_admin_t *admin)
{
    explicit_bzero(admin->token, sizeof(admin->token));
    admin->token_len = 0;
}

/* cfg's token (copied); a token_file whose token the reader did not read
 * (a RouteSet not from a file) lets nothing through rather than all. */
static void take_token(sws_admin_t *admin, const Sws__Admin *cfg)
{
    forget_token(admin);
    admin->need_token = cfg->token_file[0] != '\0';
    if (admin->need_token && cfg->token.len > 0 && cfg->token.len <= sizeof(admin->token)) {
        memcpy(admin->token, cfg->token.data, cfg->token.len);
        admin->token_len = cfg->token.len;
    }
}

/* take_token, and one line: the file read, or (warn) the listeners
 * nothing guards. */
static void use_token(sws_admin_t *admin, const Sws__Admin *cfg, int warn)
{
    take_token(admin, cfg);
    if (admin->need_token)
        sws_log_info("admin API: bearer token read from %s", cfg->token_file);
    else if (warn)
        warn_unguarded(admin);
}

void sws_admin_forget_token(sws_admin_t *admin)
{
    if (admin != NULL)
        forget_token(admin);
}

void sws_admin_set_token(sws_admin_t *admin, const Sws__Admin *cfg)
{
    if (admin != NULL && cfg != NULL)
        use_token(admin, cfg, admin->need_token);
}

static void api_handle(void *ctx, const char *method, const char *target, const char *body,
                       size_t body_len, sws_admin_reply_t *reply)
{
    sws_admin_api_handle(ctx, method, target, body, body_len, reply);
}

sws_admin_t *sws_admin_start(sws_loop_t *loop, const Sws__Admin *cfg, sws_shm_t *shm,
                             unsigned nworkers, sws_admin_publish_fn publish, void *ctx)
{
    return sws_admin_start_inherited(loop, cfg, shm, nworkers, publish, ctx, NULL, NULL, 0);
}

sws_admin_t *sws_admin_start_inherited(sws_loop_t *loop, const Sws__Admin *cfg, sws_shm_t *shm,
                                       unsigned nworkers, sws_admin_publish_fn publish,
                                       void *ctx, const char *const *names, int *fds,
                                       unsigned nfds)
{
    if (cfg == NULL || cfg->n_listen == 0)
        return NULL;
    sws_admin_t *admin = admin_new(loop, cfg->n_listen, api_handle, NULL);
    if (admin == NULL) {
        sws_log_error("admin API: out of memory; not served");
        return NULL;
    }
    admin->handle_ctx = &admin->api;
    admin->api.shm = shm;
    admin->api.nworkers = nworkers;
    admin->api.publish = publish;
    admin->api.publish_ctx = ctx;

    for (size_t i = 0; i < cfg->n_listen; i++) {
        sws_admin_addr_t a;
        char err[PATH_MAX + 128];
        int inherited = -1;
        for (unsigned k = 0; k < nfds && inherited < 0; k++) {
            if (fds[k] >= 0 && strcmp(names[k], cfg->listen[i]) == 0) {
                inherited = fds[k];
                fds[k] = -1;
            }
        }
        if (sws_admin_parse_address(cfg->listen[i], &a, err, sizeof(err)) < 0 ||
            admin_listen(admin, cfg->listen[i], &a, inherited, err, sizeof(err)) < 0) {
            if (inherited >= 0)
                close(inherited);
            sws_log_error("admin API: %s; not served there", err);
            continue;
        }
        sws_log_info("admin API on %s", cfg->listen[i]);
    }
    use_token(admin, cfg, 1);
    return admin;
}

sws_admin_t *sws_admin_serve(sws_loop_t *loop, const char *name, const sws_admin_addr_t *addr,
                             sws_admin_handle_fn handle, void *ctx, char *err, size_t errlen)
{
    sws_admin_t *admin = admin_new(loop, 1, handle, ctx);
    if (admin == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (admin_listen(admin, name, addr, -1, err, errlen) < 0) {
        sws_admin_stop(admin);
        return NULL;
    }
    return admin;
}

void sws_admin_set_ingress(sws_admin_t *admin, const struct sws_ingress_sub *ingress)
{
    if (admin != NULL)
        admin->api.ingress = ingress;
}

void sws_admin_published(sws_admin_t *admin, const Sws__RouteSet *rs, uint64_t gen,
                         sws_published_by_t by)
{
    if (admin != NULL)
        sws_admin_api_published(&admin->api, rs, gen, by);
}

void sws_admin_close_fds(sws_admin_t *admin)
{
    if (admin == NULL)
        return;
    for (unsigned i = 0; i < admin->nlisteners; i++)
        close(admin->listeners[i].io.fd);
    for (admin_conn_t *c = admin->conns; c != NULL; c = c->next)
        close(c->io.fd);
}

void sws_admin_stop(sws_admin_t *admin)
{
    if (admin == NULL)
        return;
    while (admin->conns != NULL)
        conn_close(admin->conns);
    for (unsigned i = 0; i < admin->nlisteners; i++) {
        admin_listener_t *l = &admin->listeners[i];
        struct stat st;
        sws_loop_del(admin->loop, &l->io);
        close(l->io.fd);
        /* Not a file another process has put there since. */
        if (l->is_unix && !admin->keep_files && lstat(l->name, &st) == 0 &&
            st.st_dev == l->dev && st.st_ino == l->ino)
            unlink(l->name);
    }
    sws_timer_queue_remove(admin->loop, &admin->timeouts);
    forget_token(admin);
    free(admin->listeners);
    sws_admin_api_free(&admin->api);
    free(admin);
}

void sws_admin_set_upgrade(sws_admin_t *admin, sws_admin_upgrade_fn upgrade)
{
    if (admin != NULL)
        admin->api.upgrade = upgrade;
}

unsigned sws_admin_listeners(const sws_admin_t *admin, const char **names, int *fds,
                             unsigned max)
{
    unsigned n = 0;
    for (unsigned i = 0; admin != NULL && i < admin->nlisteners && n < max; i++, n++) {
        names[n] = admin->listeners[i].name;
        fds[n] = admin->listeners[i].io.fd;
    }
    return n;
}

void sws_admin_release(sws_admin_t *admin)
{
    if (admin == NULL)
        return;
    admin->keep_files = 1;
    sws_admin_stop(admin);
}

void sws_admin_published_packed(sws_admin_t *admin, const uint8_t *packed, size_t len,
                                uint64_t gen, sws_published_by_t by)
{
    if (admin != NULL)
        sws_admin_api_published_packed(&admin->api, packed, len, gen, by);
}
