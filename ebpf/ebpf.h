/*
 * The eBPF accept policies, userspace side: load the sk_reuseport program
 * (ebpf/accept.bpf.c, through the skeleton bpftool generates at build
 * time), fill its socket array, attach it to each address's reuseport
 * group, and map the load map (ebpf/policy.h) for the supervisor and the
 * workers.
 *
 * Ownership: the supervisor owns an sws_ebpf_t for its whole life, as it
 * owns the listening sockets; the listen set must use the reuseport layout
 * (one socket per worker per address, supervisor/listen.h) and outlive it.
 * Workers inherit the load map's mapping at fork (MAP_SHARED) and write
 * their own record with plain stores (worker/load.c); the child calls
 * sws_ebpf_forget() so it holds no BPF descriptor.
 *
 * Parking (ADR 0010): a worker that is dead or stuck has its listening
 * sockets shut down (shutdown(SHUT_RD) on a listener), which makes the
 * kernel hand the connections queued on them to the program again
 * (BPF_SK_REUSEPORT_SELECT_OR_MIGRATE), which places them on live workers.
 * Unparking listens again on the same sockets and puts them back into the
 * socket array.
 *
 * Caller: the supervisor only (sws_ebpf_probe also from `scalwsd -t`).
 * Not thread-safe. Needs CAP_BPF and CAP_NET_ADMIN (or CAP_SYS_ADMIN, or
 * root); without them sws_ebpf_open fails and the caller falls back to
 * reuseport.
 */
#ifndef SWS_EBPF_EBPF_H
#define SWS_EBPF_EBPF_H

#include <stddef.h>

#include "ebpf/policy.h"
#include "supervisor/listen.h"

struct sws_accept; /* the skeleton (build/gen/ebpf/accept.skel.h) */

typedef struct sws_ebpf {
    struct sws_accept *skel;      /* NULL: not loaded */
    struct sws_ebpf_state *state; /* the load map, mapped MAP_SHARED */
    size_t state_len;
    const sws_listen_set_t *listen; /* borrowed */
    int backlog;                  /* for listen() again when unparking */
    unsigned long long parked;    /* bit i: worker i's sockets are shut down */
    int attached;                 /* the program is on the groups (sws_ebpf_attach) and the
                                   * sockets ours to park; 0 before, and after
                                   * sws_ebpf_hand_over */
} sws_ebpf_t;

/* "hash", "least-loaded", "fountain", "cpu" for logs. */
const char *sws_ebpf_policy_name(enum sws_ebpf_policy policy);

/* Load the program and its maps, then throw them away: whether
 * sws_ebpf_open() could load here ("scalwsd -t"). 0, or -1 with the
 * reason in err ("eBPF program could not be loaded (Operation not
 * permitted)"). */
int sws_ebpf_probe(char *err, size_t errlen);

/* Load, fill the socket array with every socket of set, write the config
 * record (policy, fountain_threshold percent, cpus[i] = the CPU worker i is
 * pinned to or -1) and attach the program to every group. Every worker
 * starts out eligible only once it beats (policy.h). 0, or -1 with the
 * reason in err and nothing left attached or loaded. */
int sws_ebpf_open(sws_ebpf_t *e, const sws_listen_set_t *set, int backlog,
                  enum sws_ebpf_policy policy, unsigned fountain_threshold, const int *cpus,
                  char *err, size_t errlen);

/* sws_ebpf_open in two steps, for a binary upgrade's new generation
 * (docs/adr/0046-binary-upgrade.md): prepare loads the program and the load
 * map (workers can be forked with their records) and touches no socket;
 * attach fills the socket array and attaches the program to every group,
 * replacing the old binary's, once that one has called sws_ebpf_hand_over.
 * Each: 0, or -1 with the reason in err and nothing left loaded. */
int sws_ebpf_prepare(sws_ebpf_t *e, const sws_listen_set_t *set, int backlog,
                  enum sws_ebpf_policy policy, unsigned fountain_threshold, const int *cpus,
                  char *err, size_t errlen);
int sws_ebpf_attach(sws_ebpf_t *e, char *err, size_t errlen);

/* The old binary at an upgrade's GO: empty the socket array so the new
 * binary's can take the sockets, and from then on never park, unpark or
 * detach (the sockets and the groups' program are the new binary's). Park
 * and unpark before sws_ebpf_attach likewise only mark the record. */
void sws_ebpf_hand_over(sws_ebpf_t *e);

/* fountain's threshold from now on (a reload); nothing when not loaded. */
void sws_ebpf_set_fountain_threshold(sws_ebpf_t *e, unsigned percent);

/* Another of the four policies from the next SYN on (a reload): the
 * program reads config.policy at each one, the sockets and the records
 * stay. 0, or -1 when e is not loaded (nothing changes). */
int sws_ebpf_set_policy(sws_ebpf_t *e, enum sws_ebpf_policy policy);

/* Worker i's record in the load map (NULL when e is not loaded). */
struct sws_ebpf_worker *sws_ebpf_worker(const sws_ebpf_t *e, unsigned i);

/* Mark worker i as out (no new connections) and shut its sockets down so
 * that their queues migrate to the others. Never parks the last worker that
 * is not parked (nowhere to migrate to): then it is only marked out.
 * 0, or -1 with a message in err (the worker stays marked out). */
int sws_ebpf_park(sws_ebpf_t *e, unsigned i, char *err, size_t errlen);

/* Undo sws_ebpf_park: listen again, refill the socket array, clear the
 * mark. fresh: a new process takes the slot, so its record starts over
 * (no heartbeat yet, nothing queued). 0, or -1 with a message in err. */
int sws_ebpf_unpark(sws_ebpf_t *e, unsigned i, int fresh, char *err, size_t errlen);

static inline int sws_ebpf_is_parked(const sws_ebpf_t *e, unsigned i)
{
    return (e->parked >> i) & 1u;
}

/* In a worker child right after fork: close the BPF descriptors, keep the
 * load map's mapping. */
void sws_ebpf_forget(sws_ebpf_t *e);

/* Detach from every group, unmap, unload. Safe on a zeroed sws_ebpf_t. */
void sws_ebpf_close(sws_ebpf_t *e);

#endif
