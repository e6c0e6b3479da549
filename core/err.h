/*
 * The error-message convention: a function that can fail takes
 * (char *err, size_t errlen), writes one human sentence there and returns
 * -1; the caller that handles the failure logs it once.
 */
#ifndef SWS_CORE_ERR_H
#define SWS_CORE_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Format into err (truncating, always NUL-terminated when errlen > 0) and
 * return -1, so a failure path reads `return sws_errf(err, errlen, ...);`. */
static inline int sws_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int sws_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

#endif
