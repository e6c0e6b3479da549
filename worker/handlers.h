/*
 * The local actions and the dispatch of a complete request to them.
 *
 * Each action answers through the stream's producer API (worker/stream.h):
 * a status, name/value fields and a body; it writes no protocol byte.
 *
 * sws_handlers_dispatch() is the worker's stream handler: it replaces
 * r->path by its normal form (core/path.h, ADR 0006; 400 when it has
 * none), routes the request by it in the table generation it carries
 * (r->table), then answers a
 * plain-HTTP request on an https_redirect route with a 308, else runs the
 * route's action: respond, static (worker/static.h), redirect or proxy
 * (worker/proxy.h). No table yet: 503. No route: 404.
 *
 * All run in the worker, inside the protocol's call; the local actions give
 * the stream their whole answer before they return (what they take from the table is
 * copied, so a reload cannot pull it from under a slow client).
 */
#ifndef SWS_WORKER_HANDLERS_H
#define SWS_WORKER_HANDLERS_H

#include "worker/stream.h"

void sws_handlers_dispatch(sws_stream_t *st);

/* The worker's head handler (worker/conn.h): a request with a body, its
 * head complete. It routes the request (its path normalized); a proxy
 * route takes it here (the body streams to the upstream); any other
 * request is left alone for sws_handlers_dispatch once the body is read
 * and dropped, which uses the route found here (r->route, r->routed_gen)
 * without a second lookup, unless the worker adopted another generation
 * meanwhile: then the request is routed again in that one, since the
 * earlier one is only guaranteed during a handler's call. */
void sws_handlers_dispatch_head(sws_stream_t *st);

/* The respond action: the route's status, its header fields and its body. */
void sws_respond_handle(sws_stream_t *st);

/* The redirect action: the route's status and "Location: <location>", the
 * configured location verbatim (the request path is never appended, also
 * when the location ends with '/'), and no body. */
void sws_redirect_handle(sws_stream_t *st);

/* Answer status with "Location: " + the parts concatenated + "?" query
 * (when query is not empty), and no body (the redirect action, the https
 * redirect, a directory's trailing slash). */
void sws_redirect_send(sws_stream_t *st, unsigned status, const sws_str_t *parts, int nparts,
                       sws_str_t query);

/* 308 to "https://" + the request's host without its port + path and
 * query. A request without a host gets 400. */
void sws_https_redirect(sws_stream_t *st);

#endif
