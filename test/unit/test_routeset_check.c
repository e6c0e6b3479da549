/* shm/routeset_check.c: the one RouteSet check, on RouteSets built in code
 * (no YAML), as ingressd or the admin API would build them. Each case
 * breaks one rule of a valid RouteSet and names the refusal it must get:
 * the field path and the whole message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>

#include "shm/routeset_check.h"
#include "shm/table.h"
#include "support/routeset_build.h"
#include "support/tls_pem.h"

/* hosts[0] "a.test": routes[0] respond "/", [1] static "/s/", [2] redirect
 * "/r/", [3] proxy "/p/" to pool "p" with a Host; hosts[1] "b.test".
 * pools[0] "p": hash on a header, members "127.0.0.1:9001", "[::1]:9002",
 * "api.internal:80"; pools[1] "q-2.v1": round robin, its timeouts and
 * health given, member "127.0.0.1:9001". Valid. */
static Sws__RouteSet *fixture(void)
{
    Sws__RouteSet *rs = rs_new();
    Sws__Host *h = rs_host(rs, "a.test");
    Sws__Route *r;
    Sws__Pool *pool;

    rs->settings->log_level = strdup("info");
    respond_header(host_respond(h, SWS__ROUTE__MATCH__PREFIX, "/", "hi"), "X-A", "1");
    host_static(h, SWS__ROUTE__MATCH__PREFIX, "/s/", "/srv/www");
    host_redirect(h, SWS__ROUTE__MATCH__PREFIX, "/r/", 308, "https://a.test/");
    r = host_route(h, SWS__ROUTE__MATCH__PREFIX, "/p/");
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
    r->proxy->pool = strdup("p");
    r->proxy->host_header = strdup("api.internal:8080");
    r->proxy->via = strdup("scalws");
    pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("p");
    pool->balance = SWS__POOL__BALANCE__HASH;
    pool->hash_key = strdup("header:X-User");
    pool_member(pool, "127.0.0.1:9001", 1);
    pool_member(pool, "[::1]:9002", 1);
    pool_member(pool, "api.internal:80", 1);
    PUSH(rs->pools, rs->n_pools, pool);
    pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("q-2.v1");
    pool->timeouts = NEW(Sws__Pool__Timeouts, SWS__POOL__TIMEOUTS__INIT);
    pool->timeouts->connect_ms = pool->timeouts->send_ms = pool->timeouts->read_ms = 1;
    pool->timeouts->idle_ms = 24u * 3600 * 1000;
    pool->health = NEW(Sws__Pool__Health, SWS__POOL__HEALTH__INIT); /* off */
    pool_member(pool, "127.0.0.1:9001", 1);
    PUSH(rs->pools, rs->n_pools, pool);
    host_respond(rs_host(rs, "b.test"), SWS__ROUTE__MATCH__EXACT, "/", "b");
    return rs;
}

static Sws__Route *route(Sws__RouteSet *rs, size_t i)
{
    return rs->hosts[0]->routes[i];
}

static void set(char **field, const char *value)
{
    free(*field);
    *field = strdup(value);
}

/* ---- one broken rule per case ---- */

static void framing_header(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->respond->headers[0]->name, "Content-Length");
}
static void bad_header_name(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->respond->headers[0]->name, "Bad Name");
}
static void bad_header_value(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->respond->headers[0]->value, "a\r\nSet-Cookie: x");
}
static void interim_status(Sws__RouteSet *rs)
{
    route(rs, 0)->respond->status = 100;
}
static void body_on_204(Sws__RouteSet *rs)
{
    route(rs, 0)->respond->status = 204;
}
static void path_not_normal(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->path, "/a/../b");
}
static void path_encoded_slash(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->path, "/a%2fb");
}
static void path_relative(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->path, "x");
}
static void path_query(Sws__RouteSet *rs)
{
    set(&route(rs, 0)->path, "/a?b");
}
static void match_regex(Sws__RouteSet *rs)
{
    route(rs, 0)->match = SWS__ROUTE__MATCH__REGEX;
}
static void match_unknown(Sws__RouteSet *rs)
{
    route(rs, 0)->match = (Sws__Route__Match)7;
}
static void no_action(Sws__RouteSet *rs)
{
    sws__respond__free_unpacked(route(rs, 0)->respond, NULL);
    route(rs, 0)->respond = NULL;
    route(rs, 0)->action_case = SWS__ROUTE__ACTION__NOT_SET;
}
static void root_relative(Sws__RouteSet *rs)
{
    set(&route(rs, 1)->static_->root, "www");
}
static void root_empty(Sws__RouteSet *rs)
{
    set(&route(rs, 1)->static_->root, "");
}
static void index_path(Sws__RouteSet *rs)
{
    set(&route(rs, 1)->static_->index, "a/b.html");
}
static void redirect_304(Sws__RouteSet *rs)
{
    route(rs, 2)->redirect->status = 304;
}
static void location_empty(Sws__RouteSet *rs)
{
    set(&route(rs, 2)->redirect->location, "");
}
static void location_space(Sws__RouteSet *rs)
{
    set(&route(rs, 2)->redirect->location, "/a b");
}
static void unknown_pool(Sws__RouteSet *rs)
{
    set(&route(rs, 3)->proxy->pool, "q");
}
static void pool_twice(Sws__RouteSet *rs)
{
    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("p");
    PUSH(rs->pools, rs->n_pools, pool);
}
static void pool_name(Sws__RouteSet *rs)
{
    set(&rs->pools[1]->name, "a/b");
}
static void balance_unknown(Sws__RouteSet *rs)
{
    rs->pools[0]->balance = (Sws__Pool__Balance)7;
}
static void hash_without_key(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->hash_key, "");
}
static void hash_key_unknown(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->hash_key, "ip");
}
static void hash_key_bad_header(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->hash_key, "header:X User");
}
static void hash_key_without_hash(Sws__RouteSet *rs)
{
    rs->pools[0]->balance = SWS__POOL__BALANCE__LEAST_CONN;
}
static void keepalive_high(Sws__RouteSet *rs)
{
    rs->pools[0]->keepalive = 10001;
}
static void retries_high(Sws__RouteSet *rs)
{
    rs->pools[1]->retries = 101;
}
static void max_conns_high(Sws__RouteSet *rs)
{
    rs->pools[1]->max_conns = 1000001;
}
static void timeout_zero(Sws__RouteSet *rs)
{
    rs->pools[1]->timeouts->read_ms = 0;
}
static void timeout_long(Sws__RouteSet *rs)
{
    rs->pools[1]->timeouts->idle_ms = 24u * 3600 * 1000 + 1;
}
static void health_window_zero(Sws__RouteSet *rs)
{
    rs->pools[1]->health->max_fails = 3;
    rs->pools[1]->health->fail_window_ms = 0;
    rs->pools[1]->health->cooldown_ms = 1000;
}
static void member_no_port(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[0]->address, "127.0.0.1");
}
static void member_port_zero(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[0]->address, "127.0.0.1:0");
}
static void member_port_high(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[0]->address, "127.0.0.1:65536");
}
static void member_v6_no_brackets(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[1]->address, "::1:9002");
}
static void member_bad_v6(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[1]->address, "[::g]:9002");
}
static void member_bad_v4(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[0]->address, "10.0.0:80");
}
static void member_bad_name(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[2]->address, "api..internal:80");
}
static Sws__Pool__Tls *https(Sws__RouteSet *rs, const char *ca_pem)
{
    Sws__Pool__Tls *tls = NEW(Sws__Pool__Tls, SWS__POOL__TLS__INIT);
    tls->ca = strdup(""); /* set() frees what it replaces */
    tls->sni = strdup("");
    rs->pools[0]->protocol = SWS__POOL__PROTOCOL__HTTPS;
    rs->pools[0]->tls = tls;
    if (ca_pem != NULL) {
        tls->ca_pem.data = (uint8_t *)strdup(ca_pem);
        tls->ca_pem.len = strlen(ca_pem);
    }
    return tls;
}
static void https_without_ca(Sws__RouteSet *rs)
{
    rs->pools[0]->protocol = SWS__POOL__PROTOCOL__HTTPS;
}
static void https_ca_not_pem(Sws__RouteSet *rs)
{
    set(&https(rs, "no certificate here\n")->ca, "/etc/x.pem");
}
static void https_ca_broken(Sws__RouteSet *rs)
{
    https(rs, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
}
static void protocol_unknown(Sws__RouteSet *rs)
{
    rs->pools[0]->protocol = (Sws__Pool__Protocol)5;
}
static void h2_tls_without_ca(Sws__RouteSet *rs)
{
    https(rs, NULL);
    rs->pools[0]->protocol = SWS__POOL__PROTOCOL__H2;
}
static void grpc_tls_sni_ip(Sws__RouteSet *rs)
{
    set(&https(rs, NULL)->sni, "10.0.0.1");
    rs->pools[0]->tls->skip_verify = 1;
    rs->pools[0]->protocol = SWS__POOL__PROTOCOL__GRPC;
}
static void tls_without_https(Sws__RouteSet *rs)
{
    https(rs, NULL)->skip_verify = 1;
    rs->pools[0]->protocol = SWS__POOL__PROTOCOL__HTTP;
}
static void sni_wildcard(Sws__RouteSet *rs)
{
    Sws__Pool__Tls *tls = https(rs, NULL);
    tls->skip_verify = 1;
    set(&tls->sni, "*.example");
}
static void sni_ip(Sws__RouteSet *rs)
{
    Sws__Pool__Tls *tls = https(rs, NULL);
    tls->skip_verify = 1;
    set(&tls->sni, "10.0.0.1");
}
static void member_wildcard(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[2]->address, "*.internal:80");
}
static void member_no_host(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[2]->address, ":80");
}
static void member_weight(Sws__RouteSet *rs)
{
    rs->pools[0]->members[2]->weight = 1001;
}
static void member_state(Sws__RouteSet *rs)
{
    rs->pools[0]->members[2]->state = (Sws__Member__State)9;
}
/* The same address written another way is the same member. */
static void member_twice(Sws__RouteSet *rs)
{
    set(&rs->pools[0]->members[2]->address, "[0:0::1]:9002");
}
static void member_id_twice(Sws__RouteSet *rs)
{
    rs->pools[0]->members[1]->id = 42;
    rs->pools[1]->members[0]->id = 42;
}
static void host_header_space(Sws__RouteSet *rs)
{
    set(&route(rs, 3)->proxy->host_header, "a b");
}
static void host_header_crlf(Sws__RouteSet *rs)
{
    set(&route(rs, 3)->proxy->host_header, "a\r\nX-Evil: 1");
}
static void via_crlf(Sws__RouteSet *rs)
{
    set(&route(rs, 3)->proxy->via, "x\r\nX-Evil: 1");
}
static void name_star_inside(Sws__RouteSet *rs)
{
    set(&rs->hosts[0]->names[0], "a.*.test");
}
static void name_port(Sws__RouteSet *rs)
{
    set(&rs->hosts[1]->names[0], "b.test:80");
}
static void name_twice(Sws__RouteSet *rs)
{
    set(&rs->hosts[1]->names[0], "A.TEST.");
}
static void catchall_twice(Sws__RouteSet *rs)
{
    set(&rs->hosts[0]->names[0], "*");
    set(&rs->hosts[1]->names[0], "*");
}
static void host_without_names(Sws__RouteSet *rs)
{
    free(rs->hosts[1]->names[0]);
    rs->hosts[1]->n_names = 0;
}
static void route_twice(Sws__RouteSet *rs)
{
    set(&route(rs, 2)->path, "/s/");
}
static void log_level(Sws__RouteSet *rs)
{
    set(&rs->settings->log_level, "loud");
}
static void server_name(Sws__RouteSet *rs)
{
    set(&rs->settings->server_name, "x\r\nX-Evil: 1");
}
static void server_tokens(Sws__RouteSet *rs)
{
    rs->settings->server_tokens = (Sws__Settings__ServerTokens)7;
}

/* pools[0].members[2] is the name "api.internal:80". */
static void resolve_to(Sws__RouteSet *rs, size_t m, const char *a, const char *b)
{
    Sws__Member *mb = rs->pools[0]->members[m];
    PUSH(mb->resolved, mb->n_resolved, strdup(a));
    if (b != NULL)
        PUSH(mb->resolved, mb->n_resolved, strdup(b));
}
static void resolved_for_an_ip(Sws__RouteSet *rs) { resolve_to(rs, 0, "127.0.0.1:9001", NULL); }
static void resolved_to_a_name(Sws__RouteSet *rs) { resolve_to(rs, 2, "10.0.0.1:80", "b.internal:80"); }
static void resolved_other_port(Sws__RouteSet *rs) { resolve_to(rs, 2, "10.0.0.1:81", NULL); }
static void resolved_twice(Sws__RouteSet *rs) { resolve_to(rs, 2, "[::1]:80", "[0::1]:80"); }

static void resolved_too_many(Sws__RouteSet *rs)
{
    for (unsigned i = 0; i <= SWS_ROUTESET_RESOLVED_MAX; i++) {
        char a[32];
        snprintf(a, sizeof(a), "10.0.0.%u:80", i + 1);
        resolve_to(rs, 2, a, NULL);
    }
}

/* One member more than a worker has records for (shm.h), spread over a
 * second pool: the limit is on all pools together. */
static void too_many_members(Sws__RouteSet *rs)
{
    Sws__Pool *pool = NEW(Sws__Pool, SWS__POOL__INIT);
    pool->name = strdup("many");
    PUSH(rs->pools, rs->n_pools, pool);
    size_t have = 0;
    for (size_t p = 0; p < rs->n_pools; p++)
        have += rs->pools[p]->n_members;
    /* One allocation: pool_member()'s realloc per member is quadratic at this
     * count, minutes under ASan. */
    size_t n = SWS_ROUTESET_MEMBERS_MAX + 1 - have;
    pool->members = calloc(n, sizeof(*pool->members));
    assert_non_null(pool->members);
    for (size_t i = have; i <= SWS_ROUTESET_MEMBERS_MAX; i++) {
        Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
        m->address = malloc(32);
        assert_non_null(m->address);
        snprintf(m->address, 32, "10.%zu.%zu.%zu:80", i / 65536 % 256, i / 256 % 256, i % 256);
        m->weight = 1;
        pool->members[pool->n_members++] = m;
    }
}

static const struct refusal_case {
    const char *name;
    void (*breaks)(Sws__RouteSet *rs);
    const char *path, *msg;
} cases[] = {
    { "framing header", framing_header, "hosts[0].routes[0].respond.headers[0]",
      "\"Content-Length\": is set by the server (from the body and the connection state)" },
    { "header name", bad_header_name, "hosts[0].routes[0].respond.headers[0]",
      "\"Bad Name\": a header name may contain only letters, digits and !#$%&'*+-.^_`|~" },
    { "header value", bad_header_value, "hosts[0].routes[0].respond.headers[0]",
      "a header value must not contain CR, LF or other control characters" },
    { "1xx respond", interim_status, "hosts[0].routes[0].respond.status",
      "expected a number from 200 to 599, got 100" },
    { "204 with a body", body_on_204, "hosts[0].routes[0].respond.body",
      "a 204 response has no body" },
    { "path not normal", path_not_normal, "hosts[0].routes[0].path",
      "\"/a/../b\" is not in normal form (requests are matched in it): write \"/b\"" },
    { "encoded slash", path_encoded_slash, "hosts[0].routes[0].path",
      "\"/a%2fb\" is not in normal form (requests are matched in it): write \"/a%2Fb\"" },
    { "relative path", path_relative, "hosts[0].routes[0].path", "\"x\" must start with \"/\"" },
    { "query in path", path_query, "hosts[0].routes[0].path",
      "\"/a?b\" must not contain '?' or '#' (routes match the path without the query)" },
    { "regex", match_regex, "hosts[0].routes[0].match", "regex paths are not supported yet" },
    { "unknown match", match_unknown, "hosts[0].routes[0].match",
      "expected prefix or exact, got 7" },
    { "no action", no_action, "hosts[0].routes[0]",
      "a route needs one action: respond, static, redirect or proxy" },
    { "relative root", root_relative, "hosts[0].routes[1].static.root",
      "expected an absolute path, got \"www\"" },
    { "empty root", root_empty, "hosts[0].routes[1].static.root", "must name a directory" },
    { "index with '/'", index_path, "hosts[0].routes[1].static.index",
      "must be a file name (no '/')" },
    { "redirect 304", redirect_304, "hosts[0].routes[2].redirect.status",
      "expected 301, 302, 303, 307 or 308, got 304" },
    { "empty location", location_empty, "hosts[0].routes[2].redirect.location",
      "must not be empty" },
    { "space in location", location_space, "hosts[0].routes[2].redirect.location",
      "must not contain spaces or control characters (percent-encode them)" },
    { "unknown pool", unknown_pool, "hosts[0].routes[3].proxy.pool", "no pool is named \"q\"" },
    { "pool twice", pool_twice, "pools[2].name", "pool \"p\" appears twice (first at pools[0])" },
    { "pool name", pool_name, "pools[1].name",
      "\"a/b\": may contain only letters, digits, '-', '_' and '.'" },
    { "unknown balance", balance_unknown, "pools[0].balance",
      "expected round_robin, least_conn or hash, got 7" },
    { "hash without key", hash_without_key, "pools[0].hash_key",
      "balance hash needs a hash_key: client_ip, header:NAME or cookie:NAME" },
    { "unknown hash key", hash_key_unknown, "pools[0].hash_key",
      "\"ip\": expected client_ip, header:NAME or cookie:NAME" },
    { "hash key header", hash_key_bad_header, "pools[0].hash_key",
      "\"header:X User\": NAME must be a header or cookie name: letters, digits and "
      "!#$%&'*+-.^_`|~" },
    { "hash key without hash", hash_key_without_hash, "pools[0].hash_key",
      "a hash_key needs balance hash" },
    { "keepalive", keepalive_high, "pools[0].keepalive",
      "expected a number from 0 to 10000, got 10001" },
    { "retries", retries_high, "pools[1].retries", "expected a number from 0 to 100, got 101" },
    { "max_conns", max_conns_high, "pools[1].max_conns",
      "expected a number from 0 to 1000000, got 1000001" },
    { "zero timeout", timeout_zero, "pools[1].timeouts.read_ms",
      "expected 1 to 86400000 milliseconds, got 0" },
    { "long timeout", timeout_long, "pools[1].timeouts.idle_ms",
      "expected 1 to 86400000 milliseconds, got 86400001" },
    { "health window", health_window_zero, "pools[1].health.fail_window_ms",
      "expected 1 to 86400000 milliseconds, got 0" },
    { "https without a CA", https_without_ca, "pools[0].tls.ca",
      "verifying the members needs CA certificates" },
    { "CA file without PEM", https_ca_not_pem, "pools[0].tls.ca",
      "/etc/x.pem: holds no PEM certificate" },
    { "CA that does not parse", https_ca_broken, "pools[0].tls.ca",
      "a certificate in it does not parse (expected PEM certificates)" },
    { "unknown protocol", protocol_unknown, "pools[0].protocol",
      "expected http, https, h2 or grpc, got 5" },
    { "tls without https", tls_without_https, "pools[0].tls",
      "tls needs protocol: https, h2 or grpc" },
    /* h2 and grpc with tls are checked as https is. */
    { "h2 over TLS without a CA", h2_tls_without_ca, "pools[0].tls.ca",
      "verifying the members needs CA certificates" },
    { "grpc over TLS, sni an IP", grpc_tls_sni_ip, "pools[0].tls.sni",
      "\"10.0.0.1\": an IP address is never sent as SNI (leave sni out: the member's IP is "
      "verified)" },
    { "sni wildcard", sni_wildcard, "pools[0].tls.sni",
      "\"*.example\": a wildcard names no one host" },
    { "sni IP", sni_ip, "pools[0].tls.sni",
      "\"10.0.0.1\": an IP address is never sent as SNI (leave sni out: the member's IP is "
      "verified)" },
    { "member without port", member_no_port, "pools[0].members[0].address",
      "\"127.0.0.1\": the port is missing (expected HOST:PORT)" },
    { "member port 0", member_port_zero, "pools[0].members[0].address",
      "\"127.0.0.1:0\": the port must be a number from 1 to 65535" },
    { "member port 65536", member_port_high, "pools[0].members[0].address",
      "\"127.0.0.1:65536\": the port must be a number from 1 to 65535" },
    { "IPv6 without brackets", member_v6_no_brackets, "pools[0].members[1].address",
      "\"::1:9002\": an IPv6 address needs brackets, as in [::1]:8080" },
    { "bad IPv6", member_bad_v6, "pools[0].members[1].address",
      "\"[::g]:9002\": not an IPv6 address" },
    { "bad IPv4", member_bad_v4, "pools[0].members[0].address",
      "\"10.0.0:80\": not an IPv4 address" },
    { "bad name", member_bad_name, "pools[0].members[2].address",
      "\"api..internal:80\": has an empty label (two dots, or a dot at either end)" },
    { "wildcard member", member_wildcard, "pools[0].members[2].address",
      "\"*.internal:80\": must name one host, not a wildcard" },
    { "member without host", member_no_host, "pools[0].members[2].address",
      "\":80\": the host is missing (expected HOST:PORT)" },
    { "weight", member_weight, "pools[0].members[2].weight",
      "expected a number from 1 to 1000 (0: the default, 1), got 1001" },
    { "member state", member_state, "pools[0].members[2].state",
      "expected up, draining or down, got 9" },
    { "member twice", member_twice, "pools[0].members[2].address",
      "\"[0:0::1]:9002\" is already a member of this pool (members[1])" },
    { "member id twice", member_id_twice, "pools[1].members[0].id",
      "member id 42 is already used (pools[0].members[1])" },
    { "host_header with a space", host_header_space, "hosts[0].routes[3].proxy.host_header",
      "\"a b\": may contain only letters, digits, '-', '_' and '.'" },
    { "host_header with CRLF", host_header_crlf, "hosts[0].routes[3].proxy.host_header",
      "\"a\r\nX-Evil: 1\": may contain only letters, digits, '-', '_' and '.'" },
    { "via not a token", via_crlf, "hosts[0].routes[3].proxy.via",
      "\"x\r\nX-Evil: 1\": a pseudonym is a token of at most 64 bytes" },
    { "'*' inside", name_star_inside, "hosts[0].names[0]",
      "\"a.*.test\": a wildcard must be \"*.\" followed by a name" },
    { "port in name", name_port, "hosts[1].names[0]",
      "\"b.test:80\": a host name has no port (ports are ignored when matching)" },
    { "name twice", name_twice, "hosts[1].names[0]",
      "host name \"A.TEST.\" is already used (hosts[0].names[0])" },
    { "catch-all twice", catchall_twice, "hosts[1].names[0]",
      "host name \"*\" is already used (hosts[0].names[0])" },
    { "host without names", host_without_names, "hosts[1]",
      "a host needs names: [...] (or name: ...)" },
    { "route twice", route_twice, "hosts[0].routes[2].path",
      "this host already has a prefix route for \"/s/\" (routes[1])" },
    { "log level", log_level, "settings.log_level",
      "expected debug, info, notice, warn or error, got \"loud\"" },
    { "server name", server_name, "settings.server_name",
      "must not contain control characters (CR, LF, ...)" },
    { "server tokens", server_tokens, "settings.server_tokens",
      "expected off, on or build, got 7" },
    { "too many members", too_many_members, "pools", "131073 members in all, at most 131072" },
    { "resolved for an IP", resolved_for_an_ip, "pools[0].members[0].resolved",
      "\"127.0.0.1:9001\" is not a name: only a name has resolved addresses" },
    { "resolved to a name", resolved_to_a_name, "pools[0].members[2].resolved[1]",
      "\"b.internal:80\": expected an IP address, got a name" },
    { "resolved on another port", resolved_other_port, "pools[0].members[2].resolved[0]",
      "\"10.0.0.1:81\": the port differs from the name's" },
    { "resolved twice", resolved_twice, "pools[0].members[2].resolved[1]",
      "\"[0::1]:80\": listed twice" },
    { "resolved to too many", resolved_too_many, "pools[0].members[2].resolved",
      "33 addresses, at most 32" },
};

static void test_fixture_is_valid(void **state)
{
    (void)state;
    Sws__RouteSet *rs = fixture();
    sws_routeset_refusal_t why;
    if (sws_routeset_check(rs, &why) != 0)
        fail_msg("refused: %s: %s", why.path, why.msg);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_each_refusal(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Sws__RouteSet *rs = fixture();
        sws_routeset_refusal_t why;
        cases[i].breaks(rs);
        if (sws_routeset_check(rs, &why) == 0)
            fail_msg("%s: accepted", cases[i].name);
        if (strcmp(why.path, cases[i].path) != 0 || strcmp(why.msg, cases[i].msg) != 0)
            fail_msg("%s: got \"%s: %s\", want \"%s: %s\"", cases[i].name, why.path, why.msg,
                     cases[i].path, cases[i].msg);
        sws__route_set__free_unpacked(rs, NULL);
    }
}

/* An https pool with a CA that parses, or with verification off (then
 * no CA is needed), passes; its table pool says what the worker needs. */
static void test_https_pool_accepted_and_tabled(void **state)
{
    (void)state;
    static _Alignas(8) char arena[1 << 16];
    char err[256];
    size_t len = 0;
    char *pem = test_pem_cert_text(&len);
    assert_non_null(pem);
    for (int verify = 0; verify < 2; verify++) {
        Sws__RouteSet *rs = fixture();
        Sws__Pool__Tls *tls = https(rs, verify ? pem : NULL);
        tls->skip_verify = !verify;
        set(&tls->sni, "api.example");
        sws_routeset_refusal_t why;
        if (sws_routeset_check(rs, &why) != 0)
            fail_msg("verify %d refused: %s: %s", verify, why.path, why.msg);
        assert_int_equal(sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err)), 0);
        const sws_table_t *t = (const sws_table_t *)arena;
        const sws_pool_t *tp = sws_table_pool(t, 0);
        assert_int_equal(tp->protocol, SWS__POOL__PROTOCOL__HTTPS);
        assert_int_equal(tp->tls, 1);
        assert_int_equal(tp->tls_verify, verify);
        assert_string_equal(sws_table_str(t, tp->tls_sni), "api.example");
        assert_string_equal(sws_table_str(t, tp->tls_ca_pem), verify ? pem : "");
        assert_int_equal(sws_table_pool(t, 1)->protocol, SWS__POOL__PROTOCOL__HTTP);
        sws__route_set__free_unpacked(rs, NULL);
    }
    free(pem);
}

/* h2 and grpc pools (h2c, ADR 0034) pass without tls and keep their
 * protocol in the table, where the worker reads it; no TLS strings. */
static void test_h2_pools_accepted_and_tabled(void **state)
{
    (void)state;
    static _Alignas(8) char arena[1 << 16];
    static const Sws__Pool__Protocol protocols[] = { SWS__POOL__PROTOCOL__H2,
                                                     SWS__POOL__PROTOCOL__GRPC };
    char err[256];
    for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++) {
        Sws__RouteSet *rs = fixture();
        rs->pools[0]->protocol = protocols[i];
        sws_routeset_refusal_t why;
        if (sws_routeset_check(rs, &why) != 0)
            fail_msg("protocol %d refused: %s: %s", (int)protocols[i], why.path, why.msg);
        assert_int_equal(sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err)), 0);
        const sws_table_t *t = (const sws_table_t *)arena;
        const sws_pool_t *tp = sws_table_pool(t, 0);
        assert_int_equal(tp->protocol, protocols[i]);
        assert_int_equal(tp->tls, 0);
        assert_int_equal(tp->tls_verify, 0);
        assert_int_equal(tp->tls_sni.len, 0);
        assert_int_equal(tp->tls_ca_pem.len, 0);
        sws__route_set__free_unpacked(rs, NULL);
    }
}

/* h2 and grpc with tls (ADR 0034): checked as https is, and tabled over
 * TLS with the CA, the SNI and the verify flag the worker needs. */
static void test_h2_pools_over_tls_accepted_and_tabled(void **state)
{
    (void)state;
    static _Alignas(8) char arena[1 << 16];
    static const Sws__Pool__Protocol protocols[] = { SWS__POOL__PROTOCOL__H2,
                                                     SWS__POOL__PROTOCOL__GRPC };
    char err[256];
    size_t len = 0;
    char *pem = test_pem_cert_text(&len);
    assert_non_null(pem);
    for (size_t i = 0; i < 2 * sizeof(protocols) / sizeof(protocols[0]); i++) {
        int verify = (int)(i & 1);
        Sws__RouteSet *rs = fixture();
        Sws__Pool__Tls *tls = https(rs, verify ? pem : NULL);
        tls->skip_verify = !verify;
        set(&tls->sni, "grpc.example");
        rs->pools[0]->protocol = protocols[i / 2];
        sws_routeset_refusal_t why;
        if (sws_routeset_check(rs, &why) != 0)
            fail_msg("protocol %d verify %d refused: %s: %s", (int)protocols[i / 2], verify,
                     why.path, why.msg);
        assert_int_equal(sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err)), 0);
        const sws_table_t *t = (const sws_table_t *)arena;
        const sws_pool_t *tp = sws_table_pool(t, 0);
        assert_int_equal(tp->protocol, protocols[i / 2]);
        assert_int_equal(tp->tls, 1);
        assert_int_equal(tp->tls_verify, verify);
        assert_string_equal(sws_table_str(t, tp->tls_sni), "grpc.example");
        assert_string_equal(sws_table_str(t, tp->tls_ca_pem), verify ? pem : "");
        sws__route_set__free_unpacked(rs, NULL);
    }
    free(pem);
}

/* Addresses in their canonical form: the key member ids derive from. */
static void test_address_forms(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int need_port, family;
        const char *host, *key;
    } ok[] = {
        { "127.0.0.1:80", 1, AF_INET, "127.0.0.1", "127.0.0.1:80" },
        { "[0:0::1]:8080", 1, AF_INET6, "::1", "[::1]:8080" },
        { "Api.Example.:443", 1, AF_UNSPEC, "api.example", "api.example:443" },
        { "backend", 0, AF_UNSPEC, "backend", "backend" },
        { "[::1]", 0, AF_INET6, "::1", "[::1]" },
        { "host:65535", 1, AF_UNSPEC, "host", "host:65535" },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        sws_routeset_addr_t a;
        const char *why = sws_routeset_address_problem(ok[i].text, ok[i].need_port, &a);
        if (why != NULL)
            fail_msg("\"%s\": %s", ok[i].text, why);
        assert_int_equal(a.family, ok[i].family);
        assert_string_equal(a.host, ok[i].host);
        assert_string_equal(a.key, ok[i].key);
    }
    sws_routeset_addr_t a;
    assert_null(sws_routeset_address_problem("10.1.2.3:8080", 1, &a));
    assert_int_equal(a.port, 8080);
    assert_memory_equal(a.ip, ((uint8_t[]){ 10, 1, 2, 3 }), 4);
}

/* ":PORT" and "*:PORT" are every IPv4 address for a listening socket
 * (SWS_ADDR_ANY_HOST) and nothing else; a member must name one host. */
static void test_address_any_host_only_when_asked(void **state)
{
    (void)state;
    static const unsigned any = SWS_ADDR_NEED_PORT | SWS_ADDR_ANY_HOST;
    static const char *const forms[] = { ":8080", "*:8080" };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        sws_routeset_addr_t a;
        assert_null(sws_routeset_address_parse(forms[i], any, &a));
        assert_int_equal(a.family, AF_INET);
        assert_int_equal(a.port, 8080);
        assert_memory_equal(a.ip, ((uint8_t[]){ 0, 0, 0, 0 }), 4);
        assert_string_equal(a.key, "0.0.0.0:8080");
        assert_non_null(sws_routeset_address_parse(forms[i], SWS_ADDR_NEED_PORT, NULL));
    }
    /* Without a port "*" is still no host, and a port is still needed. */
    assert_string_equal(sws_routeset_address_parse("*", any, NULL),
                        "must name one host, not a wildcard");
    assert_string_equal(sws_routeset_address_parse(":", any, NULL),
                        "the port must be a number from 1 to 65535");
    assert_string_equal(sws_routeset_address_parse("*.a:80", any, NULL),
                        "must name one host, not a wildcard");
}

static void test_hash_keys(void **state)
{
    (void)state;
    unsigned kind = 99;
    const char *name = NULL;

    assert_null(sws_routeset_hash_key_problem("client_ip", &kind, &name));
    assert_int_equal(kind, SWS_HASH_CLIENT_IP);
    assert_string_equal(name, "");
    assert_null(sws_routeset_hash_key_problem("header:X-User", &kind, &name));
    assert_int_equal(kind, SWS_HASH_HEADER);
    assert_string_equal(name, "X-User");
    assert_null(sws_routeset_hash_key_problem("cookie:session", &kind, &name));
    assert_int_equal(kind, SWS_HASH_COOKIE);
    assert_string_equal(name, "session");
    static const char *const bad[] = {
        "", "client", "Client_IP", "client_ip ", "ip", "header:", "cookie:", "header",
        "header:a b", "cookie:a;b", "cookie:a=b", "header:a:b", "Header:x", "uri",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kind = 99;
        if (sws_routeset_hash_key_problem(bad[i], &kind, &name) == NULL)
            fail_msg("hash_key \"%s\" accepted", bad[i]);
        assert_int_equal(kind, 99);
    }
}

/* What a source other than the YAML reader sends goes straight to the
 * table builder: it must refuse what the checker refuses, in its words. */
static void assert_table_refuses(void (*breaks)(Sws__RouteSet *rs), const char *want)
{
    static uint64_t arena[4096];
    char err[512] = "";
    Sws__RouteSet *rs = fixture();

    breaks(rs);
    assert_true(sws_table_size(rs) <= sizeof(arena));
    if (sws_table_build(arena, sizeof(arena), 1, rs, err, sizeof(err)) == 0)
        fail_msg("built, want \"%s\"", want);
    assert_string_equal(err, want);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_table_build_refuses_what_the_checker_refuses(void **state)
{
    (void)state;
    assert_table_refuses(framing_header, "hosts[0].routes[0].respond.headers[0]: "
                         "\"Content-Length\": is set by the server (from the body and the "
                         "connection state)");
    assert_table_refuses(path_not_normal, "hosts[0].routes[0].path: \"/a/../b\" is not in "
                         "normal form (requests are matched in it): write \"/b\"");
    assert_table_refuses(route_twice, "hosts[0].routes[2].path: this host already has a "
                         "prefix route for \"/s/\" (routes[1])");
    assert_table_refuses(member_twice, "pools[0].members[2].address: \"[0:0::1]:9002\" is "
                         "already a member of this pool (members[1])");
    assert_table_refuses(interim_status, "hosts[0].routes[0].respond.status: expected a "
                         "number from 200 to 599, got 100");
}

/* ---- TLS: certificates as PEM bytes, made once for the file ---- */

static test_pem_t rsa_a, ec_a, rsa_b;

static void add_cert(Sws__Host *h, const test_pem_t *cert, const test_pem_t *key)
{
    PUSH(h->certificates, h->n_certificates, test_pem_certificate(cert, key));
}

static Sws__Tls *tls_of(Sws__RouteSet *rs)
{
    if (rs->tls == NULL) {
        rs->tls = NEW(Sws__Tls, SWS__TLS__INIT);
        rs->tls->ciphers = strdup("");
        rs->tls->ciphersuites = strdup("");
    }
    return rs->tls;
}

static int tls_setup(void **state)
{
    (void)state;
    test_pem_make(&rsa_a, 0, "a.test");
    test_pem_make(&ec_a, 1, "a.test");
    test_pem_make(&rsa_b, 0, "b.test");
    return 0;
}

static int tls_teardown(void **state)
{
    (void)state;
    test_pem_free(&rsa_a);
    test_pem_free(&ec_a);
    test_pem_free(&rsa_b);
    return 0;
}

/* Checks rs, expecting want ("PATH: MSG" start, or NULL: accepted), and
 * frees it. */
static void tls_expect(Sws__RouteSet *rs, const char *want)
{
    sws_routeset_refusal_t why;
    char got[600];
    int rc = sws_routeset_check(rs, &why);
    snprintf(got, sizeof(got), "%s: %s", why.path, why.msg);
    if (want == NULL && rc != 0)
        fail_msg("refused: %s", got);
    if (want != NULL && (rc == 0 || strncmp(got, want, strlen(want)) != 0))
        fail_msg("got \"%s\", want \"%s...\"", rc == 0 ? "accepted" : got, want);
    sws__route_set__free_unpacked(rs, NULL);
}

static void test_tls_certificates(void **state)
{
    (void)state;
    Sws__RouteSet *rs = fixture();

    /* An RSA and an ECDSA pair for one host, a default: fine. */
    add_cert(rs->hosts[0], &rsa_a, &rsa_a);
    add_cert(rs->hosts[0], &ec_a, &ec_a);
    tls_of(rs)->default_certificate = test_pem_certificate(&rsa_b, &rsa_b);
    assert_true(sws_routeset_has_certificates(rs));
    tls_expect(rs, NULL);

    rs = fixture();
    assert_false(sws_routeset_has_certificates(rs));
    add_cert(rs->hosts[1], &rsa_b, &rsa_a);
    tls_expect(rs, "hosts[1].certificates[0].key: /etc/a.key: the key does not match");

    rs = fixture();
    add_cert(rs->hosts[0], &rsa_a, &ec_a);
    tls_expect(rs, "hosts[0].certificates[0].key: /etc/a.key: the key does not match");

    rs = fixture();
    add_cert(rs->hosts[0], &rsa_a, &rsa_a);
    add_cert(rs->hosts[0], &rsa_b, &rsa_b);
    tls_expect(rs, "hosts[0].certificates[1].cert: a second RSA certificate for the same names");

    rs = fixture();
    add_cert(rs->hosts[0], &rsa_a, &rsa_a);
    rs->hosts[0]->certificates[0]->cert_pem.len = 40; /* cut inside the PEM */
    tls_expect(rs, "hosts[0].certificates[0].cert: /etc/a.crt: no PEM certificate could be read");

    rs = fixture();
    add_cert(rs->hosts[0], &rsa_a, &rsa_a);
    rs->hosts[0]->certificates[0]->key_pem.len = 0;
    tls_expect(rs, "hosts[0].certificates[0].key: /etc/a.key: the key file is empty");

    rs = fixture();
    tls_of(rs)->default_certificate = test_pem_certificate(&rsa_b, &ec_a);
    tls_expect(rs, "tls.default_certificate.key: /etc/a.key: the key does not match");
}

static void test_tls_settings(void **state)
{
    (void)state;
    Sws__RouteSet *rs = fixture();
    Sws__Tls *tls = tls_of(rs);
    tls->protocols = calloc(1, sizeof(*tls->protocols));
    tls->protocols[0] = (Sws__Tls__Protocol)7;
    tls->n_protocols = 1;
    tls_expect(rs, "tls.protocols[0]: expected TLSv1.2 or TLSv1.3");

    rs = fixture();
    set(&tls_of(rs)->ciphers, "NOT-A-CIPHER");
    tls_expect(rs, "tls.ciphers: no cipher OpenSSL knows in \"NOT-A-CIPHER\"");

    rs = fixture();
    set(&tls_of(rs)->ciphersuites, "TLS_NOPE");
    tls_expect(rs, "tls.ciphersuites: not a TLS 1.3 ciphersuite list");

    rs = fixture();
    set(&tls_of(rs)->ciphers, SWS_DEFAULT_TLS_CIPHERS);
    set(&tls_of(rs)->ciphersuites, SWS_DEFAULT_TLS_CIPHERSUITES);
    tls_expect(rs, NULL);
}

/* ---- a scratch kept between checks (ADR 0055) ---- */

/* pools pools of 10 members "10.P/256.P%256.M:80" each, pool "pP" and a
 * host "hP.test" proxying "/" to it: ingressd's shape, small. The same
 * pools give the same member ids, set after set. */
static Sws__RouteSet *pools_set(size_t pools)
{
    Sws__RouteSet *rs = rs_new();
    char name[32], addr[32];
    for (size_t p = 0; p < pools; p++) {
        snprintf(name, sizeof(name), "p%zu", p);
        Sws__Pool *pool = rs_pool(rs, name);
        for (int m = 1; m <= 10; m++) {
            snprintf(addr, sizeof(addr), "10.%zu.%zu.%d:80", p / 256, p % 256, m);
            pool_member(pool, addr, 1);
        }
        snprintf(name, sizeof(name), "h%zu.test", p);
        Sws__Route *r = host_route(rs_host(rs, name), SWS__ROUTE__MATCH__PREFIX, "/");
        r->action_case = SWS__ROUTE__ACTION_PROXY;
        r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
        r->proxy->pool = strdup(rs->pools[p]->name);
    }
    return rs;
}

/* The kept scratch's verdict on rs, compared with a fresh check's. */
static void check_kept_as_fresh(sws_routeset_scratch_t *scratch, const Sws__RouteSet *rs,
                                const char *what)
{
    sws_routeset_refusal_t fresh, kept;
    sws_routeset_pools_t pools;
    int want = sws_routeset_check(rs, &fresh);
    int got = sws_routeset_check_pools(rs, scratch, &kept, &pools);
    sws_routeset_pools_free(&pools);
    if (got != want || strcmp(kept.path, fresh.path) != 0 || strcmp(kept.msg, fresh.msg) != 0)
        fail_msg("%s: kept scratch %d \"%s: %s\", fresh %d \"%s: %s\"", what, got, kept.path,
                 kept.msg, want, fresh.path, fresh.msg);
}

/* A set checked again through the scratch that checked it, a smaller set
 * whose member ids and names repeat the larger one's, then every refusal
 * of the table above: each as a fresh check says. A hash set not cleared
 * between checks would find the last set's ids again. */
static void test_kept_scratch_checks_as_a_fresh_one(void **state)
{
    (void)state;
    sws_routeset_scratch_t scratch = { 0 };
    Sws__RouteSet *large = pools_set(300), *small = pools_set(40);

    check_kept_as_fresh(&scratch, large, "the large set");
    check_kept_as_fresh(&scratch, large, "the large set again");
    check_kept_as_fresh(&scratch, small, "a smaller set, the same first pools");
    check_kept_as_fresh(&scratch, large, "the large set after the smaller");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Sws__RouteSet *rs = fixture();
        cases[i].breaks(rs);
        check_kept_as_fresh(&scratch, rs, cases[i].name);
        check_kept_as_fresh(&scratch, large, cases[i].name);
        sws__route_set__free_unpacked(rs, NULL);
    }
    /* Refused in the member ids' hash set, after the same set passed. */
    Sws__Member *twice = large->pools[299]->members[9];
    free(twice->address);
    twice->address = strdup("10.1.43.9:80");
    sws_routeset_refusal_t why;
    sws_routeset_pools_t pools;
    assert_int_equal(sws_routeset_check_pools(large, &scratch, &why, &pools), -1);
    assert_string_equal(why.path, "pools[299].members[9].address");
    check_kept_as_fresh(&scratch, large, "a member twice");
    sws_routeset_scratch_free(&scratch);
    sws__route_set__free_unpacked(large, NULL);
    sws__route_set__free_unpacked(small, NULL);
}

/* The table a kept scratch builds is the table a fresh check builds:
 * the build reads the check's sorted pools from the scratch. */
static void test_kept_scratch_builds_the_same_table(void **state)
{
    (void)state;
    static _Alignas(8) char fresh[1 << 20], kept[1 << 20];
    sws_routeset_scratch_t scratch = { 0 };
    char err[256];
    Sws__RouteSet *large = pools_set(300), *small = pools_set(40);
    size_t size = sws_table_size(small);
    assert_true(sws_table_size(large) <= sizeof(kept));

    assert_int_equal(sws_table_build_reusing(kept, sizeof(kept), 1, large, &scratch, err,
                                             sizeof(err)), 0);
    memset(fresh, 0, size);
    memset(kept, 0, size);
    assert_int_equal(sws_table_build(fresh, size, 2, small, err, sizeof(err)), 0);
    assert_int_equal(sws_table_build_reusing(kept, size, 2, small, &scratch, err, sizeof(err)),
                     0);
    assert_memory_equal(fresh, kept, size);
    sws_routeset_scratch_free(&scratch);
    sws__route_set__free_unpacked(large, NULL);
    sws__route_set__free_unpacked(small, NULL);
}

/* Grown to the largest set; kept for a set needing a quarter or more of
 * it; given back to a set's need under a quarter. */
static void test_scratch_grows_and_shrinks_by_a_quarter(void **state)
{
    (void)state;
    sws_routeset_scratch_t scratch = { 0 };
    Sws__RouteSet *large = pools_set(400), *half = pools_set(200), *tiny = pools_set(4);

    assert_int_equal(sws_routeset_scratch_reserve(&scratch, half), 0);
    size_t half_cap = scratch.cap;
    assert_true(half_cap > 0);
    assert_int_equal(sws_routeset_scratch_reserve(&scratch, large), 0);
    size_t large_cap = scratch.cap;
    assert_true(large_cap > half_cap);
    void *mem = scratch.mem;
    assert_int_equal(sws_routeset_scratch_reserve(&scratch, half), 0);
    assert_ptr_equal(scratch.mem, mem);
    assert_int_equal(scratch.cap, large_cap);
    assert_int_equal(sws_routeset_scratch_reserve(&scratch, tiny), 0);
    assert_true(scratch.cap < large_cap / 4);
    assert_int_equal(scratch.used, 0);
    sws_routeset_scratch_free(&scratch);
    assert_null(scratch.mem);
    assert_int_equal(scratch.cap, 0);
    sws__route_set__free_unpacked(large, NULL);
    sws__route_set__free_unpacked(half, NULL);
    sws__route_set__free_unpacked(tiny, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_is_valid),
        cmocka_unit_test(test_each_refusal),
        cmocka_unit_test(test_https_pool_accepted_and_tabled),
        cmocka_unit_test(test_h2_pools_accepted_and_tabled),
        cmocka_unit_test(test_h2_pools_over_tls_accepted_and_tabled),
        cmocka_unit_test(test_address_forms),
        cmocka_unit_test(test_address_any_host_only_when_asked),
        cmocka_unit_test(test_hash_keys),
        cmocka_unit_test(test_table_build_refuses_what_the_checker_refuses),
        cmocka_unit_test(test_tls_certificates),
        cmocka_unit_test(test_tls_settings),
        cmocka_unit_test(test_kept_scratch_checks_as_a_fresh_one),
        cmocka_unit_test(test_kept_scratch_builds_the_same_table),
        cmocka_unit_test(test_scratch_grows_and_shrinks_by_a_quarter),
    };
    return cmocka_run_group_tests(tests, tls_setup, tls_teardown);
}
