/* A bounded growing buffer (ingressd/buf.h). */
#include "ingressd/buf.h"

#include <stdlib.h>
#include <string.h>

int sws_ingress_buf_append(char **buf, size_t *len, size_t *cap, size_t first_cap, size_t max,
                           const char *data, size_t n)
{
    if (n > max - *len)
        return SWS_BUF_TOO_LARGE;
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : first_cap < max ? first_cap : max;
        /* Doubling keeps appends amortized O(1); the bound caps the last
         * step, so the buffer never holds more than max. */
        while (c < *len + n)
            c = c > max / 2 ? max : c * 2;
        char *b = realloc(*buf, c);
        if (b == NULL)
            return SWS_BUF_NO_MEMORY;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    return 0;
}
