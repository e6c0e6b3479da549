/*
 * TLS session-ticket keys in shared memory (shm/tickets.h): one writer, the
 * supervisor, and a sequence lock for the workers that read them, as for
 * the member figures (docs/adr/0023-live-member-figures-in-shm.md).
 */
#include "shm/tickets.h"

#include "core/err.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

_Static_assert(SWS_TICKETS_KEYS >= 2, "a rotation keeps the previous key accepted");
_Static_assert(SWS_TICKET_KEY_WORDS * 8u ==
                   SWS_TICKET_NAME_LEN + SWS_TICKET_AES_LEN + SWS_TICKET_HMAC_LEN,
               "a key is a whole number of words");

/* Tries before a reader gives up on a ring being rewritten: a rotation
 * rewrites about 100 bytes twice a day, so a second try nearly always
 * succeeds; a supervisor descheduled mid-write must not stall a worker. */
#define READ_TRIES 64

/* The key's bytes, name then AES then HMAC key, as the words hold them. */
static void key_to_bytes(const sws_ticket_key_t *k, uint8_t *b)
{
    memcpy(b, k->name, SWS_TICKET_NAME_LEN);
    memcpy(b + SWS_TICKET_NAME_LEN, k->aes, SWS_TICKET_AES_LEN);
    memcpy(b + SWS_TICKET_NAME_LEN + SWS_TICKET_AES_LEN, k->hmac, SWS_TICKET_HMAC_LEN);
}

static void bytes_to_key(const uint8_t *b, sws_ticket_key_t *k)
{
    memcpy(k->name, b, SWS_TICKET_NAME_LEN);
    memcpy(k->aes, b + SWS_TICKET_NAME_LEN, SWS_TICKET_AES_LEN);
    memcpy(k->hmac, b + SWS_TICKET_NAME_LEN + SWS_TICKET_AES_LEN, SWS_TICKET_HMAC_LEN);
}

/* The writer's frame: seq odd, visible before any field changes... */
static uint64_t write_begin(sws_tickets_t *t)
{
    /* Relaxed: the supervisor is the block's only writer. */
    uint64_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    return seq;
}

/* ...and even again, after every field. */
static void write_end(sws_tickets_t *t, uint64_t seq)
{
    atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
}

static void slot_store(sws_tickets_t *t, unsigned i, const sws_ticket_key_t *k)
{
    uint64_t w[SWS_TICKET_KEY_WORDS];
    key_to_bytes(k, (uint8_t *)w);
    for (unsigned j = 0; j < SWS_TICKET_KEY_WORDS; j++)
        atomic_store_explicit(&t->keys[i].bytes[j], w[j], memory_order_relaxed);
    atomic_store_explicit(&t->keys[i].made_ms, k->made_ms, memory_order_relaxed);
    explicit_bzero(w, sizeof(w));
}

void sws_tickets_install(sws_tickets_t *t, const sws_ticket_key_t *key)
{
    uint32_t count = atomic_load_explicit(&t->count, memory_order_relaxed);
    uint32_t cur = atomic_load_explicit(&t->current, memory_order_relaxed);
    /* The slot after the current one is free or holds the oldest key. */
    unsigned next = count == 0 ? 0 : (cur + 1) % SWS_TICKETS_KEYS;
    uint64_t seq = write_begin(t);
    slot_store(t, next, key);
    atomic_store_explicit(&t->current, next, memory_order_relaxed);
    if (count < SWS_TICKETS_KEYS)
        atomic_store_explicit(&t->count, count + 1, memory_order_relaxed);
    write_end(t, seq);
}

static int random_fill(void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom((char *)buf + got, len - got, 0);
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0)
            got += (size_t)n;
    }
    return 0;
}

int sws_tickets_rotate(sws_tickets_t *t, uint64_t now_ms, char *err, size_t errlen)
{
    sws_ticket_key_t k;
    uint8_t b[SWS_TICKET_KEY_WORDS * 8u];
    if (random_fill(b, sizeof(b)) != 0) {
        int e = errno;
        explicit_bzero(b, sizeof(b));
        return sws_errf(err, errlen, "ticket keys: getrandom: %s", strerror(e));
    }
    bytes_to_key(b, &k);
    k.made_ms = now_ms;
    sws_tickets_install(t, &k);
    explicit_bzero(b, sizeof(b));
    explicit_bzero(&k, sizeof(k));
    return 0;
}

int sws_tickets_init(sws_tickets_t *t, uint64_t now_ms, uint64_t period_ms, char *err,
                     size_t errlen)
{
    uint64_t seq = write_begin(t);
    atomic_store_explicit(&t->period_ms, period_ms, memory_order_relaxed);
    write_end(t, seq);
    if (atomic_load_explicit(&t->count, memory_order_relaxed) > 0)
        return 0;
    return sws_tickets_rotate(t, now_ms, err, errlen);
}

uint64_t sws_tickets_due_ms(const sws_tickets_t *t)
{
    uint32_t cur = atomic_load_explicit(&t->current, memory_order_relaxed);
    if (atomic_load_explicit(&t->count, memory_order_relaxed) == 0 || cur >= SWS_TICKETS_KEYS)
        return 0;
    return atomic_load_explicit(&t->keys[cur].made_ms, memory_order_relaxed) +
           atomic_load_explicit(&t->period_ms, memory_order_relaxed);
}

void sws_tickets_wipe(sws_tickets_t *t)
{
    uint64_t seq = write_begin(t);
    for (unsigned i = 0; i < SWS_TICKETS_KEYS; i++) {
        for (unsigned j = 0; j < SWS_TICKET_KEY_WORDS; j++)
            atomic_store_explicit(&t->keys[i].bytes[j], 0, memory_order_relaxed);
        atomic_store_explicit(&t->keys[i].made_ms, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->current, 0, memory_order_relaxed);
    write_end(t, seq);
}

static void slot_load(const sws_tickets_t *t, unsigned i, sws_ticket_key_t *k)
{
    uint64_t w[SWS_TICKET_KEY_WORDS];
    for (unsigned j = 0; j < SWS_TICKET_KEY_WORDS; j++)
        w[j] = atomic_load_explicit(&t->keys[i].bytes[j], memory_order_relaxed);
    bytes_to_key((const uint8_t *)w, k);
    k->made_ms = atomic_load_explicit(&t->keys[i].made_ms, memory_order_relaxed);
    explicit_bzero(w, sizeof(w));
}

int sws_tickets_read(const sws_tickets_t *t, sws_tickets_snapshot_t *out)
{
    for (int try = 0; try < READ_TRIES; try++) {
        uint64_t seq = atomic_load_explicit(&t->seq, memory_order_acquire);
        if (seq & 1)
            continue;
        uint32_t n = atomic_load_explicit(&t->count, memory_order_relaxed);
        uint32_t cur = atomic_load_explicit(&t->current, memory_order_relaxed);
        out->period_ms = atomic_load_explicit(&t->period_ms, memory_order_relaxed);
        /* Bounds from the block are checked after the copy is known to
         * be consistent; until then they only must not index out of it. */
        if (n > SWS_TICKETS_KEYS)
            n = SWS_TICKETS_KEYS;
        cur %= SWS_TICKETS_KEYS;
        /* Newest first: the current key, then back around the ring. */
        for (uint32_t k = 0; k < n; k++)
            slot_load(t, (cur + SWS_TICKETS_KEYS - k) % SWS_TICKETS_KEYS, &out->keys[k]);
        out->n = n;
        /* The copy is done before seq is read again. */
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&t->seq, memory_order_relaxed) != seq)
            continue;
        if (n == 0)
            break;
        return 0;
    }
    sws_tickets_forget(out);
    return -1;
}

const sws_ticket_key_t *sws_tickets_find(const sws_tickets_snapshot_t *s,
                                         const uint8_t name[SWS_TICKET_NAME_LEN])
{
    for (unsigned i = 0; i < s->n && i < SWS_TICKETS_KEYS; i++)
        if (memcmp(s->keys[i].name, name, SWS_TICKET_NAME_LEN) == 0)
            return &s->keys[i];
    return NULL;
}

uint64_t sws_tickets_lifetime_ms(uint64_t period_ms)
{
    return period_ms * (SWS_TICKETS_KEYS - 1);
}

void sws_tickets_forget(sws_tickets_snapshot_t *s)
{
    explicit_bzero(s, sizeof(*s));
}
