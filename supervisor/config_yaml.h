/*
 * The YAML walker of the configuration reader: a libyaml document visited
 * with a key path ("hosts[0].routes[1].path"), so that every error names
 * its node with FILE:LINE:COL; typed reads of scalars (numbers, sizes,
 * durations, booleans, strings), mappings with known keys, lists, a set of
 * keys seen, and the way back from a RouteSet field path to its node. It
 * knows no key of the schema: supervisor/config.c does.
 *
 * The config reader's own interface (prefix cfg_), not the server's:
 * included by supervisor/config*.c, and by ingressd/kubeconfig.c for a
 * kubeconfig's messages. Callers: the supervisor, ingressd. What is
 * built here belongs to the Sws__Config being built and is freed with it.
 */
#ifndef SWS_SUPERVISOR_CONFIG_YAML_H
#define SWS_SUPERVISOR_CONFIG_YAML_H

#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "core/map.h"
#include "proto/scalws.pb-c.h"

#define CFG_MAX_FIELDS 24

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
 * report the second one with the place of the first. Keys are borrowed.
 * A key is seen per kind (a route's match: a prefix and an exact route
 * may share a path), one map per kind. */
#define CFG_SET_KINDS 2

typedef struct cfg_set {
    sws_map_t kind[CFG_SET_KINDS];
} cfg_set_t;

typedef enum cfg_unit { CFG_COUNT, CFG_SIZE, CFG_DURATION } cfg_unit_t;

/* "file:line:col: key.path: message" into p->err; returns -1. */
int cfg_fail_at(cfg_parser_t *p, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* At a node's start. */
#define cfg_fail(p, node, ...) cfg_fail_at((p), (node)->start_mark, __VA_ARGS__)
#define cfg_oom(p, node) cfg_fail((p), (node), "out of memory")

/* The key path: push a key, an index or formatted text; each returns the
 * mark cfg_pop() goes back to. */
size_t cfg_push_fmt(cfg_parser_t *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

size_t cfg_push(cfg_parser_t *p, const char *key);

size_t cfg_push_index(cfg_parser_t *p, size_t i);

void cfg_pop(cfg_parser_t *p, size_t mark);

yaml_node_t *cfg_node(cfg_parser_t *p, int index);

const char *cfg_text(const yaml_node_t *n);

int cfg_is_null(const yaml_node_t *n);

const char *cfg_kind(const yaml_node_t *n);

/* The scalar's text, shortened for a message. */
const char *cfg_quote(const yaml_node_t *n, char *buf, size_t len);

int cfg_bool_text(const char *s, int *out);

/* The one rule for every path in the file: a relative path is relative to
 * the configuration file's directory, never to the working directory (under
 * systemd that is /). out gets the path to use. */
int cfg_path(cfg_parser_t *p, yaml_node_t *n, const char *path, char *out, size_t outlen);

/* Count bytes the result is about to take; -1 (reported at `at`) past the
 * limit, see CFG_MEMORY_PER_TABLE_BYTE. */
int cfg_charge(cfg_parser_t *p, const yaml_node_t *at, size_t bytes);

/* A scalar as a C string: one without NUL bytes inside. */
int cfg_want_string(cfg_parser_t *p, const yaml_node_t *n);

/* Replace *dst (the generated empty string or an earlier malloc'ed value)
 * with a malloc'ed copy of s. */
int cfg_set_str(cfg_parser_t *p, const yaml_node_t *at, char **dst, const char *s);

/* A message of desc's type, malloc'ed and initialised with its generated
 * init (what free_unpacked expects); NULL after reporting at. */
void *cfg_new(cfg_parser_t *p, const yaml_node_t *at,
              const ProtobufCMessageDescriptor *desc);

yaml_node_t *cfg_field(const cfg_fields_t *f, const char *name);

/* Check that node is a mapping (or absent: NULL, or empty) whose keys are all in names, each
 * once, and collect the values. */
int cfg_map(cfg_parser_t *p, yaml_node_t *node, const char *const *names, cfg_fields_t *f);

/* The items of a list; a null value is an empty list, a scalar or a mapping
 * an error. */
int cfg_list(cfg_parser_t *p, yaml_node_t *node, yaml_node_item_t **items, size_t *n);

void cfg_fmt_size(uint64_t v, char *buf, size_t len);

int cfg_number(cfg_parser_t *p, const yaml_node_t *n, cfg_unit_t unit, uint64_t min,
               uint64_t max, uint64_t *out);

/* Optional numeric field key of f into *out (untouched when absent). */
int cfg_u64(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
            uint64_t min, uint64_t max, uint64_t *out);

int cfg_u32(cfg_parser_t *p, const cfg_fields_t *f, const char *key, cfg_unit_t unit,
            uint64_t min, uint64_t max, uint32_t *out);

int cfg_bool(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
             protobuf_c_boolean *out);

/* Optional string field: a scalar without NUL bytes; a null value is "". */
int cfg_string(cfg_parser_t *p, const cfg_fields_t *f, const char *key, char **out);

/* A repeated message field from a YAML list: each item gets a message of
 * desc's type, malloc'ed, initialised and appended to *arr before fill runs
 * (so that a failure half-way still frees it). seen spans the list: the
 * host names of all hosts, the routes of one host. Absent (NULL): none. */
typedef int (*cfg_fill_fn)(cfg_parser_t *p, yaml_node_t *item, void *msg, cfg_set_t *seen);

int cfg_repeated(cfg_parser_t *p, yaml_node_t *node, const ProtobufCMessageDescriptor *desc,
                 size_t *count, void ***arr, cfg_fill_fn fill);

/* Add (key, kind < CFG_SET_KINDS); NULL when new, the node of the earlier
 * entry when already there. *oom is set when the set could not grow. */
const yaml_node_t *cfg_set_add(cfg_set_t *s, const char *key, unsigned kind,
                               const yaml_node_t *node, int *oom);

void cfg_set_free(cfg_set_t *s);

/* The node a checker's field path names ("hosts[0].routes[2].path"), or
 * the deepest one on its way: the place a refusal is reported. The
 * settings come from server:, whose keys are not theirs: the file's top. */
yaml_node_t *cfg_node_at(cfg_parser_t *p, yaml_node_t *root, const char *path);

/* libyaml's own errors (syntax, bad UTF-8, an undefined alias). */
int cfg_yaml_error(cfg_parser_t *p, const yaml_parser_t *parser, const char *text,
                   size_t len);

#endif
