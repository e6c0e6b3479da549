/*
 * IMF-fixdate, the one date format HTTP senders use (RFC 9110 5.6.7):
 * "Mon, 30 Nov 2026 02:33:30 GMT". English names regardless of the locale.
 * Pure functions; any process, any thread.
 */
#ifndef SWS_CORE_HTTP_DATE_H
#define SWS_CORE_HTTP_DATE_H

#include <stddef.h>
#include <time.h>

#define SWS_HTTP_DATE_LEN 29
#define SWS_HTTP_DATE_BUF 32 /* room for the date, its NUL, and slack */

/* Writes SWS_HTTP_DATE_LEN bytes plus a NUL into out (SWS_HTTP_DATE_BUF
 * bytes); returns the length. */
size_t sws_http_date_format(time_t t, char *out);

#endif
