/*
 * The Kubernetes client (ingressd/kube.h): LIST then WATCH per kind, on
 * libcurl's multi interface driven by the sws loop.
 */
#include "ingressd/kube.h"

#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/err.h"
#include "core/log.h"
#include "core/version.h"
#include "ingressd/buf.h"
#include "ingressd/watch_parse.h"

#define KUBE_LIST_LIMIT 500u
#define KUBE_WATCH_TIMEOUT_S 300u
#define KUBE_MAX_EVENT (8u << 20)
#define KUBE_MAX_PAGE (256u << 20)
/* The body of a refusal (a metav1.Status): enough for its message. */
#define KUBE_MAX_STATUS_BODY (64u << 10)
#define KUBE_CONNECT_TIMEOUT_MS 10000L
/* A LIST page must come within this; a WATCH within its timeoutSeconds
 * plus this, or the connection is taken for dead. */
#define KUBE_REQUEST_SLACK_S 60L
#define KUBE_BACKOFF_FIRST_MS 250u
#define KUBE_BACKOFF_MAX_MS 30000u

typedef struct kube_sock kube_sock_t;

/* One kind's LIST/WATCH state machine. */
typedef struct kube_watch {
    sws_kube_t *k;
    sws_kube_kind_t kind;
    CURL *easy;                 /* the request under way, or NULL */
    struct curl_slist *headers;
    sws_kube_phase_t next;      /* what the backoff timer starts */
    char rv[128];               /* resourceVersion to watch from; "" before a LIST */
    char *cont;                 /* the next LIST page's `continue`, or NULL */
    char *body;                 /* a LIST page, or a refusal's Status */
    size_t body_len, body_cap;
    int list_begun;             /* LIST_BEGIN delivered for the LIST under way */
    int watch_events;           /* events (bookmarks included) on this watch */
    int gone;                   /* the watch said 410: relist when it ends */
    int unreadable;             /* the watch stream broke: relist after the backoff */
    char failure[256];          /* why the write callback stopped the transfer */
    unsigned failures;          /* consecutive, for the backoff */
    sws_timer_queue_t retry_q;  /* one timer per queue: its duration is this wait */
    sws_timer_t retry;
    sws_watch_parser_t parser;
    sws_kube_stats_t stats;     /* .phase: the request under way, or BACKOFF */
} kube_watch_t;

/* A socket libcurl asked us to watch. Freed by the deferred reaper, not
 * when libcurl lets go of it: an event for it may still be in the loop's
 * batch. */
struct kube_sock {
    sws_io_t io;
    sws_kube_t *k;
    int dead;
    kube_sock_t *next_dead;
};

struct sws_kube {
    sws_loop_t *loop;
    sws_kube_conn_t *conn;
    sws_kube_opts_t opts;
    sws_kube_event_fn fn;
    void *ctx;
    CURLM *multi;
    sws_timer_queue_t curl_q;   /* libcurl's one timer, its duration set per arm */
    sws_timer_t curl_timer;
    sws_defer_t reap;
    kube_sock_t *dead;
    uint64_t rnd;               /* xorshift state for the jitter */
    kube_watch_t w[SWS_KUBE_KINDS];
};

/* ---- policy ---- */

static const struct {
    const char *name;
    const char *prefix;       /* the API group's path */
    int namespaced;
    const char *selector;     /* a fieldSelector, escaped, or NULL */
} kinds[SWS_KUBE_KINDS] = {
    [SWS_KUBE_INGRESS] = { "ingresses", "/apis/networking.k8s.io/v1", 1, NULL },
    [SWS_KUBE_INGRESSCLASS] = { "ingressclasses", "/apis/networking.k8s.io/v1", 0, NULL },
    [SWS_KUBE_SERVICE] = { "services", "/api/v1", 1, NULL },
    [SWS_KUBE_ENDPOINTSLICE] = { "endpointslices", "/apis/discovery.k8s.io/v1", 1, NULL },
    [SWS_KUBE_SECRET] = { "secrets", "/api/v1", 1, "type%3Dkubernetes.io%2Ftls" },
};

const char *sws_kube_kind_name(sws_kube_kind_t kind)
{
    return (unsigned)kind < SWS_KUBE_KINDS ? kinds[kind].name : "?";
}

int sws_kube_kinds_parse(const char *list, unsigned *mask, char *err, size_t errlen)
{
    const char *p = list;

    *mask = 0;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        unsigned k;
        for (k = 0; k < SWS_KUBE_KINDS; k++)
            if (strlen(kinds[k].name) == n && strncmp(p, kinds[k].name, n) == 0)
                break;
        if (k == SWS_KUBE_KINDS)
            return sws_errf(err, errlen, "unknown kind \"%.*s\" (ingresses, ingressclasses, "
                            "services, endpointslices, secrets)", (int)(n > 40 ? 40 : n), p);
        *mask |= 1u << k;
        p += n;
        if (*p == ',')
            p++;
    }
    return *mask == 0 ? sws_errf(err, errlen, "no kind given") : 0;
}

unsigned sws_kube_backoff_ms(unsigned failures, uint32_t rnd)
{
    unsigned base = KUBE_BACKOFF_FIRST_MS;

    if (failures == 0)
        return 0;
    for (unsigned i = 1; i < failures && base < KUBE_BACKOFF_MAX_MS; i++)
        base *= 2;
    if (base > KUBE_BACKOFF_MAX_MS)
        base = KUBE_BACKOFF_MAX_MS;
    /* 80..120 percent, in steps of 0.1 percent. */
    return (unsigned)((uint64_t)base * (800 + rnd % 401) / 1000);
}

/* Percent-encode s for a query value (RFC 3986 unreserved pass). */
static int put_query_value(char *out, size_t len, size_t *at, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
        if (*at + (plain ? 1 : 3) >= len)
            return -1;
        if (plain) {
            out[(*at)++] = (char)c;
        } else {
            out[(*at)++] = '%';
            out[(*at)++] = hex[c >> 4];
            out[(*at)++] = hex[c & 15];
        }
    }
    out[*at] = '\0';
    return 0;
}

static int put_text(char *out, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int put_text(char *out, size_t len, size_t *at, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(out + *at, len - *at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len - *at)
        return -1;
    *at += (size_t)n;
    return 0;
}

/* The collection's path, then the query's first parameters. */
static int put_collection(char *out, size_t len, size_t *at, sws_kube_kind_t kind,
                          const char *ns)
{
    if (put_text(out, len, at, "%s/", kinds[kind].prefix) < 0)
        return -1;
    if (kinds[kind].namespaced && ns != NULL && ns[0] != '\0')
        if (put_text(out, len, at, "namespaces/") < 0 || put_query_value(out, len, at, ns) < 0 ||
            put_text(out, len, at, "/") < 0)
            return -1;
    if (put_text(out, len, at, "%s?", kinds[kind].name) < 0)
        return -1;
    if (kinds[kind].selector != NULL &&
        put_text(out, len, at, "fieldSelector=%s&", kinds[kind].selector) < 0)
        return -1;
    return 0;
}

int sws_kube_list_path(char *out, size_t len, sws_kube_kind_t kind, const char *ns,
                       unsigned limit, const char *cont)
{
    size_t at = 0;

    if (put_collection(out, len, &at, kind, ns) < 0 || put_text(out, len, &at, "limit=%u", limit) < 0)
        return -1;
    if (cont != NULL && (put_text(out, len, &at, "&continue=") < 0 ||
                         put_query_value(out, len, &at, cont) < 0))
        return -1;
    return 0;
}

int sws_kube_watch_path(char *out, size_t len, sws_kube_kind_t kind, const char *ns,
                        const char *rv, unsigned timeout_s)
{
    size_t at = 0;

    if (put_collection(out, len, &at, kind, ns) < 0 ||
        put_text(out, len, &at, "watch=1&allowWatchBookmarks=true&timeoutSeconds=%u"
                 "&resourceVersion=", timeout_s) < 0 ||
        put_query_value(out, len, &at, rv) < 0)
        return -1;
    return 0;
}

/* ---- objects ---- */

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static void set_rv(kube_watch_t *w, const char *rv)
{
    if (rv != NULL && rv[0] != '\0')
        snprintf(w->rv, sizeof(w->rv), "%s", rv);
}

static void deliver(kube_watch_t *w, sws_kube_event_t ev, const json_t *obj)
{
    if (ev == SWS_KUBE_UPSERT || ev == SWS_KUBE_DELETE)
        w->stats.events++;
    w->k->fn(w->k->ctx, w->kind, ev, obj);
}

/* ---- requests ---- */

static void start_request(kube_watch_t *w, sws_kube_phase_t phase);
static void retry_later(kube_watch_t *w, sws_kube_phase_t phase, const char *why);

static uint32_t next_rnd(sws_kube_t *k)
{
    k->rnd ^= k->rnd << 13;
    k->rnd ^= k->rnd >> 7;
    k->rnd ^= k->rnd << 17;
    return (uint32_t)(k->rnd >> 32);
}

static void end_request(kube_watch_t *w)
{
    if (w->easy != NULL) {
        curl_multi_remove_handle(w->k->multi, w->easy);
        curl_easy_cleanup(w->easy);
        w->easy = NULL;
    }
    curl_slist_free_all(w->headers);
    w->headers = NULL;
}

static int body_append(kube_watch_t *w, const char *data, size_t n, size_t max)
{
    int rc = sws_ingress_buf_append(&w->body, &w->body_len, &w->body_cap, 16384, max, data, n);
    if (rc == SWS_BUF_TOO_LARGE)
        snprintf(w->failure, sizeof(w->failure), "response larger than %zu bytes", max);
    else if (rc == SWS_BUF_NO_MEMORY)
        snprintf(w->failure, sizeof(w->failure), "out of memory for a response");
    return rc < 0 ? -1 : 0;
}

/* A watch event, from inside libcurl's write callback. */
static int on_watch_event(void *ctx, sws_watch_type_t type, json_t *obj)
{
    kube_watch_t *w = ctx;

    w->watch_events++;
    switch (type) {
    case SWS_WATCH_ADDED:
    case SWS_WATCH_MODIFIED:
    case SWS_WATCH_DELETED:
        /* Progress: the next failure waits the shortest backoff again. */
        w->failures = 0;
        set_rv(w, meta_str(obj, "resourceVersion"));
        deliver(w, type == SWS_WATCH_DELETED ? SWS_KUBE_DELETE : SWS_KUBE_UPSERT, obj);
        return 0;
    case SWS_WATCH_BOOKMARK:
        w->failures = 0;
        set_rv(w, meta_str(obj, "resourceVersion"));
        return 0;
    case SWS_WATCH_ERROR: {
        const char *msg = json_string_value(json_object_get(obj, "message"));
        if (json_integer_value(json_object_get(obj, "code")) == 410)
            w->gone = 1;
        else
            snprintf(w->failure, sizeof(w->failure), "ERROR event: %.200s",
                     msg ? msg : "(no message)");
        return 1; /* the stream ends here either way */
    }
    }
    return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userp)
{
    kube_watch_t *w = userp;
    size_t n = size * nmemb;
    long status = 0;
    char err[256];

    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        /* A refusal's Status, kept for its message (what does not fit is
         * dropped: the status code decides). */
        return body_append(w, data, n > KUBE_MAX_STATUS_BODY - w->body_len
                                        ? KUBE_MAX_STATUS_BODY - w->body_len : n,
                           KUBE_MAX_STATUS_BODY) < 0 ? 0 : n;
    if (w->stats.phase == SWS_KUBE_PHASE_LIST)
        return body_append(w, data, n, w->k->opts.max_page) < 0 ? 0 : n;
    int rc = sws_watch_feed(&w->parser, data, n, on_watch_event, w, err, sizeof(err));
    if (rc < 0) {
        snprintf(w->failure, sizeof(w->failure), "%s", err);
        w->unreadable = 1;
    }
    /* Returning less than n makes libcurl end the transfer (CURLE_WRITE_ERROR). */
    return rc == 0 ? n : 0;
}

static void start_request(kube_watch_t *w, sws_kube_phase_t phase)
{
    sws_kube_t *k = w->k;
    char path[4096], url[4096 + 512], auth[8192], err[512];
    CURLcode rc = CURLE_OK;

    sws_timer_disarm(&w->retry);
    w->stats.phase = phase;
    w->stats.backoff_ms = 0;
    w->watch_events = 0;
    w->gone = 0;
    w->unreadable = 0;
    w->failure[0] = '\0';
    w->body_len = 0;
    if (phase == SWS_KUBE_PHASE_LIST) {
        if (sws_kube_list_path(path, sizeof(path), w->kind, k->opts.namespace,
                               k->opts.list_limit, w->cont) < 0) {
            /* Only a continue token of kilobytes gets here: start over. */
            free(w->cont);
            w->cont = NULL;
            retry_later(w, SWS_KUBE_PHASE_LIST, "list: the continue token is too long for a URL");
            return;
        }
    } else {
        sws_kube_watch_path(path, sizeof(path), w->kind, k->opts.namespace, w->rv,
                            k->opts.watch_timeout_s);
        sws_watch_parser_reset(&w->parser);
        w->stats.watches++;
    }
    snprintf(url, sizeof(url), "%s%s", k->conn->server, path);

    if (sws_kube_conn_refresh_token(k->conn, err, sizeof(err)) < 0)
        sws_log_warn("kube: %s: %s; going on with the token read before", kinds[w->kind].name,
                     err);
    w->headers = curl_slist_append(NULL, "Accept: application/json");
    if (w->headers != NULL && k->conn->token != NULL) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", k->conn->token);
        struct curl_slist *h = curl_slist_append(w->headers, auth);
        if (h == NULL) {
            curl_slist_free_all(w->headers);
            w->headers = NULL;
        }
    }
    w->easy = curl_easy_init();
    if (w->easy == NULL || w->headers == NULL) {
        end_request(w);
        retry_later(w, phase, "out of memory for a request");
        return;
    }
    long total_s = KUBE_REQUEST_SLACK_S +
                   (phase == SWS_KUBE_PHASE_WATCH ? (long)k->opts.watch_timeout_s : 0);
#define SET(opt, val) if (rc == CURLE_OK) rc = curl_easy_setopt(w->easy, opt, val)
    SET(CURLOPT_URL, url);
    SET(CURLOPT_PROTOCOLS_STR, "https");
    SET(CURLOPT_HTTPHEADER, w->headers);
    SET(CURLOPT_USERAGENT, "scalws-ingressd/" SWS_VERSION);
    SET(CURLOPT_PRIVATE, w);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, w);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ACCEPT_ENCODING, "");
    SET(CURLOPT_CONNECTTIMEOUT_MS, KUBE_CONNECT_TIMEOUT_MS);
    SET(CURLOPT_TIMEOUT, total_s);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    if (k->conn->ca_pem != NULL) {
        struct curl_blob ca = { k->conn->ca_pem, k->conn->ca_len, CURL_BLOB_NOCOPY };
        SET(CURLOPT_CAINFO_BLOB, &ca);
    }
    if (k->conn->cert_pem != NULL) {
        struct curl_blob cert = { k->conn->cert_pem, k->conn->cert_len, CURL_BLOB_NOCOPY };
        struct curl_blob key = { k->conn->key_pem, k->conn->key_len, CURL_BLOB_NOCOPY };
        SET(CURLOPT_SSLCERT_BLOB, &cert);
        SET(CURLOPT_SSLCERTTYPE, "PEM");
        SET(CURLOPT_SSLKEY_BLOB, &key);
        SET(CURLOPT_SSLKEYTYPE, "PEM");
    }
#undef SET
    if (rc != CURLE_OK) {
        snprintf(err, sizeof(err), "libcurl refused an option: %s", curl_easy_strerror(rc));
        end_request(w);
        retry_later(w, phase, err);
        return;
    }
    if (curl_multi_add_handle(k->multi, w->easy) != CURLM_OK) {
        end_request(w);
        retry_later(w, phase, "libcurl refused the request");
        return;
    }
    sws_log_debug("kube: %s: GET %s", kinds[w->kind].name, path);
}

static void on_retry(sws_timer_t *t)
{
    kube_watch_t *w = sws_container_of(t, kube_watch_t, retry);
    start_request(w, w->next);
}

static void retry_later(kube_watch_t *w, sws_kube_phase_t phase, const char *why)
{
    sws_kube_t *k = w->k;
    unsigned ms;

    w->failures++;
    w->stats.errors++;
    ms = sws_kube_backoff_ms(w->failures, next_rnd(k));
    sws_log_warn("kube: %s: %s; %s in %u ms", kinds[w->kind].name, why,
                 phase == SWS_KUBE_PHASE_LIST ? "listing" : "watching", ms);
    w->stats.phase = SWS_KUBE_PHASE_BACKOFF;
    w->stats.backoff_ms = ms;
    w->next = phase;
    sws_timer_queue_set_duration(&w->retry_q, ms);
    sws_timer_arm(k->loop, &w->retry_q, &w->retry);
}

static void relist(kube_watch_t *w, const char *why)
{
    sws_log_notice("kube: %s: %s (410 Gone): listing again", kinds[w->kind].name, why);
    w->stats.relists++;
    w->rv[0] = '\0';
    free(w->cont);
    w->cont = NULL;
    start_request(w, SWS_KUBE_PHASE_LIST);
}

/* The refusal's reason, from its Status body when there is one. */
static void status_message(kube_watch_t *w, long status, char *out, size_t len)
{
    json_t *st = json_loadb(w->body, w->body_len, 0, NULL);
    const char *msg = json_string_value(json_object_get(st, "message"));

    snprintf(out, len, "HTTP %ld%s%.200s", status, msg ? ": " : "", msg ? msg : "");
    json_decref(st);
}

/* A LIST page arrived whole. */
static void on_list_page(kube_watch_t *w)
{
    json_error_t jerr;
    json_t *page = json_loadb(w->body, w->body_len, 0, &jerr);
    json_t *items = json_object_get(page, "items");
    const char *rv = meta_str(page, "resourceVersion");
    const char *cont = meta_str(page, "continue");
    char why[256];
    size_t i;
    json_t *item;

    if (!json_is_array(items) || rv == NULL) {
        snprintf(why, sizeof(why), "list: the page is not a list%s%s", page ? "" : ": ",
                 page ? "" : jerr.text);
        json_decref(page);
        free(w->cont);
        w->cont = NULL;
        retry_later(w, SWS_KUBE_PHASE_LIST, why);
        return;
    }
    w->failures = 0;
    if (!w->list_begun) {
        w->list_begun = 1;
        deliver(w, SWS_KUBE_LIST_BEGIN, NULL);
    }
    json_array_foreach(items, i, item)
        deliver(w, SWS_KUBE_UPSERT, item);
    free(w->cont);
    w->cont = NULL;
    if (cont != NULL && cont[0] != '\0') {
        w->cont = strdup(cont);
        json_decref(page);
        if (w->cont == NULL)
            retry_later(w, SWS_KUBE_PHASE_LIST, "list: out of memory for the continue token");
        else
            start_request(w, SWS_KUBE_PHASE_LIST);
        return;
    }
    set_rv(w, rv);
    json_decref(page);
    w->list_begun = 0;
    w->stats.lists++;
    w->stats.synced = 1;
    deliver(w, SWS_KUBE_LIST_END, NULL);
    sws_log_info("kube: %s: listed at resourceVersion %s", kinds[w->kind].name, w->rv);
    start_request(w, SWS_KUBE_PHASE_WATCH);
}

static void on_done(kube_watch_t *w, CURLcode result)
{
    sws_kube_phase_t phase = w->stats.phase;
    long status = 0;
    char why[512], err[256];

    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    /* The body stays until the next request starts. */
    end_request(w);
    if (w->gone) {
        relist(w, "watch ERROR event");
        return;
    }
    if (result != CURLE_OK && w->failure[0] != '\0') {
        snprintf(why, sizeof(why), "%s", w->failure);
    } else if (result != CURLE_OK) {
        snprintf(why, sizeof(why), "failed: %s", curl_easy_strerror(result));
    } else if (status == 410) {
        relist(w, phase == SWS_KUBE_PHASE_LIST ? "list" : "watch");
        return;
    } else if (status != 200) {
        status_message(w, status, why, sizeof(why));
    } else if (phase == SWS_KUBE_PHASE_LIST) {
        on_list_page(w);
        return;
    } else if (sws_watch_finish(&w->parser, err, sizeof(err)) < 0) {
        snprintf(why, sizeof(why), "%s", err);
    } else if (w->watch_events == 0) {
        /* A server that ends every watch at once must not be asked again
         * in a tight loop. */
        snprintf(why, sizeof(why), "ended without an event");
    } else {
        start_request(w, SWS_KUBE_PHASE_WATCH);
        return;
    }
    char what[600];
    snprintf(what, sizeof(what), "%s: %s", phase == SWS_KUBE_PHASE_LIST ? "list" : "watch", why);
    if (phase == SWS_KUBE_PHASE_LIST) {
        free(w->cont);
        w->cont = NULL;
    }
    if (w->unreadable) {
        /* Watching again from the same resourceVersion would meet the same
         * event; a LIST (its page has a bound of its own) goes past it. */
        w->rv[0] = '\0';
        retry_later(w, SWS_KUBE_PHASE_LIST, what);
        return;
    }
    retry_later(w, phase, what);
}

/* Completed transfers, after libcurl did some work. */
static void check_done(sws_kube_t *k)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(k->multi, &left)) != NULL) {
        char *priv = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        /* msg is libcurl's until the next call into it: copy the result. */
        CURLcode result = msg->data.result;
        on_done((kube_watch_t *)(void *)priv, result);
    }
}

/* ---- libcurl in the sws loop ---- */

static void on_sock(sws_io_t *io, uint32_t events)
{
    kube_sock_t *s = sws_container_of(io, kube_sock_t, io);
    sws_kube_t *k = s->k;
    int flags = 0, running;

    if (s->dead)
        return;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
        flags |= CURL_CSELECT_IN;
    if (events & EPOLLOUT)
        flags |= CURL_CSELECT_OUT;
    if (events & EPOLLERR)
        flags |= CURL_CSELECT_ERR;
    curl_multi_socket_action(k->multi, io->fd, flags, &running);
    check_done(k);
}

static void reap_socks(sws_defer_t *d)
{
    sws_kube_t *k = sws_container_of(d, sws_kube_t, reap);

    while (k->dead != NULL) {
        kube_sock_t *s = k->dead;
        k->dead = s->next_dead;
        free(s);
    }
}

static void sock_release(sws_kube_t *k, kube_sock_t *s)
{
    sws_loop_del(k->loop, &s->io);
    s->dead = 1;
    s->next_dead = k->dead;
    k->dead = s;
    sws_loop_defer(k->loop, &k->reap);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    sws_kube_t *k = userp;
    kube_sock_t *s = socketp;
    uint32_t events = 0;

    (void)easy;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            sock_release(k, s);
            curl_multi_assign(k->multi, fd, NULL);
        }
        return 0;
    }
    if (what & CURL_POLL_IN)
        events |= EPOLLIN | EPOLLRDHUP;
    if (what & CURL_POLL_OUT)
        events |= EPOLLOUT;
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return -1;
        s->k = k;
        s->io.fd = fd;
        s->io.cb = on_sock;
        if (sws_loop_add(k->loop, &s->io, events) < 0) {
            free(s);
            return -1;
        }
        curl_multi_assign(k->multi, fd, s);
        return 0;
    }
    return sws_loop_mod(k->loop, &s->io, events) < 0 ? -1 : 0;
}

static void on_curl_timer_fire(sws_timer_t *t)
{
    sws_kube_t *k = sws_container_of(t, sws_kube_t, curl_timer);
    int running;

    curl_multi_socket_action(k->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(k);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    sws_kube_t *k = userp;

    (void)multi;
    if (timeout_ms < 0) {
        sws_timer_disarm(&k->curl_timer);
        return 0;
    }
    /* The queue holds only this timer, so its duration may be this wait. */
    sws_timer_queue_set_duration(&k->curl_q, (uint64_t)timeout_ms);
    sws_timer_arm(k->loop, &k->curl_q, &k->curl_timer);
    return 0;
}

/* ---- the client ---- */

sws_kube_t *sws_kube_start(sws_loop_t *loop, sws_kube_conn_t *conn, const sws_kube_opts_t *opts,
                           sws_kube_event_fn fn, void *ctx, char *err, size_t errlen)
{
    sws_kube_t *k = calloc(1, sizeof(*k));
    unsigned mask;

    if (k == NULL) {
        sws_errf(err, errlen, "out of memory");
        return NULL;
    }
    k->loop = loop;
    k->conn = conn;
    k->opts = *opts;
    if (k->opts.list_limit == 0)
        k->opts.list_limit = KUBE_LIST_LIMIT;
    if (k->opts.watch_timeout_s == 0)
        k->opts.watch_timeout_s = KUBE_WATCH_TIMEOUT_S;
    if (k->opts.max_event == 0)
        k->opts.max_event = KUBE_MAX_EVENT;
    if (k->opts.max_page == 0)
        k->opts.max_page = KUBE_MAX_PAGE;
    mask = k->opts.kinds ? k->opts.kinds : (1u << SWS_KUBE_KINDS) - 1;
    k->opts.kinds = mask;
    k->fn = fn;
    k->ctx = ctx;
    if (getrandom(&k->rnd, sizeof(k->rnd), GRND_NONBLOCK) != sizeof(k->rnd) || k->rnd == 0)
        k->rnd = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)k;
    sws_timer_queue_init(loop, &k->curl_q, 0);
    sws_timer_init(&k->curl_timer, on_curl_timer_fire);
    sws_defer_init(&k->reap, reap_socks);
    for (unsigned i = 0; i < SWS_KUBE_KINDS; i++) {
        kube_watch_t *w = &k->w[i];
        w->k = k;
        w->kind = (sws_kube_kind_t)i;
        sws_timer_queue_init(loop, &w->retry_q, 0);
        sws_timer_init(&w->retry, on_retry);
        sws_watch_parser_init(&w->parser, k->opts.max_event);
        w->stats.resource_version = w->rv;
    }
    k->multi = curl_multi_init();
    if (k->multi == NULL || curl_multi_setopt(k->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) ||
        curl_multi_setopt(k->multi, CURLMOPT_SOCKETDATA, k) ||
        curl_multi_setopt(k->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) ||
        curl_multi_setopt(k->multi, CURLMOPT_TIMERDATA, k)) {
        sws_errf(err, errlen, "libcurl: cannot set up its multi interface");
        sws_kube_free(k);
        return NULL;
    }
    for (unsigned i = 0; i < SWS_KUBE_KINDS; i++)
        if (mask & (1u << i))
            start_request(&k->w[i], SWS_KUBE_PHASE_LIST);
    sws_log_info("kube: reading the API at %s (%s), namespace %s", conn->server, conn->source,
                 k->opts.namespace && k->opts.namespace[0] ? k->opts.namespace : "(all)");
    return k;
}

void sws_kube_free(sws_kube_t *k)
{
    if (k == NULL)
        return;
    for (unsigned i = 0; i < SWS_KUBE_KINDS; i++) {
        kube_watch_t *w = &k->w[i];
        end_request(w);
        sws_timer_disarm(&w->retry);
        sws_timer_queue_remove(k->loop, &w->retry_q);
        sws_watch_parser_free(&w->parser);
        free(w->body);
        free(w->cont);
    }
    /* Cleaning up the multi handle removes its sockets (CURL_POLL_REMOVE)
     * into the dead list. */
    if (k->multi != NULL)
        curl_multi_cleanup(k->multi);
    sws_timer_disarm(&k->curl_timer);
    sws_timer_queue_remove(k->loop, &k->curl_q);
    sws_defer_cancel(&k->reap);
    reap_socks(&k->reap);
    free(k);
}

int sws_kube_synced(const sws_kube_t *k)
{
    for (unsigned i = 0; i < SWS_KUBE_KINDS; i++)
        if ((k->opts.kinds & (1u << i)) && !k->w[i].stats.synced)
            return 0;
    return 1;
}

void sws_kube_stats(const sws_kube_t *k, sws_kube_kind_t kind, sws_kube_stats_t *out)
{
    *out = k->w[kind].stats;
}
