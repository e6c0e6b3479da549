#include "ebpf/ebpf.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/err.h"
#include "core/log.h"
#include "ebpf/accept.skel.h"

#ifndef SO_ATTACH_REUSEPORT_EBPF
#define SO_ATTACH_REUSEPORT_EBPF 52
#endif
#ifndef SO_DETACH_REUSEPORT_BPF
#define SO_DETACH_REUSEPORT_BPF 68
#endif

_Static_assert(sizeof(struct sws_ebpf_worker) == 64, "a worker record is one cache line");
_Static_assert(SWS_EBPF_MAX_WORKERS <= 64, "sws_ebpf_t.parked has a bit per worker");

const char *sws_ebpf_policy_name(enum sws_ebpf_policy policy)
{
    switch (policy) {
    case SWS_EBPF_HASH:
        return "hash";
    case SWS_EBPF_LEAST_LOADED:
        return "least-loaded";
    case SWS_EBPF_FOUNTAIN:
        return "fountain";
    case SWS_EBPF_CPU:
        return "cpu";
    }
    return "unknown";
}

/* libbpf's own messages (the verifier's log among them) are for whoever
 * debugs the program: the caller reports the one reason that counts. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    (void)level;
    if (sws_log_get_level() <= SWS_LOG_DEBUG)
        sws_logv(SWS_LOG_DEBUG, fmt, ap);
    return 0;
}

/* Open and load the skeleton with room for nsocks sockets. */
static struct sws_accept *load(unsigned nsocks, char *err, size_t errlen)
{
    libbpf_set_print(libbpf_print);
    struct sws_accept *skel = sws_accept__open();
    if (skel == NULL) {
        sws_errf(err, errlen, "eBPF program could not be opened (%s)", strerror(errno));
        return NULL;
    }
    int rc = bpf_map__set_max_entries(skel->maps.sws_socks, nsocks);
    if (rc == 0)
        rc = sws_accept__load(skel);
    if (rc != 0) {
        sws_accept__destroy(skel);
        sws_errf(err, errlen, "eBPF program could not be loaded (%s)", strerror(-rc));
        return NULL;
    }
    return skel;
}

int sws_ebpf_probe(char *err, size_t errlen)
{
    struct sws_accept *skel = load(SWS_EBPF_MAX_WORKERS, err, errlen);
    if (skel == NULL)
        return -1;
    sws_accept__destroy(skel);
    return 0;
}

static void group_key(const sws_listen_addr_t *a, struct sws_ebpf_group *g)
{
    memset(g, 0, sizeof(*g));
    g->family = a->ss.ss_family;
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&a->ss;
        g->port = ntohs(sin6->sin6_port);
        memcpy(g->addr, &sin6->sin6_addr, sizeof(g->addr));
    } else {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)&a->ss;
        g->port = ntohs(sin->sin_port);
        g->addr[0] = sin->sin_addr.s_addr;
    }
}

/* Socket of worker i for address a. */
static int sock_of(const sws_ebpf_t *e, unsigned i, unsigned a)
{
    return e->listen->fds[i * e->listen->naddrs + a];
}

static int put_socks(const sws_ebpf_t *e, unsigned i, char *err, size_t errlen)
{
    int map = bpf_map__fd(e->skel->maps.sws_socks);
    for (unsigned a = 0; a < e->listen->naddrs; a++) {
        uint32_t key = a * SWS_EBPF_MAX_WORKERS + i;
        uint64_t fd = (uint64_t)sock_of(e, i, a);
        if (bpf_map_update_elem(map, &key, &fd, BPF_ANY) < 0)
            return sws_errf(err, errlen, "socket array, worker %u, %s: %s", i,
                            e->listen->addrs[a].name, strerror(errno));
    }
    return 0;
}

static void detach(const sws_ebpf_t *e, unsigned ngroups)
{
    for (unsigned a = 0; a < ngroups; a++) {
        int zero = 0;
        setsockopt(sock_of(e, 0, a), SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero));
    }
}

int sws_ebpf_prepare(sws_ebpf_t *e, const sws_listen_set_t *set, int backlog,
                  enum sws_ebpf_policy policy, unsigned fountain_threshold, const int *cpus,
                  char *err, size_t errlen)
{
    memset(e, 0, sizeof(*e));
    if (set->policy != SWS_ACCEPT_REUSEPORT)
        return sws_errf(err, errlen, "the eBPF policies need one socket per worker");
    if (set->ngroups > SWS_EBPF_MAX_WORKERS)
        return sws_errf(err, errlen, "%u workers, the eBPF policies place at most %u",
                        set->ngroups, SWS_EBPF_MAX_WORKERS);
    if (set->naddrs > SWS_EBPF_MAX_GROUPS)
        return sws_errf(err, errlen, "%u listen addresses, the eBPF policies take at most %u",
                        set->naddrs, SWS_EBPF_MAX_GROUPS);
    e->listen = set;
    e->backlog = backlog;
    e->skel = load(set->naddrs * SWS_EBPF_MAX_WORKERS, err, errlen);
    if (e->skel == NULL)
        return -1;

    /* The map's pages: one entry, its value rounded up to whole pages. */
    long page = sysconf(_SC_PAGESIZE);
    e->state_len = (sizeof(struct sws_ebpf_state) + (size_t)page - 1) & ~((size_t)page - 1);
    void *mem = mmap(NULL, e->state_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                     bpf_map__fd(e->skel->maps.sws_load), 0);
    if (mem == MAP_FAILED) {
        sws_errf(err, errlen, "eBPF load map could not be mapped (%s)", strerror(errno));
        e->state = NULL;
        sws_ebpf_close(e);
        return -1;
    }
    e->state = mem;
    struct sws_ebpf_config *c = &e->state->config;
    c->policy = policy;
    c->fountain_threshold = fountain_threshold;
    c->nworkers = set->ngroups;
    c->ngroups = set->naddrs;
    for (unsigned a = 0; a < set->naddrs; a++)
        group_key(&set->addrs[a], &c->groups[a]);
    for (unsigned i = 0; i < set->ngroups; i++)
        e->state->w[i].cpu = cpus[i] >= 0 ? (uint32_t)cpus[i] : ~0u;
    return 0;
}

int sws_ebpf_attach(sws_ebpf_t *e, char *err, size_t errlen)
{
    const sws_listen_set_t *set = e->listen;
    for (unsigned i = 0; i < set->ngroups; i++) {
        if (put_socks(e, i, err, errlen) < 0) {
            sws_ebpf_close(e);
            return -1;
        }
    }
    int prog = bpf_program__fd(e->skel->progs.sws_select);
    for (unsigned a = 0; a < set->naddrs; a++) {
        if (setsockopt(sock_of(e, 0, a), SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog,
                       sizeof(prog)) < 0) {
            sws_errf(err, errlen, "eBPF program could not be attached to %s (%s)",
                     set->addrs[a].name, strerror(errno));
            detach(e, a);
            sws_ebpf_close(e);
            return -1;
        }
    }
    e->attached = 1;
    return 0;
}

int sws_ebpf_open(sws_ebpf_t *e, const sws_listen_set_t *set, int backlog,
                  enum sws_ebpf_policy policy, unsigned fountain_threshold, const int *cpus,
                  char *err, size_t errlen)
{
    if (sws_ebpf_prepare(e, set, backlog, policy, fountain_threshold, cpus, err, errlen) < 0)
        return -1;
    return sws_ebpf_attach(e, err, errlen);
}

void sws_ebpf_hand_over(sws_ebpf_t *e)
{
    if (e->skel == NULL)
        return;
    /* A socket sits in one socket array at a time: the new binary's can
     * take these only once this one lets go. Meanwhile the program, still
     * attached, finds no entry and the kernel's hash places the SYN. */
    int map = bpf_map__fd(e->skel->maps.sws_socks);
    for (unsigned i = 0; i < e->listen->ngroups; i++) {
        for (unsigned a = 0; a < e->listen->naddrs; a++) {
            uint32_t key = a * SWS_EBPF_MAX_WORKERS + i;
            bpf_map_delete_elem(map, &key);
        }
    }
    e->attached = 0;
    e->parked = 0;
}

void sws_ebpf_set_fountain_threshold(sws_ebpf_t *e, unsigned percent)
{
    if (e->state != NULL)
        e->state->config.fountain_threshold = percent;
}

int sws_ebpf_set_policy(sws_ebpf_t *e, enum sws_ebpf_policy policy)
{
    if (e->state == NULL)
        return -1;
    e->state->config.policy = policy;
    return 0;
}

struct sws_ebpf_worker *sws_ebpf_worker(const sws_ebpf_t *e, unsigned i)
{
    if (e->state == NULL || i >= e->state->config.nworkers)
        return NULL;
    return &e->state->w[i];
}

int sws_ebpf_park(sws_ebpf_t *e, unsigned i, char *err, size_t errlen)
{
    struct sws_ebpf_worker *w = sws_ebpf_worker(e, i);
    if (w == NULL)
        return 0;
    w->down = 1;
    /* Not attached (yet, or any more): the sockets are another binary's
     * to serve; shutting one down would move its queue under it. */
    if (!e->attached)
        return 0;
    unsigned out = (unsigned)__builtin_popcountll(e->parked);
    if (sws_ebpf_is_parked(e, i) || out + 1 >= e->listen->ngroups)
        return 0;
    /* Migration runs inside shutdown(): when it returns, the queue has
     * moved (or, with no eligible worker, been hashed over the others). */
    for (unsigned a = 0; a < e->listen->naddrs; a++) {
        if (shutdown(sock_of(e, i, a), SHUT_RD) < 0)
            return sws_errf(err, errlen, "shutdown %s of worker %u: %s",
                            e->listen->addrs[a].name, i, strerror(errno));
    }
    e->parked |= 1ull << i;
    return 0;
}

int sws_ebpf_unpark(sws_ebpf_t *e, unsigned i, int fresh, char *err, size_t errlen)
{
    struct sws_ebpf_worker *w = sws_ebpf_worker(e, i);
    if (w == NULL)
        return 0;
    if (e->attached && sws_ebpf_is_parked(e, i)) {
        for (unsigned a = 0; a < e->listen->naddrs; a++) {
            if (listen(sock_of(e, i, a), e->backlog) < 0)
                return sws_errf(err, errlen, "listen %s of worker %u again: %s",
                                e->listen->addrs[a].name, i, strerror(errno));
        }
        /* A shut-down listener left the socket array; listening again does
         * not put it back. */
        if (put_socks(e, i, err, errlen) < 0)
            return -1;
        e->parked &= ~(1ull << i);
    }
    if (fresh) {
        /* The old process is gone: nobody else writes its fields now. */
        w->heartbeat_ms = 0;
        w->settled = w->selected;
        w->live = 0;
        w->inflight = 0;
        w->busy_pct = 0;
        w->draining = 0;
    }
    w->down = 0;
    return 0;
}

void sws_ebpf_forget(sws_ebpf_t *e)
{
    if (e->skel == NULL)
        return;
    /* Not sws_accept__destroy(): that would unmap the load map too. */
    close(bpf_program__fd(e->skel->progs.sws_select));
    close(bpf_map__fd(e->skel->maps.sws_socks));
    close(bpf_map__fd(e->skel->maps.sws_load));
    e->skel = NULL;
}

void sws_ebpf_close(sws_ebpf_t *e)
{
    /* Never attached, or handed over: the groups' program is another
     * binary's. */
    if (e->skel != NULL && e->listen != NULL && e->state != NULL && e->attached)
        detach(e, e->listen->naddrs);
    if (e->state != NULL)
        munmap(e->state, e->state_len);
    if (e->skel != NULL)
        sws_accept__destroy(e->skel);
    memset(e, 0, sizeof(*e));
}
