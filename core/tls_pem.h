/*
 * PEM bytes into OpenSSL: the one loader of a certificate chain and its
 * key, and the one loader of an upstream pool's CA certificates, each used
 * by the RouteSet check (does it load?) and by the worker (worker/tls.c,
 * worker/upstream_tls.c), so the check and the use cannot disagree. Bytes, never paths: the supervisor read the files (ADR 0033).
 *
 * Any process may call it; nothing is kept but what it adds to ctx.
 */
#ifndef SWS_CORE_TLS_PEM_H
#define SWS_CORE_TLS_PEM_H

#include <stddef.h>

#include <openssl/ssl.h>

/* Which half of a pair a failure is about. */
typedef enum sws_tls_pem_part {
    SWS_TLS_PEM_CERT = 0,
    SWS_TLS_PEM_KEY = 1,
} sws_tls_pem_part_t;

/* Add the chain (leaf first, then intermediates) and its private key to
 * ctx, as one more certificate of it: an RSA pair and an ECDSA pair go
 * side by side, and OpenSSL serves each client the one its signature
 * algorithms allow. *key_type gets the leaf key's EVP_PKEY_RSA,
 * EVP_PKEY_EC, ... 0, or -1 with one sentence in err and *part saying
 * which half is wrong (the PEM does not parse, holds no certificate or
 * key, or the key does not match the certificate). */
int sws_tls_pem_use(SSL_CTX *ctx, const void *cert, size_t cert_len, const void *key,
                    size_t key_len, int *key_type, sws_tls_pem_part_t *part, char *err,
                    size_t errlen);

/* Add every certificate of the CA bytes (one or more PEM certificates) to
 * store as a trust anchor. 0, or -1 with one sentence in err: the bytes
 * are empty, hold no certificate, or one of them does not parse (refused
 * even after good ones: a broken file is reported, never half trusted). */
int sws_tls_pem_ca_load(X509_STORE *store, const void *pem, size_t len, char *err,
                        size_t errlen);

/* The key type's name for messages ("RSA", "ECDSA", "Ed25519", ...). */
const char *sws_tls_pem_key_type_name(int key_type);

#endif
