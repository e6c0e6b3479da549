#include "support/tls_pem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static char *bio_text(BIO *b, size_t *len)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    char *out = malloc((size_t)n + 1);
    if (out == NULL)
        abort();
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    *len = (size_t)n;
    return out;
}

void test_cert_x509(int ec, const char *cn, X509 **cert, EVP_PKEY **keyp)
{
    EVP_PKEY *key = ec ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
    X509 *x = X509_new();
    char san[300];

    if (key == NULL || x == NULL)
        abort();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    snprintf(san, sizeof(san), "DNS:%s", cn);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, san);
    if (ext == NULL || X509_add_ext(x, ext, -1) != 1 || X509_sign(x, key, EVP_sha256()) == 0)
        abort();
    X509_EXTENSION_free(ext);
    *cert = x;
    *keyp = key;
}

char *test_pem_x509_text(X509 *x, size_t *len)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (b == NULL || PEM_write_bio_X509(b, x) != 1)
        abort();
    char *out = bio_text(b, len);
    BIO_free(b);
    return out;
}

char *test_pem_cert_text(size_t *len)
{
    X509 *x;
    EVP_PKEY *key;
    test_cert_x509(1, "scalws-test", &x, &key);
    char *out = test_pem_x509_text(x, len);
    X509_free(x);
    EVP_PKEY_free(key);
    return out;
}

void test_pem_make(test_pem_t *out, int ec, const char *cn)
{
    X509 *x;
    EVP_PKEY *key;
    BIO *b;

    test_cert_x509(ec, cn, &x, &key);
    out->cert = test_pem_x509_text(x, &out->cert_len);
    b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL);
    out->key = bio_text(b, &out->key_len);
    BIO_free(b);
    X509_free(x);
    EVP_PKEY_free(key);
}

void test_pem_free(test_pem_t *p)
{
    free(p->cert);
    free(p->key);
    p->cert = p->key = NULL;
}

static char *copy(const char *p, size_t n)
{
    char *out = malloc(n ? n : 1);
    if (out == NULL)
        abort();
    memcpy(out, p, n);
    return out;
}

Sws__Certificate *test_pem_certificate(const test_pem_t *cert, const test_pem_t *key)
{
    Sws__Certificate *c = malloc(sizeof(*c));
    if (c == NULL)
        abort();
    sws__certificate__init(c);
    c->cert_pem.data = (uint8_t *)copy(cert->cert, cert->cert_len);
    c->cert_pem.len = cert->cert_len;
    c->key_pem.data = (uint8_t *)copy(key->key, key->key_len);
    c->key_pem.len = key->key_len;
    c->cert_path = copy("/etc/a.crt", sizeof("/etc/a.crt"));
    c->key_path = copy("/etc/a.key", sizeof("/etc/a.key"));
    return c;
}
