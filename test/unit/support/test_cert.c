/* A certificate made in memory (test_cert.h). */
#include "support/test_cert.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

int sws_test_cert_make(X509 **cert, EVP_PKEY **keyp)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name;

    if (key == NULL || x == NULL)
        goto fail;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"scalws-test", -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    if (X509_sign(x, key, EVP_sha256()) == 0)
        goto fail;
    *cert = x;
    *keyp = key;
    return 0;
fail:
    X509_free(x);
    EVP_PKEY_free(key);
    return -1;
}

char *sws_test_cert_pem(size_t *len)
{
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    BIO *out = BIO_new(BIO_s_mem());
    char *pem = NULL, *data;
    long n;

    if (out == NULL || sws_test_cert_make(&x, &key) < 0 || PEM_write_bio_X509(out, x) != 1)
        goto done;
    n = BIO_get_mem_data(out, &data);
    if (n > 0 && (pem = malloc((size_t)n + 1)) != NULL) {
        memcpy(pem, data, (size_t)n);
        pem[n] = '\0';
        *len = (size_t)n;
    }
done:
    BIO_free(out);
    X509_free(x);
    EVP_PKEY_free(key);
    return pem;
}
