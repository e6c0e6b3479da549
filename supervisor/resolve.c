/* Resolving member names (resolve.h). */
#include "supervisor/resolve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/err.h"

typedef struct addr_bytes {
    uint8_t family; /* 4 or 6: IPv4 sorts first */
    uint8_t ip[16];
} addr_bytes_t;

static int addr_cmp(const void *a, const void *b)
{
    const addr_bytes_t *x = a, *y = b;
    if (x->family != y->family)
        return x->family < y->family ? -1 : 1;
    return memcmp(x->ip, y->ip, sizeof(x->ip));
}

void sws_resolve_collect(const struct addrinfo *ai, uint16_t port, sws_resolved_t *out)
{
    addr_bytes_t all[64];
    size_t n = 0;

    for (; ai != NULL && n < sizeof(all) / sizeof(all[0]); ai = ai->ai_next) {
        addr_bytes_t a = { 0 };
        if (ai->ai_family == AF_INET) {
            a.family = 4;
            memcpy(a.ip, &((const struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
        } else if (ai->ai_family == AF_INET6) {
            a.family = 6;
            memcpy(a.ip, &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
        } else {
            continue;
        }
        all[n++] = a;
    }
    qsort(all, n, sizeof(all[0]), addr_cmp);
    out->n = 0;
    for (size_t i = 0; i < n && out->n < SWS_ROUTESET_RESOLVED_MAX; i++) {
        if (i > 0 && addr_cmp(&all[i], &all[i - 1]) == 0)
            continue; /* one per socket type and protocol in the answer */
        char ip[INET6_ADDRSTRLEN];
        inet_ntop(all[i].family == 4 ? AF_INET : AF_INET6, all[i].ip, ip, sizeof(ip));
        snprintf(out->addr[out->n++], SWS_RESOLVE_TEXT, all[i].family == 4 ? "%s:%u" : "[%s]:%u",
                 ip, (unsigned)port);
    }
}

/* RFC 6761, 6.4: "invalid" and the names under it never resolve. */
static int name_is_invalid(const char *host)
{
    size_t len = strlen(host);
    return strcasecmp(host, "invalid") == 0 ||
           (len > 8 && strcasecmp(host + len - 8, ".invalid") == 0);
}

int sws_resolve_member(const sws_routeset_addr_t *name, sws_resolved_t *out, char *err,
                       size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;

    out->n = 0;
    if (name_is_invalid(name->host))
        return sws_errf(err, errlen, "\"%s\" does not resolve: a name under .invalid never does",
                        name->host);
    int rc = getaddrinfo(name->host, NULL, &hints, &ai);
    if (rc != 0)
        return sws_errf(err, errlen, "\"%s\" does not resolve: %s", name->host,
                        gai_strerror(rc));
    sws_resolve_collect(ai, name->port, out);
    freeaddrinfo(ai);
    if (out->n == 0)
        return sws_errf(err, errlen, "\"%s\" has no IPv4 or IPv6 address", name->host);
    return 0;
}

size_t sws_resolve_bytes(const sws_resolved_t *r)
{
    size_t n = r->n * sizeof(char *);
    for (size_t i = 0; i < r->n; i++)
        n += strlen(r->addr[i]) + 1;
    return n;
}

int sws_resolve_fill(Sws__Member *m, const sws_resolved_t *r)
{
    char **list = calloc(r->n ? r->n : 1, sizeof(*list));
    if (list == NULL)
        return -1;
    for (size_t i = 0; i < r->n; i++) {
        if ((list[i] = strdup(r->addr[i])) == NULL) {
            while (i-- > 0)
                free(list[i]);
            free(list);
            return -1;
        }
    }
    for (size_t i = 0; i < m->n_resolved; i++)
        free(m->resolved[i]);
    free(m->resolved);
    m->resolved = list;
    m->n_resolved = r->n;
    return 0;
}
