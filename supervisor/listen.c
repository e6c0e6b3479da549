#include "supervisor/listen.h"

#include "core/err.h"
#include "shm/routeset_check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sws_listen_policy_name(sws_accept_policy_t policy)
{
    switch (policy) {
    case SWS_ACCEPT_SHARED:
        return "shared";
    case SWS_ACCEPT_REUSEPORT:
        return "reuseport";
    }
    return "unknown";
}

void sws_listen_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "[%s]:%u", host, ntohs(sin6->sin6_port));
    } else if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(sin->sin_port));
    } else {
        snprintf(buf, len, "(family %d)", ss->ss_family);
    }
}

/* ---- addresses ---- */

static int addr_fail(char *err, size_t errlen, const char *text, const char *why)
{
    return sws_errf(err, errlen, "bad address \"%s\": %s", text, why);
}

/* A name (sws_routeset_address_parse checks it, never resolves it) to its first
 * address, as a socket to bind sees it. */
static int addr_resolve(const char *host, struct sockaddr_storage *ss, unsigned *sslen,
                        const char *text, char *err, size_t errlen)
{
    struct addrinfo hints, *res;
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0)
        return sws_errf(err, errlen, "bad address \"%s\": cannot resolve \"%.100s\": %s", text,
                        host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *sslen = (unsigned)res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int sws_listen_parse_address(const char *text, struct sockaddr_storage *ss, unsigned *sslen,
                             char *err, size_t errlen)
{
    sws_routeset_addr_t a;
    const char *problem =
        sws_routeset_address_parse(text, SWS_ADDR_NEED_PORT | SWS_ADDR_ANY_HOST, &a);

    memset(ss, 0, sizeof(*ss));
    /* `listen 8080;` is nginx's way of saying every address. */
    if (problem != NULL && text[0] != '\0' && strspn(text, "0123456789") == strlen(text))
        problem = "expected HOST:PORT (\":8080\" for every IPv4 address)";
    if (problem != NULL)
        return addr_fail(err, errlen, text, problem);
    if (a.family == AF_UNSPEC && addr_resolve(a.host, ss, sslen, text, err, errlen) < 0)
        return -1;
    if (a.family == AF_INET6 || (a.family == AF_UNSPEC && ss->ss_family == AF_INET6)) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        if (a.family == AF_INET6)
            memcpy(&sin6->sin6_addr, a.ip, sizeof(sin6->sin6_addr));
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(a.port);
        *sslen = sizeof(*sin6);
    } else {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        if (a.family == AF_INET)
            memcpy(&sin->sin_addr, a.ip, sizeof(sin->sin_addr));
        sin->sin_family = AF_INET;
        sin->sin_port = htons(a.port);
        *sslen = sizeof(*sin);
    }
    return 0;
}

int sws_listen_check_local(const struct sockaddr_storage *ss, unsigned sslen, char *err,
                           size_t errlen)
{
    struct sockaddr_storage any = *ss;
    char name[96];
    int fd, rc = 0;

    if (any.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&any)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&any)->sin_port = 0;
    fd = socket(any.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&any, sslen) < 0) {
        int e = errno;
        sws_listen_format(&any, name, sizeof(name));
        /* The port is 0: drop ":0" from the name. */
        char *colon = strrchr(name, ':');
        if (colon != NULL)
            *colon = '\0';
        rc = sws_errf(err, errlen, "%s is not an address of this host (%s: %s)", name,
                      fd < 0 ? "socket" : "bind", strerror(e));
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- sockets ---- */

static int set_flag(int fd, int level, int name)
{
    int one = 1;
    return setsockopt(fd, level, name, &one, sizeof(one));
}

/* One listening socket on addr; -1 with err set. On success addr->ss holds
 * the bound address, so a port 0 becomes the port the kernel chose and the
 * next sockets of a reuseport group join that same port.
 *
 * reuseport: REUSE_NONE for a shared socket; REUSE_FIRST for the first
 * socket of a reuseport group, which binds without SO_REUSEPORT and sets it
 * only before listen(): the bind then fails with EADDRINUSE when another
 * process already listens there (with SO_REUSEPORT or not), as a shared
 * socket's would, instead of silently joining that process's group and
 * taking half its connections. REUSE_JOIN for the group's other sockets,
 * which join the first. Linux checks a bind against the flags the bound
 * sockets hold at that time, so the first socket's late flag counts. */
enum reuse { REUSE_NONE, REUSE_FIRST, REUSE_JOIN };

static int open_one(sws_listen_addr_t *addr, enum reuse reuse, int backlog, char *err,
                    size_t errlen)
{
    int family = addr->ss.ss_family;
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sws_errf(err, errlen, "socket %s: %s", addr->name, strerror(errno));
    const char *what = NULL;
    if (set_flag(fd, SOL_SOCKET, SO_REUSEADDR) < 0)
        what = "SO_REUSEADDR";
    else if (reuse == REUSE_JOIN && set_flag(fd, SOL_SOCKET, SO_REUSEPORT) < 0)
        what = "SO_REUSEPORT";
    else if (family == AF_INET6 && set_flag(fd, IPPROTO_IPV6, IPV6_V6ONLY) < 0)
        what = "IPV6_V6ONLY";
    else if (bind(fd, (struct sockaddr *)&addr->ss, addr->len) < 0)
        what = "bind";
    else if (reuse == REUSE_FIRST && set_flag(fd, SOL_SOCKET, SO_REUSEPORT) < 0)
        what = "SO_REUSEPORT";
    else if (listen(fd, backlog) < 0)
        what = "listen";
    /* Accepted sockets inherit this: a new connection starts in delayed-ACK
     * mode, so its first request is acknowledged by our answer instead of
     * a pure ACK of its own (one loopback packet less per connection, ADR
     * 0068). Only a packet is at stake: a kernel that refuses it still
     * serves. */
    if (what == NULL) {
        int zero = 0;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
    }
    if (what == NULL) {
        socklen_t len = sizeof(addr->ss);
        if (getsockname(fd, (struct sockaddr *)&addr->ss, &len) < 0)
            what = "getsockname";
        else
            addr->len = len;
    }
    if (what != NULL) {
        int e = errno;
        close(fd);
        return sws_errf(err, errlen, "%s %s: %s", what, addr->name, strerror(e));
    }
    return fd;
}

int sws_listen_open(sws_listen_set_t *set, const sws_listen_addr_t *addrs, unsigned naddrs,
                    sws_accept_policy_t policy, unsigned nworkers, int backlog, char *err,
                    size_t errlen)
{
    memset(set, 0, sizeof(*set));
    if (naddrs == 0 || nworkers == 0)
        return sws_errf(err, errlen, "no listen address or no worker");
    set->policy = policy;
    set->naddrs = naddrs;
    set->ngroups = policy == SWS_ACCEPT_SHARED ? 1 : nworkers;
    unsigned nfds = set->ngroups * naddrs;
    set->addrs = calloc(naddrs, sizeof(*set->addrs));
    set->fds = malloc((size_t)nfds * sizeof(*set->fds));
    if (set->addrs == NULL || set->fds == NULL) {
        sws_listen_close(set);
        return sws_errf(err, errlen, "out of memory for %u listening sockets", nfds);
    }
    memcpy(set->addrs, addrs, naddrs * sizeof(*addrs));
    for (unsigned i = 0; i < nfds; i++)
        set->fds[i] = -1;

    for (unsigned g = 0; g < set->ngroups; g++) {
        enum reuse reuse = policy == SWS_ACCEPT_SHARED ? REUSE_NONE
                           : g == 0                    ? REUSE_FIRST
                                                       : REUSE_JOIN;
        for (unsigned a = 0; a < naddrs; a++) {
            int fd = open_one(&set->addrs[a], reuse, backlog, err, errlen);
            if (fd < 0) {
                sws_listen_close(set);
                return -1;
            }
            set->fds[g * naddrs + a] = fd;
        }
    }
    return 0;
}

/* The group worker `index` accepts on: its own, or the one shared group. */
static unsigned group_of(const sws_listen_set_t *set, unsigned index)
{
    return index % set->ngroups;
}

const int *sws_listen_worker_fds(const sws_listen_set_t *set, unsigned index)
{
    return &set->fds[group_of(set, index) * set->naddrs];
}

void sws_listen_close_others(sws_listen_set_t *set, unsigned index)
{
    for (unsigned g = 0; g < set->ngroups; g++) {
        if (g == group_of(set, index))
            continue;
        for (unsigned a = 0; a < set->naddrs; a++) {
            int *fd = &set->fds[g * set->naddrs + a];
            if (*fd >= 0)
                close(*fd);
            *fd = -1;
        }
    }
}

void sws_listen_close(sws_listen_set_t *set)
{
    if (set->fds != NULL) {
        for (unsigned i = 0; i < set->ngroups * set->naddrs; i++) {
            if (set->fds[i] >= 0)
                close(set->fds[i]);
        }
    }
    free(set->fds);
    free(set->addrs);
    memset(set, 0, sizeof(*set));
}
