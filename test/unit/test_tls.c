/* worker/tls.c with worker/conn.c: a real connection over a socketpair, the
 * server driven by the event loop, an OpenSSL client on the other end. SNI
 * and ALPN choices, a file body through the TLS path (no sendfile), and a
 * connection that outlives its generation's contexts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/log.h"
#include "worker/conn.h"
#include "worker/http1.h"
#include "worker/stream.h"
#include "worker/tls.h"
#include "support/routeset_build.h"
#include "support/tls_pem.h"

#define FILE_SIZE (300u * 1024) /* several TLS pieces */
#define TURNS 2000              /* bound on loop turns per exchange */

static test_pem_t pem_a, pem_def;

/* OpenSSL's allocations of a record buffer's size (CRYPTO_set_mem_functions
 * in main): how many were made, how many are live. */
#define RECORD_BUF_MIN (16u * 1024)
static unsigned long record_bufs_made;
static long record_bufs_live;

static void count_alloc(void *p)
{
    if (p != NULL && malloc_usable_size(p) >= RECORD_BUF_MIN) {
        record_bufs_made++;
        record_bufs_live++;
    }
}

static void count_free(void *p)
{
    if (p != NULL && malloc_usable_size(p) >= RECORD_BUF_MIN)
        record_bufs_live--;
}

static void *counted_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    void *p = malloc(n);
    count_alloc(p);
    return p;
}

static void *counted_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    count_free(p);
    void *q = realloc(p, n);
    count_alloc(q != NULL ? q : (n > 0 ? p : NULL));
    return q;
}

static void counted_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    count_free(p);
    free(p);
}
static int body_fd = -1;

typedef struct fixture {
    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters;
    void *arena;
    SSL_CTX *client_ctx;
    SSL *client;
    int peer;
    sws_conn_t *conn;
} fixture_t;

/* /file answers FILE_SIZE bytes of the memfd, anything else "ok". */
static void handler(sws_stream_t *st)
{
    if (st->req.path.len == 5 && memcmp(st->req.path.p, "/file", 5) == 0) {
        int fd = dup(body_fd);
        assert_true(fd >= 0);
        sws_stream_respond_file(st, 200, NULL, 0, fd, 0, FILE_SIZE);
        return;
    }
    sws_stream_respond(st, 200, NULL, 0, "ok", 2);
}

/* A table whose host a.test has pem_a, and the default pem_def. */
static void *table_new(void)
{
    size_t size;
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "a.test");
    host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/", "x");
    PUSH(h->certificates, h->n_certificates, test_pem_certificate(&pem_a, &pem_a));
    rs->tls = NEW(Sws__Tls, SWS__TLS__INIT);
    rs->tls->ciphers = strdup("");
    rs->tls->ciphersuites = strdup("");
    rs->tls->session_tickets = 1;
    rs->tls->default_certificate = test_pem_certificate(&pem_def, &pem_def);
    return rs_table(rs, 1, &size);
}

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* as in a worker: OpenSSL writes with write(2) */
    test_pem_make(&pem_a, 1, "a.test");
    test_pem_make(&pem_def, 1, "default");
    body_fd = memfd_create("body", MFD_CLOEXEC);
    assert_true(body_fd >= 0);
    char *body = malloc(FILE_SIZE);
    assert_non_null(body);
    for (unsigned i = 0; i < FILE_SIZE; i++)
        body[i] = (char)('a' + i % 23);
    assert_int_equal(write(body_fd, body, FILE_SIZE), FILE_SIZE);
    free(body);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    test_pem_free(&pem_a);
    test_pem_free(&pem_def);
    close(body_fd);
    return 0;
}

/* A server connection on a TLS generation and a client SSL asking for
 * sni (NULL: none) and alpn (wire form, NULL: none). */
static fixture_t *fixture_new(const char *sni, const unsigned char *alpn, unsigned alpn_len)
{
    fixture_t *f = calloc(1, sizeof(*f));
    char err[256];
    int sv[2];
    assert_non_null(f);
    sws_log_init("test", 2, SWS_LOG_ERROR);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws_conn_set_init(&f->set, &f->loop, &sws_http1_proto, handler, &f->counters);
    f->arena = table_new();
    sws_conn_set_configure(&f->set, f->arena, NULL, SWS_STR("t"));
    f->set.tls = sws_tls_gen_build(f->arena, NULL, err, sizeof(err));
    if (f->set.tls == NULL)
        fail_msg("%s", err);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    f->peer = sv[1];
    f->conn = sws_conn_open_tls(&f->set, sv[0], NULL, 0);
    assert_non_null(f->conn);
    f->client_ctx = SSL_CTX_new(TLS_client_method());
    f->client = SSL_new(f->client_ctx);
    assert_non_null(f->client);
    SSL_set_fd(f->client, f->peer);
    SSL_set_connect_state(f->client);
    if (sni != NULL)
        SSL_set_tlsext_host_name(f->client, sni);
    if (alpn != NULL)
        SSL_set_alpn_protos(f->client, alpn, alpn_len);
    return f;
}

static void fixture_free(fixture_t *f)
{
    SSL_free(f->client);
    SSL_CTX_free(f->client_ctx);
    close(f->peer);
    sws_conn_set_destroy(&f->set);
    sws_tls_gen_free(f->set.tls);
    sws_loop_close(&f->loop);
    free(f->arena);
    free(f);
}

/* Turns of server and client until the client's handshake is done (1) or
 * failed (0). */
static int handshake(fixture_t *f)
{
    for (int i = 0; i < TURNS; i++) {
        int r = SSL_do_handshake(f->client);
        if (r == 1)
            return 1;
        int e = SSL_get_error(f->client, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            ERR_clear_error();
            return 0;
        }
        assert_int_equal(sws_loop_run_once(&f->loop, 10), 0);
    }
    fail_msg("no handshake after %d turns", TURNS);
    return 0;
}

/* The subject CN of the server's certificate. */
static void peer_cn(fixture_t *f, char *cn, size_t len)
{
    X509 *x = SSL_get1_peer_certificate(f->client);
    assert_non_null(x);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, (int)len);
    X509_free(x);
}

/* Send a request and read until want bytes of response arrived (head and
 * body); returns the body's length after the head. */
static size_t exchange(fixture_t *f, const char *path, size_t want_body, char *first)
{
    char req[128], buf[16384];
    size_t got = 0, head = 0;
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: a.test\r\n\r\n", path);
    assert_int_equal(SSL_write(f->client, req, n), n);
    static char all[FILE_SIZE + 4096];
    for (int i = 0; i < TURNS * 10; i++) {
        assert_int_equal(sws_loop_run_once(&f->loop, 10), 0);
        for (;;) {
            int r = SSL_read(f->client, buf, sizeof(buf));
            if (r <= 0)
                break;
            assert_true(got + (size_t)r <= sizeof(all));
            memcpy(all + got, buf, (size_t)r);
            got += (size_t)r;
        }
        char *end = head == 0 ? memmem(all, got, "\r\n\r\n", 4) : NULL;
        if (end != NULL)
            head = (size_t)(end - all) + 4;
        if (head != 0 && got - head >= want_body) {
            memcpy(first, all + head, got - head < 2 ? got - head : 2);
            return got - head;
        }
    }
    fail_msg("%s: %zu bytes after %d turns", path, got, TURNS * 10);
    return 0;
}

static void test_sni_picks_the_hosts_certificate_and_http11(void **state)
{
    (void)state;
    static const unsigned char alpn[] = { 2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };
    char cn[64], first[2];
    fixture_t *f = fixture_new("A.Test", alpn, sizeof(alpn));
    assert_int_equal(handshake(f), 1);
    peer_cn(f, cn, sizeof(cn));
    assert_string_equal(cn, "a.test");
    const unsigned char *sel;
    unsigned sel_len;
    SSL_get0_alpn_selected(f->client, &sel, &sel_len);
    /* No HTTP/2 in this set: h2 is not offered back. */
    assert_int_equal(sel_len, 8);
    assert_memory_equal(sel, "http/1.1", 8);
    assert_int_equal(exchange(f, "/", 2, first), 2);
    assert_memory_equal(first, "ok", 2);
    fixture_free(f);
}

static void test_unknown_name_and_no_sni_get_the_default(void **state)
{
    (void)state;
    char cn[64];
    fixture_t *f = fixture_new("b.test", NULL, 0);
    assert_int_equal(handshake(f), 1);
    peer_cn(f, cn, sizeof(cn));
    assert_string_equal(cn, "default");
    fixture_free(f);
    f = fixture_new(NULL, NULL, 0);
    assert_int_equal(handshake(f), 1);
    peer_cn(f, cn, sizeof(cn));
    assert_string_equal(cn, "default");
    fixture_free(f);
}

/* A file range cannot be sent with sendfile over TLS: it goes through the
 * output in pieces, all of it, in order. */
static void test_file_body_through_tls_pieces(void **state)
{
    (void)state;
    char first[2];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    assert_int_equal(handshake(f), 1);
    assert_int_equal(exchange(f, "/file", FILE_SIZE, first), FILE_SIZE);
    assert_memory_equal(first, "ab", 2);
    /* And the connection goes on after it. */
    assert_int_equal(exchange(f, "/", 2, first), 2);
    fixture_free(f);
}

/* A reload frees the generation's contexts: the open connection keeps its
 * own reference and goes on (ASan would see a use after free). */
static void test_connection_outlives_its_generation(void **state)
{
    (void)state;
    char first[2], err[256];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    assert_int_equal(handshake(f), 1);
    sws_tls_gen_t *next = sws_tls_gen_build(f->arena, NULL, err, sizeof(err));
    assert_non_null(next);
    sws_tls_gen_free(f->set.tls);
    f->set.tls = next;
    assert_int_equal(exchange(f, "/", 2, first), 2);
    assert_memory_equal(first, "ok", 2);
    fixture_free(f);
}

/* OpenSSL's error queue is per thread, shared by every connection: an
 * entry someone else left must not turn this connection's "wait for the
 * socket" into a failure (sws_tls_err_reset before each call, ADR 0062). */
static void test_stale_error_is_not_blamed_on_a_read(void **state)
{
    (void)state;
    char buf[64];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    assert_int_equal(handshake(f), 1);
    /* The server's side ends at the client's Finished; a handshake step
     * empties the queue itself. */
    for (int i = 0; i < TURNS && f->conn->tls_handshaking; i++)
        assert_int_equal(sws_loop_run_once(&f->loop, 10), 0);
    assert_false(f->conn->tls_handshaking);
    ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH);
    errno = 0;
    assert_int_equal(sws_tls_read(f->conn, buf, sizeof(buf)), -1);
    assert_int_equal(errno, EAGAIN);
    assert_int_equal(ERR_peek_error(), 0);
    fixture_free(f);
}

/* OpenSSL's record buffers stay with a connection between its requests
 * (not freed and allocated again around each), and go back within
 * SWS_CONN_TLS_BUFFERS_IDLE_MS of its last turn (ADR 0063). */
static void test_record_buffers_stay_between_requests(void **state)
{
    (void)state;
    char first[2];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    /* No release between the two requests, however slow the machine. */
    sws_timer_queue_set_duration(&f->set.tls_idle_q, 3600 * 1000);
    assert_int_equal(handshake(f), 1);
    assert_int_equal(exchange(f, "/", 2, first), 2);
    unsigned long made = record_bufs_made;
    assert_int_equal(exchange(f, "/", 2, first), 2);
    assert_int_equal(record_bufs_made, made);
    fixture_free(f);
}

static void test_record_buffers_go_after_the_last_turn(void **state)
{
    (void)state;
    char first[2];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    assert_int_equal(handshake(f), 1);
    assert_int_equal(exchange(f, "/", 2, first), 2);
    /* The client does nothing: no turn arms the timer again once it fired. */
    for (int i = 0; i < TURNS && sws_timer_is_armed(&f->conn->tls_idle); i++)
        assert_int_equal(sws_loop_run_once(&f->loop, 10), 0);
    assert_false(sws_timer_is_armed(&f->conn->tls_idle));
    long live = record_bufs_live;
    unsigned long made = record_bufs_made;
    /* The next request brings the read and the write buffer again. */
    assert_int_equal(exchange(f, "/", 2, first), 2);
    assert_memory_equal(first, "ok", 2);
    assert_int_equal(record_bufs_made, made + 2);
    assert_int_equal(record_bufs_live, live + 2);
    fixture_free(f);
}

/* read(2) calls of this process so far (/proc/self/io, syscr), the one
 * that reads it included. */
static long reads_so_far(void)
{
    char buf[1024];
    int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    const char *p = strstr(buf, "syscr: ");
    assert_non_null(p);
    return strtol(p + strlen("syscr: "), NULL, 10);
}

/* The first event of a new connection is EPOLLOUT alone when its
 * ClientHello has not come yet: the handshake waits for input rather than
 * read EAGAIN, and goes on when it comes. */
static void test_handshake_reads_only_on_input(void **state)
{
    (void)state;
    char first[2];
    fixture_t *f = fixture_new("a.test", NULL, 0);
    long before = reads_so_far();
    assert_int_equal(sws_loop_run_once(&f->loop, 0), 0);
    assert_int_equal(f->loop.nevents, 1);
    assert_int_equal(reads_so_far() - before, 1); /* reads_so_far's own */
    assert_int_equal(handshake(f), 1);
    assert_int_equal(exchange(f, "/", 2, first), 2);
    assert_memory_equal(first, "ok", 2);
    fixture_free(f);
}

int main(void)
{
    /* Before OpenSSL allocates anything. */
    if (!CRYPTO_set_mem_functions(counted_malloc, counted_realloc, counted_free))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sni_picks_the_hosts_certificate_and_http11),
        cmocka_unit_test(test_unknown_name_and_no_sni_get_the_default),
        cmocka_unit_test(test_file_body_through_tls_pieces),
        cmocka_unit_test(test_connection_outlives_its_generation),
        cmocka_unit_test(test_stale_error_is_not_blamed_on_a_read),
        cmocka_unit_test(test_record_buffers_stay_between_requests),
        cmocka_unit_test(test_record_buffers_go_after_the_last_turn),
        cmocka_unit_test(test_handshake_reads_only_on_input),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
