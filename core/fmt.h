/*
 * Appending bytes and numbers to a buffer the caller has sized.
 *
 * Each function writes at o and returns the position after what it wrote;
 * none writes a NUL and none checks bounds: the caller reserves room first
 * (a uint64_t takes at most SWS_FMT_U64_MAX bytes in either base). These
 * replace snprintf on the response and access-log paths, where the format
 * string parsing is a measurable share of the work.
 */
#ifndef SWS_CORE_FMT_H
#define SWS_CORE_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SWS_FMT_U64_MAX 20

static inline char *sws_put(char *o, const void *p, size_t n)
{
    memcpy(o, p, n);
    return o + n;
}

/* The length of a string literal (or a char array holding one), as a
 * constant: a reservation names the lines it sizes with it. */
#define SWS_LIT_LEN(lit) (sizeof(lit) - 1)

#define SWS_PUT_LIT(o, lit) sws_put((o), (lit), SWS_LIT_LEN(lit))

/* v in base 10 (base 16 with lowercase digits when hex is set). */
static inline char *sws_put_uint(char *o, uint64_t v, int hex)
{
    char tmp[SWS_FMT_U64_MAX];
    size_t n = 0;
    unsigned base = hex ? 16u : 10u;
    do {
        tmp[sizeof(tmp) - 1 - n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v != 0);
    return sws_put(o, tmp + sizeof(tmp) - n, n);
}

static inline char *sws_put_u64(char *o, uint64_t v) { return sws_put_uint(o, v, 0); }
static inline char *sws_put_hex(char *o, uint64_t v) { return sws_put_uint(o, v, 1); }

#endif
