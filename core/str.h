/*
 * sws_str_t: a borrowed slice of bytes (pointer + length, not NUL-terminated).
 *
 * Ownership: a slice never owns its bytes. Whoever hands one out states how
 * long the bytes live (a connection's read buffer, a table generation, ...).
 */
#ifndef SWS_CORE_STR_H
#define SWS_CORE_STR_H

#include <stddef.h>
#include <string.h>
#include <strings.h>

typedef struct sws_str {
    const char *p;
    size_t len;
} sws_str_t;

#define SWS_STR(lit) ((sws_str_t){ (lit), sizeof(lit) - 1 })

static inline int sws_str_eq(sws_str_t a, sws_str_t b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

/* ASCII case-insensitive equality, for header names and host names. */
static inline int sws_str_caseeq(sws_str_t a, sws_str_t b)
{
    return a.len == b.len && strncasecmp(a.p, b.p, a.len) == 0;
}

static inline int sws_str_caseeq_lit(sws_str_t a, const char *lit)
{
    size_t n = strlen(lit);
    return a.len == n && strncasecmp(a.p, lit, n) == 0;
}

/* The value of a hex digit (either case), or -1. */
static inline int sws_hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20; /* ASCII lower case */
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* RFC 9110 tchar: what a header name is made of. A table, because every
 * byte of every request header name goes through it. */
static const unsigned char sws_tchar_map[256] = {
    ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1,
    ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

static inline int sws_is_tchar(unsigned char c)
{
    return sws_tchar_map[c];
}

/* A non-empty slice of tchars (RFC 9110 token). */
static inline int sws_str_is_token(sws_str_t s)
{
    if (s.len == 0)
        return 0;
    for (size_t i = 0; i < s.len; i++)
        if (!sws_is_tchar((unsigned char)s.p[i]))
            return 0;
    return 1;
}

/* A non-empty NUL-terminated string of tchars (RFC 9110 token). */
static inline int sws_is_token(const char *s)
{
    return sws_str_is_token((sws_str_t){ s, strlen(s) });
}

#endif
