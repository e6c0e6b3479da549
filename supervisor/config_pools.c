/*
 * The pools and the proxy action of the configuration file
 * (supervisor/config_pools.h). docs/configuration.md, "pools", lists the
 * same keys and defaults.
 */
#include "supervisor/config_pools.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "shm/routeset_check.h"
#include "shm/table.h"
#include "supervisor/config_tls.h"
#include "supervisor/resolve.h"

#define CFG_BALANCE_HASH_NEEDS_KEY \
    "balance hash needs a hash_key: client_ip, header:NAME or cookie:NAME"

/* Optional field key, one of words (NULL-terminated): *out gets its index,
 * untouched when absent. */
static int cfg_word(cfg_parser_t *p, const cfg_fields_t *f, const char *key,
                    const char *const *words, int *out)
{
    yaml_node_t *n = cfg_field(f, key);
    char expected[128] = "", got[64];
    size_t mark, used = 0, count = 0;

    if (n == NULL)
        return 0;
    while (words[count] != NULL)
        count++;
    for (size_t i = 0; i < count; i++) {
        if (n->type == YAML_SCALAR_NODE && strcmp(cfg_text(n), words[i]) == 0) {
            *out = (int)i;
            return 0;
        }
        int len = snprintf(expected + used, sizeof(expected) - used, "%s%s",
                           i == 0 ? "" : i + 1 == count ? " or " : ", ", words[i]);
        used += len > 0 && (size_t)len < sizeof(expected) - used ? (size_t)len : 0;
    }
    mark = cfg_push(p, key);
    cfg_fail(p, n, "expected %s, got %s", expected, cfg_quote(n, got, sizeof(got)));
    cfg_pop(p, mark);
    return -1;
}

/* The Timeouts and Health messages are always there, every field set;
 * node is the key's value (NULL: absent), at the pool. */
static int cfg_pool_timeouts(cfg_parser_t *p, yaml_node_t *at, yaml_node_t *node, Sws__Pool *pool)
{
    static const char *const keys[] = { "connect", "send", "read", "idle", NULL };
    Sws__Pool__Timeouts *to;
    cfg_fields_t f;

    if ((to = pool->timeouts = cfg_new(p, at, &sws__pool__timeouts__descriptor)) == NULL)
        return -1;
    to->connect_ms = SWS_DEFAULT_POOL_CONNECT_TIMEOUT_MS;
    to->send_ms = SWS_DEFAULT_POOL_SEND_TIMEOUT_MS;
    to->read_ms = SWS_DEFAULT_POOL_READ_TIMEOUT_MS;
    to->idle_ms = SWS_DEFAULT_POOL_IDLE_TIMEOUT_MS;
    if (cfg_map(p, node, keys, &f) < 0 ||
        cfg_u32(p, &f, "connect", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &to->connect_ms) < 0 ||
        cfg_u32(p, &f, "send", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &to->send_ms) < 0 ||
        cfg_u32(p, &f, "read", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &to->read_ms) < 0 ||
        cfg_u32(p, &f, "idle", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &to->idle_ms) < 0)
        return -1;
    return 0;
}

static int cfg_pool_health(cfg_parser_t *p, yaml_node_t *at, yaml_node_t *node, Sws__Pool *pool)
{
    static const char *const keys[] = { "max_fails", "fail_window", "cooldown", NULL };
    Sws__Pool__Health *he;
    cfg_fields_t f;

    if ((he = pool->health = cfg_new(p, at, &sws__pool__health__descriptor)) == NULL)
        return -1;
    he->max_fails = SWS_DEFAULT_POOL_MAX_FAILS;
    he->fail_window_ms = SWS_DEFAULT_POOL_FAIL_WINDOW_MS;
    he->cooldown_ms = SWS_DEFAULT_POOL_COOLDOWN_MS;
    if (cfg_map(p, node, keys, &f) < 0 ||
        cfg_u32(p, &f, "max_fails", CFG_COUNT, 0, SWS_ROUTESET_MAX_FAILS_MAX, &he->max_fails) < 0 ||
        cfg_u32(p, &f, "fail_window", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &he->fail_window_ms) < 0 ||
        cfg_u32(p, &f, "cooldown", CFG_DURATION, 1, SWS_ROUTESET_POOL_TIMEOUT_MAX_MS,
                &he->cooldown_ms) < 0)
        return -1;
    return 0;
}

/* protocol: http (the default), https, h2 or grpc; the words are in the
 * order of the enum. h2 and grpc are cleartext (prior knowledge) unless
 * they have a tls key (ADR 0034). */
static int cfg_pool_protocol(cfg_parser_t *p, const cfg_fields_t *f, Sws__Pool *pool)
{
    static const char *const protocols[] = { "http", "https", "h2", "grpc", NULL };
    int protocol = SWS__POOL__PROTOCOL__HTTP;

    if (cfg_word(p, f, "protocol", protocols, &protocol) < 0)
        return -1;
    pool->protocol = (Sws__Pool__Protocol)protocol;
    return 0;
}

/* tls: {verify, ca, sni}, for protocol https, h2 or grpc. For https the
 * message is always present with every default filled (verify on, the
 * system's CA file); for h2 and grpc only when the key is (`tls: {}`
 * asks for the defaults): without it they are h2c. node is the key's
 * value (NULL: absent), at the pool. */
static int cfg_pool_tls(cfg_parser_t *p, yaml_node_t *at, yaml_node_t *node, Sws__Pool *pool)
{
    static const char *const keys[] = { "verify", "ca", "sni", NULL };
    protobuf_c_boolean verify = 1;
    const char *problem;
    Sws__Pool__Tls *tls;
    yaml_node_t *n;
    cfg_fields_t f;

    if ((problem = sws_routeset_pool_tls_problem(pool->protocol)) != NULL)
        return node == NULL ? 0 : cfg_fail(p, node, "%s", problem);
    if (node == NULL && pool->protocol != SWS__POOL__PROTOCOL__HTTPS)
        return 0;
    if ((tls = pool->tls = cfg_new(p, at, &sws__pool__tls__descriptor)) == NULL ||
        cfg_map(p, node, keys, &f) < 0 || cfg_bool(p, &f, "verify", &verify) < 0 ||
        cfg_string(p, &f, "ca", &tls->ca) < 0 || cfg_string(p, &f, "sni", &tls->sni) < 0)
        return -1;
    tls->skip_verify = !verify;
    /* Without verification the CA is never used: not read, so that
     * turning verify off for a test needs no other edit. */
    if (!verify)
        return 0;
    n = cfg_field(&f, "ca");
    if (tls->ca[0] == '\0' && cfg_set_str(p, at, &tls->ca, SWS_DEFAULT_POOL_TLS_CA) < 0)
        return -1;
    /* The supervisor reads it at start and on every reload: workers get
     * the bytes in the table and never open it. Whether they hold
     * certificates is the RouteSet checker's, at pools[i].tls.ca. */
    return cfg_pem_file(p, n != NULL ? n : node != NULL ? node : at, "ca", &tls->ca,
                        &tls->ca_pem, "the CA file", SWS_ROUTESET_CA_PEM_MAX);
}

/* A name is resolved when the file is read as a start reads it (start,
 * reload, -t: check_system), into Member.resolved (ADR 0024); parsed from
 * text (tests, the fuzz target) it stays a name and nothing is looked up. */
static int cfg_member_address(cfg_parser_t *p, yaml_node_t *n, Sws__Member *m)
{
    sws_routeset_addr_t a;
    sws_resolved_t r;
    char err[320];
    const char *why;

    if (cfg_want_string(p, n) < 0)
        return -1;
    why = sws_routeset_address_problem(cfg_text(n), 1, &a);
    if (why != NULL)
        return cfg_fail(p, n, "\"%s\": %s", cfg_text(n), why);
    if (cfg_set_str(p, n, &m->address, cfg_text(n)) < 0)
        return -1;
    if (a.family != AF_UNSPEC || !p->check_system)
        return 0;
    if (sws_resolve_member(&a, &r, err, sizeof(err)) < 0)
        return cfg_fail(p, n, "%s", err);
    if (cfg_charge(p, n, sws_resolve_bytes(&r)) < 0)
        return -1;
    if (sws_resolve_fill(m, &r) < 0)
        return cfg_oom(p, n);
    return 0;
}

/* "HOST:PORT", or {address: HOST:PORT, weight: N, state: up}. The same
 * address twice in a pool is the checker's to refuse: it compares the
 * canonical forms ([::1] and [0::1] are one member). */
static int cfg_member(cfg_parser_t *p, yaml_node_t *node, void *msg, cfg_set_t *seen)
{
    static const char *const keys[] = { "address", "weight", "state", NULL };
    static const char *const states[] = { "up", "draining", "down", NULL };
    Sws__Member *m = msg;
    yaml_node_t *address;
    cfg_fields_t f;
    int state = SWS__MEMBER__STATE__UP;
    size_t mark;

    (void)seen;
    m->weight = SWS_DEFAULT_POOL_WEIGHT;
    if (node->type == YAML_SCALAR_NODE && !cfg_is_null(node))
        return cfg_member_address(p, node, m);
    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    address = cfg_field(&f, "address");
    if (address == NULL)
        return cfg_fail(p, node, "a member needs an address (HOST:PORT)");
    mark = cfg_push(p, "address");
    if (cfg_member_address(p, address, m) < 0)
        return -1;
    cfg_pop(p, mark);
    if (cfg_u32(p, &f, "weight", CFG_COUNT, 1, SWS_ROUTESET_WEIGHT_MAX, &m->weight) < 0 ||
        cfg_word(p, &f, "state", states, &state) < 0)
        return -1;
    /* The words are in the order of the enum. */
    m->state = (Sws__Member__State)state;
    return 0;
}

static int cfg_pool_name(cfg_parser_t *p, yaml_node_t *pool_node, const cfg_fields_t *f,
                         Sws__Pool *pool, cfg_set_t *seen)
{
    yaml_node_t *n = cfg_field(f, "name");
    const yaml_node_t *dup;
    const char *why;
    size_t mark;
    int oom;

    if (n == NULL)
        return cfg_fail(p, pool_node, "a pool needs a name");
    mark = cfg_push(p, "name");
    if (cfg_want_string(p, n) < 0)
        return -1;
    why = sws_routeset_pool_name_problem(cfg_text(n));
    if (why != NULL)
        return cfg_fail(p, n, "\"%s\": %s", cfg_text(n), why);
    if (cfg_set_str(p, n, &pool->name, cfg_text(n)) < 0)
        return -1;
    dup = cfg_set_add(seen, pool->name, 0, n, &oom);
    if (oom)
        return cfg_oom(p, n);
    if (dup != NULL)
        return cfg_fail(p, n, "pool \"%s\" is already defined (line %zu, column %zu)",
                        pool->name, dup->start_mark.line + 1,
                        dup->start_mark.column + 1);
    cfg_pop(p, mark);
    return 0;
}

/* balance and hash_key agree: a key with hash, and only with hash. */
static int cfg_pool_balance(cfg_parser_t *p, const cfg_fields_t *f, Sws__Pool *pool)
{
    static const char *const balances[] = { "round_robin", "least_conn", "hash", NULL };
    yaml_node_t *key = cfg_field(f, "hash_key");
    int balance = SWS__POOL__BALANCE__ROUND_ROBIN;
    const char *why, *name;
    unsigned kind;
    size_t mark;

    if (cfg_word(p, f, "balance", balances, &balance) < 0 ||
        cfg_string(p, f, "hash_key", &pool->hash_key) < 0)
        return -1;
    pool->balance = (Sws__Pool__Balance)balance;
    if (balance == SWS__POOL__BALANCE__HASH && key == NULL) {
        cfg_push(p, "balance");
        return cfg_fail(p, cfg_field(f, "balance"), CFG_BALANCE_HASH_NEEDS_KEY);
    }
    if (key == NULL)
        return 0;
    mark = cfg_push(p, "hash_key");
    if (balance != SWS__POOL__BALANCE__HASH)
        return cfg_fail(p, key, "a hash_key needs balance: hash");
    why = sws_routeset_hash_key_problem(pool->hash_key, &kind, &name);
    if (why != NULL)
        return cfg_fail(p, key, "\"%s\": %s", pool->hash_key, why);
    cfg_pop(p, mark);
    return 0;
}

static int cfg_pool(cfg_parser_t *p, yaml_node_t *node, void *msg, cfg_set_t *names)
{
    static const char *const keys[] = { "name", "members", "balance", "hash_key", "keepalive",
                                        "retries", "max_conns", "timeouts", "health",
                                        "protocol", "tls", NULL };
    Sws__Pool *pool = msg;
    cfg_fields_t f;
    size_t mark;

    pool->keepalive = SWS_DEFAULT_POOL_KEEPALIVE;
    pool->retries = SWS_DEFAULT_POOL_RETRIES;
    if (cfg_map(p, node, keys, &f) < 0 || cfg_pool_name(p, node, &f, pool, names) < 0)
        return -1;
    if (cfg_pool_balance(p, &f, pool) < 0 ||
        cfg_u32(p, &f, "keepalive", CFG_COUNT, 0, SWS_ROUTESET_KEEPALIVE_MAX,
                &pool->keepalive) < 0 ||
        cfg_u32(p, &f, "retries", CFG_COUNT, 0, SWS_ROUTESET_RETRIES_MAX, &pool->retries) < 0 ||
        cfg_u32(p, &f, "max_conns", CFG_COUNT, 0, SWS_ROUTESET_MAX_CONNS_MAX,
                &pool->max_conns) < 0 ||
        cfg_pool_protocol(p, &f, pool) < 0)
        return -1;
    mark = cfg_push(p, "tls");
    if (cfg_pool_tls(p, node, cfg_field(&f, "tls"), pool) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "timeouts");
    if (cfg_pool_timeouts(p, node, cfg_field(&f, "timeouts"), pool) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "health");
    if (cfg_pool_health(p, node, cfg_field(&f, "health"), pool) < 0)
        return -1;
    cfg_pop(p, mark);
    mark = cfg_push(p, "members");
    if (cfg_repeated(p, cfg_field(&f, "members"), &sws__member__descriptor, &pool->n_members,
                     (void ***)&pool->members, cfg_member) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}

int cfg_pools(cfg_parser_t *p, yaml_node_t *node, Sws__RouteSet *rs)
{
    return cfg_repeated(p, node, &sws__pool__descriptor, &rs->n_pools, (void ***)&rs->pools,
                        cfg_pool);
}

/* via: true (the default pseudonym), false (none), or a pseudonym. */
static int cfg_proxy_via(cfg_parser_t *p, const cfg_fields_t *f, Sws__Proxy *px)
{
    yaml_node_t *n = cfg_field(f, "via");
    size_t mark;
    int on, rc;

    if (n == NULL)
        return 0;
    mark = cfg_push(p, "via");
    rc = cfg_want_string(p, n);
    if (rc == 0 && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        cfg_bool_text(cfg_text(n), &on) == 0)
        rc = cfg_set_str(p, n, &px->via, on ? SWS_VIA_PSEUDONYM_DEFAULT : "");
    else if (rc == 0 && (cfg_is_null(n) || !sws_routeset_via_ok(cfg_text(n))))
        rc = cfg_fail(p, n, "true, false or a pseudonym (a token of at most %u bytes)",
                      SWS_VIA_PSEUDONYM_MAX);
    else if (rc == 0)
        rc = cfg_set_str(p, n, &px->via, cfg_text(n));
    cfg_pop(p, mark);
    return rc;
}

int cfg_proxy(cfg_parser_t *p, yaml_node_t *node, void *msg)
{
    static const char *const keys[] = { "pool", "host_header", "via", NULL };
    Sws__Proxy *px = msg;
    yaml_node_t *host;
    const char *why;
    cfg_fields_t f;

    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    if (cfg_field(&f, "pool") == NULL)
        return cfg_fail(p, node, "a proxy needs a pool (the name of one of pools:)");
    if (cfg_string(p, &f, "pool", &px->pool) < 0 ||
        cfg_string(p, &f, "host_header", &px->host_header) < 0 || cfg_proxy_via(p, &f, px) < 0)
        return -1;
    host = cfg_field(&f, "host_header");
    why = px->host_header[0] == '\0' ? NULL
                                      : sws_routeset_address_problem(px->host_header, 0, NULL);
    if (why != NULL) {
        cfg_push(p, "host_header");
        return cfg_fail(p, host, "\"%s\": %s", px->host_header, why);
    }
    return 0;
}
