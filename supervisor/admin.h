/*
 * The admin API's listeners and connections (server.admin.listen): JSON
 * over HTTP/1.1, served by the supervisor on its event loop; workers never
 * serve it. The endpoints are supervisor/admin_api.h, the request reader
 * supervisor/admin_http.h; docs/admin-api.md is the operator's guide and
 * docs/adr/0015-admin-api.md the decisions.
 *
 * Addresses: a Unix socket path (starts with '/'; created mode 0600; its
 * directory is created (0755) when missing; a socket file left by a dead
 * process is replaced, one that someone still listens on is not), or a
 * loopback HOST:PORT (127.0.0.0/8, ::1: anything else is refused by the
 * config reader). With server.admin.token_file a request on a loopback
 * port needs its bearer token (supervisor/admin_token.h), all but the
 * probes; without it the start warns once per such listener. The Unix
 * socket's mode guards it.
 *
 * An address that cannot be opened costs one error line and the server
 * starts anyway: traffic matters more than the admin API.
 *
 * Connections: one request each, at most SWS_ADMIN_MAX_CONNS at a time
 * (more are closed at once), each closed SWS_ADMIN_TIMEOUT_MS after its
 * accept whatever its state, so a stuck client costs one fd for a while.
 *
 * Caller: the supervisor (sws_admin_start), or ingressd (sws_admin_serve,
 * its health endpoint). Not thread-safe. Every function takes a
 * NULL admin (not started) and does nothing.
 */
#ifndef SWS_SUPERVISOR_ADMIN_H
#define SWS_SUPERVISOR_ADMIN_H

#include <stddef.h>
#include <sys/socket.h>

#include "core/loop.h"
#include "proto/scalws.pb-c.h"
#include "shm/shm.h"
#include "supervisor/admin_api.h"

#define SWS_ADMIN_DEFAULT_LISTEN "/run/scalws/admin.sock"
#define SWS_ADMIN_MAX_CONNS 64u
#define SWS_ADMIN_TIMEOUT_MS 10000u

typedef struct sws_admin sws_admin_t;

typedef struct sws_admin_addr {
    struct sockaddr_storage ss; /* AF_UNIX, AF_INET or AF_INET6 */
    socklen_t len;
} sws_admin_addr_t;

/* What answers a request: reply->status and its JSON body (admin_api.h).
 * The admin API's is sws_admin_api_handle. */
typedef void (*sws_admin_handle_fn)(void *ctx, const char *method, const char *target,
                                    const char *body, size_t body_len, sws_admin_reply_t *reply);

/* Parse one server.admin.listen entry. 0, or -1 with a sentence in err
 * ("\"10.0.0.1:9000\" is not a loopback address: ..."). What the config
 * reader checks with and the start binds with. */
int sws_admin_parse_address(const char *text, sws_admin_addr_t *addr, char *err, size_t errlen);

/* Open every address of cfg (each failure logged once, see above) and
 * serve them on loop. shm and nworkers feed GET /v1/status (read only); publish is the
 * supervisor's publication path (admin_api.h). Returns NULL when cfg lists
 * no address (the API is off) or memory ran out (logged). */
sws_admin_t *sws_admin_start(sws_loop_t *loop, const Sws__Admin *cfg, sws_shm_t *shm,
                             unsigned nworkers, sws_admin_publish_fn publish, void *ctx);

/* sws_admin_start, taking over the listening sockets a binary upgrade
 * handed (supervisor/upgrade.h) instead of binding: fds[k], already
 * listening, serves the configured address equal to names[k]; a taken
 * fd is set to -1 (the rest stay the caller's). */
sws_admin_t *sws_admin_start_inherited(sws_loop_t *loop, const Sws__Admin *cfg, sws_shm_t *shm,
                                       unsigned nworkers, sws_admin_publish_fn publish,
                                       void *ctx, const char *const *names, int *fds,
                                       unsigned nfds);

/* The token of cfg->token_file (cfg->token, as the config reader read it;
 * copied) from now on: a reload's (sws_admin_start takes the start's).
 * Logs one line when a token is set, and the start's warning again when
 * the key went away. admin may be NULL. */
void sws_admin_set_token(sws_admin_t *admin, const Sws__Admin *cfg);

/* A worker at its start: the token admin holds, a copy of the
 * supervisor's that fork made, wiped. admin may be NULL. */
void sws_admin_forget_token(sws_admin_t *admin);

/* POST /v1/upgrade calls upgrade with the publish ctx (NULL: no such
 * endpoint). admin may be NULL. */
void sws_admin_set_upgrade(sws_admin_t *admin, sws_admin_upgrade_fn upgrade);

/* The listening sockets (at most max) and their configured names, for a
 * binary upgrade's hand-off; both stay admin's. Returns the count. */
unsigned sws_admin_listeners(const sws_admin_t *admin, const char **names, int *fds,
                             unsigned max);

/* sws_admin_stop, except that the Unix socket files stay: a new binary
 * serves them now. */
void sws_admin_release(sws_admin_t *admin);

/* The same listener and connections for another process's small JSON
 * endpoint (ingressd's --health): handle answers every request on addr (any
 * address: the caller decides which it takes; name is for logs). NULL with
 * err. sws_admin_stop ends it. */
sws_admin_t *sws_admin_serve(sws_loop_t *loop, const char *name, const sws_admin_addr_t *addr,
                             sws_admin_handle_fn handle, void *ctx, char *err, size_t errlen);

/* The accept policy in force, for GET /v1/status (a static string: the
 * configured one, or reuseport after an eBPF fallback). admin may be NULL. */
void sws_admin_set_accept_policy(sws_admin_t *admin, const char *policy);

/* The ingress subscription, for GET /v1/status and /readyz (NULL: none).
 * admin may be NULL. */
void sws_admin_set_ingress(sws_admin_t *admin, const struct sws_ingress_sub *ingress);

/* Every publication (see sws_admin_api_published). */
void sws_admin_published(sws_admin_t *admin, const Sws__RouteSet *rs, uint64_t gen,
                         sws_published_by_t by);
/* The same, already packed (sws_admin_api_published_packed). */
void sws_admin_published_packed(sws_admin_t *admin, const uint8_t *packed, size_t len,
                                uint64_t gen, sws_published_by_t by);

/* In a forked child: close every admin descriptor, touching nothing else
 * (the child leaves the loop, and the socket files stay the parent's). */
void sws_admin_close_fds(sws_admin_t *admin);

/* Close everything, remove the Unix socket files this process created,
 * free. */
void sws_admin_stop(sws_admin_t *admin);

#endif
