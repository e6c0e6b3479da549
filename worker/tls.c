#include "worker/tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/err.h"
#include "core/log.h"
#include "core/tls_err.h"
#include "core/tls_pem.h"
#include "worker/conn.h"
#include "worker/tls_tickets.h"

struct sws_tls_gen {
    SSL_CTX *base;        /* settings, default certificate if any; SNI and ALPN callbacks */
    SSL_CTX **hosts;      /* per table host; NULL: it has no certificates */
    uint32_t nhosts;
    int has_default;
};

static int sock_method_init(char *err, size_t errlen);

/* ALPN identifiers, in the wire's length-prefixed form. */
static const unsigned char alpn_h2[] = { 2, 'h', '2' };
static const unsigned char alpn_http11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
static const unsigned char alpn_http10[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '0' };

/* SNI: the current generation (a reload may have come since this
 * connection was accepted) picks the context; ADR 0033. */
static int on_servername(SSL *ssl, int *alert, void *arg)
{
    (void)arg; /* the generation the connection started with may be gone */
    sws_conn_t *c = SSL_get_app_data(ssl);
    const sws_tls_gen_t *g = c->set->tls;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    SSL_CTX *ctx = g != NULL && g->has_default ? g->base : NULL;

    if (g == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    if (name != NULL && c->set->table != NULL) {
        uint32_t h = sws_table_tls_host(c->set->table, name, strlen(name));
        if (h != 0 && h <= g->nhosts && g->hosts[h - 1] != NULL)
            ctx = g->hosts[h - 1];
    }
    if (ctx == NULL) {
        *alert = name != NULL ? SSL_AD_UNRECOGNIZED_NAME : SSL_AD_HANDSHAKE_FAILURE;
        sws_log_debug("client %s: TLS: no certificate for %s%s%s", sws_conn_peer_text(c),
                      name != NULL ? "\"" : "", name != NULL ? name : "a client without SNI",
                      name != NULL ? "\"" : "");
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    if (SSL_get_SSL_CTX(ssl) != ctx && SSL_set_SSL_CTX(ssl, ctx) == NULL) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

/* ALPN: h2 first when the set speaks it, else http/1.1 (or http/1.0, as
 * nginx takes it: both are served as HTTP/1). A client that offers ALPN
 * but none of these gets the fatal no_application_protocol alert (RFC 7301
 * 3.2; nginx since 1.21.4): a connection meant for another protocol on the
 * same certificate is not served HTTP (the ALPACA attack). */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)arg;
    sws_conn_t *c = SSL_get_app_data(ssl);
    unsigned char *sel;

    if (c->set->h2_proto != NULL &&
        SSL_select_next_proto(&sel, outlen, alpn_h2, sizeof(alpn_h2), in, inlen) ==
            OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    if (SSL_select_next_proto(&sel, outlen, alpn_http11, sizeof(alpn_http11), in, inlen) ==
            OPENSSL_NPN_NEGOTIATED ||
        SSL_select_next_proto(&sel, outlen, alpn_http10, sizeof(alpn_http10), in, inlen) ==
            OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* A context with generation t's settings; its tickets sealed with keys
 * (the region's, shared by every worker) when t has tickets on. */
static SSL_CTX *ctx_new(const sws_table_t *t, const sws_tickets_t *keys, char *err,
                        size_t errlen)
{
    const sws_tls_settings_t *ts = sws_table_tls(t);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        sws_errf(err, errlen, "TLS context: %s", sws_tls_reason("unknown error"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, (ts->protocols & SWS_TLS_PROTO_1_2) ? TLS1_2_VERSION
                                                                          : TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, (ts->protocols & SWS_TLS_PROTO_1_3) ? TLS1_3_VERSION
                                                                          : TLS1_2_VERSION);
    /* Checked by the supervisor (sws_routeset_check). */
    SSL_CTX_set_cipher_list(ctx, sws_table_str(t, ts->ciphers));
    SSL_CTX_set_ciphersuites(ctx, sws_table_str(t, ts->ciphersuites));
    /* No renegotiation (a client-driven CPU cost, CVE-2011-1473), the
     * server's cipher order, EOF without close_notify read as an EOF (most
     * clients do it), no compression (CRIME). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION);
    if (!ts->session_tickets) {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    } else if (keys != NULL &&
               sws_tls_tickets_attach(ctx, keys, ts->ticket_key_rotation_ms, err, errlen) < 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* One TLS 1.3 ticket after a full handshake, not OpenSSL's two: each
     * costs a session encoding, its sealing, a record and a write(2), and
     * every resumption brings a fresh one (ADR 0054). */
    SSL_CTX_set_num_tickets(ctx, 1);
    /* conn.c retries a write with the rest of its output, which may have
     * moved (a compaction); partial writes keep the loop's budget. No
     * SSL_MODE_RELEASE_BUFFERS: it frees and allocates 34 KiB of record
     * buffers around every request; conn.c gives them back once a
     * connection is idle for a while (sws_tls_release_buffers, ADR 0063). */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* One read(2) per batch of records instead of two per record (its
     * header, then its body); conn.c stops reading once that read(2) was
     * short and OpenSSL holds nothing more (sws_tls_drained, ADR 0053), so
     * bytes read ahead are never left waiting for an edge. */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* On every context: OpenSSL asks the one SNI switched to for ALPN. */
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
    return ctx;
}

/* A context holding certs[0, n). */
static SSL_CTX *ctx_with_certs(const sws_table_t *t, const sws_tcert_t *certs, uint32_t n,
                               SSL_CTX *ctx, char *err, size_t errlen)
{
    sws_tls_pem_part_t part;
    int type;

    for (uint32_t i = 0; i < n; i++) {
        if (sws_tls_pem_use(ctx, sws_table_str(t, certs[i].cert_pem), certs[i].cert_pem.len,
                            sws_table_str(t, certs[i].key_pem), certs[i].key_pem.len, &type,
                            &part, err, errlen) < 0) {
            SSL_CTX_free(ctx);
            return NULL;
        }
    }
    return ctx;
}

sws_tls_gen_t *sws_tls_gen_build(const sws_table_t *t, const sws_tickets_t *keys, char *err,
                                 size_t errlen)
{
    sws_tls_gen_t *g = calloc(1, sizeof(*g));
    const sws_tcert_t *def = sws_table_default_cert(t);

    if (g == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    if (sock_method_init(err, errlen) < 0) {
        free(g);
        return NULL;
    }
    g->nhosts = sws_table_host_count(t);
    g->hosts = calloc(g->nhosts ? g->nhosts : 1, sizeof(*g->hosts));
    g->base = ctx_new(t, keys, err, errlen);
    if (g->hosts == NULL || g->base == NULL ||
        (def != NULL && (g->base = ctx_with_certs(t, def, 1, g->base, err, errlen)) == NULL))
        goto fail;
    g->has_default = def != NULL;
    for (uint32_t h = 0; h < g->nhosts; h++) {
        uint32_t n;
        const sws_tcert_t *certs = sws_table_host_certs(t, h, &n);
        if (n == 0)
            continue;
        SSL_CTX *ctx = ctx_new(t, keys, err, errlen);
        if (ctx == NULL || (g->hosts[h] = ctx_with_certs(t, certs, n, ctx, err, errlen)) == NULL)
            goto fail;
    }
    return g;
fail:
    if (g->hosts == NULL)
        sws_errf(err, errlen, "out of memory");
    sws_tls_gen_free(g);
    return NULL;
}

void sws_tls_gen_free(sws_tls_gen_t *g)
{
    if (g == NULL)
        return;
    for (uint32_t h = 0; g->hosts != NULL && h < g->nhosts; h++)
        SSL_CTX_free(g->hosts[h]);
    free(g->hosts);
    SSL_CTX_free(g->base);
    free(g);
}

/* The client socket's BIO (ADR 0053, 0062): OpenSSL's socket BIO with
 * our read and write, which make the read(2) and see whether it drained
 * the socket: a read shorter than asked, or EAGAIN, did, as a short read(2)
 * does on a plain connection (OpenSSL reads ahead as much as its buffer
 * takes, so a full read may leave more behind). Not a callback on the
 * socket BIO: OpenSSL calls one around each of the dozen BIO_ctrl a
 * request makes, about 800 instructions per request. */
static int sock_read(BIO *b, char *out, size_t len, size_t *done)
{
    sws_conn_t *c = BIO_get_data(b);
    ssize_t n;

    do
        n = read(c->io.fd, out, len);
    while (n < 0 && errno == EINTR);
    BIO_clear_retry_flags(b);
    c->tls_socket_drained = n < 0 || (size_t)n < len;
    *done = n > 0 ? (size_t)n : 0;
    if (n > 0)
        return 1;
    if (n == 0)
        BIO_set_flags(b, BIO_FLAGS_IN_EOF); /* BIO_eof: SSL_OP_IGNORE_UNEXPECTED_EOF reads it */
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
        BIO_set_retry_read(b);
    return 0;
}

static int sock_write(BIO *b, const char *in, size_t len, size_t *done)
{
    sws_conn_t *c = BIO_get_data(b);
    ssize_t n;

    do
        n = send(c->io.fd, in, len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    BIO_clear_retry_flags(b);
    *done = n > 0 ? (size_t)n : 0;
    if (n > 0)
        return 1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return 0;
}

/* Made once per process, at the first generation (a worker's one thread),
 * and never changed or freed after: every connection's BIO points at it,
 * across generations, as at OpenSSL's own static methods. */
static BIO_METHOD *sock_method;

static int sock_method_init(char *err, size_t errlen)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m;

    if (sock_method != NULL)
        return 0;
    m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                     "scalws client socket");
    if (m == NULL || !BIO_meth_set_read_ex(m, sock_read) || !BIO_meth_set_write_ex(m, sock_write) ||
        !BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) ||
        !BIO_meth_set_create(m, BIO_meth_get_create(sock)) ||
        !BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock))) {
        BIO_meth_free(m);
        return sws_errf(err, errlen, "TLS socket BIO: %s", sws_tls_reason("out of memory"));
    }
    sock_method = m;
    return 0;
}

int sws_tls_conn_start(sws_conn_t *c)
{
    SSL *ssl = SSL_new(c->set->tls->base);
    BIO *bio = ssl != NULL ? BIO_new(sock_method) : NULL;

    if (bio == NULL) {
        sws_log_error("client %s: TLS: %s", sws_conn_peer_text(c), sws_tls_reason("unknown error"));
        SSL_free(ssl);
        return -1;
    }
    /* The socket BIO's ctrl keeps the fd (BIO_get_fd), the data is ours. */
    BIO_set_fd(bio, c->io.fd, BIO_NOCLOSE);
    BIO_set_data(bio, c);
    SSL_set_bio(ssl, bio, bio); /* one BIO for both directions, as SSL_set_fd */
    SSL_set_app_data(ssl, c);
    SSL_set_accept_state(ssl);
    c->ssl = ssl;
    c->tls_handshaking = 1;
    return 0;
}

/* After an SSL call returned r <= 0: -1 with errno EAGAIN when it waits
 * for the socket (*wants_write: for room), else -1 with another errno, or
 * 0 at the peer's close. */
static ssize_t ssl_result(sws_conn_t *c, int r, const char *what, uint8_t *wants_write)
{
    const char *why;
    /* A client gone without close_notify reads as a close. */
    ssize_t rc = sws_tls_io_result(c->ssl, r, 0, wants_write, &why);
    int saved = errno;

    if (rc < 0 && saved != EAGAIN) {
        /* After a fatal error no close_notify may be sent (SSL_shutdown). */
        SSL_set_quiet_shutdown(c->ssl, 1);
        sws_log_debug("client %s: TLS %s: %s", sws_conn_peer_text(c), what, why);
        errno = saved;
    }
    return rc;
}

int sws_tls_handshake(sws_conn_t *c)
{
    const unsigned char *alpn;
    unsigned alpn_len;

    sws_tls_err_reset();
    c->tls_read_wants_write = 0;
    int r = SSL_do_handshake(c->ssl);
    if (r != 1) {
        ssize_t rc = ssl_result(c, r, "handshake", &c->tls_read_wants_write);
        if (rc < 0 && errno == EAGAIN)
            return 0;
        if (rc == 0)
            sws_log_debug("client %s: TLS handshake: closed by the client",
                          sws_conn_peer_text(c));
        return -1;
    }
    c->tls_handshaking = 0;
    SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
    if (c->set->h2_proto != NULL && alpn_len == alpn_h2[0] &&
        memcmp(alpn, alpn_h2 + 1, alpn_len) == 0)
        sws_conn_switch_proto(c, c->set->h2_proto, NULL);
    return 1;
}

ssize_t sws_tls_read(sws_conn_t *c, void *buf, size_t n)
{
    sws_tls_err_reset();
    c->tls_read_wants_write = 0;
    int r = SSL_read(c->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    return ssl_result(c, r, "read", &c->tls_read_wants_write);
}

int sws_tls_drained(const sws_conn_t *c)
{
    /* SSL_has_pending also counts a record not yet whole: then one more
     * SSL_read finds the socket empty, which is rare and still correct. */
    return c->tls_socket_drained && !SSL_has_pending(c->ssl);
}

ssize_t sws_tls_write(sws_conn_t *c, const void *buf, size_t n)
{
    sws_tls_err_reset();
    int r = SSL_write(c->ssl, buf, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    ssize_t rc = ssl_result(c, r, "write", NULL);
    if (rc == 0)
        errno = EPIPE; /* a write has no EOF: the client is gone */
    return -1;
}

void sws_tls_release_buffers(sws_conn_t *c)
{
    /* 0 when bytes are pending: they stay, as OpenSSL would keep them. */
    (void)SSL_free_buffers(c->ssl);
}

void sws_tls_shutdown(sws_conn_t *c)
{
    if (c->ssl == NULL || c->tls_handshaking || (SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN))
        return;
    sws_tls_err_reset();
    SSL_shutdown(c->ssl); /* one try: the linger and close follow anyway */
    sws_tls_err_reset();
}

void sws_tls_conn_free(sws_conn_t *c)
{
    SSL_free(c->ssl);
    c->ssl = NULL;
    c->tls_handshaking = 0;
    c->tls_read_wants_write = 0;
    c->tls_socket_drained = 0;
}
