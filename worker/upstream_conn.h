/*
 * Connections to upstream members, and the per-worker keep-alive pool of
 * idle ones (issue 7; the proxy action, worker/proxy.h, is their user).
 *
 * Ownership: the worker context (worker/ctx.h) embeds one
 * sws_upstream_set_t for the life of the worker. The set owns every idle
 * connection; a connection handed out by sws_upstream_get() belongs to its
 * caller until it gives it back with sws_upstream_put() (reusable: it goes
 * to the idle pool) or sws_upstream_close(). Everything runs in the
 * worker's one thread.
 *
 * Addresses are socket addresses, made from what the table parsed once
 * (shm/table.h: sws_member_t's family, ip, port; worker/upstream_pools.c).
 * Names are resolved by the supervisor when it reads the configuration,
 * so a worker never blocks on DNS and every worker connects to the same
 * addresses.
 *
 * Idle pool: keyed by the member's stable id (shm/table.h), so idle
 * connections survive table generations; at most `keepalive` per member
 * (the oldest is closed when one more comes back). An idle connection is
 * watched: any event on it (the upstream closed it, or sent bytes nobody
 * asked for) or its idle timer closes it, and one whose FIN was reported
 * while it was held never joins the pool. So a connection handed out again
 * costs no system call: only when the loop may still hold an event for it
 * (later in the batch being dispatched, or a full batch) does a MSG_PEEK
 * read check that no FIN or byte arrived, so that a request is not written
 * to a connection the upstream has already closed (docs/adr/0021).
 *
 * Timers: one per connection: connect, send (between two writes that made
 * progress), read (between two reads that brought bytes), idle. A timer
 * queue has one duration (core/loop.h, ADR 0003), and pools configure
 * theirs (sws_upstream_conf_t), so the set keeps one queue per distinct
 * duration, made when a connection first needs it and kept for the life
 * of the set (the loop cannot forget a queue): at most
 * SWS_UPSTREAM_MAX_QUEUES; a duration beyond them uses the nearest longer
 * one kept, else the longest (ADR 0017).
 *
 * Socket options of a new connection: TCP_NODELAY; and, in the clear,
 * TCP_QUICKACK off from before the connect to the first write, so that
 * the handshake's last ACK goes with the request written as soon as the
 * connect is done, and the answer is acknowledged at once again, as on any
 * new connection (ADR 0068).
 *
 * I/O: the fd is registered once, edge-triggered for IN|OUT|RDHUP, so the
 * user reads and writes until EAGAIN and keeps track of what it has not
 * drained (there is no new edge for bytes left in the socket). Every read
 * and write of the user goes through sws_upstream_read/write, which speak
 * TLS on a connection to an https pool (worker/upstream_tls.h, ADR 0030)
 * with the same contract; nothing else touches the fd's bytes (no splice,
 * no MSG_PEEK of the user's: sws_upstream_drained).
 *
 * TLS: a connection made with a sws_upstream_tls_t stays `connecting`
 * through its handshake (under the connect timer); the member's last
 * resumable session is kept per member id for the next connection made
 * with the same SSL_CTX. An idle connection is handed out only to a holder
 * that wants the same: TLS or not.
 */
#ifndef SWS_WORKER_UPSTREAM_CONN_H
#define SWS_WORKER_UPSTREAM_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/loop.h"
#include "core/str.h"
#include "worker/upstream_tls.h"

#define SWS_UPSTREAM_KEEPALIVE_DEFAULT 32u
#define SWS_UPSTREAM_CONNECT_TIMEOUT_MS 5000u
#define SWS_UPSTREAM_SEND_TIMEOUT_MS 60000u
#define SWS_UPSTREAM_READ_TIMEOUT_MS 60000u
#define SWS_UPSTREAM_IDLE_TIMEOUT_MS 60000u

typedef struct sws_upstream_conn sws_upstream_conn_t;
typedef struct sws_upstream_set sws_upstream_set_t;

/* A member's socket address (upstream_pools.c makes it from the table's). */
typedef struct sws_upstream_addr {
    struct sockaddr_storage sa;
    socklen_t len;
} sws_upstream_addr_t;

enum sws_upstream_timer {
    SWS_UPSTREAM_T_CONNECT = 0,
    SWS_UPSTREAM_T_SEND,
    SWS_UPSTREAM_T_READ,
    SWS_UPSTREAM_T_IDLE,
    SWS_UPSTREAM_T_COUNT,
};

/* A pool's settings for a connection (its holder's; an idle connection
 * keeps its last holder's). Zero-initialised: keepalive 0, timeouts 0,
 * which sws_upstream_get never hands out: it starts from the defaults. */
typedef struct sws_upstream_conf {
    uint32_t keepalive;                      /* idle connections per member */
    uint32_t timeout_ms[SWS_UPSTREAM_T_COUNT]; /* by enum sws_upstream_timer */
} sws_upstream_conf_t;

extern const sws_upstream_conf_t sws_upstream_conf_default;

/* Distinct timer durations a set keeps queues for. */
#define SWS_UPSTREAM_MAX_QUEUES 16u

/* The user's callbacks for a connection it holds. */
typedef struct sws_upstream_ops {
    void (*on_event)(sws_upstream_conn_t *u, uint32_t events); /* EPOLL* bits */
    void (*on_timeout)(sws_upstream_conn_t *u, enum sws_upstream_timer which);
} sws_upstream_ops_t;

struct sws_upstream_conn {
    sws_io_t io;
    sws_timer_t timer;
    uint8_t timer_which;           /* enum sws_upstream_timer of the armed timer */
    uint8_t connecting;            /* connect() or the TLS handshake in progress */
    uint8_t handshaking;           /* ... connected, the TLS handshake in progress */
    uint8_t closed;                /* fd closed; freed with the set's closed list */
    uint8_t peer_closed;           /* an event said FIN, HUP or error: never reused */
    uint8_t reused;                /* handed out from the idle pool: a FIN that came
                                    * after the loop's last look is not known (ADR 0021) */
    uint8_t ack_held;              /* quick ACKs off until the first write (ADR 0068) */
    sws_upstream_set_t *set;
    uint64_t member_id;
    SSL *ssl;                      /* NULL: plain TCP */
    sws_upstream_conf_t conf;      /* the holder's pool's: sws_upstream_configure */
    sws_timer_queue_t *q[SWS_UPSTREAM_T_COUNT]; /* by timer: the queue last armed in; NULL: none */
    const sws_upstream_ops_t *ops; /* the holder's; NULL while idle */
    void *data;                    /* the holder's */
    sws_upstream_conn_t *prev, *next; /* idle list of its member; `next`: the closed list */
    struct sws_upstream_bucket *bucket; /* while idle */
};

/* The idle connections of one member. */
typedef struct sws_upstream_bucket {
    uint64_t member_id;
    sws_upstream_conn_t *head, *tail; /* oldest first */
    unsigned n;
    SSL_SESSION *session;          /* the last resumable one; NULL: none */
    SSL_CTX *session_ctx;          /* ... made under this context (a reference) */
    struct sws_upstream_bucket *next;
} sws_upstream_bucket_t;

struct sws_upstream_set {
    sws_loop_t *loop;
    sws_timer_queue_t q[SWS_UPSTREAM_MAX_QUEUES]; /* by duration, see the top */
    unsigned nq;
    sws_upstream_bucket_t *buckets; /* one per member that had an idle connection */
    unsigned nidle, nopen;         /* idle; all open (held and idle) */
    sws_upstream_conn_t *closed;   /* closed in this iteration, freed by `reap` */
    sws_defer_t reap;
    /* Told by sws_upstream_close_idle, after the set's own idle ones: the
     * HTTP/2 client's (worker/upstream_h2.h) idle connections, which it
     * holds rather than this pool. NULL: none. */
    void (*close_idle_hook)(void *arg, uint64_t member_id);
    void *close_idle_arg;
};

/* Zero-initialised memory is an empty set; init registers the timer
 * queues of the defaults above. Once per worker. */
void sws_upstream_set_init(sws_upstream_set_t *s, sws_loop_t *loop);

/* Close every idle connection, free the buckets and what was closed (the
 * worker stops, after its client connections, so after every holder
 * closed what it held). */
void sws_upstream_set_close(sws_upstream_set_t *s);

/* An idle connection to member_id that is still open, or a new one whose
 * non-blocking connect to addr has begun (u->connecting: wait for
 * EPOLLOUT, then sws_upstream_connected()). ops/data receive its events
 * from now on. NULL with err set when no socket could be made or connect
 * failed at once (ECONNREFUSED on loopback can come that way). */
sws_upstream_conn_t *sws_upstream_get(sws_upstream_set_t *s, uint64_t member_id,
                                      const sws_upstream_addr_t *addr,
                                      const sws_upstream_ops_t *ops, void *data, char *err,
                                      size_t errlen);

/* As sws_upstream_get; tls NULL is a plain connection, else the new
 * connection's TLS handshake begins once it is connected (and an idle one
 * is a TLS one). A handshake that fails at once is a NULL with err. */
sws_upstream_conn_t *sws_upstream_get_tls(sws_upstream_set_t *s, uint64_t member_id,
                                          const sws_upstream_addr_t *addr,
                                          const sws_upstream_tls_t *tls,
                                          const sws_upstream_ops_t *ops, void *data, char *err,
                                          size_t errlen);

/* As sws_upstream_get_tls, but always a new connection, never an idle one:
 * for a request that met a pooled connection the member had closed, whose
 * other idle connections may be as old. */
sws_upstream_conn_t *sws_upstream_open(sws_upstream_set_t *s, uint64_t member_id,
                                       const sws_upstream_addr_t *addr,
                                       const sws_upstream_tls_t *tls,
                                       const sws_upstream_ops_t *ops, void *data, char *err,
                                       size_t errlen);

/* After EPOLLOUT on a connecting socket, or any event while u->handshaking:
 * 0 when connected and, for TLS, the handshake done (connecting is
 * cleared); 1 while the TLS handshake waits for the member; -1 with err
 * set (the connect or the handshake failed, with OpenSSL's reason). */
int sws_upstream_connected(sws_upstream_conn_t *u, char *err, size_t errlen);

/* The user's reads and writes: recv(2)/send(2) semantics, TLS or not
 * (upstream_tls.h: a short read means the socket is drained). */
ssize_t sws_upstream_read(sws_upstream_conn_t *u, void *buf, size_t len);
ssize_t sws_upstream_write(sws_upstream_conn_t *u, const void *buf, size_t len);

/* Pass a FIN on (a tunnel's half-close): over TLS a close_notify first,
 * then shutdown(SHUT_WR), so the member reads an orderly end. 0, or -1
 * with errno. */
int sws_upstream_shutdown_write(sws_upstream_conn_t *u);

/* Whether bytes may move by splice(2) from the socket: not over TLS. */
static inline int sws_upstream_can_splice(const sws_upstream_conn_t *u)
{
    return u->ssl == NULL;
}

/* Apply the holder's pool settings to a connection it holds (its timers
 * from the next arm on; its idle pool's size when it is given back). */
void sws_upstream_configure(sws_upstream_conn_t *u, const sws_upstream_conf_t *conf);

/* Close the idle connections of a member and forget its TLS session
 * (removed from the table: they would only wait for their idle timeout);
 * then the close_idle_hook's. */
void sws_upstream_close_idle(sws_upstream_set_t *s, uint64_t member_id);

/* Arm (or re-arm) the connection's one timer for `which`; disarm. */
void sws_upstream_arm(sws_upstream_conn_t *u, enum sws_upstream_timer which);
void sws_upstream_disarm(sws_upstream_conn_t *u);

/* Give back a connection after a complete exchange that left it usable
 * (keep-alive, nothing unread: the holder read until a read returned less
 * than it asked for, so that any byte coming later brings an event): it
 * joins its member's idle pool, or is
 * closed when the pool is full (the oldest idle one goes first while
 * more than conf.keepalive are idle). */
void sws_upstream_put(sws_upstream_conn_t *u);

/* Keep the session of a TLS connection the holder keeps open (an HTTP/2
 * connection never goes back to the idle pool), as sws_upstream_put
 * does, for the member's next new connection. Nothing for plain TCP, or
 * before the member sent a resumable session (TLS 1.3 tickets come after
 * the handshake). */
void sws_upstream_keep_session(sws_upstream_conn_t *u);

/* Whether nothing (no byte, no FIN) waits in the socket now, nor (TLS)
 * decrypted in the SSL: one MSG_PEEK read, for a holder whose last read
 * filled its buffer before it gives the connection back. */
int sws_upstream_drained(sws_upstream_conn_t *u);

/* Take a connected, non-blocking fd as an idle connection to member_id
 * (tests and the fuzz target: one end of a socketpair stands for an
 * upstream). 0, or -1 (fd closed). */
int sws_upstream_adopt(sws_upstream_set_t *s, uint64_t member_id, int fd);

/* Close a held connection now; its memory is freed later in this loop
 * iteration (after the events already collected: one may name it), so
 * the caller drops its pointer at once. */
void sws_upstream_close(sws_upstream_conn_t *u);

#endif
