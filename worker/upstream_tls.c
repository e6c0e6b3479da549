/* TLS to upstream members (upstream_tls.h). */
#include "worker/upstream_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/err.h"
#include "core/tls_err.h"
#include "core/tls_pem.h"

SSL_CTX *sws_upstream_tls_ctx_new(const char *ca_pem, size_t len, int verify, char *err,
                                  size_t errlen)
{
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return sws_errf(err, errlen, "SSL_CTX_new: %s", sws_tls_reason("unknown error")), NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A member that closes without close_notify reads as a close: the
     * HTTP framing tells a whole response from a cut one, as over TCP. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    /* Short writes like send(2); the proxy's body buffer may move between
     * two tries; an idle pooled connection holds no record buffers. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    /* Sessions are kept per member by upstream_conn.c, not in a cache;
     * the client mode makes OpenSSL keep TLS 1.3 tickets on the SSL. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
    if (!verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        return ctx;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* The RouteSet checker accepted these bytes through the same loader. */
    if (sws_tls_pem_ca_load(SSL_CTX_get_cert_store(ctx), ca_pem, len, why, sizeof(why)) < 0) {
        SSL_CTX_free(ctx);
        return sws_errf(err, errlen, "no CA certificate to verify the members with: %s", why),
               NULL;
    }
    return ctx;
}

void sws_upstream_tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

static int is_ip(const char *name)
{
    unsigned char a[16];
    return inet_pton(AF_INET, name, a) == 1 || inet_pton(AF_INET6, name, a) == 1;
}

SSL *sws_upstream_tls_new(const sws_upstream_tls_t *t, int fd, SSL_SESSION *session, char *err,
                          size_t errlen)
{
    ERR_clear_error();
    SSL *ssl = SSL_new(t->ctx);
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 ||
        (t->sni != NULL && SSL_set_tlsext_host_name(ssl, t->sni) != 1))
        goto fail;
    if (t->verify && t->name != NULL) {
        int ok = is_ip(t->name) ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name)
                                : SSL_set1_host(ssl, t->name);
        if (ok != 1)
            goto fail;
    }
    /* h2 alone: a member that can only speak HTTP/1.1 over TLS must not
     * be sent a preface (RFC 9113 3.2: h2 over TLS is chosen by ALPN). */
    static const unsigned char h2[] = { 2, 'h', '2' };
    if (t->alpn_h2 && SSL_set_alpn_protos(ssl, h2, sizeof(h2)) != 0) /* 0 is success */
        goto fail;
    if (session != NULL)
        SSL_set_session(ssl, session); /* a refusal only costs the resumption */
    SSL_set_connect_state(ssl);
    ERR_clear_error();
    return ssl;
fail:
    sws_errf(err, errlen, "TLS setup: %s", sws_tls_reason("unknown error"));
    SSL_free(ssl);
    return NULL;
}

void sws_upstream_tls_free(SSL *ssl)
{
    /* Closed without close_notify (an idle keep-alive connection, as
     * nginx closes its own): marked shut down, or SSL_free takes the
     * session for a broken one and makes it unresumable, the copy the
     * member's slot keeps too. */
    if (ssl != NULL && SSL_is_init_finished(ssl))
        SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
}

int sws_upstream_tls_handshake(SSL *ssl, char *err, size_t errlen)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl);
    if (rc == 1)
        return 0;
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 1;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            ERR_clear_error();
            return sws_errf(err, errlen, "TLS handshake: %s",
                            errno != 0 ? strerror(errno) : "the member closed the connection");
        }
        break;
    default:
        break;
    }
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
        ERR_clear_error();
        return sws_errf(err, errlen, "TLS handshake: certificate verify failed: %s",
                        X509_verify_cert_error_string(v));
    }
    return sws_errf(err, errlen, "TLS handshake: %s", sws_tls_reason("unknown error"));
}

int sws_upstream_tls_alpn_h2(SSL *ssl, char *err, size_t errlen)
{
    const unsigned char *p = NULL;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &p, &len);
    if (len == 2 && memcmp(p, "h2", 2) == 0)
        return 0;
    if (len == 0)
        return sws_errf(err, errlen, "the member chose no ALPN protocol, not h2 (it offers no "
                                     "HTTP/2 over TLS)");
    return sws_errf(err, errlen, "the member chose \"%.*s\" in ALPN, not h2", (int)len,
                    (const char *)p);
}

/* Whether an SSL call that failed only waits for the socket: errno
 * EAGAIN. Otherwise errno says what broke (EPROTO for TLS itself). */
static ssize_t failed_io(SSL *ssl, int rc)
{
    /* A member gone without close_notify mid-record is a reset (a clean
     * end is a close: SSL_OP_IGNORE_UNEXPECTED_EOF). */
    return sws_tls_io_result(ssl, rc, ECONNRESET, NULL, NULL);
}

ssize_t sws_upstream_tls_read(SSL *ssl, void *buf, size_t len)
{
    size_t got = 0;
    /* SSL_read returns a record at a time: read on until buf is full or
     * OpenSSL wants the socket, so that a short read means what it means
     * for recv on an edge-triggered fd. What stopped the loop after some
     * bytes comes again on the next call (OpenSSL's state keeps it). */
    while (got < len) {
        size_t n = 0;
        ERR_clear_error();
        int rc = SSL_read_ex(ssl, (char *)buf + got, len - got, &n);
        if (rc == 1) {
            got += n;
            continue;
        }
        if (got > 0) {
            ERR_clear_error();
            break;
        }
        return failed_io(ssl, rc);
    }
    return (ssize_t)got;
}

ssize_t sws_upstream_tls_write(SSL *ssl, const void *buf, size_t len)
{
    size_t n = 0;
    if (len == 0)
        return 0;
    ERR_clear_error();
    int rc = SSL_write_ex(ssl, buf, len, &n);
    if (rc == 1)
        return (ssize_t)n;
    return failed_io(ssl, rc);
}

void sws_upstream_tls_close_notify(SSL *ssl)
{
    ERR_clear_error();
    SSL_shutdown(ssl);
    ERR_clear_error();
}

int sws_upstream_tls_pending(SSL *ssl)
{
    return SSL_pending(ssl) > 0;
}

SSL_SESSION *sws_upstream_tls_session(SSL *ssl)
{
    SSL_SESSION *s = SSL_get0_session(ssl);
    if (s == NULL || !SSL_SESSION_is_resumable(s))
        return NULL;
    SSL_SESSION_up_ref(s);
    return s;
}

int sws_upstream_tls_resumed(SSL *ssl)
{
    return SSL_session_reused(ssl);
}

void sws_upstream_tls_session_free(SSL_SESSION *s)
{
    SSL_SESSION_free(s);
}
