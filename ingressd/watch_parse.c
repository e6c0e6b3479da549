/*
 * The WATCH stream parser (ingressd/watch_parse.h): a line at a time.
 */
#include "ingressd/watch_parse.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "ingressd/buf.h"

static const char *const type_names[] = {
    [SWS_WATCH_ADDED] = "ADDED",
    [SWS_WATCH_MODIFIED] = "MODIFIED",
    [SWS_WATCH_DELETED] = "DELETED",
    [SWS_WATCH_BOOKMARK] = "BOOKMARK",
    [SWS_WATCH_ERROR] = "ERROR",
};

const char *sws_watch_type_name(sws_watch_type_t t)
{
    return (unsigned)t < sizeof(type_names) / sizeof(type_names[0]) ? type_names[t] : "?";
}

void sws_watch_parser_init(sws_watch_parser_t *p, size_t max_line)
{
    memset(p, 0, sizeof(*p));
    p->max_line = max_line;
}

void sws_watch_parser_reset(sws_watch_parser_t *p)
{
    p->len = 0;
}

void sws_watch_parser_free(sws_watch_parser_t *p)
{
    free(p->buf);
    p->buf = NULL;
    p->len = p->cap = 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

/* One complete line (without its newline). */
static int parse_line(const char *line, size_t n, sws_watch_event_fn fn, void *ctx, char *err,
                      size_t errlen)
{
    json_error_t jerr;
    json_t *ev;
    const char *type;
    json_t *obj;
    int rc;

    if (is_blank(line, n))
        return 0;
    ev = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
    if (ev == NULL)
        return sws_errf(err, errlen, "watch event is not JSON: %s (column %d)", jerr.text,
                        jerr.column);
    type = json_string_value(json_object_get(ev, "type"));
    obj = json_object_get(ev, "object");
    rc = -1;
    if (type == NULL || !json_is_object(obj)) {
        sws_errf(err, errlen, "watch event without a \"type\" string and an \"object\"");
        goto out;
    }
    for (size_t t = 0; t < sizeof(type_names) / sizeof(type_names[0]); t++)
        if (strcmp(type, type_names[t]) == 0) {
            rc = fn(ctx, (sws_watch_type_t)t, obj);
            goto out;
        }
    sws_errf(err, errlen, "watch event of unknown type \"%.32s\"", type);
out:
    json_decref(ev);
    return rc;
}

static int line_too_long(const sws_watch_parser_t *p, char *err, size_t errlen)
{
    return sws_errf(err, errlen, "watch event longer than %zu bytes", p->max_line);
}

/* Append to the partial line, within the bound. */
static int append(sws_watch_parser_t *p, const char *data, size_t n, char *err, size_t errlen)
{
    int rc = sws_ingress_buf_append(&p->buf, &p->len, &p->cap, 4096, p->max_line, data, n);
    if (rc == SWS_BUF_TOO_LARGE)
        return line_too_long(p, err, errlen);
    if (rc == SWS_BUF_NO_MEMORY)
        return sws_errf(err, errlen, "out of memory for a watch event of %zu bytes", p->len + n);
    return 0;
}

int sws_watch_feed(sws_watch_parser_t *p, const char *data, size_t n, sws_watch_event_fn fn,
                   void *ctx, char *err, size_t errlen)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t piece = nl != NULL ? (size_t)(nl - data) : n;
        int rc;

        if (nl == NULL)
            return append(p, data, piece, err, errlen);
        if (p->len == 0) {
            /* The whole line is in this piece: parse it where it is. */
            if (piece > p->max_line)
                return line_too_long(p, err, errlen);
            rc = parse_line(data, piece, fn, ctx, err, errlen);
        } else {
            if (append(p, data, piece, err, errlen) < 0)
                return -1;
            size_t line = p->len;
            p->len = 0; /* before fn, which may stop the feed */
            rc = parse_line(p->buf, line, fn, ctx, err, errlen);
        }
        if (rc != 0)
            return rc;
        data = nl + 1;
        n -= piece + 1;
    }
    return 0;
}

int sws_watch_finish(sws_watch_parser_t *p, char *err, size_t errlen)
{
    if (p->len > 0 && !is_blank(p->buf, p->len))
        return sws_errf(err, errlen, "watch stream ended inside an event (%zu bytes)", p->len);
    p->len = 0;
    return 0;
}
