/*
 * ingressd's health endpoint (ingressd/health.h): the admin API's listener
 * and connections (supervisor/admin.h, sws_admin_serve) with a handler of
 * two paths.
 */
#include "ingressd/health.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "supervisor/admin.h"
#include "supervisor/listen.h"

struct sws_ingress_health {
    sws_admin_t *server;
    sws_ingress_health_fn fn;
    void *ctx;
};

static void handle(void *ctx, const char *method, const char *target, const char *body,
                   size_t body_len, sws_admin_reply_t *reply)
{
    sws_ingress_health_t *h = ctx;

    (void)body;
    (void)body_len;
    memset(reply, 0, sizeof(*reply));
    if (strcmp(target, "/healthz") != 0 && strcmp(target, "/readyz") != 0) {
        reply->status = 404;
        sws_json_error(&reply->body, "not found: GET /healthz or /readyz");
    } else if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        reply->status = 405;
        reply->allow = "GET, HEAD";
        sws_json_error(&reply->body, "only GET and HEAD");
    } else {
        reply->status = h->fn(h->ctx, target[1] == 'r', &reply->body);
    }
    if (reply->body.oom) {
        sws_json_out_free(&reply->body);
        reply->status = 500;
    }
}

sws_ingress_health_t *sws_ingress_health_start(sws_loop_t *loop, const char *address,
                                               sws_ingress_health_fn fn, void *ctx, char *err,
                                               size_t errlen)
{
    sws_admin_addr_t addr;
    unsigned len;
    char why[256];

    if (sws_listen_parse_address(address, &addr.ss, &len, why, sizeof(why)) < 0) {
        sws_errf(err, errlen, "--health: %s", why);
        return NULL;
    }
    addr.len = len;
    sws_ingress_health_t *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        sws_errf(err, errlen, "--health %s: out of memory", address);
        return NULL;
    }
    h->fn = fn;
    h->ctx = ctx;
    h->server = sws_admin_serve(loop, address, &addr, handle, h, why, sizeof(why));
    if (h->server == NULL) {
        sws_errf(err, errlen, "--health %s: %s", address, why);
        free(h);
        return NULL;
    }
    return h;
}

void sws_ingress_health_stop(sws_ingress_health_t *h)
{
    if (h == NULL)
        return;
    sws_admin_stop(h->server);
    free(h);
}
