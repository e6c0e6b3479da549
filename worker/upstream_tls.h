/*
 * TLS to upstream members (a pool's `protocol: https`, docs/adr/0030):
 * the client side of OpenSSL under worker/upstream_conn.c, which owns the
 * SSL of a connection and routes its reads and writes here.
 *
 * Ownership: a worker's pool view (worker/upstream_pools.h) makes one
 * SSL_CTX per https pool per table generation and frees it with the view;
 * each SSL holds a reference to its SSL_CTX, so connections in flight and
 * idle ones outlive the generation that made them. Sessions offered for
 * resumption are owned by the caller's slot (one per member, in
 * upstream_conn.c). Worker only, in its one thread. No file is opened
 * here: the trust anchors come as PEM bytes from the table.
 *
 * I/O contract, the one of recv(2)/send(2) on a non-blocking socket, so
 * the proxy's loops stay as they are: > 0 bytes moved; 0 the member
 * closed (close_notify, or the TCP close without it: the HTTP framing
 * says whether the response was whole); -1 with errno EAGAIN (wait for
 * the next edge, whichever direction OpenSSL waits for: the fd is
 * registered for both), or EPROTO / the socket's errno for a broken
 * connection. A read fills buf until OpenSSL wants the socket (so, as with
 * recv on an edge-triggered fd, a short read means the socket is drained)
 * and leaves nothing decrypted behind it unless buf is full.
 */
#ifndef SWS_WORKER_UPSTREAM_TLS_H
#define SWS_WORKER_UPSTREAM_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_session_st SSL_SESSION;

/* What a new connection to one member needs (upstream_pools.c fills one
 * per member of an https pool). */
typedef struct sws_upstream_tls {
    SSL_CTX *ctx;         /* the pool's, this generation's */
    const char *sni;      /* sent as server_name; NULL: none (an IP literal) */
    const char *name;     /* the host name or IP the certificate must name; NULL: none */
    uint8_t verify;       /* 0: any certificate (tls.verify: false) */
    uint8_t alpn_h2;      /* offer ALPN "h2" alone (an h2 or grpc pool, ADR 0034) */
} sws_upstream_tls_t;

/* A client context: TLS 1.2 and later, the member's certificate verified
 * against the certificates of ca_pem (len bytes) when verify is set. NULL
 * with err set when ca_pem holds no certificate or memory runs out. */
SSL_CTX *sws_upstream_tls_ctx_new(const char *ca_pem, size_t len, int verify, char *err,
                                  size_t errlen);

void sws_upstream_tls_ctx_free(SSL_CTX *ctx);

/* A client SSL on the connected (or connecting) socket fd, offering
 * session (may be NULL) for resumption, and ALPN "h2" when t->alpn_h2.
 * NULL with err set. */
SSL *sws_upstream_tls_new(const sws_upstream_tls_t *t, int fd, SSL_SESSION *session, char *err,
                          size_t errlen);

void sws_upstream_tls_free(SSL *ssl);

/* One step of the handshake: 0 done, 1 waiting for the socket (either
 * direction), -1 failed with err set to why ("TLS handshake: certificate
 * verify failed: self-signed certificate"). */
int sws_upstream_tls_handshake(SSL *ssl, char *err, size_t errlen);

/* After the handshake of an SSL that offered "h2": 0 when the member
 * chose it, else -1 with err saying what it chose ("the member chose
 * \"http/1.1\" in ALPN, not h2"; "... chose no ALPN protocol ..."). A
 * member that ignores ALPN would read our HTTP/2 preface as garbage. */
int sws_upstream_tls_alpn_h2(SSL *ssl, char *err, size_t errlen);

ssize_t sws_upstream_tls_read(SSL *ssl, void *buf, size_t len);
ssize_t sws_upstream_tls_write(SSL *ssl, const void *buf, size_t len);

/* Send a close_notify (a tunnel's half-close), once; reading goes on. A
 * full socket loses it: the TCP FIN that follows still ends the stream
 * (the member reads an EOF without it, which HTTP framing tolerates). */
void sws_upstream_tls_close_notify(SSL *ssl);

/* Whether decrypted bytes wait inside ssl (no socket event will tell). */
int sws_upstream_tls_pending(SSL *ssl);

/* The session to offer next time, with a reference for the caller, or
 * NULL when this one cannot resume (TLS 1.3 before the member's ticket). */
SSL_SESSION *sws_upstream_tls_session(SSL *ssl);

/* Whether the handshake resumed a session (tests, debug logs). */
int sws_upstream_tls_resumed(SSL *ssl);

void sws_upstream_tls_session_free(SSL_SESSION *s);

#endif
