/* The string-keyed hash map (core/map.h). */
#include "core/map.h"

#include "core/hash.h"

#include <stdlib.h>
#include <string.h>

#define MAP_MIN_CAP 16u

void sws_map_free(sws_map_t *m)
{
    free(m->slots);
    *m = (sws_map_t){ 0 };
}

static size_t find(const sws_map_t *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    while (m->slots[i].key != NULL &&
           !(m->slots[i].hash == h && m->slots[i].len == len &&
             memcmp(m->slots[i].key, key, len) == 0))
        i = (i + 1) & mask;
    return i;
}

void *sws_map_get(const sws_map_t *m, const char *key, size_t len)
{
    if (m->n == 0)
        return NULL;
    size_t i = find(m, key, len, sws_fnv1a(SWS_FNV1A_INIT, key, len));
    return m->slots[i].key != NULL ? m->slots[i].val : NULL;
}

static int grow(sws_map_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : MAP_MIN_CAP;
    sws_map_t bigger = { calloc(cap, sizeof(*bigger.slots)), cap, m->n };
    if (bigger.slots == NULL)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key != NULL)
            bigger.slots[find(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].hash)] =
                m->slots[i];
    free(m->slots);
    *m = bigger;
    return 0;
}

int sws_map_put(sws_map_t *m, const char *key, size_t len, void *val)
{
    if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
        return -1;
    uint64_t h = sws_fnv1a(SWS_FNV1A_INIT, key, len);
    size_t i = find(m, key, len, h);
    if (m->slots[i].key == NULL)
        m->n++;
    m->slots[i] = (sws_map_slot_t){ key, len, h, val };
    return 0;
}

void *sws_map_del(sws_map_t *m, const char *key, size_t len)
{
    if (m->n == 0)
        return NULL;
    size_t mask = m->cap - 1;
    size_t i = find(m, key, len, sws_fnv1a(SWS_FNV1A_INIT, key, len));
    if (m->slots[i].key == NULL)
        return NULL;
    void *val = m->slots[i].val;
    /* Backward shift: move up every later entry of the run whose home
     * slot is not between the hole and it, so lookups never stop early. */
    for (size_t j = (i + 1) & mask; m->slots[j].key != NULL; j = (j + 1) & mask) {
        size_t home = (size_t)m->slots[j].hash & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = NULL;
    m->n--;
    return val;
}

const sws_map_slot_t *sws_map_next(const sws_map_t *m, size_t *it)
{
    while (*it < m->cap) {
        const sws_map_slot_t *s = &m->slots[(*it)++];
        if (s->key != NULL)
            return s;
    }
    return NULL;
}
