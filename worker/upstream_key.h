/*
 * The key of a request for a pool with `balance: hash` (`hash_key`):
 *   client_ip    the client's address
 *   header:NAME  the value of the first header field NAME (any case)
 *   cookie:NAME  the value of the cookie NAME (case-sensitive, as cookie
 *                names are), from the Cookie fields in order
 * The key's bytes go to sws_upstream_balance_pick() (upstream_balance.h);
 * a request without one (the field or cookie absent) is balanced round
 * robin there.
 *
 * Pure functions over slices: nothing is allocated or copied, every slice
 * handed out points into the caller's bytes and lives as long as they do.
 * The `hash_key` spec itself is parsed once, by the RouteSet checker
 * (sws_routeset_hash_key_problem), into the table's hash_kind and
 * hash_name, which the worker copies into a sws_upstream_key_t.
 */
#ifndef SWS_WORKER_UPSTREAM_KEY_H
#define SWS_WORKER_UPSTREAM_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"
#include "worker/request.h"

/* Numbered as the pool's hash_kind in the table (where 0 is "no hash"),
 * so that the proxy copies it over. */
typedef enum sws_upstream_key_kind {
    SWS_UPSTREAM_KEY_CLIENT_IP = 1,
    SWS_UPSTREAM_KEY_HEADER = 2,
    SWS_UPSTREAM_KEY_COOKIE = 3,
} sws_upstream_key_kind_t;

typedef struct sws_upstream_key {
    uint8_t kind;   /* sws_upstream_key_kind_t */
    sws_str_t name; /* header or cookie name, pointing into the spec; empty for client_ip */
} sws_upstream_key_t;

/* The value of the cookie named name in one Cookie field value
 * ("a=1; b=2"): pairs split at ';', spaces and tabs around names and values
 * ignored, a pair without '=' skipped, the first match taken. The value is
 * as sent (quotes kept; it may be empty). Returns 1 and sets *value when
 * found, 0 otherwise. */
int sws_upstream_cookie_value(sws_str_t cookie, sws_str_t name, sws_str_t *value);

/* The key of a request from its header fields and its client's address
 * (client: the address bytes, 4 for IPv4 and 16 for IPv6; an IPv4-mapped
 * IPv6 address counts as its 4 IPv4 bytes, so that one client has one key
 * whichever listener it came through). Returns 1 and sets *out to a
 * non-empty key, or 0 when the request has none (an empty value is none:
 * keyless requests are spread, not piled on one member). */
int sws_upstream_key_get(const sws_upstream_key_t *key, const sws_header_t *headers,
                         unsigned nheaders, sws_str_t client, sws_str_t *out);

#endif
