/*
 * Base64 (RFC 4648, padded) decoding, for what Kubernetes hands over:
 * kubeconfig *-data values (kubectl may break their lines) and Secret
 * data (one JSON string). Pure; any process.
 */
#ifndef SWS_CORE_BASE64_H
#define SWS_CORE_BASE64_H

#include <stddef.h>

/* Whitespace (space, tab, CR, LF) between the characters: refused, or
 * skipped as line breaks are in kubeconfig data. */
#define SWS_BASE64_STRICT 0
#define SWS_BASE64_LINES 1

/* text[0..n) decoded into *out, malloc'ed and NUL-terminated (*len
 * without the NUL; the caller frees). 0; -1 when text is not base64
 * (a character outside the alphabet, one after the padding, a length not
 * a multiple of 4); -2 when memory ran out. *out is NULL on failure. */
int sws_base64_decode(const char *text, size_t n, int whitespace, unsigned char **out,
                      size_t *len);

#endif
