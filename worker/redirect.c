/* The redirect action and the https redirect. */
#include "worker/handlers.h"

#include <stdlib.h>
#include <string.h>

#include "core/fmt.h"
#include "shm/table.h"

/* A redirect's Location value is built on the stack unless the target is
 * unusually long. */
#define SWS_REDIRECT_STACK 2048

void sws_redirect_send(sws_stream_t *st, unsigned status, const sws_str_t *parts, int nparts,
                       sws_str_t query)
{
    static const char query_mark[] = "?";
    size_t len = query.len > 0 ? SWS_LIT_LEN(query_mark) + query.len : 0;
    for (int i = 0; i < nparts; i++)
        len += parts[i].len;
    char stack[SWS_REDIRECT_STACK];
    char *buf = len <= sizeof(stack) ? stack : malloc(len);
    if (buf == NULL) {
        sws_stream_error(st, 500);
        return;
    }
    char *o = buf;
    for (int i = 0; i < nparts; i++)
        o = sws_put(o, parts[i].p, parts[i].len);
    if (query.len > 0) {
        o = SWS_PUT_LIT(o, query_mark);
        o = sws_put(o, query.p, query.len);
    }
    const sws_header_t location = { SWS_STR("Location"), { buf, len } };
    sws_stream_respond(st, status, &location, 1, NULL, 0);
    if (buf != stack)
        free(buf);
}

void sws_redirect_handle(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    const sws_route_t *rt = r->route;
    sws_str_t loc = { sws_table_str(r->table, rt->location), rt->location.len };
    sws_redirect_send(st, rt->status, &loc, 1, SWS_STR(""));
}

/* The host without ":port"; an IPv6 literal keeps its brackets. */
static sws_str_t host_without_port(sws_str_t h)
{
    if (h.len > 0 && h.p[0] == '[') {
        const char *end = memchr(h.p, ']', h.len);
        if (end != NULL)
            h.len = (size_t)(end - h.p) + 1;
        return h;
    }
    const char *colon = memchr(h.p, ':', h.len);
    if (colon != NULL)
        h.len = (size_t)(colon - h.p);
    return h;
}

void sws_https_redirect(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    sws_str_t host = host_without_port(r->host);
    if (host.len == 0) {
        sws_stream_error(st, 400);
        return;
    }
    const sws_str_t parts[3] = { SWS_STR("https://"), host, r->path };
    sws_redirect_send(st, 308, parts, 3, r->query);
}
