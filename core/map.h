/*
 * A hash map from byte-string keys to pointers: how ingressd finds an
 * object by namespace/name, the EndpointSlices of a Service, a host or a
 * pool by name, so a translation stays linear in the size of the store;
 * how the YAML reader finds a host name or a route already seen.
 *
 * Ownership: the map owns its slots only. A key is borrowed: its bytes
 * must stay unchanged while the entry is in the map (the store keys an
 * object by a string the object owns). Values are the caller's.
 * Open addressing with linear probing, load at most 1/2; deletion shifts
 * the following entries back, so there are no tombstones.
 * Not thread-safe: one owner per map (any process).
 */
#ifndef SWS_CORE_MAP_H
#define SWS_CORE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sws_map_slot {
    const char *key; /* NULL: empty */
    size_t len;
    uint64_t hash;
    void *val;
} sws_map_slot_t;

typedef struct sws_map {
    sws_map_slot_t *slots;
    size_t cap; /* 0 or a power of two */
    size_t n;
} sws_map_t;

/* A zeroed map is empty and valid; free releases the slots. */
void sws_map_free(sws_map_t *m);

void *sws_map_get(const sws_map_t *m, const char *key, size_t len);

/* Insert or replace. 0, or -1 when memory ran out (the map unchanged). */
int sws_map_put(sws_map_t *m, const char *key, size_t len, void *val);

/* Remove key; its value, or NULL when absent. */
void *sws_map_del(sws_map_t *m, const char *key, size_t len);

/* The entries, in no order: *it starts at 0; NULL after the last. The map
 * must not change during the walk. */
const sws_map_slot_t *sws_map_next(const sws_map_t *m, size_t *it);

#endif
