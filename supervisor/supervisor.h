/*
 * The supervisor: the process that owns the listening sockets, the
 * shared-memory region and the workers, and turns configuration into table
 * generations. See docs/adr/0001-process-model.md.
 *
 * sws_supervisor_run() is the whole life of the process after the command
 * line: read the config, bind, create the shm region and publish generation
 * 1, fork and pin the workers, then run an event loop whose mailboxes are a
 * signalfd and timers (restart backoff, stop deadlines, publish retries):
 *
 *   SIGCHLD  reap; restart the worker (backoff when it keeps dying young)
 *   SIGHUP   reload the file and publish a new generation
 *   SIGQUIT  graceful stop: workers finish what is in flight, then exit
 *   SIGTERM, SIGINT  stop now (a second SIGINT: kill -9 and exit)
 *   SIGUSR1  reopen the log files and hand them to every worker
 *   SIGUSR2  binary upgrade: start the binary at the path this one was
 *            started from, hand it the sockets, keys and routes, and drain
 *            once it is ready, or roll back (supervisor/upgrade.h,
 *            docs/adr/0046-binary-upgrade.md)
 *
 * With an eBPF accept policy it also loads the program and owns its maps
 * (ebpf/ebpf.h), and parks a worker that died or stopped beating
 * (docs/adr/0010-park-stuck-workers.md).
 *
 * Log files are opened here, before any privilege drops, and reopened here
 * (SIGUSR1, a reload that moves the access log); workers get descriptors,
 * at fork or over their control channel (core/chan.h), and never open one.
 *
 * Later mailboxes (the admin Unix socket, the ZeroMQ subscription, a
 * child's readiness pipe) are further sws_io_t watchers on the same loop.
 *
 * The pure functions below hold the policy decisions so they can be unit
 * tested without processes.
 */
#ifndef SWS_SUPERVISOR_SUPERVISOR_H
#define SWS_SUPERVISOR_SUPERVISOR_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ebpf/policy.h"
#include "proto/scalws.pb-c.h"
#include "shm/shm.h"

/* A worker that ran at least this long before dying is restarted at once
 * and its crash count starts over. */
#define SWS_RESTART_MIN_UPTIME_MS 10000u
#define SWS_RESTART_FIRST_DELAY_MS 100u
#define SWS_RESTART_MAX_DELAY_MS 10000u

/* How this process was started, for a binary upgrade: the binary to exec
 * (an absolute path, symlinks not resolved: sws_upgrade_binary_path), the
 * command line to exec it with (a copy: the process title overwrites the
 * original), and the hand-off socket when an old supervisor started this
 * one (-1: a fresh start). All borrowed for the life of the run. */
typedef struct sws_supervisor_exec {
    const char *binary; /* NULL: upgrades are refused */
    char *const *argv;
    int handoff_fd;
} sws_supervisor_exec_t;

/* Run the supervisor with the configuration file at config_path (absolute,
 * so reloads find it whatever the working directory). Returns the process
 * exit status: 0 after a stop (or after handing over to a new binary), 1
 * when it could not start (a new binary has then told the old one why). */
int sws_supervisor_run(const char *config_path, const sws_supervisor_exec_t *exec);

/* Check that routes build into a table of at most table_size bytes: what
 * `scalwsd -t` and the start check against the file's server.table_size.
 * A reload checks only the size, against the running arenas' size (arenas
 * are sized once, at start), and leaves the build to the publication, which
 * tells a table it refuses from one that waits for a free arena.
 * 0, or -1 with a message in err. */
int sws_supervisor_check_table(const Sws__RouteSet *routes, uint32_t table_size, char *err,
                               size_t errlen);

/* The uid and gid of user name: 0, or -1 with a message in err ("no such
 * user \"x\""). What the start and the config check (-t) both use. */
int sws_supervisor_lookup_user(const char *name, uid_t *uid, gid_t *gid, char *err,
                               size_t errlen);

/* Crash count after a worker died having run uptime_ms: one more when it
 * died young, else 1 (this death starts a new run of crashes). */
unsigned sws_restart_crashes(unsigned crashes, uint64_t uptime_ms);

/* Delay before restarting a worker whose crash count is `crashes`: 0 for
 * the first crash, then 100 ms, 200 ms, 400 ms, ... capped at 10 s. */
uint64_t sws_restart_delay_ms(unsigned crashes);

/* Number of workers: event_loops, or when it is 0 the number of CPUs in
 * the affinity mask (at least 1); never more than SWS_SHM_MAX_WORKERS. */
unsigned sws_worker_count(uint32_t event_loops, const cpu_set_t *allowed);

/* The CPU worker `index` is pinned to: the (index mod count)-th CPU of the
 * affinity mask, or -1 when the mask is empty. */
int sws_worker_cpu(const cpu_set_t *allowed, unsigned index);

/* The eBPF policy a configured accept policy needs; 0 for shared and
 * reuseport, which need none. */
enum sws_ebpf_policy sws_accept_ebpf_policy(Sws__ServerConfig__AcceptPolicy policy);

/* Whether a worker started at started_ms whose last heartbeat was
 * heartbeat_ms (0: none yet) is stuck at now_ms: silent for more than
 * SWS_EBPF_STALE_MS, counted from its start while it has not beaten. */
int sws_worker_stuck(uint64_t now_ms, uint64_t started_ms, uint64_t heartbeat_ms);

/* The placement line the supervisor logs at a worker's death and at stop
 * (GET /v1/status serves the same counters live): "placement, accept_policy least-loaded
 * (worker:accepted/live): 0:120/8 1:118/8 ...", from n workers' counters,
 * cut to fit outlen. Returns the length. */
size_t sws_placement_format(const char *policy, const sws_shm_counters_t *counters, unsigned n,
                            char *out, size_t outlen);

/* Names of the server keys that differ between the running and the
 * reloaded config and only take effect on a restart, ", "-separated
 * ("server.listen, server.backlog"); "" when none. Returns the length. */
size_t sws_restart_only_changes(const Sws__ServerConfig *running, const Sws__ServerConfig *next,
                                char *out, size_t outlen);

#endif
