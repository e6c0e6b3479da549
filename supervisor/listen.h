/*
 * Listening sockets, as the accept policy lays them out.
 *
 * The supervisor binds every listening socket before any worker starts and
 * keeps them for its whole life: a worker that dies and is restarted takes
 * the same sockets again, so a restart (and later a reload or a binary
 * upgrade, which hands the fds over) never resets an accept queue. Only a
 * fresh start binds; whoever takes sockets over (a restarted worker, a new
 * binary) inherits the fds and never calls sws_listen_open() for them.
 *
 * Layout: a set has `ngroups` groups of `naddrs` sockets, one socket per
 * configured address in each group. Group g's sockets are
 * fds[g * naddrs .. g * naddrs + naddrs - 1], in the order of the addresses.
 *   shared     one group; every worker accepts on the same sockets
 *              (registered with EPOLLEXCLUSIVE in the workers).
 *   reuseport  one group per worker, SO_REUSEPORT on every socket; the
 *              kernel hashes each new connection to one of them. Group 0's
 *              sockets bind before they set SO_REUSEPORT, so an address
 *              another process listens on (a second scalwsd, same user) is
 *              refused as with shared instead of joining its group.
 * The eBPF policies (ebpf/ebpf.h) use the reuseport layout and add a
 * REUSEPORT_SOCKARRAY whose slot a * 64 + i holds group i's socket for
 * address a, so worker index and group index are the same number.
 *
 * Sockets are non-blocking and close-on-exec; v6 sockets are IPV6_V6ONLY so
 * "[::]:80" and "0.0.0.0:80" can both be configured. Every socket has
 * SO_REUSEADDR (a restart does not wait for TIME_WAIT to clear), and
 * TCP_QUICKACK off, which accepted connections inherit: the first request
 * of a connection is acknowledged by its answer, not by a pure ACK first
 * (ADR 0068; set when possible, never a reason to fail).
 *
 * Caller: the supervisor; a worker child calls sws_listen_close_others()
 * right after fork. Not thread-safe.
 */
#ifndef SWS_SUPERVISOR_LISTEN_H
#define SWS_SUPERVISOR_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

typedef enum sws_accept_policy {
    SWS_ACCEPT_SHARED = 0,
    SWS_ACCEPT_REUSEPORT = 1,
} sws_accept_policy_t;

typedef struct sws_listen_addr {
    char name[80];              /* as configured ("127.0.0.1:8080"), for messages */
    struct sockaddr_storage ss; /* where to bind */
    socklen_t len;
} sws_listen_addr_t;

typedef struct sws_listen_set {
    sws_accept_policy_t policy;
    unsigned naddrs;
    unsigned ngroups;         /* 1 for shared, else one per worker */
    sws_listen_addr_t *addrs; /* naddrs, owned; ss is the bound address (port 0 resolved) */
    int *fds;                 /* ngroups * naddrs, owned; -1 once closed */
} sws_listen_set_t;

/* Bind and listen on every address for nworkers workers with the given
 * policy and backlog. 0, or -1 with a message in err ("bind
 * 127.0.0.1:8080: Address already in use") and nothing left open. */
int sws_listen_open(sws_listen_set_t *set, const sws_listen_addr_t *addrs, unsigned naddrs,
                    sws_accept_policy_t policy, unsigned nworkers, int backlog, char *err,
                    size_t errlen);

/* The naddrs sockets worker `index` accepts on (its group, or the one shared
 * group). The pointer stays valid until sws_listen_close(). */
const int *sws_listen_worker_fds(const sws_listen_set_t *set, unsigned index);

/* Whether worker sockets are shared by all workers (EPOLLEXCLUSIVE). */
static inline int sws_listen_is_shared(const sws_listen_set_t *set)
{
    return set->policy == SWS_ACCEPT_SHARED;
}

/* In worker `index`'s child: close the sockets of every other group, so a
 * dead worker's reuseport sockets are held by the supervisor alone. */
void sws_listen_close_others(sws_listen_set_t *set, unsigned index);

/* Close every socket and free the set. */
void sws_listen_close(sws_listen_set_t *set);

/* "shared", "reuseport": for logs. */
const char *sws_listen_policy_name(sws_accept_policy_t policy);

/* Parse a listen address: "127.0.0.1:8080", "[::1]:8080", "*:8080" or
 * ":8080" (all IPv4 addresses), "localhost:8080" (resolved once, first
 * address). The forms and their refusals are those of a member address
 * (shm/routeset_check.h, sws_routeset_address_problem: one parser), plus
 * the two for every address. 0, or -1 with a message in err ("bad address
 * \"x\": ..."). Used by the config reader (to check) and by the
 * supervisor (to bind). */
int sws_listen_parse_address(const char *text, struct sockaddr_storage *ss, unsigned *sslen,
                             char *err, size_t errlen);

/* Whether this host has the address of ss (its port ignored): a bind to
 * port 0 of it, closed at once. A running server on the same port does not
 * make it fail, so `scalwsd -t` and a reload can ask it; "Address already
 * in use" is only seen by the start's own bind. 0, or -1 with the reason
 * in err ("10.9.9.9 is not an address of this host (bind: ...)"). */
int sws_listen_check_local(const struct sockaddr_storage *ss, unsigned sslen, char *err,
                           size_t errlen);

/* "127.0.0.1:8080", "[::1]:8080" for a bound address. */
void sws_listen_format(const struct sockaddr_storage *ss, char *buf, size_t len);

#endif
