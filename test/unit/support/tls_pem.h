/* Test certificates made in memory (never committed): a self-signed
 * certificate for one DNS name and its key, as PEM, for the RouteSet check,
 * the table and worker/tls.c. */
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
void test_pem_free(test_pem_t *p);

/* A RouteSet certificate (heap, for free_unpacked) holding cert's
 * certificate and key's key, with the paths "/etc/a.crt", "/etc/a.key". */
Sws__Certificate *test_pem_certificate(const test_pem_t *cert, const test_pem_t *key);

#endif
