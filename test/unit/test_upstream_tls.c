/* worker/upstream_tls.c: the client side of TLS to a member, against an
 * OpenSSL server on the other end of a non-blocking socketpair, both
 * stepped by the test (no threads, no network). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "support/tls_pem.h"
#include "worker/upstream_tls.h"

typedef struct fixture {
    X509 *cert;
    EVP_PKEY *key;
    SSL_CTX *server_ctx;
    SSL_CTX *client_ctx; /* verifies against cert */
    int fd[2];           /* [0] ours (the client), [1] the member's */
    SSL *client, *server;
    int alpn_h2;         /* the client offers ALPN h2 */
    const char *choose;  /* the member's ALPN choice when offered; NULL: none (NOACK) */
    unsigned char offered[64]; /* what the member was offered, wire form */
    unsigned offered_len;
} fixture_t;

/* The member's ALPN: records the offer, answers f->choose (as a member
 * that speaks only that protocol: no overlap is no answer, as Python's
 * ssl and nghttpd without h2 do). */
static int member_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    fixture_t *f = arg;
    (void)ssl;
    f->offered_len = inlen < sizeof(f->offered) ? inlen : (unsigned)sizeof(f->offered);
    memcpy(f->offered, in, f->offered_len);
    for (unsigned i = 0; f->choose != NULL && i < inlen; i += 1u + in[i])
        if (in[i] == strlen(f->choose) && memcmp(in + i + 1, f->choose, in[i]) == 0) {
            *out = in + i + 1;
            *outlen = in[i];
            return SSL_TLSEXT_ERR_OK;
        }
    return SSL_TLSEXT_ERR_NOACK;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    char err[256];
    size_t len;
    test_cert_x509(1, "scalws-test", &f->cert, &f->key);
    f->server_ctx = SSL_CTX_new(TLS_server_method());
    assert_int_equal(SSL_CTX_use_certificate(f->server_ctx, f->cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(f->server_ctx, f->key), 1);
    SSL_CTX_set_alpn_select_cb(f->server_ctx, member_alpn, f);
    char *pem = test_pem_x509_text(f->cert, &len);
    f->client_ctx = sws_upstream_tls_ctx_new(pem, len, 1, err, sizeof(err));
    free(pem);
    assert_non_null(f->client_ctx);
    f->fd[0] = f->fd[1] = -1;
    *state = f;
    return 0;
}

static void pair_close(fixture_t *f)
{
    sws_upstream_tls_free(f->client);
    SSL_free(f->server);
    f->client = f->server = NULL;
    for (int i = 0; i < 2; i++)
        if (f->fd[i] >= 0)
            close(f->fd[i]);
    f->fd[0] = f->fd[1] = -1;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    pair_close(f);
    sws_upstream_tls_ctx_free(f->client_ctx);
    SSL_CTX_free(f->server_ctx);
    X509_free(f->cert);
    EVP_PKEY_free(f->key);
    free(f);
    return 0;
}

/* A new connection: the client's SSL for name, offering session. */
static void pair_open(fixture_t *f, const char *name, SSL_SESSION *session)
{
    char err[256];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f->fd), 0);
    sws_upstream_tls_t t = { .ctx = f->client_ctx, .name = name, .verify = 1,
                             .alpn_h2 = (uint8_t)f->alpn_h2 };
    f->client = sws_upstream_tls_new(&t, f->fd[0], session, err, sizeof(err));
    assert_non_null(f->client);
    f->server = SSL_new(f->server_ctx);
    SSL_set_fd(f->server, f->fd[1]);
    SSL_set_accept_state(f->server);
}

/* Step both sides until the client's handshake ends: its result, err
 * filled on failure. */
static int handshake(fixture_t *f, char *err, size_t errlen)
{
    for (int i = 0; i < 100; i++) {
        int rc = sws_upstream_tls_handshake(f->client, err, errlen);
        if (rc <= 0)
            return rc;
        SSL_do_handshake(f->server);
    }
    fail_msg("the handshake did not end in 100 steps");
    return -1;
}

static void server_write(fixture_t *f, const char *p, size_t n)
{
    size_t w = 0;
    assert_int_equal(SSL_write_ex(f->server, p, n, &w), 1);
    assert_int_equal(w, n);
}

static void test_refuses_a_ca_without_certificates(void **state)
{
    fixture_t *f = *state;
    char err[128] = "", *broken;
    size_t len;
    char *pem = test_pem_x509_text(f->cert, &len);
    static const char bad[] = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    assert_null(sws_upstream_tls_ctx_new("nothing\n", 8, 1, err, sizeof(err)));
    assert_string_equal(err, "no CA certificate to verify the members with: "
                             "holds no PEM certificate");
    /* A good certificate then a broken one: refused, as the RouteSet
     * checker refuses it (one loader, core/tls_pem.h). */
    broken = malloc(len + sizeof(bad));
    assert_non_null(broken);
    memcpy(broken, pem, len);
    memcpy(broken + len, bad, sizeof(bad));
    assert_null(sws_upstream_tls_ctx_new(broken, len + sizeof(bad) - 1, 1, err, sizeof(err)));
    assert_string_equal(err, "no CA certificate to verify the members with: a certificate in "
                             "it does not parse (expected PEM certificates)");
    free(broken);
    free(pem);
    SSL_CTX *ctx = sws_upstream_tls_ctx_new("", 0, 0, err, sizeof(err));
    assert_non_null(ctx); /* verify off: no CA needed */
    sws_upstream_tls_ctx_free(ctx);
}

/* A read takes every record the socket holds, up to len, so that a
 * short read means "the socket is drained" (edge-triggered rule); a
 * full one may leave decrypted bytes behind: pending says so. */
static void test_read_drains_the_socket_or_fills_the_buffer(void **state)
{
    fixture_t *f = *state;
    char err[256], buf[8192], big[5000];
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_int_equal(sws_upstream_tls_write(f->client, "ping", 4), 4);
    assert_int_equal(SSL_read(f->server, buf, sizeof(buf)), 4);
    for (int i = 0; i < 3; i++)
        server_write(f, "0123456789", 10); /* three records */
    assert_int_equal(sws_upstream_tls_read(f->client, buf, sizeof(buf)), 30);
    assert_int_equal(sws_upstream_tls_read(f->client, buf, sizeof(buf)), -1);
    assert_int_equal(errno, EAGAIN);
    memset(big, 'b', sizeof(big));
    server_write(f, big, sizeof(big));
    assert_int_equal(sws_upstream_tls_read(f->client, buf, 100), 100);
    assert_true(sws_upstream_tls_pending(f->client));
    assert_int_equal(sws_upstream_tls_read(f->client, buf, sizeof(buf)), sizeof(big) - 100);
    assert_false(sws_upstream_tls_pending(f->client));
    /* The member's close_notify reads as a close. */
    SSL_shutdown(f->server);
    assert_int_equal(sws_upstream_tls_read(f->client, buf, sizeof(buf)), 0);
}

static void test_wrong_name_fails_the_handshake_with_the_reason(void **state)
{
    fixture_t *f = *state;
    char err[256];
    pair_open(f, "other.test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), -1);
    assert_string_equal(err, "TLS handshake: certificate verify failed: hostname mismatch");
}

static void test_not_tls_fails_the_handshake(void **state)
{
    fixture_t *f = *state;
    char err[256];
    static const char answer[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(sws_upstream_tls_handshake(f->client, err, sizeof(err)), 1);
    assert_int_equal(write(f->fd[1], answer, sizeof(answer) - 1), (ssize_t)sizeof(answer) - 1);
    assert_int_equal(sws_upstream_tls_handshake(f->client, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "TLS handshake: "));
}

/* The session of a connection that read the member's ticket resumes on
 * the next connection. */
static void test_session_resumes(void **state)
{
    fixture_t *f = *state;
    char err[256], buf[64];
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_false(sws_upstream_tls_resumed(f->client));
    server_write(f, "x", 1); /* after the tickets the handshake sent */
    assert_int_equal(sws_upstream_tls_read(f->client, buf, sizeof(buf)), 1);
    SSL_SESSION *s = sws_upstream_tls_session(f->client);
    assert_non_null(s);
    pair_close(f);
    pair_open(f, "scalws-test", s);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_true(sws_upstream_tls_resumed(f->client));
    sws_upstream_tls_session_free(s);
}

/* An h2 pool's connection offers h2 alone, and a member that chooses it
 * passes the check. */
static void test_alpn_offers_h2_alone_and_takes_it(void **state)
{
    fixture_t *f = *state;
    char err[256];
    f->alpn_h2 = 1;
    f->choose = "h2";
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_int_equal(f->offered_len, 3);
    assert_memory_equal(f->offered, "\2h2", 3);
    assert_int_equal(sws_upstream_tls_alpn_h2(f->client, err, sizeof(err)), 0);
}

/* A member that speaks only HTTP/1.1 over TLS answers no ALPN: the
 * handshake succeeds, the check fails and says what the member chose. */
static void test_alpn_member_without_h2_is_refused_by_the_check(void **state)
{
    fixture_t *f = *state;
    char err[256];
    f->alpn_h2 = 1;
    f->choose = "http/1.1";
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_int_equal(sws_upstream_tls_alpn_h2(f->client, err, sizeof(err)), -1);
    assert_string_equal(err, "the member chose no ALPN protocol, not h2 (it offers no HTTP/2 "
                             "over TLS)");
}

/* An https pool's connection (HTTP/1.1) offers no ALPN, as before. */
static void test_no_alpn_unless_asked(void **state)
{
    fixture_t *f = *state;
    char err[256];
    f->choose = "h2";
    pair_open(f, "scalws-test", NULL);
    assert_int_equal(handshake(f, err, sizeof(err)), 0);
    assert_int_equal(f->offered_len, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refuses_a_ca_without_certificates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_drains_the_socket_or_fills_the_buffer, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wrong_name_fails_the_handshake_with_the_reason,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_tls_fails_the_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alpn_offers_h2_alone_and_takes_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alpn_member_without_h2_is_refused_by_the_check,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_alpn_unless_asked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
