/*
 * 64-bit FNV-1a: the one hash of byte strings in ScalWS (the hash map of
 * core/map.h, member ids in shm/table.c, ingressd's digests). It is not
 * keyed: tables hashed with it hold configuration, not a peer's input.
 *
 * Incremental: sws_fnv1a(sws_fnv1a(SWS_FNV1A_INIT, a, n), b, m) is the
 * hash of a followed by b. Any process may call it.
 */
#ifndef SWS_CORE_HASH_H
#define SWS_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SWS_FNV1A_INIT 14695981039346656037ull

static inline uint64_t sws_fnv1a(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
