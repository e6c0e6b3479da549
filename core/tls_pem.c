#include "core/tls_pem.h"

#include <limits.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/err.h"
#include "core/tls_err.h"

static int fail(sws_tls_pem_part_t *part, sws_tls_pem_part_t which, char *err, size_t errlen,
                const char *what)
{
    *part = which;
    return sws_errf(err, errlen, "%s (%s)", what, sws_tls_reason("unknown error"));
}

/* The leaf and then each intermediate, chained to the leaf just added. */
static int use_chain(SSL_CTX *ctx, BIO *in, int *key_type, sws_tls_pem_part_t *part, char *err,
                     size_t errlen)
{
    X509 *leaf = PEM_read_bio_X509(in, NULL, NULL, NULL);
    X509 *ca;

    if (leaf == NULL)
        return fail(part, SWS_TLS_PEM_CERT, err, errlen, "no PEM certificate could be read");
    *key_type = EVP_PKEY_get_base_id(X509_get0_pubkey(leaf));
    if (SSL_CTX_use_certificate(ctx, leaf) != 1) {
        X509_free(leaf);
        return fail(part, SWS_TLS_PEM_CERT, err, errlen, "the certificate is not usable");
    }
    X509_free(leaf);
    while ((ca = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        /* add0: the context owns ca from here on. */
        if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
            X509_free(ca);
            return fail(part, SWS_TLS_PEM_CERT, err, errlen, "an intermediate is not usable");
        }
    }
    /* The loop ends on "no start line" at the end of the bytes: not an error. */
    if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE)
        return fail(part, SWS_TLS_PEM_CERT, err, errlen, "an intermediate does not parse");
    ERR_clear_error();
    return 0;
}

int sws_tls_pem_use(SSL_CTX *ctx, const void *cert, size_t cert_len, const void *key,
                    size_t key_len, int *key_type, sws_tls_pem_part_t *part, char *err,
                    size_t errlen)
{
    BIO *in;
    EVP_PKEY *pkey;
    int rc;

    *key_type = 0;
    if (cert_len == 0) {
        *part = SWS_TLS_PEM_CERT;
        return sws_errf(err, errlen, "the certificate file is empty");
    }
    if (key_len == 0) {
        *part = SWS_TLS_PEM_KEY;
        return sws_errf(err, errlen, "the key file is empty");
    }
    if (cert_len > INT_MAX || key_len > INT_MAX) {
        *part = cert_len > INT_MAX ? SWS_TLS_PEM_CERT : SWS_TLS_PEM_KEY;
        return sws_errf(err, errlen, "larger than 2 GiB");
    }
    ERR_clear_error();
    in = BIO_new_mem_buf(cert, (int)cert_len);
    if (in == NULL)
        return fail(part, SWS_TLS_PEM_CERT, err, errlen, "out of memory");
    rc = use_chain(ctx, in, key_type, part, err, errlen);
    BIO_free(in);
    if (rc < 0)
        return -1;
    in = BIO_new_mem_buf(key, (int)key_len);
    if (in == NULL)
        return fail(part, SWS_TLS_PEM_KEY, err, errlen, "out of memory");
    pkey = PEM_read_bio_PrivateKey(in, NULL, NULL, NULL);
    BIO_free(in);
    if (pkey == NULL)
        return fail(part, SWS_TLS_PEM_KEY, err, errlen,
                    "no PEM private key could be read (an encrypted key is not supported)");
    rc = SSL_CTX_use_PrivateKey(ctx, pkey);
    EVP_PKEY_free(pkey);
    if (rc != 1)
        return fail(part, SWS_TLS_PEM_KEY, err, errlen, "the key does not match the certificate");
    if (SSL_CTX_check_private_key(ctx) != 1)
        return fail(part, SWS_TLS_PEM_KEY, err, errlen, "the key does not match the certificate");
    return 0;
}

int sws_tls_pem_ca_load(X509_STORE *store, const void *pem, size_t len, char *err,
                        size_t errlen)
{
    unsigned count = 0;
    unsigned long e;
    int added = 1;
    BIO *in;
    X509 *x;

    if (len == 0)
        return sws_errf(err, errlen, "verifying the members needs CA certificates");
    if (len > INT_MAX)
        return sws_errf(err, errlen, "larger than 2 GiB");
    ERR_clear_error();
    if ((in = BIO_new_mem_buf(pem, (int)len)) == NULL)
        return sws_errf(err, errlen, "out of memory");
    while (added == 1 && (x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        added = X509_STORE_add_cert(store, x); /* takes its own reference */
        X509_free(x);
        count += added == 1;
    }
    BIO_free(in);
    if (added != 1)
        return sws_errf(err, errlen, "a certificate cannot be trusted (%s)", sws_tls_reason("unknown error"));
    /* The loop ends at the end of the text ("no start line") or at a
     * certificate that does not parse. */
    e = ERR_peek_last_error();
    ERR_clear_error();
    if (ERR_GET_LIB(e) != ERR_LIB_PEM || ERR_GET_REASON(e) != PEM_R_NO_START_LINE)
        return sws_errf(err, errlen, "a certificate in it does not parse (expected PEM "
                        "certificates)");
    if (count == 0)
        return sws_errf(err, errlen, "holds no PEM certificate");
    return 0;
}

const char *sws_tls_pem_key_type_name(int key_type)
{
    switch (key_type) {
    case EVP_PKEY_RSA:
        return "RSA";
    case EVP_PKEY_EC:
        return "ECDSA";
    case EVP_PKEY_ED25519:
        return "Ed25519";
    case EVP_PKEY_ED448:
        return "Ed448";
    default:
        return "unknown";
    }
}
