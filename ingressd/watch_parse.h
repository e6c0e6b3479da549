/*
 * The WATCH stream parser: the body of a Kubernetes watch response (libcurl
 * has already removed the chunked framing) in pieces as they arrive, one
 * event out per complete line. The API server writes one JSON object per
 * line: {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}.
 *
 * Only the line being received is buffered, never the stream: a line longer
 * than max_line bytes is an error (the stream is then dropped and watched
 * again), so a broken or hostile server cannot make ingressd grow without
 * bound. An object the API server accepts is at most ~1.5 MiB (etcd's
 * request limit), so a bound of a few MiB never refuses a real event.
 *
 * Caller: ingressd's Kubernetes client (kube.c), one parser per watch;
 * not thread-safe. The parser owns its line buffer (freed by
 * sws_watch_parser_free); the object handed to the callback is borrowed
 * for the call (json_incref to keep it).
 */
#ifndef SWS_INGRESSD_WATCH_PARSE_H
#define SWS_INGRESSD_WATCH_PARSE_H

#include <jansson.h>
#include <stddef.h>

typedef enum {
    SWS_WATCH_ADDED,
    SWS_WATCH_MODIFIED,
    SWS_WATCH_DELETED,
    SWS_WATCH_BOOKMARK, /* obj has only metadata.resourceVersion (and kind) */
    SWS_WATCH_ERROR,    /* obj is a metav1.Status: code 410 means the
                         * resourceVersion is too old (relist) */
} sws_watch_type_t;

/* 0 to go on with the next line; anything else stops the feed, which
 * returns that value (the rest of the piece is not looked at). */
typedef int (*sws_watch_event_fn)(void *ctx, sws_watch_type_t type, json_t *obj);

typedef struct sws_watch_parser {
    char *buf;        /* the start of the line not yet complete */
    size_t len, cap;
    size_t max_line;  /* bytes, the newline excluded */
} sws_watch_parser_t;

void sws_watch_parser_init(sws_watch_parser_t *p, size_t max_line);

/* Forget a partial line: a new stream starts. The buffer is kept. */
void sws_watch_parser_reset(sws_watch_parser_t *p);

void sws_watch_parser_free(sws_watch_parser_t *p);

/* Parse the next n bytes of the stream, calling fn once per complete
 * line, in order; blank lines are skipped. Returns 0 when the piece is
 * consumed, fn's value when fn stopped, or -1 with err set (a line over
 * max_line, a line that is not a watch event, out of memory): the stream
 * is then unusable (reset before the next one). */
int sws_watch_feed(sws_watch_parser_t *p, const char *data, size_t n, sws_watch_event_fn fn,
                   void *ctx, char *err, size_t errlen);

/* The stream ended: 0, or -1 with err when it ended inside a line (a
 * truncated event, which must not be acted upon). */
int sws_watch_finish(sws_watch_parser_t *p, char *err, size_t errlen);

/* "ADDED", ... for logs. */
const char *sws_watch_type_name(sws_watch_type_t t);

#endif
