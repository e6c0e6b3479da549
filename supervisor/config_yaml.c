/*
 * The YAML walker (supervisor/config_yaml.h): errors with the key path,
 * nodes, mappings and lists, typed scalars, the seen-key set, and a field
 * path back to its node.
 */
#include "supervisor/config_yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- errors and the key path ---- */


int cfg_fail_at(cfg_parser_t *p, yaml_mark_t mark, const char *fmt, ...)
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


size_t cfg_push_fmt(cfg_parser_t *p, const char *fmt, ...)
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

size_t cfg_push(cfg_parser_t *p, const char *key)
{
    return cfg_push_fmt(p, "%s%s", p->pathlen > 0 ? "." : "", key);
}

size_t cfg_push_index(cfg_parser_t *p, size_t i)
{
    return cfg_push_fmt(p, "[%zu]", i);
}

void cfg_pop(cfg_parser_t *p, size_t mark)
{
    p->pathlen = mark;
    p->path[mark] = '\0';
}

/* ---- nodes ---- */

yaml_node_t *cfg_node(cfg_parser_t *p, int index)
{
    return yaml_document_get_node(p->doc, index);
}

const char *cfg_text(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

int cfg_is_null(const yaml_node_t *n)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (strcmp(cfg_text(n), nulls[i]) == 0)
            return 1;
    return 0;
}

const char *cfg_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    default: return cfg_is_null(n) ? "nothing" : "a scalar";
    }
}

/* The scalar's text, shortened for a message. */
const char *cfg_quote(const yaml_node_t *n, char *buf, size_t len)
{
    if (n->type != YAML_SCALAR_NODE)
        snprintf(buf, len, "%s", cfg_kind(n));
    else if (n->data.scalar.length > 40)
        snprintf(buf, len, "\"%.37s...\"", cfg_text(n));
    else
        snprintf(buf, len, "\"%s\"", cfg_text(n));
    return buf;
}

int cfg_bool_text(const char *s, int *out)
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
int cfg_charge(cfg_parser_t *p, const yaml_node_t *at, size_t bytes)
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
int cfg_want_string(cfg_parser_t *p, const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_fail(p, n, "expected a string, got %s", cfg_kind(n));
    if (strlen(cfg_text(n)) != n->data.scalar.length)
        return cfg_fail(p, n, "must not contain a NUL byte");
    return 0;
}

/* Replace *dst (the generated empty string or an earlier malloc'ed value)
 * with a malloc'ed copy of s. */
int cfg_set_str(cfg_parser_t *p, const yaml_node_t *at, char **dst, const char *s)
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
void *cfg_new(cfg_parser_t *p, const yaml_node_t *at,
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

yaml_node_t *cfg_field(const cfg_fields_t *f, const char *name)
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
int cfg_map(cfg_parser_t *p, yaml_node_t *node, const char *const *names, cfg_fields_t *f)
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
int cfg_list(cfg_parser_t *p, yaml_node_t *node, yaml_node_item_t **items, size_t *n)
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

void cfg_fmt_size(uint64_t v, char *buf, size_t len)
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

int cfg_number(cfg_parser_t *p, const yaml_node_t *n, cfg_unit_t unit, uint64_t min,
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

/* The optional field key of f, its key pushed onto the path (*mark to pop
 * it); NULL, nothing pushed, when absent. */
static yaml_node_t *cfg_enter(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
                              size_t *mark)
{
    yaml_node_t *n = cfg_field(f, key);
    if (n != NULL)
        *mark = cfg_push(p, key);
    return n;
}

/* Optional numeric field key of f into *out (untouched when absent). */
int cfg_u64(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
            uint64_t min, uint64_t max, uint64_t *out)
{
    size_t mark = 0;
    yaml_node_t *n = cfg_enter(p, f, key, &mark);

    if (n == NULL)
        return 0;
    int rc = cfg_number(p, n, unit, min, max, out);
    cfg_pop(p, mark);
    return rc;
}

int cfg_u32(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
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

int cfg_bool(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
             protobuf_c_boolean *out)
{
    size_t mark = 0;
    yaml_node_t *n = cfg_enter(p, f, key, &mark);
    char got[64];
    int v, rc = 0;

    if (n == NULL)
        return 0;
    if (n->type != YAML_SCALAR_NODE || cfg_bool_text(cfg_text(n), &v) < 0)
        rc = cfg_fail(p, n, "expected true or false, got %s", cfg_quote(n, got, sizeof(got)));
    else
        *out = v;
    cfg_pop(p, mark);
    return rc;
}

/* Optional string field: a scalar without NUL bytes; a null value is "". */
int cfg_string(cfg_parser_t *p, const cfg_fields_t *f, const char *key, char **out)
{
    size_t mark = 0;
    yaml_node_t *n = cfg_enter(p, f, key, &mark);

    if (n == NULL)
        return 0;
    int rc = cfg_want_string(p, n);
    if (rc == 0)
        rc = cfg_set_str(p, n, out, cfg_is_null(n) ? "" : cfg_text(n));
    cfg_pop(p, mark);
    return rc;
}

/* ---- the seen-key set ---- */

const yaml_node_t *cfg_set_add(cfg_set_t *s, const char *key, unsigned kind,
                               const yaml_node_t *node, int *oom)
{
    sws_map_t *m = &s->kind[kind];
    size_t len = strlen(key);
    const yaml_node_t *first = sws_map_get(m, key, len);

    /* The map holds values as void *; the set hands them back as const. */
    *oom = first == NULL && sws_map_put(m, key, len, (void *)node) < 0;
    return first;
}

void cfg_set_free(cfg_set_t *s)
{
    for (size_t i = 0; i < CFG_SET_KINDS; i++)
        sws_map_free(&s->kind[i]);
}


int cfg_repeated(cfg_parser_t *p, yaml_node_t *node, const ProtobufCMessageDescriptor *desc,
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
yaml_node_t *cfg_node_at(cfg_parser_t *p, yaml_node_t *root, const char *path)
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

/* libyaml's own errors (syntax, bad UTF-8, an undefined alias). */
int cfg_yaml_error(cfg_parser_t *p, const yaml_parser_t *parser, const char *text,
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

/* The one rule for every path in the file: a relative path is relative to
 * the configuration file's directory, never to the working directory
 * (under systemd that is /). out gets the path to use. */
int cfg_path(cfg_parser_t *p, yaml_node_t *n, const char *path, char *out, size_t outlen)
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
