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

static inline char *sws_put_escaped(char *o, const char *p, size_t n, unsigned classes)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (sws_esc_needed(ch, classes))
            o = sws_put_esc_byte(o, ch);
        else
            *o++ = (char)ch;
    }
    return o;
}

#endif
