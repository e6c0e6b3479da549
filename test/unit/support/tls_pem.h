/* Test certificates made in memory (never committed): a self-signed
 * certificate for one DNS name (its CN and one subjectAltName), valid for a
 * day, and its key: as OpenSSL objects for a TLS peer in a test, or as PEM
 * for the RouteSet check, the table, the configuration and worker/tls.c.
 * The one maker of the unit tests; each aborts on failure. */
#ifndef SWS_TEST_SUPPORT_TLS_PEM_H
#define SWS_TEST_SUPPORT_TLS_PEM_H

#include <stddef.h>

#include "proto/scalws.pb-c.h"

typedef struct test_pem {
    char *cert, *key; /* malloc'ed PEM text */
    size_t cert_len, key_len;
} test_pem_t;

/* ec 1: ECDSA P-256, 0: RSA 2048. cn is the subject CN and its one DNS
 * subjectAltName. Aborts on failure. */
void test_pem_make(test_pem_t *out, int ec, const char *cn);

/* The certificate and key as objects (X509_free, EVP_PKEY_free). */
struct x509_st;
struct evp_pkey_st;
void test_cert_x509(int ec, const char *cn, struct x509_st **cert, struct evp_pkey_st **key);

/* x as PEM text (free()). */
char *test_pem_x509_text(struct x509_st *x, size_t *len);

/* An ECDSA certificate for "scalws-test" as PEM text alone (a CA file of
 * one certificate; free()). */
char *test_pem_cert_text(size_t *len);
void test_pem_free(test_pem_t *p);

/* A RouteSet certificate (heap, for free_unpacked) holding cert's
 * certificate and key's key, with the paths "/etc/a.crt", "/etc/a.key". */
Sws__Certificate *test_pem_certificate(const test_pem_t *cert, const test_pem_t *key);

#endif
