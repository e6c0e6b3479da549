/*
 * TLS session tickets sealed with the keys of the shared-memory region
 * (shm/tickets.h), so that a session made on one worker resumes on any
 * other, and after a reload or a binary upgrade
 * (docs/adr/0028-ticket-keys-in-shm.md).
 *
 * Caller: a worker (or a test), once per SSL_CTX it serves a listener
 * with: the default certificate's and every SNI one's, since OpenSSL asks
 * the callback of the context the handshake is on when it issues a ticket.
 * The keys are read at each handshake, never cached, so a rotation by the
 * supervisor takes effect at the next handshake with no call here.
 */
#ifndef SWS_WORKER_TLS_TICKETS_H
#define SWS_WORKER_TLS_TICKETS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "shm/tickets.h"

/* Seal and open ctx's session tickets with keys, which must outlive ctx
 * (the region does), rotated every period_ms (the table's
 * ticket_key_rotation_ms, the period the supervisor gives the ring). New tickets use the current key; a ticket under an
 * older key still in the ring resumes and is replaced by a new one; a
 * ticket under an unknown key, or a ring being rewritten at that moment,
 * costs a full handshake, never a failed one. Also: the session lifetime
 * is the ring's (sws_tickets_lifetime_ms of period_ms), and the per-process session
 * cache is off, so a client resumes the same way on every worker.
 * 0, or -1 with a message in err. */
int sws_tls_tickets_attach(SSL_CTX *ctx, const sws_tickets_t *keys, uint64_t period_ms,
                           char *err, size_t errlen);

#endif
