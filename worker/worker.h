/*
 * A worker process: one event loop on one CPU, serving the connections it
 * accepts. Called by the supervisor in the child right after fork(); the
 * child owns everything it inherited from then on.
 *
 * Signals (the supervisor sends them; a worker never acts on the terminal's):
 *   SIGTERM  stop now: close everything, exit 0.
 *   SIGQUIT  graceful stop: stop accepting, finish the requests in flight,
 *            close busy connections after their current response (HTTP/2:
 *            GOAWAY) and idle HTTP/1.1 ones after their next request
 *            (answered with Connection: close) or SWS_CONN_DRAIN_IDLE_MS
 *            without one (worker/conn.h), exit 0 when
 *            none is left (or when the shutdown timeout passes: then exit 0
 *            and log how many were cut, and how many of those were idle).
 *            The timeout is the one of the newest table generation when
 *            the stop begins, so a reload before the SIGQUIT sets it.
 *   SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGPIPE: ignored (log files are
 *            reopened by the supervisor, which sends the new descriptors
 *            over the control channel, core/chan.h).
 *
 * Log files: the worker never opens one. The error log's descriptor is the
 * logger's, inherited at fork; the access log's comes in access_fd; newer
 * ones arrive as SWS_CHAN_LOGS messages on ctl_fd.
 *
 * Exit status: 0 after a stop, 1 on a setup error (logged). Anything else
 * (a signal, a crash) makes the supervisor restart the worker.
 */
#ifndef SWS_WORKER_WORKER_H
#define SWS_WORKER_WORKER_H

#include <stdint.h>
#include <sys/types.h>

#include "ebpf/policy.h"
#include "shm/shm.h"

typedef struct sws_worker_config {
    unsigned index;          /* 0..n-1; also its reader slot in shm */
    int cpu;                 /* CPU to pin to; -1: no pinning */
    const int *listen_fds;   /* the listening sockets it accepts on (non-blocking) */
    const uint8_t *listen_tls; /* per listening socket, 1: its clients speak TLS;
                                * NULL: none does */
    unsigned nlisten;
    int exclusive;           /* 1: shared sockets, register with EPOLLEXCLUSIVE */
    sws_shm_t *shm;
    uid_t uid;               /* drop to uid/gid after setup when drop_privileges */
    gid_t gid;
    int drop_privileges;
    int ctl_fd;              /* this worker's end of the control channel; owned */
    int access_fd;           /* the access log (-1: none); owned */
    struct sws_ebpf_worker *load; /* its record in the eBPF load map (shared
                                   * mapping); NULL: no eBPF policy */
    int standby;             /* 1: a binary upgrade's new generation: accept nothing
                              * until SWS_CHAN_ACCEPT (core/chan.h) */
} sws_worker_config_t;

/* Run the worker until it stops; returns the process exit status. */
int sws_worker_main(const sws_worker_config_t *cfg);

#endif
