/*
 * OpenSSL's failures as the rest of ScalWS reads them: the last error as a
 * sentence, and an SSL I/O call's result as a recv/send-like result with
 * errno. One reading for the client side (worker/tls.c), the member side
 * (worker/upstream_tls.c) and the PEM loaders (core/tls_pem.c).
 *
 * Any thread may call them; OpenSSL's error queue is per thread, and each
 * leaves the caller's emptied, so the next SSL_get_error on this thread
 * reads only its own call's state (a stale entry would be blamed on the
 * next connection).
 */
#ifndef SWS_CORE_TLS_ERR_H
#define SWS_CORE_TLS_ERR_H

#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* Empty the queue. OpenSSL 3's ERR_clear_error walks and frees all 16
 * slots even when nothing is queued (about 840 instructions, twice per
 * keep-alive TLS request before this), a peek at an empty queue costs a
 * tenth of that; call this, not ERR_clear_error, before each SSL I/O
 * call (ADR 0062). */
void sws_tls_err_reset(void);

/* The reason of the last failure in the queue (static text), or none when
 * the queue holds nothing; the queue is emptied. */
const char *sws_tls_reason(const char *none);

/* After an SSL I/O call on ssl returned r <= 0 (errno as the call left
 * it): -1 with errno EAGAIN when it waits for the socket (*wants_write,
 * when given, says whether for room); 0 at the peer's close_notify; else
 * -1 with the socket's errno, or EPROTO for TLS itself. A SSL_ERROR_SYSCALL
 * without errno (the peer closed without close_notify) reads as
 * eof_errno: 0 a close (return 0), else -1 with that errno; callers differ
 * on whether that is a close or a reset. *why, when given, gets the
 * failure as text when -1 is not EAGAIN. The queue is emptied. */
ssize_t sws_tls_io_result(SSL *ssl, int r, int eof_errno, uint8_t *wants_write,
                          const char **why);

#endif
