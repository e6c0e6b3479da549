/*
 * The shared-memory region: a memfd holding a header, one reader slot per
 * worker and a few fixed-size arenas, each holding one table generation
 * (shm/shm.h). One writer (the supervisor) and many readers (the workers),
 * in different processes, synchronised only through C11 atomics on the
 * mapping. Why the handshake below is sound: docs/adr/0002-shm-generations.md.
 *
 * Layout (every section starts on a cache line):
 *
 *   shm_header_t                magic, version, geometry, the current word
 *   shm_slot_t[max_workers]     one cache line per worker
 *   max_workers x member block  shm_member_block_t + SWS_SHM_MEMBER_STATS_MAX records
 *   sws_tickets_t               TLS session-ticket keys (shm/tickets.h), on pages
 *                               of their own, left out of core dumps
 *   narenas x (shm_arena_t + arena_size table bytes)
 */
#include "shm/shm.h"

#include "core/err.h"
#include "shm/routeset_check.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Atomics on shared memory must not fall back to a process-local lock. */
_Static_assert(ATOMIC_LONG_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "64-bit atomics must be lock-free to work across processes");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "int atomics must be lock-free");

#define SHM_MAGIC 0x4d48535357534c41ULL /* "ALSWSSHM" little-endian */
/* Covers the region layout and the table layout inside the arenas
 * (shm/table.h: sws_route_t, sws_settings_t, ...): once a release exists,
 * any change to either bumps it, so a binary upgrade that attaches an older
 * region refuses it instead of misreading it. Unreleased so far; 2 since
 * the ticket keys' block. */
#define SHM_VERSION 2u
#define SHM_LINE 64u
#define SHM_MAX_ARENAS 64u
#define SHM_MIN_ARENA_SIZE 4096u

/* The current word: generation << 8 | arena index; 0 = nothing published. */
#define WORD_ARENA_BITS 8
#define WORD_GEN(w) ((w) >> WORD_ARENA_BITS)
#define WORD_ARENA(w) ((unsigned)((w) & ((1u << WORD_ARENA_BITS) - 1)))

typedef struct shm_header {
    uint64_t magic;
    uint32_t version;
    uint32_t narenas;
    uint64_t arena_size;   /* table bytes per arena */
    uint64_t arena_stride; /* shm_arena_t + arena_size */
    uint64_t slots_off;
    uint64_t arenas_off;
    uint64_t total_size;
    uint32_t max_workers;
    uint32_t reserved;
    /* Its own line: the one word every reader polls, written only on publish. */
    _Alignas(SHM_LINE) _Atomic uint64_t current;
} shm_header_t;

/* One worker's line. gen and pid are written by the worker (and cleared by
 * the supervisor once the worker is reaped); counters by the worker only. */
typedef struct shm_slot {
    _Alignas(SHM_LINE) _Atomic uint64_t gen; /* generation held; 0 = none */
    _Atomic int32_t pid;
    uint32_t reserved;
    sws_shm_counters_t counters;
} shm_slot_t;

/* Precedes each arena's table. Written and read by the writer only, so a
 * new binary that attaches knows what every arena holds. */
typedef struct shm_arena {
    _Alignas(SHM_LINE) uint64_t gen; /* generation built here; 0 = none */
} shm_arena_t;

/* One worker's live figures per upstream member (shm.h). A sequence lock
 * with one writer: seq is odd while the worker rewrites the records, so a
 * reader that sees the same even seq before and after its copy has one
 * publication, not a mix of two. */
typedef struct shm_member_block {
    _Alignas(SHM_LINE) _Atomic uint64_t seq;
    _Atomic uint32_t n; /* records in use */
} shm_member_block_t;

_Static_assert(SWS_SHM_MEMBER_STATS_MAX >= SWS_ROUTESET_MEMBERS_MAX,
               "every member of a table has a record");

typedef struct shm_member_rec {
    _Atomic uint64_t id, requests, failures, down_until_ms;
    _Atomic uint32_t active, idle;
} shm_member_rec_t;

_Static_assert(sizeof(shm_slot_t) == SHM_LINE, "a slot is one cache line");
_Static_assert(sizeof(shm_member_block_t) == SHM_LINE, "a block header is one cache line");
_Static_assert(sizeof(shm_arena_t) == SHM_LINE, "arena header is one cache line");
_Static_assert(SHM_MAX_ARENAS <= (1u << WORD_ARENA_BITS), "arena index fits the word");

/* One worker's member block. */
#define MEMBER_STRIDE \
    line_up(sizeof(shm_member_block_t) + SWS_SHM_MEMBER_STATS_MAX * sizeof(shm_member_rec_t))

/* The blocks lie between the slots and the arenas: their place follows
 * from slots_off and max_workers, so the header needs no field for them
 * (and attach's check of arenas_off covers them). */
typedef struct region_layout {
    size_t arena_size, arena_stride, slots_off, members_off, tickets_off, arenas_off, total;
} region_layout_t;

static size_t line_up(size_t n)
{
    return (n + SHM_LINE - 1) & ~(size_t)(SHM_LINE - 1);
}

/* The keys' pages are marked MADV_DONTDUMP, which works on whole pages. */
static size_t page_up(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page - 1) / page * page;
}

static void region_layout(size_t arena_size, unsigned narenas, unsigned max_workers,
                          region_layout_t *lay)
{
    lay->arena_size = line_up(arena_size);
    lay->arena_stride = sizeof(shm_arena_t) + lay->arena_size;
    lay->slots_off = line_up(sizeof(shm_header_t));
    lay->members_off = lay->slots_off + (size_t)max_workers * sizeof(shm_slot_t);
    lay->tickets_off = page_up(lay->members_off + (size_t)max_workers * MEMBER_STRIDE);
    lay->arenas_off = lay->tickets_off + page_up(sizeof(sws_tickets_t));
    lay->total = lay->arenas_off + (size_t)narenas * lay->arena_stride;
}

static shm_header_t *header(const sws_shm_t *shm)
{
    return shm->base;
}

static shm_slot_t *slot_at(const sws_shm_t *shm, unsigned i)
{
    return (shm_slot_t *)((char *)shm->base + header(shm)->slots_off) + i;
}

static shm_member_block_t *member_block(const sws_shm_t *shm, unsigned i)
{
    const shm_header_t *h = header(shm);
    size_t members_off = h->slots_off + (size_t)h->max_workers * sizeof(shm_slot_t);
    return (shm_member_block_t *)((char *)shm->base + members_off + i * MEMBER_STRIDE);
}

sws_tickets_t *sws_shm_tickets(sws_shm_t *shm)
{
    region_layout_t lay;
    const shm_header_t *h = header(shm);
    region_layout(h->arena_size, h->narenas, h->max_workers, &lay);
    return (sws_tickets_t *)((char *)shm->base + lay.tickets_off);
}

static shm_member_rec_t *member_recs(shm_member_block_t *b)
{
    return (shm_member_rec_t *)(b + 1);
}

static shm_arena_t *arena_at(const sws_shm_t *shm, unsigned i)
{
    const shm_header_t *h = header(shm);
    return (shm_arena_t *)((char *)shm->base + h->arenas_off + i * h->arena_stride);
}

static sws_table_t *arena_table(const sws_shm_t *shm, unsigned i)
{
    return (sws_table_t *)(arena_at(shm, i) + 1);
}

/* The limits create() enforces and attach() re-checks: a header read from
 * a region is not trusted, and an arena size near 2^64 would wrap the
 * layout arithmetic into a size that matches the region. */
static int geometry_check(uint64_t arena_size, unsigned narenas, unsigned max_workers, char *err,
                          size_t errlen)
{
    if (narenas < 2 || narenas > SHM_MAX_ARENAS)
        return sws_errf(err, errlen, "shm: %u arenas, need 2 to %u", narenas, SHM_MAX_ARENAS);
    if (max_workers < 1 || max_workers > SWS_SHM_MAX_WORKERS)
        return sws_errf(err, errlen, "shm: %u workers, need 1 to %u", max_workers,
                        SWS_SHM_MAX_WORKERS);
    /* Table offsets are 32-bit. */
    if (arena_size < SHM_MIN_ARENA_SIZE || arena_size > UINT32_MAX - SHM_LINE)
        return sws_errf(err, errlen, "shm: table size %llu bytes, need %u to %u",
                        (unsigned long long)arena_size, SHM_MIN_ARENA_SIZE, UINT32_MAX - SHM_LINE);
    return 0;
}

/* A core dump of any process that maps the region (workers inherit the
 * mark at fork) must not carry the ticket keys to disk. */
static int keys_out_of_dumps(void *base, const region_layout_t *lay, char *err, size_t errlen)
{
    if (madvise((char *)base + lay->tickets_off, lay->arenas_off - lay->tickets_off,
                MADV_DONTDUMP) != 0)
        return sws_errf(err, errlen, "shm: madvise(MADV_DONTDUMP) on the ticket keys: %s",
                        strerror(errno));
    return 0;
}

int sws_shm_create(sws_shm_t *shm, size_t arena_size, unsigned narenas, unsigned max_workers,
                   char *err, size_t errlen)
{
    region_layout_t lay;

    if (geometry_check(arena_size, narenas, max_workers, err, errlen) != 0)
        return -1;
    region_layout(arena_size, narenas, max_workers, &lay);

    int fd = memfd_create("scalws-shm", MFD_CLOEXEC);
    if (fd < 0)
        return sws_errf(err, errlen, "shm: memfd_create: %s", strerror(errno));
    void *base = MAP_FAILED;
    if (ftruncate(fd, (off_t)lay.total) == 0)
        base = mmap(NULL, lay.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return sws_errf(err, errlen, "shm: allocating %zu bytes: %s", lay.total, strerror(e));
    }
    if (keys_out_of_dumps(base, &lay, err, errlen) != 0) {
        munmap(base, lay.total);
        close(fd);
        return -1;
    }

    /* A fresh memfd reads as zeros: every slot and arena starts empty. */
    shm_header_t *h = base;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->narenas = narenas;
    h->arena_size = lay.arena_size;
    h->arena_stride = lay.arena_stride;
    h->slots_off = lay.slots_off;
    h->arenas_off = lay.arenas_off;
    h->total_size = lay.total;
    h->max_workers = max_workers;
    atomic_init(&h->current, 0);

    shm->fd = fd;
    shm->base = base;
    shm->size = lay.total;
    shm->warm = 0;
    shm->check = (sws_routeset_scratch_t){ 0 };
    return 0;
}

static int header_check(const shm_header_t *h, size_t size, char *err, size_t errlen)
{
    region_layout_t lay;

    if (h->magic != SHM_MAGIC)
        return sws_errf(err, errlen, "shm: not a ScalWS region (bad magic)");
    if (h->version != SHM_VERSION)
        return sws_errf(err, errlen, "shm: layout version %u, this binary speaks %u", h->version,
                        SHM_VERSION);
    if (geometry_check(h->arena_size, h->narenas, h->max_workers, err, errlen) != 0)
        return -1;
    region_layout(h->arena_size, h->narenas, h->max_workers, &lay);
    if (lay.arena_size != h->arena_size || lay.arena_stride != h->arena_stride ||
        lay.slots_off != h->slots_off || lay.arenas_off != h->arenas_off ||
        lay.total != h->total_size || lay.total != size)
        return sws_errf(err, errlen, "shm: region is %zu bytes, header describes %llu", size,
                        (unsigned long long)h->total_size);
    if (WORD_ARENA(atomic_load(&h->current)) >= h->narenas)
        return sws_errf(err, errlen, "shm: current word names a missing arena");
    return 0;
}

int sws_shm_attach(sws_shm_t *shm, int fd, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return sws_errf(err, errlen, "shm: fstat: %s", strerror(errno));
    if ((size_t)st.st_size < sizeof(shm_header_t))
        return sws_errf(err, errlen, "shm: region is %lld bytes, too small for a header",
                        (long long)st.st_size);
    size_t size = (size_t)st.st_size;
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return sws_errf(err, errlen, "shm: mmap %zu bytes: %s", size, strerror(errno));
    if (header_check(base, size, err, errlen) != 0) {
        munmap(base, size);
        return -1;
    }
    region_layout_t lay;
    const shm_header_t *h = base;
    region_layout(h->arena_size, h->narenas, h->max_workers, &lay);
    if (keys_out_of_dumps(base, &lay, err, errlen) != 0) {
        munmap(base, size);
        return -1;
    }
    shm->fd = fd;
    shm->base = base;
    shm->size = size;
    shm->warm = 0;
    shm->check = (sws_routeset_scratch_t){ 0 };
    return 0;
}

void sws_shm_close(sws_shm_t *shm)
{
    if (shm->base != NULL)
        munmap(shm->base, shm->size);
    if (shm->fd >= 0)
        close(shm->fd);
    shm->base = NULL;
    shm->fd = -1;
    shm->size = 0;
    sws_routeset_scratch_free(&shm->check);
}

/* Does any reader slot hold generation gen? seq_cst loads: the other half
 * of the reader's store-then-recheck (see the ADR). */
static int generation_held(const sws_shm_t *shm, uint64_t gen)
{
    const shm_header_t *h = header(shm);
    for (unsigned i = 0; i < h->max_workers; i++)
        if (atomic_load_explicit(&slot_at(shm, i)->gen, memory_order_seq_cst) == gen)
            return 1;
    return 0;
}

/* An arena that is neither current nor held by a reader, or -1. */
static int arena_free(const sws_shm_t *shm, uint64_t current)
{
    const shm_header_t *h = header(shm);
    /* Orders our last publication's release store before the slot loads,
     * so a reader that missed that publication is seen in its slot. */
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < h->narenas; i++) {
        uint64_t gen = arena_at(shm, i)->gen;
        if (current != 0 && i == WORD_ARENA(current))
            continue;
        if (gen == 0 || !generation_held(shm, gen))
            return (int)i;
    }
    return -1;
}

int sws_shm_publish(sws_shm_t *shm, const Sws__RouteSet *rs, uint64_t *gen_out, char *err,
                    size_t errlen)
{
    shm_header_t *h = header(shm);
    /* A table too large for the arena is refused by the build, before it
     * writes a byte: a size computed here first would parse every member
     * address of an ingress RouteSet once more per generation. */
    /* Relaxed: this process is the only writer of the word. */
    uint64_t current = atomic_load_explicit(&h->current, memory_order_relaxed);
    int idx = arena_free(shm, current);
    if (idx < 0) {
        sws_errf(err, errlen, "all %u table arenas are in use (generation %llu is current, "
                 "workers hold the others); retry later",
                 h->narenas, (unsigned long long)WORD_GEN(current));
        return SWS_SHM_BUSY;
    }

    /* The word has 56 bits for the generation; the next one must fit, or
     * it would publish as generation 0, "nothing published". Only a region
     * whose header was not ours (attach) gets here. */
    if (WORD_GEN(current) >= WORD_GEN(UINT64_MAX))
        return sws_errf(err, errlen, "shm: generation %llu is the last one; restart to reset",
                        (unsigned long long)WORD_GEN(current));
    uint64_t gen = WORD_GEN(current) + 1;
    shm_arena_t *arena = arena_at(shm, (unsigned)idx);
    arena->gen = 0; /* a failed build leaves the arena free, not half-claimed */
    if (sws_table_build_reusing(arena_table(shm, (unsigned)idx), h->arena_size, gen, rs,
                                &shm->check, err, errlen) != 0)
        return -1;
    arena->gen = gen;
    atomic_store_explicit(&h->current, gen << WORD_ARENA_BITS | (unsigned)idx,
                          memory_order_release);
    *gen_out = gen;
    return 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* A read of one byte per page of [from, to), from this process. On a
 * virtual machine that maps a guest's memory into the hypervisor's page
 * tables lazily (shadow paging, as on this project's benchmark machine),
 * the madvise below fills the guest's page tables only, and the first
 * access from user space to each page still traps, unseen by the guest (it
 * counts no page fault): a build writing 16 MiB into such an arena paid
 * about 50 ms of it. A read, not a write, because workers may be reading
 * the arena (docs/adr/0050-warm-arenas-by-reading-each-page.md). */
static void touch_pages(uintptr_t from, uintptr_t to, uintptr_t page)
{
    unsigned char sum = 0;
    for (uintptr_t p = from; p < to; p += page)
        sum ^= *(volatile const unsigned char *)p;
    (void)sum;
}

/* Map and touch the pages of arenas [first, last) from byte done to byte
 * want, with advice: 0, or -1 when the kernel cannot (before Linux 5.14:
 * then pages fault in as they are used, as before). */
static int warm_range(sws_shm_t *shm, unsigned first, unsigned last, size_t done, size_t want,
                      int advice)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (unsigned i = first; i < last; i++) {
        uintptr_t from = ((uintptr_t)arena_table(shm, i) + done) & ~(page - 1);
        uintptr_t to = (uintptr_t)arena_table(shm, i) + want;
        if (madvise((void *)from, to - from, advice) < 0)
            return -1;
        touch_pages(from, to, page);
    }
    return 0;
}

/* What a table of used bytes warms: a quarter more, for the next
 * generations' growth; never beyond the arena. */
static size_t warm_extent(const sws_shm_t *shm, size_t used)
{
    size_t want = used + used / 4;
    return want < header(shm)->arena_size ? want : header(shm)->arena_size;
}

/* Every arena from byte done to the current table's warm extent; the new
 * extent (done when nothing was to do or the kernel cannot). */
static size_t warm_arenas(sws_shm_t *shm, size_t done, int advice)
{
    shm_header_t *h = header(shm);
    uint64_t word = atomic_load_explicit(&h->current, memory_order_acquire);
    if (word == 0)
        return done;
    size_t want = warm_extent(shm, sws_table_bytes(arena_table(shm, WORD_ARENA(word))));
    if (want <= done || warm_range(shm, 0, h->narenas, done, want, advice) < 0)
        return done;
    return want;
}

void sws_shm_warm(sws_shm_t *shm)
{
    shm->warm = warm_arenas(shm, shm->warm, MADV_POPULATE_WRITE);
}

size_t sws_shm_reader_warm(sws_shm_t *shm, size_t done)
{
    return warm_arenas(shm, done, MADV_POPULATE_READ);
}

void sws_shm_prepare(sws_shm_t *shm, const Sws__RouteSet *rs)
{
    /* Out of memory: the build's check refuses the set and says so. */
    (void)sws_routeset_scratch_reserve(&shm->check, rs);
    /* A lower bound of rs's table without parsing a member: the member
     * and route records alone. Within what is warm: nothing to do, the
     * case of every delta after the first set. */
    size_t members = 0, routes = 0;
    for (size_t p = 0; p < rs->n_pools; p++)
        members += rs->pools[p]->n_members;
    for (size_t h = 0; h < rs->n_hosts; h++)
        routes += rs->hosts[h]->n_routes;
    if (members * sizeof(sws_member_t) + routes * sizeof(sws_route_t) <= shm->warm)
        return;
    uint64_t current = atomic_load_explicit(&header(shm)->current, memory_order_relaxed);
    int idx = arena_free(shm, current);
    if (idx < 0)
        return;
    size_t want = warm_extent(shm, sws_table_size(rs));
    if (want > shm->warm)
        (void)warm_range(shm, (unsigned)idx, (unsigned)idx + 1, shm->warm, want,
                         MADV_POPULATE_WRITE);
}

uint64_t sws_shm_current_generation(const sws_shm_t *shm)
{
    return WORD_GEN(atomic_load_explicit(&header(shm)->current, memory_order_acquire));
}

const sws_table_t *sws_shm_reader_acquire(sws_shm_t *shm, unsigned slot, pid_t self)
{
    shm_header_t *h = header(shm);
    if (slot >= h->max_workers)
        return NULL;
    shm_slot_t *s = slot_at(shm, slot);
    uint64_t word = atomic_load_explicit(&h->current, memory_order_acquire);
    if (word == 0)
        return NULL;
    /* Fast path: we completed the handshake for this generation earlier. */
    if (atomic_load_explicit(&s->gen, memory_order_relaxed) == WORD_GEN(word))
        return arena_table(shm, WORD_ARENA(word));

    atomic_store_explicit(&s->pid, (int32_t)self, memory_order_relaxed);
    for (;;) {
        /* Announce, then check the announcement was not too late: if the
         * word still names this generation, the writer's next scan sees
         * our slot before it can pick this arena. */
        atomic_store_explicit(&s->gen, WORD_GEN(word), memory_order_seq_cst);
        uint64_t again = atomic_load_explicit(&h->current, memory_order_seq_cst);
        if (again == word)
            return arena_table(shm, WORD_ARENA(word));
        word = again;
    }
}

void sws_shm_reader_clear(sws_shm_t *shm, unsigned slot)
{
    if (slot >= header(shm)->max_workers)
        return;
    shm_slot_t *s = slot_at(shm, slot);
    atomic_store_explicit(&s->gen, 0, memory_order_seq_cst);
    atomic_store_explicit(&s->pid, 0, memory_order_relaxed);
    /* A dead worker's connections are gone with it. */
    sws_shm_member_stats_write(shm, slot, NULL, 0);
}

uint64_t sws_shm_reader_generation(const sws_shm_t *shm, unsigned slot)
{
    if (slot >= header(shm)->max_workers)
        return 0;
    return atomic_load_explicit(&slot_at(shm, slot)->gen, memory_order_seq_cst);
}

sws_shm_counters_t *sws_shm_counters(sws_shm_t *shm, unsigned slot)
{
    if (slot >= header(shm)->max_workers)
        return NULL;
    return &slot_at(shm, slot)->counters;
}

void sws_shm_member_stats_write(sws_shm_t *shm, unsigned slot, const sws_shm_member_stats_t *in,
                                uint32_t n)
{
    if (slot >= header(shm)->max_workers)
        return;
    shm_member_block_t *b = member_block(shm, slot);
    shm_member_rec_t *r = member_recs(b);
    if (n > SWS_SHM_MEMBER_STATS_MAX)
        n = SWS_SHM_MEMBER_STATS_MAX;
    /* Relaxed: this process is the block's only writer. */
    uint64_t seq = atomic_load_explicit(&b->seq, memory_order_relaxed);
    atomic_store_explicit(&b->seq, seq + 1, memory_order_relaxed);
    /* The odd seq is visible before any record changes. */
    atomic_thread_fence(memory_order_release);
    for (uint32_t i = 0; i < n; i++) {
        atomic_store_explicit(&r[i].id, in[i].id, memory_order_relaxed);
        atomic_store_explicit(&r[i].requests, in[i].requests, memory_order_relaxed);
        atomic_store_explicit(&r[i].failures, in[i].failures, memory_order_relaxed);
        atomic_store_explicit(&r[i].down_until_ms, in[i].down_until_ms, memory_order_relaxed);
        atomic_store_explicit(&r[i].active, in[i].active, memory_order_relaxed);
        atomic_store_explicit(&r[i].idle, in[i].idle, memory_order_relaxed);
    }
    atomic_store_explicit(&b->n, n, memory_order_relaxed);
    atomic_store_explicit(&b->seq, seq + 2, memory_order_release);
}

static void rec_load(const shm_member_rec_t *r, sws_shm_member_stats_t *out)
{
    out->id = atomic_load_explicit(&r->id, memory_order_relaxed);
    out->requests = atomic_load_explicit(&r->requests, memory_order_relaxed);
    out->failures = atomic_load_explicit(&r->failures, memory_order_relaxed);
    out->down_until_ms = atomic_load_explicit(&r->down_until_ms, memory_order_relaxed);
    out->active = atomic_load_explicit(&r->active, memory_order_relaxed);
    out->idle = atomic_load_explicit(&r->idle, memory_order_relaxed);
}

/* Tries before a reader gives up on a block its worker keeps rewriting:
 * a rewrite takes microseconds, and the worker rewrites at most every
 * few milliseconds, so a second try nearly always succeeds. */
#define MEMBER_READ_TRIES 8

int sws_shm_member_stats_read(const sws_shm_t *shm, unsigned slot, uint64_t id, uint32_t hint,
                              sws_shm_member_stats_t *out)
{
    if (slot >= header(shm)->max_workers || id == 0)
        return 0;
    shm_member_block_t *b = member_block(shm, slot);
    const shm_member_rec_t *r = member_recs(b);
    for (int t = 0; t < MEMBER_READ_TRIES; t++) {
        uint64_t seq = atomic_load_explicit(&b->seq, memory_order_acquire);
        if (seq & 1)
            continue;
        uint32_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
        if (n > SWS_SHM_MEMBER_STATS_MAX)
            n = SWS_SHM_MEMBER_STATS_MAX;
        int found = 0;
        for (uint32_t k = 0; k < n && !found; k++) {
            /* The hint first: the worker writes the table's member order. */
            uint32_t i = (hint + k) % n;
            if (atomic_load_explicit(&r[i].id, memory_order_relaxed) == id) {
                rec_load(&r[i], out);
                found = 1;
            }
        }
        /* The copy is done before seq is read again. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&b->seq, memory_order_relaxed) == seq)
            return found;
    }
    return -1;
}
