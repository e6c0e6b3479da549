/* The respond action, and the dispatch of requests to the actions. */
#include "worker/handlers.h"

#include "shm/table.h"
#include "worker/static.h"

void sws_respond_handle(sws_request_t *r)
{
    const sws_route_t *rt = r->route;
    sws_response_send(r, rt->status, sws_table_str(r->table, rt->headers), rt->headers.len,
                      sws_table_str(r->table, rt->body), rt->body.len);
}

void sws_handlers_dispatch(sws_request_t *r)
{
    if (r->table == NULL) {
        sws_response_error(r, 503);
        return;
    }
    r->route = sws_table_lookup(r->table, r->host.p, r->host.len, r->path.p, r->path.len);
    if (r->route == NULL) {
        sws_response_error(r, 404);
        return;
    }
    if (r->route->https_redirect && !r->tls) {
        sws_https_redirect(r);
        return;
    }
    switch (r->route->action) {
    case SWS_ACTION_RESPOND:
        sws_respond_handle(r);
        break;
    case SWS_ACTION_STATIC:
        sws_static_handle(r);
        break;
    case SWS_ACTION_REDIRECT:
        sws_redirect_handle(r);
        break;
    default:
        sws_response_error(r, 501);
        break;
    }
}
