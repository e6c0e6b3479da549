/*
 * The eBPF accept policies: the load map's layout and the choice of a worker
 * for a new connection, in plain C.
 *
 * Included by the sk_reuseport program (ebpf/accept.bpf.c, compiled with
 * clang -target bpf against vmlinux.h) and by userspace (ebpf/ebpf.c, the
 * worker's worker/load.c, test/unit/test_ebpf_policy.c), so the choice the
 * kernel makes at each SYN is the one the unit tests check. Hence: no libc,
 * no division, every walk over the slots through SWS_EBPF_SCAN (below),
 * everything static inline.
 *
 * The load map is one BPF_F_MMAPABLE array entry holding a
 * struct sws_ebpf_state; the supervisor maps it MAP_SHARED and workers
 * inherit the mapping at fork. Who writes what (one writer per field, so
 * plain stores suffice; readers tolerate a torn view of other workers):
 *   config             the supervisor, before the first worker starts
 *   w[i].cpu, .down    the supervisor (pinning; dead or parked, ADR 0010)
 *   w[i].selected      the program, with an atomic add per connection it
 *                      places on slot i (a SYN, or a migrated connection)
 *   everything else    worker i (worker/load.c)
 *
 * A worker's load at the moment of a SYN is live + queued, queued being
 * selected - settled: the connections given to it that it has not taken
 * yet. So a burst counts before any worker wakes up, and fountain spills
 * over within the burst (the seeds' fountain counted only connections
 * from before the current window and piled a burst onto three loops).
 */
#ifndef SWS_EBPF_POLICY_H
#define SWS_EBPF_POLICY_H

#ifndef __bpf__
#include <linux/types.h>
#endif

#define SWS_EBPF_MAX_WORKERS 64
#define SWS_EBPF_MAX_GROUPS 8      /* listen addresses: one reuseport group each */
#define SWS_EBPF_STALE_MS 1000     /* heartbeat older than this: stuck */
#define SWS_EBPF_FOUNTAIN_MIN 8    /* fountain: a worker below this many is never full */
#define SWS_EBPF_QUEUED_MAX 65535u /* clamp for a miscounted queue (ADR 0009) */
/* least-loaded: an awake worker within least + least/8 + 1 connections
 * beats a sleeping lighter one (ADR 0032). */
#define SWS_EBPF_AWAKE_SHIFT 3

/* Values of sws_ebpf_config.policy; 0 is never loaded. */
enum sws_ebpf_policy {
    SWS_EBPF_HASH = 1,
    SWS_EBPF_LEAST_LOADED = 2,
    SWS_EBPF_FOUNTAIN = 3,
    SWS_EBPF_CPU = 4,
};

/* One listen address: the program finds the group of the incoming SYN by
 * the listener's family, port and address (host byte order for the port,
 * as struct bpf_sock gives it; addresses as the kernel stores them). */
struct sws_ebpf_group {
    __u32 family;
    __u32 port;
    __u32 addr[4]; /* IPv4 in addr[0]; IPv6 in all four */
};

struct sws_ebpf_config {
    __u32 policy;             /* enum sws_ebpf_policy */
    __u32 fountain_threshold; /* percent busy: a worker above it is full */
    __u32 nworkers;           /* slots 0..nworkers-1 are in use */
    __u32 ngroups;
    struct sws_ebpf_group groups[SWS_EBPF_MAX_GROUPS];
};

/* One worker's record: a cache line of its own, so a worker's stores do
 * not bounce its neighbours' lines. */
struct sws_ebpf_worker {
    __u64 heartbeat_ms; /* its loop's monotonic clock (ms) at its last turn; 0: none */
    __u64 selected;     /* program: connections placed on this slot */
    __u64 settled;      /* worker: how much of selected it has taken */
    __u64 accepted;     /* worker: connections accepted since it started */
    __u32 live;         /* worker: connections open */
    __u32 inflight;     /* worker: requests being answered */
    __u32 busy_pct;     /* worker: share of the last interval spent working */
    __u32 draining;     /* worker: graceful stop, takes nothing new */
    __u32 cpu;          /* supervisor: the CPU it is pinned to; ~0: none */
    __u32 down;         /* supervisor: dead, or parked because stuck */
    __u32 asleep;       /* worker: 1 while in epoll_wait (set before, cleared after) */
} __attribute__((aligned(64)));

struct sws_ebpf_state {
    struct sws_ebpf_config config;
    struct sws_ebpf_worker w[SWS_EBPF_MAX_WORKERS];
};

/* Whether w may get a new connection at now_ms: started, not stuck, not
 * draining, not marked down. The heartbeat comes from a coarse clock and
 * now_ms from the program's, so either may be a few ms ahead: only a
 * heartbeat older than SWS_EBPF_STALE_MS counts. */
static inline int sws_ebpf_eligible(const struct sws_ebpf_worker *w, __u64 now_ms)
{
    __u64 hb = w->heartbeat_ms;
    return (w->down == 0) & (w->draining == 0) & (hb != 0) & (now_ms <= hb + SWS_EBPF_STALE_MS);
}

/* Connections placed on w and not taken yet (clamped: a handshake that
 * never completed, or a resync racing a SYN, may leave it off by a few). */
static inline __u32 sws_ebpf_queued(const struct sws_ebpf_worker *w)
{
    __u64 sel = w->selected, set = w->settled;
    if (sel <= set)
        return 0;
    return sel - set > SWS_EBPF_QUEUED_MAX ? SWS_EBPF_QUEUED_MAX : (__u32)(sel - set);
}

/* The load the policies compare: connections held or about to be. */
static inline __u32 sws_ebpf_load(const struct sws_ebpf_worker *w)
{
    return w->live + sws_ebpf_queued(w);
}

static inline __u32 sws_ebpf_nworkers(const struct sws_ebpf_state *s)
{
    __u32 n = s->config.nworkers;
    return n < SWS_EBPF_MAX_WORKERS ? n : SWS_EBPF_MAX_WORKERS;
}

/* Where the scan for this hash starts: the kernel's own scaling of a hash
 * onto n sockets (reciprocal_scale). */
static inline __u32 sws_ebpf_start(__u32 hash, __u32 n)
{
    return (__u32)(((__u64)hash * n) >> 32);
}

/* Every walk over the slots is a visit function called for slot 0, 1, ...
 * until it returns 1 or the slots run out: in the program through
 * bpf_loop(), whose callback the verifier checks once rather than once
 * per slot and per path (an open-coded loop over 64 slots with a few
 * branches each ran it out of its million steps); in userspace through a
 * plain loop. The visit's context carries the best candidate so far. */
struct sws_ebpf_scan {
    const struct sws_ebpf_state *s;
    __u64 now_ms;
    __u32 n;        /* slots in use */
    __u32 start;    /* ties go to the first slot from here on, wrapping */
    __u32 cpu;      /* only workers pinned there; ~0u: any */
    __u32 eligible; /* fountain: eligible workers */
    __u64 total;    /* fountain: their load */
    __u64 best;     /* sort key of the best so far, ending with its slot */
    __u64 best_awake; /* lightest: the same among workers not in epoll_wait */
};

#define SWS_EBPF_KEY_NONE (~0ull)

#ifdef __bpf__
#define SWS_EBPF_SCAN(visit, scan) bpf_loop(SWS_EBPF_MAX_WORKERS, visit, scan, 0)
#else
#define SWS_EBPF_SCAN(visit, scan)                                                                \
    do {                                                                                          \
        for (__u32 i_ = 0; i_ < SWS_EBPF_MAX_WORKERS && !visit(i_, scan); i_++)                  \
            ;                                                                                     \
    } while (0)
#endif

static inline void sws_ebpf_scan_init(struct sws_ebpf_scan *c, const struct sws_ebpf_state *s,
                                      __u32 hash, __u32 cpu, __u64 now_ms)
{
    c->s = s;
    c->now_ms = now_ms;
    c->n = sws_ebpf_nworkers(s);
    c->start = sws_ebpf_start(hash, c->n);
    c->cpu = cpu;
    c->eligible = 0;
    c->total = 0;
    c->best = SWS_EBPF_KEY_NONE;
    c->best_awake = SWS_EBPF_KEY_NONE;
}

/* Worker i if it is in use and eligible, else NULL. */
static inline const struct sws_ebpf_worker *sws_ebpf_scan_worker(const struct sws_ebpf_scan *c,
                                                                 __u32 i)
{
    if (i >= SWS_EBPF_MAX_WORKERS || i >= c->n)
        return 0;
    const struct sws_ebpf_worker *w = &c->s->w[i];
    return sws_ebpf_eligible(w, c->now_ms) ? w : 0;
}

/* Slots from start on, wrapping: 0 for start itself. */
static inline __u64 sws_ebpf_dist(const struct sws_ebpf_scan *c, __u32 i)
{
    return i >= c->start ? i - c->start : i + c->n - c->start;
}

static inline int sws_ebpf_key_slot(__u64 key)
{
    return key == SWS_EBPF_KEY_NONE ? -1 : (int)(key & (SWS_EBPF_MAX_WORKERS - 1));
}

/* lightest: fewest connections, then least busy, then the first from
 * `start` on, so that equal loads spread by the connection's hash instead
 * of all going to slot 0. load < 2^32 (live 32 bits, queued 16), busy
 * clamped below 2^7, distance and slot below 2^6. */
static inline __u64 sws_ebpf_light_key(const struct sws_ebpf_scan *c, const struct sws_ebpf_worker *w,
                                        __u64 load, __u32 i)
{
    __u64 busy = w->busy_pct > 127 ? 127 : w->busy_pct;
    return load << 19 | busy << 12 | sws_ebpf_dist(c, i) << 6 | i;
}

#define SWS_EBPF_KEY_LOAD(key) ((key) >> 19)

/* Among the workers pinned to c->cpu (any: ~0u), the lightest, and the
 * lightest of those not in epoll_wait: least-loaded chooses between the two
 * after this one walk, rather than walking again when the lightest sleeps. */
static inline long sws_ebpf_visit_lightest(__u32 i, void *ctx)
{
    struct sws_ebpf_scan *c = ctx;
    const struct sws_ebpf_worker *w = sws_ebpf_scan_worker(c, i);
    if (w == 0 || (c->cpu != ~0u && w->cpu != c->cpu))
        return 0;
    __u64 key = sws_ebpf_light_key(c, w, sws_ebpf_load(w), i);
    if (key < c->best)
        c->best = key;
    if (w->asleep == 0 && key < c->best_awake)
        c->best_awake = key;
    return 0;
}

/* hash: the first eligible slot from `start` on. */
static inline long sws_ebpf_visit_hash(__u32 i, void *ctx)
{
    struct sws_ebpf_scan *c = ctx;
    if (sws_ebpf_scan_worker(c, i) == 0)
        return 0;
    __u64 key = sws_ebpf_dist(c, i) << 6 | i;
    if (key < c->best)
        c->best = key;
    return 0;
}

/* fountain, first walk: the eligible workers and their total load. */
static inline long sws_ebpf_visit_total(__u32 i, void *ctx)
{
    struct sws_ebpf_scan *c = ctx;
    const struct sws_ebpf_worker *w = sws_ebpf_scan_worker(c, i);
    if (w != 0) {
        c->eligible++;
        c->total += sws_ebpf_load(w);
    }
    return 0;
}

/* fountain, second walk: stop at the first eligible worker not full. Full:
 * busier than the threshold, or holding at least SWS_EBPF_FOUNTAIN_MIN
 * connections and more than twice the fair share (total / eligible). */
static inline long sws_ebpf_visit_fountain(__u32 i, void *ctx)
{
    struct sws_ebpf_scan *c = ctx;
    const struct sws_ebpf_worker *w = sws_ebpf_scan_worker(c, i);
    if (w == 0)
        return 0;
    __u64 load = sws_ebpf_load(w);
    if (w->busy_pct > c->s->config.fountain_threshold ||
        (load >= SWS_EBPF_FOUNTAIN_MIN && load * c->eligible > 2 * c->total))
        return 0;
    c->best = i;
    return 1;
}

static inline int sws_ebpf_pick_lightest(struct sws_ebpf_scan *c)
{
    c->best = SWS_EBPF_KEY_NONE;
    c->best_awake = SWS_EBPF_KEY_NONE;
    SWS_EBPF_SCAN(sws_ebpf_visit_lightest, c);
    return sws_ebpf_key_slot(c->best);
}

/* The slot for a new connection with this 4-tuple hash, arriving on CPU
 * `cpu` at now_ms; -1: no eligible worker (the kernel then hashes over the
 * group's listening sockets, so nothing is refused). */
static inline int sws_ebpf_pick(const struct sws_ebpf_state *s, __u32 hash, __u32 cpu,
                                __u64 now_ms)
{
    struct sws_ebpf_scan c;
    int slot;
    __u64 bound;
    sws_ebpf_scan_init(&c, s, hash, ~0u, now_ms);
    switch (s->config.policy) {
    case SWS_EBPF_HASH:
        SWS_EBPF_SCAN(sws_ebpf_visit_hash, &c);
        return sws_ebpf_key_slot(c.best);
    case SWS_EBPF_LEAST_LOADED:
        /* A sleeping worker costs a wake-up per request it is given; one
         * already running takes it in the same turn. So the lightest
         * awake worker, if it is close to the least loaded; else the
         * lightest (ADR 0032). The lightest awake worker overall is also
         * the lightest awake one within the bound, if any is. */
        slot = sws_ebpf_pick_lightest(&c);
        if (slot < 0 || c.s->w[slot & (SWS_EBPF_MAX_WORKERS - 1)].asleep == 0)
            return slot;
        bound = SWS_EBPF_KEY_LOAD(c.best);
        bound += (bound >> SWS_EBPF_AWAKE_SHIFT) + 1;
        if (c.best_awake != SWS_EBPF_KEY_NONE && SWS_EBPF_KEY_LOAD(c.best_awake) <= bound)
            return sws_ebpf_key_slot(c.best_awake);
        return slot;
    case SWS_EBPF_FOUNTAIN:
        SWS_EBPF_SCAN(sws_ebpf_visit_total, &c);
        SWS_EBPF_SCAN(sws_ebpf_visit_fountain, &c);
        /* All full: the lightest. */
        return c.best != SWS_EBPF_KEY_NONE ? (int)c.best : sws_ebpf_pick_lightest(&c);
    case SWS_EBPF_CPU:
        /* The workers pinned to this CPU (several when workers outnumber
         * CPUs), the lightest of them; when none is eligible, any. */
        c.cpu = cpu;
        slot = sws_ebpf_pick_lightest(&c);
        c.cpu = ~0u;
        return slot >= 0 ? slot : sws_ebpf_pick_lightest(&c);
    default:
        return -1;
    }
}

#endif
