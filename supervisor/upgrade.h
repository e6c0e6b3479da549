/*
 * Binary upgrade: what the running supervisor (the old one) hands the new
 * binary it starts, and the few messages they exchange. The flow itself
 * (who waits for what, rollback) is supervisor/supervisor.c's; the design
 * is docs/adr/0046-binary-upgrade.md.
 *
 * Transport: a SOCK_SEQPACKET socketpair made by the old supervisor before
 * it forks the new one; the child's end survives exec and its number is in
 * the environment variable SWS_UPGRADE_ENV. Each message is one
 * core/chan.h datagram (type, body of at most SWS_CHAN_MAX_BODY bytes, at
 * most SWS_CHAN_MAX_FDS descriptors).
 *
 *   old -> new  SWS_UPGRADE_STATE  body: struct sws_upgrade_state_msg;
 *               one descriptor: a sealed-in-practice memfd holding the
 *               state blob (below), blob_len bytes from offset 0.
 *   old -> new  SWS_UPGRADE_FDS    body: struct sws_upgrade_fds_msg; the
 *               next `count` descriptors of kind (listening sockets in the
 *               listen set's order, then the admin API's listeners).
 *   new -> old  SWS_UPGRADE_READY  no body: configuration checked, table
 *               built, every worker started in standby and reading it.
 *   new -> old  SWS_UPGRADE_FAILED body: why, text (not NUL-terminated).
 *   old -> new  SWS_UPGRADE_GO     no body: the old generation stops
 *               accepting now; the new one's workers take over.
 *
 * The state blob, host byte order (both ends are one machine), version
 * SWS_UPGRADE_VERSION: a fixed head, naddrs listen addresses, nadmin
 * admin listener names, ntickets TLS ticket keys (current first), then the
 * RouteSet as published, protobuf-encoded, to the end. The new side checks
 * every count and length before it uses one (sws_upgrade_blob_decode).
 *
 * Who may call: the supervisor (both sides). Ownership: a decoded or
 * received sws_upgrade_state_t owns its addresses, descriptors and
 * RouteSet until sws_upgrade_state_free(); a caller that keeps a
 * descriptor sets its slot to -1 first.
 */
#ifndef SWS_SUPERVISOR_UPGRADE_H
#define SWS_SUPERVISOR_UPGRADE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/scalws.pb-c.h"
#include "shm/tickets.h"
#include "supervisor/listen.h"

#define SWS_UPGRADE_ENV "SCALWS_UPGRADE_FD"
#define SWS_UPGRADE_VERSION 1u
#define SWS_UPGRADE_MAGIC 0x55575353u /* "SSWU" */
#define SWS_UPGRADE_MAX_ADDRS 64u
#define SWS_UPGRADE_MAX_GROUPS 256u  /* SWS_SHM_MAX_WORKERS */
#define SWS_UPGRADE_MAX_ADMIN 16u
#define SWS_UPGRADE_ADMIN_NAME 108u  /* sun_path */
#define SWS_UPGRADE_MAX_BLOB (1u << 30)

enum sws_upgrade_msg_type {
    SWS_UPGRADE_STATE = 101,
    SWS_UPGRADE_FDS = 102,
    SWS_UPGRADE_READY = 103,
    SWS_UPGRADE_FAILED = 104,
    SWS_UPGRADE_GO = 105,
};

enum sws_upgrade_fd_kind {
    SWS_UPGRADE_FD_LISTEN = 1,
    SWS_UPGRADE_FD_ADMIN = 2,
};

struct sws_upgrade_state_msg {
    uint32_t magic;
    uint32_t version;
    uint64_t blob_len;
};

struct sws_upgrade_fds_msg {
    uint32_t kind;  /* enum sws_upgrade_fd_kind */
    uint32_t first; /* index of the first descriptor among its kind */
    uint32_t count; /* descriptors in this message */
};

/* What crosses: the listen set (layout and sockets), the admin API's
 * listening sockets by configured name, the ticket keys, the routes. */
typedef struct sws_upgrade_state {
    pid_t old_pid;
    uint32_t backlog;
    sws_listen_set_t listen;         /* owned: addrs, fds (-1: taken or not yet received) */
    unsigned nadmin;
    char admin_names[SWS_UPGRADE_MAX_ADMIN][SWS_UPGRADE_ADMIN_NAME];
    int admin_fds[SWS_UPGRADE_MAX_ADMIN]; /* owned; -1: taken */
    sws_tickets_snapshot_t tickets;  /* key material: wiped by sws_upgrade_state_free */
    Sws__RouteSet *routes;           /* owned; NULL until decoded */
} sws_upgrade_state_t;

/* The blob for st (its listen layout, admin names, tickets; not its
 * descriptors) and routes, packed: *out malloc'd, *outlen its length.
 * 0, or -1 with a message in err. */
int sws_upgrade_blob_encode(const sws_upgrade_state_t *st, const uint8_t *routes,
                            size_t routes_len, uint8_t **out, size_t *outlen, char *err,
                            size_t errlen);

/* Fill st from a blob (its descriptors all -1, to come in FDS messages).
 * 0, or -1 with a message in err and st left empty (freeable). */
int sws_upgrade_blob_decode(const uint8_t *buf, size_t len, sws_upgrade_state_t *st, char *err,
                            size_t errlen);

/* Old side: send the STATE message and the FDS messages for st (the
 * caller's descriptors, not closed) with routes, on fd (non-blocking: a
 * peer that does not read fails the send with EAGAIN). 0, or -1 with err. */
int sws_upgrade_send_state(int fd, const sws_upgrade_state_t *st, const uint8_t *routes,
                           size_t routes_len, char *err, size_t errlen);

/* New side: receive everything sws_upgrade_send_state sent, waiting at
 * most timeout_ms in all. 0 and st filled, or -1 with err and st empty. */
int sws_upgrade_recv_state(int fd, int timeout_ms, sws_upgrade_state_t *st, char *err,
                           size_t errlen);

/* Wait at most timeout_ms for one message of any type: 1 and *m, 0 on
 * timeout, -1 with err (the peer gone: errno 0). */
struct sws_chan_msg;
int sws_upgrade_recv_one(int fd, int timeout_ms, struct sws_chan_msg *m, char *err,
                         size_t errlen);

/* New side: tell the old one why it gives up (best effort). */
void sws_upgrade_send_failed(int fd, const char *why);

/* The forked child whose exec failed: take what was handed off the queue
 * (closing its descriptors), then send why. A SOCK_SEQPACKET end closed
 * with unread messages resets its peer (ECONNRESET), which would lose why
 * on the old side's end before it reads it. */
void sws_upgrade_exec_failed(int fd, const char *why);

/* Close what st still owns, wipe its keys, free its routes; st is empty. */
void sws_upgrade_state_free(sws_upgrade_state_t *st);

/* The path to exec for an upgrade: argv0 made absolute with the working
 * directory when it has a '/', else looked up in PATH, and never with
 * symlinks resolved (replacing the file or the link at that path, then
 * SIGUSR2, runs the new build). malloc'd; NULL with err. */
char *sws_upgrade_binary_path(const char *argv0, char *err, size_t errlen);

/* Whether path is a regular file this process may execute: 0, or -1 with
 * err ("PATH: No such file or directory", "PATH: not executable (mode
 * 0644)"). Checked before the fork, so a wrong path is said as such, at
 * once, rather than as a child that "exited with status 127". */
int sws_upgrade_check_binary(const char *path, char *err, size_t errlen);

#endif
