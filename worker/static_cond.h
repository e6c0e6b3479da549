/*
 * Validators, conditional requests and byte ranges for static files
 * (RFC 9110 sections 8.8, 13 and 14).
 *
 * The ETag is strong, "<mtime hex>-<size hex>" in quotes, as nginx makes
 * it: cheap (no hashing) and stable across workers and restarts. Like
 * nginx's, it cannot tell apart two versions of a file written within the
 * same second with the same size; that is the accepted price of not
 * reading the file.
 *
 * Pure functions over the header values: any process.
 */
#ifndef SWS_WORKER_STATIC_COND_H
#define SWS_WORKER_STATIC_COND_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/str.h"

/* Quotes, two 16-digit hex numbers, a dash, and room for the NUL. */
#define SWS_STATIC_ETAG_MAX 40
/* "bytes " + three 20-digit numbers + "-/" + NUL. */
#define SWS_STATIC_CONTENT_RANGE_MAX 72

/* Write the ETag for a file ("\"5f5e1000-1a2\"") into out (at least
 * SWS_STATIC_ETAG_MAX bytes), NUL-terminated; returns its length. */
size_t sws_static_etag(char *out, time_t mtime, uint64_t size);

/* Does the If-None-Match value list etag (weak comparison: W/"x" matches
 * "x"), or is it "*"? A malformed list stops matching where it breaks. */
int sws_static_etag_listed(sws_str_t if_none_match, sws_str_t etag);

/* Parse an HTTP-date in any of the three forms a recipient must accept
 * (IMF-fixdate, RFC 850, asctime). 0 and *out, or -1. */
int sws_static_date_parse(sws_str_t s, time_t *out);

/* May the Range be honoured under this If-Range value? Only if it is the
 * current strong ETag, or exactly the file's Last-Modified date. */
int sws_static_if_range_ok(sws_str_t if_range, sws_str_t etag, time_t mtime);

typedef enum sws_static_range_rc {
    SWS_STATIC_RANGE_NONE = 0, /* serve the whole file: 200 */
    SWS_STATIC_RANGE_OK,       /* *first, *len: 206 */
    SWS_STATIC_RANGE_UNSATISFIABLE, /* 416 */
} sws_static_range_rc_t;

/* Interpret a Range value for a file of size bytes. One range-spec only:
 * "a-b", "a-" or "-n" (b past the end is cut to it, n larger than the file
 * means all of it). A value ScalWS does not serve as a range gives NONE:
 * another unit, a syntax error (RFC 9110 14.2 lets a server ignore it), and
 * several ranges (multipart/byteranges would interleave generated
 * boundaries with file bytes, which one sendfile cannot send; clients that
 * ask for several accept the whole file, and RFC 9110 allows it). */
sws_static_range_rc_t sws_static_range_parse(sws_str_t range, uint64_t size, uint64_t *first,
                                             uint64_t *len);

/* "bytes first-last/size" into out (SWS_STATIC_CONTENT_RANGE_MAX bytes);
 * len == 0 writes the 416 form, an asterisk in place of the range
 * ("bytes *" then "/size"). Returns the length. */
size_t sws_static_content_range(char *out, uint64_t first, uint64_t len, uint64_t size);

#endif
