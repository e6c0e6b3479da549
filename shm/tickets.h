/*
 * TLS session-ticket keys in the shared-memory region, so that a ticket
 * issued by one worker resumes on any other, after a reload, and after a
 * binary upgrade that attaches the region (docs/adr/0028-ticket-keys-in-shm.md).
 *
 * The block holds a ring of SWS_TICKETS_KEYS keys: the current one, which
 * encrypts new tickets, and the ones before it, still accepted for
 * decryption. The supervisor is the only writer (init, rotate, wipe); every
 * worker reads a consistent copy of the whole ring with sws_tickets_read()
 * inside a sequence lock, never a lock: a read that meets a rotation in
 * progress tries again, and after a few tries reports the ring torn, and
 * the caller does without a key for that handshake.
 *
 * Keys are random (getrandom), live only in this block and in short-lived
 * copies on a reader's stack (wiped by the reader after use), and are never
 * written to disk or logged. The region is a memfd, so it does not outlive
 * the machine's boot; times are CLOCK_MONOTONIC milliseconds, which every
 * process of one boot shares.
 */
#ifndef SWS_SHM_TICKETS_H
#define SWS_SHM_TICKETS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The current key and the one before: a ticket stays accepted for at least
 * one rotation period after it was issued, and a key exists for two. */
#define SWS_TICKETS_KEYS 2u

#define SWS_TICKET_NAME_LEN 16u
#define SWS_TICKET_AES_LEN 32u  /* AES-256-CBC */
#define SWS_TICKET_HMAC_LEN 32u /* HMAC-SHA256 */

typedef struct sws_ticket_key {
    uint8_t name[SWS_TICKET_NAME_LEN]; /* sent in clear in each ticket */
    uint8_t aes[SWS_TICKET_AES_LEN];
    uint8_t hmac[SWS_TICKET_HMAC_LEN];
    uint64_t made_ms; /* CLOCK_MONOTONIC */
} sws_ticket_key_t;

/* A key as 64-bit words: the sequence lock's readers copy it with relaxed
 * atomic loads, so a read racing a write is not a data race. */
#define SWS_TICKET_KEY_WORDS \
    ((SWS_TICKET_NAME_LEN + SWS_TICKET_AES_LEN + SWS_TICKET_HMAC_LEN) / 8u)

/* The block as it lies in shared memory. Its layout is here so shm.c can
 * size it and tests can hold it in a rotation; only tickets.c reads or
 * writes its fields. seq is odd while the supervisor rewrites the block. */
typedef struct sws_tickets {
    _Alignas(64) _Atomic uint64_t seq;
    _Atomic uint32_t count;     /* keys in the ring, 0 to SWS_TICKETS_KEYS */
    _Atomic uint32_t current;   /* index of the current key */
    _Atomic uint64_t period_ms; /* rotation period in force */
    struct {
        _Atomic uint64_t bytes[SWS_TICKET_KEY_WORDS];
        _Atomic uint64_t made_ms;
    } keys[SWS_TICKETS_KEYS];
} sws_tickets_t;

/* A reader's consistent copy: keys[0] is the current key, then older
 * ones; n keys in all. Holds key material: wipe it (sws_tickets_forget)
 * as soon as it has served. */
typedef struct sws_tickets_snapshot {
    sws_ticket_key_t keys[SWS_TICKETS_KEYS];
    unsigned n;
    uint64_t period_ms;
} sws_tickets_snapshot_t;

/* Supervisor, at start and on each reload: set the rotation period
 * (period_ms > 0), and make the first key unless the block already holds
 * keys (a region attached after a binary upgrade, or a reload), which are
 * kept. 0, or -1 with a message in err (no random bytes). */
int sws_tickets_init(sws_tickets_t *t, uint64_t now_ms, uint64_t period_ms, char *err,
                     size_t errlen);

/* Supervisor: a new random current key made at now_ms; the oldest key
 * leaves the ring when it is full. 0, or -1 with a message in err (no
 * random bytes; the ring is unchanged). */
int sws_tickets_rotate(sws_tickets_t *t, uint64_t now_ms, char *err, size_t errlen);

/* Supervisor: install *key as the new current key (what rotate does with
 * random bytes; tests use it with known ones). */
void sws_tickets_install(sws_tickets_t *t, const sws_ticket_key_t *key);

/* Supervisor: the CLOCK_MONOTONIC time in ms when the next rotation is due
 * (the current key's birth plus the period), so its loop arms a timer. */
uint64_t sws_tickets_due_ms(const sws_tickets_t *t);

/* Supervisor, stopping for good (never when handing the region to a new
 * binary): zero every key, and the ring is empty. */
void sws_tickets_wipe(sws_tickets_t *t);

/* Any process: copy the ring into *out. 0; -1 when the ring is empty or
 * was being rewritten on every try (a few, never a wait): *out holds no key. */
int sws_tickets_read(const sws_tickets_t *t, sws_tickets_snapshot_t *out);

/* The key of *s named name, or NULL. */
const sws_ticket_key_t *sws_tickets_find(const sws_tickets_snapshot_t *s,
                                         const uint8_t name[SWS_TICKET_NAME_LEN]);

/* How long a ticket is accepted after it was issued, at least: the
 * session lifetime a worker announces (period times the older keys). */
uint64_t sws_tickets_lifetime_ms(uint64_t period_ms);

/* Zero a snapshot's keys. */
void sws_tickets_forget(sws_tickets_snapshot_t *s);

#endif
