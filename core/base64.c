/* Base64 decoding (core/base64.h). */
#include "core/base64.h"

#include <limits.h>
#include <stdlib.h>

#include <openssl/evp.h>

static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int in_alphabet(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

int sws_base64_decode(const char *text, size_t n, int whitespace, unsigned char **out,
                      size_t *len)
{
    int padded = 0, got = 0, fin = 0;

    *out = NULL;
    *len = 0;
    if (n > INT_MAX)
        return -1;
    /* OpenSSL's decoder is lenient where we are not: it stops at '-' (a
     * PEM boundary) and skips whitespace; so the alphabet is checked here
     * and OpenSSL checks the length and the padding. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (whitespace == SWS_BASE64_LINES && is_space(c))
            continue;
        if (c == '=')
            padded = 1;
        else if (padded || !in_alphabet(c))
            return -1;
    }
    /* 3 bytes per 4 characters, one more quantum of slack, the NUL. */
    unsigned char *buf = malloc(n / 4 * 3 + 4);
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    if (buf == NULL || ctx == NULL) {
        free(buf);
        EVP_ENCODE_CTX_free(ctx);
        return -2;
    }
    EVP_DecodeInit(ctx);
    int ok = EVP_DecodeUpdate(ctx, buf, &got, (const unsigned char *)text, (int)n) >= 0 &&
             EVP_DecodeFinal(ctx, buf + got, &fin) >= 0;
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return -1;
    }
    *len = (size_t)got + (size_t)fin;
    buf[*len] = '\0';
    *out = buf;
    return 0;
}
