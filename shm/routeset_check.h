/*
 * The one check of a RouteSet, whatever its source (the YAML file today;
 * ingressd and the admin API later): what a RouteSet must satisfy before a
 * table is built from it.
 *
 * sws_table_build() calls sws_routeset_check() first and refuses what it
 * refuses, so no source can bypass it. The YAML reader calls the rule
 * functions below while it walks (so its messages name the YAML node) and
 * sws_routeset_check() on the result, mapping a refusal's field path back
 * onto FILE:LINE:COL.
 *
 * Checked: host names (exact, "*.suffix" wildcard, "*"; an optional trailing
 * dot), every name once across all hosts (ASCII case-insensitive, trailing
 * dot ignored), a host has names; route paths start with '/', hold no
 * query, spaces or controls, and are in normal form (core/path.h: requests
 * are matched in it); match is prefix or exact (regex not yet); one route
 * per (match, path) in a host; exactly one action; respond status 200..599,
 * header names are tokens other than the framing headers the server sets,
 * values without controls, no body on 204/304; redirect status 301, 302,
 * 303, 307 or 308 and a location without spaces or controls; a static root
 * that is absolute and an index that is a file name; a proxy names a pool
 * that exists, its host_header is "" or HOST[:PORT] and its via "" or a
 * token of at most SWS_VIA_PSEUDONYM_MAX bytes; pool names are
 * unique and well formed, balance and hash_key agree, keepalive, retries,
 * max_conns, timeouts and health within the ranges below, protocol http
 * or https and tls only with https (CA certificates that parse unless
 * verification is off, an sni that is a host name); member addresses
 * are HOST:PORT, once per pool, at most SWS_ROUTESET_MEMBERS_MAX in all
 * (a name counts once per address it resolved to), a name's resolved
 * addresses IP literals with its port, each once, weights 0..1000, states known, member ids
 * (given or derived, sws_member_id) unique across the RouteSet; the
 * settings' log level and Server name; TLS (ADR 0033): each certificate pair
 * loads (the PEM parses, the key matches the certificate), at most one RSA
 * and one ECDSA pair per host, protocols TLSv1.2/TLSv1.3, ciphers and
 * ciphersuites lists OpenSSL knows. Not checked: the per-request limits of Settings (sources fill them
 * with the defaults of shm/table.h; the YAML reader checks its ranges).
 *
 * Pure functions on memory: any process may call them; nothing is kept,
 * except in a sws_routeset_scratch_t its caller owns and passes in.
 */
#ifndef SWS_SHM_ROUTESET_CHECK_H
#define SWS_SHM_ROUTESET_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "proto/scalws.pb-c.h"

/* Where a RouteSet was refused and why. path is the field path inside the
 * RouteSet, as the config errors write keys: "hosts[0].routes[2].respond.
 * headers[1]" ("" for the RouteSet itself). msg is one sentence in the form
 * of the config errors ("expected X, got Y" where that fits). */
typedef struct sws_routeset_refusal {
    char path[160];
    char msg[352];
} sws_routeset_refusal_t;

/* 0, or -1 with one refusal in *why: the settings and pools first (each
 * pool's fields, then its members, then names and ids used twice), then
 * each host and its routes in order, then names and routes used twice (the
 * later use is the one refused). */
int sws_routeset_check(const Sws__RouteSet *rs, sws_routeset_refusal_t *why);

/* The check's working memory (its sorted names, its member ids' hash
 * set: about 5 MiB at 100,000 members), kept from one check to the next
 * by a caller that checks large RouteSets again and again, so that a
 * check reuses the pages the last one faulted in (ADR 0055). Owner: the
 * supervisor, in its shm handle (sws_shm_t.check: sws_shm_prepare grows
 * it, sws_shm_publish's build uses it, sws_shm_close frees it). A caller
 * that checks once passes NULL instead (sws_routeset_check,
 * sws_table_build). Zero-initialized before the first use; one check at a
 * time; no content survives from one check to the next. */
typedef struct sws_routeset_scratch {
    void *mem;
    size_t cap;  /* bytes at mem, all faulted in */
    size_t used; /* taken by the check in progress */
} sws_routeset_scratch_t;

/* Make s hold what checking rs takes, its pages faulted in, and empty it:
 * grown to that need; shrunk to it when the need is under a quarter of
 * what s holds (a small set after a large one gives the memory back,
 * while sets of about one size never reallocate). Sizes from counts alone
 * (pools, members, names, routes), no parse. 0, or -1 out of memory (s
 * then holds nothing; a check through it refuses the set). */
int sws_routeset_scratch_reserve(sws_routeset_scratch_t *s, const Sws__RouteSet *rs);

void sws_routeset_scratch_free(sws_routeset_scratch_t *s);

/* Internal to shm (sws_table_build): the check sorts the pool names to
 * find each proxy route's pool; the build looks its routes' pools up in
 * that same array rather than sorting the names again. */
typedef struct sws_routeset_pools {
    const Sws__RouteSet *rs;
    struct use *sorted; /* one per pool, sorted by name (routeset_check.c),
                         * in the scratch the check used */
    size_t host_bytes;  /* the canonical hosts (sws_routeset_addr_t.host) of
                         * every member and resolved address, each with a
                         * NUL: the table's layout takes it from the check,
                         * which parsed them, rather than parse them again */
    sws_routeset_scratch_t *scratch; /* the check's; NULL after it */
    void *owned;        /* the check's own scratch when given none */
} sws_routeset_pools_t;

/* sws_routeset_check, its arrays in *scratch (reserved for rs here; NULL:
 * memory of its own), and when it passes (0) *pools for
 * sws_routeset_pool_index, valid until sws_routeset_pools_free and the
 * scratch's next use; on -1 *pools holds nothing. */
int sws_routeset_check_pools(const Sws__RouteSet *rs, sws_routeset_scratch_t *scratch,
                             sws_routeset_refusal_t *why, sws_routeset_pools_t *pools);

/* The index in rs->pools of the pool called name, which the check saw
 * exists. */
uint32_t sws_routeset_pool_index(const sws_routeset_pools_t *pools, const char *name);

void sws_routeset_pools_free(sws_routeset_pools_t *pools);

/* Whether rs has a certificate for a TLS listener to serve: a host's or
 * the default one. A source with a TLS listener refuses a RouteSet
 * without (listeners are not part of a RouteSet). */
int sws_routeset_has_certificates(const Sws__RouteSet *rs);

/* ---- the rules, one per kind of value: NULL when fine, else why not (a
 * static string) ---- */

/* A host name as configured: "a.example", "*.example", "*", "[::1]". */
const char *sws_routeset_host_name_problem(const char *name);

/* Whether two host names are the same name as the table matches them:
 * ASCII case-insensitive, a trailing dot ignored. 1 when they are. */
int sws_routeset_host_names_same(const char *a, const char *b);

/* A header name in a respond route. */
const char *sws_routeset_header_name_problem(const char *name);

/* A header value (or the Server name): no CR, LF or other control
 * characters; tab is fine. 1 when fine. */
int sws_routeset_field_value_ok(const char *value);

/* A pool's tls.sni: a host name, neither a wildcard nor an IP literal. */
const char *sws_routeset_sni_problem(const char *name);


/* Why a pool of this protocol (Sws__Pool__Protocol) may not carry tls,
 * or NULL when it may (https, h2, grpc). */
const char *sws_routeset_pool_tls_problem(int protocol);

/* Whether a pool speaks TLS to its members: https always (its tls absent
 * is verification against no CA, which the checker refuses); h2 and grpc
 * when they carry tls, else h2c (ADR 0034). Every reader of a RouteSet
 * asks this, so that one rule says it. */
int sws_routeset_pool_tls(const Sws__Pool *pool);

/* The pseudonym a proxy route's `via: true` stands for, and the longest
 * one accepted (RFC 9110 7.6.3: a token). */
#define SWS_VIA_PSEUDONYM_DEFAULT "scalws"
#define SWS_VIA_PSEUDONYM_MAX 64u

/* Whether via is a proxy route's valid pseudonym: "" (none) or a token of
 * at most SWS_VIA_PSEUDONYM_MAX bytes. */
int sws_routeset_via_ok(const char *via);

/* A route path: msg gets the whole message ("\"/a/../b\" is not in normal
 * form ...: write \"/b\"") and -1 is returned; 0 when fine. */
int sws_routeset_route_path_check(const char *path, char *msg, size_t msglen);

/* A static index: a file name, no '/', not "." or "..". 1 when fine. */
int sws_routeset_index_ok(const char *index);

/* A redirect status (301, 302, 303, 307, 308). 1 when fine. */
int sws_routeset_redirect_status_ok(uint32_t status);

/* A redirect location: NULL when fine, else why not. */
const char *sws_routeset_location_problem(const char *location);

/* An address as a member (HOST:PORT) or a Host header (HOST[:PORT])
 * gives it, parsed: HOST is an IPv4 address, an IPv6 address in brackets or
 * a DNS name (letters, digits, '-', '_', dots; not resolved here). */
typedef struct sws_routeset_addr {
    int family;              /* AF_INET, AF_INET6, or AF_UNSPEC: a name */
    uint16_t port;           /* 0: none given */
    uint8_t ip[16];          /* network order */
    char host[256];          /* the IP as inet_ntop writes it, or the name lowercased
                                without a trailing dot */
    char key[272];           /* host and port, canonical: "10.0.0.1:80",
                                "[::1]:80", "a.example:80" (sws_member_id) */
} sws_routeset_addr_t;

/* The one parser of HOST[:PORT] (members, Host headers, and the listen
 * and admin addresses through supervisor/listen.h). Parse text into *out
 * (may be NULL). NULL when fine, else why not (a static string). The port
 * is 1..65535 in at most five digits; a name is checked, not resolved.
 * flags: */
#define SWS_ADDR_NEED_PORT 1u /* a member or a socket address: HOST:PORT */
#define SWS_ADDR_ANY_HOST 2u  /* ":PORT" and "*:PORT" are 0.0.0.0:PORT (listening) */
const char *sws_routeset_address_parse(const char *text, unsigned flags, sws_routeset_addr_t *out);

/* sws_routeset_address_parse with SWS_ADDR_NEED_PORT when need_port. */
const char *sws_routeset_address_problem(const char *text, int need_port,
                                         sws_routeset_addr_t *out);

/* A pool name: 1..SWS_ROUTESET_POOL_NAME_MAX of letters, digits, '-', '_'
 * and '.' (it goes into admin API paths and log lines as is). */
const char *sws_routeset_pool_name_problem(const char *name);

/* A hash_key: "client_ip", "header:NAME" or "cookie:NAME", NAME a token.
 * *kind gets its sws_hash_kind_t and *name where NAME starts ("" for
 * client_ip). NULL when fine, else why not. */
const char *sws_routeset_hash_key_problem(const char *key, unsigned *kind, const char **name);

#define SWS_ROUTESET_POOL_NAME_MAX 128u
#define SWS_ROUTESET_WEIGHT_MAX 1000u
#define SWS_ROUTESET_KEEPALIVE_MAX 10000u
/* A pool's CA file (Debian's whole store is about 220 KiB). */
#define SWS_ROUTESET_CA_PEM_MAX (1u << 20)
#define SWS_ROUTESET_RETRIES_MAX 100u
#define SWS_ROUTESET_MAX_CONNS_MAX 1000000u
#define SWS_ROUTESET_MAX_FAILS_MAX 10000u
#define SWS_ROUTESET_POOL_TIMEOUT_MAX_MS (24u * 3600 * 1000) /* a day */
/* Members of all pools together: each worker publishes a record per
 * member in a block of shared memory sized for this many (shm/shm.h: 40
 * bytes each, 5 MiB per worker, touched only as far as members exist).
 * An ingress controller's cluster has 100,000 endpoints (issue 10). */
#define SWS_ROUTESET_MEMBERS_MAX 131072u
/* Addresses a member's name may be resolved to (Member.resolved). */
#define SWS_ROUTESET_RESOLVED_MAX 32u

/* The members of the table a RouteSet member becomes: one per resolved
 * address, else itself. */
static inline size_t sws_routeset_member_width(const Sws__Member *m)
{
    return m->n_resolved > 0 ? m->n_resolved : 1;
}

/* The lowest and highest respond status (no 1xx: an interim answer is never
 * a final response, and the HTTP layer sends 100 Continue itself). */
#define SWS_ROUTESET_RESPOND_STATUS_MIN 200u
#define SWS_ROUTESET_RESPOND_STATUS_MAX 599u

#endif
