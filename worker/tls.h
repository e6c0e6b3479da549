/*
 * TLS termination for clients (ADR 0033): one table generation's OpenSSL
 * contexts, and the TLS side of a connection that conn.c calls instead of
 * read/send on a TLS listener's connections.
 *
 * Generations: when the worker adopts a table it builds a sws_tls_gen_t
 * from the table's PEM bytes (sws_tls_gen_build): a base context (the
 * server.tls settings and the default certificate, if any) and one
 * context per host with certificates (its RSA and ECDSA pairs side by
 * side: OpenSSL gives each client the best its signature algorithms
 * allow). The worker owns the current one (set->tls) and frees the
 * previous with sws_tls_gen_free; OpenSSL counts references to contexts,
 * so a connection (its SSL) keeps the context it was created from or
 * switched to until it closes: connections in flight keep their
 * certificate across reloads.
 *
 * SNI: at the ClientHello, the current generation's table picks the host
 * (sws_table_tls_host: exact name, then a one-label wildcard); a host
 * without certificates, an unknown name or no SNI get the default
 * certificate, or without one the handshake fails with an alert
 * (unrecognized_name for a name, handshake_failure without). ALPN: "h2"
 * when the set speaks HTTP/2 (set->h2_proto), else "http/1.1".
 *
 * Caller: a worker, in its one thread. Nothing here logs above debug: a
 * failed handshake is the client's affair.
 */
#ifndef SWS_WORKER_TLS_H
#define SWS_WORKER_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "shm/table.h"
#include "shm/tickets.h"

typedef struct sws_conn sws_conn_t;
typedef struct sws_tls_gen sws_tls_gen_t;

/* The contexts of generation t (which must be the worker's current one
 * whenever a handshake runs: the SNI lookup reads it), their session
 * tickets sealed with keys (the region's, worker/tls_tickets.h; NULL:
 * OpenSSL's keys of this process) when t has session_tickets on. NULL with
 * err when a context cannot be built (out of memory; the table's pairs
 * were checked by the supervisor). */
sws_tls_gen_t *sws_tls_gen_build(const sws_table_t *t, const sws_tickets_t *keys, char *err,
                                 size_t errlen);

/* Drop the worker's references; connections keep theirs. NULL is fine. */
void sws_tls_gen_free(sws_tls_gen_t *g);

/* ---- a connection (conn.c): c->ssl, set->tls must be set ---- */

/* Start the server side of a handshake on c's fd. 0, or -1 (out of memory,
 * logged at error). */
int sws_tls_conn_start(sws_conn_t *c);

/* Drive the handshake: 1 done (the ALPN protocol is c's from now on), 0
 * waiting for the socket (c->tls_read_wants_write: for room), -1 failed
 * (logged at debug; the caller closes). */
int sws_tls_handshake(sws_conn_t *c);

/* As read(2) and send(2) on the plaintext: > 0 bytes; read 0 at the
 * client's close_notify or EOF; -1 with errno EAGAIN (the socket must
 * become readable or writable; c->tls_read_wants_write says a read waits
 * for room) or another errno (logged at debug). */
ssize_t sws_tls_read(sws_conn_t *c, void *buf, size_t n);
ssize_t sws_tls_write(sws_conn_t *c, const void *buf, size_t n);

/* 1 when the last read(2) OpenSSL made on c's socket was short or found it
 * empty, and OpenSSL holds no byte of c's input (decrypted or not): the
 * edge is drained, as after a short read(2) on a plain connection, and
 * another sws_tls_read would only find EAGAIN (ADR 0053). 0: read on. */
int sws_tls_drained(const sws_conn_t *c);

/* Give c's OpenSSL record buffers back, between turns (they come again
 * with its next read or write); nothing when they hold unread or unsent
 * bytes. The contexts keep them between requests (ADR 0063). */
void sws_tls_release_buffers(sws_conn_t *c);

/* Send close_notify, once, best effort (before shutdown(SHUT_WR) or
 * close); nothing after a fatal error or before the handshake is done. */
void sws_tls_shutdown(sws_conn_t *c);

/* Free c->ssl (the fd is conn.c's). */
void sws_tls_conn_free(sws_conn_t *c);

#endif
