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

/* A process's handle on the region (process-local memory, not shared). */
typedef struct sws_shm {
    int fd;
    void *base;
    size_t size;
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

/* The current generation number (0 before the first publish). */
uint64_t sws_shm_current_generation(const sws_shm_t *shm);

/* Worker `slot`: adopt the current generation and return its table (NULL
 * before the first publish). Cheap when nothing changed: one acquire load
 * and a compare. The previously returned table must not be used after
 * this call. */
const sws_table_t *sws_shm_reader_acquire(sws_shm_t *shm, unsigned slot, pid_t self);

/* Worker exiting, or supervisor after reaping the worker of `slot`: the
 * slot holds nothing. */
void sws_shm_reader_clear(sws_shm_t *shm, unsigned slot);

/* The generation held by `slot` (0 = none): for logs and tests. */
uint64_t sws_shm_reader_generation(const sws_shm_t *shm, unsigned slot);

/* This worker's counters. */
sws_shm_counters_t *sws_shm_counters(sws_shm_t *shm, unsigned slot);

#endif
