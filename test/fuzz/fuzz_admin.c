/*
 * Fuzz target: an admin API request as a client could send it, through
 * the request reader (supervisor/admin_http.h: llhttp, the size bounds)
 * split at a point the first input byte chooses, then, once complete,
 * when byte 0's top bit is set (a TCP listener with a token_file) through
 * the bearer token check of its Authorization header
 * (supervisor/admin_token.h, against TOKEN), and the endpoints
 * (supervisor/admin_api.h: target splitting and
 * percent-decoding, the member address rules, the JSON body reader, the
 * RouteSet edit and check). Publication is in memory (no shm): a change
 * the API accepts becomes the API's RouteSet for the next input, so
 * sequences of changes are explored too, bounded by MAX_MEMBERS.
 *
 * Checked: a refusal of the reader has a 4xx status and a reason; every
 * reply has a status from 200 to 599 and a body that is one JSON object
 * (starts with '{', ends with "}\n", and an error reply is {"error": ...})
 * in valid UTF-8 with no raw control byte before its newline (core/json.h:
 * whatever bytes a name or a message holds, the writer escapes them).
 * Without TOKEN nothing is published and a 401 carries its challenge; with
 * it no 401 comes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "supervisor/admin_api.h"
#include "supervisor/admin_http.h"
#include "supervisor/admin_token.h"

#define MAX_MEMBERS 64
#define TOKEN "fuzz-token-0123456789"

static sws_admin_api_t api;
static uint64_t generation;

static size_t members(const Sws__RouteSet *rs)
{
    size_t n = 0;
    for (size_t p = 0; p < rs->n_pools; p++)
        n += rs->pools[p]->n_members;
    return n;
}

/* Names without DNS: one that ends in 'x' does not resolve, any other is
 * two addresses derived from its length (so a PUT of a known name may
 * "move" it when the input differs). */
static int resolve(const sws_routeset_addr_t *name, sws_resolved_t *out, char *err,
                   size_t errlen)
{
    size_t len = strlen(name->host);
    out->n = 0;
    if (len > 0 && name->host[len - 1] == 'x')
        return snprintf(err, errlen, "\"%s\" does not resolve", name->host), -1;
    out->n = 2;
    snprintf(out->addr[0], sizeof(out->addr[0]), "10.0.%zu.1:%u", len % 256, name->port);
    snprintf(out->addr[1], sizeof(out->addr[1]), "[fd00::%zx]:%u", len, name->port);
    return 0;
}

static int publish(void *ctx, const Sws__RouteSet *rs, uint64_t *gen, char *err, size_t errlen)
{
    (void)ctx;
    if (members(rs) > MAX_MEMBERS) {
        strncpy(err, "full", errlen);
        return -1;
    }
    *gen = ++generation;
    if (sws_admin_api_published(&api, rs, *gen, SWS_PUBLISHED_BY_ADMIN) != 0)
        abort();
    return 0;
}

/* One pool "api" with a member, one host: a valid RouteSet. */
static void reset(void)
{
    static const uint8_t empty[1];
    Sws__RouteSet *rs = sws__route_set__unpack(NULL, 0, empty);
    Sws__Settings st = SWS__SETTINGS__INIT;
    Sws__Pool pool = SWS__POOL__INIT;
    Sws__Member m = SWS__MEMBER__INIT;
    Sws__Pool *pools[1] = { &pool };
    Sws__Member *ms[1] = { &m };
    if (rs == NULL)
        abort();
    st.server_name = "scalws";
    st.log_level = "info";
    pool.name = "api";
    pool.members = ms;
    pool.n_members = 1;
    m.id = 1;
    m.address = "127.0.0.1:9001";
    m.weight = 1;
    rs->settings = &st;
    rs->pools = pools;
    rs->n_pools = 1;
    sws_admin_api_published(&api, rs, ++generation, SWS_PUBLISHED_BY_FILE);
    rs->settings = NULL;
    rs->pools = NULL;
    rs->n_pools = 0;
    sws__route_set__free_unpacked(rs, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    api.publish = publish;
    api.resolve = resolve;
    reset();
    return 0;
}

/* The code point's length at p if p starts a valid UTF-8 sequence, else 0;
 * decoded then range-checked, not by the table of core/json.c, so the two
 * cannot share a mistake. */
static size_t utf8_ok(const unsigned char *p, size_t n)
{
    size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (len == 0 || len > n)
        return 0;
    uint32_t cp = p[0] & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static void check_text(const char *text, size_t n)
{
    const unsigned char *p = (const unsigned char *)text;
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 0x80) {
            size_t len = utf8_ok(p + i, n - i);
            if (len == 0)
                abort();
            i += len - 1;
        } else if ((p[i] < 0x20 && !(p[i] == '\n' && i + 1 == n)) || p[i] == 0x7f) {
            abort();
        }
    }
}

static void check_body(const sws_admin_reply_t *reply)
{
    const sws_json_out_t *b = &reply->body;
    if (reply->status < 200 || reply->status > 599 || b->oom)
        abort();
    if (b->len < 3 || b->p[0] != '{' || memcmp(b->p + b->len - 2, "}\n", 2) != 0)
        abort();
    if (reply->status >= 400 && (b->len < 10 || memcmp(b->p, "{\"error\": ", 10) != 0))
        abort();
    check_text(b->p, b->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sws_admin_req_t req;
    if (size == 0)
        return 0;
    size_t cut = data[0] % size;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (cut > len)
        cut = len;

    sws_admin_req_init(&req);
    sws_admin_req_state_t st = sws_admin_req_feed(&req, text, cut);
    if (st == SWS_ADMIN_REQ_MORE)
        st = sws_admin_req_feed(&req, text + cut, len - cut);
    if (st == SWS_ADMIN_REQ_MORE)
        st = sws_admin_req_eof(&req);
    if (st == SWS_ADMIN_REQ_ERROR) {
        if (req.status < 400 || req.status > 499 || req.why == NULL)
            abort();
        return 0;
    }
    if (st != SWS_ADMIN_REQ_DONE || req.method == NULL || req.body_len > SWS_ADMIN_MAX_BODY)
        abort();
    api.auth = SWS_ADMIN_AUTH_OK;
    if (data[0] & 0x80)
        api.auth = sws_admin_token_check((const uint8_t *)TOKEN, sizeof(TOKEN) - 1,
                                         req.has_authorization ? req.authorization : NULL,
                                         req.authorization_len);
    uint64_t before = generation;
    sws_admin_reply_t reply;
    sws_admin_api_handle(&api, req.method, req.target, req.body, req.body_len, &reply);
    check_body(&reply);
    if ((api.auth != SWS_ADMIN_AUTH_OK && generation != before) ||
        (reply.status == 401) != (reply.challenge != NULL) ||
        (api.auth == SWS_ADMIN_AUTH_OK && reply.status == 401))
        abort();
    sws_json_out_free(&reply.body);
    /* Keep the explored state small. */
    if (members(sws_admin_api_routes(&api)) > MAX_MEMBERS / 2)
        reset();
    return 0;
}
