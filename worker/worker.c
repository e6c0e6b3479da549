#include "worker/worker.h"

#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/chan.h"
#include "core/log.h"
#include "core/loop.h"
#include "worker/access_log.h"
#include "worker/conn.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/http2.h"
#include "worker/http1.h"
#include "worker/load.h"
#include "worker/server_tokens.h"
#include "worker/tls.h"
#include "worker/upstream_stats.h"

/* Accepts per listener event, until EAGAIN: the accept4 that finds EAGAIN
 * is dearer for a lone connection than one accept per event, but cheaper
 * than the epoll_wait per connection that costs under a burst (ADR 0058). */
#define ACCEPT_BATCH 64
#define ACCEPT_PAUSE_MS 100      /* out of fds: retry accepting after this */
#define ACCEPT_ERROR_LOG_MS 1000 /* at most one "out of fds" line per second */
#define ACCESS_LOG_RETRY_MS 1000 /* a destination not reading: try again after this */

typedef struct listener {
    sws_io_t io;
    struct sws_worker *worker;
    int tls;                      /* its clients speak TLS */
} listener_t;

/* Everything a worker process owns; lives on sws_worker_main's stack. */
typedef struct sws_worker {
    const sws_worker_config_t *cfg;
    sws_loop_t loop;
    sws_conn_set_t conns;
    sws_access_log_t access_log;
    sws_worker_ctx_t ctx;         /* what handlers keep between requests */
    sws_shm_counters_t *counters;
    sws_load_t load;              /* published for the eBPF accept policies */
    sws_upstream_stats_t upstream_stats; /* published for GET /v1/pools */
    uint64_t generation;          /* of the table in use; 0: none */
    size_t arenas_warm;           /* bytes of every arena read in (sws_shm_reader_warm) */
    pid_t pid;                    /* cached: the reader slot is stamped every tick */
    sws_io_t signals;
    sws_io_t ctl;                 /* control channel from the supervisor */
    listener_t *listeners;
    unsigned nlisteners;
    int listening;                /* listeners registered in epoll */
    int quit_requested;           /* SIGQUIT seen; the next tick drains (conns.draining) */
    sws_timer_queue_t accept_q;   /* accept pause after EMFILE */
    sws_timer_t accept_timer;
    uint64_t accept_error_logged_ms;
    sws_timer_queue_t shutdown_q; /* graceful stop deadline */
    sws_timer_t shutdown_timer;
    sws_timer_queue_t access_log_q; /* wakes an idle worker to flush the access log */
    sws_timer_t access_log_timer;
    int serves_tls;               /* a listener is TLS: each generation gets contexts */
    char server[SWS_SERVER_TOKENS_BUF]; /* the Server value with its tokens, if any */
} sws_worker_t;

static int listeners_register(sws_worker_t *w)
{
    uint32_t events = EPOLLIN | (w->cfg->exclusive ? EPOLLEXCLUSIVE : 0);
    for (unsigned i = 0; i < w->nlisteners; i++) {
        if (sws_loop_add(&w->loop, &w->listeners[i].io, events) < 0) {
            sws_log_error("epoll_ctl(ADD) listener: %s", strerror(errno));
            return -1;
        }
    }
    w->listening = 1;
    return 0;
}

static void listeners_unregister(sws_worker_t *w)
{
    if (!w->listening)
        return;
    for (unsigned i = 0; i < w->nlisteners; i++)
        sws_loop_del(&w->loop, &w->listeners[i].io);
    w->listening = 0;
}

static void accept_resume(sws_timer_t *t)
{
    sws_worker_t *w = sws_container_of(t, sws_worker_t, accept_timer);
    if (!w->conns.draining)
        listeners_register(w);
}

/* Stop accepting for a moment instead of spinning on a level-triggered
 * listener that cannot be served: out of descriptors, or a listening socket
 * the supervisor parked (it polls as hung up until listened on again). The
 * line is logged at most once per ACCEPT_ERROR_LOG_MS: a parked socket
 * comes back to this at every retry. */
static void accept_pause(sws_worker_t *w, sws_log_level_t level, const char *why)
{
    uint64_t now = sws_loop_now_ms(&w->loop);
    if (w->accept_error_logged_ms == 0 || now - w->accept_error_logged_ms >= ACCEPT_ERROR_LOG_MS) {
        sws_log(level, "accept: %s; pausing accepts for %u ms", why, ACCEPT_PAUSE_MS);
        w->accept_error_logged_ms = now;
    }
    listeners_unregister(w);
    sws_timer_arm(&w->loop, &w->accept_q, &w->accept_timer);
}

static void on_listener(sws_io_t *io, uint32_t events)
{
    (void)events;
    listener_t *l = sws_container_of(io, listener_t, io);
    sws_worker_t *w = l->worker;
    for (int i = 0; i < ACCEPT_BATCH && w->listening; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(io->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                accept_pause(w, SWS_LOG_ERROR, strerror(errno));
            else if (errno == EINVAL)
                /* Not listening: the supervisor parked the socket while we
                 * were stuck (ADR 0010) and will listen on it again. */
                accept_pause(w, SWS_LOG_INFO, "the listening socket is parked");
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                sws_log_error("accept: %s", strerror(errno));
            return;
        }
        if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
        w->counters->connections_accepted++;
        sws_load_accepted(&w->load);
        if (l->tls)
            sws_conn_open_tls(&w->conns, fd, (struct sockaddr *)&ss, len);
        else
            sws_conn_open(&w->conns, fd, (struct sockaddr *)&ss, len);
    }
}

/* Adopt the newest table generation: settings, timers, access log. */
static void adopt_generation(sws_worker_t *w)
{
    /* Every tick and every wake-up, so cheap when nothing changed: one load
     * and a compare in shm, one compare here. (Before the first publish
     * there is no table: the connection set keeps its defaults.) */
    if (w->generation != 0 && sws_shm_current_generation(w->cfg->shm) == w->generation)
        return; /* our reader slot already holds it */
    const sws_table_t *t = sws_shm_reader_acquire(w->cfg->shm, w->cfg->index, w->pid);
    if (t == NULL)
        return;
    uint64_t gen = sws_table_generation(t);
    if (gen == w->generation)
        return;
    w->generation = gen;
    const sws_settings_t *st = sws_table_settings(t);
    sws_str_t server = { sws_table_str(t, st->server_name), st->server_name.len };
    server = sws_server_tokens_apply(server, st->server_tokens, w->server, sizeof(w->server));
    sws_conn_set_configure(&w->conns, t, st, server);
    char err[160];
    if (w->serves_tls) {
        /* Connections keep the contexts they use (OpenSSL counts them). */
        sws_tls_gen_t *g = sws_tls_gen_build(t, sws_shm_tickets(w->cfg->shm), err, sizeof(err));
        /* On failure (out of memory: the supervisor checked the pairs) the
         * old contexts cannot stay: their host indices are the released
         * table's. */
        if (g == NULL)
            sws_log_error("generation %llu: TLS: %s: TLS connections are refused until the "
                          "next generation", (unsigned long long)gen, err);
        sws_tls_gen_free(w->conns.tls);
        w->conns.tls = g;
    }
    if (sws_upstream_pools_adopt(&w->ctx.pools, t, &w->ctx.upstreams, err, sizeof(err)) < 0)
        sws_log_error("generation %llu: %s: proxied requests keep the previous pools",
                      (unsigned long long)gen, err);
    else
        sws_upstream_stats_adopted(&w->upstream_stats);
    /* A reload's logging.level reaches running workers with the table. */
    if (sws_settings_log_level(st) >= 0)
        sws_log_set_level((sws_log_level_t)sws_settings_log_level(st));
    sws_access_log_set_format(&w->access_log, st->access_log_format);
    /* Part of taking a larger table than ever, not of the next one's
     * adoption: before the line that says it is in use. */
    w->arenas_warm = sws_shm_reader_warm(w->cfg->shm, w->arenas_warm);
    sws_log_debug("using table generation %llu", (unsigned long long)gen);
}

/* sws_loop_run_once returns without waiting when the tick sets stop. */
static void stop_now(sws_worker_t *w)
{
    w->loop.stop = 1;
}

static void on_shutdown_timeout(sws_timer_t *t)
{
    sws_worker_t *w = sws_container_of(t, sws_worker_t, shutdown_timer);
    unsigned idle = sws_conn_set_count_idle(&w->conns);
    unsigned n = sws_conn_set_close_all(&w->conns);
    sws_log_notice("graceful stop: timeout, %u connection%s cut (%u idle)", n, n == 1 ? "" : "s",
                   idle);
    stop_now(w);
}

/* Called by the tick after adopt_generation(): a worker idle since before
 * a reload adopts the new table only when it wakes, and it may switch
 * generations only between iterations (shm.h), so the signal handler
 * leaves the stop to the tick, which reads the timeout from the newest
 * generation. */
static void drain(sws_worker_t *w)
{
    if (w->conns.draining)
        return;
    listeners_unregister(w);
    sws_timer_disarm(&w->accept_timer);
    sws_load_draining(&w->load);
    for (unsigned i = 0; i < w->nlisteners; i++) {
        close(w->listeners[i].io.fd);
        w->listeners[i].io.fd = -1;
    }
    sws_conn_set_drain(&w->conns);
    sws_log_info("graceful stop: %u connection%s to finish", w->conns.nlive,
                 w->conns.nlive == 1 ? "" : "s");
    sws_timer_queue_set_duration(&w->shutdown_q, w->conns.settings->shutdown_timeout_ms);
    sws_timer_arm(&w->loop, &w->shutdown_q, &w->shutdown_timer);
}

static void on_tick(sws_loop_t *loop, void *data)
{
    sws_worker_t *w = data;
    sws_conn_set_reap(&w->conns);
    sws_access_log_flush(&w->access_log);
    if (sws_access_log_waiting(&w->access_log) && !sws_timer_is_armed(&w->access_log_timer))
        sws_timer_arm(&w->loop, &w->access_log_q, &w->access_log_timer);
    adopt_generation(w);
    if (w->quit_requested)
        drain(w);
    w->counters->connections_active = w->conns.nlive;
    sws_load_tick(&w->load, sws_loop_now_ms(loop), w->conns.nlive, w->conns.inflight);
    sws_upstream_stats_tick(&w->upstream_stats);
    if (w->conns.draining && w->conns.nlive == 0 && !w->loop.stop)
        stop_now(w);
}

/* A worker asleep in epoll_wait when a reload published must not handle
 * the request that wakes it with the old table: the docs promise the next
 * request on every connection the new one. This is the same point between
 * event batches as the tick (shm.h's rule for switching), only later. */
static void on_wake(sws_loop_t *loop, void *data)
{
    (void)loop;
    sws_worker_t *w = data;
    sws_load_woke(&w->load);
    adopt_generation(w);
}

/* Nothing to do here: waking up is the point, the tick that follows
 * flushes (and reports drops). */
static void on_access_log_timer(sws_timer_t *t)
{
    (void)t;
}

static void on_signal(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_worker_t *w = sws_container_of(io, sws_worker_t, signals);
    struct signalfd_siginfo si;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGTERM)
            stop_now(w);
        else if (si.ssi_signo == SIGQUIT)
            w->quit_requested = 1;
    }
}

/* New log descriptors (SIGUSR1, a reload that moved the access log):
 * what is buffered goes to the old ones, then they are swapped. */
static void take_logs(sws_worker_t *w, sws_chan_msg_t *m)
{
    struct sws_chan_logs logs = { 0 };
    memcpy(&logs, m->body, m->len < sizeof(logs) ? m->len : sizeof(logs));
    unsigned want = !!(logs.flags & SWS_CHAN_LOGS_ERROR) + !!(logs.flags & SWS_CHAN_LOGS_ACCESS);
    if (m->nfds != want) {
        sws_log_error("control channel: log message with %u descriptors, %u expected", m->nfds,
                      want);
        return;
    }
    unsigned i = 0;
    if (logs.flags & SWS_CHAN_LOGS_ERROR) {
        sws_log_set_fd(m->fds[i]);
        m->fds[i++] = -1;
    }
    if (logs.flags & SWS_CHAN_LOGS_ACCESS) {
        sws_access_log_set_fd(&w->access_log, m->fds[i]);
        m->fds[i++] = -1;
    }
    sws_log_info("log files reopened");
}

/* A standby worker's go-ahead (a binary upgrade's GO). One that cannot
 * register stops: restarted by the supervisor, it accepts from the start. */
static void accept_now(sws_worker_t *w)
{
    if (w->listening || w->conns.draining || w->quit_requested)
        return;
    if (listeners_register(w) < 0)
        stop_now(w);
}

static void on_control(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_worker_t *w = sws_container_of(io, sws_worker_t, ctl);
    char err[256];
    sws_chan_msg_t m;
    int rc;
    while ((rc = sws_chan_recv(io->fd, &m, err, sizeof(err))) == 1) {
        if (m.type == SWS_CHAN_LOGS)
            take_logs(w, &m);
        else if (m.type == SWS_CHAN_GENERATION)
            ; /* on_wake adopted it before this handler ran */
        else if (m.type == SWS_CHAN_ACCEPT)
            accept_now(w);
        else
            sws_log_error("control channel: unknown message type %u", (unsigned)m.type);
        sws_chan_msg_close_fds(&m);
    }
    if (rc < 0) {
        /* The supervisor is gone (its death signal stops us) or the
         * channel broke: either way nothing more will come. */
        if (errno != 0)
            sws_log_error("%s", err);
        sws_loop_del(&w->loop, io);
        close(io->fd);
        io->fd = -1;
    }
}

static int setup_control(sws_worker_t *w)
{
    w->ctl.fd = w->cfg->ctl_fd;
    w->ctl.cb = on_control;
    if (w->ctl.fd >= 0 && sws_loop_add(&w->loop, &w->ctl, EPOLLIN) < 0) {
        sws_log_error("epoll_ctl(ADD) control channel: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static int setup_signals(sws_worker_t *w)
{
    static const int ignored[] = { SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE };
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        signal(ignored[i], SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGQUIT);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
        sws_log_error("sigprocmask: %s", strerror(errno));
        return -1;
    }
    w->signals.fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    w->signals.cb = on_signal;
    if (w->signals.fd < 0 || sws_loop_add(&w->loop, &w->signals, EPOLLIN) < 0) {
        sws_log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void pin_cpu(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0)
        sws_log_warn("cannot pin to cpu %d: %s", cpu, strerror(errno));
}

/* Linux clears the parent-death signal when the credentials change, so
 * it is set again after the drop. The supervisor may have died in between,
 * unsignalled: then the parent is no longer the one that forked us. */
static int drop_privileges(const sws_worker_config_t *cfg)
{
    if (!cfg->drop_privileges)
        return 0;
    pid_t supervisor = getppid();
    if (setgroups(1, &cfg->gid) < 0 || setgid(cfg->gid) < 0 || setuid(cfg->uid) < 0) {
        sws_log_error("dropping privileges to uid %d gid %d: %s", (int)cfg->uid, (int)cfg->gid,
                      strerror(errno));
        return -1;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0) {
        sws_log_error("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        return -1;
    }
    if (getppid() != supervisor) {
        sws_log_notice("the supervisor is gone: exiting");
        return -1;
    }
    return 0;
}

static int worker_setup(sws_worker_t *w)
{
    const sws_worker_config_t *cfg = w->cfg;
    if (setup_signals(w) < 0 || setup_control(w) < 0 || drop_privileges(cfg) < 0)
        return -1;
    w->counters = sws_shm_counters(cfg->shm, cfg->index);
    sws_conn_set_init(&w->conns, &w->loop, &sws_http1_proto, sws_handlers_dispatch, w->counters);
    w->conns.access_log = &w->access_log;
    w->conns.ctx = &w->ctx;
    w->conns.head_handler = sws_handlers_dispatch_head;
    w->conns.h2_proto = &sws_http2_proto;
    sws_upstream_set_init(&w->ctx.upstreams, &w->loop);
    sws_upstream_h2_set_init(&w->ctx.h2, &w->ctx.upstreams);
    sws_upstream_stats_init(&w->upstream_stats, &w->loop, cfg->shm, cfg->index, &w->ctx.pools,
                            &w->ctx.upstreams);
    sws_timer_queue_init(&w->loop, &w->accept_q, ACCEPT_PAUSE_MS);
    sws_timer_init(&w->accept_timer, accept_resume);
    sws_timer_queue_init(&w->loop, &w->shutdown_q, 0); /* set by drain() */
    sws_timer_init(&w->shutdown_timer, on_shutdown_timeout);
    sws_timer_queue_init(&w->loop, &w->access_log_q, ACCESS_LOG_RETRY_MS);
    sws_timer_init(&w->access_log_timer, on_access_log_timer);
    for (unsigned i = 0; cfg->listen_tls != NULL && i < cfg->nlisten; i++)
        w->serves_tls |= cfg->listen_tls[i];
    adopt_generation(w);
    sws_load_init(&w->load, &w->loop, cfg->load, cfg->listen_fds, cfg->nlisten);

    w->nlisteners = cfg->nlisten;
    w->listeners = calloc(cfg->nlisten ? cfg->nlisten : 1, sizeof(*w->listeners));
    if (w->listeners == NULL)
        return -1;
    for (unsigned i = 0; i < cfg->nlisten; i++) {
        w->listeners[i].tls = cfg->listen_tls != NULL && cfg->listen_tls[i];
        w->listeners[i].io.fd = cfg->listen_fds[i];
        w->listeners[i].io.cb = on_listener;
        w->listeners[i].worker = w;
    }
    /* Standby: the old binary's workers still accept on these sockets;
     * this one is ready (its generation adopted above) and waits. */
    if (!cfg->standby && listeners_register(w) < 0)
        return -1;
    sws_loop_set_tick(&w->loop, on_tick, w);
    sws_loop_set_wake(&w->loop, on_wake, w);
    return 0;
}

/* sws_loop_run with each sleep bounded for the load's heartbeat (load.h):
 * a bound rather than a timer, so that a worker woken by its connections
 * is never woken again for the beat. 0, or -1 on an epoll error. */
static int worker_run(sws_worker_t *w)
{
    int bound = sws_load_sleep_ms(&w->load);
    while (!w->loop.stop) {
        if (sws_loop_run_once(&w->loop, bound) < 0)
            return -1;
    }
    return 0;
}

int sws_worker_main(const sws_worker_config_t *cfg)
{
    char role[32];
    snprintf(role, sizeof(role), "worker %u", cfg->index);
    sws_log_set_role(role);
    pin_cpu(cfg->cpu);

    sws_worker_t w;
    memset(&w, 0, sizeof(w));
    w.cfg = cfg;
    w.pid = getpid();
    w.signals.fd = -1;
    w.ctl.fd = -1;
    sws_access_log_init(&w.access_log);
    sws_access_log_set_fd(&w.access_log, cfg->access_fd);
    if (sws_loop_init(&w.loop) < 0) {
        sws_log_error("epoll_create: %s", strerror(errno));
        return 1;
    }
    int status = 0;
    if (worker_setup(&w) < 0) {
        status = 1;
    } else if (worker_run(&w) < 0) {
        sws_log_error("epoll_wait: %s", strerror(errno));
        status = 1;
    }
    sws_conn_set_destroy(&w.conns);
    sws_tls_gen_free(w.conns.tls);
    sws_upstream_stats_close(&w.upstream_stats);
    sws_worker_ctx_close(&w.ctx);
    sws_access_log_close(&w.access_log);
    sws_shm_reader_clear(cfg->shm, cfg->index);
    if (w.counters != NULL)
        w.counters->connections_active = 0;
    if (w.signals.fd >= 0)
        close(w.signals.fd);
    if (w.ctl.fd >= 0)
        close(w.ctl.fd);
    free(w.listeners);
    sws_loop_close(&w.loop);
    return status;
}
