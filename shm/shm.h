/*
 * The shared-memory region: table generations, reader slots, and later the
 * per-worker counters and load, and TLS ticket keys.
 *
 * One region per supervisor, a memfd mapped MAP_SHARED: workers inherit the
 * mapping at fork, and the fd can be handed to a new binary on upgrade
 * (sws_shm_attach). Layout (all offsets from the region start):
 *
 *   header   magic, layout version, arena count and size, the current
 *            generation (one 64-bit word: generation number and arena index,
 *            published with one release store)
 *   slots    one per worker index: pid, the generation that worker holds
 *            (0 = none), counters
 *   members  one block per worker index: that worker's live figures per
 *            upstream member (sws_shm_member_stats_t), for GET /v1/pools
 *   tickets  the TLS session-ticket keys (shm/tickets.h), on pages of their
 *            own that core dumps leave out
 *   arenas   narenas fixed-size areas, each holding one table generation
 *
 * Publication (writer = the supervisor, single-threaded): build the table in
 * an arena that no live reader holds and that is not current, then
 * release-store the current word. Readers (workers) adopt the current
 * generation between event-loop iterations with sws_shm_reader_acquire():
 * they load the current word, store its generation in their slot, then load
 * the current word again and retry if it moved (so the writer, which scans
 * the slots before reusing an arena, never misses a reader that is about
 * to start using one). An arena is free when its generation is neither
 * current nor held by any slot; the supervisor clears a dead worker's slot
 * when it reaps it (sws_shm_reader_clear), so a crash never pins an arena.
 * See docs/adr/0002-shm-generations.md.
 */
#ifndef SWS_SHM_SHM_H
#define SWS_SHM_SHM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/scalws.pb-c.h"
#include "shm/table.h"
#include "shm/tickets.h"

#define SWS_SHM_MAX_WORKERS 256
#define SWS_SHM_DEFAULT_ARENAS 4
#define SWS_SHM_DEFAULT_ARENA_SIZE (8u << 20)

/* Per-worker counters in the slot; written by that worker only (plain
 * stores, read racily by the supervisor for logs and later /metrics). */
typedef struct sws_shm_counters {
    uint64_t connections_accepted;
    uint64_t connections_active;
    uint64_t requests;
} sws_shm_counters_t;

/* One upstream member as one worker sees it (worker/upstream_stats.h
 * publishes them, the admin API sums them). Figures for an operator, not
 * inputs to a decision. */
typedef struct sws_shm_member_stats {
    uint64_t id;            /* the member's stable id (shm/table.h); 0: none */
    uint64_t requests;      /* requests to it that ended, since the worker started */
    uint64_t failures;      /* failures reported to its passive health */
    uint64_t down_until_ms; /* passive health: 0 up; else down, and a trial may go
                             * at this CLOCK_MONOTONIC_COARSE time in ms */
    uint32_t active;        /* requests in flight, each holding a connection */
    uint32_t idle;          /* idle keep-alive connections */
} sws_shm_member_stats_t;

/* Records per worker block: the RouteSet's member limit
 * (SWS_ROUTESET_MEMBERS_MAX), so every member of a table has its place. */
#define SWS_SHM_MEMBER_STATS_MAX 131072u

/* A process's handle on the region (process-local memory, not shared). */
typedef struct sws_shm {
    int fd;
    void *base;
    size_t size;
    size_t warm; /* supervisor: bytes at the start of every arena faulted in (sws_shm_warm) */
    /* supervisor: the RouteSet check's memory, kept between publications
     * (sws_shm_prepare sizes it, sws_shm_publish's build works in it,
     * sws_shm_close frees it; ADR 0055) */
    sws_routeset_scratch_t check;
} sws_shm_t;

/* Supervisor: create a region with narenas arenas of arena_size bytes and
 * max_workers reader slots. 0, or -1 with a message in err. Limits: 2 to 64
 * arenas, 1 to SWS_SHM_MAX_WORKERS slots, 4 KiB to 4 GiB per arena. */
int sws_shm_create(sws_shm_t *shm, size_t arena_size, unsigned narenas, unsigned max_workers,
                   char *err, size_t errlen);

/* Map an existing region from its fd (a new binary on upgrade). Checks
 * magic, layout version and size. On success the handle owns fd; on
 * failure the caller still does. */
int sws_shm_attach(sws_shm_t *shm, int fd, char *err, size_t errlen);

/* Unmap, and close the fd (after a successful create or attach only). */
void sws_shm_close(sws_shm_t *shm);

/* publish: every arena is still held by a reader; nothing changed, and a
 * later call may succeed once the readers move on. */
#define SWS_SHM_BUSY (-2)

/* Supervisor: build rs into a free arena and publish it as the next
 * generation. On success 0 and *gen_out is the new generation number
 * (starting at 1). Else a message in err and nothing changed: -1 when rs
 * does not fit an arena or is invalid (retrying cannot help), SWS_SHM_BUSY
 * when no arena is free yet. */
int sws_shm_publish(sws_shm_t *shm, const Sws__RouteSet *rs, uint64_t *gen_out, char *err,
                    size_t errlen);

/* Supervisor, after a publication, off the path of the change: fault in
 * every arena's pages up to the size of the current table plus a quarter
 * (never beyond the arena), and read one byte of each page, so that the
 * next builds do not pay the first touch of memory never written (about
 * 50 ms for a 10,000-Ingress table on this project's benchmark machine, a
 * virtual machine: ADR 0050; it went into the time from an endpoint change
 * to the workers). Grows only: pages stay faulted in. The contents are not
 * changed (MADV_POPULATE_WRITE, then reads), so arenas that workers read
 * are safe. Nothing when the kernel cannot (before Linux 5.14). */
void sws_shm_warm(sws_shm_t *shm);

/* Supervisor, before sws_shm_publish(rs), outside the build's time: when
 * rs's member and route records alone exceed what sws_shm_warm reached (a
 * first full set from ingressd, a reload that grew the pools), size its
 * table (one more parse of every member address) and warm, as
 * sws_shm_warm does, the arena the publication will build into, up to
 * that size and a quarter: populating and reading memory first, then
 * writing it, costs about half of writing it untouched on this project's
 * benchmark machine (ADR 0050). Else nothing: a sum over rs's pools and
 * hosts, compared. Growth by other bytes (bodies, certificates) is not
 * foreseen: those pages fault in during the build, as before. Always:
 * sizes shm->check for rs, faulting in what it adds (about 5 MiB for
 * the first full set from ingressd: ADR 0055). */
void sws_shm_prepare(sws_shm_t *shm, const Sws__RouteSet *rs);

/* Worker, after adopting a generation, off the path of the change: the
 * same for its own mapping (MADV_POPULATE_READ, then a read per page), so
 * that its first adoption of a generation in each arena does not fault in
 * the pages it reads. done: the bytes of every arena this process warmed
 * before (0 at first; a handle inherited at fork says nothing about the
 * child's page tables); returns the new extent, to pass next time. */
size_t sws_shm_reader_warm(sws_shm_t *shm, size_t done);

/* The current generation number (0 before the first publish). */
uint64_t sws_shm_current_generation(const sws_shm_t *shm);

/* Worker `slot`: adopt the current generation and return its table (NULL
 * before the first publish). Cheap when nothing changed: one acquire load
 * and a compare. The previously returned table must not be used after
 * this call. */
const sws_table_t *sws_shm_reader_acquire(sws_shm_t *shm, unsigned slot, pid_t self);

/* Worker exiting, or supervisor after reaping the worker of `slot`: the
 * slot holds nothing, and its member block is empty. */
void sws_shm_reader_clear(sws_shm_t *shm, unsigned slot);

/* The generation held by `slot` (0 = none): for logs and tests. */
uint64_t sws_shm_reader_generation(const sws_shm_t *shm, unsigned slot);

/* This worker's counters. */
sws_shm_counters_t *sws_shm_counters(sws_shm_t *shm, unsigned slot);

/* Worker `slot` only (and the supervisor once it reaped that worker):
 * replace its member block with the n records in (n at most
 * SWS_SHM_MEMBER_STATS_MAX; more are dropped). Record i should be member i
 * of the table the worker holds, so that a reader's hint hits. Relaxed
 * atomic stores framed by a sequence word: a reader never mixes two
 * publications. O(n). */
void sws_shm_member_stats_write(sws_shm_t *shm, unsigned slot, const sws_shm_member_stats_t *in,
                                uint32_t n);

/* Any process: worker `slot`'s latest record for member id into *out
 * (record `hint` is looked at first, then all). 1 when found, 0 when the
 * worker published none for it (or the slot is out of range), -1 when
 * the worker kept rewriting its block while this read (a few tries, never
 * a wait): nothing trustworthy in *out. */
int sws_shm_member_stats_read(const sws_shm_t *shm, unsigned slot, uint64_t id, uint32_t hint,
                              sws_shm_member_stats_t *out);

/* The region's ticket keys: the supervisor writes them (shm/tickets.h),
 * workers read them. */
sws_tickets_t *sws_shm_tickets(sws_shm_t *shm);

#endif
