#include "shm/ingress_endpoint.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/err.h"
#include "shm/routeset_check.h"

#define IPC "ipc://"
#define TCP "tcp://"

static int refuse(const char *text, const char *why, char *err, size_t errlen)
{
    return sws_errf(err, errlen,
                    "\"%s\": %s; expected ipc:///PATH or tcp://127.0.0.1:PORT (a loopback "
                    "address)", text, why);
}

static int is_loopback(const sws_routeset_addr_t *a)
{
    static const uint8_t v6_loopback[16] = { [15] = 1 };
    if (a->family == AF_INET)
        return a->ip[0] == 127;
    return a->family == AF_INET6 && memcmp(a->ip, v6_loopback, 16) == 0;
}

int sws_ingress_endpoint_parse(const char *text, sws_ingress_endpoint_t *ep, char *err,
                               size_t errlen)
{
    memset(ep, 0, sizeof(*ep));
    if (strncmp(text, IPC, strlen(IPC)) == 0) {
        const char *path = text + strlen(IPC);
        /* The snapshot socket's path is the longer one, and both must fit
         * a sockaddr_un. */
        size_t max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1 -
                     strlen(SWS_INGRESS_SNAPSHOT_SUFFIX);
        if (path[0] != '/')
            return refuse(text, "an ipc path must be absolute", err, errlen);
        if (strlen(path) > max)
            return sws_errf(err, errlen, "\"%s\": an ipc path has at most %zu bytes", text, max);
        if (path[strlen(path) - 1] == '/')
            return refuse(text, "an ipc path names a file, not a directory", err, errlen);
        snprintf(ep->updates, sizeof(ep->updates), "%s", text);
        snprintf(ep->snapshot, sizeof(ep->snapshot), "%s" SWS_INGRESS_SNAPSHOT_SUFFIX, text);
        ep->ipc_path = ep->updates + strlen(IPC);
        return 0;
    }
    if (strncmp(text, TCP, strlen(TCP)) != 0)
        return refuse(text, "unknown transport", err, errlen);
    sws_routeset_addr_t a;
    const char *why = sws_routeset_address_parse(text + strlen(TCP), SWS_ADDR_NEED_PORT, &a);
    if (why != NULL)
        return refuse(text, why, err, errlen);
    if (a.family == AF_UNSPEC || !is_loopback(&a))
        return refuse(text, "not a loopback address: the publication has no authentication", err,
                      errlen);
    if (a.port == 65535)
        return refuse(text, "the snapshot socket takes PORT+1: the port must be below 65535", err,
                      errlen);
    const char *fmt = a.family == AF_INET6 ? TCP "[%s]:%u" : TCP "%s:%u";
    snprintf(ep->updates, sizeof(ep->updates), fmt, a.host, (unsigned)a.port);
    snprintf(ep->snapshot, sizeof(ep->snapshot), fmt, a.host, (unsigned)a.port + 1);
    return 0;
}
