/* supervisor/config.c: the YAML schema, every default, errors with their
 * exact line:column, static roots relative to the file, listen addresses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/table.h"
#include "supervisor/config.h"
#include "support/settings_assert.h"
#include "support/tls_pem.h"

static Sws__Config *parse_ok(const char *yaml)
{
    char err[512] = "";
    Sws__Config *cfg = NULL;
    int rc = sws_config_parse(yaml, strlen(yaml), "t.yaml", &cfg, err, sizeof(err));
    if (rc != 0)
        print_error("unexpected error: %s\n", err);
    assert_int_equal(rc, 0);
    assert_non_null(cfg);
    return cfg;
}

/* The error must start with want (FILE:LINE:COL: path:) and contain more. */
static void expect_error(const char *yaml, const char *want, const char *more)
{
    char err[512] = "";
    Sws__Config *cfg = (Sws__Config *)1;
    int rc = sws_config_parse(yaml, strlen(yaml), "t.yaml", &cfg, err, sizeof(err));
    if (rc == 0 || strncmp(err, want, strlen(want)) != 0 || strstr(err, more) == NULL)
        print_error("yaml:\n%s\nwant: %s ... %s\ngot:  %s\n", yaml, want, more, err);
    assert_int_equal(rc, -1);
    assert_null(cfg);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
    assert_non_null(strstr(err, more));
}

static void make_temp_dir(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/sws-test-config-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void test_defaults(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("hosts: []\n");
    Sws__ServerConfig *sc = cfg->server;
    Sws__Settings *st = cfg->routes->settings;

    assert_int_equal(sc->n_listen, 1);
    assert_string_equal(sc->listen[0]->address, ":8080");
    assert_int_equal(sc->event_loops, 0);
    assert_int_equal(sc->accept_policy, SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED);
    assert_int_equal(sc->fountain_threshold, 85);
    assert_int_equal(sc->backlog, 4096);
    assert_string_equal(sc->user, "");
    assert_string_equal(sc->error_log, "-");
    assert_string_equal(cfg->routes->settings->log_level, "info");
    assert_int_equal(sc->table_size, 8 << 20);

    assert_settings_numbers(st, (&(settings_numbers_t){
                                    .max_request_line = 8192,
                                    .max_header_size = 16384,
                                    .max_headers = 100,
                                    .max_body_size = 1 << 20,
                                    .header_timeout_ms = 60000,
                                    .body_timeout_ms = 60000,
                                    .keepalive_timeout_ms = 75000,
                                    .send_timeout_ms = 60000,
                                    .keepalive_requests = 1000,
                                    .shutdown_timeout_ms = 30000,
                                }));
    assert_string_equal(st->server_name, "scalws");
    assert_int_equal(st->server_tokens, SWS__SETTINGS__SERVER_TOKENS__OFF);
    assert_int_equal(st->access_log->format, SWS__ACCESS_LOG__FORMAT__COMBINED);
    assert_string_equal(st->access_log->path, "-");
    assert_int_equal(cfg->routes->n_hosts, 0);
    assert_int_equal(cfg->routes->n_pools, 0);
    assert_true(protobuf_c_message_check(&cfg->base));
    sws_config_free(cfg);

    /* Empty sections keep the defaults too. */
    cfg = parse_ok("server:\n  limits:\n  logging: {}\nhosts:\n");
    assert_int_equal(cfg->routes->settings->max_headers, 100);
    assert_string_equal(cfg->server->listen[0]->address, ":8080");
    sws_config_free(cfg);
}

static void test_full(void **state)
{
    (void)state;
    char dir[64], yaml[4096], real[PATH_MAX];
    make_temp_dir(dir, sizeof(dir));
    assert_non_null(realpath(dir, real));
    snprintf(yaml, sizeof(yaml),
             "server:\n"
             "  listen: [\"127.0.0.1:9001\", \"[::1]:9002\"]\n"
             "  event_loops: 3\n"
             "  accept_policy: reuseport\n"
             "  backlog: 511\n"
             "  user: nobody\n"
             "  shutdown_timeout: 500ms\n"
             "  table_size: 1m\n"
             "  keepalive_requests: 50\n"
             "  server_header: \"Test/1.0\"\n"
             "  limits:\n"
             "    max_request_line: 4k\n"
             "    max_header_size: 32768\n"
             "    max_headers: 20\n"
             "    max_body_size: 2G\n"
             "  timeouts:\n"
             "    header: 5s\n"
             "    body: 2m\n"
             "    keepalive: 1h\n"
             "    send: 7\n"
             "  logging:\n"
             "    level: debug\n"
             "    error_log: /var/log/scalws/error.log\n"
             "    access_log: json\n"
             "    access_log_path: /var/log/scalws/access.log\n"
             "hosts:\n"
             "  - names: [\"Example.COM\", \"*.example.com\"]\n"
             "    https_redirect: yes\n"
             "    routes:\n"
             "      - path: /\n"
             "        match: exact\n"
             "        respond:\n"
             "          status: 404\n"
             "          headers: {Content-Type: text/plain, Set-Cookie: [a=1, b=2]}\n"
             "          body: \"no\\0pe\"\n"
             "      - path: /static/\n"
             "        https_redirect: on\n"
             "        static: {root: %s/, index: default.htm, follow_symlinks: true}\n"
             "  - name: other.test\n"
             "    routes:\n"
             "      - path: /old\n"
             "        redirect: {status: 308, location: \"https://example.com/new\"}\n"
             "      - path: /old\n"
             "        match: exact\n"
             "        redirect: {location: /x}\n",
             dir);
    Sws__Config *cfg = parse_ok(yaml);
    Sws__ServerConfig *sc = cfg->server;
    Sws__Settings *st = cfg->routes->settings;

    assert_int_equal(sc->n_listen, 2);
    assert_string_equal(sc->listen[0]->address, "127.0.0.1:9001");
    assert_string_equal(sc->listen[1]->address, "[::1]:9002");
    assert_int_equal(sc->event_loops, 3);
    assert_int_equal(sc->accept_policy, SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT);
    assert_int_equal(sc->backlog, 511);
    assert_string_equal(sc->user, "nobody");
    assert_int_equal(sc->table_size, 1 << 20);
    assert_string_equal(st->log_level, "debug");
    assert_string_equal(sc->error_log, "/var/log/scalws/error.log");
    assert_string_equal(st->server_name, "Test/1.0");
    assert_settings_numbers(st, (&(settings_numbers_t){
                                    .max_request_line = 4096,
                                    .max_header_size = 32768,
                                    .max_headers = 20,
                                    .max_body_size = 2ull << 30,
                                    .header_timeout_ms = 5000,
                                    .body_timeout_ms = 120000,
                                    .keepalive_timeout_ms = 3600000,
                                    .send_timeout_ms = 7000,
                                    .keepalive_requests = 50,
                                    .shutdown_timeout_ms = 500,
                                }));
    assert_int_equal(st->access_log->format, SWS__ACCESS_LOG__FORMAT__JSON);
    assert_string_equal(st->access_log->path, "/var/log/scalws/access.log");

    assert_int_equal(cfg->routes->n_hosts, 2);
    Sws__Host *h = cfg->routes->hosts[0];
    assert_int_equal(h->n_names, 2);
    assert_string_equal(h->names[0], "example.com"); /* lowercased */
    assert_string_equal(h->names[1], "*.example.com");
    assert_true(h->https_redirect);
    assert_int_equal(h->n_routes, 2);

    Sws__Route *r = h->routes[0];
    assert_string_equal(r->path, "/");
    assert_int_equal(r->match, SWS__ROUTE__MATCH__EXACT);
    assert_false(r->https_redirect);
    assert_int_equal(r->action_case, SWS__ROUTE__ACTION_RESPOND);
    assert_int_equal(r->respond->status, 404);
    assert_int_equal(r->respond->n_headers, 3);
    assert_string_equal(r->respond->headers[0]->name, "Content-Type");
    assert_string_equal(r->respond->headers[0]->value, "text/plain");
    assert_string_equal(r->respond->headers[1]->name, "Set-Cookie");
    assert_string_equal(r->respond->headers[1]->value, "a=1");
    assert_string_equal(r->respond->headers[2]->name, "Set-Cookie");
    assert_string_equal(r->respond->headers[2]->value, "b=2");
    assert_int_equal(r->respond->body.len, 5);
    assert_memory_equal(r->respond->body.data, "no\0pe", 5);

    r = h->routes[1];
    assert_string_equal(r->path, "/static/");
    assert_int_equal(r->match, SWS__ROUTE__MATCH__PREFIX);
    assert_true(r->https_redirect);
    assert_int_equal(r->action_case, SWS__ROUTE__ACTION_STATIC);
    assert_string_equal(r->static_->root, real); /* canonical: no trailing '/' */
    assert_string_equal(r->static_->index, "default.htm");
    assert_true(r->static_->follow_symlinks);

    h = cfg->routes->hosts[1];
    assert_int_equal(h->n_names, 1);
    assert_string_equal(h->names[0], "other.test");
    assert_false(h->https_redirect);
    assert_int_equal(h->n_routes, 2);
    assert_int_equal(h->routes[0]->action_case, SWS__ROUTE__ACTION_REDIRECT);
    assert_int_equal(h->routes[0]->redirect->status, 308);
    assert_string_equal(h->routes[0]->redirect->location, "https://example.com/new");
    assert_int_equal(h->routes[1]->match, SWS__ROUTE__MATCH__EXACT);
    assert_int_equal(h->routes[1]->redirect->status, 302);
    assert_string_equal(h->routes[1]->redirect->location, "/x");

    /* The result is a well-formed message that survives the wire (the
     * same RouteSet later travels over ZeroMQ). */
    assert_true(protobuf_c_message_check(&cfg->base));
    size_t n = protobuf_c_message_get_packed_size(&cfg->base);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(&cfg->base, buf), n);
    Sws__Config *copy = sws__config__unpack(NULL, n, buf);
    assert_non_null(copy);
    assert_string_equal(copy->routes->hosts[0]->routes[1]->static_->root, real);
    sws__config__free_unpacked(copy, NULL);
    free(buf);

    sws_config_free(cfg);
    assert_int_equal(rmdir(dir), 0);
}

static void test_value_forms(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("server:\n"
                                "  listen: \"*:81\"\n"
                                "  event_loops: 0\n"
                                "  server_header: false\n"
                                "  logging: {access_log: off}\n"
                                "hosts:\n"
                                "  - name: \"*\"\n"
                                "    https_redirect: False\n"
                                "    routes: [{path: /, respond: {}}]\n");
    assert_int_equal(cfg->server->n_listen, 1);
    assert_string_equal(cfg->server->listen[0]->address, "*:81");
    assert_int_equal(cfg->server->event_loops, 0);
    assert_string_equal(cfg->routes->settings->server_name, "");
    assert_int_equal(cfg->routes->settings->access_log->format, SWS__ACCESS_LOG__FORMAT__OFF);
    assert_string_equal(cfg->routes->hosts[0]->names[0], "*");
    Sws__Respond *rsp = cfg->routes->hosts[0]->routes[0]->respond;
    assert_int_equal(rsp->status, 200);
    assert_int_equal(rsp->n_headers, 0);
    assert_int_equal(rsp->body.len, 0);
    sws_config_free(cfg);

    cfg = parse_ok("server: {event_loops: auto, server_header: \"\",\n"
                   "         logging: {access_log: false}}\n");
    assert_int_equal(cfg->server->event_loops, 0);
    assert_string_equal(cfg->routes->settings->server_name, "");
    assert_int_equal(cfg->routes->settings->access_log->format, SWS__ACCESS_LOG__FORMAT__OFF);
    sws_config_free(cfg);
}

/* server_tokens: nginx's words, YAML's booleans, and build. */
static void test_server_tokens(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        Sws__Settings__ServerTokens want;
    } cases[] = {
        { "off", SWS__SETTINGS__SERVER_TOKENS__OFF },
        { "false", SWS__SETTINGS__SERVER_TOKENS__OFF },
        { "on", SWS__SETTINGS__SERVER_TOKENS__ON },
        { "true", SWS__SETTINGS__SERVER_TOKENS__ON },
        { "build", SWS__SETTINGS__SERVER_TOKENS__BUILD },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[128];
        snprintf(yaml, sizeof(yaml), "server:\n  server_tokens: %s\n", cases[i].value);
        Sws__Config *cfg = parse_ok(yaml);
        assert_int_equal(cfg->routes->settings->server_tokens, cases[i].want);
        assert_string_equal(cfg->routes->settings->server_name, "scalws");
        sws_config_free(cfg);
    }
    expect_error("server:\n  server_tokens: full\n", "t.yaml:2:18: server.server_tokens: ",
                 "expected off, on or build, got \"full\"");
    expect_error("server:\n  server_tokens: [on]\n", "t.yaml:2:18: server.server_tokens: ",
                 "expected off, on or build, got a list");
}

static void test_errors_keys_and_types(void **state)
{
    (void)state;
    expect_error("serer: {}\n", "t.yaml:1:1: serer: ",
                 "unknown key (expected one of: server, pools, hosts, ingress)");
    expect_error("server:\n  bakclog: 10\n", "t.yaml:2:3: server.bakclog: ", "unknown key");
    expect_error("server:\n  backlog: 10\n  backlog: 20\n", "t.yaml:3:3: server.backlog: ",
                 "duplicate key (first at line 2, column 3)");
    expect_error("- a\n", "t.yaml:1:1: ", "expected a mapping");
    expect_error("server: 5\n", "t.yaml:1:9: server: ", "expected a mapping");
    expect_error("server:\n  backlog: [1]\n", "t.yaml:2:12: server.backlog: ",
                 "expected a number from 1 to 65535, got a list");
    expect_error("server:\n  user: \"a\\0b\"\n", "t.yaml:2:9: server.user: ",
                 "must not contain a NUL byte");
    expect_error("hosts: {a: b}\n", "t.yaml:1:8: hosts: ", "expected a list, got a mapping");
    expect_error("hosts:\n  - name: a.test\n    https_redirect: maybe\n",
                 "t.yaml:3:21: hosts[0].https_redirect: ", "expected true or false");
    expect_error("server:\n  logging:\n    level: loud\n", "t.yaml:3:12: server.logging.level: ",
                 "expected debug, info, notice, warn or error");
    expect_error("server:\n  logging:\n    access_log: common\n",
                 "t.yaml:3:17: server.logging.access_log: ", "expected off, combined or json");
    expect_error("server:\n  event_loops: lots\n", "t.yaml:2:16: server.event_loops: ",
                 "expected auto or a number");
    expect_error("server:\n  server_header: \"a\\r\\nX-Evil: 1\"\n",
                 "t.yaml:2:18: server.server_header: ", "control characters");
}

static void test_errors_ranges(void **state)
{
    (void)state;
    expect_error("server:\n  backlog: 70000\n", "t.yaml:2:12: server.backlog: ",
                 "expected a number from 1 to 65535, got \"70000\"");
    expect_error("server:\n  backlog: -1\n", "t.yaml:2:12: server.backlog: ", "from 1 to 65535");
    expect_error("server:\n  table_size: 1k\n", "t.yaml:2:15: server.table_size: ",
                 "expected a size (bytes, or with a k/m/g suffix) from 64k to 1g");
    expect_error("server:\n  timeouts:\n    header: 5x\n", "t.yaml:3:13: server.timeouts.header: ",
                 "expected a duration");
    expect_error("server:\n  timeouts:\n    send: 0\n", "t.yaml:3:11: server.timeouts.send: ",
                 "from 1ms to 24h");
    expect_error("server:\n  limits:\n    max_headers: 129\n",
                 "t.yaml:3:18: server.limits.max_headers: ", "from 1 to 128");
    expect_error("server:\n  limits: {max_body_size: 99999999999999999999}\n",
                 "t.yaml:2:27: server.limits.max_body_size: ", "expected a size");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        respond: {status: 600}\n",
                 "t.yaml:5:27: hosts[0].routes[0].respond.status: ", "from 200 to 599");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        respond: {status: 103}\n",
                 "t.yaml:5:27: hosts[0].routes[0].respond.status: ", "from 200 to 599");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        redirect: {status: 304, location: /x}\n",
                 "t.yaml:5:28: hosts[0].routes[0].redirect.status: ",
                 "expected 301, 302, 303, 307 or 308, got \"304\"");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        respond: {status: 204, body: x}\n",
                 "t.yaml:5:38: hosts[0].routes[0].respond.body: ", "a 204 response has no body");
}

static void test_errors_server(void **state)
{
    (void)state;
    expect_error("server:\n  listen: \"1.2.3.4\"\n", "t.yaml:2:11: server.listen: ",
                 "bad address \"1.2.3.4\"");
    expect_error("server:\n  listen: [\":8080\", \":0\"]\n", "t.yaml:2:21: server.listen[1]: ",
                 "the port must be a number from 1 to 65535");
    expect_error("server:\n  listen: [\":8080\", \"*:8080\"]\n", "t.yaml:2:21: server.listen[1]: ",
                 "0.0.0.0:8080 is already listed (line 2, column 12)");
    expect_error("server:\n  listen: []\n", "t.yaml:2:11: server.listen: ",
                 "needs at least one address");
    expect_error("server:\n  accept_policy: random\n", "t.yaml:2:18: server.accept_policy: ",
                 "expected shared, reuseport, hash, least-loaded, fountain or cpu");
    expect_error("server:\n  fountain_threshold: 0\n", "t.yaml:2:23: server.fountain_threshold: ",
                 "");
    expect_error("server:\n  fountain_threshold: 101\n",
                 "t.yaml:2:23: server.fountain_threshold: ", "");
}

/* Every accept policy by its name; the eBPF ones parse whether or not the
 * program can load here (the supervisor falls back at start). */
static void test_accept_policies(void **state)
{
    (void)state;
    /* Every value the RouteSet's enum has, by the name an operator writes:
     * the enum's name in lower case with '-' for '_' ("least-loaded"), so a
     * policy added to the proto and not to the reader fails here. */
    const ProtobufCEnumDescriptor *d = &sws__server_config__accept_policy__descriptor;
    assert_int_equal(d->n_values, 6);
    for (unsigned i = 0; i < d->n_values; i++) {
        char name[32], yaml[128];
        size_t n = strlen(d->values[i].name);
        assert_true(n < sizeof(name));
        for (size_t k = 0; k <= n; k++)
            name[k] = d->values[i].name[k] == '_' ? '-' : (char)tolower(d->values[i].name[k]);
        snprintf(yaml, sizeof(yaml), "server:\n  accept_policy: %s\n  fountain_threshold: 60\n",
                 name);
        Sws__Config *cfg = parse_ok(yaml);
        assert_int_equal(cfg->server->accept_policy, d->values[i].value);
        assert_int_equal(cfg->server->fountain_threshold, 60);
        sws_config_free(cfg);
    }
}

static void test_errors_hosts_and_routes(void **state)
{
    (void)state;
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n",
                 "t.yaml:4:9: hosts[0].routes[0]: ",
                 "a route needs one action: respond, static, redirect or proxy");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        respond: {body: x}\n        redirect: {location: /y}\n",
                 "t.yaml:6:19: hosts[0].routes[0].redirect: ",
                 "a route has one action, not both respond and redirect");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - respond: {}\n",
                 "t.yaml:4:9: hosts[0].routes[0]: ", "a route needs a path");
    expect_error("hosts:\n  - name: a.test\n  - names: [b.test, A.TEST]\n",
                 "t.yaml:3:21: hosts[1].names[1]: ",
                 "host name \"a.test\" is already used (line 2, column 11)");
    expect_error("hosts:\n  - names: [a.test, a.test]\n", "t.yaml:2:21: hosts[0].names[1]: ",
                 "already used (line 2, column 13)");
    /* A trailing dot names the same host: found by the RouteSet checker,
     * reported at the node its field path names. */
    expect_error("hosts:\n  - name: a.test\n  - names: [b.test, A.Test.]\n",
                 "t.yaml:3:21: hosts[1].names[1]: ",
                 "host name \"a.test.\" is already used (hosts[0].names[0])");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - {path: /x, respond: {}}\n"
                 "      - {path: /x, match: prefix, redirect: {location: /}}\n",
                 "t.yaml:5:16: hosts[0].routes[1].path: ",
                 "this host already has a prefix route for \"/x\" (line 4, column 16)");
    expect_error("hosts:\n  - name: a.test\n    routes:\n"
                 "      - {path: /x, match: regex, respond: {}}\n",
                 "t.yaml:4:27: hosts[0].routes[0].match: ", "regex paths are not supported yet");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - {path: x, respond: {}}\n",
                 "t.yaml:4:16: hosts[0].routes[0].path: ", "must start with \"/\"");
    expect_error("hosts:\n  - name: a.test\n    routes:\n      - {path: /x, proxy: {pool: p}}\n",
                 "t.yaml:4:34: hosts[0].routes[0].proxy.pool: ", "no pool is named \"p\"");
    expect_error("hosts:\n  - name: \"a.*.test\"\n", "t.yaml:2:11: hosts[0].name: ",
                 "a wildcard must be \"*.\" followed by a name");
    expect_error("hosts:\n  - name: \"*example.com\"\n", "t.yaml:2:11: hosts[0].name: ",
                 "a wildcard must be");
    expect_error("hosts:\n  - name: a.test:8080\n", "t.yaml:2:11: hosts[0].name: ",
                 "a host name has no port");
    expect_error("hosts:\n  - name: a..test\n", "t.yaml:2:11: hosts[0].name: ", "empty label");
    expect_error("hosts:\n  - https_redirect: true\n", "t.yaml:2:5: hosts[0]: ",
                 "a host needs names");
    expect_error("hosts:\n  - names: [a.test]\n    name: b.test\n", "t.yaml:3:11: hosts[0].name: ",
                 "give names or name, not both");
    expect_error("hosts:\n  - names: []\n", "t.yaml:2:12: hosts[0].names: ",
                 "needs at least one name");
}

/* Found by fuzz_config: an empty name, or one in brackets, made the check
 * read the byte before the name (ASan: heap-buffer-overflow). */
static void test_host_name_check_reads_only_the_name(void **state)
{
    (void)state;
    expect_error("hosts:\n  - name:\n", "t.yaml:2:10: hosts[0].name: ", "must not be empty");
    expect_error("hosts:\n  - name: \"\"\n", "t.yaml:2:11: hosts[0].name: ", "must not be empty");
    expect_error("hosts:\n  - name: \"*.\"\n", "t.yaml:2:11: hosts[0].name: ", "a wildcard must be");
    expect_error("hosts:\n  - name: \"*.[::1]\"\n", "t.yaml:2:11: hosts[0].name: ",
                 "a wildcard must be");
    sws_config_free(parse_ok("hosts:\n  - name: \"[::1]\"\n"));
}

/* One form for every refused value: "FILE:LINE:COL: KEY: expected X, got Y". */
static void test_error_form_redirect_status(void **state)
{
    (void)state;
    static const char *const bad[] = { "300", "304", "306", "309", "moved" };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[256], more[128];
        snprintf(yaml, sizeof(yaml),
                 "hosts:\n  - name: a.test\n    routes:\n      - path: /\n"
                 "        redirect: {status: %s, location: /x}\n", bad[i]);
        snprintf(more, sizeof(more), "expected 301, 302, 303, 307 or 308, got \"%s\"", bad[i]);
        expect_error(yaml, "t.yaml:5:28: hosts[0].routes[0].redirect.status: ", more);
    }
}

static void test_error_form_event_loops(void **state)
{
    (void)state;
    expect_error("server:\n  event_loops: many\n", "t.yaml:2:16: server.event_loops: ",
                 "expected auto or a number from 0 (auto) to 1024, got \"many\"");
}

static void test_admin_listen(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("hosts: []\n");
    assert_int_equal(cfg->server->admin->n_listen, 1);
    assert_string_equal(cfg->server->admin->listen[0], "/run/scalws/admin.sock");
    sws_config_free(cfg);
    cfg = parse_ok("server:\n  admin: {listen: [\"/tmp/a.sock\", \"127.0.0.2:9180\", "
                   "\"[::1]:9180\", \"localhost:9181\"]}\n");
    assert_int_equal(cfg->server->admin->n_listen, 4);
    assert_string_equal(cfg->server->admin->listen[0], "/tmp/a.sock");
    assert_string_equal(cfg->server->admin->listen[2], "[::1]:9180");
    sws_config_free(cfg);
    cfg = parse_ok("server:\n  admin: {listen: \"/tmp/b.sock\"}\n");
    assert_int_equal(cfg->server->admin->n_listen, 1);
    sws_config_free(cfg);
    /* An empty list turns the API off. */
    cfg = parse_ok("server:\n  admin:\n    listen: []\n");
    assert_int_equal(cfg->server->admin->n_listen, 0);
    sws_config_free(cfg);
}

static void test_ingress_subscribe(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("hosts: []\n");
    assert_null(cfg->server->ingress);
    sws_config_free(cfg);
    cfg = parse_ok("ingress: {subscribe: \"ipc:///run/scalws/routes.sock\"}\n");
    assert_string_equal(cfg->server->ingress->subscribe, "ipc:///run/scalws/routes.sock");
    sws_config_free(cfg);
    expect_error("ingress:\n  subscribe: \"tcp://10.0.0.1:5555\"\n",
                 "t.yaml:2:14: ingress.subscribe: ",
                 "\"tcp://10.0.0.1:5555\": not a loopback address");
    expect_error("ingress: {subscribe: \"ipc://relative\"}\n", "t.yaml:1:22: ingress.subscribe: ",
                 "an ipc path must be absolute");
    expect_error("ingress: {subscribe: x, publish: y}\n", "t.yaml:1:25: ingress.publish: ",
                 "unknown key");
}

static void test_errors_admin_listen(void **state)
{
    (void)state;
    expect_error("server:\n  admin: {listen: \"10.1.2.3:9180\"}\n",
                 "t.yaml:2:19: server.admin.listen: ",
                 "\"10.1.2.3:9180\" is not a loopback address: the admin API speaks plain "
                 "HTTP, so its token would cross the network in clear; use a Unix socket "
                 "path, 127.0.0.1:PORT or [::1]:PORT");
    expect_error("server:\n  admin:\n    listen: [\"/a.sock\", \":9180\"]\n",
                 "t.yaml:3:25: server.admin.listen[1]: ", "is not a loopback address");
    expect_error("server:\n  admin:\n    listen: [\"/a.sock\", \"/a.sock\"]\n",
                 "t.yaml:3:25: server.admin.listen[1]: ",
                 "/a.sock is already listed (line 3, column 14)");
    /* The same socket however written. */
    expect_error("server:\n  admin:\n    listen: [\"[::1]:9180\", \"[0:0::1]:9180\"]\n",
                 "t.yaml:3:28: server.admin.listen[1]: ",
                 "[::1]:9180 is already listed (line 3, column 14)");
    expect_error("server:\n  admin:\n    listen: \"127.0.0.1\"\n",
                 "t.yaml:3:13: server.admin.listen: ", "bad address");
    expect_error("server:\n  admin:\n    listen: {a: b}\n",
                 "t.yaml:3:13: server.admin.listen: ",
                 "expected an address or a list of addresses, got a mapping");
    expect_error("server:\n  admin: {port: 1}\n", "t.yaml:2:11: server.admin.port: ", "unknown key");
    char yaml[300];
    snprintf(yaml, sizeof(yaml), "server:\n  admin: {listen: \"/%0120d\"}\n", 0);
    expect_error(yaml, "t.yaml:2:19: server.admin.listen: ",
                 "a Unix socket path has at most 107 bytes");
}

static void test_error_form_listen_mapping(void **state)
{
    (void)state;
    expect_error("server:\n  listen: {a: b}\n", "t.yaml:2:12: server.listen.a: ",
                 "unknown key (expected one of: address, tls)");
    expect_error("server:\n  listen: [{a: b}]\n", "t.yaml:2:13: server.listen[0].a: ",
                 "unknown key (expected one of: address, tls)");
    expect_error("server:\n  listen: [{tls: true}]\n", "t.yaml:2:12: server.listen[0]: ",
                 "needs address: \"HOST:PORT\"");
    expect_error("server:\n  listen: [{address: \"127.0.0.1:1\", tls: maybe}]\n",
                 "t.yaml:2:42: server.listen[0].tls: ", "expected true or false");
    expect_error("server:\n  listen: [\":1\", {address: \"0.0.0.0:1\"}]\n",
                 "t.yaml:2:28: server.listen[1].address: ", "0.0.0.0:1 is already listed");
    /* A TLS listener needs a certificate to serve. */
    expect_error("server:\n  listen: [\":1\", {address: \":2\", tls: true}]\n",
                 "t.yaml:2:18: server.listen[1]: ", "a TLS listener needs certificates");
}

static void test_error_form_table_size(void **state)
{
    (void)state;
    char body[70001];
    memset(body, 'x', sizeof(body) - 1);
    body[sizeof(body) - 1] = '\0';
    char *yaml = malloc(sizeof(body) + 256);
    assert_non_null(yaml);
    snprintf(yaml, sizeof(body) + 256,
             "server:\n  table_size: 64k\nhosts:\n  - name: a.test\n    routes:\n"
             "      - {path: /, respond: {body: \"%s\"}}\n", body);
    expect_error(yaml, "t.yaml:2:15: server.table_size: expected a size of at least ",
                 "bytes (what the routes need), got \"64k\"");
    free(yaml);
}

static void test_error_form_tab(void **state)
{
    (void)state;
    expect_error("server:\n\tlisten: \":80\"\n", "t.yaml:2:1: ",
                 "expected spaces, got a tab (YAML indents with spaces only)");
}

/* Requests are matched by their normal path (core/path.h): a route path
 * in another form is refused, with the form to write. */
static void test_route_path_must_be_normal(void **state)
{
    (void)state;
    const char *pre = "hosts:\n  - name: a.test\n    routes:\n      - {path: ";
    char yaml[256];
    static const char *const cases[][2] = {
        { "/%70rivate/", "write \"/private/\"" },
        { "//private/", "write \"/private/\"" },
        { "/a/./b", "write \"/a/b\"" },
        { "/a/../b", "write \"/b\"" },
        { "/a%2fb", "write \"/a%2Fb\"" },
        { "/a|b", "write \"/a%7Cb\"" },
        { "/..", "\"..\" above the root" },
        { "/a%00", "encoded NUL" },
        { "/a%zz", "malformed percent-encoding" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(yaml, sizeof(yaml), "%s\"%s\", respond: {}}\n", pre, cases[i][0]);
        expect_error(yaml, "t.yaml:4:16: hosts[0].routes[0].path: ", cases[i][1]);
    }
    snprintf(yaml, sizeof(yaml), "%s\"/a%%2Fb/%%C3%%A9;x=1/\", respond: {}}\n", pre);
    sws_config_free(parse_ok(yaml));
}

static void test_errors_respond_static_redirect(void **state)
{
    (void)state;
    const char *pre = "hosts:\n  - name: a.test\n    routes:\n      - path: /\n";
    char yaml[512];

    snprintf(yaml, sizeof(yaml), "%s        respond: {headers: {\"Bad Name\": x}}\n", pre);
    expect_error(yaml, "t.yaml:5:29: hosts[0].routes[0].respond.headers.Bad Name: ",
                 "a header name may contain only");
    snprintf(yaml, sizeof(yaml), "%s        respond: {headers: {X-A: \"a\\r\\nb\"}}\n", pre);
    expect_error(yaml, "t.yaml:5:34: hosts[0].routes[0].respond.headers.X-A: ",
                 "must not contain CR, LF");
    snprintf(yaml, sizeof(yaml), "%s        respond: {headers: {Content-Length: 5}}\n", pre);
    expect_error(yaml, "t.yaml:5:29: hosts[0].routes[0].respond.headers.Content-Length: ",
                 "is set by the server");
    snprintf(yaml, sizeof(yaml), "%s        static: {root: /nonexistent-sws-dir}\n", pre);
    expect_error(yaml, "t.yaml:5:24: hosts[0].routes[0].static.root: ",
                 "No such file or directory");
    snprintf(yaml, sizeof(yaml), "%s        static: {root: /dev/null}\n", pre);
    expect_error(yaml, "t.yaml:5:24: hosts[0].routes[0].static.root: ", "is not a directory");
    snprintf(yaml, sizeof(yaml), "%s        static: {index: a.html}\n", pre);
    expect_error(yaml, "t.yaml:5:17: hosts[0].routes[0].static: ", "static needs a root");
    snprintf(yaml, sizeof(yaml), "%s        static: {root: /, index: a/b.html}\n", pre);
    expect_error(yaml, "t.yaml:5:34: hosts[0].routes[0].static.index: ", "must be a file name");
    snprintf(yaml, sizeof(yaml), "%s        redirect: {status: 301}\n", pre);
    expect_error(yaml, "t.yaml:5:19: hosts[0].routes[0].redirect: ", "needs a location");
    snprintf(yaml, sizeof(yaml), "%s        redirect: {location: \"/a b\"}\n", pre);
    expect_error(yaml, "t.yaml:5:30: hosts[0].routes[0].redirect.location: ",
                 "must not contain spaces");
}

static void test_errors_file(void **state)
{
    (void)state;
    expect_error("", "t.yaml:1:1: ", "the file is empty");
    expect_error("# only a comment\n\n", "t.yaml:1:1: ", "the file is empty");
    expect_error("hosts: []\n---\nserver: {}\n", "t.yaml:3:1: ", "a second YAML document");
    /* libyaml's own syntax errors keep their place too. */
    expect_error("server:\n  backlog: 1\n    user: x\n", "t.yaml:3:9: ",
                 "mapping values are not allowed in this context");
    expect_error("hosts: [\n", "t.yaml:2:1: ", "did not find expected node content");
    expect_error("hosts:\n  - name: *\n", "t.yaml:2:12: ", "quote it, as in name: \"*\"");
}

/* YAML aliases multiply a small file: 200 uses of a 4 KiB body are 800 KiB
 * of parse, fine with a 1m table. With a 64k table, 400 uses cross the
 * bound (16 x 64 KiB) and are refused at the use that crosses it, before
 * the memory is taken. */
static char *aliased_bodies(const char *table_size, unsigned uses)
{
    size_t cap = 8192 + uses * 64;
    char *yaml = malloc(cap);
    assert_non_null(yaml);
    int n = snprintf(yaml, cap, "server:\n  table_size: %s\n  server_header: &b \"", table_size);
    for (int i = 0; i < 4096; i++)
        yaml[n++] = 'b';
    n += snprintf(yaml + n, cap - (size_t)n, "\"\nhosts:\n  - name: \"*\"\n    routes:\n");
    for (unsigned i = 0; i < uses; i++)
        n += snprintf(yaml + n, cap - (size_t)n, "      - {path: /r%u, respond: {body: *b}}\n", i);
    return yaml;
}

static void test_alias_expansion_is_bounded(void **state)
{
    (void)state;
    char *yaml = aliased_bodies("1m", 200);
    Sws__Config *cfg = parse_ok(yaml);
    assert_int_equal(cfg->routes->hosts[0]->n_routes, 200);
    assert_int_equal(cfg->routes->hosts[0]->routes[199]->respond->body.len, 4096);
    sws_config_free(cfg);
    free(yaml);

    yaml = aliased_bodies("64k", 400);
    char err[512] = "";
    cfg = (Sws__Config *)1;
    assert_int_equal(sws_config_parse(yaml, strlen(yaml), "t.yaml", &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    assert_non_null(strstr(err, ": hosts[0].routes["));
    assert_non_null(strstr(err, "].respond.body: the configuration takes more than 1048576 bytes "
                                "once YAML aliases are expanded"));
    assert_non_null(strstr(err, "server.table_size (65536 bytes)"));
    free(yaml);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* protocol https: verification on by default against the CA file, read
 * by the configuration reader (relative to the file) into the RouteSet;
 * with verify: false nothing is read. h2 and grpc: h2c without tls, over
 * TLS with it, read as https's. */
static void test_pool_https(void **state)
{
    (void)state;
    char dir[64], ca[128], file[160], err[512];
    Sws__Config *cfg = NULL;
    size_t len = 0;
    char *pem = test_pem_cert_text(&len);

    assert_non_null(pem);
    make_temp_dir(dir, sizeof(dir));
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(file, sizeof(file), "%s/scalws.yaml", dir);
    write_file(ca, pem);
    write_file(file, "pools:\n"
                     "  - {name: a, protocol: https, tls: {ca: ca.pem, sni: api.test},\n"
                     "     members: [\"127.0.0.1:443\"]}\n"
                     "  - {name: b, protocol: https, tls: {verify: false, ca: nope.pem}}\n"
                     "  - {name: c}\n"
                     "  - {name: d, protocol: h2}\n"
                     "  - {name: e, protocol: grpc}\n"
                     "  - {name: f, protocol: h2, tls: {ca: ca.pem}}\n"
                     "  - {name: g, protocol: grpc, tls: {verify: false, sni: rpc.test}}\n"
                     "hosts: []\n");
    if (sws_config_load(file, &cfg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    Sws__Pool **pools = cfg->routes->pools;
    assert_int_equal(pools[0]->protocol, SWS__POOL__PROTOCOL__HTTPS);
    assert_false(pools[0]->tls->skip_verify);
    assert_string_equal(pools[0]->tls->ca, ca); /* relative to the file */
    assert_string_equal(pools[0]->tls->sni, "api.test");
    assert_int_equal(pools[0]->tls->ca_pem.len, len);
    assert_memory_equal(pools[0]->tls->ca_pem.data, pem, len);
    assert_true(pools[1]->tls->skip_verify);
    assert_int_equal(pools[1]->tls->ca_pem.len, 0);
    assert_int_equal(pools[2]->protocol, SWS__POOL__PROTOCOL__HTTP);
    assert_null(pools[2]->tls);
    assert_int_equal(pools[3]->protocol, SWS__POOL__PROTOCOL__H2);
    assert_null(pools[3]->tls);
    assert_int_equal(pools[4]->protocol, SWS__POOL__PROTOCOL__GRPC);
    assert_null(pools[4]->tls);
    assert_int_equal(pools[5]->protocol, SWS__POOL__PROTOCOL__H2);
    assert_false(pools[5]->tls->skip_verify);
    assert_string_equal(pools[5]->tls->ca, ca);
    assert_int_equal(pools[5]->tls->ca_pem.len, len);
    assert_int_equal(pools[6]->protocol, SWS__POOL__PROTOCOL__GRPC);
    assert_true(pools[6]->tls->skip_verify);
    assert_string_equal(pools[6]->tls->sni, "rpc.test");
    sws_config_free(cfg);

    /* Read from a file, the CA file is opened: its refusals at tls.ca. */
    static const struct {
        const char *ca, *more;
    } bad[] = {
        { "/nonexistent-sws/ca.pem",
          "/nonexistent-sws/ca.pem: cannot open the CA file: No such file or directory" },
        { "/etc/passwd", "/etc/passwd: holds no PEM certificate" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[256], want[256];

        snprintf(yaml, sizeof(yaml), "pools:\n  - {name: a, protocol: https, tls: {ca: %s}}\n",
                 bad[i].ca);
        write_file(file, yaml);
        snprintf(want, sizeof(want), "%s:2:42: pools[0].tls.ca: %s", file, bad[i].more);
        cfg = (Sws__Config *)1;
        assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), -1);
        assert_null(cfg);
        assert_string_equal(err, want);
    }
    unlink(file);
    unlink(ca);
    rmdir(dir);
    free(pem);
}

static void test_static_root_relative_to_file(void **state)
{
    (void)state;
    char dir[64], sub[128], www[128], file[160], err[512], real_www[PATH_MAX],
        real_conf[PATH_MAX], cwd[PATH_MAX];
    Sws__Config *cfg = NULL;

    make_temp_dir(dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/conf", dir);
    snprintf(www, sizeof(www), "%s/www", dir);
    snprintf(file, sizeof(file), "%s/scalws.yaml", sub);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(mkdir(www, 0700), 0);
    assert_non_null(realpath(www, real_www));
    assert_non_null(realpath(sub, real_conf));
    write_file(file, "hosts:\n"
                     "  - name: \"*\"\n"
                     "    routes:\n"
                     "      - {path: /a/, static: {root: ../www}}\n"
                     "      - {path: /b/, static: {root: .}}\n"
                     "      - {path: /c/, static: {root: ../conf/../www/}}\n");

    assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), 0);
    Sws__Host *h = cfg->routes->hosts[0];
    assert_string_equal(h->routes[0]->static_->root, real_www);
    assert_string_equal(h->routes[1]->static_->root, real_conf);
    assert_string_equal(h->routes[2]->static_->root, real_www);
    assert_string_equal(h->routes[0]->static_->index, "index.html");
    assert_false(h->routes[0]->static_->follow_symlinks);
    sws_config_free(cfg);

    /* A missing relative root names the file and the path it tried. */
    write_file(file, "hosts:\n  - name: \"*\"\n    routes:\n"
                     "      - {path: /, static: {root: ../nope}}\n");
    assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    char want[600];
    snprintf(want, sizeof(want),
             "%s:4:34: hosts[0].routes[0].static.root: \"../nope\" (%s/../nope): "
             "No such file or directory", file, sub);
    assert_string_equal(err, want);

    /* From memory (no file), a relative root is relative to the cwd. */
    cfg = parse_ok("hosts:\n  - name: \"*\"\n    routes:\n      - {path: /, static: {root: .}}\n");
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_non_null(realpath(cwd, real_www));
    assert_string_equal(cfg->routes->hosts[0]->routes[0]->static_->root, real_www);
    sws_config_free(cfg);

    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(sub), 0);
    assert_int_equal(rmdir(www), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* ---- TLS ---- */

static void test_tls_defaults_and_keys(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("server:\n  listen: [\":1\", {address: \"[::1]:2\"}, "
                                "{address: \":3\", tls: false}]\n");
    assert_int_equal(cfg->server->n_listen, 3);
    assert_string_equal(cfg->server->listen[1]->address, "[::1]:2");
    assert_false(cfg->server->listen[1]->tls);
    Sws__Tls *tls = cfg->routes->tls;
    assert_non_null(tls);
    assert_null(tls->default_certificate);
    assert_int_equal(tls->n_protocols, 0); /* both */
    assert_string_equal(tls->ciphers, SWS_DEFAULT_TLS_CIPHERS);
    assert_string_equal(tls->ciphersuites, SWS_DEFAULT_TLS_CIPHERSUITES);
    assert_int_equal(tls->handshake_timeout_ms, 10000);
    assert_true(tls->session_tickets);
    assert_int_equal(tls->ticket_key_rotation_ms, 12u * 3600 * 1000);
    sws_config_free(cfg);

    cfg = parse_ok("server:\n  tls:\n    protocols: [TLSv1.3]\n    ciphers: ECDHE-RSA-AES128-GCM-SHA256\n"
                   "    ciphersuites: TLS_AES_128_GCM_SHA256\n    handshake_timeout: 2s\n"
                   "    session_tickets: false\n    ticket_key_rotation: 1h\n");
    tls = cfg->routes->tls;
    assert_int_equal(tls->n_protocols, 1);
    assert_int_equal(tls->protocols[0], SWS__TLS__PROTOCOL__TLSV1_3);
    assert_string_equal(tls->ciphers, "ECDHE-RSA-AES128-GCM-SHA256");
    assert_string_equal(tls->ciphersuites, "TLS_AES_128_GCM_SHA256");
    assert_int_equal(tls->handshake_timeout_ms, 2000);
    assert_false(tls->session_tickets);
    assert_int_equal(tls->ticket_key_rotation_ms, 3600u * 1000);
    sws_config_free(cfg);

    expect_error("server:\n  tls: {protocols: [TLSv1.1]}\n", "t.yaml:2:21: server.tls.protocols[0]: ",
                 "expected TLSv1.2 or TLSv1.3 (nothing older is offered), got \"TLSv1.1\"");
    expect_error("server:\n  tls: {protocols: []}\n", "t.yaml:2:20: server.tls.protocols: ",
                 "needs TLSv1.2, TLSv1.3 or both");
    expect_error("server:\n  tls: {ciphers: RC4-NOPE}\n", "t.yaml:2:18: server.tls.ciphers: ",
                 "no cipher OpenSSL knows in \"RC4-NOPE\"");
    expect_error("server:\n  tls: {ocsp: true}\n", "t.yaml:2:9: server.tls.ocsp: ", "unknown key");
    expect_error("server:\n  tls: {ticket_key_rotation: 1s}\n",
                 "t.yaml:2:30: server.tls.ticket_key_rotation: ", "from 1m to 168h");
    expect_error("hosts:\n  - name: a\n    certificates: [{cert: a.crt}]\n",
                 "t.yaml:3:20: hosts[0].certificates[0]: ", "needs cert: (the PEM chain) and key:");
    /* From memory nothing is read: the checker sees no bytes. */
    expect_error("hosts:\n  - name: a\n    certificates: [{cert: a.crt, key: a.key}]\n",
                 "t.yaml:3:27: hosts[0].certificates[0].cert: ", "the certificate file is empty");
}

static void write_bytes(const char *path, const char *p, size_t n)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* The supervisor reads the files (relative to the configuration file);
 * the RouteSet carries their bytes. */
static void test_tls_certificates_from_files(void **state)
{
    (void)state;
    char dir[64], path[160], file[160], err[1024], want[400];
    test_pem_t rsa, ec;
    Sws__Config *cfg = NULL;

    test_pem_make(&rsa, 0, "a.test");
    test_pem_make(&ec, 1, "a.test");
    make_temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/rsa.crt", dir);
    write_bytes(path, rsa.cert, rsa.cert_len);
    snprintf(path, sizeof(path), "%s/rsa.key", dir);
    write_bytes(path, rsa.key, rsa.key_len);
    snprintf(path, sizeof(path), "%s/ec.crt", dir);
    write_bytes(path, ec.cert, ec.cert_len);
    snprintf(path, sizeof(path), "%s/ec.key", dir);
    write_bytes(path, ec.key, ec.key_len);
    snprintf(file, sizeof(file), "%s/scalws.yaml", dir);
    write_file(file, "server:\n  listen: [{address: \"127.0.0.1:1\", tls: true}]\n"
                     "  tls: {default_certificate: {cert: ec.crt, key: ec.key}}\n"
                     "hosts:\n  - name: a.test\n"
                     "    certificates: [{cert: rsa.crt, key: rsa.key}, {cert: ec.crt, key: ec.key}]\n");
    if (sws_config_load(file, &cfg, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_true(cfg->server->listen[0]->tls);
    Sws__Host *h = cfg->routes->hosts[0];
    assert_int_equal(h->n_certificates, 2);
    assert_int_equal(h->certificates[0]->cert_pem.len, rsa.cert_len);
    assert_memory_equal(h->certificates[0]->cert_pem.data, rsa.cert, rsa.cert_len);
    assert_memory_equal(h->certificates[1]->key_pem.data, ec.key, ec.key_len);
    snprintf(path, sizeof(path), "%s/rsa.crt", dir);
    assert_string_equal(h->certificates[0]->cert_path, path);
    assert_memory_equal(cfg->routes->tls->default_certificate->cert_pem.data, ec.cert,
                        ec.cert_len);
    sws_config_free(cfg);

    /* A key that is not the certificate's: at the key, naming the file. */
    write_file(file, "hosts:\n  - name: a.test\n"
                     "    certificates: [{cert: rsa.crt, key: ec.key}]\n");
    assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s:3:41: hosts[0].certificates[0].key: %s/ec.key: the key does "
             "not match the certificate", file, dir);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("got %s\nwant %s", err, want);

    /* A missing file. */
    write_file(file, "server:\n  tls:\n    default_certificate: {cert: nope.crt, key: ec.key}\n");
    assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s:3:33: server.tls.default_certificate.cert: %s/nope.crt: "
             "cannot open a PEM file: No such file or directory", file, dir);
    assert_string_equal(err, want);

    /* Not PEM. */
    write_file(file, "server:\n  tls:\n    default_certificate: {cert: scalws.yaml, key: ec.key}\n");
    assert_int_equal(sws_config_load(file, &cfg, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s:3:33: server.tls.default_certificate.cert: %s/scalws.yaml: "
             "no PEM certificate could be read", file, dir);
    if (strncmp(err, want, strlen(want)) != 0)
        fail_msg("got %s\nwant %s", err, want);

    static const char *const names[] = { "rsa.crt", "rsa.key", "ec.crt", "ec.key", "scalws.yaml" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(dir), 0);
    test_pem_free(&rsa);
    test_pem_free(&ec);
}

static void test_load_errors(void **state)
{
    (void)state;
    char err[512], dir[64];
    Sws__Config *cfg = (Sws__Config *)1;

    assert_int_equal(sws_config_load("/nonexistent-sws/scalws.yaml", &cfg, err, sizeof(err)), -1);
    assert_null(cfg);
    assert_string_equal(err, "/nonexistent-sws/scalws.yaml: cannot open the configuration file: "
                             "No such file or directory");

    make_temp_dir(dir, sizeof(dir));
    assert_int_equal(sws_config_load(dir, &cfg, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is a directory"));
    assert_int_equal(rmdir(dir), 0);
}

/* ---- pools and proxy routes ---- */

static void test_pools_defaults(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok("pools:\n  - name: api\n    members: [127.0.0.1:9001]\n"
                                "  - name: none\n"
                                "hosts:\n  - name: a.test\n    routes:\n"
                                "      - {path: /, proxy: {pool: api}}\n");
    Sws__Pool *pool = cfg->routes->pools[0];

    assert_int_equal(cfg->routes->n_pools, 2);
    assert_string_equal(pool->name, "api");
    assert_int_equal(pool->balance, SWS__POOL__BALANCE__ROUND_ROBIN);
    assert_string_equal(pool->hash_key, "");
    assert_int_equal(pool->keepalive, 32);
    assert_int_equal(pool->retries, 2);
    assert_int_equal(pool->max_conns, 0);
    assert_int_equal(pool->timeouts->connect_ms, 5000);
    assert_int_equal(pool->timeouts->send_ms, 60000);
    assert_int_equal(pool->timeouts->read_ms, 60000);
    assert_int_equal(pool->timeouts->idle_ms, 60000);
    assert_int_equal(pool->health->max_fails, 3);
    assert_int_equal(pool->health->fail_window_ms, 10000);
    assert_int_equal(pool->health->cooldown_ms, 10000);
    assert_int_equal(pool->n_members, 1);
    assert_string_equal(pool->members[0]->address, "127.0.0.1:9001");
    assert_int_equal(pool->members[0]->weight, 1);
    assert_int_equal(pool->members[0]->state, SWS__MEMBER__STATE__UP);
    assert_int_equal(pool->members[0]->id, 0); /* derived by the table (ADR 0013) */
    assert_int_equal(cfg->routes->pools[1]->n_members, 0);
    Sws__Proxy *px = cfg->routes->hosts[0]->routes[0]->proxy;
    assert_int_equal(cfg->routes->hosts[0]->routes[0]->action_case, SWS__ROUTE__ACTION_PROXY);
    assert_string_equal(px->pool, "api");
    assert_string_equal(px->host_header, "");
    assert_string_equal(px->via, ""); /* no Via unless asked */
    assert_true(protobuf_c_message_check(&cfg->base));
    sws_config_free(cfg);
}

static void test_pools_full(void **state)
{
    (void)state;
    Sws__Config *cfg = parse_ok(
        "pools:\n"
        "  - name: api\n"
        "    balance: hash\n"
        "    hash_key: cookie:sid\n"
        "    keepalive: 0\n"
        "    retries: 0\n"
        "    max_conns: 64\n"
        "    timeouts: {connect: 500ms, send: 2m, read: 30, idle: 1h}\n"
        "    health: {max_fails: 0, fail_window: 1m, cooldown: 2s}\n"
        "    members:\n"
        "      - address: \"[::1]:9002\"\n"
        "        weight: 1000\n"
        "        state: draining\n"
        "      - {address: backend.internal:80, state: down}\n"
        "  - {name: lc, balance: least_conn}\n"
        "hosts:\n  - name: a.test\n    routes:\n"
        "      - {path: /, proxy: {pool: api, host_header: \"[::1]:8080\", via: true}}\n"
        "      - {path: /b, proxy: {pool: api, via: edge-1}}\n"
        "      - {path: /c, proxy: {pool: api, via: false}}\n");
    Sws__Pool *pool = cfg->routes->pools[0];

    assert_int_equal(pool->balance, SWS__POOL__BALANCE__HASH);
    assert_string_equal(pool->hash_key, "cookie:sid");
    assert_int_equal(pool->keepalive, 0);
    assert_int_equal(pool->retries, 0);
    assert_int_equal(pool->max_conns, 64);
    assert_int_equal(pool->timeouts->connect_ms, 500);
    assert_int_equal(pool->timeouts->send_ms, 120000);
    assert_int_equal(pool->timeouts->read_ms, 30000);
    assert_int_equal(pool->timeouts->idle_ms, 3600000);
    assert_int_equal(pool->health->max_fails, 0);
    assert_int_equal(pool->health->fail_window_ms, 60000);
    assert_int_equal(pool->health->cooldown_ms, 2000);
    assert_string_equal(pool->members[0]->address, "[::1]:9002");
    assert_int_equal(pool->members[0]->weight, 1000);
    assert_int_equal(pool->members[0]->state, SWS__MEMBER__STATE__DRAINING);
    assert_int_equal(pool->members[1]->weight, 1);
    assert_int_equal(pool->members[1]->state, SWS__MEMBER__STATE__DOWN);
    assert_int_equal(cfg->routes->pools[1]->balance, SWS__POOL__BALANCE__LEAST_CONN);
    assert_string_equal(cfg->routes->hosts[0]->routes[0]->proxy->host_header, "[::1]:8080");
    assert_string_equal(cfg->routes->hosts[0]->routes[0]->proxy->via, "scalws");
    assert_string_equal(cfg->routes->hosts[0]->routes[1]->proxy->via, "edge-1");
    assert_string_equal(cfg->routes->hosts[0]->routes[2]->proxy->via, "");
    sws_config_free(cfg);
}

/* Every bad value of a pool or a proxy route, at its line and column. */
static void test_pool_errors(void **state)
{
    (void)state;
    static const char route[] = "hosts:\n  - name: a.test\n    routes:\n";
    static const struct {
        const char *yaml, *want, *more;
    } cases[] = {
        { "pools: {name: a}\n", "t.yaml:1:8: pools: ", "expected a list, got a mapping" },
        { "pools:\n  - members: []\n", "t.yaml:2:5: pools[0]: ", "a pool needs a name" },
        { "pools:\n  - {name: a, colour: red}\n", "t.yaml:2:15: pools[0].colour: ",
          "unknown key (expected one of: name, members, balance, hash_key, keepalive, retries, "
          "max_conns, timeouts, health, protocol, tls)" },
        { "pools:\n  - {name: a, protocol: h2, tls: {verify: maybe}}\n",
          "t.yaml:2:43: pools[0].tls.verify: ", "expected true or false" },
        { "pools:\n  - {name: a, protocol: ftp}\n", "t.yaml:2:25: pools[0].protocol: ",
          "expected http, https, h2 or grpc, got \"ftp\"" },
        { "pools:\n  - {name: a, tls: {verify: false}}\n", "t.yaml:2:20: pools[0].tls: ",
          "tls needs protocol: https, h2 or grpc" },
        { "pools:\n  - {name: a, protocol: https, tls: {verify: maybe}}\n",
          "t.yaml:2:46: pools[0].tls.verify: ", "expected true or false" },
        /* Parsed from text, the CA file is not opened (test_pool_https
         * reads one): were it read, the checker would say "holds no PEM
         * certificate". */
        { "pools:\n  - {name: a, protocol: https, tls: {ca: /etc/passwd}}\n",
          "t.yaml:2:42: pools[0].tls.ca: ",
          "/etc/passwd: verifying the members needs CA certificates" },
        { "pools:\n  - {name: a, protocol: https, tls: {verify: false, sni: \"*.a.test\"}}\n",
          "t.yaml:2:58: pools[0].tls.sni: ", "a wildcard names no one host" },
        { "pools:\n  - {name: a, protocol: https, tls: {verify: false, sni: \"[::1]\"}}\n",
          "t.yaml:2:58: pools[0].tls.sni: ", "an IP address is never sent as SNI" },
        { "pools:\n  - name: a/b\n", "t.yaml:2:11: pools[0].name: ",
          "\"a/b\": may contain only letters, digits, '-', '_' and '.'" },
        { "pools:\n  - name: a\n  - name: a\n", "t.yaml:3:11: pools[1].name: ",
          "pool \"a\" is already defined (line 2, column 11)" },
        { "pools:\n  - {name: a, balance: random}\n", "t.yaml:2:24: pools[0].balance: ",
          "expected round_robin, least_conn or hash, got \"random\"" },
        { "pools:\n  - {name: a, balance: hash}\n", "t.yaml:2:24: pools[0].balance: ",
          "balance hash needs a hash_key: client_ip, header:NAME or cookie:NAME" },
        { "pools:\n  - {name: a, hash_key: client_ip}\n", "t.yaml:2:25: pools[0].hash_key: ",
          "a hash_key needs balance: hash" },
        { "pools:\n  - {name: a, balance: hash, hash_key: ip}\n",
          "t.yaml:2:40: pools[0].hash_key: ",
          "\"ip\": expected client_ip, header:NAME or cookie:NAME" },
        { "pools:\n  - {name: a, balance: hash, hash_key: \"header:a b\"}\n",
          "t.yaml:2:40: pools[0].hash_key: ", "NAME must be a header or cookie name" },
        { "pools:\n  - {name: a, keepalive: -1}\n", "t.yaml:2:26: pools[0].keepalive: ",
          "expected a number from 0 to 10000, got \"-1\"" },
        { "pools:\n  - {name: a, retries: 101}\n", "t.yaml:2:24: pools[0].retries: ",
          "expected a number from 0 to 100, got \"101\"" },
        { "pools:\n  - {name: a, max_conns: 1000001}\n", "t.yaml:2:26: pools[0].max_conns: ",
          "expected a number from 0 to 1000000" },
        { "pools:\n  - {name: a, timeouts: {connect: 0}}\n",
          "t.yaml:2:35: pools[0].timeouts.connect: ", "from 1ms to 24h, got \"0\"" },
        { "pools:\n  - {name: a, timeouts: {read: 25h}}\n",
          "t.yaml:2:32: pools[0].timeouts.read: ", "from 1ms to 24h, got \"25h\"" },
        { "pools:\n  - {name: a, timeouts: {write: 1s}}\n",
          "t.yaml:2:26: pools[0].timeouts.write: ", "unknown key" },
        { "pools:\n  - {name: a, health: {max_fails: 10001}}\n",
          "t.yaml:2:35: pools[0].health.max_fails: ", "expected a number from 0 to 10000" },
        { "pools:\n  - {name: a, health: {cooldown: 0s}}\n",
          "t.yaml:2:34: pools[0].health.cooldown: ", "from 1ms to 24h" },
        { "pools:\n  - {name: a, members: [127.0.0.1]}\n", "t.yaml:2:25: pools[0].members[0]: ",
          "\"127.0.0.1\": the port is missing (expected HOST:PORT)" },
        { "pools:\n  - {name: a, members: [\"127.0.0.1:0\"]}\n",
          "t.yaml:2:25: pools[0].members[0]: ",
          "\"127.0.0.1:0\": the port must be a number from 1 to 65535" },
        { "pools:\n  - {name: a, members: [\"::1:80\"]}\n", "t.yaml:2:25: pools[0].members[0]: ",
          "an IPv6 address needs brackets, as in [::1]:8080" },
        /* nginx's proxy_pass names a URL: an operator coming from it writes
         * one, and was told about IPv6 brackets. */
        { "pools:\n  - {name: a, members: [\"http://10.0.0.1:80\"]}\n",
          "t.yaml:2:25: pools[0].members[0]: ",
          "\"http://10.0.0.1:80\": a URL; expected HOST:PORT (a pool says http or https by its "
          "protocol)" },
        { "pools:\n  - {name: a, members: [\"[::x]:80\"]}\n",
          "t.yaml:2:25: pools[0].members[0]: ", "not an IPv6 address" },
        { "pools:\n  - {name: a, members: [\"256.1.1.1:80\"]}\n",
          "t.yaml:2:25: pools[0].members[0]: ", "not an IPv4 address" },
        { "pools:\n  - {name: a, members: [\"b_d..x:80\"]}\n",
          "t.yaml:2:25: pools[0].members[0]: ", "has an empty label" },
        { "pools:\n  - {name: a, members: [{weight: 2}]}\n", "t.yaml:2:25: pools[0].members[0]: ",
          "a member needs an address (HOST:PORT)" },
        { "pools:\n  - {name: a, members: [{address: \"h:1\", weight: 0}]}\n",
          "t.yaml:2:50: pools[0].members[0].weight: ", "expected a number from 1 to 1000" },
        { "pools:\n  - {name: a, members: [{address: \"h:1\", weight: 1001}]}\n",
          "t.yaml:2:50: pools[0].members[0].weight: ", "expected a number from 1 to 1000" },
        { "pools:\n  - {name: a, members: [{address: \"h:1\", state: gone}]}\n",
          "t.yaml:2:49: pools[0].members[0].state: ",
          "expected up, draining or down, got \"gone\"" },
        /* The same member written two ways: the checker's canonical form. */
        { "pools:\n  - name: a\n    members:\n      - \"[::1]:80\"\n      - \"[0::1]:80\"\n",
          "t.yaml:5:9: pools[0].members[1].address: ",
          "\"[0::1]:80\" is already a member of this pool (members[0])" },
    };
    static const struct {
        const char *route, *want, *more;
    } proxies[] = {
        { "      - {path: /, proxy: {}}\n", "t.yaml:5:26: hosts[0].routes[0].proxy: ",
          "a proxy needs a pool" },
        { "      - {path: /, proxy: {pool: a, vias: b}}\n",
          "t.yaml:5:36: hosts[0].routes[0].proxy.vias: ", "unknown key" },
        { "      - {path: /, proxy: {pool: a, via: \"a b\"}}\n",
          "t.yaml:5:41: hosts[0].routes[0].proxy.via: ", "true, false or a pseudonym" },
        { "      - {path: /, proxy: {pool: a, via: }}\n",
          "t.yaml:5:41: hosts[0].routes[0].proxy.via: ", "true, false or a pseudonym" },
        { "      - {path: /, proxy: {pool: b}}\n", "t.yaml:5:33: hosts[0].routes[0].proxy.pool: ",
          "no pool is named \"b\"" },
        { "      - {path: /, proxy: {pool: a, host_header: \"a b\"}}\n",
          "t.yaml:5:49: hosts[0].routes[0].proxy.host_header: ",
          "\"a b\": may contain only letters" },
        { "      - {path: /, proxy: {pool: a, host_header: \"a:0\"}}\n",
          "t.yaml:5:49: hosts[0].routes[0].proxy.host_header: ",
          "the port must be a number from 1 to 65535" },
        { "      - {path: /, proxy: {pool: a}, respond: {}}\n",
          "t.yaml:5:46: hosts[0].routes[0].respond: ",
          "a route has one action, not both respond and proxy" },
    };
    char yaml[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(cases[i].yaml, cases[i].want, cases[i].more);
    for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++) {
        snprintf(yaml, sizeof(yaml), "pools: [{name: a}]\n%s%s", route, proxies[i].route);
        expect_error(yaml, proxies[i].want, proxies[i].more);
    }
}

/* The file `make run` uses must stay valid. */
static void test_example_config(void **state)
{
    (void)state;
    char err[512], real[PATH_MAX];
    Sws__Config *cfg = NULL;

    if (access("conf/scalws.yaml", R_OK) != 0) {
        /* test/run.sh runs from the repository root; by hand from elsewhere
         * the file is not there to check. */
        print_message("skipped: conf/scalws.yaml not found (run from the repository root)\n");
        skip();
    }
    if (sws_config_load("conf/scalws.yaml", &cfg, err, sizeof(err)) != 0)
        print_error("%s\n", err);
    assert_non_null(cfg);
    assert_string_equal(cfg->server->listen[0]->address, "127.0.0.1:8080");
    Sws__Host *h = cfg->routes->hosts[0];
    assert_string_equal(h->names[0], "*");
    assert_string_equal(h->routes[0]->path, "/");
    assert_int_equal(h->routes[0]->match, SWS__ROUTE__MATCH__EXACT);
    assert_int_equal(h->routes[0]->respond->status, 200);
    assert_memory_equal(h->routes[0]->respond->body.data, "hello, world\n", 13);
    assert_string_equal(h->routes[1]->path, "/docs/");
    assert_non_null(realpath(".", real));
    assert_string_equal(h->routes[1]->static_->root, real);
    sws_config_free(cfg);
}

/* The proxy example: its pools as the comments describe them. */
static void test_proxy_example_config(void **state)
{
    (void)state;
    char err[512];
    Sws__Config *cfg = NULL;

    if (access("conf/proxy.yaml", R_OK) != 0) {
        print_message("skipped: conf/proxy.yaml not found (run from the repository root)\n");
        skip();
    }
    if (sws_config_load("conf/proxy.yaml", &cfg, err, sizeof(err)) != 0)
        print_error("%s\n", err);
    assert_non_null(cfg);
    assert_int_equal(cfg->routes->n_pools, 4);
    assert_int_equal(cfg->routes->pools[0]->n_members, 3);
    assert_int_equal(cfg->routes->pools[0]->members[1]->weight, 2);
    assert_int_equal(cfg->routes->pools[0]->members[2]->state, SWS__MEMBER__STATE__DRAINING);
    assert_int_equal(cfg->routes->pools[1]->balance, SWS__POOL__BALANCE__HASH);
    assert_string_equal(cfg->routes->pools[1]->hash_key, "cookie:session");
    assert_string_equal(cfg->routes->hosts[0]->routes[2]->proxy->host_header,
                        "sessions.internal");
    assert_int_equal(cfg->routes->pools[2]->protocol, SWS__POOL__PROTOCOL__HTTPS);
    assert_true(cfg->routes->pools[2]->tls->ca_pem.len > 0); /* the system's store */
    assert_int_equal(cfg->routes->pools[3]->protocol, SWS__POOL__PROTOCOL__GRPC);
    sws_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_accept_policies),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_value_forms),
        cmocka_unit_test(test_server_tokens),
        cmocka_unit_test(test_errors_keys_and_types),
        cmocka_unit_test(test_errors_ranges),
        cmocka_unit_test(test_errors_server),
        cmocka_unit_test(test_errors_hosts_and_routes),
        cmocka_unit_test(test_host_name_check_reads_only_the_name),
        cmocka_unit_test(test_error_form_redirect_status),
        cmocka_unit_test(test_error_form_event_loops),
        cmocka_unit_test(test_error_form_listen_mapping),
        cmocka_unit_test(test_admin_listen),
        cmocka_unit_test(test_errors_admin_listen),
        cmocka_unit_test(test_ingress_subscribe),
        cmocka_unit_test(test_error_form_table_size),
        cmocka_unit_test(test_error_form_tab),
        cmocka_unit_test(test_route_path_must_be_normal),
        cmocka_unit_test(test_errors_respond_static_redirect),
        cmocka_unit_test(test_errors_file),
        cmocka_unit_test(test_alias_expansion_is_bounded),
        cmocka_unit_test(test_static_root_relative_to_file),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_tls_defaults_and_keys),
        cmocka_unit_test(test_tls_certificates_from_files),
        cmocka_unit_test(test_pools_defaults),
        cmocka_unit_test(test_pools_full),
        cmocka_unit_test(test_pool_errors),
        cmocka_unit_test(test_pool_https),
        cmocka_unit_test(test_example_config),
        cmocka_unit_test(test_proxy_example_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
