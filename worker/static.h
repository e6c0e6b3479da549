/*
 * The static action: serve a file below the route's root.
 *
 * URL mapping: the request path, normal already (core/path.h: dot
 * segments resolved, "//" merged, %00 refused before routing), with its
 * remaining %XX decoded, is appended to the root, as nginx's `root` does
 * (an encoded '/' names no file: 404); a directory is
 * served through its index file, a directory path without a trailing '/'
 * gets a 301 to the path with one. No escape from the root: symlinks that
 * lead out of the root are refused (403) unless the route's follow_symlinks
 * is set (openat2 RESOLVE_BENEATH below a kept-open handle on the root).
 *
 * Answers: 200 with sendfile, 206 for one satisfiable byte range, 416, 304
 * (If-None-Match / If-Modified-Since), 403 (not readable, a special file,
 * an escape), 404, 405 for methods other than GET and HEAD, 503 when an
 * open fails for want of descriptors or memory, 500 for any other failure
 * (sws_static_open_status, static_open.h).
 *
 * Runs in a worker, synchronously, inside the request's handler call; the
 * roots it holds open are the worker context's (worker/ctx.h), so the
 * request's connection set must carry one.
 */
#ifndef SWS_WORKER_STATIC_H
#define SWS_WORKER_STATIC_H

#include "worker/stream.h"

void sws_static_handle(sws_stream_t *st);

#endif
