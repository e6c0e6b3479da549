/* worker/tls_tickets.c: sessions sealed with the shared key ring resume on
 * another worker's context, across a rotation, and fall back to a full
 * handshake when their key is gone. Two SSL_CTX stand for two workers; the
 * handshakes run over in-memory BIO pairs, with a certificate made here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "shm/tickets.h"
#include "support/tls_pem.h"
#include "worker/tls_tickets.h"

#define HOUR_MS (3600u * 1000u)
/* Each side steps at most this often: a handshake takes 2 to 4 rounds. */
#define HANDSHAKE_ROUNDS 32

typedef struct fixture {
    sws_tickets_t *keys; /* as in the region: one block, two workers */
    SSL_CTX *worker_a, *worker_b, *client;
    EVP_PKEY *pkey;
    X509 *cert;
} fixture_t;

/* The client's latest ticket (the new-session callback). */
static SSL_SESSION *last_ticket;

static int keep_ticket(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    SSL_SESSION_free(last_ticket);
    last_ticket = sess;
    return 1; /* we own it now */
}

static SSL_CTX *server_ctx(fixture_t *f)
{
    char err[256] = "";
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate(ctx, f->cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, f->pkey), 1);
    if (sws_tls_tickets_attach(ctx, f->keys, HOUR_MS, err, sizeof(err)) != 0)
        fail_msg("attach: %s", err);
    return ctx;
}

static int setup(void **state)
{
    char err[256] = "";
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->keys = aligned_alloc(64, sizeof(*f->keys));
    assert_non_null(f->keys);
    memset(f->keys, 0, sizeof(*f->keys));
    if (sws_tickets_init(f->keys, 1000, HOUR_MS, err, sizeof(err)) != 0)
        fail_msg("init: %s", err);
    test_cert_x509(1, "localhost", &f->cert, &f->pkey);
    f->worker_a = server_ctx(f);
    f->worker_b = server_ctx(f);
    f->client = SSL_CTX_new(TLS_client_method());
    assert_non_null(f->client);
    SSL_CTX_set_session_cache_mode(f->client,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(f->client, keep_ticket);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    SSL_SESSION_free(last_ticket);
    last_ticket = NULL;
    SSL_CTX_free(f->worker_a);
    SSL_CTX_free(f->worker_b);
    SSL_CTX_free(f->client);
    X509_free(f->cert);
    EVP_PKEY_free(f->pkey);
    free(f->keys);
    free(f);
    return 0;
}

static int stepped(SSL *ssl, int *done)
{
    if (*done)
        return 1;
    int rc = SSL_do_handshake(ssl);
    if (rc == 1) {
        *done = 1;
        return 1;
    }
    int e = SSL_get_error(ssl, rc);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/* One connection from the client to server ctx, offering `offer` (may be
 * NULL), with TLS at most max_version. Returns 1 when the server resumed
 * the session. The tickets the server sent are in last_ticket (NULL when
 * it sent none). */
static int connect_once(fixture_t *f, SSL_CTX *server, SSL_SESSION *offer, int max_version)
{
    SSL *c = SSL_new(f->client), *s = SSL_new(server);
    BIO *cb, *sb;
    assert_non_null(c);
    assert_non_null(s);
    assert_int_equal(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
    SSL_set_bio(c, cb, cb);
    SSL_set_bio(s, sb, sb);
    assert_int_equal(SSL_set_max_proto_version(c, max_version), 1);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    if (offer != NULL)
        assert_int_equal(SSL_set_session(c, offer), 1);
    SSL_SESSION_free(last_ticket);
    last_ticket = NULL;

    int cdone = 0, sdone = 0, round = 0;
    for (; round < HANDSHAKE_ROUNDS && !(cdone && sdone); round++) {
        if (!stepped(c, &cdone) || !stepped(s, &sdone)) {
            ERR_print_errors_fp(stderr);
            fail_msg("handshake failed at round %d", round);
        }
    }
    if (!(cdone && sdone))
        fail_msg("handshake not done after %d rounds", HANDSHAKE_ROUNDS);
    /* TLS 1.3 tickets come after the handshake: the client reads them. */
    char byte;
    assert_true(SSL_read(c, &byte, 1) <= 0);
    int reused = SSL_session_reused(s);
    /* A TLS 1.2 client reports no ticket that renews a resumed session: it
     * is in the session the connection ends with. */
    SSL_SESSION *now = SSL_get1_session(c);
    if (last_ticket == NULL && now != offer && now != NULL && SSL_SESSION_has_ticket(now))
        last_ticket = now;
    else
        SSL_SESSION_free(now);
    /* A client freed without a shutdown marks its session not resumable. */
    SSL_set_shutdown(c, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c);
    SSL_free(s);
    return reused;
}

static const unsigned char *ticket_key_name(const SSL_SESSION *sess)
{
    const unsigned char *tick;
    size_t len;
    SSL_SESSION_get0_ticket(sess, &tick, &len);
    assert_true(len > SWS_TICKET_NAME_LEN);
    return tick; /* RFC 5077's layout: the key name first */
}

static SSL_SESSION *take_ticket(void)
{
    SSL_SESSION *s = last_ticket;
    if (s == NULL)
        fail_msg("the server issued no ticket");
    last_ticket = NULL;
    return s;
}

static void current_key(const fixture_t *f, sws_ticket_key_t *out)
{
    sws_tickets_snapshot_t s;
    assert_int_equal(sws_tickets_read(f->keys, &s), 0);
    *out = s.keys[0];
}

static void rotate(fixture_t *f)
{
    char err[256] = "";
    if (sws_tickets_rotate(f->keys, 2000, err, sizeof(err)) != 0)
        fail_msg("rotate: %s", err);
}

static void resumes_on_another_worker(void **state, int version)
{
    fixture_t *f = *state;
    sws_ticket_key_t k;
    current_key(f, &k);
    assert_int_equal(connect_once(f, f->worker_a, NULL, version), 0);
    SSL_SESSION *sess = take_ticket();
    assert_memory_equal(ticket_key_name(sess), k.name, SWS_TICKET_NAME_LEN);
    assert_int_equal(connect_once(f, f->worker_b, sess, version), 1);
    SSL_SESSION_free(sess);
}

/* TLS 1.3: a resumption under the current key gets a new ticket too
 * (single-use tickets; and the client's request is not held by Nagle for
 * our delayed ACK). TLS 1.2 keeps its ticket. */
static void test_tls13_resumption_gets_a_new_ticket(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(connect_once(f, f->worker_a, NULL, TLS1_3_VERSION), 0);
    SSL_SESSION *first = take_ticket();
    assert_int_equal(connect_once(f, f->worker_b, first, TLS1_3_VERSION), 1);
    SSL_SESSION *second = take_ticket();
    assert_ptr_not_equal(first, second);
    SSL_SESSION_free(first);
    SSL_SESSION_free(second);
}

static void test_tls13_session_resumes_on_another_worker(void **state)
{
    resumes_on_another_worker(state, TLS1_3_VERSION);
}

static void test_tls12_session_resumes_on_another_worker(void **state)
{
    resumes_on_another_worker(state, TLS1_2_VERSION);
}

/* TLS 1.2 replaces a ticket only when asked to: the renewal is ours. */
static void previous_key_resumes_and_renews(void **state, int version)
{
    fixture_t *f = *state;
    assert_int_equal(connect_once(f, f->worker_a, NULL, version), 0);
    SSL_SESSION *old = take_ticket();
    rotate(f);
    sws_ticket_key_t k;
    current_key(f, &k);
    assert_int_equal(connect_once(f, f->worker_b, old, version), 1);
    SSL_SESSION *renewed = take_ticket();
    assert_memory_equal(ticket_key_name(renewed), k.name, SWS_TICKET_NAME_LEN);
    assert_int_equal(connect_once(f, f->worker_a, renewed, version), 1);
    SSL_SESSION_free(renewed);
    SSL_SESSION_free(old);
}

static void test_tls12_ticket_under_previous_key_resumes_and_is_renewed(void **state)
{
    previous_key_resumes_and_renews(state, TLS1_2_VERSION);
}

static void test_tls13_ticket_under_previous_key_resumes_and_is_renewed(void **state)
{
    previous_key_resumes_and_renews(state, TLS1_3_VERSION);
}

static void gone_key_costs_a_full_handshake(void **state, int version)
{
    fixture_t *f = *state;
    assert_int_equal(connect_once(f, f->worker_a, NULL, version), 0);
    SSL_SESSION *old = take_ticket();
    for (unsigned i = 0; i < SWS_TICKETS_KEYS; i++)
        rotate(f);
    sws_ticket_key_t k;
    current_key(f, &k);
    assert_int_equal(connect_once(f, f->worker_b, old, version), 0);
    SSL_SESSION *fresh = take_ticket();
    assert_memory_equal(ticket_key_name(fresh), k.name, SWS_TICKET_NAME_LEN);
    SSL_SESSION_free(fresh);
    SSL_SESSION_free(old);
}

static void test_tls13_ticket_whose_key_left_the_ring_gets_a_full_handshake(void **state)
{
    gone_key_costs_a_full_handshake(state, TLS1_3_VERSION);
}

static void test_tls12_ticket_whose_key_left_the_ring_gets_a_full_handshake(void **state)
{
    gone_key_costs_a_full_handshake(state, TLS1_2_VERSION);
}

/* The supervisor caught mid-rotation: no key is used, and the handshake
 * still succeeds. */
static void test_ring_being_rewritten_costs_a_full_handshake(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(connect_once(f, f->worker_a, NULL, TLS1_3_VERSION), 0);
    SSL_SESSION *sess = take_ticket();
    atomic_fetch_add(&f->keys->seq, 1);
    assert_int_equal(connect_once(f, f->worker_b, sess, TLS1_3_VERSION), 0);
    assert_null(last_ticket);
    atomic_fetch_add(&f->keys->seq, 1);
    assert_int_equal(connect_once(f, f->worker_b, sess, TLS1_3_VERSION), 1);
    SSL_SESSION_free(sess);
}

static void test_session_lifetime_is_the_rings(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(SSL_CTX_get_timeout(f->worker_a),
                     (long)(sws_tickets_lifetime_ms(HOUR_MS) / 1000u));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_tls13_session_resumes_on_another_worker),
        T(test_tls12_session_resumes_on_another_worker),
        T(test_tls13_resumption_gets_a_new_ticket),
        T(test_tls12_ticket_under_previous_key_resumes_and_is_renewed),
        T(test_tls13_ticket_under_previous_key_resumes_and_is_renewed),
        T(test_tls13_ticket_whose_key_left_the_ring_gets_a_full_handshake),
        T(test_tls12_ticket_whose_key_left_the_ring_gets_a_full_handshake),
        T(test_ring_being_rewritten_costs_a_full_handshake),
        T(test_session_lifetime_is_the_rings),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
