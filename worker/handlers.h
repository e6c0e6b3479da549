/*
 * The local actions and the dispatch of a complete request to them.
 *
 * sws_handlers_dispatch() is the worker's request handler: it replaces
 * r->path by its normal form (core/path.h, ADR 0006; 400 when it has
 * none), routes the request by it in the table generation it carries
 * (r->table), then answers a
 * plain-HTTP request on an https_redirect route with a 308, else runs the
 * route's action: respond, static (worker/static.h) or redirect. No table
 * yet: 503. No route: 404. Proxy (roadmap 2): 501 for now.
 *
 * All run synchronously in the worker, inside the HTTP layer's call; what
 * they need from the table is copied into the response before they return.
 */
#ifndef SWS_WORKER_HANDLERS_H
#define SWS_WORKER_HANDLERS_H

#include "worker/request.h"

void sws_handlers_dispatch(sws_request_t *r);

/* The respond action: the route's status, its preformatted header lines
 * and its body. */
void sws_respond_handle(sws_request_t *r);

/* The redirect action: the route's status and "Location: <location>", the
 * configured location verbatim (the request path is never appended, also
 * when the location ends with '/'), and no body. */
void sws_redirect_handle(sws_request_t *r);

/* Answer status with "Location: " + the parts concatenated + "?" query
 * (when query is not empty), and no body (the redirect action, the https
 * redirect, a directory's trailing slash). */
void sws_redirect_send(sws_request_t *r, unsigned status, const sws_str_t *parts, int nparts,
                       sws_str_t query);

/* 308 to "https://" + the request's host without its port + path and
 * query. A request without a host gets 400. */
void sws_https_redirect(sws_request_t *r);

#endif
