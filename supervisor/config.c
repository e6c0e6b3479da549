/*
 * The configuration file: YAML (libyaml's document API) in, a Sws__Config out.
 *
 * The whole file is loaded into a libyaml document first; the walk below then
 * visits it with a key path ("hosts[0].routes[1].static.root") so that every
 * error names the node it is about, with the node's line and column. The
 * result is built with malloc and the generated *__init functions, and each
 * sub-message is attached to its parent before it is filled: whatever fails
 * half-way, protobuf_c_message_free_unpacked() frees exactly what was built.
 *
 * What a RouteSet must satisfy is shm/routeset_check.h's: the walk applies
 * its rule functions where it has the YAML node at hand, and the finished
 * RouteSet passes sws_routeset_check() (the check the table builder applies
 * to every source), whose refusal is reported at the node its field path
 * names (cfg_node_at).
 */
#include "supervisor/config.h"

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
#include <unistd.h>
#include <yaml.h>

#include "core/err.h"
#include "core/log.h"
#include "core/str.h"
#include "shm/routeset_check.h"
#include "shm/table.h"
#include "supervisor/listen.h"
#include "supervisor/supervisor.h"

/* The defaults; docs/configuration.md lists the same values. */
#define CFG_DEFAULT_LISTEN ":8080"
#define CFG_DEFAULT_BACKLOG 4096
#define CFG_DEFAULT_TABLE_SIZE (8u << 20)
#define CFG_DEFAULT_SERVER_NAME "scalws"
#define CFG_DEFAULT_LOG_LEVEL "info"
#define CFG_DEFAULT_LOG_PATH "-"
#define CFG_DEFAULT_INDEX "index.html"
#define CFG_DEFAULT_RESPOND_STATUS 200
#define CFG_DEFAULT_REDIRECT_STATUS 302

#define CFG_MAX_FILE_SIZE (16u << 20)
#define CFG_MAX_EVENT_LOOPS 1024
#define CFG_DAY_MS (24ull * 3600 * 1000)
#define CFG_MAX_FIELDS 16
/* YAML aliases let a small file name the same body or route list many
 * times over, and the parse copies each use: without a bound, a 1 MiB file
 * can ask for gigabytes. Everything parsed goes into the routing table, and
 * no item takes more than 16 times the memory here that it takes there (the
 * worst is a short header: ~50 bytes of messages, 5 bytes in the table), so
 * a parse larger than 16 x server.table_size could never be published. */
#define CFG_MEMORY_PER_TABLE_BYTE 16u

typedef struct cfg_parser {
    const char *name;       /* file name for messages */
    const char *base_dir;   /* relative static roots resolve here; NULL: cwd */
    int check_system;       /* a file: check the user and the log files as a start does */
    yaml_document_t *doc;
    char *err;
    size_t errlen;
    char path[256];         /* key path of the node being read */
    size_t pathlen;
    uint64_t used;          /* bytes of messages and strings built so far */
    uint64_t limit;         /* 0 until server.table_size is known */
    yaml_node_t *table_size; /* its value, where a too small table is reported; NULL: default */
} cfg_parser_t;

/* The values of one mapping, by key, after every key was checked to be known
 * and unique. names is NULL-terminated. */
typedef struct cfg_fields {
    const char *const *names;
    yaml_node_t *val[CFG_MAX_FIELDS];
} cfg_fields_t;

/* A set of keys already seen (host names, routes, listen addresses), to
 * report the second one with the place of the first. Keys are borrowed. */
typedef struct cfg_seen {
    const char *key;
    unsigned kind;
    const yaml_node_t *node;
} cfg_seen_t;

typedef struct cfg_set {
    cfg_seen_t *slot;
    size_t cap;
    size_t n;
} cfg_set_t;

typedef enum cfg_unit { CFG_COUNT, CFG_SIZE, CFG_DURATION } cfg_unit_t;

/* ---- errors and the key path ---- */

static int cfg_fail_at(cfg_parser_t *p, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int cfg_fail_at(cfg_parser_t *p, yaml_mark_t mark, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (p->err == NULL || p->errlen == 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p->pathlen > 0)
        snprintf(p->err, p->errlen, "%s:%zu:%zu: %s: %s", p->name, mark.line + 1,
                 mark.column + 1, p->path, msg);
    else
        snprintf(p->err, p->errlen, "%s:%zu:%zu: %s", p->name, mark.line + 1,
                 mark.column + 1, msg);
    return -1;
}

#define cfg_fail(p, node, ...) cfg_fail_at((p), (node)->start_mark, __VA_ARGS__)
#define cfg_oom(p, node) cfg_fail((p), (node), "out of memory")

static size_t cfg_push_fmt(cfg_parser_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static size_t cfg_push_fmt(cfg_parser_t *p, const char *fmt, ...)
{
    size_t old = p->pathlen;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(p->path + old, sizeof(p->path) - old, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    p->pathlen = old + (size_t)n < sizeof(p->path) ? old + (size_t)n : sizeof(p->path) - 1;
    return old;
}

static size_t cfg_push(cfg_parser_t *p, const char *key)
{
    return cfg_push_fmt(p, "%s%s", p->pathlen > 0 ? "." : "", key);
}

static size_t cfg_push_index(cfg_parser_t *p, size_t i)
{
    return cfg_push_fmt(p, "[%zu]", i);
}

static void cfg_pop(cfg_parser_t *p, size_t mark)
{
    p->pathlen = mark;
    p->path[mark] = '\0';
}

/* ---- nodes ---- */

static yaml_node_t *cfg_node(cfg_parser_t *p, int index)
{
    return yaml_document_get_node(p->doc, index);
}

static const char *cfg_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int cfg_is_null(const yaml_node_t *n)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (strcmp(cfg_text(n), nulls[i]) == 0)
            return 1;
    return 0;
}

static const char *cfg_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    default: return cfg_is_null(n) ? "nothing" : "a scalar";
    }
}

/* The scalar's text, shortened for a message. */
static const char *cfg_quote(const yaml_node_t *n, char *buf, size_t len)
{
    if (n->type != YAML_SCALAR_NODE)
        snprintf(buf, len, "%s", cfg_kind(n));
    else if (n->data.scalar.length > 40)
        snprintf(buf, len, "\"%.37s...\"", cfg_text(n));
    else
        snprintf(buf, len, "\"%s\"", cfg_text(n));
    return buf;
}

static int cfg_bool_text(const char *s, int *out)
{
    static const char *const yes[] = { "true", "yes", "on" };
    static const char *const no[] = { "false", "no", "off" };

    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

/* Count bytes the result is about to take; -1 (reported at `at`) past the
 * limit, see CFG_MEMORY_PER_TABLE_BYTE. */
static int cfg_charge(cfg_parser_t *p, const yaml_node_t *at, size_t bytes)
{
    p->used += bytes;
    if (p->limit == 0 || p->used <= p->limit)
        return 0;
    return cfg_fail(p, at, "the configuration takes more than %llu bytes once YAML aliases are "
                    "expanded; a routing table of server.table_size (%llu bytes) could not hold it",
                    (unsigned long long)p->limit,
                    (unsigned long long)(p->limit / CFG_MEMORY_PER_TABLE_BYTE));
}

/* A scalar as a C string: one without NUL bytes inside. */
static int cfg_want_string(cfg_parser_t *p, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_fail(p, n, "expected a string, got %s", cfg_kind(n));
    if (strlen(cfg_text(n)) != n->data.scalar.length)
        return cfg_fail(p, n, "must not contain a NUL byte");
    return 0;
}

/* Replace *dst (the generated empty string or an earlier malloc'ed value)
 * with a malloc'ed copy of s. */
static int cfg_set_str(cfg_parser_t *p, const yaml_node_t *at, char **dst, const char *s)
{
    char *copy;

    if (cfg_charge(p, at, strlen(s) + 1) < 0)
        return -1;
    copy = strdup(s);
    if (copy == NULL)
        return cfg_oom(p, at);
    if (*dst != NULL && *dst != protobuf_c_empty_string)
        free(*dst);
    *dst = copy;
    return 0;
}

/* A message of desc's type, malloc'ed and initialised with its generated
 * init (what free_unpacked expects); NULL after reporting at. */
static void *cfg_new(cfg_parser_t *p, const yaml_node_t *at,
                     const ProtobufCMessageDescriptor *desc)
{
    ProtobufCMessage *m;

    /* The message and its pointer in the parent's array. */
    if (cfg_charge(p, at, desc->sizeof_message + sizeof(void *)) < 0)
        return NULL;
    m = malloc(desc->sizeof_message);
    if (m == NULL) {
        cfg_oom(p, at);
        return NULL;
    }
    desc->message_init(m);
    return m;
}

/* ---- mappings and their keys ---- */

static yaml_node_t *cfg_field(const cfg_fields_t *f, const char *name)
{
    for (size_t i = 0; f->names[i] != NULL; i++)
        if (strcmp(f->names[i], name) == 0)
            return f->val[i];
    return NULL;
}

static int cfg_unknown_key(cfg_parser_t *p, const yaml_node_t *key, const char *const *names)
{
    char known[256];
    size_t used = 0;

    known[0] = '\0';
    for (size_t i = 0; names[i] != NULL && used < sizeof(known); i++) {
        int n = snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "", names[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    return cfg_fail(p, key, "unknown key (expected one of: %s)", known);
}

/* Check that node is a mapping (or absent: NULL, or empty) whose keys are all in names, each
 * once, and collect the values. */
static int cfg_map(cfg_parser_t *p, yaml_node_t *node, const char *const *names, cfg_fields_t *f)
{
    yaml_node_t *keys[CFG_MAX_FIELDS] = { NULL };

    memset(f, 0, sizeof(*f));
    f->names = names;
    for (size_t i = 0; names[i] != NULL; i++)
        if (i >= CFG_MAX_FIELDS)
            return cfg_fail_at(p, (yaml_mark_t){ 0 }, "internal error: raise CFG_MAX_FIELDS");
    if (node == NULL || cfg_is_null(node))
        return 0;
    if (node->type != YAML_MAPPING_NODE)
        return cfg_fail(p, node, "expected a mapping (key: value), got %s", cfg_kind(node));

    for (yaml_node_pair_t *pair = node->data.mapping.pairs.start;
         pair < node->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = cfg_node(p, pair->key);
        size_t i, mark;
        int rc = 0;

        if (key->type != YAML_SCALAR_NODE)
            return cfg_fail(p, key, "a key must be a plain name, not %s", cfg_kind(key));
        for (i = 0; names[i] != NULL; i++)
            if (strcmp(names[i], cfg_text(key)) == 0)
                break;
        mark = cfg_push(p, cfg_text(key));
        if (names[i] == NULL || strlen(cfg_text(key)) != key->data.scalar.length)
            rc = cfg_unknown_key(p, key, names);
        else if (keys[i] != NULL)
            rc = cfg_fail(p, key, "duplicate key (first at line %zu, column %zu)",
                          keys[i]->start_mark.line + 1, keys[i]->start_mark.column + 1);
        cfg_pop(p, mark);
        if (rc < 0)
            return rc;
        keys[i] = key;
        f->val[i] = cfg_node(p, pair->value);
    }
    return 0;
}

/* The items of a list; a null value is an empty list, a scalar or a mapping
 * an error. */
static int cfg_list(cfg_parser_t *p, yaml_node_t *node, yaml_node_item_t **items, size_t *n)
{
    *items = NULL;
    *n = 0;
    if (cfg_is_null(node))
        return 0;
    if (node->type != YAML_SEQUENCE_NODE)
        return cfg_fail(p, node, "expected a list, got %s", cfg_kind(node));
    *items = node->data.sequence.items.start;
    *n = (size_t)(node->data.sequence.items.top - node->data.sequence.items.start);
    return 0;
}

/* ---- numbers, sizes, durations, booleans ---- */

static int cfg_digits(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static int cfg_scaled(uint64_t v, uint64_t scale, uint64_t *out)
{
    if (v > UINT64_MAX / scale)
        return -1;
    *out = v * scale;
    return 0;
}

/* "4096", "64k", "8m", "1g" (1024-based; the suffix in either case). */
static int cfg_size_text(const char *s, uint64_t *out)
{
    size_t len = strlen(s);
    uint64_t v, scale = 1;

    if (len > 0) {
        switch (s[len - 1]) {
        case 'k': case 'K': scale = 1ull << 10; break;
        case 'm': case 'M': scale = 1ull << 20; break;
        case 'g': case 'G': scale = 1ull << 30; break;
        default: break;
        }
    }
    if (scale > 1)
        len--;
    if (cfg_digits(s, len, &v) < 0)
        return -1;
    return cfg_scaled(v, scale, out);
}

/* "500ms", "30s", "2m", "1h", or a bare number of seconds; in milliseconds. */
static int cfg_duration_text(const char *s, uint64_t *out)
{
    size_t len = strlen(s);
    uint64_t v, scale = 1000;

    if (len > 2 && strcmp(s + len - 2, "ms") == 0) {
        scale = 1;
        len -= 2;
    } else if (len > 1 && s[len - 1] == 's') {
        len--;
    } else if (len > 1 && s[len - 1] == 'm') {
        scale = 60 * 1000;
        len--;
    } else if (len > 1 && s[len - 1] == 'h') {
        scale = 3600 * 1000;
        len--;
    }
    if (cfg_digits(s, len, &v) < 0)
        return -1;
    return cfg_scaled(v, scale, out);
}

static void cfg_fmt_size(uint64_t v, char *buf, size_t len)
{
    if (v >= (1ull << 30) && v % (1ull << 30) == 0)
        snprintf(buf, len, "%llug", (unsigned long long)(v >> 30));
    else if (v >= (1ull << 20) && v % (1ull << 20) == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(v >> 20));
    else if (v >= (1ull << 10) && v % (1ull << 10) == 0)
        snprintf(buf, len, "%lluk", (unsigned long long)(v >> 10));
    else
        snprintf(buf, len, "%llu", (unsigned long long)v);
}

static void cfg_fmt_duration(uint64_t ms, char *buf, size_t len)
{
    if (ms >= 3600000 && ms % 3600000 == 0)
        snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms >= 60000 && ms % 60000 == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
    else if (ms >= 1000 && ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static int cfg_number(cfg_parser_t *p, const yaml_node_t *n, cfg_unit_t unit, uint64_t min,
                      uint64_t max, uint64_t *out)
{
    char lo[32], hi[32], got[64];
    const char *what;
    int rc = -1;

    if (n->type == YAML_SCALAR_NODE && strlen(cfg_text(n)) == n->data.scalar.length) {
        switch (unit) {
        case CFG_COUNT: rc = cfg_digits(cfg_text(n), n->data.scalar.length, out); break;
        case CFG_SIZE: rc = cfg_size_text(cfg_text(n), out); break;
        case CFG_DURATION: rc = cfg_duration_text(cfg_text(n), out); break;
        }
    }
    if (rc == 0 && *out >= min && *out <= max)
        return 0;

    switch (unit) {
    case CFG_SIZE:
        what = "a size (bytes, or with a k/m/g suffix)";
        cfg_fmt_size(min, lo, sizeof(lo));
        cfg_fmt_size(max, hi, sizeof(hi));
        break;
    case CFG_DURATION:
        what = "a duration (500ms, 30s, 2m, 1h; a bare number is seconds)";
        cfg_fmt_duration(min, lo, sizeof(lo));
        cfg_fmt_duration(max, hi, sizeof(hi));
        break;
    default:
        what = "a number";
        snprintf(lo, sizeof(lo), "%llu", (unsigned long long)min);
        snprintf(hi, sizeof(hi), "%llu", (unsigned long long)max);
        break;
    }
    return cfg_fail(p, n, "expected %s from %s to %s, got %s", what, lo, hi,
                    cfg_quote(n, got, sizeof(got)));
}

/* Optional numeric field key of f into *out (untouched when absent). */
static int cfg_u64(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
                   uint64_t min, uint64_t max, uint64_t *out)
{
    yaml_node_t *n = cfg_field(f, key);
    size_t mark;
    int rc;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, key);
    rc = cfg_number(p, n, unit, min, max, out);
    cfg_pop(p, mark);
    return rc;
}

static int cfg_u32(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
                   uint64_t min, uint64_t max, uint32_t *out)
{
    uint64_t v = *out;

    if (max > UINT32_MAX)
        max = UINT32_MAX;
    if (cfg_u64(p, f, key, unit, min, max, &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int cfg_bool(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
                    protobuf_c_boolean *out)
{
    yaml_node_t *n = cfg_field(f, key);
    char got[64];
    int v, rc = 0;
    size_t mark;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, key);
    if (n->type != YAML_SCALAR_NODE || cfg_bool_text(cfg_text(n), &v) < 0)
        rc = cfg_fail(p, n, "expected true or false, got %s", cfg_quote(n, got, sizeof(got)));
    else
        *out = v;
    cfg_pop(p, mark);
    return rc;
}

/* Optional string field: a scalar without NUL bytes; a null value is "". */
static int cfg_string(cfg_parser_t *p, const cfg_fields_t *f, const char *key, char **out)
{
    yaml_node_t *n = cfg_field(f, key);
    size_t mark;
    int rc;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, key);
    rc = cfg_want_string(p, n);
    if (rc == 0)
        rc = cfg_set_str(p, n, out, cfg_is_null(n) ? "" : cfg_text(n));
    cfg_pop(p, mark);
    return rc;
}

/* ---- the seen-key set ---- */

static uint64_t cfg_hash(const char *s, unsigned kind)
{
    uint64_t h = 14695981039346656037ull ^ kind;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int cfg_set_grow(cfg_set_t *s)
{
    size_t cap = s->cap ? s->cap * 2 : 16;
    cfg_seen_t *slot = calloc(cap, sizeof(*slot));

    if (slot == NULL)
        return -1;
    for (size_t i = 0; i < s->cap; i++) {
        if (s->slot[i].key == NULL)
            continue;
        size_t j = cfg_hash(s->slot[i].key, s->slot[i].kind) & (cap - 1);
        while (slot[j].key != NULL)
            j = (j + 1) & (cap - 1);
        slot[j] = s->slot[i];
    }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
    return 0;
}

/* Add (key, kind); NULL when new, the earlier entry when already there.
 * *oom is set when the set could not grow. */
static const cfg_seen_t *cfg_set_add(cfg_set_t *s, const char *key, unsigned kind,
                                     const yaml_node_t *node, int *oom)
{
    size_t j;

    *oom = 0;
    if ((s->n + 1) * 2 > s->cap && cfg_set_grow(s) < 0) {
        *oom = 1;
        return NULL;
    }
    j = cfg_hash(key, kind) & (s->cap - 1);
    while (s->slot[j].key != NULL) {
        if (s->slot[j].kind == kind && strcmp(s->slot[j].key, key) == 0)
            return &s->slot[j];
        j = (j + 1) & (s->cap - 1);
    }
    s->slot[j] = (cfg_seen_t){ key, kind, node };
    s->n++;
    return NULL;
}

static void cfg_set_free(cfg_set_t *s)
{
    free(s->slot);
    memset(s, 0, sizeof(*s));
}

/* ---- listen addresses ---- */

static int cfg_listen_one(cfg_parser_t *p, yaml_node_t *n, Sws__ServerConfig *sc, cfg_set_t *seen,
                          char keys[][INET6_ADDRSTRLEN + 8])
{
    struct sockaddr_storage ss;
    unsigned sslen;
    char why[320];
    const cfg_seen_t *dup;
    Sws__Listen *l;
    int oom;

    if (cfg_want_string(p, n) < 0)
        return -1;
    if (sws_listen_parse_address(cfg_text(n), &ss, &sslen, why, sizeof(why)) < 0)
        return cfg_fail(p, n, "%s", why);

    /* The same text for the same socket address, however it was written. */
    char *key = keys[sc->n_listen];
    sws_listen_format(&ss, key, INET6_ADDRSTRLEN + 8);
    dup = cfg_set_add(seen, key, 0, n, &oom);
    if (oom)
        return cfg_oom(p, n);
    if (dup != NULL)
        return cfg_fail(p, n, "%s is already listed (line %zu, column %zu)", key,
                        dup->node->start_mark.line + 1, dup->node->start_mark.column + 1);

    l = cfg_new(p, n, &sws__listen__descriptor);
    if (l == NULL)
        return -1;
    sc->listen[sc->n_listen++] = l;
    return cfg_set_str(p, n, &l->address, cfg_text(n));
}

/* listen: "ADDR" or [ "ADDR", ... ]; absent: ":8080". */
static int cfg_listen(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc)
{
    yaml_node_item_t *items = NULL;
    size_t n = 1;
    cfg_set_t seen = { 0 };
    char (*keys)[INET6_ADDRSTRLEN + 8] = NULL;
    int rc = 0;

    if (node != NULL && node->type == YAML_MAPPING_NODE)
        return cfg_fail(p, node, "expected an address or a list of addresses, got %s",
                        cfg_kind(node));
    if (node != NULL && node->type != YAML_SCALAR_NODE) {
        if (cfg_list(p, node, &items, &n) < 0)
            return -1;
        if (n == 0)
            return cfg_fail(p, node, "needs at least one address");
    }
    sc->listen = calloc(n, sizeof(*sc->listen));
    keys = calloc(n, sizeof(*keys));
    if (sc->listen == NULL || keys == NULL) {
        free(keys);
        return cfg_oom(p, node != NULL ? node : cfg_node(p, 1));
    }

    if (node == NULL) {
        Sws__Listen *l = cfg_new(p, cfg_node(p, 1), &sws__listen__descriptor);
        if (l == NULL) {
            free(keys);
            return -1;
        }
        sc->listen[sc->n_listen++] = l;
        rc = cfg_set_str(p, cfg_node(p, 1), &l->address, CFG_DEFAULT_LISTEN);
    } else if (items == NULL) {
        rc = cfg_listen_one(p, node, sc, &seen, keys);
    } else {
        for (size_t i = 0; i < n && rc == 0; i++) {
            size_t mark = cfg_push_index(p, i);
            rc = cfg_listen_one(p, cfg_node(p, items[i]), sc, &seen, keys);
            cfg_pop(p, mark);
        }
    }
    cfg_set_free(&seen);
    free(keys);
    return rc;
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
    static const char *const bpf[] = { "least-loaded", "fountain", "cpu", "hash" };
    yaml_node_t *n = cfg_field(f, "accept_policy");
    char got[64];
    size_t mark;
    int rc = 0;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "accept_policy");
    if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "shared") == 0) {
        sc->accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED;
    } else if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), "reuseport") == 0) {
        sc->accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT;
    } else {
        rc = cfg_fail(p, n, "expected shared or reuseport, got %s", cfg_quote(n, got, sizeof(got)));
        for (size_t i = 0; n->type == YAML_SCALAR_NODE && i < sizeof(bpf) / sizeof(bpf[0]); i++)
            if (strcmp(cfg_text(n), bpf[i]) == 0)
                cfg_fail(p, n, "\"%s\" needs the eBPF accept policies, not built yet "
                         "(use shared or reuseport)", bpf[i]);
    }
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

/* The one rule for every path in the file: a relative path is relative to
 * the configuration file's directory, never to the working directory
 * (under systemd that is /). out gets the path to use. */
static int cfg_path(cfg_parser_t *p, yaml_node_t *n, const char *path, char *out, size_t outlen)
{
    int len;

    if (path[0] != '/' && p->base_dir != NULL)
        len = snprintf(out, outlen, "%s/%s", p->base_dir, path);
    else
        len = snprintf(out, outlen, "%s", path);
    if (len < 0 || (size_t)len >= outlen)
        return cfg_fail(p, n, "path too long");
    return 0;
}

/* A log file, checked by opening it the way the supervisor does at start
 * (sws_log_file_open, as root: workers never open one), so that -t and a
 * start cannot disagree. "-" is a standard stream: nothing to check. */
static int cfg_log_file(cfg_parser_t *p, const cfg_fields_t *f, const char *key, int std_fd,
                        int wanted, char **out)
{
    yaml_node_t *n = cfg_field(f, key);
    char path[PATH_MAX], why[PATH_MAX + 64];
    size_t mark;
    int fd, rc = 0;

    if (cfg_string(p, f, key, out) < 0)
        return -1;
    if (n == NULL || (*out)[0] == '\0' || strcmp(*out, "-") == 0)
        return 0;
    mark = cfg_push(p, key);
    if (cfg_path(p, n, *out, path, sizeof(path)) < 0 || cfg_set_str(p, n, out, path) < 0) {
        rc = -1;
    } else if (p->check_system && wanted) {
        fd = sws_log_file_open(*out, std_fd, why, sizeof(why));
        if (fd >= 0)
            close(fd);
        else
            rc = cfg_fail(p, n, "%s", why);
    }
    cfg_pop(p, mark);
    return rc;
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

static int cfg_server(cfg_parser_t *p, yaml_node_t *node, Sws__ServerConfig *sc,
                      Sws__Settings *st)
{
    static const char *const keys[] = { "listen", "event_loops", "accept_policy", "backlog",
                                        "user", "shutdown_timeout", "table_size",
                                        "keepalive_requests", "server_header", "limits",
                                        "timeouts", "logging", NULL };
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
        cfg_u32(p, &f, "backlog", CFG_COUNT, 1, 65535, &sc->backlog) < 0 ||
        cfg_user(p, &f, sc) < 0 ||
        cfg_u32(p, &f, "shutdown_timeout", CFG_DURATION, 0, CFG_DAY_MS,
                &st->shutdown_timeout_ms) < 0 ||
        cfg_u32(p, &f, "table_size", CFG_SIZE, 64u << 10, 1u << 30, &sc->table_size) < 0 ||
        cfg_u32(p, &f, "keepalive_requests", CFG_COUNT, 1, 1000000000,
                &st->keepalive_requests) < 0 ||
        cfg_server_header(p, &f, st) < 0)
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
    return 0;
}

/* ---- hosts ---- */

static int cfg_host_name(cfg_parser_t *p, yaml_node_t *n, Sws__Host *h, cfg_set_t *seen)
{
    const cfg_seen_t *dup;
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
                        dup->node->start_mark.line + 1, dup->node->start_mark.column + 1);
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
    const cfg_seen_t *dup;
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
                        match_names[r->match], r->path, dup->node->start_mark.line + 1,
                        dup->node->start_mark.column + 1);
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
 * member of its oneof) that holds the action's message; fill is NULL for an
 * action that is not built yet. */
static const struct cfg_action {
    const char *key;
    int (*fill)(cfg_parser_t *p, yaml_node_t *node, void *msg);
} cfg_actions[] = {
    { "respond", cfg_respond },
    { "static", cfg_static },
    { "redirect", cfg_redirect },
    { "proxy", NULL },
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
        return cfg_fail(p, route, "a route needs one action: respond, static or redirect");

    mark = cfg_push(p, action->key);
    if (action->fill == NULL)
        return cfg_fail(p, node, "%s needs the reverse proxy (pools), not built yet", action->key);
    msg = cfg_new_oneof(p, node, &r->base, action->key);
    if (msg == NULL || action->fill(p, node, msg) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* A repeated message field from a YAML list: each item gets a message of
 * desc's type, malloc'ed, initialised and appended before fill runs (so that
 * a failure half-way still frees it). seen spans the list: the host names of
 * all hosts, the routes of one host. */
typedef int (*cfg_fill_fn)(cfg_parser_t *p, yaml_node_t *item, void *msg, cfg_set_t *seen);

static int cfg_repeated(cfg_parser_t *p, yaml_node_t *node, const ProtobufCMessageDescriptor *desc,
                        size_t *count, void ***arr, cfg_fill_fn fill)
{
    yaml_node_item_t *items;
    cfg_set_t seen = { 0 };
    size_t n;
    int rc = 0;

    if (node == NULL)
        return 0;
    if (cfg_list(p, node, &items, &n) < 0)
        return -1;
    if (n == 0)
        return 0;
    *arr = calloc(n, sizeof(**arr));
    if (*arr == NULL)
        return cfg_oom(p, node);
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t mark = cfg_push_index(p, i);
        void *msg = cfg_new(p, node, desc);
        if (msg == NULL) {
            rc = -1;
            break;
        }
        (*arr)[(*count)++] = msg;
        rc = fill(p, cfg_node(p, items[i]), msg, &seen);
        if (rc == 0)
            cfg_pop(p, mark);
    }
    cfg_set_free(&seen);
    return rc;
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
    static const char *const keys[] = { "names", "name", "https_redirect", "routes", NULL };
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
        (cfg->routes = cfg_new(p, at, &sws__route_set__descriptor)) == NULL ||
        (cfg->routes->settings = cfg_new(p, at, &sws__settings__descriptor)) == NULL ||
        (cfg->routes->settings->access_log = cfg_new(p, at, &sws__access_log__descriptor)) == NULL)
        return -1;

    sc = cfg->server;
    sc->event_loops = 0;
    sc->accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED;
    sc->backlog = CFG_DEFAULT_BACKLOG;
    sc->table_size = CFG_DEFAULT_TABLE_SIZE;
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
    static const char *const keys[] = { "server", "hosts", NULL };
    cfg_fields_t f;
    size_t mark;

    if (cfg_map(p, root, keys, &f) < 0 || cfg_defaults(p, root, cfg) < 0)
        return -1;
    mark = cfg_push(p, "server");
    if (cfg_server(p, cfg_field(&f, "server"), cfg->server, cfg->routes->settings) < 0)
        return -1;
    cfg_pop(p, mark);
    p->limit = (uint64_t)CFG_MEMORY_PER_TABLE_BYTE * cfg->server->table_size;
    mark = cfg_push(p, "hosts");
    if (cfg_repeated(p, cfg_field(&f, "hosts"), &sws__host__descriptor, &cfg->routes->n_hosts,
                     (void ***)&cfg->routes->hosts, cfg_host) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

/* ---- the RouteSet check ---- */

/* Item i of a list; of a scalar, i 0 is the scalar itself ("name: a" is
 * names[0]); of a mapping of headers, the i-th value counting each value
 * of a list (the order the reader built them in). NULL: none. */
static yaml_node_t *cfg_item(cfg_parser_t *p, yaml_node_t *n, size_t i)
{
    if (n->type == YAML_SCALAR_NODE)
        return i == 0 ? n : NULL;
    if (n->type == YAML_SEQUENCE_NODE) {
        size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
        return i < count ? cfg_node(p, n->data.sequence.items.start[i]) : NULL;
    }
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *v = cfg_node(p, pr->value);
        yaml_node_t *at = cfg_item(p, v, v->type == YAML_SEQUENCE_NODE ? i : 0);
        size_t count = v->type == YAML_SEQUENCE_NODE
                           ? (size_t)(v->data.sequence.items.top - v->data.sequence.items.start)
                           : 1;
        if (i < count)
            return at;
        i -= count;
    }
    return NULL;
}

/* The value of key (len bytes) in a mapping; "names" is also "name:". */
static yaml_node_t *cfg_key(cfg_parser_t *p, yaml_node_t *n, const char *key, size_t len)
{
    if (n->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = cfg_node(p, pr->key);
        if (k->type == YAML_SCALAR_NODE && k->data.scalar.length == len &&
            memcmp(cfg_text(k), key, len) == 0)
            return cfg_node(p, pr->value);
    }
    return len == 5 && memcmp(key, "names", 5) == 0 ? cfg_key(p, n, "name", 4) : NULL;
}

/* The node a checker's field path names ("hosts[0].routes[2].path"), or
 * the deepest one on its way: the place a refusal is reported. The
 * settings come from server:, whose keys are not theirs: the file's top. */
static yaml_node_t *cfg_node_at(cfg_parser_t *p, yaml_node_t *root, const char *path)
{
    yaml_node_t *n = root, *next = NULL;
    const char *s = path;

    if (strncmp(path, "settings", 8) == 0)
        return root;
    while (*s != '\0') {
        if (*s == '.')
            s++;
        if (*s == '[') {
            char *end;
            size_t i = strtoul(s + 1, &end, 10);
            if (*end != ']')
                break;
            next = cfg_item(p, n, i);
            s = end + 1;
        } else {
            size_t len = strcspn(s, ".[");
            next = cfg_key(p, n, s, len);
            s += len;
        }
        if (next == NULL)
            break;
        n = next;
    }
    return n;
}

/* The rules every source of a RouteSet passes (shm/routeset_check.h);
 * those the walk above applied already hold, the rest are reported at
 * the node the refusal's field path names. */
static int cfg_routes_check(cfg_parser_t *p, yaml_node_t *root, const Sws__RouteSet *rs)
{
    sws_routeset_refusal_t why;

    if (sws_routeset_check(rs, &why) == 0)
        return 0;
    cfg_pop(p, 0);
    cfg_push(p, why.path);
    cfg_fail(p, cfg_node_at(p, root, why.path), "%s", why.msg);
    cfg_pop(p, 0);
    return -1;
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

/* libyaml's own errors (syntax, bad UTF-8, an undefined alias). */
static int cfg_yaml_error(cfg_parser_t *p, const yaml_parser_t *parser, const char *text,
                          size_t len)
{
    yaml_mark_t mark = parser->problem_mark;
    const char *problem = parser->problem ? parser->problem : "cannot parse the file";

    if (parser->error == YAML_MEMORY_ERROR)
        problem = "out of memory";
    if (parser->error == YAML_READER_ERROR) {
        /* The reader reports a byte offset, not a mark. */
        memset(&mark, 0, sizeof(mark));
        for (size_t i = 0; i < parser->problem_offset && i < len; i++) {
            if (text[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else {
                mark.column++;
            }
        }
        return cfg_fail_at(p, mark, "%s (byte offset %zu)", problem, parser->problem_offset);
    }
    if (parser->error == YAML_SCANNER_ERROR && mark.index < len && text[mark.index] == '\t')
        return cfg_fail_at(p, mark, "expected spaces, got a tab (YAML indents with spaces only)");
    if (parser->context != NULL && strcmp(parser->context, "while scanning an alias") == 0)
        return cfg_fail_at(p, mark, "%s: a value that starts with '*' is an alias in YAML; "
                           "quote it, as in name: \"*\"", problem);
    if (parser->context != NULL)
        return cfg_fail_at(p, mark, "%s (%s at line %zu, column %zu)", problem, parser->context,
                           parser->context_mark.line + 1, parser->context_mark.column + 1);
    return cfg_fail_at(p, mark, "%s", problem);
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
        cfg_table_fits(&p, root, cfg) < 0) {
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
static char *cfg_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    size_t cap = 0, n = 0;
    char *buf = NULL;
    struct stat sb;
    FILE *f = fopen(path, "rb");

    if (f == NULL) {
        sws_errf(err, errlen, "%s: cannot open the configuration file: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        sws_errf(err, errlen, "%s: is a directory, not a configuration file", path);
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
        if (n > CFG_MAX_FILE_SIZE) {
            sws_errf(err, errlen, "%s: larger than %u MiB; is it the configuration file?", path,
                     CFG_MAX_FILE_SIZE >> 20);
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

    text = cfg_read_file(path, &len, err, errlen);
    if (text == NULL)
        return -1;
    rc = cfg_parse_in(text, len, path, dir, out, err, errlen);
    free(text);
    return rc;
}

void sws_config_free(Sws__Config *cfg)
{
    if (cfg != NULL)
        protobuf_c_message_free_unpacked(&cfg->base, NULL);
}
