/*
 * The admin API's endpoints (docs/admin-api.md): a request's method,
 * target and body in, a status and a JSON body out. No sockets here
 * (supervisor/admin.c serves them), so the unit tests drive it directly.
 *
 *   GET    /v1/status                          generations: published, per worker
 *   GET    /v1/pools                           pools and their members
 *   PUT    /v1/pools/NAME/members/HOST:PORT    add or update a member
 *   DELETE /v1/pools/NAME/members/HOST:PORT    remove a member
 *   GET    /healthz                            200 while the supervisor runs
 *   GET    /readyz                             200 once a table is served (and,
 *                                              subscribed to ingressd, its first
 *                                              snapshot applied); else 503
 *
 * Every endpoint but the two probes answers 401 (with a challenge) unless
 * api->auth is SWS_ADMIN_AUTH_OK: the probes tell nothing and change
 * nothing, and a kubelet's probe carries no secret (ADR 0064).
 *
 * A change copies the RouteSet published last (kept packed, unpacked at
 * the first request that reads it), edits the copy, passes it
 * through sws_routeset_check() and hands it to publish(): the supervisor's
 * one publication path, which calls sws_admin_api_published() on success
 * like for any other source. Refused input gets a 4xx and {"error": "..."},
 * and nothing is published.
 *
 * Caller: the supervisor only (it owns the RouteSet copy and the shm
 * writer side). Not thread-safe.
 */
#ifndef SWS_SUPERVISOR_ADMIN_API_H
#define SWS_SUPERVISOR_ADMIN_API_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "proto/scalws.pb-c.h"
#include "shm/shm.h"
#include "supervisor/admin_token.h"
#include "supervisor/resolve.h"

/* Publish rs as the next generation: 0 and *gen, SWS_SHM_BUSY (no free
 * arena yet: nothing changed), SWS_ADMIN_UNAVAILABLE with err (the server
 * takes no change now: it is stopping), or -1 with err (refused). On
 * success the callee has called sws_admin_api_published(). */
#define SWS_ADMIN_UNAVAILABLE (-3)
typedef int (*sws_admin_publish_fn)(void *ctx, const Sws__RouteSet *rs, uint64_t *gen,
                                    char *err, size_t errlen);

/* Resolve a member's name (supervisor/resolve.h's sws_resolve_member has
 * this shape). */
typedef int (*sws_admin_resolve_fn)(const sws_routeset_addr_t *name, sws_resolved_t *out,
                                    char *err, size_t errlen);

/* Start a binary upgrade (supervisor/upgrade.h) with binary (NULL: the
 * running binary's path): 0 and *pid (the new supervisor's),
 * SWS_ADMIN_CONFLICT with err (one is in progress), SWS_ADMIN_UNAVAILABLE
 * (stopping), SWS_ADMIN_BAD_BINARY with err (no executable file at that
 * path: nothing was started), or -1 with err (it could not start). */
#define SWS_ADMIN_CONFLICT (-4)
#define SWS_ADMIN_BAD_BINARY (-5)
typedef int (*sws_admin_upgrade_fn)(void *ctx, const char *binary, long *pid, char *err,
                                    size_t errlen);

typedef struct sws_admin_api {
    /* The RouteSet published last, packed (owned; NULL before the first):
     * a pack per publication, where a copy (pack, unpack, free the last)
     * cost the supervisor more than the table build at ingress scale. */
    uint8_t *packed;
    size_t packed_len;
    Sws__RouteSet *routes;   /* packed, unpacked when a request needs it (owned); NULL: not yet */
    uint64_t generation;     /* its generation */
    unsigned changes;        /* admin changes published since the file's last publication */
    sws_shm_t *shm;          /* read only: generations and counters; NULL: none shown */
    const char *accept_policy; /* the policy in force (after a fallback: reuseport); static */
    unsigned nworkers;
    sws_admin_publish_fn publish;
    void *publish_ctx;
    sws_admin_resolve_fn resolve; /* NULL: sws_resolve_member (getaddrinfo); the fuzz
                                   * target's asks no DNS server */
    const struct sws_ingress_sub *ingress; /* read only; NULL: not subscribed */
    sws_admin_upgrade_fn upgrade; /* POST /v1/upgrade, called with publish_ctx; NULL: 404 */
    int peer_unix; /* the request being answered came over a Unix socket (mode 0600: the
                    * supervisor's user), not a loopback port any local user reaches; set
                    * by supervisor/admin.c before each request */
    sws_admin_auth_t auth; /* the request's credentials (admin_token.h); set likewise */
} sws_admin_api_t;

typedef struct sws_admin_reply {
    unsigned status;
    const char *allow;       /* 405: the Allow header's value; else NULL */
    const char *challenge;   /* 401: the WWW-Authenticate header's value; else NULL */
    sws_json_out_t body;     /* owned: sws_json_out_free() */
} sws_admin_reply_t;

/* Answer one request: reply->status and a JSON body (a 500 when memory ran
 * out). method is llhttp's name ("GET"); target the request target as
 * sent; body its body. */
void sws_admin_api_handle(sws_admin_api_t *api, const char *method, const char *target,
                          const char *body, size_t body_len, sws_admin_reply_t *reply);

/* Who published a generation: the file (start, reload) and ingressd
 * (merged with the file's copy) both replace what the admin API changed;
 * the log names which. */
typedef enum sws_published_by {
    SWS_PUBLISHED_BY_ADMIN,
    SWS_PUBLISHED_BY_FILE,
    SWS_PUBLISHED_BY_INGRESS,
} sws_published_by_t;

/* Every publication, whatever its source: rs (borrowed) is now generation
 * gen, published by by; one not by the admin API replaces what the admin
 * API changed (logged when it did). 0, or -1 when the copy
 * could not be made (the API then answers 503 to changes until the next
 * publication). */
int sws_admin_api_published(sws_admin_api_t *api, const Sws__RouteSet *rs, uint64_t gen,
                            sws_published_by_t by);

/* The same from the RouteSet already packed (the supervisor keeps it so
 * for a binary upgrade): the bytes are copied, not packed again. */
int sws_admin_api_published_packed(sws_admin_api_t *api, const uint8_t *packed, size_t len,
                                   uint64_t gen, sws_published_by_t by);

/* The RouteSet published last, unpacked on first use and kept until the
 * next publication (owned by api): NULL before the first publication or
 * when out of memory. */
const Sws__RouteSet *sws_admin_api_routes(sws_admin_api_t *api);

void sws_admin_api_free(sws_admin_api_t *api);

#endif
