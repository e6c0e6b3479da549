/*
 * One generation of the routing table, as it lies in shared memory.
 *
 * Position-independent: every reference inside the table is an offset from
 * the table's own first byte (sws_table_t *), never a pointer, so the same
 * bytes are valid in every process that maps the region, at any address.
 *
 * Built by sws_table_build() (supervisor only) from a RouteSet into a
 * caller-provided arena; read by workers with sws_table_lookup() and the
 * accessors below, without locks. A table is immutable once published.
 *
 * Lifetime for readers: a worker may use a table (and every string in it)
 * only while it holds that generation (shm.h: between its
 * sws_shm_reader_acquire() calls). Anything a request needs after the event
 * loop iteration in which it was routed must be copied out (a respond body
 * goes into the connection's output buffer; a static root is only needed
 * to open the file).
 *
 * Matching:
 *   hosts  exact name (ASCII case-insensitive, port stripped by the caller
 *          or not: sws_table_lookup ignores ":port"), then the longest
 *          wildcard "*.example.com" (matches "a.example.com" and
 *          "a.b.example.com", not "example.com"), then catch-all "*".
 *          No Host (HTTP/1.0) is looked up as "".
 *   paths  exact routes first, then the longest prefix; the path is
 *          compared bytewise: the caller passes the request's normal path
 *          (core/path.h, ADR 0006) without the query string.
 */
#ifndef SWS_SHM_TABLE_H
#define SWS_SHM_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/scalws.pb-c.h"
#include "shm/routeset_check.h"

typedef struct sws_table sws_table_t; /* opaque: the header of a generation */

/* A string inside the table: bytes at (char *)table + off, len bytes, and a
 * NUL after them (so a path can be handed to open(2) directly). */
typedef struct sws_tstr {
    uint32_t off;
    uint32_t len;
} sws_tstr_t;

typedef enum sws_action {
    SWS_ACTION_NONE = 0,
    SWS_ACTION_RESPOND = 1,
    SWS_ACTION_STATIC = 2,
    SWS_ACTION_REDIRECT = 3,
    SWS_ACTION_PROXY = 4,
} sws_action_t;

typedef enum sws_match {
    SWS_MATCH_PREFIX = 0,
    SWS_MATCH_EXACT = 1,
} sws_match_t;

typedef struct sws_route {
    uint8_t action;          /* sws_action_t */
    uint8_t match;           /* sws_match_t */
    uint8_t https_redirect;  /* route flag OR its host's flag, precomputed */
    uint8_t follow_symlinks; /* static */
    uint16_t status;         /* respond, redirect */
    uint16_t nfields;        /* respond: its header fields ... */
    sws_tstr_t path;
    uint32_t fields;         /* ... from this index (sws_table_fields) */
    sws_tstr_t body;         /* respond */
    sws_tstr_t location;     /* redirect */
    sws_tstr_t root;         /* static: absolute, no trailing '/' (except "/") */
    sws_tstr_t index;        /* static: index file name */
    uint32_t pool;           /* proxy: index into the pools */
    sws_tstr_t host_header;  /* proxy: Host sent upstream; "" = the client's */
    sws_tstr_t via;          /* proxy: pseudonym for Via; "" = no Via added */
} sws_route_t;

/* Header fields a respond route may carry (sws_routeset_check refuses more). */
#define SWS_ROUTE_MAX_FIELDS 64u

/* A header field of a respond route: name and value as configured
 * (checked: a token and a field value, sws_routeset_check). */
typedef struct sws_tfield {
    sws_tstr_t name;
    sws_tstr_t value;
} sws_tfield_t;

/* Per-request settings of this generation (see proto Settings). */
typedef struct sws_settings {
    uint32_t max_request_line;
    uint32_t max_header_size;
    uint32_t max_headers;
    uint32_t header_timeout_ms;
    uint64_t max_body_size;
    uint32_t body_timeout_ms;
    uint32_t keepalive_timeout_ms;
    uint32_t send_timeout_ms;
    uint32_t keepalive_requests;
    uint32_t access_log_format; /* Sws__AccessLog__Format */
    uint32_t log_level;         /* sws_log_level_t + 1; 0: not set (see below) */
    uint32_t shutdown_timeout_ms; /* graceful stop: read when it begins */
    uint32_t server_tokens;     /* Sws__Settings__ServerTokens */
    sws_tstr_t server_name;     /* "" = no Server header */
    sws_tstr_t access_log_path; /* "" = standard output */
} sws_settings_t;

/* The error-log level a worker applies when it adopts this generation (so
 * a reload reaches running workers, not only restarted ones), or -1 when
 * the RouteSet does not say and the worker keeps the level it has. */
static inline int sws_settings_log_level(const sws_settings_t *st)
{
    return (int)st->log_level - 1;
}

/* Upstream pools. A proxy route's `pool` indexes them; a pool's members
 * are the nmembers entries of sws_table_members(). Every field is set:
 * what a RouteSet left absent holds the defaults below. */
typedef struct sws_member {
    uint64_t id;             /* stable: upstream keep-alive pools are keyed by it */
    sws_tstr_t address;      /* "host:port" as the RouteSet gave it */
    uint32_t weight;         /* 1..1000 */
    uint32_t state;          /* Sws__Member__State */
    /* The address, parsed once here so that no worker parses it again: */
    sws_tstr_t host;         /* IPv4 / IPv6 (no brackets) as inet_ntop writes it,
                                or a DNS name, lowercased */
    uint16_t port;
    uint8_t family;          /* AF_INET, AF_INET6, or AF_UNSPEC: host is a name */
    uint8_t resolved;        /* 1: address is a name the supervisor resolved, and
                                host/ip are one of its addresses (ADR 0024) */
    uint8_t ip[16];          /* network order; AF_INET uses the first 4 bytes */
} sws_member_t;

typedef enum sws_balance {
    SWS_BALANCE_ROUND_ROBIN = 0, /* weighted */
    SWS_BALANCE_LEAST_CONN = 1,
    SWS_BALANCE_HASH = 2,        /* consistent, on hash_kind/hash_name */
} sws_balance_t;

typedef enum sws_hash_kind {
    SWS_HASH_NONE = 0,       /* balance is not hash */
    SWS_HASH_CLIENT_IP = 1,
    SWS_HASH_HEADER = 2,     /* hash_name: the header (match case-insensitively) */
    SWS_HASH_COOKIE = 3,     /* hash_name: the cookie */
} sws_hash_kind_t;

typedef struct sws_pool {
    sws_tstr_t name;
    uint32_t first_member;
    uint32_t nmembers;
    uint8_t balance;         /* sws_balance_t */
    uint8_t hash_kind;       /* sws_hash_kind_t */
    uint8_t protocol;        /* Sws__Pool__Protocol: HTTP, HTTPS, H2, GRPC */
    uint8_t tls;             /* 1: to the members over TLS (sws_routeset_pool_tls) */
    uint8_t tls_verify;      /* over TLS: 1 = the member's certificate is verified */
    sws_tstr_t hash_name;    /* header or cookie name; "" otherwise */
    uint32_t keepalive;      /* idle connections per member per worker */
    uint32_t retries;        /* further members tried after a failure */
    uint32_t max_conns;      /* per member per worker; 0 = no limit */
    uint32_t connect_timeout_ms;
    uint32_t send_timeout_ms;
    uint32_t read_timeout_ms;
    uint32_t idle_timeout_ms;
    uint32_t max_fails;      /* within fail_window_ms: down for cooldown_ms; 0 = off */
    uint32_t fail_window_ms;
    uint32_t cooldown_ms;
    sws_tstr_t tls_ca_pem;   /* over TLS and verify: trust anchors (PEM); else "" */
    sws_tstr_t tls_sni;      /* over TLS: the name to send and verify; "": the member's */
    /* A 64-bit hash of everything above but the offsets (the strings'
     * bytes instead) and of its members in order, likewise; never 0. Two
     * generations' pools of one name with one digest are the same pool: a
     * worker keeps its view of it (worker/upstream_pools.h, ADR 0048). */
    uint64_t digest;
} sws_pool_t;

/* The id of a member that the RouteSet gave none (Member.id 0): a 64-bit
 * FNV-1a of the pool name and the member's canonical address
 * (sws_routeset_addr_t.key), never 0. The same (pool, address) gets the
 * same id in every generation and from every source (ADR 0013). Any
 * process may call it. */
uint64_t sws_member_id(const char *pool, const char *key);

/* The id of one address a member's name resolved to (Member.resolved):
 * sws_member_id() of the pool and "NAMEKEY=ADDRKEY" ("localhost:80=
 * 127.0.0.1:80"), so it is stable while the name keeps that address, and
 * never the id of the address written as such. Any process may call it. */
uint64_t sws_member_resolved_id(const char *pool, const char *name_key, const char *addr_key);

/* The defaults of a pool (docs/configuration.md, "pools"): sources fill
 * them; the table takes the timeouts and health ones when the RouteSet's
 * Pool has no Timeouts or Health message. */
#define SWS_DEFAULT_POOL_KEEPALIVE 32u
#define SWS_DEFAULT_POOL_RETRIES 2u
#define SWS_DEFAULT_POOL_WEIGHT 1u
#define SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS 5000u
#define SWS_DEFAULT_POOL_SEND_TIMEOUT_MS 60000u
#define SWS_DEFAULT_POOL_READ_TIMEOUT_MS 60000u
#define SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS 60000u
#define SWS_DEFAULT_POOL_MAX_FAILS 3u
#define SWS_DEFAULT_POOL_FAIL_WINDOW_MS 10000u
#define SWS_DEFAULT_POOL_COOLDOWN_MS 10000u
/* protocol https with verification and no tls.ca: Debian's store of the
 * system's trust anchors (package ca-certificates). */
#define SWS_DEFAULT_POOL_TLS_CA "/etc/ssl/certs/ca-certificates.crt"

/* The defaults of the per-request settings (docs/configuration.md), in
 * one place: the config layer fills them into every RouteSet it builds,
 * and a worker applies them while it holds no table generation. */
#define SWS_DEFAULT_MAX_REQUEST_LINE (8u << 10)
#define SWS_DEFAULT_MAX_HEADER_SIZE (16u << 10)
#define SWS_DEFAULT_MAX_HEADERS 100u
#define SWS_DEFAULT_MAX_BODY_SIZE (1u << 20)
#define SWS_DEFAULT_HEADER_TIMEOUT_MS 60000u
#define SWS_DEFAULT_BODY_TIMEOUT_MS 60000u
#define SWS_DEFAULT_KEEPALIVE_TIMEOUT_MS 75000u
#define SWS_DEFAULT_SEND_TIMEOUT_MS 60000u
#define SWS_DEFAULT_KEEPALIVE_REQUESTS 1000u
#define SWS_DEFAULT_SHUTDOWN_TIMEOUT_MS 30000u

#define SWS_SETTINGS_DEFAULTS                                                  \
    {                                                                          \
        .max_request_line = SWS_DEFAULT_MAX_REQUEST_LINE,                      \
        .max_header_size = SWS_DEFAULT_MAX_HEADER_SIZE,                        \
        .max_headers = SWS_DEFAULT_MAX_HEADERS,                                \
        .header_timeout_ms = SWS_DEFAULT_HEADER_TIMEOUT_MS,                    \
        .max_body_size = SWS_DEFAULT_MAX_BODY_SIZE,                            \
        .body_timeout_ms = SWS_DEFAULT_BODY_TIMEOUT_MS,                        \
        .keepalive_timeout_ms = SWS_DEFAULT_KEEPALIVE_TIMEOUT_MS,              \
        .send_timeout_ms = SWS_DEFAULT_SEND_TIMEOUT_MS,                        \
        .keepalive_requests = SWS_DEFAULT_KEEPALIVE_REQUESTS,                  \
        .shutdown_timeout_ms = SWS_DEFAULT_SHUTDOWN_TIMEOUT_MS,                \
    }

/* TLS termination (proto Tls, ADR 0033): what every TLS listener of this
 * generation applies, and the certificates of the hosts. A worker builds
 * its OpenSSL contexts from these bytes when it adopts the generation
 * (worker/tls.h); it never opens a certificate file. */
#define SWS_TLS_PROTO_1_2 1u /* sws_tls_settings_t.protocols bits */
#define SWS_TLS_PROTO_1_3 2u
#define SWS_DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS 10000u
#define SWS_DEFAULT_TLS_TICKET_KEY_ROTATION_MS (12u * 3600 * 1000)
/* ECDHE key exchange and AEAD ciphers only (Mozilla "intermediate" without
 * DHE): forward secrecy, no CBC. */
#define SWS_DEFAULT_TLS_CIPHERS                                                \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"               \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"               \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define SWS_DEFAULT_TLS_CIPHERSUITES                                           \
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/* server.tls.ticket_key_rotation of a RouteSet's tls (NULL or 0: the
 * default): the period the supervisor rotates the ticket keys with and
 * the one the table carries to the workers, so both read it alike. */
uint32_t sws_table_ticket_key_rotation_ms(const Sws__Tls *tls);

typedef struct sws_tls_settings {
    uint32_t protocols;            /* SWS_TLS_PROTO_* bits, never 0 */
    uint32_t handshake_timeout_ms;
    uint32_t ticket_key_rotation_ms;
    uint8_t session_tickets;
    uint8_t reserved[3];
    sws_tstr_t ciphers;            /* never "": the default filled in */
    sws_tstr_t ciphersuites;
} sws_tls_settings_t;

/* A certificate chain and its key, PEM (checked: they parse and match). */
typedef struct sws_tcert {
    sws_tstr_t cert_pem;
    sws_tstr_t key_pem;
} sws_tcert_t;

/* Bytes sws_table_build() would write for rs (exact), so the caller can
 * check an arena is large enough before touching it. */
size_t sws_table_size(const Sws__RouteSet *rs);

/* Bytes a built table occupies in its arena (what sws_table_size() said
 * for its RouteSet). */
size_t sws_table_bytes(const sws_table_t *t);

/* Build rs into arena (arena_size bytes, 8-byte aligned) stamped with
 * generation gen. Returns 0, or -1 with a message in err
 * ("hosts[0].routes[1].match: regex paths are not supported yet", "table
 * needs 123 bytes, arena has 100; raise server.table_size": the arena is
 * that key's size; nothing is written then).
 * Caller: supervisor only.
 *
 * Refused: whatever sws_routeset_check() refuses (shm/routeset_check.h),
 * as "FIELD PATH: message" ("hosts[0].routes[2].path: ..."), checked
 * first: every source of a RouteSet passes the same check. Normalised: host names
 * lowercased without a trailing dot, static roots without trailing '/',
 * access_log path "-" stored as "", a member's weight 0 as 1 and its id 0
 * as sws_member_id(), a member with resolved addresses as one member per
 * address (sws_member_resolved_id(), in their order), a pool's absent Timeouts or Health as the
 * SWS_DEFAULT_POOL_* values, an absent Tls (or its zero fields) as the
 * SWS_DEFAULT_TLS_* values. On failure the arena holds garbage. */
int sws_table_build(void *arena, size_t arena_size, uint64_t gen, const Sws__RouteSet *rs,
                    char *err, size_t errlen);

/* sws_table_build, its check working in scratch (shm/routeset_check.h:
 * the supervisor's, kept between builds; NULL: memory of its own). */
int sws_table_build_reusing(void *arena, size_t arena_size, uint64_t gen,
                            const Sws__RouteSet *rs, sws_routeset_scratch_t *scratch, char *err,
                            size_t errlen);

uint64_t sws_table_generation(const sws_table_t *t);
const sws_settings_t *sws_table_settings(const sws_table_t *t);

/* The route for host and path, or NULL (no host matches, or the host has no
 * route for the path). host may include ":port"; it is ignored. */
const sws_route_t *sws_table_lookup(const sws_table_t *t, const char *host, size_t host_len,
                                    const char *path, size_t path_len);

/* TLS: the settings (a RouteSet without Tls reads as the defaults above),
 * the default certificate (NULL: none), and the host a TLS client's SNI
 * name selects: exact name, else a wildcard "*.example.com" matching
 * exactly one label ("a.example.com", not "a.b.example.com", RFC 6125
 * 6.4.3), never the catch-all; name is matched ASCII case-insensitively,
 * without a port. Returns host index + 1, or 0. sws_table_host_certs gives
 * that host's certificates (*n of them; 0: it has none). */
const sws_tls_settings_t *sws_table_tls(const sws_table_t *t);
const sws_tcert_t *sws_table_default_cert(const sws_table_t *t);
uint32_t sws_table_host_count(const sws_table_t *t);
uint32_t sws_table_tls_host(const sws_table_t *t, const char *name, size_t len);
const sws_tcert_t *sws_table_host_certs(const sws_table_t *t, uint32_t host, uint32_t *n);

uint32_t sws_table_pool_count(const sws_table_t *t);
const sws_pool_t *sws_table_pool(const sws_table_t *t, uint32_t i); /* i < pool count */
const sws_member_t *sws_table_members(const sws_table_t *t, const sws_pool_t *p);

/* The route's header fields (route->nfields of them). */
const sws_tfield_t *sws_table_fields(const sws_table_t *t, const sws_route_t *route);

static inline const char *sws_table_str(const sws_table_t *t, sws_tstr_t s)
{
    return (const char *)t + s.off;
}

#endif
