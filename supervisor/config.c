/*
 * The configuration file: YAML (libyaml's document API) in, a Sws__Config out.
 *
 * The whole file is loaded into a libyaml document first; the walk below then
 * visits it with a key path ("hosts[0].routes[1].static.root") so that every
 * error names the node it is about, with the node's line and column. The
 * result is built with malloc and the generated *__init functions, and each
 * sub-message is attached to its parent before it is filled: whatever fails
 * half-way, protobuf_c_message_free_unpacked() frees exactly what was built.
 * This file is the schema (which keys, their defaults and rules); the walk
 * itself (errors with the key path, typed scalars, mappings, lists) is
 * supervisor/config_yaml.c.
 *
 * What a RouteSet must satisfy is shm/routeset_check.h's: the walk applies
 * its rule functions where it has the YAML node at hand, and the finished
 * RouteSet passes sws_routeset_check() (the check the table builder applies
 * to every source), whose refusal is reported at the node its field path
 * names (cfg_node_at).
 */
#include "supervisor/config.h"
#include "supervisor/config_yaml.h"
#include "supervisor/config_pools.h"
#include "supervisor/config_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <yaml.h>

#include "core/err.h"
#include "core/log.h"
#include "core/str.h"
#include "shm/routeset_check.h"
#include "shm/table.h"
#include "shm/ingress_endpoint.h"
#include "supervisor/admin.h"
#include "supervisor/admin_token.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"

/* The defaults; docs/configuration.md lists the same values. */
#define CFG_DEFAULT_LISTEN ":8080"
#define CFG_DEFAULT_BACKLOG 4096
#define CFG_DEFAULT_TABLE_SIZE (8u << 20)
#define CFG_DEFAULT_UPGRADE_TIMEOUT_MS 30000u
#define CFG_DEFAULT_SERVER_NAME "scalws"
#define CFG_DEFAULT_LOG_LEVEL "info"
#define CFG_DEFAULT_LOG_PATH "-"
#define CFG_DEFAULT_INDEX "index.html"
#define CFG_DEFAULT_RESPOND_STATUS 200
#define CFG_DEFAULT_REDIRECT_STATUS 302

#define CFG_MAX_FILE_SIZE (16u << 20)
#define CFG_MAX_EVENT_LOOPS 1024
#define CFG_DAY_MS (24ull * 3600 * 1000)
/* ---- listen and admin addresses ---- */

/* Checks one address (a string node) and writes into key (CFG_ADDR_KEY_MAX
 * bytes) the text that names its socket, so that two spellings of one
 * socket are caught as a repeat. */
typedef int (*cfg_addr_check_fn)(cfg_parser_t *p, yaml_node_t *n, char *key);

#define CFG_ADDR_KEY_MAX 128
_Static_assert(CFG_ADDR_KEY_MAX >= INET6_ADDRSTRLEN + sizeof("[]:65535"), "an IP and port");
_Static_assert(CFG_ADDR_KEY_MAX >= sizeof(((struct sockaddr_un *)0)->sun_path),
               "a Unix socket path");

static int cfg_address_one(cfg_parser_t *p, yaml_node_t *n, cfg_addr_check_fn check,
                           cfg_set_t *seen, char *key, char **text)
{
    const yaml_node_t *dup;
    int oom;

    if (cfg_want_string(p, n) < 0 || check(p, n, key) < 0)
        return -1;
    dup = cfg_set_add(seen, key, 0, n, &oom);
    if (oom)
        return cfg_oom(p, n);
    if (dup != NULL)
        return cfg_fail(p, n, "%s is already listed (line %zu, column %zu)", key,
                        dup->start_mark.line + 1, dup->start_mark.column + 1);
    return cfg_set_str(p, n, text, cfg_text(n));
}

/* ADDR or [ADDR, ...] at node (not NULL): each a string that check()
 * accepts, each socket once. *texts gets a copy of each text, *n of them
 * (0: an empty list), in one calloc'd array the caller owns, as the
 * message fields that take them do; nothing on failure. */
static int cfg_addresses(cfg_parser_t *p, yaml_node_t *node, cfg_addr_check_fn check,
                         char ***texts, size_t *n)
{
    yaml_node_item_t *items = NULL;
    cfg_set_t seen = { 0 };
    char (*keys)[CFG_ADDR_KEY_MAX];
    char **t;
    int rc = 0;

    *texts = NULL;
    *n = 1;
    if (node->type == YAML_MAPPING_NODE)
        return cfg_fail(p, node, "expected an address or a list of addresses, got %s",
                        cfg_kind(node));
    if (node->type != YAML_SCALAR_NODE && cfg_list(p, node, &items, n) < 0)
        return -1;
    if (*n == 0)
        return 0;
    /* The set keeps pointers to the keys: they live as long as it. */
    t = calloc(*n, sizeof(*t));
    keys = calloc(*n, sizeof(*keys));
    if (t == NULL || keys == NULL) {
        free(t);
        free(keys);
        return cfg_oom(p, node);
    }
    for (size_t i = 0; i < *n && rc == 0; i++) {
        if (items == NULL) {
            rc = cfg_address_one(p, node, check, &seen, keys[i], &t[i]);
            continue;
        }
        size_t mark = cfg_push_index(p, i);
        rc = cfg_address_one(p, cfg_node(p, items[i]), check, &seen, keys[i], &t[i]);
        cfg_pop(p, mark);
    }
    cfg_set_free(&seen);
    free(keys);
    if (rc < 0) {
        for (size_t i = 0; i < *n; i++)
            free(t[i]);
        free(t);
        return -1;
    }
    *texts = t;
    return 0;
}

/* A listen address; its key is the bound address as sws_listen_format
 * writes it (":8080" and "*:8080" are both 0.0.0.0:8080). */
static int cfg_listen_check(cfg_parser_t *p, yaml_node_t *n, char *key)
{
    struct sockaddr_storage ss;
    unsigned sslen;
    char why[320];

    if (sws_listen_parse_address(cfg_text(n), &ss, &sslen, why, sizeof(why)) < 0 ||
        (p->check_system && sws_listen_check_local(&ss, sslen, why, sizeof(why)) < 0))
        return cfg_fail(p, n, "%s", why);
    sws_listen_format(&ss, key, CFG_ADDR_KEY_MAX);
    return 0;
}

/* One listen entry: "ADDR" or {address: ADDR, tls: BOOL}; key
 * (CFG_ADDR_KEY_MAX bytes) must live as long as seen. */
static int cfg_listen_one(cfg_parser_t *p, yaml_node_t *n, cfg_set_t *seen, char *key,
                          Sws__Listen *l)
{
    static const char *const keys[] = { "address", "tls", NULL };
    cfg_fields_t f;
    yaml_node_t *addr;
    size_t mark;

    if (n->type != YAML_MAPPING_NODE)
        return cfg_address_one(p, n, cfg_listen_check, seen, key, &l->address);
    if (cfg_map(p, n, keys, &f) < 0 || cfg_bool(p, &f, "tls", &l->tls) < 0)
        return -1;
    addr = cfg_field(&f, "address");
    if (addr == NULL)
        return cfg_fail(p, n, "needs address: \"HOST:PORT\"");
    mark = cfg_push(p, "address");
    if (cfg_address_one(p, addr, cfg_listen_check, seen, key, &l->address) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* listen: an entry or a list of entries (cfg_listen_one), each socket
 * once; absent: ":8080". */
static int cfg_listen(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc)
{
    yaml_node_item_t *items = NULL;
    cfg_set_t seen = { 0 };
    char (*keys)[CFG_ADDR_KEY_MAX];
    size_t n = 1;
    int rc = 0;

    if (node != NULL && node->type == YAML_SEQUENCE_NODE) {
        if (cfg_list(p, node, &items, &n) < 0)
            return -1;
        if (n == 0)
            return cfg_fail(p, node, "needs at least one address");
    }
    sc->listen = calloc(n, sizeof(*sc->listen));
    /* The set keeps pointers to the keys: they live as long as it. */
    keys = calloc(n, sizeof(*keys));
    if (sc->listen == NULL || keys == NULL) {
        free(keys);
        return cfg_oom(p, node != NULL ? node : cfg_node(p, 1));
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        Sws__Listen *l = cfg_new(p, node != NULL ? node : cfg_node(p, 1), &sws__listen__descriptor);
        if (l == NULL) {
            rc = -1;
            break;
        }
        sc->listen[sc->n_listen++] = l;
        if (node == NULL) {
            rc = cfg_set_str(p, cfg_node(p, 1), &l->address, CFG_DEFAULT_LISTEN);
        } else if (items == NULL) {
            rc = cfg_listen_one(p, node, &seen, keys[i], l);
        } else {
            size_t mark = cfg_push_index(p, i);
            rc = cfg_listen_one(p, cfg_node(p, items[i]), &seen, keys[i], l);
            if (rc == 0)
                cfg_pop(p, mark);
        }
    }
    cfg_set_free(&seen);
    free(keys);
    return rc;
}

/* ---- admin ---- */

/* An admin address; its key is a Unix socket's path, or the loopback
 * address as sws_listen_format writes it ("[0::1]:9180" is [::1]:9180). */
static int cfg_admin_check(cfg_parser_t *p, yaml_node_t *n, char *key)
{
    sws_admin_addr_t addr;
    char why[PATH_MAX + 128];

    if (sws_admin_parse_address(cfg_text(n), &addr, why, sizeof(why)) < 0)
        return cfg_fail(p, n, "%s", why);
    if (addr.ss.ss_family == AF_UNIX)
        snprintf(key, CFG_ADDR_KEY_MAX, "%s", ((const struct sockaddr_un *)&addr.ss)->sun_path);
    else
        sws_listen_format(&addr.ss, key, CFG_ADDR_KEY_MAX);
    return 0;
}

/* KEY of f, a file's path: read as a string into *out and made absolute
 * against the configuration file's directory (cfg_path), so that it names
 * the same file whatever the working directory. keep: a value left as it
 * is (a log file's "-"), or NULL. Returns 1 when it names a file, 0 when
 * the key is absent, empty or keep, -1 on an error (reported at the key). */
static int cfg_file_path(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
                         const char *keep, char **out)
{
    yaml_node_t *n = cfg_field(f, key);
    char path[PATH_MAX];

    if (cfg_string(p, f, key, out) < 0)
        return -1;
    if (n == NULL || (*out)[0] == '\0' || (keep != NULL && strcmp(*out, keep) == 0))
        return 0;
    size_t mark = cfg_push(p, key);
    if (cfg_path(p, n, *out, path, sizeof(path)) < 0 || cfg_set_str(p, n, out, path) < 0)
        return -1;
    cfg_pop(p, mark);
    return 1;
}

/* token_file: made absolute against the file's directory, and read here
 * (-t, start, reload: each reads it again, which is how a token rotates),
 * so a file the server could not use is refused at its key. */
static int cfg_admin_token(cfg_parser_t *p, const cfg_fields_t *f, Sws__Admin *ad)
{
    char why[PATH_MAX + 160];
    uint8_t token[SWS_ADMIN_TOKEN_MAX];
    size_t len = 0;
    int rc = cfg_file_path(p, f, "token_file", NULL, &ad->token_file);

    if (rc <= 0 || !p->check_system)
        return rc < 0 ? -1 : 0;
    yaml_node_t *n = cfg_field(f, "token_file");
    size_t mark = cfg_push(p, "token_file");
    if (sws_admin_token_read(ad->token_file, token, &len, why, sizeof(why)) < 0)
        return cfg_fail(p, n, "%s", why);
    ad->token.data = malloc(len);
    if (ad->token.data == NULL) {
        explicit_bzero(token, sizeof(token));
        return cfg_oom(p, n);
    }
    memcpy(ad->token.data, token, len);
    ad->token.len = len;
    explicit_bzero(token, sizeof(token));
    cfg_pop(p, mark);
    return 0;
}

/* admin: {listen: ADDR or [ADDR, ...], token_file: PATH}; listen absent:
 * the default socket; an empty list: the admin API is off. */
static int cfg_admin(cfg_parser_t *p, yaml_node_t *node, Sws__Admin *ad)
{
    static const char *const keys[] = { "listen", "token_file", NULL };
    cfg_fields_t f;
    size_t mark;
    yaml_node_t *ln;

    if (cfg_map(p, node, keys, &f) < 0 || cfg_admin_token(p, &f, ad) < 0)
        return -1;
    ln = cfg_field(&f, "listen");
    if (ln == NULL) {
        ad->listen = calloc(1, sizeof(*ad->listen));
        if (ad->listen == NULL)
            return cfg_oom(p, node != NULL ? node : cfg_node(p, 1));
        ad->n_listen = 1;
        return cfg_set_str(p, cfg_node(p, 1), &ad->listen[0], SWS_ADMIN_DEFAULT_LISTEN);
    }
    mark = cfg_push(p, "listen");
    if (cfg_addresses(p, ln, cfg_admin_check, &ad->listen, &ad->n_listen) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* ---- ingress ---- */

/* ingress: {subscribe: ENDPOINT}; absent or "": no subscription
 * (supervisor/ingress_sub.h). */
static int cfg_ingress(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc)
{
    static const char *const keys[] = { "subscribe", NULL };
    cfg_fields_t f;
    sws_ingress_endpoint_t ep;
    char why[256];

    if (node == NULL)
        return 0;
    if (cfg_map(p, node, keys, &f) < 0 ||
        (sc->ingress = cfg_new(p, node, &sws__ingress__descriptor)) == NULL ||
        cfg_string(p, &f, "subscribe", &sc->ingress->subscribe) < 0)
        return -1;
    if (sc->ingress->subscribe[0] != '\0' &&
        sws_ingress_endpoint_parse(sc->ingress->subscribe, &ep, why, sizeof(why)) < 0) {
        cfg_push(p, "subscribe");
        return cfg_fail(p, cfg_field(&f, "subscribe"), "%s", why);
    }
    return 0;
}

/* ---- server ---- */

static int cfg_event_loops(cfg_parser_t *p, const cfg_fields_t *f, Sws__ServerConfig *sc)
{
    yaml_node_t *n = cfg_field(f, "event_loops");
    uint64_t v;
    size_t mark;
    int rc;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "event_loops");
    if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "auto") == 0) {
        v = 0;
        rc = 0;
    } else {
        char got[64];
        rc = cfg_number(p, n, CFG_COUNT, 0, CFG_MAX_EVENT_LOOPS, &v);
        if (rc < 0)
            cfg_fail(p, n, "expected auto or a number from 0 (auto) to %d, got %s",
                     CFG_MAX_EVENT_LOOPS, cfg_quote(n, got, sizeof(got)));
    }
    cfg_pop(p, mark);
    if (rc == 0)
        sc->event_loops = (uint32_t)v;
    return rc;
}

static int cfg_accept_policy(cfg_parser_t *p, const cfg_fields_t *f, Sws__ServerConfig *sc)
{
    static const struct {
        const char *name;
        Sws__ServerConfig__AcceptPolicy policy;
    } policies[] = {
        { "shared", SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED },
        { "reuseport", SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT },
        { "hash", SWS__SERVER_CONFIG__ACCEPT_POLICY__HASH },
        { "least-loaded", SWS__SERVER_CONFIG__ACCEPT_POLICY__LEAST_LOADED },
        { "fountain", SWS__SERVER_CONFIG__ACCEPT_POLICY__FOUNTAIN },
        { "cpu", SWS__SERVER_CONFIG__ACCEPT_POLICY__CPU },
    };
    yaml_node_t *n = cfg_field(f, "accept_policy");
    char got[64];
    size_t mark;
    int rc = -1;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "accept_policy");
    for (size_t i = 0; n->type == YAML_SCALAR_NODE && i < sizeof(policies) / sizeof(policies[0]);
         i++) {
        if (strcmp(cfg_text(n), policies[i].name) == 0) {
            sc->accept_policy = policies[i].policy;
            rc = 0;
        }
    }
    if (rc < 0)
        cfg_fail(p, n, "expected shared, reuseport, hash, least-loaded, fountain or cpu, got %s",
                 cfg_quote(n, got, sizeof(got)));
    cfg_pop(p, mark);
    return rc;
}

/* server_header: a string, or false / "" for none. */
static int cfg_server_header(cfg_parser_t *p, const cfg_fields_t *f, Sws__Settings *st)
{
    yaml_node_t *n = cfg_field(f, "server_header");
    size_t mark;
    int off, rc;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "server_header");
    rc = cfg_want_string(p, n);
    if (rc == 0 && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        cfg_bool_text(cfg_text(n), &off) == 0 && off == 0)
        rc = cfg_set_str(p, n, &st->server_name, "");
    else if (rc == 0 && !sws_routeset_field_value_ok(cfg_text(n)))
        rc = cfg_fail(p, n, "must not contain control characters (CR, LF, ...)");
    else if (rc == 0)
        rc = cfg_set_str(p, n, &st->server_name, cfg_is_null(n) ? "" : cfg_text(n));
    cfg_pop(p, mark);
    return rc;
}

/* server_tokens: off (or false), on (or true), build. */
static int cfg_server_tokens(cfg_parser_t *p, const cfg_fields_t *f, Sws__Settings *st)
{
    yaml_node_t *n = cfg_field(f, "server_tokens");
    char got[64];
    size_t mark;
    int on, rc = 0;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "server_tokens");
    if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "build") == 0)
        st->server_tokens = SWS__SETTINGS__SERVER_TOKENS__BUILD;
    else if (n->type == YAML_SCALAR_NODE && cfg_bool_text(cfg_text(n), &on) == 0)
        st->server_tokens = on ? SWS__SETTINGS__SERVER_TOKENS__ON
                               : SWS__SETTINGS__SERVER_TOKENS__OFF;
    else
        rc = cfg_fail(p, n, "expected off, on or build, got %s", cfg_quote(n, got, sizeof(got)));
    cfg_pop(p, mark);
    return rc;
}

static int cfg_limits(cfg_parser_t *p, yaml_node_t *node, Sws__Settings *st)
{
    static const char *const keys[] = { "max_request_line", "max_header_size", "max_headers",
                                        "max_body_size", NULL };
    cfg_fields_t f;

    if (cfg_map(p, node, keys, &f) < 0 ||
        cfg_u32(p, &f, "max_request_line", CFG_SIZE, 64, 1u << 20, &st->max_request_line) < 0 ||
        cfg_u32(p, &f, "max_header_size", CFG_SIZE, 256, 1u << 20, &st->max_header_size) < 0 ||
        cfg_u32(p, &f, "max_headers", CFG_COUNT, 1, 128, &st->max_headers) < 0 ||
        cfg_u64(p, &f, "max_body_size", CFG_SIZE, 0, 1ull << 40, &st->max_body_size) < 0)
        return -1;
    return 0;
}

static int cfg_timeouts(cfg_parser_t *p, yaml_node_t *node, Sws__Settings *st)
{
    static const char *const keys[] = { "header", "body", "keepalive", "send", NULL };
    cfg_fields_t f;

    if (cfg_map(p, node, keys, &f) < 0 ||
        cfg_u32(p, &f, "header", CFG_DURATION, 1, CFG_DAY_MS, &st->header_timeout_ms) < 0 ||
        cfg_u32(p, &f, "body", CFG_DURATION, 1, CFG_DAY_MS, &st->body_timeout_ms) < 0 ||
        cfg_u32(p, &f, "keepalive", CFG_DURATION, 1, CFG_DAY_MS, &st->keepalive_timeout_ms) < 0 ||
        cfg_u32(p, &f, "send", CFG_DURATION, 1, CFG_DAY_MS, &st->send_timeout_ms) < 0)
        return -1;
    return 0;
}

/* One level for every process: the supervisor reads it from the settings,
 * and the running workers get it with the table. */
static int cfg_log_level(cfg_parser_t *p, const cfg_fields_t *f, Sws__Settings *st)
{
    yaml_node_t *n = cfg_field(f, "level");
    sws_log_level_t level;
    char got[64];
    size_t mark;
    int rc = 0;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "level");
    if (n->type != YAML_SCALAR_NODE || sws_log_level_parse(cfg_text(n), &level) < 0)
        rc = cfg_fail(p, n, "expected debug, info, notice, warn or error, got %s",
                      cfg_quote(n, got, sizeof(got)));
    else
        rc = cfg_set_str(p, n, &st->log_level, cfg_text(n));
    cfg_pop(p, mark);
    return rc;
}

static int cfg_access_log(cfg_parser_t *p, const cfg_fields_t *f, Sws__AccessLog *al)
{
    yaml_node_t *n = cfg_field(f, "access_log");
    char got[64];
    size_t mark;
    int on, rc = 0;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "access_log");
    if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "combined") == 0)
        al->format = SWS__ACCESS_LOG__FORMAT__COMBINED;
    else if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "json") == 0)
        al->format = SWS__ACCESS_LOG__FORMAT__JSON;
    else if (n->type == YAML_SCALAR_NODE && cfg_bool_text(cfg_text(n), &on) == 0 && on == 0)
        al->format = SWS__ACCESS_LOG__FORMAT__OFF;
    else
        rc = cfg_fail(p, n, "expected off, combined or json, got %s",
                      cfg_quote(n, got, sizeof(got)));
    cfg_pop(p, mark);
    return rc;
}

/* A log file, checked by opening it the way the supervisor does at start
 * (sws_log_file_open, as root: workers never open one), so that -t and a
 * start cannot disagree. "-" is a standard stream: nothing to check. */
static int cfg_log_file(cfg_parser_t *p, const cfg_fields_t *f, const char *key, int std_fd,
                        int wanted, char **out)
{
    char why[PATH_MAX + 64];
    int rc = cfg_file_path(p, f, key, "-", out);

    if (rc <= 0 || !p->check_system || !wanted)
        return rc < 0 ? -1 : 0;
    size_t mark = cfg_push(p, key);
    int fd = sws_log_file_open(*out, std_fd, why, sizeof(why));
    if (fd < 0)
        return cfg_fail(p, cfg_field(f, key), "%s", why);
    close(fd);
    cfg_pop(p, mark);
    return 0;
}

static int cfg_logging(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc,
                       Sws__Settings *st)
{
    static const char *const keys[] = { "level", "error_log", "access_log", "access_log_path",
                                        NULL };
    cfg_fields_t f;

    if (cfg_map(p, node, keys, &f) < 0 || cfg_log_level(p, &f, st) < 0 ||
        cfg_log_file(p, &f, "error_log", 2, 1, &sc->error_log) < 0 ||
        cfg_access_log(p, &f, st->access_log) < 0 ||
        cfg_log_file(p, &f, "access_log_path", 1,
                     st->access_log->format != SWS__ACCESS_LOG__FORMAT__OFF,
                     &st->access_log->path) < 0)
        return -1;
    return 0;
}

/* The user workers run as must exist: checked with the lookup the start
 * uses. */
static int cfg_user(cfg_parser_t *p, const cfg_fields_t *f, Sws__ServerConfig *sc)
{
    yaml_node_t *n = cfg_field(f, "user");
    char why[256];
    size_t mark;
    uid_t uid;
    gid_t gid;

    if (cfg_string(p, f, "user", &sc->user) < 0)
        return -1;
    if (n == NULL || !p->check_system || sc->user[0] == '\0' ||
        sws_supervisor_lookup_user(sc->user, &uid, &gid, why, sizeof(why)) == 0)
        return 0;
    mark = cfg_push(p, "user");
    cfg_fail(p, n, "%s", why);
    cfg_pop(p, mark);
    return -1;
}

/* Made absolute against the file's directory, like the log files; the
 * file itself is written at start (supervisor/pid_file.h). */
static int cfg_pid_file(cfg_parser_t *p, const cfg_fields_t *f, Sws__ServerConfig *sc)
{
    return cfg_file_path(p, f, "pid_file", NULL, &sc->pid_file) < 0 ? -1 : 0;
}

static int cfg_server(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc,
                      Sws__RouteSet *rs)
{
    static const char *const keys[] = { "listen", "event_loops", "accept_policy",
                                        "fountain_threshold", "backlog",
                                        "user", "shutdown_timeout", "table_size",
                                        "keepalive_requests", "server_header", "server_tokens",
                                        "limits", "timeouts", "logging", "admin", "tls",
                                        "upgrade_timeout", "pid_file", NULL };
    Sws__Settings *st = rs->settings;
    cfg_fields_t f;
    size_t mark;

    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    /* An error ends the walk, so the path is popped on success only. */
    mark = cfg_push(p, "listen");
    if (cfg_listen(p, cfg_field(&f, "listen"), sc) < 0)
        return -1;
    cfg_pop(p, mark);
    p->table_size = cfg_field(&f, "table_size");
    if (cfg_event_loops(p, &f, sc) < 0 || cfg_accept_policy(p, &f, sc) < 0 ||
        cfg_u32(p, &f, "fountain_threshold", CFG_COUNT, 1, 100, &sc->fountain_threshold) < 0 ||
        cfg_u32(p, &f, "backlog", CFG_COUNT, 1, 65535, &sc->backlog) < 0 ||
        cfg_user(p, &f, sc) < 0 ||
        cfg_u32(p, &f, "shutdown_timeout", CFG_DURATION, 0, CFG_DAY_MS,
                &st->shutdown_timeout_ms) < 0 ||
        cfg_u32(p, &f, "table_size", CFG_SIZE, 64u << 10, 1u << 30, &sc->table_size) < 0 ||
        cfg_u32(p, &f, "upgrade_timeout", CFG_DURATION, 1, CFG_DAY_MS,
                &sc->upgrade_timeout_ms) < 0 ||
        cfg_pid_file(p, &f, sc) < 0 ||
        cfg_u32(p, &f, "keepalive_requests", CFG_COUNT, 1, 1000000000,
                &st->keepalive_requests) < 0 ||
        cfg_server_header(p, &f, st) < 0 || cfg_server_tokens(p, &f, st) < 0)
        return -1;

    mark = cfg_push(p, "limits");
    if (cfg_limits(p, cfg_field(&f, "limits"), st) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "timeouts");
    if (cfg_timeouts(p, cfg_field(&f, "timeouts"), st) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "logging");
    if (cfg_logging(p, cfg_field(&f, "logging"), sc, st) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "admin");
    if (cfg_admin(p, cfg_field(&f, "admin"), sc->admin) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "tls");
    if (cfg_tls(p, cfg_field(&f, "tls"), rs) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* ---- hosts ---- */

static int cfg_host_name(cfg_parser_t *p, yaml_node_t *n, Sws__Host *h, cfg_set_t *seen)
{
    const yaml_node_t *dup;
    const char *why;
    char *name;
    int oom;

    if (cfg_want_string(p, n) < 0)
        return -1;
    why = sws_routeset_host_name_problem(cfg_text(n));
    if (why != NULL)
        return cfg_fail(p, n, "\"%s\": %s", cfg_text(n), why);
    if (cfg_charge(p, n, n->data.scalar.length + 1 + sizeof(void *)) < 0)
        return -1;
    name = strdup(cfg_text(n));
    if (name == NULL)
        return cfg_oom(p, n);
    for (char *c = name; *c != '\0'; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    h->names[h->n_names++] = name;
    dup = cfg_set_add(seen, name, 0, n, &oom);
    if (oom)
        return cfg_oom(p, n);
    if (dup != NULL)
        return cfg_fail(p, n, "host name \"%s\" is already used (line %zu, column %zu)", name,
                        dup->start_mark.line + 1, dup->start_mark.column + 1);
    return 0;
}

/* names: [..] or name: ..; stored lowercased. */
static int cfg_host_names(cfg_parser_t *p, yaml_node_t *node, const cfg_fields_t *f,
                          Sws__Host *h, cfg_set_t *seen)
{
    yaml_node_t *names = cfg_field(f, "names"), *name = cfg_field(f, "name");
    yaml_node_item_t *items = NULL;
    size_t n = 1, mark;

    if (names != NULL && name != NULL) {
        mark = cfg_push(p, "name");
        return cfg_fail(p, name, "give names or name, not both");
    }
    if (names == NULL && name == NULL)
        return cfg_fail(p, node, "a host needs names: [...] (or name: ...)");

    mark = cfg_push(p, names != NULL ? "names" : "name");
    if (names != NULL && names->type != YAML_SCALAR_NODE) {
        if (cfg_list(p, names, &items, &n) < 0)
            return -1;
        if (n == 0)
            return cfg_fail(p, names, "needs at least one name");
    }
    h->names = calloc(n, sizeof(*h->names));
    if (h->names == NULL)
        return cfg_oom(p, node);
    if (items == NULL) {
        if (cfg_host_name(p, names != NULL ? names : name, h, seen) < 0)
            return -1;
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t m = cfg_push_index(p, i);
            if (cfg_host_name(p, cfg_node(p, items[i]), h, seen) < 0)
                return -1;
            cfg_pop(p, m);
        }
    }
    cfg_pop(p, mark);
    return 0;
}

/* ---- routes ---- */

static int cfg_route_path(cfg_parser_t *p, const cfg_fields_t *f, yaml_node_t *route,
                          Sws__Route *r, cfg_set_t *seen)
{
    static const char *const match_names[] = { "prefix", "exact", "regex" };
    yaml_node_t *n = cfg_field(f, "path"), *m = cfg_field(f, "match");
    const yaml_node_t *dup;
    char got[64];
    size_t mark;
    int oom;

    if (n == NULL)
        return cfg_fail(p, route, "a route needs a path");
    if (m != NULL) {
        mark = cfg_push(p, "match");
        if (m->type == YAML_SCALAR_NODE && strcmp(cfg_text(m), "prefix") == 0)
            r->match = SWS__ROUTE__MATCH__PREFIX;
        else if (m->type == YAML_SCALAR_NODE && strcmp(cfg_text(m), "exact") == 0)
            r->match = SWS__ROUTE__MATCH__EXACT;
        else if (m->type == YAML_SCALAR_NODE && strcmp(cfg_text(m), "regex") == 0)
            return cfg_fail(p, m, "regex paths are not supported yet");
        else
            return cfg_fail(p, m, "expected prefix or exact, got %s",
                            cfg_quote(m, got, sizeof(got)));
        cfg_pop(p, mark);
    }

    /* Its form is the checker's (sws_routeset_check, at the end). */
    mark = cfg_push(p, "path");
    if (cfg_want_string(p, n) < 0)
        return -1;
    if (cfg_set_str(p, n, &r->path, cfg_text(n)) < 0)
        return -1;
    dup = cfg_set_add(seen, r->path, (unsigned)r->match, n, &oom);
    if (oom)
        return cfg_oom(p, n);
    if (dup != NULL)
        return cfg_fail(p, n, "this host already has a %s route for \"%s\" (line %zu, column %zu)",
                        match_names[r->match], r->path, dup->start_mark.line + 1,
                        dup->start_mark.column + 1);
    cfg_pop(p, mark);
    return 0;
}

static int cfg_header_add(cfg_parser_t *p, Sws__Respond *rsp, const char *name, yaml_node_t *v)
{
    Sws__Header *h;

    if (cfg_want_string(p, v) < 0)
        return -1;
    if (!sws_routeset_field_value_ok(cfg_text(v)))
        return cfg_fail(p, v, "a header value must not contain CR, LF or other control characters");
    h = cfg_new(p, v, &sws__header__descriptor);
    if (h == NULL)
        return -1;
    rsp->headers[rsp->n_headers++] = h;
    if (cfg_set_str(p, v, &h->name, name) < 0 ||
        cfg_set_str(p, v, &h->value, cfg_is_null(v) ? "" : cfg_text(v)) < 0)
        return -1;
    return 0;
}

/* headers: {Name: value, Name2: [value, value]}; a list gives the header
 * once per value (Set-Cookie). Order is kept. */
static int cfg_headers(cfg_parser_t *p, yaml_node_t *node, Sws__Respond *rsp)
{
    size_t total = 0;
    const char *why;

    if (cfg_is_null(node))
        return 0;
    if (node->type != YAML_MAPPING_NODE)
        return cfg_fail(p, node, "expected a mapping (Name: value), got %s", cfg_kind(node));
    for (yaml_node_pair_t *pr = node->data.mapping.pairs.start; pr < node->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *v = cfg_node(p, pr->value);
        total += v->type == YAML_SEQUENCE_NODE
                     ? (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)
                     : 1;
    }
    rsp->headers = calloc(total ? total : 1, sizeof(*rsp->headers));
    if (rsp->headers == NULL)
        return cfg_oom(p, node);

    for (yaml_node_pair_t *pr = node->data.mapping.pairs.start; pr < node->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = cfg_node(p, pr->key), *v = cfg_node(p, pr->value);
        size_t mark;

        if (k->type != YAML_SCALAR_NODE)
            return cfg_fail(p, k, "a header name must be a string, not %s", cfg_kind(k));
        mark = cfg_push(p, cfg_text(k));
        if (cfg_want_string(p, k) < 0)
            return -1;
        why = sws_routeset_header_name_problem(cfg_text(k));
        if (why != NULL)
            return cfg_fail(p, k, "%s", why);
        for (yaml_node_pair_t *q = node->data.mapping.pairs.start; q < pr; q++) {
            yaml_node_t *prev = cfg_node(p, q->key);
            if (prev->type == YAML_SCALAR_NODE && strcmp(cfg_text(prev), cfg_text(k)) == 0)
                return cfg_fail(p, k, "duplicate key (first at line %zu, column %zu); "
                                "give a list of values to send a header more than once",
                                prev->start_mark.line + 1, prev->start_mark.column + 1);
        }
        if (v->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                size_t m = cfg_push_index(p, (size_t)(it - v->data.sequence.items.start));
                if (cfg_header_add(p, rsp, cfg_text(k), cfg_node(p, *it)) < 0)
                    return -1;
                cfg_pop(p, m);
            }
        } else if (cfg_header_add(p, rsp, cfg_text(k), v) < 0) {
            return -1;
        }
        cfg_pop(p, mark);
    }
    return 0;
}

static int cfg_respond(cfg_parser_t *p, yaml_node_t *node, void *msg)
{
    static const char *const keys[] = { "status", "headers", "body", NULL };
    Sws__Respond *rsp = msg;
    yaml_node_t *body;
    cfg_fields_t f;
    size_t mark;

    rsp->status = CFG_DEFAULT_RESPOND_STATUS;
    if (cfg_map(p, node, keys, &f) < 0 ||
        cfg_u32(p, &f, "status", CFG_COUNT, SWS_ROUTESET_RESPOND_STATUS_MIN,
                SWS_ROUTESET_RESPOND_STATUS_MAX, &rsp->status) < 0)
        return -1;
    if (cfg_field(&f, "headers") != NULL) {
        mark = cfg_push(p, "headers");
        if (cfg_headers(p, cfg_field(&f, "headers"), rsp) < 0)
            return -1;
        cfg_pop(p, mark);
    }
    body = cfg_field(&f, "body");
    if (body == NULL || cfg_is_null(body))
        return 0;
    mark = cfg_push(p, "body");
    if (body->type != YAML_SCALAR_NODE)
        return cfg_fail(p, body, "expected a string, got %s", cfg_kind(body));
    if (body->data.scalar.length > 0 &&
        (rsp->status == 204 || rsp->status == 304))
        return cfg_fail(p, body, "a %u response has no body", rsp->status);
    if (body->data.scalar.length > 0) {
        /* bytes: may hold NUL ("\0" in a double-quoted string). */
        if (cfg_charge(p, body, body->data.scalar.length) < 0)
            return -1;
        rsp->body.data = malloc(body->data.scalar.length);
        if (rsp->body.data == NULL)
            return cfg_oom(p, body);
        memcpy(rsp->body.data, body->data.scalar.value, body->data.scalar.length);
        rsp->body.len = body->data.scalar.length;
    }
    cfg_pop(p, mark);
    return 0;
}

/* root, relative to the configuration file's directory (cfg_path), made
 * absolute and canonical: the table and the workers see one real
 * directory. */
static int cfg_static_root(cfg_parser_t *p, yaml_node_t *n, Sws__Static *st)
{
    char joined[PATH_MAX], *real;
    const char *root;
    struct stat sb;

    if (cfg_want_string(p, n) < 0)
        return -1;
    root = cfg_text(n);
    if (root[0] == '\0' || cfg_is_null(n))
        return cfg_fail(p, n, "must name a directory");
    if (cfg_path(p, n, root, joined, sizeof(joined)) < 0)
        return -1;
    real = realpath(joined, NULL);
    if (real == NULL)
        return cfg_fail(p, n, "\"%s\" (%s): %s", root, joined, strerror(errno));
    if (cfg_charge(p, n, strlen(real) + 1) < 0) {
        free(real);
        return -1;
    }
    if (stat(real, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
        cfg_fail(p, n, "\"%s\" (%s) is not a directory", root, real);
        free(real);
        return -1;
    }
    if (st->root != protobuf_c_empty_string)
        free(st->root);
    st->root = real;
    return 0;
}

static int cfg_static(cfg_parser_t *p, yaml_node_t *node, void *msg)
{
    static const char *const keys[] = { "root", "index", "follow_symlinks", NULL };
    Sws__Static *st = msg;
    yaml_node_t *root, *index;
    cfg_fields_t f;
    size_t mark;

    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    root = cfg_field(&f, "root");
    if (root == NULL)
        return cfg_fail(p, node, "static needs a root directory");
    mark = cfg_push(p, "root");
    if (cfg_static_root(p, root, st) < 0)
        return -1;
    cfg_pop(p, mark);
    if (cfg_set_str(p, node, &st->index, CFG_DEFAULT_INDEX) < 0 ||
        cfg_string(p, &f, "index", &st->index) < 0 ||
        cfg_bool(p, &f, "follow_symlinks", &st->follow_symlinks) < 0)
        return -1;
    index = cfg_field(&f, "index");
    if (index != NULL && !sws_routeset_index_ok(st->index)) {
        cfg_push(p, "index");
        return cfg_fail(p, index, "must be a file name (no '/')");
    }
    return 0;
}

static int cfg_redirect(cfg_parser_t *p, yaml_node_t *node, void *msg)
{
    static const char *const keys[] = { "status", "location", NULL };
    Sws__Redirect *rd = msg;
    const char *why;
    yaml_node_t *loc;
    cfg_fields_t f;
    size_t mark;

    rd->status = CFG_DEFAULT_REDIRECT_STATUS;
    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    yaml_node_t *status = cfg_field(&f, "status");
    if (status != NULL) {
        char got[64];
        uint64_t v = 0;
        size_t smark = cfg_push(p, "status");
        /* A number outside the set and a word get the same message (it
         * replaces cfg_number's, which names a range). */
        if (cfg_number(p, status, CFG_COUNT, 301, 308, &v) < 0 ||
            !sws_routeset_redirect_status_ok((uint32_t)v))
            return cfg_fail(p, status, "expected 301, 302, 303, 307 or 308, got %s",
                            cfg_quote(status, got, sizeof(got)));
        cfg_pop(p, smark);
        rd->status = (uint32_t)v;
    }
    loc = cfg_field(&f, "location");
    if (loc == NULL)
        return cfg_fail(p, node, "a redirect needs a location");
    mark = cfg_push(p, "location");
    if (cfg_string(p, &f, "location", &rd->location) < 0)
        return -1;
    why = sws_routeset_location_problem(rd->location);
    if (why != NULL)
        return cfg_fail(p, loc, "%s", why);
    cfg_pop(p, mark);
    return 0;
}

/* The route actions. Each key is also the name of the Route field (a
 * member of its oneof) that holds the action's message. */
static const struct cfg_action {
    const char *key;
    int (*fill)(cfg_parser_t *p, yaml_node_t *node, void *msg);
} cfg_actions[] = {
    { "respond", cfg_respond },
    { "static", cfg_static },
    { "redirect", cfg_redirect },
    { "proxy", cfg_proxy },
};

/* A new message for parent's oneof member `field`, attached and chosen the
 * way the generated code does it (the case holds the field number), so
 * parent frees it; NULL after reporting at. */
static void *cfg_new_oneof(cfg_parser_t *p, const yaml_node_t *at, ProtobufCMessage *parent,
                           const char *field)
{
    const ProtobufCFieldDescriptor *fd =
        protobuf_c_message_descriptor_get_field_by_name(parent->descriptor, field);
    void *m = cfg_new(p, at, fd->descriptor);

    if (m == NULL)
        return NULL;
    *(void **)((char *)parent + fd->offset) = m;
    *(uint32_t *)((char *)parent + fd->quantifier_offset) = fd->id;
    return m;
}

/* Exactly one of the action keys; the later of two is the one reported. */
static int cfg_route_action(cfg_parser_t *p, yaml_node_t *route, const cfg_fields_t *f,
                            Sws__Route *r)
{
    const struct cfg_action *action = NULL;
    yaml_node_t *node = NULL;
    void *msg;
    size_t mark;

    for (size_t i = 0; i < sizeof(cfg_actions) / sizeof(cfg_actions[0]); i++) {
        yaml_node_t *n = cfg_field(f, cfg_actions[i].key);
        if (n == NULL)
            continue;
        if (node != NULL) {
            int later = n->start_mark.index > node->start_mark.index;
            cfg_push(p, later ? cfg_actions[i].key : action->key);
            return cfg_fail(p, later ? n : node, "a route has one action, not both %s and %s",
                            action->key, cfg_actions[i].key);
        }
        action = &cfg_actions[i];
        node = n;
    }
    if (node == NULL)
        return cfg_fail(p, route, "a route needs one action: respond, static, redirect or proxy");

    mark = cfg_push(p, action->key);
    msg = cfg_new_oneof(p, node, &r->base, action->key);
    if (msg == NULL || action->fill(p, node, msg) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

static int cfg_route(cfg_parser_t *p, yaml_node_t *node, void *msg, cfg_set_t *seen)
{
    static const char *const keys[] = { "path", "match", "https_redirect", "respond", "static",
                                        "redirect", "proxy", NULL };
    Sws__Route *r = msg;
    cfg_fields_t f;

    if (cfg_map(p, node, keys, &f) < 0 || cfg_route_path(p, &f, node, r, seen) < 0 ||
        cfg_bool(p, &f, "https_redirect", &r->https_redirect) < 0 ||
        cfg_route_action(p, node, &f, r) < 0)
        return -1;
    return 0;
}

static int cfg_host(cfg_parser_t *p, yaml_node_t *node, void *msg, cfg_set_t *names)
{
    static const char *const keys[] = { "names", "name", "https_redirect", "routes",
                                        "certificates", NULL };
    Sws__Host *h = msg;
    cfg_fields_t f;
    size_t mark;

    if (cfg_map(p, node, keys, &f) < 0 || cfg_host_names(p, node, &f, h, names) < 0 ||
        cfg_bool(p, &f, "https_redirect", &h->https_redirect) < 0)
        return -1;
    mark = cfg_push(p, "routes");
    if (cfg_repeated(p, cfg_field(&f, "routes"), &sws__route__descriptor, &h->n_routes,
                     (void ***)&h->routes, cfg_route) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "certificates");
    if (cfg_host_certificates(p, cfg_field(&f, "certificates"), h) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* ---- the whole file ---- */

/* Allocate every message the result always has, with every default set. */
static int cfg_defaults(cfg_parser_t *p, yaml_node_t *at, Sws__Config *cfg)
{
    Sws__ServerConfig *sc;
    Sws__Settings *st;

    /* Each is attached as soon as it exists: the caller frees cfg on error. */
    if ((cfg->server = cfg_new(p, at, &sws__server_config__descriptor)) == NULL ||
        (cfg->server->admin = cfg_new(p, at, &sws__admin__descriptor)) == NULL ||
        (cfg->routes = cfg_new(p, at, &sws__route_set__descriptor)) == NULL ||
        (cfg->routes->settings = cfg_new(p, at, &sws__settings__descriptor)) == NULL ||
        (cfg->routes->settings->access_log = cfg_new(p, at, &sws__access_log__descriptor)) == NULL)
        return -1;

    sc = cfg->server;
    sc->event_loops = 0;
    sc->accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED;
    sc->fountain_threshold = 85;
    sc->backlog = CFG_DEFAULT_BACKLOG;
    sc->table_size = CFG_DEFAULT_TABLE_SIZE;
    sc->upgrade_timeout_ms = CFG_DEFAULT_UPGRADE_TIMEOUT_MS;
    st = cfg->routes->settings;
    st->max_request_line = SWS_DEFAULT_MAX_REQUEST_LINE;
    st->max_header_size = SWS_DEFAULT_MAX_HEADER_SIZE;
    st->max_headers = SWS_DEFAULT_MAX_HEADERS;
    st->max_body_size = SWS_DEFAULT_MAX_BODY_SIZE;
    st->header_timeout_ms = SWS_DEFAULT_HEADER_TIMEOUT_MS;
    st->body_timeout_ms = SWS_DEFAULT_BODY_TIMEOUT_MS;
    st->keepalive_timeout_ms = SWS_DEFAULT_KEEPALIVE_TIMEOUT_MS;
    st->send_timeout_ms = SWS_DEFAULT_SEND_TIMEOUT_MS;
    st->keepalive_requests = SWS_DEFAULT_KEEPALIVE_REQUESTS;
    st->shutdown_timeout_ms = SWS_DEFAULT_SHUTDOWN_TIMEOUT_MS;
    st->access_log->format = SWS__ACCESS_LOG__FORMAT__COMBINED;
    if (cfg_set_str(p, at, &st->server_name, CFG_DEFAULT_SERVER_NAME) < 0 ||
        cfg_set_str(p, at, &st->access_log->path, CFG_DEFAULT_LOG_PATH) < 0 ||
        cfg_set_str(p, at, &st->log_level, CFG_DEFAULT_LOG_LEVEL) < 0 ||
        cfg_set_str(p, at, &sc->error_log, CFG_DEFAULT_LOG_PATH) < 0)
        return -1;
    return 0;
}

static int cfg_build(cfg_parser_t *p, yaml_node_t *root, Sws__Config *cfg)
{
    static const char *const keys[] = { "server", "pools", "hosts", "ingress", NULL };
    cfg_fields_t f;
    size_t mark;

    if (cfg_map(p, root, keys, &f) < 0 || cfg_defaults(p, root, cfg) < 0)
        return -1;
    mark = cfg_push(p, "server");
    if (cfg_server(p, cfg_field(&f, "server"), cfg->server, cfg->routes) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "ingress");
    if (cfg_ingress(p, cfg_field(&f, "ingress"), cfg->server) < 0)
        return -1;
    cfg_pop(p, mark);
    p->limit = (uint64_t)CFG_MEMORY_PER_TABLE_BYTE * cfg->server->table_size;
    mark = cfg_push(p, "pools");
    if (cfg_pools(p, cfg_field(&f, "pools"), cfg->routes) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "hosts");
    if (cfg_repeated(p, cfg_field(&f, "hosts"), &sws__host__descriptor, &cfg->routes->n_hosts,
                     (void ***)&cfg->routes->hosts, cfg_host) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* ---- the RouteSet check ---- */
/* The rules every source of a RouteSet passes (shm/routeset_check.h);
 * those the walk above applied already hold, the rest are reported at
 * the node the refusal's field path names. */
static int cfg_routes_check(cfg_parser_t *p, yaml_node_t *root, const Sws__RouteSet *rs)
{
    sws_routeset_refusal_t why;

    char path[sizeof(why.path) + sizeof("server.")];

    if (sws_routeset_check(rs, &why) == 0)
        return 0;
    /* The RouteSet's tls is the file's server.tls (not a "tlsx" key). */
    snprintf(path, sizeof(path), "%s%s",
             strcmp(why.path, "tls") == 0 || strncmp(why.path, "tls.", 4) == 0 ? "server." : "",
             why.path);
    cfg_pop(p, 0);
    cfg_push(p, path);
    cfg_fail(p, cfg_node_at(p, root, path), "%s", why.msg);
    cfg_pop(p, 0);
    return -1;
}

/* A TLS listener needs a certificate to serve (listeners are not part of
 * the RouteSet, so its checker cannot say). */
static int cfg_tls_listeners(cfg_parser_t *p, yaml_node_t *root, const Sws__Config *cfg)
{
    const Sws__ServerConfig *sc = cfg->server;
    char path[64];

    if (sws_routeset_has_certificates(cfg->routes))
        return 0;
    for (size_t i = 0; i < sc->n_listen; i++) {
        if (!sc->listen[i]->tls)
            continue;
        snprintf(path, sizeof(path), "server.listen[%zu]", i);
        cfg_pop(p, 0);
        cfg_push(p, path);
        cfg_fail(p, cfg_node_at(p, root, path), "a TLS listener needs certificates: "
                 "hosts[].certificates or server.tls.default_certificate");
        cfg_pop(p, 0);
        return -1;
    }
    return 0;
}

/* The table the routes need must fit server.table_size: reported at the
 * table_size value, or at the top of the file when the default is too
 * small, in the form of every other error. */
static int cfg_table_fits(cfg_parser_t *p, yaml_node_t *root, const Sws__Config *cfg)
{
    size_t need = sws_table_size(cfg->routes);
    char got[64];
    if (need <= cfg->server->table_size)
        return 0;
    cfg_fmt_size(cfg->server->table_size, got, sizeof(got));
    size_t mark = cfg_push(p, "server");
    cfg_push(p, "table_size");
    if (p->table_size != NULL)
        cfg_fail(p, p->table_size, "expected a size of at least %zu bytes (what the routes need), "
                 "got %s", need, cfg_quote(p->table_size, got, sizeof(got)));
    else
        cfg_fail(p, root, "expected a size of at least %zu bytes (what the routes need), "
                 "got the default %s", need, got);
    cfg_pop(p, mark);
    return -1;
}

static int cfg_parse_in(const char *text, size_t len, const char *name, const char *base_dir,
                        Sws__Config **out, char *err, size_t errlen)
{
    cfg_parser_t p = { .name = name, .base_dir = base_dir, .check_system = base_dir != NULL,
                       .err = err, .errlen = errlen };
    yaml_parser_t parser;
    yaml_document_t doc, next;
    yaml_node_t *root;
    Sws__Config *cfg = NULL;
    int rc = -1;

    *out = NULL;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (!yaml_parser_initialize(&parser))
        return cfg_fail_at(&p, (yaml_mark_t){ 0 }, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        cfg_yaml_error(&p, &parser, text, len);
        yaml_parser_delete(&parser);
        return -1;
    }
    p.doc = &doc;
    root = yaml_document_get_root_node(&doc);
    if (root == NULL || cfg_is_null(root)) {
        cfg_fail_at(&p, root ? root->start_mark : (yaml_mark_t){ 0 },
                    "the file is empty (expected server: and hosts:)");
        goto done;
    }

    /* A second document would be ignored silently; refuse it. */
    if (!yaml_parser_load(&parser, &next)) {
        cfg_yaml_error(&p, &parser, text, len);
        goto done;
    }
    if (yaml_document_get_root_node(&next) != NULL) {
        cfg_fail_at(&p, yaml_document_get_root_node(&next)->start_mark,
                    "a second YAML document; the file must hold one");
        yaml_document_delete(&next);
        goto done;
    }
    yaml_document_delete(&next);

    cfg = cfg_new(&p, root, &sws__config__descriptor);
    if (cfg == NULL)
        goto done;
    if (cfg_build(&p, root, cfg) < 0 || cfg_routes_check(&p, root, cfg->routes) < 0 ||
        cfg_tls_listeners(&p, root, cfg) < 0 || cfg_table_fits(&p, root, cfg) < 0) {
        sws_config_free(cfg);
        goto done;
    }
    *out = cfg;
    rc = 0;
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int sws_config_parse(const char *text, size_t len, const char *name, Sws__Config **out,
                     char *err, size_t errlen)
{
    return cfg_parse_in(text, len, name, NULL, out, err, errlen);
}

/* The whole file into a malloc'ed buffer. Read to EOF rather than trusting
 * st_size, so that a pipe (-c /dev/stdin) works too. */
char *cfg_read_file(const char *path, const char *what, size_t max, size_t *len, char *err,
                    size_t errlen)
{
    size_t cap = 0, n = 0;
    char *buf = NULL;
    struct stat sb;
    FILE *f = fopen(path, "rb");

    if (f == NULL) {
        sws_errf(err, errlen, "%s: cannot open %s: %s", path, what, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        sws_errf(err, errlen, "%s: is a directory, not %s", path, what);
        fclose(f);
        return NULL;
    }
    for (;;) {
        if (n == cap) {
            size_t grown_cap = cap ? cap * 2 : 4096;
            char *grown = realloc(buf, grown_cap);
            if (grown == NULL) {
                sws_errf(err, errlen, "%s: out of memory", path);
                break;
            }
            buf = grown;
            cap = grown_cap;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        /* Checked as it grows, not at EOF: a pipe may never end. */
        if (n > max) {
            sws_errf(err, errlen, "%s: larger than %zu KiB; is it %s?", path, max >> 10,
                     what);
            break;
        }
        if (got == 0 && ferror(f)) {
            sws_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
        if (got == 0) {
            fclose(f);
            *len = n;
            return buf;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

int sws_config_load(const char *path, Sws__Config **out, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t len;
    char *text;
    int rc;

    *out = NULL;
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);

    text = cfg_read_file(path, "the configuration file", CFG_MAX_FILE_SIZE, &len, err, errlen);
    if (text == NULL)
        return -1;
    rc = cfg_parse_in(text, len, path, dir, out, err, errlen);
    free(text);
    return rc;
}

void sws_config_forget_token(Sws__Config *cfg)
{
    Sws__Admin *ad = cfg != NULL && cfg->server != NULL ? cfg->server->admin : NULL;
    if (ad == NULL || ad->token.data == NULL)
        return;
    explicit_bzero(ad->token.data, ad->token.len);
    free(ad->token.data);
    ad->token.data = NULL;
    ad->token.len = 0;
}

void sws_config_free(Sws__Config *cfg)
{
    /* Not left in freed memory, which a later fork copies into a worker. */
    sws_config_forget_token(cfg);
    if (cfg != NULL)
        protobuf_c_message_free_unpacked(&cfg->base, NULL);
}
