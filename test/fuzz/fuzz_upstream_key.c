/*
 * Fuzz target: a request's hash key (worker/upstream_key.h).
 *
 * The input is a first line and a rest. The first line is a hash_key spec
 * for the RouteSet checker's parser (sws_routeset_hash_key_problem), and the name looked up by
 * sws_upstream_cookie_value() in the rest, taken as one Cookie value. The
 * rest is also read as header lines ("Name: value") for
 * sws_upstream_key_get() with the parsed key. Checked:
 *   - parse accepts exactly "client_ip", "header:TOKEN", "cookie:TOKEN",
 *     its name the spec after the prefix;
 *   - the cookie value agrees with a naive reference reading (split at
 *     every ';', then at the first '=', trim spaces and tabs, first match),
 *     and lies inside the input without a ';' or outer whitespace;
 *   - a key, when there is one, is non-empty and lies inside the input.
 * A broken property aborts with the input on stderr.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "shm/routeset_check.h"
#include "worker/upstream_key.h"

#define MAX_HEADERS 16

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

static const uint8_t *g_data;
static size_t g_size;

static void broken(const char *what)
{
    fprintf(stderr, "fuzz_upstream_key: %s\n  input: \"%.*s\"\n", what, (int)g_size,
            (const char *)g_data);
    abort();
}

static int inside(sws_str_t s, const char *base, size_t len)
{
    return s.len == 0 || (s.p >= base && s.p + s.len <= base + len);
}

static int ws(char c)
{
    return c == ' ' || c == '\t';
}

/* The reference: one pair at a time, by index. */
static int naive_cookie(const char *c, size_t len, sws_str_t name, sws_str_t *value)
{
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && c[i] != ';')
            continue;
        size_t eq = start;
        while (eq < i && c[eq] != '=')
            eq++;
        if (eq < i) {
            size_t a = start, b = eq;
            while (a < b && ws(c[a]))
                a++;
            while (b > a && ws(c[b - 1]))
                b--;
            if (b - a == name.len && memcmp(c + a, name.p, name.len) == 0) {
                size_t va = eq + 1, vb = i;
                while (va < vb && ws(c[va]))
                    va++;
                while (vb > va && ws(c[vb - 1]))
                    vb--;
                *value = (sws_str_t){ c + va, vb - va };
                return 1;
            }
        }
        start = i + 1;
    }
    return 0;
}

/* The spec through the one parser of hash_key, the RouteSet checker's
 * (a C string: a spec with a NUL byte is no spec), the key made from it as
 * the proxy makes it from the table, its name pointing into spec. */
static void check_parse(sws_str_t spec, sws_upstream_key_t *key, int *ok)
{
    char buf[256];
    unsigned kind = 0;
    const char *name = NULL;
    *ok = 0;
    if (spec.len >= sizeof(buf) || memchr(spec.p, '\0', spec.len) != NULL)
        return;
    memcpy(buf, spec.p, spec.len);
    buf[spec.len] = '\0';
    if (sws_routeset_hash_key_problem(buf, &kind, &name) != NULL)
        return;
    sws_str_t kname = { "", 0 }; /* client_ip: the checker's "" */
    if (*name != '\0') {
        if (name < buf || name > buf + spec.len)
            broken("name outside the spec");
        kname = (sws_str_t){ spec.p + (name - buf), strlen(name) };
    }
    *key = (sws_upstream_key_t){ .kind = (uint8_t)kind, .name = kname };
    *ok = 1;
    if (key->kind == SWS_UPSTREAM_KEY_CLIENT_IP) {
        if (!sws_str_eq(spec, SWS_STR("client_ip")) || key->name.len != 0)
            broken("client_ip accepted for another spec");
        return;
    }
    const char *prefix = key->kind == SWS_UPSTREAM_KEY_HEADER ? "header:" : "cookie:";
    if (key->kind != SWS_UPSTREAM_KEY_HEADER && key->kind != SWS_UPSTREAM_KEY_COOKIE)
        broken("unknown kind");
    if (spec.len < 8 || memcmp(spec.p, prefix, 7) != 0 || key->name.p != spec.p + 7 ||
        key->name.len != spec.len - 7)
        broken("name is not the spec after its prefix");
    for (size_t i = 0; i < key->name.len; i++)
        if (!sws_is_tchar((unsigned char)key->name.p[i]))
            broken("name is not a token");
}

static void check_cookie(sws_str_t name, sws_str_t rest)
{
    sws_str_t got = { NULL, 0 }, want = { NULL, 0 };
    int found = sws_upstream_cookie_value(rest, name, &got);
    int want_found = naive_cookie(rest.p, rest.len, name, &want);
    if (found != want_found)
        broken("cookie found where the reference does not, or the reverse");
    if (!found)
        return;
    if (got.len != want.len || (got.len > 0 && got.p != want.p))
        broken("cookie value differs from the reference");
    if (!inside(got, rest.p, rest.len) || memchr(got.p, ';', got.len) != NULL)
        broken("cookie value outside its pair");
    if (got.len > 0 && (ws(got.p[0]) || ws(got.p[got.len - 1])))
        broken("cookie value not trimmed");
}

static void check_key(const sws_upstream_key_t *key, sws_str_t rest)
{
    sws_header_t h[MAX_HEADERS];
    unsigned n = 0;
    const char *p = rest.p, *end = rest.p + rest.len;
    while (p < end && n < MAX_HEADERS) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon != NULL) {
            const char *v = colon + 1;
            while (v < line_end && *v == ' ')
                v++;
            h[n++] = (sws_header_t){ { p, (size_t)(colon - p) }, { v, (size_t)(line_end - v) } };
        }
        p = nl != NULL ? nl + 1 : end;
    }
    sws_str_t client = { rest.p, rest.len < 16 ? rest.len : 16 };
    sws_str_t out = { NULL, 0 };
    if (!sws_upstream_key_get(key, h, n, client, &out))
        return;
    if (out.len == 0 || !inside(out, rest.p, rest.len))
        broken("key empty or outside the request");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_data = data;
    g_size = size;
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    size_t first = nl != NULL ? (size_t)(nl - s) : size;
    sws_str_t spec = { s, first };
    sws_str_t rest = { s + first, size - first };
    if (nl != NULL) {
        rest.p++;
        rest.len--;
    }

    sws_upstream_key_t key;
    int ok;
    check_parse(spec, &key, &ok);
    check_cookie(ok && key.kind != SWS_UPSTREAM_KEY_CLIENT_IP ? key.name : spec, rest);
    if (ok)
        check_key(&key, rest);
    return 0;
}
