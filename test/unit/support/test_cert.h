/*
 * A certificate made in memory for the unit tests of TLS configuration
 * (no key or certificate file is committed): a self-signed P-256
 * certificate for CN=scalws-test, valid for a day, as PEM. The caller
 * frees it with free(). NULL when OpenSSL fails.
 */
#ifndef SWS_TEST_SUPPORT_TEST_CERT_H
#define SWS_TEST_SUPPORT_TEST_CERT_H

#include <stddef.h>

char *sws_test_cert_pem(size_t *len);

/* The same kind of certificate with its key, for a TLS peer in a test
 * (X509_free, EVP_PKEY_free). 0, or -1. */
struct x509_st;
struct evp_pkey_st;
int sws_test_cert_make(struct x509_st **cert, struct evp_pkey_st **key);

#endif
