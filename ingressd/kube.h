/*
 * ingressd's Kubernetes client: for each kind of kube_types.h, LIST (in
 * pages of `limit`, following `continue`) then WATCH from the list's
 * resourceVersion, for ever, delivering the objects to one
 * sws_kube_event_fn (the object store) in the order the API server sent
 * them.
 *
 * Per kind, a state machine (docs/adr/0036-kube-client-in-the-loop.md):
 *   LIST  pages until no `continue`: LIST_BEGIN, UPSERT per item, LIST_END;
 *         then WATCH from the list's resourceVersion
 *   WATCH allowWatchBookmarks, timeoutSeconds: ADDED/MODIFIED -> UPSERT,
 *         DELETED -> DELETE, BOOKMARK moves the resourceVersion only. The
 *         server ending the watch (its timeout) -> WATCH again from the last
 *         resourceVersion, no relist.
 *   410 Gone (an ERROR event with code 410, or HTTP 410 on a LIST page or a
 *         WATCH) -> a fresh LIST at once (counted as a relist).
 *   any other failure (connection, TLS, HTTP status, a bad event, a watch
 *         that ended having delivered nothing) -> the same step again after
 *         a jittered exponential backoff (sws_kube_backoff_ms), reset by
 *         the next success; a LIST starts over from its first page.
 * Secrets are listed with fieldSelector=type=kubernetes.io/tls; with a
 * namespace, every kind but IngressClass (cluster-scoped) is read in it
 * only.
 *
 * I/O: libcurl's multi interface with its sockets and its timer in the
 * caller's sws loop (core/loop.h): nothing here blocks, so the loop's other
 * work (publication, health) goes on while the API server is slow or gone.
 * Events are delivered from inside the loop's callbacks; the callback must
 * not free the client.
 *
 * Ownership: the client borrows loop and conn (both outlive it) and owns
 * its libcurl handles, its sockets' watchers and its timers. Caller:
 * ingressd's single thread; curl_global_init is the caller's (main), once.
 */
#ifndef SWS_INGRESSD_KUBE_H
#define SWS_INGRESSD_KUBE_H

#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "ingressd/kube_types.h"
#include "ingressd/kubeconfig.h"

typedef struct sws_kube sws_kube_t;

typedef struct sws_kube_opts {
    const char *namespace;     /* NULL or "": every namespace */
    unsigned kinds;            /* bit (1u << kind) per kind to read; 0: all */
    unsigned list_limit;       /* items per LIST page; 0: 500 */
    unsigned watch_timeout_s;  /* the WATCH's timeoutSeconds; 0: 300 */
    size_t max_event;          /* bytes of one watch event; 0: 8 MiB */
    size_t max_page;           /* bytes of one LIST page; 0: 256 MiB */
} sws_kube_opts_t;

typedef enum { SWS_KUBE_PHASE_LIST, SWS_KUBE_PHASE_WATCH, SWS_KUBE_PHASE_BACKOFF } sws_kube_phase_t;

/* Per kind, for /healthz and the logs. */
typedef struct sws_kube_stats {
    sws_kube_phase_t phase;
    int synced;               /* a LIST has completed since the start */
    uint64_t lists;           /* LISTs completed */
    uint64_t watches;         /* WATCH requests started */
    uint64_t relists;         /* LISTs started because of 410 Gone */
    uint64_t errors;          /* failures that led to a backoff */
    uint64_t events;          /* objects delivered (UPSERT, DELETE) */
    unsigned backoff_ms;      /* the wait before the retry under way, or 0 */
    const char *resource_version; /* the last one seen ("" before the first LIST) */
} sws_kube_stats_t;

/* Start reading every kind of opts->kinds: the first requests go out on the
 * loop's next iterations. NULL with err (out of memory, libcurl refused an
 * option). */
sws_kube_t *sws_kube_start(sws_loop_t *loop, sws_kube_conn_t *conn, const sws_kube_opts_t *opts,
                           sws_kube_event_fn fn, void *ctx, char *err, size_t errlen);

/* Abort every request and free everything; no event is delivered. */
void sws_kube_free(sws_kube_t *k);

/* Whether every kind read has completed a LIST (ready to translate). */
int sws_kube_synced(const sws_kube_t *k);

void sws_kube_stats(const sws_kube_t *k, sws_kube_kind_t kind, sws_kube_stats_t *out);

/* ---- policy, pure ---- */

/* "ingresses", "ingressclasses", "services", "endpointslices", "secrets". */
const char *sws_kube_kind_name(sws_kube_kind_t kind);

/* Parse a comma-separated list of kind names into a bit mask. 0, or -1
 * with err naming the unknown one. */
int sws_kube_kinds_parse(const char *list, unsigned *mask, char *err, size_t errlen);

/* The wait before retry number `failures` (1, 2, ...): 250 ms doubling up
 * to 30 s, each scaled by a factor in [0.8, 1.2] drawn from rnd, so that
 * many controllers cut off together do not come back together. */
unsigned sws_kube_backoff_ms(unsigned failures, uint32_t rnd);

/* The request path and query of a LIST page (cont: the previous page's
 * `continue`, or NULL) or a WATCH (rv: from where): into out, escaped,
 * without the server. 0, or -1 when it does not fit. */
int sws_kube_list_path(char *out, size_t len, sws_kube_kind_t kind, const char *ns,
                       unsigned limit, const char *cont);
int sws_kube_watch_path(char *out, size_t len, sws_kube_kind_t kind, const char *ns,
                        const char *rv, unsigned timeout_s);

#endif
