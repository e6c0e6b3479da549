/*
 * From a request path to a file name below a static root.
 *
 * The URL path is percent-decoded and then checked, never resolved: a "."
 * or ".." segment, an encoded NUL or a malformed escape makes the request
 * bad (400). Clients normalise dot segments before sending (RFC 3986 5.2.4;
 * browsers and curl do), so only a crafted or broken request has them, and
 * answering 400 whatever the target tells a prober nothing about which
 * files exist. Checking after decoding is what makes "%2e%2e%2f" harmless.
 *
 * Pure functions: any process.
 */
#ifndef SWS_WORKER_STATIC_PATH_H
#define SWS_WORKER_STATIC_PATH_H

#include <stddef.h>

typedef enum sws_static_path_rc {
    SWS_STATIC_PATH_OK = 0,
    SWS_STATIC_PATH_BAD,      /* malformed escape, %00, a dot segment: 400 */
    SWS_STATIC_PATH_TOO_LONG, /* does not fit out: no such file can exist, 404 */
} sws_static_path_rc_t;

/* Decode the path raw[0..len) (the request-target before '?') into out,
 * NUL-terminated, relative: leading slashes and empty segments are dropped
 * ("/a//b" gives "a/b", "/" gives ""), a trailing slash is kept ("/d/"
 * gives "d/"). Sets *out_len. out holds outsize bytes. */
sws_static_path_rc_t sws_static_path_decode(const char *raw, size_t len, char *out,
                                            size_t outsize, size_t *out_len);

#endif
