/*
 * The access log: one line per answered request, buffered per worker.
 *
 * Formats (settings access_log_format, Sws__AccessLog__Format):
 *   OFF       nothing
 *   COMBINED  nginx's "combined":
 *             remote - - [30/Nov/2026:02:33:30 +0000] "GET / HTTP/1.1" 200 13 "referer" "ua"
 *             and for a proxied request three more fields, each a list of
 *             one entry per attempt (request.h, sws_request_upstream_t):
 *             "upstream addresses" "upstream statuses" "upstream ms"
 *   JSON      one object per line: ts, remote, method, path, proto, status,
 *             bytes, duration_ms, host, ua; for a proxied request also
 *             upstream_addr, upstream_status, upstream_ms (strings, the
 *             same lists)
 *
 * Lines go into a 64 KiB buffer that the worker flushes with one write(2)
 * per loop iteration (its tick) or when the buffer is full, so logging
 * costs no syscall per request. Request bytes are escaped so a client
 * cannot forge lines: \xHH in combined (as nginx); in JSON, the rule of
 * core/json.h: valid UTF-8 passes, '"' and '\\' are \" and \\, control
 * characters and every byte that is not valid UTF-8 are \u00HH.
 *
 * Logging never blocks the worker: the destination is written without
 * waiting (a pipe's description is non-blocking, sws_log_file_open; a
 * socket is sent to with MSG_DONTWAIT; a regular file is written as it
 * is). What the destination does not take stays buffered, whole lines
 * stay whole, and a line that finds no room is dropped and counted; the
 * error log says so at once, then at most every
 * SWS_ACCESS_LOG_DROP_REPORT_MS ("access log: 1234 lines dropped in the
 * last 10 s (destination not reading)").
 *
 * Owner: the worker (one per process); not shared, not thread-safe.
 */
#ifndef SWS_WORKER_ACCESS_LOG_H
#define SWS_WORKER_ACCESS_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/json.h"
#include "worker/request.h"

#define SWS_ACCESS_LOG_BUF (64u * 1024)

/* Request bytes kept per field (longer values are cut, not dropped), and
 * the longest line that can result: five such fields at the worst escaping
 * (6 bytes per byte in JSON: \u00HH), the three upstream lists, plus the
 * fixed parts. A line is appended only
 * when this much room is left, so one always fits and lands whole. */
#define SWS_ACCESS_LOG_FIELD_MAX 1536u
#define SWS_ACCESS_LOG_LINE_MAX                                                \
    (SWS_JSON_ESC_MAX(5 * SWS_ACCESS_LOG_FIELD_MAX) +                          \
     SWS_JSON_ESC_MAX(3 * SWS_REQUEST_UPSTREAM_TEXT) + 512)

#define SWS_ACCESS_LOG_DROP_REPORT_MS 10000u

typedef struct sws_access_log {
    int fd;               /* -1 when off; owned */
    int is_socket;        /* send(MSG_DONTWAIT) rather than write */
    unsigned format;      /* Sws__AccessLog__Format */
    char *buf;            /* SWS_ACCESS_LOG_BUF bytes; owned */
    size_t len;
    time_t stamp_sec;     /* the second the cached stamps are for */
    char stamp_clf[64];   /* "30/Nov/2026:02:33:30 +0000" */
    char stamp_iso[64];   /* "2026-11-30T02:33:30Z" */
    uint64_t dropped;     /* lines lost since the last report */
    uint64_t drop_since_ms;  /* CLOCK_MONOTONIC: where "in the last N s" starts */
    uint64_t reported_ms;    /* the last report; 0: none yet */
    int drop_errno;       /* why the last lines were lost; 0: not reading */
} sws_access_log_t;

void sws_access_log_init(sws_access_log_t *l);

/* The format, from a table generation. Lines buffered so far keep the
 * format they were written in. 0, or -1 out of memory (logged; the
 * previous format stays). */
int sws_access_log_set_format(sws_access_log_t *l, unsigned format);

/* Log to fd from now on (-1: nowhere), which the log owns from here on:
 * what is buffered goes to the previous destination first, then that is
 * closed. The worker never opens a log file: the supervisor does, before
 * privileges drop (sws_log_file_open), and hands the descriptor over at
 * fork or over the control channel (core/chan.h). */
void sws_access_log_set_fd(sws_access_log_t *l, int fd);

/* Append the line for r, answered at wall-clock second `now` after
 * duration_ms. remote is the client address as text. */
void sws_access_log_request(sws_access_log_t *l, const sws_request_t *r, const char *remote,
                            time_t now, uint64_t duration_ms);

/* Write out what the destination takes now (one write, more only after a
 * short one); report drops when it is time. */
void sws_access_log_flush(sws_access_log_t *l);

/* 1 while lines wait for the destination or drops wait to be reported:
 * the worker then wakes up now and then (its tick flushes) even when no
 * request comes, so they do not wait for the next one. */
int sws_access_log_waiting(const sws_access_log_t *l);

/* Flush, close the file, free the buffers. */
void sws_access_log_close(sws_access_log_t *l);

#endif
