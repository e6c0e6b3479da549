/* The respond action, and the dispatch of requests to the actions. */
#include "worker/handlers.h"

#include <stdlib.h>

#include "core/log.h"
#include "shm/table.h"
#include "worker/conn.h"
#include "core/path.h"
#include "worker/proxy.h"
#include "worker/static.h"

void sws_respond_handle(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    const sws_route_t *rt = r->route;
    const sws_tfield_t *tf = sws_table_fields(r->table, rt);
    sws_header_t fields[SWS_ROUTE_MAX_FIELDS];
    for (unsigned i = 0; i < rt->nfields; i++) {
        fields[i].name = (sws_str_t){ sws_table_str(r->table, tf[i].name), tf[i].name.len };
        fields[i].value = (sws_str_t){ sws_table_str(r->table, tf[i].value), tf[i].value.len };
    }
    sws_stream_respond(st, rt->status, fields, rt->nfields, sws_table_str(r->table, rt->body),
                       rt->body.len);
}

/* Replace r->path by its normal form (core/path.h), once, before
 * routing: the route, every action and the log of a refusal see the same
 * path. A path that changes is written into the stream's path buffer,
 * grown for the longest path it had to hold (bounded through
 * max_request_line). 0, or -1 with the request answered. */
static int normalize_path(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    sws_conn_t *c = r->conn;
    const char *why = NULL;
    sws_str_t norm;

    /* Asterisk-form and authority-form targets are no paths: they match no
     * route (every route path starts with '/'), so they get 404 as before. */
    if (r->path.len == 0 || r->path.p[0] != '/')
        return 0;
    sws_path_rc_t rc = sws_path_normalize(r->path, NULL, 0, &norm, &why);
    if (rc == SWS_PATH_NEED_ROOM) {
        size_t need = SWS_PATH_OUT_MAX(r->path.len);
        if (need > st->path_cap) {
            /* Doubling: a client sending ever longer paths costs a few
             * reallocations per connection, not one per request. */
            size_t cap = st->path_cap < 256 ? 256 : st->path_cap;
            while (cap < need)
                cap *= 2;
            char *p = realloc(st->path_buf, cap);
            if (p == NULL) {
                sws_log_error("client %s: out of memory for a %zu-byte path",
                              sws_conn_peer_text(c), r->path.len);
                sws_stream_error(st, 500);
                return -1;
            }
            st->path_buf = p;
            st->path_cap = cap;
        }
        rc = sws_path_normalize(r->path, st->path_buf, st->path_cap, &norm, &why);
    }
    if (rc == SWS_PATH_BAD) {
        sws_log_info("client %s: bad path: %s (400)", sws_conn_peer_text(c), why);
        sws_stream_error(st, 400);
        return -1;
    }
    r->path = norm;
    return 0;
}

/* Route the request in r->table, once: the head handler routes a request
 * with a body, and the dispatch at its end keeps that route while the
 * table is still the generation it came from. After a reload in between,
 * that generation is no longer guaranteed (worker/stream.h: only during a
 * handler's call), so the request is routed again in the one the worker
 * holds now. The path is normalized once either way. 0, or -1 with the
 * request answered (a path without a normal form). */
static int route_once(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    uint64_t gen = sws_table_generation(r->table);
    if (r->routed_gen == gen)
        return 0;
    if (r->routed_gen == 0 && normalize_path(st) < 0)
        return -1;
    r->route = sws_table_lookup(r->table, r->host.p, r->host.len, r->path.p, r->path.len);
    r->routed_gen = gen;
    return 0;
}

void sws_handlers_dispatch_head(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    if (r->table == NULL || route_once(st) < 0)
        return;
    const sws_route_t *rt = r->route;
    if (rt == NULL || rt->action != SWS_ACTION_PROXY || (rt->https_redirect && !r->tls))
        return;
    sws_proxy_handle_body(st);
}

void sws_handlers_dispatch(sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    if (r->table == NULL) {
        sws_stream_error(st, 503);
        return;
    }
    if (route_once(st) < 0)
        return;
    if (r->route == NULL) {
        sws_stream_error(st, 404);
        return;
    }
    if (r->route->https_redirect && !r->tls) {
        sws_https_redirect(st);
        return;
    }
    switch (r->route->action) {
    case SWS_ACTION_RESPOND:
        sws_respond_handle(st);
        break;
    case SWS_ACTION_STATIC:
        sws_static_handle(st);
        break;
    case SWS_ACTION_REDIRECT:
        sws_redirect_handle(st);
        break;
    case SWS_ACTION_PROXY:
        sws_proxy_handle(st);
        break;
    default:
        sws_stream_error(st, 501);
        break;
    }
}
