/*
 * Resolving a member's DNS name into its addresses (ADR 0024): the
 * supervisor does it when it reads the configuration file (start, reload,
 * -t) and when the admin API adds or updates a member by name, never a
 * worker. Each address becomes a member of the table (Member.resolved).
 *
 * getaddrinfo(3) with the libc's rules (/etc/hosts, then DNS as
 * nsswitch.conf says), blocking: the supervisor waits for the answer, as
 * nginx and HAProxy do when they read their configuration. Names under
 * ".invalid" never resolve and are not looked up (RFC 6761, 6.4).
 *
 * Caller: the supervisor (any process may: nothing is kept).
 */
#ifndef SWS_SUPERVISOR_RESOLVE_H
#define SWS_SUPERVISOR_RESOLVE_H

#include <netdb.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/scalws.pb-c.h"
#include "shm/routeset_check.h"

/* "[ffff:...:ffff]:65535" and its NUL. */
#define SWS_RESOLVE_TEXT 56

typedef struct sws_resolved {
    size_t n;
    char addr[SWS_ROUTESET_RESOLVED_MAX][SWS_RESOLVE_TEXT]; /* "127.0.0.1:80", "[::1]:80" */
} sws_resolved_t;

/* Resolve the name of a member address (name: parsed, a name with a port).
 * 0 and out filled (at least one address), or -1 with err set ("does not
 * resolve: Name or service not known"). */
int sws_resolve_member(const sws_routeset_addr_t *name, sws_resolved_t *out, char *err,
                       size_t errlen);

/* Replace m->resolved with r's addresses (heap strings, as
 * free_unpacked frees them). 0, or -1 when out of memory (m unchanged). */
int sws_resolve_fill(Sws__Member *m, const sws_resolved_t *r);

/* Bytes sws_resolve_fill allocates for r (the config reader charges them). */
size_t sws_resolve_bytes(const sws_resolved_t *r);

/* What sws_resolve_member keeps of getaddrinfo's answer: each IPv4 and
 * IPv6 address once with port, IPv4 first then IPv6, each in byte order
 * (so the same answer gives the same members in the same order), at most
 * SWS_ROUTESET_RESOLVED_MAX (the first ones in that order). Pure, for the
 * tests. */
void sws_resolve_collect(const struct addrinfo *ai, uint16_t port, sws_resolved_t *out);

#endif
