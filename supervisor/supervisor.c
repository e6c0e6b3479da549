#include "supervisor/supervisor.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/chan.h"
#include "core/err.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/version.h"
#include "ebpf/ebpf.h"
#include "shm/shm.h"
#include "shm/table.h"
#include "supervisor/admin.h"
#include "supervisor/config.h"
#include "supervisor/ingress_sub.h"
#include "supervisor/listen.h"
#include "supervisor/pid_file.h"
#include "supervisor/proctitle.h"
#include "supervisor/upgrade.h"
#include "worker/load.h"
#include "worker/worker.h"

#define STOP_NOW_GRACE_MS 5000u      /* SIGTERM/SIGINT: then SIGKILL */
#define STOP_GRACEFUL_EXTRA_MS 5000u /* SIGQUIT: shutdown_timeout plus this, then SIGKILL */
#define PUBLISH_RETRY_MS 100u
#define TICKETS_RETRY_MS 60000u /* a ticket key rotation that failed (no random bytes) */
#define PUBLISH_RETRY_LOG_EVERY 100u /* retries between two "still waiting" lines */
/* eBPF policies: how often heartbeats are checked. A worker is stuck when
 * its heartbeat is SWS_EBPF_STALE_MS old, so it is parked within this much
 * more; an idle worker beats at least twice as often (worker/load.h). The
 * program stops choosing a stuck worker at once; this only moves its queue,
 * and each check is a wake-up of the supervisor (ADR 0061). */
#define LOAD_WATCH_MS 500u
/* A new binary's wait for its standby workers to adopt their first
 * generation (a poll of the shm reader slots: they say nothing else). */
#define UPGRADE_READY_POLL_MS 10u
/* A new binary's wait for the old one's hand-off, sent before the exec. */
#define UPGRADE_HANDOFF_WAIT_MS 5000

/* ---- policy: pure functions ---- */

unsigned sws_restart_crashes(unsigned crashes, uint64_t uptime_ms)
{
    if (uptime_ms >= SWS_RESTART_MIN_UPTIME_MS)
        return 1;
    return crashes < UINT_MAX ? crashes + 1 : crashes;
}

uint64_t sws_restart_delay_ms(unsigned crashes)
{
    if (crashes <= 1)
        return 0;
    uint64_t delay = SWS_RESTART_FIRST_DELAY_MS;
    for (unsigned i = 2; i < crashes && delay < SWS_RESTART_MAX_DELAY_MS; i++)
        delay *= 2;
    return delay < SWS_RESTART_MAX_DELAY_MS ? delay : SWS_RESTART_MAX_DELAY_MS;
}

unsigned sws_worker_count(uint32_t event_loops, const cpu_set_t *allowed)
{
    unsigned n = event_loops != 0 ? event_loops : (unsigned)CPU_COUNT(allowed);
    if (n == 0)
        n = 1;
    return n < SWS_SHM_MAX_WORKERS ? n : SWS_SHM_MAX_WORKERS;
}

int sws_worker_cpu(const cpu_set_t *allowed, unsigned index)
{
    int count = CPU_COUNT(allowed);
    if (count <= 0)
        return -1;
    unsigned skip = index % (unsigned)count;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, allowed) && skip-- == 0)
            return cpu;
    }
    return -1;
}

enum sws_ebpf_policy sws_accept_ebpf_policy(Sws__ServerConfig__AcceptPolicy policy)
{
    switch (policy) {
    case SWS__SERVER_CONFIG__ACCEPT_POLICY__HASH:
        return SWS_EBPF_HASH;
    case SWS__SERVER_CONFIG__ACCEPT_POLICY__LEAST_LOADED:
        return SWS_EBPF_LEAST_LOADED;
    case SWS__SERVER_CONFIG__ACCEPT_POLICY__FOUNTAIN:
        return SWS_EBPF_FOUNTAIN;
    case SWS__SERVER_CONFIG__ACCEPT_POLICY__CPU:
        return SWS_EBPF_CPU;
    default:
        return 0;
    }
}

int sws_worker_stuck(uint64_t now_ms, uint64_t started_ms, uint64_t heartbeat_ms)
{
    /* A worker starting up has not beaten yet: it counts from its start. */
    uint64_t last = heartbeat_ms > started_ms ? heartbeat_ms : started_ms;
    return now_ms > last && now_ms - last > SWS_EBPF_STALE_MS;
}

size_t sws_placement_format(const char *policy, const sws_shm_counters_t *counters, unsigned n,
                            char *out, size_t outlen)
{
    size_t len = 0;
    if (outlen == 0)
        return 0;
    int k = snprintf(out, outlen, "placement, accept_policy %s (worker:accepted/live):", policy);
    if (k > 0)
        len = (size_t)k < outlen ? (size_t)k : outlen - 1;
    for (unsigned i = 0; i < n && len < outlen - 1; i++) {
        k = snprintf(out + len, outlen - len, " %u:%llu/%llu", i,
                     (unsigned long long)counters[i].connections_accepted,
                     (unsigned long long)counters[i].connections_active);
        if (k > 0)
            len += (size_t)k < outlen - len ? (size_t)k : outlen - len - 1;
    }
    return len;
}

static int same_listen(const Sws__ServerConfig *a, const Sws__ServerConfig *b)
{
    if (a->n_listen != b->n_listen)
        return 0;
    for (size_t i = 0; i < a->n_listen; i++) {
        if (strcmp(a->listen[i]->address, b->listen[i]->address) != 0 ||
            a->listen[i]->tls != b->listen[i]->tls)
            return 0;
    }
    return 1;
}

/* NULL (a ServerConfig built in code, or a file without the key) is "". */
static int same_ingress(const Sws__Ingress *a, const Sws__Ingress *b)
{
    return strcmp(a != NULL ? a->subscribe : "", b != NULL ? b->subscribe : "") == 0;
}

/* NULL (a ServerConfig built in code) lists no address. */
static int same_admin(const Sws__Admin *a, const Sws__Admin *b)
{
    size_t na = a != NULL ? a->n_listen : 0, nb = b != NULL ? b->n_listen : 0;
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++) {
        if (strcmp(a->listen[i], b->listen[i]) != 0)
            return 0;
    }
    return 1;
}

/* One eBPF policy for another is a store into the program's map (the
 * sockets stay); from or to shared or reuseport, the sockets or the
 * program's presence change, and the running workers were forked for them. */
static int accept_policy_needs_restart(Sws__ServerConfig__AcceptPolicy running,
                                       Sws__ServerConfig__AcceptPolicy next)
{
    return running != next &&
           (sws_accept_ebpf_policy(running) == 0 || sws_accept_ebpf_policy(next) == 0);
}

size_t sws_restart_only_changes(const Sws__ServerConfig *running, const Sws__ServerConfig *next,
                                char *out, size_t outlen)
{
    const struct {
        const char *key;
        int changed;
    } keys[] = {
        { "server.listen", !same_listen(running, next) },
        { "server.event_loops", running->event_loops != next->event_loops },
        { "server.accept_policy",
          accept_policy_needs_restart(running->accept_policy, next->accept_policy) },
        { "server.user", strcmp(running->user, next->user) != 0 },
        { "server.backlog", running->backlog != next->backlog },
        { "server.error_log", strcmp(running->error_log, next->error_log) != 0 },
        { "server.table_size", running->table_size != next->table_size },
        { "server.admin.listen", !same_admin(running->admin, next->admin) },
        { "ingress.subscribe", !same_ingress(running->ingress, next->ingress) },
        { "server.pid_file", strcmp(running->pid_file, next->pid_file) != 0 },
    };
    size_t len = 0;
    if (outlen == 0)
        return 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && len < outlen - 1; i++) {
        if (!keys[i].changed)
            continue;
        int n = snprintf(out + len, outlen - len, "%s%s", len > 0 ? ", " : "", keys[i].key);
        if (n > 0)
            len += (size_t)n;
    }
    return len < outlen ? len : outlen - 1;
}

/* The size check alone: the table's layout is computed, not built. */
static int table_fits(const Sws__RouteSet *routes, uint32_t table_size, size_t *need, char *err,
                      size_t errlen)
{
    *need = sws_table_size(routes);
    if (*need > table_size)
        return sws_errf(err, errlen,
                        "server.table_size: the routing table needs %zu bytes, more than %u", *need,
                        table_size);
    return 0;
}

int sws_supervisor_check_table(const Sws__RouteSet *routes, uint32_t table_size, char *err,
                               size_t errlen)
{
    size_t need;
    if (table_fits(routes, table_size, &need, err, errlen) < 0)
        return -1;
    /* malloc's alignment (16) covers the arena's 8. */
    void *scratch = malloc(need > 0 ? need : 8);
    if (scratch == NULL)
        return sws_errf(err, errlen, "out of memory for a %zu-byte table", need);
    int rc = sws_table_build(scratch, need, 1, routes, err, errlen);
    free(scratch);
    return rc;
}

/* ---- the process manager ---- */

typedef struct sws_supervisor sws_supervisor_t;

typedef struct worker_proc {
    sws_supervisor_t *sup;
    unsigned index;
    int cpu;
    pid_t pid;           /* 0: not running */
    uint64_t started_ms;
    unsigned crashes;    /* deaths in a row, each after a short run */
    int ctl_fd;          /* our end of its control channel (core/chan.h); -1: none */
    /* A queue per worker, because each worker's backoff has its own
     * duration (timer queues have one duration each, core/loop.h). */
    sws_timer_queue_t restart_queue;
    sws_timer_t restart_timer;
} worker_proc_t;

typedef enum sup_state {
    SUP_RUNNING = 0,
    SUP_DRAINING, /* SIGQUIT: workers finish in-flight requests */
    SUP_STOPPING, /* SIGTERM/SIGINT: workers close everything now */
} sup_state_t;

/* The old side of a binary upgrade: the new supervisor, our child until
 * it is ready and told GO, or ended (rollback). */
typedef struct upgrade_child {
    pid_t pid;          /* 0: no upgrade in progress */
    char binary[PATH_MAX];
    sws_io_t io;        /* our end of its socket; fd -1: none */
    sws_timer_queue_t timeout_queue; /* server.upgrade_timeout */
    sws_timer_t timeout_timer;
    char why[SWS_CHAN_MAX_BODY + 1]; /* what its FAILED message said */
} upgrade_child_t;

/* The new side, until GO: what the old one handed, and the wait. */
typedef struct upgrade_parent {
    int active;         /* started by an upgrade and not committed yet */
    pid_t pid;          /* the old supervisor */
    sws_upgrade_state_t state; /* admin sockets and routes kept for the commit */
    sws_io_t io;        /* the hand-off socket; fd -1: none */
    int ready_sent;
    sws_timer_queue_t ready_queue;
    sws_timer_t ready_timer;
} upgrade_parent_t;

/* Owner: sws_supervisor_run(), on its stack for the life of the process. */
struct sws_supervisor {
    const char *config_path;
    Sws__Config *config;  /* as started: listeners, workers, user... */
    Sws__Config *pending; /* reloaded, waiting for a free arena */
    int pending_access_fd; /* the access log the pending config moved to; -1: unchanged */
    int access_fd;        /* the access log workers write to; -1: off */
    char *access_path;    /* what access_fd was opened for */
    unsigned publish_retries;
    sws_loop_t loop;
    sws_io_t signals;     /* signalfd: the first mailbox */
    sigset_t sigmask;
    sws_listen_set_t listen;
    sws_ebpf_t ebpf;      /* loaded when an eBPF policy is in force */
    const char *policy;   /* the accept policy in force, for logs */
    sws_timer_queue_t watch_queue; /* eBPF: heartbeats checked (park, unpark) */
    sws_timer_t watch_timer;
    sws_shm_t shm;
    cpu_set_t cpus;
    unsigned nworkers;
    worker_proc_t *workers;
    uid_t uid;
    gid_t gid;
    int drop_privileges;
    uint32_t shutdown_timeout_ms; /* of the generation published last, which workers use */
    pid_t pid;
    sup_state_t state;
    sws_timer_queue_t stop_queue;
    sws_timer_t stop_timer;
    sws_timer_queue_t publish_queue;
    sws_timer_t publish_timer;
    sws_timer_queue_t tickets_queue; /* one timer: the next ticket key rotation */
    sws_timer_t tickets_timer;
    sws_admin_t *admin;   /* NULL: the admin API is off */
    sws_ingress_sub_t *ingress; /* NULL: no ingress.subscribe */
    const sws_supervisor_exec_t *exec;
    uint8_t *published;   /* the RouteSet published last, packed: an upgrade hands it over */
    size_t published_len;
    uint32_t upgrade_timeout_ms; /* of the config in force (start, reload) */
    upgrade_child_t up;   /* old side */
    upgrade_parent_t from; /* new side */
    int handed_over;      /* GO sent: the sockets and the pid file are the new binary's */
};

/* Workers alive: forked and not yet reaped. */
static unsigned workers_running(const sws_supervisor_t *sup)
{
    unsigned n = 0;
    for (unsigned i = 0; i < sup->nworkers; i++)
        n += sup->workers[i].pid != 0;
    return n;
}

static void describe_exit(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d%s", WTERMSIG(status),
                 WCOREDUMP(status) ? " (core dumped)" : "");
    else
        snprintf(buf, len, "ended with wait status %d", status);
}

/* The child side of a fork: never returns. */
static void run_worker(sws_supervisor_t *sup, worker_proc_t *w) __attribute__((noreturn));
static void run_worker(sws_supervisor_t *sup, worker_proc_t *w)
{
    /* Die with the supervisor; if it is already gone, the death signal
     * was missed, so leave now. */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != sup->pid)
        _exit(0);

    /* Default handlers and an open mask, except for the two signals the
     * supervisor sends to workers: those stay blocked so that one sent
     * before the worker has set up its signalfd waits there (pending)
     * rather than killing it by default (SIGQUIT would even dump core). */
    signal(SIGPIPE, SIG_DFL);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember(&sup->sigmask, sig) == 1)
            signal(sig, SIG_DFL);
    }
    sigset_t handoff;
    sigemptyset(&handoff);
    sigaddset(&handoff, SIGTERM);
    sigaddset(&handoff, SIGQUIT);
    sigprocmask(SIG_SETMASK, &handoff, NULL);

    close(sup->signals.fd);
    sws_loop_close(&sup->loop);
    sws_listen_close_others(&sup->listen, w->index);
    /* The worker reads through the inherited mapping; with the memfd it
     * could also ftruncate the region and kill the supervisor (SIGBUS). */
    close(sup->shm.fd);
    sup->shm.fd = -1;
    /* What parses clients' bytes keeps no credential of the admin API
     * (which reconfigures every worker): every copy fork made is wiped. */
    sws_admin_forget_token(sup->admin);
    sws_config_forget_token(sup->config);
    sws_config_forget_token(sup->pending);
    /* The supervisor's check memory (5 MiB at ingress scale): a worker
     * builds no table. */
    sws_routeset_scratch_free(&sup->shm.check);
    sws_ebpf_forget(&sup->ebpf);
    /* Other workers' channels, and an access log not published yet. */
    for (unsigned i = 0; i < sup->nworkers; i++) {
        if (&sup->workers[i] != w && sup->workers[i].ctl_fd >= 0)
            close(sup->workers[i].ctl_fd);
    }
    if (sup->pending_access_fd >= 0)
        close(sup->pending_access_fd);
    sws_admin_close_fds(sup->admin);
    if (sup->from.io.fd >= 0)
        close(sup->from.io.fd);
    if (sup->up.io.fd >= 0)
        close(sup->up.io.fd);
    for (unsigned k = 0; k < sup->from.state.nadmin; k++) {
        if (sup->from.state.admin_fds[k] >= 0)
            close(sup->from.state.admin_fds[k]);
    }

    /* Eligible from its title on (what tests and operators wait for):
     * connections placed before its loop runs wait in its queue. */
    sws_load_announce(sws_ebpf_worker(&sup->ebpf, w->index));
    sws_proctitle_set("scalwsd: worker %u", w->index);

    /* The listeners' fds are in the configuration's order (open_listeners);
     * the worker keeps the flags for its life. */
    const Sws__ServerConfig *sc = sup->config->server;
    uint8_t *listen_tls = calloc(sup->listen.naddrs ? sup->listen.naddrs : 1, 1);
    if (listen_tls == NULL)
        _exit(1);
    for (unsigned i = 0; i < sup->listen.naddrs && i < sc->n_listen; i++)
        listen_tls[i] = sc->listen[i]->tls ? 1 : 0;

    sws_worker_config_t cfg = {
        .index = w->index,
        .cpu = w->cpu,
        .listen_fds = sws_listen_worker_fds(&sup->listen, w->index),
        .listen_tls = listen_tls,
        .nlisten = sup->listen.naddrs,
        .exclusive = sws_listen_is_shared(&sup->listen),
        .shm = &sup->shm,
        .uid = sup->uid,
        .gid = sup->gid,
        .drop_privileges = sup->drop_privileges,
        .ctl_fd = w->ctl_fd,
        .access_fd = sup->access_fd,
        .load = sws_ebpf_worker(&sup->ebpf, w->index),
        .standby = sup->from.active,
    };
    _exit(sws_worker_main(&cfg));
}

static void schedule_restart(worker_proc_t *w, uint64_t delay_ms)
{
    sws_timer_queue_set_duration(&w->restart_queue, delay_ms);
    sws_timer_arm(&w->sup->loop, &w->restart_queue, &w->restart_timer);
}

static void spawn_worker(sws_supervisor_t *sup, worker_proc_t *w)
{
    char err[256];
    int ends[2];
    pid_t pid = -1;
    /* Before the fork, so the child inherits a listening socket; the
     * program gives it nothing until its first heartbeat. */
    if (sws_ebpf_unpark(&sup->ebpf, w->index, 1, err, sizeof(err)) < 0)
        sws_log_error("worker %u: %s", w->index, err);
    if (sws_chan_pair(ends, err, sizeof(err)) < 0) {
        sws_log_error("worker %u: %s", w->index, err);
    } else if ((pid = fork()) < 0) {
        sws_log_error("fork worker %u: %s", w->index, strerror(errno));
        close(ends[0]);
        close(ends[1]);
    }
    if (pid < 0) {
        /* Counts as a crash, so a fork that keeps failing backs off. */
        w->crashes = sws_restart_crashes(w->crashes, 0);
        schedule_restart(w, sws_restart_delay_ms(w->crashes));
        return;
    }
    if (pid == 0) {
        close(ends[0]);
        w->ctl_fd = ends[1];
        run_worker(sup, w);
    }
    close(ends[1]);
    w->ctl_fd = ends[0];
    w->pid = pid;
    w->started_ms = sws_loop_now_ms(&sup->loop);
    if (w->cpu >= 0)
        sws_log_info("worker %u (pid %d) started on cpu %d", w->index, (int)pid, w->cpu);
    else
        sws_log_info("worker %u (pid %d) started, not pinned", w->index, (int)pid);
}

/* Start w now, or after its backoff when it has been crashing. */
static void restart_worker(sws_supervisor_t *sup, worker_proc_t *w)
{
    uint64_t delay = sws_restart_delay_ms(w->crashes);
    if (delay > 0) {
        sws_log_warn("worker %u crashed %u times in a row; restarting in %llu ms", w->index,
                     w->crashes, (unsigned long long)delay);
        schedule_restart(w, delay);
        return;
    }
    spawn_worker(sup, w);
}

static void on_restart_timer(sws_timer_t *t)
{
    worker_proc_t *w = sws_container_of(t, worker_proc_t, restart_timer);
    if (w->sup->state == SUP_RUNNING && w->pid == 0)
        spawn_worker(w->sup, w);
}

/* Where connections went, per worker, at the two moments GET /v1/status
 * cannot be asked afterwards: a worker's death (what it held) and the stop
 * (the last figures before the API goes). The same counters the API
 * serves live; racy reads of them: a snapshot, not an account. */
static void log_placement(sws_supervisor_t *sup)
{
    sws_shm_counters_t counters[SWS_SHM_MAX_WORKERS];
    char line[1536];
    for (unsigned i = 0; i < sup->nworkers; i++)
        counters[i] = *sws_shm_counters(&sup->shm, i);
    sws_placement_format(sup->policy, counters, sup->nworkers, line, sizeof(line));
    sws_log_info("%s", line);
}

static worker_proc_t *find_worker(sws_supervisor_t *sup, pid_t pid)
{
    for (unsigned i = 0; i < sup->nworkers; i++) {
        if (sup->workers[i].pid == pid)
            return &sup->workers[i];
    }
    return NULL;
}

static void on_worker_exit(sws_supervisor_t *sup, worker_proc_t *w, int status)
{
    /* A dead worker holds no generation, whatever its slot says. */
    sws_shm_reader_clear(&sup->shm, w->index);
    char how[64];
    describe_exit(status, how, sizeof(how));
    pid_t pid = w->pid;
    w->pid = 0;
    if (w->ctl_fd >= 0)
        close(w->ctl_fd);
    w->ctl_fd = -1;
    /* Its queued connections go to the others now, not after the restart
     * (ADR 0010). */
    char err[256];
    if (sup->state == SUP_RUNNING && sws_ebpf_park(&sup->ebpf, w->index, err, sizeof(err)) < 0)
        sws_log_error("worker %u: %s", w->index, err);
    if (sup->state != SUP_RUNNING) {
        sws_log_info("worker %u (pid %d) %s", w->index, (int)pid, how);
        return;
    }
    sws_log_warn("worker %u (pid %d) %s", w->index, (int)pid, how);
    log_placement(sup);
    uint64_t uptime = sws_loop_now_ms(&sup->loop) - w->started_ms;
    w->crashes = sws_restart_crashes(w->crashes, uptime);
    restart_worker(sup, w);
}

static void upgrade_child_exited(sws_supervisor_t *sup, pid_t pid, int status);

static void reap_children(sws_supervisor_t *sup)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        worker_proc_t *w = find_worker(sup, pid);
        if (w != NULL)
            on_worker_exit(sup, w, status);
        else
            upgrade_child_exited(sup, pid, status);
    }
    if (sup->state != SUP_RUNNING && workers_running(sup) == 0)
        sup->loop.stop = 1;
}

static void signal_workers(sws_supervisor_t *sup, int sig)
{
    for (unsigned i = 0; i < sup->nworkers; i++) {
        if (sup->workers[i].pid > 0 && kill(sup->workers[i].pid, sig) < 0 && errno != ESRCH)
            sws_log_error("kill worker %u (pid %d): %s", i, (int)sup->workers[i].pid,
                          strerror(errno));
    }
}

/* ---- eBPF accept policies: stuck workers ---- */

/* Park a running worker whose heartbeat stopped (SIGSTOP, a loop that
 * never returns); unpark it when it beats again. Dead workers are parked
 * when reaped and unparked when restarted. */
static void on_watch_timer(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, watch_timer);
    uint64_t now = sws_loop_now_ms(&sup->loop);
    char err[256];
    for (unsigned i = 0; i < sup->nworkers && sup->state == SUP_RUNNING; i++) {
        worker_proc_t *w = &sup->workers[i];
        struct sws_ebpf_worker *rec = sws_ebpf_worker(&sup->ebpf, i);
        if (w->pid == 0 || rec == NULL)
            continue;
        int stuck = sws_worker_stuck(now, w->started_ms, rec->heartbeat_ms);
        if (stuck && !rec->down) {
            sws_log_warn("worker %u (pid %d): no heartbeat for over %u ms; it gets no new "
                         "connections and its queue goes to the others", i, (int)w->pid,
                         SWS_EBPF_STALE_MS);
            if (sws_ebpf_park(&sup->ebpf, i, err, sizeof(err)) < 0)
                sws_log_error("worker %u: %s", i, err);
        } else if (!stuck && rec->down) {
            sws_log_notice("worker %u (pid %d): heartbeat back; taking connections again", i,
                           (int)w->pid);
            if (sws_ebpf_unpark(&sup->ebpf, i, 0, err, sizeof(err)) < 0)
                sws_log_error("worker %u: %s", i, err);
        }
    }
    sws_timer_arm(&sup->loop, &sup->watch_queue, &sup->watch_timer);
}

/* The eBPF policy in force, or the fallback line and reuseport. */
static void start_ebpf(sws_supervisor_t *sup, const Sws__ServerConfig *sc)
{
    enum sws_ebpf_policy policy = sws_accept_ebpf_policy(sc->accept_policy);
    sup->policy = sws_listen_policy_name(sup->listen.policy);
    if (policy == 0)
        return;
    int cpus[SWS_EBPF_MAX_WORKERS];
    for (unsigned i = 0; i < sup->nworkers && i < SWS_EBPF_MAX_WORKERS; i++)
        cpus[i] = sws_worker_cpu(&sup->cpus, i);
    char err[256];
    /* Taking over: loaded now (workers are forked with their records),
     * attached at GO (upgrade_take_over), when the old one lets go. */
    int rc = sup->from.active
                 ? sws_ebpf_prepare(&sup->ebpf, &sup->listen, (int)sc->backlog, policy,
                                 sc->fountain_threshold, cpus, err, sizeof(err))
                 : sws_ebpf_open(&sup->ebpf, &sup->listen, (int)sc->backlog, policy,
                                 sc->fountain_threshold, cpus, err, sizeof(err));
    if (rc < 0) {
        sws_log_warn("accept_policy %s: %s; falling back to reuseport",
                     sws_ebpf_policy_name(policy), err);
        return;
    }
    sup->policy = sws_ebpf_policy_name(policy);
    if (!sup->from.active)
        sws_timer_arm(&sup->loop, &sup->watch_queue, &sup->watch_timer);
}

/* ---- log files: opened here, before any privilege drops ---- */

static int is_log_file(const char *path)
{
    return path[0] != '\0' && strcmp(path, "-") != 0;
}

/* The access log a config asks for: *fd -1 when it is off. 0, or -1 with a
 * message in err naming the key. */
static int open_access_log(const Sws__AccessLog *al, int *fd, char *err, size_t errlen)
{
    *fd = -1;
    if (al->format == SWS__ACCESS_LOG__FORMAT__OFF)
        return 0;
    char why[PATH_MAX + 128];
    *fd = sws_log_file_open(al->path, 1, why, sizeof(why));
    if (*fd < 0)
        return sws_errf(err, errlen, "server.logging.access_log_path: %s", why);
    return 0;
}

static int set_access_log(sws_supervisor_t *sup, int fd, const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL) {
        sws_log_error("out of memory for the access log's path");
        return -1;
    }
    if (sup->access_fd >= 0)
        close(sup->access_fd);
    free(sup->access_path);
    sup->access_fd = fd;
    sup->access_path = copy;
    return 0;
}

/* Hand every running worker the descriptors of flags (SWS_CHAN_LOGS_*):
 * they flush to the old ones and swap. A worker that cannot take the
 * message (its channel full) keeps the old files: said once here. */
static void send_logs(sws_supervisor_t *sup, uint32_t flags)
{
    struct sws_chan_logs logs = { .flags = flags };
    int fds[2];
    unsigned nfds = 0;
    if (flags & SWS_CHAN_LOGS_ERROR)
        fds[nfds++] = sws_log_fd();
    if (flags & SWS_CHAN_LOGS_ACCESS)
        fds[nfds++] = sup->access_fd;
    for (unsigned i = 0; i < sup->nworkers; i++) {
        worker_proc_t *w = &sup->workers[i];
        char err[256];
        if (w->pid > 0 && w->ctl_fd >= 0 &&
            sws_chan_send(w->ctl_fd, SWS_CHAN_LOGS, &logs, sizeof(logs), fds, nfds, err,
                          sizeof(err)) < 0)
            sws_log_error("worker %u keeps its old log files: %s", w->index, err);
    }
}

/* SIGUSR1, as logrotate sends it to nginx: reopen every log file by name
 * (the old one was renamed), here and in every worker. A file that cannot
 * be opened keeps the old descriptor. */
static void reopen_logs(sws_supervisor_t *sup)
{
    char err[PATH_MAX + 128];
    uint32_t flags = 0;
    const char *error_log = sup->config->server->error_log;
    if (is_log_file(error_log)) {
        if (sws_log_open(error_log, err, sizeof(err)) < 0)
            sws_log_error("SIGUSR1: server.logging.error_log: %s; still logging to the old file",
                          err);
        else
            flags |= SWS_CHAN_LOGS_ERROR;
    }
    if (sup->access_fd >= 0 && is_log_file(sup->access_path)) {
        int fd = sws_log_file_open(sup->access_path, 1, err, sizeof(err));
        if (fd < 0) {
            sws_log_error("SIGUSR1: server.logging.access_log_path: %s; still logging to the "
                          "old file", err);
        } else {
            close(sup->access_fd);
            sup->access_fd = fd;
            flags |= SWS_CHAN_LOGS_ACCESS;
        }
    }
    if (flags != 0)
        send_logs(sup, flags);
    sws_log_notice("SIGUSR1: log files reopened");
}

/* ---- reload ---- */

/* The config layer accepts only known level names, so this always sets one. */
static void apply_log_level(const Sws__Settings *st)
{
    sws_log_level_t level;
    if (sws_log_level_parse(st->log_level, &level) == 0)
        sws_log_set_level(level);
}

/* What asked for a publication: the file at start or on a reload, the
 * admin API, or ingressd (through the subscription). */
typedef enum publish_cause {
    PUBLISH_START,
    PUBLISH_RELOAD,
    PUBLISH_ADMIN,
    PUBLISH_INGRESS,
} publish_cause_t;

/* What a binary upgrade hands over is the table as served, whoever made
 * it (file, admin API, ingressd): kept packed, the form it crosses in. A
 * copy that fails is said once; an upgrade then sends the one before. */
static int keep_published(sws_supervisor_t *sup, const Sws__RouteSet *routes)
{
    size_t len = sws__route_set__get_packed_size(routes);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        sws_log_error("out of memory keeping the published routes; an upgrade now would hand "
                      "over an older set");
        return -1;
    }
    sws__route_set__pack(routes, buf);
    free(sup->published);
    sup->published = buf;
    sup->published_len = len;
    return 0;
}

/* Publish routes as they are as the next generation: 0, or what
 * sws_shm_publish returned, with err set. */
static int publish_routes(sws_supervisor_t *sup, const Sws__RouteSet *routes,
                          publish_cause_t cause, char *err, size_t errlen)
{
    uint64_t gen;
    /* Outside the build's time, which the log line below reports. */
    sws_shm_prepare(&sup->shm, routes);
    uint64_t t0 = sws_clock_us();
    int rc = sws_shm_publish(&sup->shm, routes, &gen, err, errlen);
    if (rc < 0)
        return rc;
    /* The build's cost, said with each generation: bench/ingressbench.py
     * reads it, and an operator sees a large table's price. */
    uint64_t build_us = sws_clock_us() - t0;
    /* Here, not at reload: a config still waiting for an arena never
     * reaches a worker. */
    sup->shutdown_timeout_ms = routes->settings->shutdown_timeout_ms;
    size_t nroutes = 0;
    for (size_t i = 0; i < routes->n_hosts; i++)
        nroutes += routes->hosts[i]->n_routes;
    static const char *const prefix[] = { "", "reload: ", "admin API: ", "ingress: " };
    sws_log(cause == PUBLISH_RELOAD ? SWS_LOG_NOTICE : SWS_LOG_INFO,
            "%sgeneration %llu published (%zu hosts, %zu routes) in %llu us", prefix[cause],
            (unsigned long long)gen, routes->n_hosts, nroutes, (unsigned long long)build_us);
    /* Idle workers would adopt it at their next event only. A full
     * channel means the worker has messages to wake it already. Before
     * the admin API's copy of the RouteSet, which at ingress scale costs
     * more than the workers' adoption (bench/ingressbench.py). */
    for (unsigned i = 0; sup->workers != NULL && i < sup->nworkers; i++) {
        const worker_proc_t *w = &sup->workers[i];
        char why[256];
        if (w->pid > 0 && w->ctl_fd >= 0 &&
            sws_chan_send(w->ctl_fd, SWS_CHAN_GENERATION, NULL, 0, NULL, 0, why,
                          sizeof(why)) < 0 && errno != EAGAIN)
            sws_log_warn("worker %u: %s", w->index, why);
    }
    static const sws_published_by_t by[] = { SWS_PUBLISHED_BY_FILE, SWS_PUBLISHED_BY_FILE,
                                              SWS_PUBLISHED_BY_ADMIN, SWS_PUBLISHED_BY_INGRESS };
    /* One pack for both the upgrade's copy and the admin API's. */
    if (keep_published(sup, routes) == 0)
        sws_admin_published_packed(sup->admin, sup->published, sup->published_len, gen,
                                   by[cause]);
    else
        sws_admin_published(sup->admin, routes, gen, by[cause]);
    sws_shm_warm(&sup->shm);
    return 0;
}

/* Publish the file's routes (start, reload): merged with ingressd's when
 * subscribed (supervisor/ingress_merge.h), which keeps the file's copy
 * for its own publications. */
static int publish(sws_supervisor_t *sup, const Sws__RouteSet *routes, publish_cause_t cause,
                   char *err, size_t errlen)
{
    if (sup->ingress == NULL || cause == PUBLISH_ADMIN)
        return publish_routes(sup, routes, cause, err, errlen);
    sws_ingress_merge_t m;
    if (sws_ingress_sub_merge(sup->ingress, routes, &m) < 0)
        return sws_errf(err, errlen, "out of memory merging the file's routes with ingressd's");
    int rc = publish_routes(sup, &m.rs, cause, err, errlen);
    sws_ingress_merge_free(&m);
    if (rc == 0)
        sws_ingress_sub_file_published(sup->ingress, routes);
    return rc;
}

/* The one sentence of a refused reload. why names the file itself when
 * the config layer wrote it (FILE:LINE:COL); else the file is prefixed. */
static void reload_failed(const sws_supervisor_t *sup, int names_file, const char *why)
{
    sws_log_error("reload failed: %s%s%s; still serving generation %llu",
                  names_file ? "" : sup->config_path, names_file ? "" : ": ", why,
                  (unsigned long long)sws_shm_current_generation(&sup->shm));
}

static void drop_pending(sws_supervisor_t *sup)
{
    sws_timer_disarm(&sup->publish_timer);
    if (sup->pending != NULL)
        sws_config_free(sup->pending);
    sup->pending = NULL;
    sup->publish_retries = 0;
    if (sup->pending_access_fd >= 0)
        close(sup->pending_access_fd);
    sup->pending_access_fd = -1;
}

/* Arm the rotation for when the current ticket key is due (at once if
 * it is overdue: a region attached with an old key). */
static void arm_ticket_rotation(sws_supervisor_t *sup)
{
    uint64_t now = sws_loop_now_ms(&sup->loop);
    uint64_t due = sws_tickets_due_ms(sws_shm_tickets(&sup->shm));
    sws_timer_queue_set_duration(&sup->tickets_queue, due > now ? due - now : 0);
    sws_timer_arm(&sup->loop, &sup->tickets_queue, &sup->tickets_timer);
}

/* A failed rotation keeps the keys in force, still accepted by every
 * worker, and tries again TICKETS_RETRY_MS later. */
static void on_tickets_timer(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, tickets_timer);
    sws_tickets_t *keys = sws_shm_tickets(&sup->shm);
    char err[256];
    if (sws_tickets_rotate(keys, sws_loop_now_ms(&sup->loop), err, sizeof(err)) < 0) {
        sws_log_error("%s; the current key stays in force", err);
        sws_timer_queue_set_duration(&sup->tickets_queue, TICKETS_RETRY_MS);
        sws_timer_arm(&sup->loop, &sup->tickets_queue, &sup->tickets_timer);
        return;
    }
    sws_log_info("TLS session-ticket key rotated");
    arm_ticket_rotation(sup);
}

/* A reload's rotation period: sws_tickets_init keeps the keys the region
 * holds and takes the period; the timer follows the new due time. */
static void retime_tickets(sws_supervisor_t *sup, uint64_t period_ms)
{
    char err[256];
    if (sws_tickets_init(sws_shm_tickets(&sup->shm), sws_loop_now_ms(&sup->loop), period_ms, err,
                         sizeof(err)) < 0) {
        sws_log_error("reload: TLS session tickets: %s; the previous rotation period stays", err);
        return;
    }
    arm_ticket_rotation(sup);
}

/* server.tls.ticket_key_rotation of routes (0 or absent: the default). */
static uint64_t ticket_period_ms(const Sws__RouteSet *routes)
{
    return sws_table_ticket_key_rotation_ms(routes->tls);
}

/* The old binary's keys, oldest first, so the current one stays current
 * and sessions resume across the upgrade (ADR 0028). */
static void adopt_tickets(sws_supervisor_t *sup)
{
    sws_tickets_snapshot_t *t = &sup->from.state.tickets;
    for (unsigned i = t->n; i-- > 0;)
        sws_tickets_install(sws_shm_tickets(&sup->shm), &t->keys[i]);
    sws_tickets_forget(t);
}

/* The keys in the region: kept if it already holds some, else a first one;
 * rotated every server.tls.ticket_key_rotation. */
static int start_tickets(sws_supervisor_t *sup)
{
    char err[256];
    if (sup->from.active)
        adopt_tickets(sup);
    if (sws_tickets_init(sws_shm_tickets(&sup->shm), sws_loop_now_ms(&sup->loop),
                         ticket_period_ms(sup->config->routes), err, sizeof(err)) < 0) {
        sws_log_error("%s", err);
        return -1;
    }
    sws_timer_queue_init(&sup->loop, &sup->tickets_queue, 0);
    sws_timer_init(&sup->tickets_timer, on_tickets_timer);
    arm_ticket_rotation(sup);
    return 0;
}

/* A reload's switch from one eBPF policy to another (the others need a
 * restart: sws_restart_only_changes): the program reads the policy at each
 * SYN and the workers publish the same record under every policy (ADR
 * 0072), so it holds from the next connection on; connections already
 * placed stay where they are. */
static void switch_accept_policy(sws_supervisor_t *sup, const Sws__ServerConfig *next)
{
    Sws__ServerConfig *running = sup->config->server;
    /* Unchanged, or not from one eBPF policy to another. */
    if (next->accept_policy == running->accept_policy ||
        accept_policy_needs_restart(running->accept_policy, next->accept_policy))
        return;
    enum sws_ebpf_policy to = sws_accept_ebpf_policy(next->accept_policy);
    if (sws_ebpf_set_policy(&sup->ebpf, to) < 0) {
        sws_log_warn("reload: accept_policy %s not applied: the server runs %s (the eBPF "
                     "program could not be loaded at start); a restart tries again",
                     sws_ebpf_policy_name(to), sup->policy);
        return;
    }
    sws_log_notice("reload: accept_policy %s (was %s) from the next connection on",
                   sws_ebpf_policy_name(to), sup->policy);
    running->accept_policy = next->accept_policy;
    sup->policy = sws_ebpf_policy_name(to);
    sws_admin_set_accept_policy(sup->admin, sup->policy);
}

/* Publish the pending config, or retry soon when every arena is still held
 * by a worker that has not moved on from an older generation. */
static void publish_pending(sws_supervisor_t *sup)
{
    char err[512];
    int rc = publish(sup, sup->pending->routes, PUBLISH_RELOAD, err, sizeof(err));
    if (rc == SWS_SHM_BUSY) {
        if (sup->publish_retries % PUBLISH_RETRY_LOG_EVERY == 0)
            sws_log_warn("reload: cannot publish yet (%s); retrying every %u ms", err,
                         PUBLISH_RETRY_MS);
        sup->publish_retries++;
        sws_timer_arm(&sup->loop, &sup->publish_queue, &sup->publish_timer);
        return;
    }
    /* Refused: the table builder found what the config layer let through. */
    if (rc < 0)
        reload_failed(sup, 0, err);
    /* The program reads it at each SYN: a plain store applies it. */
    if (rc == 0)
        sws_ebpf_set_fountain_threshold(&sup->ebpf, sup->pending->server->fountain_threshold);
    if (rc == 0)
        switch_accept_policy(sup, sup->pending->server);
    /* A new rotation period: the keys stay, the next rotation moves. */
    if (rc == 0)
        retime_tickets(sup, ticket_period_ms(sup->pending->routes));
    if (rc == 0)
        sup->upgrade_timeout_ms = sup->pending->server->upgrade_timeout_ms;
    /* Published: the workers adopt the table at their next turn and the
     * access log's new file now (a few lines may land in the old one). */
    if (rc == 0 && sup->pending_access_fd >= 0 &&
        set_access_log(sup, sup->pending_access_fd,
                       sup->pending->routes->settings->access_log->path) == 0) {
        sup->pending_access_fd = -1;
        send_logs(sup, SWS_CHAN_LOGS_ACCESS);
    }
    drop_pending(sup);
}

static void on_publish_timer(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, publish_timer);
    if (sup->pending != NULL && sup->state == SUP_RUNNING)
        publish_pending(sup);
}

/* The new binary of an upgrade in progress took the routes as served
 * when it started: a publication here now would be lost at its GO. */
static int upgrade_holds_routes(const sws_supervisor_t *sup, char *err, size_t errlen)
{
    if (sup->up.pid <= 0 || sup->handed_over)
        return 0;
    return sws_errf(err, errlen, "an upgrade to pid %d is in progress: it took the routes as "
                    "they were when it started, so a change now would be lost when it takes "
                    "over; retry once it took over or was rolled back", (int)sup->up.pid);
}

static void reload(sws_supervisor_t *sup)
{
    if (sup->state != SUP_RUNNING) {
        sws_log_notice("SIGHUP: stopping; not reloaded");
        return;
    }
    char err[512];
    if (upgrade_holds_routes(sup, err, sizeof(err)) < 0) {
        sws_log_warn("SIGHUP: %s; not reloaded", err);
        return;
    }
    Sws__Config *next = NULL;
    if (sws_config_load(sup->config_path, &next, err, sizeof(err)) < 0) {
        reload_failed(sup, 1, err);
        return;
    }
    char keys[256];
    if (sws_restart_only_changes(sup->config->server, next->server, keys, sizeof(keys)) > 0)
        sws_log_warn("reload: changes to %s need a restart; not applied", keys);
    /* Against the arenas as they were made at start, not the file's new
     * table_size: a table that only fits the new size could never be
     * published, and would be retried for ever. */
    size_t need;
    if (table_fits(next->routes, sup->config->server->table_size, &need, err, sizeof(err)) < 0) {
        reload_failed(sup, 0, err);
        sws_config_free(next);
        return;
    }
    /* A new access log is opened now, so a path that cannot be opened
     * fails the reload and the old file stays. */
    const Sws__AccessLog *al = next->routes->settings->access_log;
    int access_fd = -1;
    if ((sup->access_fd < 0 || strcmp(al->path, sup->access_path) != 0) &&
        open_access_log(al, &access_fd, err, sizeof(err)) < 0) {
        reload_failed(sup, 0, err);
        sws_config_free(next);
        return;
    }
    apply_log_level(next->routes->settings);
    /* Like the log level, it needs no table: a rotated token is in force
     * as soon as the file that names it is accepted. */
    sws_admin_set_token(sup->admin, next->server->admin);

    drop_pending(sup); /* a newer file replaces one still waiting */
    sup->pending = next;
    sup->pending_access_fd = access_fd;
    publish_pending(sup);
}

/* The admin API's way to publish (supervisor/admin_api.h): the
 * publication a reload ends with, without the file. */
static int admin_publish(void *ctx, const Sws__RouteSet *rs, uint64_t *gen, char *err,
                         size_t errlen)
{
    sws_supervisor_t *sup = ctx;
    if (sup->state != SUP_RUNNING) {
        sws_errf(err, errlen, "the server is stopping");
        return SWS_ADMIN_UNAVAILABLE;
    }
    if (upgrade_holds_routes(sup, err, errlen) < 0)
        return SWS_ADMIN_UNAVAILABLE;
    int rc = publish(sup, rs, PUBLISH_ADMIN, err, errlen);
    if (rc == 0)
        *gen = sws_shm_current_generation(&sup->shm);
    return rc;
}

/* The subscription's way to publish (supervisor/ingress_sub.h): the
 * routes come merged with the file's already. */
static int ingress_publish(void *ctx, const Sws__RouteSet *rs, char *err, size_t errlen)
{
    sws_supervisor_t *sup = ctx;
    if (sup->state != SUP_RUNNING)
        return sws_errf(err, errlen, "the server is stopping");
    return publish_routes(sup, rs, PUBLISH_INGRESS, err, errlen);
}

/* ---- stop ---- */

static void on_stop_timer(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, stop_timer);
    sws_log_warn("%u worker(s) still running after %llu ms; killing them", workers_running(sup),
                 (unsigned long long)sup->stop_queue.duration_ms);
    signal_workers(sup, SIGKILL);
}

static void begin_stop(sws_supervisor_t *sup, sup_state_t state, const char *why)
{
    if (state <= sup->state)
        return;
    sup->state = state;
    for (unsigned i = 0; i < sup->nworkers; i++)
        sws_timer_disarm(&sup->workers[i].restart_timer);
    drop_pending(sup);

    int graceful = state == SUP_DRAINING;
    uint64_t deadline = graceful ? (uint64_t)sup->shutdown_timeout_ms + STOP_GRACEFUL_EXTRA_MS
                                 : STOP_NOW_GRACE_MS;
    unsigned running = workers_running(sup);
    /* Graceful: the wait the operator configured, and the kill a margin
     * later. Now: one deadline, after which workers are killed. */
    if (graceful)
        sws_log_notice("%s: graceful stop; waiting up to %llu ms for %u worker(s), then SIGKILL at "
                       "%llu ms", why, (unsigned long long)sup->shutdown_timeout_ms, running,
                       (unsigned long long)deadline);
    else
        sws_log_notice("%s: stopping now; SIGKILL to the %u worker(s) still running after %llu ms",
                       why, running, (unsigned long long)deadline);
    log_placement(sup);
    signal_workers(sup, graceful ? SIGQUIT : SIGTERM);
    sws_timer_queue_set_duration(&sup->stop_queue, deadline);
    sws_timer_arm(&sup->loop, &sup->stop_queue, &sup->stop_timer);
    if (running == 0)
        sup->loop.stop = 1;
}

/* A second Ctrl-C: the operator will not wait. */
static void stop_at_once(sws_supervisor_t *sup)
{
    sws_log_warn("SIGINT again: killing %u worker(s)", workers_running(sup));
    signal_workers(sup, SIGKILL);
    for (unsigned i = 0; i < sup->nworkers; i++) {
        worker_proc_t *w = &sup->workers[i];
        int status;
        if (w->pid > 0 && waitpid(w->pid, &status, 0) == w->pid)
            on_worker_exit(sup, w, status);
    }
    sup->loop.stop = 1;
}

/* ---- binary upgrade, the old side ---- */

/* Either end of the upgrade socket, done with. */
static void close_upgrade_io(sws_supervisor_t *sup, sws_io_t *io)
{
    if (io->fd < 0)
        return;
    sws_loop_del(&sup->loop, io);
    close(io->fd);
    io->fd = -1;
}

static void upgrade_forget_child(sws_supervisor_t *sup)
{
    upgrade_child_t *up = &sup->up;
    sws_timer_disarm(&up->timeout_timer);
    close_upgrade_io(sup, &up->io);
    up->pid = 0;
    up->why[0] = '\0';
}

static const char *pid_file(const sws_supervisor_t *sup)
{
    return sup->config->server->pid_file;
}

/* The new binary is ended (its workers die with it: they accepted
 * nothing), the pid file is ours again, and we serve on as before. */
static void upgrade_rollback(sws_supervisor_t *sup, const char *why)
{
    char err[PATH_MAX * 2 + 64];
    if (sup->up.pid > 0 && kill(sup->up.pid, SIGKILL) < 0 && errno != ESRCH)
        sws_log_error("kill pid %d: %s", (int)sup->up.pid, strerror(errno));
    upgrade_forget_child(sup);
    if (pid_file(sup)[0] != '\0' &&
        sws_pid_file_move(pid_file(sup), SWS_PID_FILE_OLDBIN, "", err, sizeof(err)) < 0)
        sws_log_error("%s", err);
    /* A stop cancels the upgrade: then nothing is served on. */
    sws_log_error("upgrade failed: %s; %s", why,
                  sup->state == SUP_RUNNING ? "still serving" : "stopping as asked");
}

/* A FAILED message's reason, for the rollback's line. */
static void upgrade_keep_why(sws_supervisor_t *sup, const sws_chan_msg_t *m)
{
    if (m->type == SWS_UPGRADE_FAILED)
        snprintf(sup->up.why, sizeof(sup->up.why), "%.*s", (int)m->len, (const char *)m->body);
}

/* The reason still queued from a child that exited: the reaping may come
 * before the socket's turn; anything else it sent no longer matters. */
static void upgrade_read_why(sws_supervisor_t *sup)
{
    char err[256];
    sws_chan_msg_t m;
    while (sup->up.io.fd >= 0 && sws_chan_recv(sup->up.io.fd, &m, err, sizeof(err)) > 0) {
        upgrade_keep_why(sup, &m);
        sws_chan_msg_close_fds(&m);
    }
}

static void upgrade_child_exited(sws_supervisor_t *sup, pid_t pid, int status)
{
    char how[64], why[PATH_MAX + 400];
    describe_exit(status, how, sizeof(how));
    if (pid != sup->up.pid || sup->up.pid == 0)
        return; /* one ended by a rollback, or the new supervisor after GO */
    if (sup->handed_over) {
        sws_log_warn("upgrade: the new supervisor (pid %d) %s", (int)pid, how);
        return;
    }
    /* Reaped: nothing left to kill. Its last words may still wait in the
     * socket when the reaping comes first in the loop's turn. */
    sup->up.pid = 0;
    upgrade_read_why(sup);
    snprintf(why, sizeof(why), "%s %s before ready%s%s", sup->up.binary, how,
             sup->up.why[0] != '\0' ? ": " : "", sup->up.why);
    upgrade_rollback(sup, why);
}

static void on_upgrade_timeout(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, up.timeout_timer);
    char why[PATH_MAX + 64];
    snprintf(why, sizeof(why), "%s (pid %d) not ready after %llu ms", sup->up.binary,
             (int)sup->up.pid, (unsigned long long)sup->up.timeout_queue.duration_ms);
    upgrade_rollback(sup, why);
}

static void begin_stop(sws_supervisor_t *sup, sup_state_t state, const char *why);

/* READY: let go of what the new binary takes over, tell it GO, drain.
 * The order keeps every socket served: the eBPF socket array is emptied
 * before GO (the new one fills its own), and the sockets themselves stay
 * open here until the process ends. */
static void upgrade_commit(sws_supervisor_t *sup)
{
    char err[256];
    upgrade_child_t *up = &sup->up;
    if (sup->state != SUP_RUNNING) {
        upgrade_rollback(sup, "the running server began to stop");
        return;
    }
    sws_timer_disarm(&sup->watch_timer);
    sws_ebpf_hand_over(&sup->ebpf);
    if (sws_chan_send(up->io.fd, SWS_UPGRADE_GO, NULL, 0, NULL, 0, err, sizeof(err)) < 0) {
        if (sws_ebpf_attach(&sup->ebpf, err, sizeof(err)) == 0 && sup->ebpf.skel != NULL)
            sws_timer_arm(&sup->loop, &sup->watch_queue, &sup->watch_timer);
        upgrade_rollback(sup, "the new binary went away before GO");
        return;
    }
    sws_log_notice("upgrade: pid %d ready, old workers draining", (int)up->pid);
    sup->handed_over = 1;
    sws_timer_disarm(&up->timeout_timer);
    close_upgrade_io(sup, &up->io);
    /* The new binary serves the admin API and subscribes to ingressd. */
    sws_admin_release(sup->admin);
    sup->admin = NULL;
    sws_ingress_sub_stop(sup->ingress);
    sup->ingress = NULL;
    sws_timer_disarm(&sup->tickets_timer);
    begin_stop(sup, SUP_DRAINING, "upgrade");
}

static void on_upgrade_io(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_supervisor_t *sup = sws_container_of(io, sws_supervisor_t, up.io);
    char err[256];
    sws_chan_msg_t m;
    int rc;
    while (sup->up.io.fd >= 0 && (rc = sws_chan_recv(io->fd, &m, err, sizeof(err))) != 0) {
        if (rc < 0) {
            /* Gone: the reaping says how; a socket closed by a live
             * binary is waited out by the timeout. */
            close_upgrade_io(sup, io);
            return;
        }
        if (m.type == SWS_UPGRADE_READY) {
            upgrade_commit(sup);
        } else {
            upgrade_keep_why(sup, &m);
        }
        sws_chan_msg_close_fds(&m);
    }
}

/* The child: the new binary, with the socket as its only extra fd. */
static void exec_new_binary(sws_supervisor_t *sup, int fd) __attribute__((noreturn));
static void exec_new_binary(sws_supervisor_t *sup, int fd)
{
    sigset_t none;
    sigemptyset(&none);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sigismember(&sup->sigmask, sig) == 1)
            signal(sig, SIG_DFL);
    }
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    char num[16];
    snprintf(num, sizeof(num), "%d", fd);
    if (fcntl(fd, F_SETFD, 0) < 0 || setenv(SWS_UPGRADE_ENV, num, 1) < 0)
        _exit(126);
    /* argv[0] is the binary: its own later upgrades run the same path. */
    size_t argc = 0;
    while (sup->exec->argv[argc] != NULL)
        argc++;
    char **argv = calloc(argc + 1, sizeof(*argv));
    if (argv == NULL)
        _exit(126);
    for (size_t i = 0; i < argc; i++)
        argv[i] = sup->exec->argv[i];
    argv[0] = sup->up.binary;
    execv(sup->up.binary, argv);
    /* Checked before the fork, but the file may have changed since, or
     * the kernel may refuse it (ENOEXEC: another architecture). Its
     * reaping says "exited with status 127 before ready: execv: why". */
    char why[PATH_MAX + 64];
    snprintf(why, sizeof(why), "execv: %s", strerror(errno));
    sws_upgrade_exec_failed(fd, why);
    _exit(127);
}

/* The hand-off: every listening socket, the admin API's, the keys, the
 * routes as served. */
static int send_handoff(sws_supervisor_t *sup, int fd, char *err, size_t errlen)
{
    sws_upgrade_state_t *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return sws_errf(err, errlen, "out of memory");
    st->old_pid = sup->pid;
    st->backlog = sup->config->server->backlog;
    st->listen = sup->listen;
    const char *names[SWS_UPGRADE_MAX_ADMIN];
    st->nadmin = sws_admin_listeners(sup->admin, names, st->admin_fds, SWS_UPGRADE_MAX_ADMIN);
    for (unsigned i = 0; i < st->nadmin; i++)
        snprintf(st->admin_names[i], sizeof(st->admin_names[i]), "%s", names[i]);
    int rc = 0;
    if (sws_tickets_read(sws_shm_tickets(&sup->shm), &st->tickets) < 0)
        st->tickets.n = 0; /* torn or empty: the new one makes a key; sessions do a full handshake */
    rc = sws_upgrade_send_state(fd, st, sup->published, sup->published_len, err, errlen);
    sws_tickets_forget(&st->tickets);
    free(st);
    return rc;
}

/* Start binary (NULL: the one we were started from). 0 and *pid;
 * SWS_ADMIN_CONFLICT, SWS_ADMIN_UNAVAILABLE or -1 with err. */
static int upgrade_start(sws_supervisor_t *sup, const char *binary, pid_t *pid, char *err,
                         size_t errlen)
{
    upgrade_child_t *up = &sup->up;
    if (up->pid > 0) {
        sws_errf(err, errlen, "an upgrade is in progress (pid %d)", (int)up->pid);
        return SWS_ADMIN_CONFLICT;
    }
    if (sup->from.active) {
        sws_errf(err, errlen, "this server is still taking over from pid %d", (int)sup->from.pid);
        return SWS_ADMIN_CONFLICT;
    }
    if (sup->state != SUP_RUNNING) {
        sws_errf(err, errlen, "the server is stopping");
        return SWS_ADMIN_UNAVAILABLE;
    }
    if (binary == NULL)
        binary = sup->exec->binary;
    if (binary == NULL || sup->exec->argv == NULL)
        return sws_errf(err, errlen, "the running binary's path is not known");
    if (sws_upgrade_check_binary(binary, err, errlen) < 0)
        return SWS_ADMIN_BAD_BINARY;
    snprintf(up->binary, sizeof(up->binary), "%s", binary);
    int ends[2];
    if (sws_chan_pair(ends, err, errlen) < 0)
        return -1;
    /* Queued before the fork, read by the child once it runs: a child
     * that fails at once cannot make the send fail (EPIPE) under us. */
    if (send_handoff(sup, ends[0], err, errlen) < 0) {
        char why[512];
        snprintf(why, sizeof(why), "%s", err);
        close(ends[0]);
        close(ends[1]);
        return sws_errf(err, errlen, "hand-off to %s: %s", binary, why);
    }
    pid_t child = fork();
    if (child < 0) {
        close(ends[0]);
        close(ends[1]);
        return sws_errf(err, errlen, "fork: %s", strerror(errno));
    }
    if (child == 0) {
        close(ends[0]);
        exec_new_binary(sup, ends[1]);
    }
    close(ends[1]);
    up->pid = child;
    up->io.fd = ends[0];
    up->io.cb = on_upgrade_io;
    if (sws_loop_add(&sup->loop, &up->io, EPOLLIN) < 0) {
        sws_errf(err, errlen, "epoll_ctl: %s", strerror(errno));
        kill(child, SIGKILL);
        upgrade_forget_child(sup);
        return -1;
    }
    sws_timer_queue_set_duration(&up->timeout_queue, sup->upgrade_timeout_ms);
    sws_timer_arm(&sup->loop, &up->timeout_queue, &up->timeout_timer);
    char perr[PATH_MAX * 2 + 64];
    if (pid_file(sup)[0] != '\0' &&
        sws_pid_file_move(pid_file(sup), "", SWS_PID_FILE_OLDBIN, perr, sizeof(perr)) < 0)
        sws_log_warn("%s", perr);
    sws_log_notice("upgrade: started %s as pid %d", binary, (int)child);
    *pid = child;
    return 0;
}

static void upgrade_on_signal(sws_supervisor_t *sup)
{
    char err[PATH_MAX + 256];
    pid_t pid;
    int rc = upgrade_start(sup, NULL, &pid, err, sizeof(err));
    if (rc == SWS_ADMIN_CONFLICT || rc == SWS_ADMIN_UNAVAILABLE)
        sws_log_warn("SIGUSR2: %s; ignored", err);
    else if (rc < 0)
        sws_log_error("upgrade failed: %s; still serving", err);
}

/* POST /v1/upgrade (supervisor/admin_api.h). */
static int admin_upgrade(void *ctx, const char *binary, long *pid, char *err, size_t errlen)
{
    pid_t child;
    int rc = upgrade_start(ctx, binary, &child, err, errlen);
    if (rc == -1 || rc == SWS_ADMIN_BAD_BINARY)
        sws_log_error("upgrade failed: %s; still serving", err);
    if (rc == 0)
        *pid = (long)child;
    return rc;
}

/* ---- binary upgrade, the new side ---- */

/* The handed layout must be the one the file asks for: the sockets are
 * kept as they are (never re-bound), so a different set means a restart. */
static int check_handed_layout(const sws_supervisor_t *sup, const sws_listen_set_t *ls,
                               const Sws__ServerConfig *sc, char *err, size_t errlen)
{
    char handed[512] = "", configured[512] = "";
    size_t hl = 0, cl = 0;
    int same = ls->naddrs == sc->n_listen;
    for (unsigned i = 0; i < ls->naddrs; i++)
        hl += (size_t)snprintf(handed + hl, hl < sizeof(handed) ? sizeof(handed) - hl : 0,
                               "%s%s", i > 0 ? ", " : "", ls->addrs[i].name);
    for (size_t i = 0; i < sc->n_listen; i++) {
        cl += (size_t)snprintf(configured + cl, cl < sizeof(configured) ? sizeof(configured) - cl
                                                                        : 0,
                               "%s%s", i > 0 ? ", " : "", sc->listen[i]->address);
        if (i < ls->naddrs && strcmp(sc->listen[i]->address, ls->addrs[i].name) != 0)
            same = 0;
    }
    if (!same)
        return sws_errf(err, errlen, "server.listen is %s here, the running server listens on "
                        "%s: a binary upgrade keeps the listening sockets; restart to change them",
                        configured, handed);
    sws_accept_policy_t policy = sc->accept_policy == SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED
                                     ? SWS_ACCEPT_SHARED
                                     : SWS_ACCEPT_REUSEPORT;
    unsigned groups = policy == SWS_ACCEPT_SHARED ? 1 : sup->nworkers;
    if (policy != ls->policy || groups != ls->ngroups)
        return sws_errf(err, errlen, "the running server has %u %s socket group(s), this one "
                        "would need %u %s (server.accept_policy, server.event_loops): restart "
                        "to change them", ls->ngroups, sws_listen_policy_name(ls->policy), groups,
                        sws_listen_policy_name(policy));
    return 0;
}

/* Instead of open_listeners: the old binary's sockets, as they are. */
static int adopt_listeners(sws_supervisor_t *sup, const Sws__ServerConfig *sc)
{
    char err[1400];
    sws_upgrade_state_t *st = &sup->from.state;
    if (check_handed_layout(sup, &st->listen, sc, err, sizeof(err)) < 0) {
        sws_log_error("upgrade: %s", err);
        return -1;
    }
    sup->listen = st->listen;
    memset(&st->listen, 0, sizeof(st->listen));
    return 0;
}

static void upgrade_refuse(sws_supervisor_t *sup, const char *why)
{
    if (sup->from.io.fd >= 0)
        sws_upgrade_send_failed(sup->from.io.fd, why);
}

/* GO: our workers accept, the old ones drain. */
static void upgrade_take_over(sws_supervisor_t *sup)
{
    upgrade_parent_t *from = &sup->from;
    const Sws__ServerConfig *sc = sup->config->server;
    char err[512];
    from->active = 0;
    sws_timer_disarm(&from->ready_timer);
    close_upgrade_io(sup, &from->io);
    /* A socket the old binary had parked (ADR 0010) listens again. */
    size_t nfds = (size_t)sup->listen.naddrs * sup->listen.ngroups;
    for (size_t i = 0; i < nfds; i++) {
        if (listen(sup->listen.fds[i], (int)sc->backlog) < 0)
            sws_log_error("upgrade: listen again: %s", strerror(errno));
    }
    if (sup->ebpf.skel != NULL) {
        if (sws_ebpf_attach(&sup->ebpf, err, sizeof(err)) < 0) {
            sws_log_warn("accept_policy %s: %s; falling back to reuseport", sup->policy, err);
            sup->policy = sws_listen_policy_name(sup->listen.policy);
        } else {
            sws_timer_arm(&sup->loop, &sup->watch_queue, &sup->watch_timer);
        }
    }
    for (unsigned i = 0; i < sup->nworkers; i++) {
        worker_proc_t *w = &sup->workers[i];
        if (w->pid > 0 && w->ctl_fd >= 0 &&
            sws_chan_send(w->ctl_fd, SWS_CHAN_ACCEPT, NULL, 0, NULL, 0, err, sizeof(err)) < 0) {
            /* Restarted, it accepts from the start. */
            sws_log_error("worker %u: %s; restarting it", w->index, err);
            kill(w->pid, SIGKILL);
        }
    }
    const char *names[SWS_UPGRADE_MAX_ADMIN];
    for (unsigned i = 0; i < from->state.nadmin; i++)
        names[i] = from->state.admin_names[i];
    sup->admin = sws_admin_start_inherited(&sup->loop, sc->admin, &sup->shm, sup->nworkers,
                                           admin_publish, sup, names, from->state.admin_fds,
                                           from->state.nadmin);
    sws_admin_set_accept_policy(sup->admin, sup->policy);
    sws_admin_set_upgrade(sup->admin, admin_upgrade);
    sws_admin_published(sup->admin, from->state.routes, sws_shm_current_generation(&sup->shm),
                        SWS_PUBLISHED_BY_FILE);
    const char *endpoint = sc->ingress != NULL ? sc->ingress->subscribe : "";
    if (endpoint[0] != '\0') {
        sup->ingress = sws_ingress_sub_start(&sup->loop, endpoint, ingress_publish, sup, err,
                                             sizeof(err));
        if (sup->ingress == NULL)
            sws_log_error("ingress.subscribe: %s; serving without ingressd's updates", err);
        else
            sws_ingress_sub_file_published(sup->ingress, sup->config->routes);
        sws_admin_set_ingress(sup->admin, sup->ingress);
    }
    if (pid_file(sup)[0] != '\0' &&
        sws_pid_file_write(pid_file(sup), sup->pid, err, sizeof(err)) < 0)
        sws_log_error("%s", err);
    sws_log_notice("upgrade: took over from pid %d", (int)from->pid);
    sws_upgrade_state_free(&from->state);
}

static void on_handoff_io(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_supervisor_t *sup = sws_container_of(io, sws_supervisor_t, from.io);
    char err[256];
    sws_chan_msg_t m;
    int rc;
    while (sup->from.active && (rc = sws_chan_recv(io->fd, &m, err, sizeof(err))) != 0) {
        if (rc < 0) {
            sws_log_error("upgrade: pid %d gave up before GO; stopping", (int)sup->from.pid);
            sup->from.active = 0;
            sws_timer_disarm(&sup->from.ready_timer);
            close_upgrade_io(sup, io);
            begin_stop(sup, SUP_STOPPING, "upgrade abandoned");
            return;
        }
        if (m.type == SWS_UPGRADE_GO)
            upgrade_take_over(sup);
        sws_chan_msg_close_fds(&m);
    }
}

/* Ready when every worker runs and holds a generation (it adopts one
 * before its loop starts). */
static void on_ready_timer(sws_timer_t *t)
{
    sws_supervisor_t *sup = sws_container_of(t, sws_supervisor_t, from.ready_timer);
    char err[256];
    if (!sup->from.active || sup->from.ready_sent)
        return;
    for (unsigned i = 0; i < sup->nworkers; i++) {
        if (sup->workers[i].pid == 0 || sws_shm_reader_generation(&sup->shm, i) == 0) {
            sws_timer_arm(&sup->loop, &sup->from.ready_queue, &sup->from.ready_timer);
            return;
        }
    }
    if (sws_chan_send(sup->from.io.fd, SWS_UPGRADE_READY, NULL, 0, NULL, 0, err,
                      sizeof(err)) < 0) {
        sws_log_error("upgrade: %s", err);
        return; /* the socket's end (on_handoff_io) stops us */
    }
    sup->from.ready_sent = 1;
    sws_log_info("upgrade: workers ready; waiting for pid %d's GO", (int)sup->from.pid);
}

/* Before setup: what the old binary sent, waiting a bounded time. */
static int receive_handoff(sws_supervisor_t *sup)
{
    char err[256];
    upgrade_parent_t *from = &sup->from;
    from->io.fd = sup->exec->handoff_fd;
    from->io.cb = on_handoff_io;
    if (sws_upgrade_recv_state(from->io.fd, UPGRADE_HANDOFF_WAIT_MS, &from->state, err,
                               sizeof(err)) < 0) {
        sws_log_error("upgrade: %s", err);
        return -1;
    }
    from->active = 1;
    from->pid = from->state.old_pid;
    return 0;
}

/* After setup and the workers' fork: wait for them, then READY, then GO. */
static int await_go(sws_supervisor_t *sup)
{
    upgrade_parent_t *from = &sup->from;
    if (sws_loop_add(&sup->loop, &from->io, EPOLLIN) < 0) {
        sws_log_error("upgrade socket: epoll: %s", strerror(errno));
        return -1;
    }
    sws_timer_queue_init(&sup->loop, &from->ready_queue, UPGRADE_READY_POLL_MS);
    sws_timer_init(&from->ready_timer, on_ready_timer);
    sws_timer_arm(&sup->loop, &from->ready_queue, &from->ready_timer);
    return 0;
}

static void on_signal(sws_io_t *io, uint32_t events)
{
    (void)events;
    sws_supervisor_t *sup = sws_container_of(io, sws_supervisor_t, signals);
    struct signalfd_siginfo si;
    while (read(io->fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGCHLD:
            reap_children(sup);
            break;
        case SIGHUP:
            reload(sup);
            break;
        case SIGQUIT:
            begin_stop(sup, SUP_DRAINING, "SIGQUIT");
            break;
        case SIGTERM:
            begin_stop(sup, SUP_STOPPING, "SIGTERM");
            break;
        case SIGINT:
            if (sup->state == SUP_STOPPING)
                stop_at_once(sup);
            else
                begin_stop(sup, SUP_STOPPING, "SIGINT");
            break;
        case SIGUSR1:
            reopen_logs(sup);
            break;
        case SIGUSR2:
            upgrade_on_signal(sup);
            break;
        default:
            break;
        }
    }
}

/* ---- startup ---- */

/* Both log files, opened here as root: a worker that runs as
 * server.user inherits the descriptors and never needs the right to open
 * them. */
static int apply_logging(sws_supervisor_t *sup, const Sws__ServerConfig *sc,
                         const Sws__Settings *st)
{
    char err[PATH_MAX + 128];
    if (sws_log_open(sc->error_log, err, sizeof(err)) < 0) {
        sws_log_error("server.logging.error_log: %s", err);
        return -1;
    }
    apply_log_level(st);
    int fd;
    if (open_access_log(st->access_log, &fd, err, sizeof(err)) < 0) {
        sws_log_error("%s", err);
        return -1;
    }
    if (set_access_log(sup, fd, st->access_log->path) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return 0;
}

int sws_supervisor_lookup_user(const char *name, uid_t *uid, gid_t *gid, char *err,
                               size_t errlen)
{
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (pw == NULL)
        return sws_errf(err, errlen, "%s \"%s\"",
                        errno != 0 ? strerror(errno) : "no such user", name);
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

static int resolve_user(sws_supervisor_t *sup, const Sws__ServerConfig *sc)
{
    sup->uid = getuid();
    sup->gid = getgid();
    if (sc->user[0] == '\0')
        return 0;
    if (geteuid() != 0) {
        sws_log_notice("not running as root: server.user \"%s\" ignored", sc->user);
        return 0;
    }
    char err[256];
    if (sws_supervisor_lookup_user(sc->user, &sup->uid, &sup->gid, err, sizeof(err)) < 0) {
        sws_log_error("server.user: %s", err);
        return -1;
    }
    sup->drop_privileges = 1;
    return 0;
}

static int open_listeners(sws_supervisor_t *sup, const Sws__ServerConfig *sc)
{
    char err[256];
    sws_listen_addr_t *addrs = calloc(sc->n_listen, sizeof(*addrs));
    if (addrs == NULL) {
        sws_log_error("out of memory for %zu listen addresses", sc->n_listen);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < sc->n_listen && rc == 0; i++) {
        const char *text = sc->listen[i]->address;
        snprintf(addrs[i].name, sizeof(addrs[i].name), "%s", text);
        unsigned len = 0;
        rc = sws_listen_parse_address(text, &addrs[i].ss, &len, err, sizeof(err));
        addrs[i].len = (socklen_t)len;
    }
    if (rc == 0) {
        /* The eBPF policies place connections over reuseport sockets. */
        sws_accept_policy_t policy = sc->accept_policy == SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED
                                         ? SWS_ACCEPT_SHARED
                                         : SWS_ACCEPT_REUSEPORT;
        rc = sws_listen_open(&sup->listen, addrs, (unsigned)sc->n_listen, policy, sup->nworkers,
                             (int)sc->backlog, err, sizeof(err));
    }
    free(addrs);
    if (rc < 0)
        sws_log_error("server.listen: %s", err);
    return rc;
}

static int open_signals(sws_supervisor_t *sup)
{
    sigemptyset(&sup->sigmask);
    const int sigs[] = { SIGCHLD, SIGHUP, SIGTERM, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2 };
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&sup->sigmask, sigs[i]);
    /* Blocked before the first fork, so a worker that dies at once is
     * still seen by the signalfd. */
    if (sigprocmask(SIG_BLOCK, &sup->sigmask, NULL) < 0) {
        sws_log_error("sigprocmask: %s", strerror(errno));
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    sup->signals.fd = signalfd(-1, &sup->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
    sup->signals.cb = on_signal;
    if (sup->signals.fd < 0 || sws_loop_add(&sup->loop, &sup->signals, EPOLLIN) < 0) {
        sws_log_error("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static void log_start(const sws_supervisor_t *sup)
{
    char where[512];
    size_t len = 0;
    where[0] = '\0';
    for (unsigned i = 0; i < sup->listen.naddrs && len < sizeof(where); i++) {
        char one[96];
        sws_listen_format(&sup->listen.addrs[i].ss, one, sizeof(one));
        int n = snprintf(where + len, sizeof(where) - len, "%s%s", i > 0 ? ", " : "", one);
        if (n > 0)
            len += (size_t)n;
    }
    sws_log_notice("scalwsd " SWS_VERSION " (build %s) starting: %u workers, accept_policy %s, "
                   "listening on %s", sws_build_id(), sup->nworkers, sup->policy, where);
}

static int create_table(sws_supervisor_t *sup)
{
    const Sws__ServerConfig *sc = sup->config->server;
    char err[256];
    if (sws_shm_create(&sup->shm, sc->table_size, SWS_SHM_DEFAULT_ARENAS, sup->nworkers, err,
                       sizeof(err)) < 0) {
        sws_log_error("shared memory: %s", err);
        return -1;
    }
    /* Taking over: the table as the old binary served it, so the first
     * generation answers exactly as before. */
    const Sws__RouteSet *routes =
        sup->from.active ? sup->from.state.routes : sup->config->routes;
    if (publish(sup, routes, PUBLISH_START, err, sizeof(err)) < 0) {
        sws_log_error("publish the routing table: %s", err);
        return -1;
    }
    return 0;
}

static int init_workers(sws_supervisor_t *sup)
{
    sup->workers = calloc(sup->nworkers, sizeof(*sup->workers));
    if (sup->workers == NULL) {
        sws_log_error("out of memory for %u workers", sup->nworkers);
        return -1;
    }
    for (unsigned i = 0; i < sup->nworkers; i++) {
        worker_proc_t *w = &sup->workers[i];
        w->sup = sup;
        w->index = i;
        w->cpu = sws_worker_cpu(&sup->cpus, i);
        w->ctl_fd = -1;
        sws_timer_queue_init(&sup->loop, &w->restart_queue, 0);
        sws_timer_init(&w->restart_timer, on_restart_timer);
    }
    return 0;
}

static int setup(sws_supervisor_t *sup)
{
    char err[512];
    if (sup->exec->handoff_fd >= 0 && receive_handoff(sup) < 0)
        return -1;
    if (sws_config_load(sup->config_path, &sup->config, err, sizeof(err)) < 0) {
        sws_log_error("%s", err);
        return -1;
    }
    if (sws_supervisor_check_table(sup->config->routes, sup->config->server->table_size, err,
                                   sizeof(err)) < 0) {
        sws_log_error("%s: %s", sup->config_path, err);
        return -1;
    }
    const Sws__ServerConfig *sc = sup->config->server;
    if (apply_logging(sup, sc, sup->config->routes->settings) < 0 || resolve_user(sup, sc) < 0)
        return -1;
    sup->upgrade_timeout_ms = sc->upgrade_timeout_ms;

    CPU_ZERO(&sup->cpus);
    if (sched_getaffinity(0, sizeof(sup->cpus), &sup->cpus) < 0) {
        sws_log_warn("sched_getaffinity: %s; workers are not pinned", strerror(errno));
        CPU_ZERO(&sup->cpus);
    }
    sup->nworkers = sws_worker_count(sc->event_loops, &sup->cpus);
    if (sc->event_loops > sup->nworkers)
        sws_log_warn("server.event_loops: %u workers asked, %u is the most; starting %u",
                     sc->event_loops, SWS_SHM_MAX_WORKERS, sup->nworkers);

    /* Signals are blocked (and queued in the signalfd) before the port
     * opens: a SIGHUP sent as soon as the port answers must be a reload,
     * not the default action that kills the process. */
    if (sws_loop_init(&sup->loop) < 0) {
        sws_log_error("epoll: %s", strerror(errno));
        return -1;
    }
    if (open_signals(sup) < 0)
        return -1;
    if (sup->from.active ? adopt_listeners(sup, sc) < 0 : open_listeners(sup, sc) < 0)
        return -1;
    sws_timer_queue_init(&sup->loop, &sup->watch_queue, LOAD_WATCH_MS);
    sws_timer_init(&sup->watch_timer, on_watch_timer);
    start_ebpf(sup, sc);
    log_start(sup);
    /* Before the first publication, which it keeps a copy of; a failure
     * to serve it is logged and the start goes on. Taking over: both at
     * GO (upgrade_take_over), the old binary serves them until then. */
    if (!sup->from.active) {
        sup->admin = sws_admin_start(&sup->loop, sc->admin, &sup->shm, sup->nworkers,
                                     admin_publish, sup);
        sws_admin_set_upgrade(sup->admin, admin_upgrade);
    }
    sws_admin_set_accept_policy(sup->admin, sup->policy);
    /* Before the first publication, which it keeps the file's routes of;
     * nothing is read from it before the loop runs. */
    const char *endpoint = sc->ingress != NULL ? sc->ingress->subscribe : "";
    if (endpoint[0] != '\0' && !sup->from.active) {
        sup->ingress = sws_ingress_sub_start(&sup->loop, endpoint, ingress_publish, sup, err,
                                             sizeof(err));
        if (sup->ingress == NULL) {
            sws_log_error("ingress.subscribe: %s", err);
            return -1;
        }
        sws_admin_set_ingress(sup->admin, sup->ingress);
    }
    if (create_table(sup) < 0 || start_tickets(sup) < 0 || init_workers(sup) < 0)
        return -1;
    sws_timer_queue_init(&sup->loop, &sup->stop_queue, STOP_NOW_GRACE_MS);
    sws_timer_init(&sup->stop_timer, on_stop_timer);
    sws_timer_queue_init(&sup->loop, &sup->publish_queue, PUBLISH_RETRY_MS);
    sws_timer_init(&sup->publish_timer, on_publish_timer);
    sws_timer_queue_init(&sup->loop, &sup->up.timeout_queue, sup->upgrade_timeout_ms);
    sws_timer_init(&sup->up.timeout_timer, on_upgrade_timeout);
    /* Taking over, the file is written at GO. */
    if (!sup->from.active && sc->pid_file[0] != '\0' &&
        sws_pid_file_write(sc->pid_file, sup->pid, err, sizeof(err)) < 0) {
        sws_log_error("%s", err);
        return -1;
    }
    return 0;
}

static void teardown(sws_supervisor_t *sup)
{
    /* First: it unregisters its timer queue from the loop, whose list
     * also runs through the workers' (freed below). */
    sws_admin_stop(sup->admin);
    sws_ingress_sub_stop(sup->ingress);
    drop_pending(sup);
    if (sup->up.pid > 0 && !sup->handed_over)
        upgrade_rollback(sup, "the running server stopped first");
    upgrade_forget_child(sup);
    if (sup->from.io.fd >= 0)
        close(sup->from.io.fd);
    sws_upgrade_state_free(&sup->from.state);
    free(sup->published);
    /* Ours to remove: FILE, or FILE.oldbin once a new binary wrote FILE. */
    if (sup->config != NULL && pid_file(sup)[0] != '\0') {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s%s", pid_file(sup), sup->handed_over ? SWS_PID_FILE_OLDBIN
                                                                             : "");
        sws_pid_file_remove(path, sup->pid);
    }
    if (sup->config != NULL)
        sws_config_free(sup->config);
    for (unsigned i = 0; sup->workers != NULL && i < sup->nworkers; i++) {
        if (sup->workers[i].ctl_fd >= 0)
            close(sup->workers[i].ctl_fd);
    }
    free(sup->workers);
    if (sup->access_fd >= 0)
        close(sup->access_fd);
    free(sup->access_path);
    if (sup->signals.fd >= 0)
        close(sup->signals.fd);
    sws_loop_close(&sup->loop);
    sws_ebpf_close(&sup->ebpf);
    sws_listen_close(&sup->listen);
    if (sup->shm.base != NULL) {
        /* Stopping for good: no later binary resumes these sessions. */
        sws_tickets_wipe(sws_shm_tickets(&sup->shm));
        sws_shm_close(&sup->shm);
    }
}

int sws_supervisor_run(const char *config_path, const sws_supervisor_exec_t *exec)
{
    sws_supervisor_t sup;
    memset(&sup, 0, sizeof(sup));
    sup.config_path = config_path;
    sup.exec = exec;
    sup.up.io.fd = -1;
    sup.from.io.fd = -1;
    for (unsigned i = 0; i < SWS_UPGRADE_MAX_ADMIN; i++)
        sup.from.state.admin_fds[i] = -1;
    sup.pid = getpid();
    sup.signals.fd = -1;
    sup.loop.epfd = -1;
    sup.access_fd = -1;
    sup.pending_access_fd = -1;
    sws_proctitle_set("scalwsd: supervisor -c %s", config_path);

    sws_log_set_startup_echo(1);
    int setup_rc = setup(&sup);
    sws_log_set_startup_echo(0);
    if (setup_rc < 0) {
        /* A new binary says why before it goes: the old one logs it. */
        if (sup.from.active || exec->handoff_fd >= 0)
            upgrade_refuse(&sup, sws_log_last_error());
        teardown(&sup);
        return 1;
    }
    sws_loop_update_time(&sup.loop);
    for (unsigned i = 0; i < sup.nworkers; i++)
        restart_worker(&sup, &sup.workers[i]);
    if (sup.from.active && await_go(&sup) < 0) {
        upgrade_refuse(&sup, sws_log_last_error());
        teardown(&sup);
        return 1;
    }

    int rc = sws_loop_run(&sup.loop);
    if (rc < 0)
        sws_log_crit("event loop: %s", strerror(errno));
    teardown(&sup);
    sws_log_notice("stopped");
    return rc < 0 ? 1 : 0;
}
