/*
 * The request a proxy sends upstream, made from the parsed request (never
 * the client's bytes as they came: issue 7, ADR 0006).
 *
 *   METHOD SP normalized-path ["?" query] SP "HTTP/1.1" CRLF
 *   Host: the route's host_header, else the client's Host
 *   the client's fields minus: the hop-by-hop ones (core/http_token.h
 *     SWS_TKF_HOP_BY_HOP: Connection, Keep-Alive, TE, Trailer, Upgrade,
 *     Proxy-Connection, Proxy-Authenticate/-Authorization,
 *     Transfer-Encoding) and every field the Connection fields name; Host
 *     and Content-Length (written here); Expect (written here when the
 *     client waits for a 100 that the upstream is to give); Via when we
 *     add ours (the client's values come first in it); the
 *     X-Forwarded-Proto, X-Forwarded-Host and X-Real-IP the client sent
 *     (ours replace them: a client cannot pose as another address)
 *   Connection: upgrade and Upgrade: the client's value, when the request
 *     is tunnelled (sws_proxy_req_upgrade): the only hop-by-hop fields
 *     forwarded, since the upstream must see the request for a switch
 *   Expect: 100-continue (when asked: the client waits for the upstream's 100)
 *   Via: the client's values, ", ", "1.1 " pseudonym (when asked)
 *   X-Forwarded-For: the client's values, ", ", the client's address
 *   X-Forwarded-Proto: http | https
 *   X-Forwarded-Host: the client's Host (when it sent one)
 *   X-Real-IP: the client's address
 *   Transfer-Encoding: chunked (a body of unknown length follows), else
 *   Content-Length: N (when the client's request was framed: it carried
 *     Content-Length or Transfer-Encoding)
 *   CRLF
 * No other Connection field: HTTP/1.1 keeps the upstream connection alive.
 *
 * Pure functions of their arguments: any thread, no allocation.
 */
#ifndef SWS_WORKER_PROXY_REQ_H
#define SWS_WORKER_PROXY_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"
#include "worker/request.h"

typedef struct sws_proxy_req_opts {
    sws_str_t host_header; /* len 0: forward the client's Host */
    sws_str_t client_ip;   /* "127.0.0.1" */
    int tls;               /* the client came over TLS: X-Forwarded-Proto https */
    uint64_t body_len;     /* request body bytes that follow the head ... */
    int chunked;           /* ... or a chunked body follows (its length unknown) */
    sws_str_t upgrade;     /* len > 0: tunnelled; the client's Upgrade value */
    int expect_continue;   /* forward Expect: 100-continue */
    sws_str_t via;         /* len > 0: add "1.1 <via>" to Via */
} sws_proxy_req_opts_t;

/* Whether r asks for a protocol switch the proxy tunnels: HTTP/1.1, an
 * Upgrade field, "upgrade" among the Connection tokens, and not h2c
 * (HTTP/2 over cleartext is ours to speak, not to tunnel: its Upgrade is
 * dropped like any hop-by-hop field). The Upgrade value into proto. */
int sws_proxy_req_upgrade(const sws_request_t *r, sws_str_t *proto);

/* Bytes sws_proxy_req_write() writes for r and o (exact). */
size_t sws_proxy_req_size(const sws_request_t *r, const sws_proxy_req_opts_t *o);

/* Write the head into out (sws_proxy_req_size bytes); returns its length. */
size_t sws_proxy_req_write(char *out, const sws_request_t *r, const sws_proxy_req_opts_t *o);

/* The same in one walk where the size is not known yet: writes the head
 * into out[0, cap) when it fits and returns its length either way; a
 * length above cap means out holds nothing usable (write again with that
 * much room). */
size_t sws_proxy_req_write_in(char *out, size_t cap, const sws_request_t *r,
                              const sws_proxy_req_opts_t *o);

/* Room that holds the head for r and o (the client's fields plus ours, a
 * little more): the cap to try sws_proxy_req_write_in with. */
size_t sws_proxy_req_size_hint(const sws_request_t *r, const sws_proxy_req_opts_t *o);

/* Whether a field named name is dropped when forwarding r (see the top):
 * also used by the tests. */
int sws_proxy_req_drops(const sws_request_t *r, sws_str_t name);

/* Whether token is one of the comma-separated tokens (ASCII
 * case-insensitive) of the values of the fields named field in h[0..n):
 * `TE: deflate, trailers` has trailers. */
int sws_proxy_list_has(const sws_header_t *h, unsigned n, const char *field, sws_str_t token);

/* Whether the name is listed in one of the Connection values h[0..n)
 * (comma-separated tokens, ASCII case-insensitive): such a field is
 * hop-by-hop (RFC 9110 7.6.1), in a request or a response. */
int sws_proxy_connection_names(const sws_header_t *h, unsigned n, sws_str_t name);

/* The same question for every field of one message: the Connection
 * values' tokens, gathered once (asking sws_proxy_connection_names per
 * field walks every field again: quadratic). Borrows h until done. */
#define SWS_PROXY_CONN_TOKENS 16
typedef struct sws_proxy_conn_tokens {
    sws_str_t tok[SWS_PROXY_CONN_TOKENS];
    unsigned n;
    const sws_header_t *h; /* more tokens than tok holds: h[0..nh) is asked */
    unsigned nh;
} sws_proxy_conn_tokens_t;

void sws_proxy_conn_tokens_init(sws_proxy_conn_tokens_t *t, const sws_header_t *h, unsigned n);
int sws_proxy_conn_tokens_name(const sws_proxy_conn_tokens_t *t, sws_str_t name);

#endif
