/*
 * The API server connection from a kubeconfig or the service account
 * (ingressd/kubeconfig.h). The YAML is read with the configuration
 * reader's walker (supervisor/config_yaml.h) for its FILE:LINE:COL and key
 * path messages; unlike scalwsd's file, unknown keys are ignored, since a
 * kubeconfig carries many that only kubectl reads.
 */
#include "ingressd/kubeconfig.h"

#include <ctype.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base64.h"
#include "core/err.h"
#include "supervisor/config_tls.h"
#include "supervisor/config_yaml.h"

/* A kubeconfig, a CA bundle, a token: none is near this. */
#define KUBE_MAX_FILE (4u << 20)

void sws_kube_conn_free(sws_kube_conn_t *c)
{
    free(c->server);
    free(c->ca_pem);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->token);
    free(c->token_file);
    memset(c, 0, sizeof(*c));
}

/* ---- the YAML document ---- */

/* The value of key in mapping map, or NULL (absent, null, or map is not a
 * mapping: the caller checks the type where it matters). */
static yaml_node_t *get(cfg_parser_t *p, yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = cfg_node(p, pr->key);
        if (k->type == YAML_SCALAR_NODE && strcmp(cfg_text(k), key) == 0) {
            yaml_node_t *v = cfg_node(p, pr->value);
            return cfg_is_null(v) ? NULL : v;
        }
    }
    return NULL;
}

/* The string at map.key into *out (borrowed from the document), NULL when
 * absent. */
static int get_str(cfg_parser_t *p, yaml_node_t *map, const char *key, const char **out)
{
    yaml_node_t *v = get(p, map, key);
    size_t mark = cfg_push(p, key);

    *out = NULL;
    if (v != NULL) {
        if (cfg_want_string(p, v) < 0)
            return -1;
        *out = cfg_text(v);
    }
    cfg_pop(p, mark);
    return 0;
}

/* In the list at root.list_key, the entry {name: NAME, inner_key: {...}}:
 * its inner mapping, with the key path left at list_key[i].inner_key for
 * the caller's messages. NULL after reporting. */
static yaml_node_t *named(cfg_parser_t *p, yaml_node_t *root, const char *list_key,
                          const char *inner_key, const char *name, yaml_node_t *at)
{
    yaml_node_t *list = get(p, root, list_key);
    yaml_node_item_t *items;
    size_t n;

    cfg_push(p, list_key);
    if (list == NULL) {
        cfg_fail(p, at, "no %s: list, so no entry named \"%s\"", list_key, name);
        return NULL;
    }
    if (cfg_list(p, list, &items, &n) < 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *item = cfg_node(p, items[i]);
        const char *item_name;
        size_t mark = cfg_push_index(p, i);

        if (get_str(p, item, "name", &item_name) < 0)
            return NULL;
        if (item_name != NULL && strcmp(item_name, name) == 0) {
            yaml_node_t *inner = get(p, item, inner_key);
            cfg_push(p, inner_key);
            if (inner == NULL || inner->type != YAML_MAPPING_NODE) {
                cfg_fail(p, inner ? inner : item, "expected a mapping");
                return NULL;
            }
            return inner;
        }
        cfg_pop(p, mark);
    }
    cfg_fail(p, list, "no entry named \"%s\"", name);
    return NULL;
}

/* ---- values ---- */

/* Base64 (as kubectl writes *-data, with or without line breaks) into a
 * malloc'ed buffer; empty data is refused (no PEM is empty). */
static int base64_decode(cfg_parser_t *p, yaml_node_t *at, const char *text, char **out,
                         size_t *outlen)
{
    unsigned char *buf;
    int rc = sws_base64_decode(text, strlen(text), SWS_BASE64_LINES, &buf, outlen);
    if (rc == -2)
        return cfg_oom(p, at);
    if (rc < 0 || *outlen == 0) {
        free(buf);
        return cfg_fail(p, at, "not base64 data");
    }
    *out = (char *)buf;
    return 0;
}

/* A PEM from KEY-data (base64) or KEY (a file). Neither: *out stays NULL. */
static int pem_value(cfg_parser_t *p, yaml_node_t *map, const char *key, char **out,
                     size_t *outlen)
{
    char data_key[64];
    const char *data, *file;

    snprintf(data_key, sizeof(data_key), "%s-data", key);
    if (get_str(p, map, data_key, &data) < 0 || get_str(p, map, key, &file) < 0)
        return -1;
    if (data != NULL) {
        size_t mark = cfg_push(p, data_key);
        if (base64_decode(p, get(p, map, data_key), data, out, outlen) < 0)
            return -1;
        cfg_pop(p, mark);
    } else if (file != NULL) {
        char full[PATH_MAX], msg[512];
        size_t mark = cfg_push(p, key);
        yaml_node_t *at = get(p, map, key);

        if (cfg_path(p, at, file, full, sizeof(full)) < 0)
            return -1;
        *out = cfg_read_file(full, "a PEM file", KUBE_MAX_FILE, outlen, msg, sizeof(msg));
        if (*out == NULL)
            return cfg_fail(p, at, "%s", msg);
        cfg_pop(p, mark);
    }
    return 0;
}

static int set_dup(char **dst, const char *s)
{
    *dst = strdup(s);
    return *dst == NULL ? -1 : 0;
}

/* The server URL: https only, the trailing '/' dropped (paths are
 * appended to it). */
static int set_server(sws_kube_conn_t *c, const char *url, char *err, size_t errlen)
{
    size_t n = strlen(url);

    if (strncasecmp(url, "https://", 8) != 0 || n == 8)
        return sws_errf(err, errlen, "the server must be an https:// URL, not \"%.80s\"", url);
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)url[i]))
            return sws_errf(err, errlen, "the server URL has a space or a control character");
    while (n > 8 && url[n - 1] == '/')
        n--;
    c->server = strndup(url, n);
    return c->server == NULL ? sws_errf(err, errlen, "out of memory") : 0;
}

/* A token as it can go into an Authorization header: printable ASCII,
 * surrounding white space (a file's final newline) dropped. */
static char *token_from(const char *text, size_t len)
{
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    while (len > 0 && isspace((unsigned char)*text)) {
        text++;
        len--;
    }
    if (len == 0)
        return NULL;
    for (size_t i = 0; i < len; i++)
        if (!isgraph((unsigned char)text[i]))
            return NULL;
    return strndup(text, len);
}

/* ---- the token file ---- */

static int read_token_file(sws_kube_conn_t *c, const struct stat *st, char *err, size_t errlen)
{
    char msg[512];
    size_t len;
    char *text = cfg_read_file(c->token_file, "the token file", KUBE_MAX_FILE, &len, msg,
                               sizeof(msg));
    char *tok;

    if (text == NULL)
        return sws_errf(err, errlen, "%s", msg);
    tok = token_from(text, len);
    free(text);
    if (tok == NULL)
        return sws_errf(err, errlen, "%s: empty, or not a bearer token (a space or a control "
                        "character inside)", c->token_file);
    free(c->token);
    c->token = tok;
    c->token_dev = st->st_dev;
    c->token_ino = st->st_ino;
    c->token_size = st->st_size;
    c->token_mtime = st->st_mtim;
    return 0;
}

int sws_kube_conn_refresh_token(sws_kube_conn_t *c, char *err, size_t errlen)
{
    struct stat st;

    if (c->token_file == NULL)
        return 0;
    /* stat follows the projected volume's ..data symlink, which the kubelet
     * swaps atomically: a new token is a new inode. */
    if (stat(c->token_file, &st) < 0)
        return sws_errf(err, errlen, "%s: %m", c->token_file);
    if (c->token != NULL && st.st_dev == c->token_dev && st.st_ino == c->token_ino &&
        st.st_size == c->token_size && st.st_mtim.tv_sec == c->token_mtime.tv_sec &&
        st.st_mtim.tv_nsec == c->token_mtime.tv_nsec)
        return 0;
    return read_token_file(c, &st, err, errlen) < 0 ? -1 : 1;
}

/* ---- kubeconfig ---- */

static int load_user(cfg_parser_t *p, sws_kube_conn_t *c, yaml_node_t *user)
{
    static const char *const refused[] = { "exec", "auth-provider", "username", "password" };
    const char *token, *token_file;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        yaml_node_t *v = get(p, user, refused[i]);
        if (v != NULL) {
            cfg_push(p, refused[i]);
            return cfg_fail(p, v, "not supported by ingressd: give token, tokenFile or a "
                            "client certificate");
        }
    }
    if (get_str(p, user, "token", &token) < 0 || get_str(p, user, "tokenFile", &token_file) < 0)
        return -1;
    if (token != NULL && token_file != NULL)
        return cfg_fail(p, user, "token and tokenFile both given: keep one");
    if (token != NULL) {
        c->token = token_from(token, strlen(token));
        if (c->token == NULL) {
            cfg_push(p, "token");
            return cfg_fail(p, get(p, user, "token"), "empty, or not a bearer token");
        }
    } else if (token_file != NULL) {
        char full[PATH_MAX], msg[512];
        size_t mark = cfg_push(p, "tokenFile");
        if (cfg_path(p, get(p, user, "tokenFile"), token_file, full, sizeof(full)) < 0)
            return -1;
        if (set_dup(&c->token_file, full) < 0)
            return cfg_oom(p, user);
        if (sws_kube_conn_refresh_token(c, msg, sizeof(msg)) < 0)
            return cfg_fail(p, get(p, user, "tokenFile"), "%s", msg);
        cfg_pop(p, mark);
    }
    size_t mark = p->pathlen;
    if (pem_value(p, user, "client-certificate", &c->cert_pem, &c->cert_len) < 0 ||
        pem_value(p, user, "client-key", &c->key_pem, &c->key_len) < 0)
        return -1;
    cfg_pop(p, mark);
    if ((c->cert_pem == NULL) != (c->key_pem == NULL))
        return cfg_fail(p, user, "a client certificate needs its key and a key its certificate");
    if (c->token == NULL && c->cert_pem == NULL)
        return cfg_fail(p, user, "no credentials: give token, tokenFile or client-certificate "
                        "with client-key");
    return 0;
}

static int load_cluster(cfg_parser_t *p, sws_kube_conn_t *c, yaml_node_t *cluster)
{
    const char *server, *insecure;
    char msg[256];
    int yes = 0;

    if (get_str(p, cluster, "server", &server) < 0 ||
        get_str(p, cluster, "insecure-skip-tls-verify", &insecure) < 0)
        return -1;
    if (server == NULL)
        return cfg_fail(p, cluster, "no server");
    if (set_server(c, server, msg, sizeof(msg)) < 0) {
        cfg_push(p, "server");
        return cfg_fail(p, get(p, cluster, "server"), "%s", msg);
    }
    if (insecure != NULL && cfg_bool_text(insecure, &yes) == 0 && yes) {
        cfg_push(p, "insecure-skip-tls-verify");
        return cfg_fail(p, get(p, cluster, "insecure-skip-tls-verify"),
                        "refused: ingressd verifies the API server; give "
                        "certificate-authority-data or certificate-authority");
    }
    return pem_value(p, cluster, "certificate-authority", &c->ca_pem, &c->ca_len);
}

static int load_doc(cfg_parser_t *p, sws_kube_conn_t *c, const char *path, const char *context)
{
    yaml_node_t *root = yaml_document_get_root_node(p->doc);
    yaml_node_t *ctx, *cluster, *user;
    const char *cluster_name, *user_name;

    if (root == NULL || root->type != YAML_MAPPING_NODE)
        return cfg_fail_at(p, root ? root->start_mark : (yaml_mark_t){ 0 },
                           "a kubeconfig is a mapping (apiVersion: v1, kind: Config, ...)");
    if (context == NULL) {
        if (get_str(p, root, "current-context", &context) < 0)
            return -1;
        if (context == NULL || context[0] == '\0')
            return cfg_fail(p, root, "no current-context (kubectl config use-context NAME)");
    }
    snprintf(c->source, sizeof(c->source), "kubeconfig %.200s, context %.80s", path, context);

    size_t mark = p->pathlen;
    ctx = named(p, root, "contexts", "context", context, root);
    if (ctx == NULL || get_str(p, ctx, "cluster", &cluster_name) < 0 ||
        get_str(p, ctx, "user", &user_name) < 0)
        return -1;
    if (cluster_name == NULL || user_name == NULL)
        return cfg_fail(p, ctx, "needs cluster: and user:");
    cfg_pop(p, mark);

    cluster = named(p, root, "clusters", "cluster", cluster_name, ctx);
    if (cluster == NULL || load_cluster(p, c, cluster) < 0)
        return -1;
    cfg_pop(p, mark);

    user = named(p, root, "users", "user", user_name, ctx);
    if (user == NULL || load_user(p, c, user) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

int sws_kubeconfig_load(sws_kube_conn_t *c, const char *path, const char *context, char *err,
                        size_t errlen)
{
    char dir[PATH_MAX], copy[PATH_MAX];
    cfg_parser_t p = { .name = path, .base_dir = dir, .err = err, .errlen = errlen };
    yaml_parser_t parser;
    yaml_document_t doc;
    size_t len;
    char *text;
    int rc = -1;

    memset(c, 0, sizeof(*c));
    /* Relative paths inside are relative to the file, as kubectl reads them. */
    snprintf(copy, sizeof(copy), "%s", path);
    snprintf(dir, sizeof(dir), "%s", dirname(copy));
    text = cfg_read_file(path, "the kubeconfig", KUBE_MAX_FILE, &len, err, errlen);
    if (text == NULL)
        return -1;
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return sws_errf(err, errlen, "out of memory");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        cfg_yaml_error(&p, &parser, text, len);
    } else {
        p.doc = &doc;
        rc = load_doc(&p, c, path, context);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    free(text);
    if (rc < 0)
        sws_kube_conn_free(c);
    return rc;
}

/* ---- in-cluster ---- */

int sws_kube_conn_incluster(sws_kube_conn_t *c, const char *host, const char *port,
                            const char *sa_dir, char *err, size_t errlen)
{
    char url[300], file[PATH_MAX], msg[512];

    memset(c, 0, sizeof(*c));
    snprintf(c->source, sizeof(c->source), "in-cluster (service account %.200s)", sa_dir);
    if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0')
        return sws_errf(err, errlen, "not in a cluster: KUBERNETES_SERVICE_HOST and "
                        "KUBERNETES_SERVICE_PORT are not set (give --kubeconfig FILE)");
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
        return sws_errf(err, errlen, "KUBERNETES_SERVICE_PORT \"%.20s\" is not a port", port);
    /* An IPv6 service address goes in brackets. */
    snprintf(url, sizeof(url), strchr(host, ':') ? "https://[%.200s]:%s" : "https://%.200s:%s",
             host, port);
    if (set_server(c, url, err, errlen) < 0)
        goto fail;

    snprintf(file, sizeof(file), "%s/ca.crt", sa_dir);
    c->ca_pem = cfg_read_file(file, "the service account CA", KUBE_MAX_FILE, &c->ca_len, msg,
                              sizeof(msg));
    if (c->ca_pem == NULL) {
        sws_errf(err, errlen, "%s", msg);
        goto fail;
    }
    snprintf(file, sizeof(file), "%s/token", sa_dir);
    if (set_dup(&c->token_file, file) < 0) {
        sws_errf(err, errlen, "out of memory");
        goto fail;
    }
    if (sws_kube_conn_refresh_token(c, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    sws_kube_conn_free(c);
    return -1;
}
