/*
 * PEM bytes into an OpenSSL server context: the one loader of a
 * certificate chain and its key, used by the RouteSet check (does the pair
 * load?) and by the worker (worker/tls.c), so the check and the use cannot
 * disagree. Bytes, never paths: the supervisor read the files (ADR 0033).
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

/* The key type's name for messages ("RSA", "ECDSA", "Ed25519", ...). */
const char *sws_tls_pem_key_type_name(int key_type);

#endif
