/*
 * Content types for static files, chosen by file name extension.
 *
 * A compact built-in table of the extensions a web site commonly serves;
 * anything else is application/octet-stream, so that a browser downloads
 * rather than guesses. Text types carry "; charset=utf-8".
 *
 * Pure function over constant data: any process.
 */
#ifndef SWS_WORKER_MIME_H
#define SWS_WORKER_MIME_H

#include <stddef.h>

#include "core/str.h"

/* The longest type sws_mime_type returns ("text/javascript; charset=utf-8"),
 * so that a caller can size the line it writes; mime.c does not compile
 * with a longer one. */
#define SWS_MIME_TYPE_MAX 30

/* The Content-Type value for the file named name (a bare name or a path:
 * only the part after the last '/' counts). Extensions compare ASCII
 * case-insensitively. The returned bytes are static, at most
 * SWS_MIME_TYPE_MAX of them. */
sws_str_t sws_mime_type(const char *name, size_t len);

#endif
