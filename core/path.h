/*
 * The normalized request path (docs/adr/0006-normalized-request-path.md).
 *
 * Routing, every action, and later the proxy and Ingress paths see one
 * spelling of a path, computed once per request by sws_handlers_dispatch()
 * before routing. The rule, applied to an origin-form path (it starts with
 * '/'; the query is not part of it):
 *
 *   - %XX of an unreserved character (ALPHA DIGIT - . _ ~) is decoded;
 *   - every other %XX stays encoded, with uppercase hex digits; %2F is an
 *     opaque byte of its segment, never a separator;
 *   - a raw byte a URI path may not hold (>= 0x80, " < > \ ^ ` { | } [ ])
 *     is percent-encoded, so it has the same spelling as its %XX form;
 *   - empty segments are dropped ("//" is "/"), "." and ".." segments are
 *     resolved (also when written %2E), a trailing slash stays;
 *   - refused (400): a '%' not followed by two hex digits, %00, a raw
 *     control byte, space or '#', and a ".." above the root.
 *
 * The result is never longer than SWS_PATH_OUT_MAX(input length), and not
 * longer than the input when the input holds URI characters only.
 * Normalizing a normal path gives it back unchanged.
 *
 * Pure functions: any process (the supervisor checks route paths with them).
 */
#ifndef SWS_CORE_PATH_H
#define SWS_CORE_PATH_H

#include <stddef.h>

#include "core/str.h"

/* Room sws_path_normalize() may need for an input of len bytes: each raw
 * byte becomes at most three ("%XX"). */
#define SWS_PATH_OUT_MAX(len) (3 * (size_t)(len))

typedef enum sws_path_rc {
    SWS_PATH_NORMAL = 0, /* the input is normal: *res is the input itself */
    SWS_PATH_CHANGED,    /* *res is the normal form: in out, or a shorter prefix of the
                          * input when only a trailing dot segment or a slash went */
    SWS_PATH_NEED_ROOM,  /* not normal, and out is NULL or smaller than SWS_PATH_OUT_MAX */
    SWS_PATH_BAD,        /* refused (400); *why says why in a few words */
} sws_path_rc_t;

/* Normalize the origin-form path in. Nothing is written when the input is
 * already normal, so the common case costs one scan and no copy: call
 * with out NULL first and again with room only on SWS_PATH_NEED_ROOM.
 * *why is set on SWS_PATH_BAD only; it is a static string. */
sws_path_rc_t sws_path_normalize(sws_str_t in, char *out, size_t outsize, sws_str_t *res,
                                 const char **why);

typedef enum sws_path_decode_rc {
    SWS_PATH_DECODE_OK = 0,
    SWS_PATH_DECODE_SLASH,    /* an encoded '/': no file has that name */
    SWS_PATH_DECODE_TOO_LONG, /* does not fit out */
} sws_path_decode_rc_t;

/* A normal path (as sws_path_normalize() returns it) as a relative file
 * name: the leading '/' dropped, every remaining %XX decoded, NUL
 * terminated in out (outsize bytes); *out_len set. "/" gives "", "/d/"
 * gives "d/". A path not in normal form gives an unspecified name. */
sws_path_decode_rc_t sws_path_decode(sws_str_t path, char *out, size_t outsize, size_t *out_len);

#endif
