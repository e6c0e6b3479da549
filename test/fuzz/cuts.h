/* The input layout of the fuzz targets that feed a connection in reads
 * (fuzz_http1, fuzz_http2): byte 0 (low 4 bits) is the number n of chosen
 * cuts, the next n bytes the lengths of the first n reads (each byte + 1),
 * the rest what is sent. */
#ifndef SWS_TEST_FUZZ_CUTS_H
#define SWS_TEST_FUZZ_CUTS_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_CUTS_MAX 16

/* The bytes to send (*in, *len) and where the reads end: cuts[0..*ncuts]
 * (the last is *len). 0, or -1 when the input is too short for its
 * header. */
static inline int fuzz_cuts(const uint8_t *data, size_t size, const uint8_t **in, size_t *len,
                            size_t cuts[FUZZ_CUTS_MAX + 1], size_t *ncuts)
{
    if (size == 0)
        return -1;
    size_t n = data[0] & 15;
    if (size < 1 + n)
        return -1;
    *in = data + 1 + n;
    *len = size - 1 - n;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        at += (size_t)data[1 + i] + 1;
        cuts[i] = at < *len ? at : *len;
    }
    cuts[n] = *len;
    *ncuts = n;
    return 0;
}

#endif
