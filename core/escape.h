/*
 * Writing untrusted bytes into a log line so that they cannot end the line,
 * drive a terminal or pass for the log's own syntax: every byte of the
 * chosen classes becomes \xHH (lowercase hex), the rest is copied.
 *
 *   error log (core/log.c)      SWS_ESC_CTL
 *   access log, combined        SWS_ESC_CTL | SWS_ESC_HIGH | SWS_ESC_QUOTE (as nginx)
 *
 * Like core/fmt.h: writes at o, returns the position after, no NUL, no
 * bounds check; the caller reserves SWS_ESC_MAX(n) bytes.
 */
#ifndef SWS_CORE_ESCAPE_H
#define SWS_CORE_ESCAPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SWS_ESC_CTL 1u   /* 0x00-0x1f and DEL (0x7f) */
#define SWS_ESC_HIGH 2u  /* 0x80-0xff */
#define SWS_ESC_QUOTE 4u /* '"' and '\\' */

#define SWS_ESC_MAX(n) (4 * (n))

static inline int sws_esc_needed(unsigned char ch, unsigned classes)
{
    return ((classes & SWS_ESC_CTL) && (ch < 0x20 || ch == 0x7f)) ||
           ((classes & SWS_ESC_HIGH) && ch >= 0x80) ||
           ((classes & SWS_ESC_QUOTE) && (ch == '"' || ch == '\\'));
}

static inline char *sws_put_esc_byte(char *o, unsigned char ch)
{
    *o++ = '\\';
    *o++ = 'x';
    *o++ = "0123456789abcdef"[ch >> 4];
    *o++ = "0123456789abcdef"[ch & 15];
    return o;
}

/* Bit tricks on eight bytes at once (one test per word instead of per
 * byte): a byte below n (n <= 128) anywhere in w, a byte equal to b. */
#define SWS_ESC_ONES 0x0101010101010101ull
#define SWS_ESC_HIGHS 0x8080808080808080ull

static inline int sws_esc_word_has_below(uint64_t w, unsigned n)
{
    return ((w - SWS_ESC_ONES * n) & ~w & SWS_ESC_HIGHS) != 0;
}

static inline int sws_esc_word_has(uint64_t w, unsigned char b)
{
    return sws_esc_word_has_below(w ^ (SWS_ESC_ONES * b), 1);
}

/* 1 when some byte of w needs escaping under classes. */
static inline int sws_esc_word_needed(uint64_t w, unsigned classes)
{
    return ((classes & SWS_ESC_CTL) && (sws_esc_word_has_below(w, 0x20) || sws_esc_word_has(w, 0x7f))) ||
           ((classes & SWS_ESC_HIGH) && (w & SWS_ESC_HIGHS) != 0) ||
           ((classes & SWS_ESC_QUOTE) && (sws_esc_word_has(w, '"') || sws_esc_word_has(w, '\\')));
}

static inline char *sws_put_esc_or_copy(char *o, unsigned char ch, unsigned classes)
{
    if (sws_esc_needed(ch, classes))
        return sws_put_esc_byte(o, ch);
    *o++ = (char)ch;
    return o;
}

/* Whole words are copied at once while none of their bytes needs escaping
 * (a log line's fields mostly do not): a user agent costs a quarter of the
 * byte-by-byte loop's instructions. */
static inline char *sws_put_escaped(char *o, const char *p, size_t n, unsigned classes)
{
    size_t i = 0;
    for (; i + sizeof(uint64_t) <= n; i += sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, p + i, sizeof(w));
        if (!sws_esc_word_needed(w, classes)) {
            memcpy(o, &w, sizeof(w));
            o += sizeof(w);
            continue;
        }
        for (size_t k = 0; k < sizeof(w); k++)
            o = sws_put_esc_or_copy(o, (unsigned char)p[i + k], classes);
    }
    for (; i < n; i++)
        o = sws_put_esc_or_copy(o, (unsigned char)p[i], classes);
    return o;
}

#endif
