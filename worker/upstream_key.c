/* The hash key of a request: see upstream_key.h. */
#include "worker/upstream_key.h"

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static sws_str_t trim(const char *p, const char *end)
{
    while (p < end && is_ws(*p))
        p++;
    while (end > p && is_ws(end[-1]))
        end--;
    return (sws_str_t){ p, (size_t)(end - p) };
}

int sws_upstream_cookie_value(sws_str_t cookie, sws_str_t name, sws_str_t *value)
{
    const char *p = cookie.p, *end = cookie.p + cookie.len;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *pair_end = semi != NULL ? semi : end;
        const char *eq = memchr(p, '=', (size_t)(pair_end - p));
        if (eq != NULL && sws_str_eq(trim(p, eq), name)) {
            *value = trim(eq + 1, pair_end);
            return 1;
        }
        p = semi != NULL ? semi + 1 : end;
    }
    return 0;
}

/* ::ffff:a.b.c.d, the form an IPv4 client has on a dual-stack listener. */
static sws_str_t unmap_ipv4(sws_str_t addr)
{
    static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (addr.len == 16 && memcmp(addr.p, mapped, sizeof(mapped)) == 0)
        return (sws_str_t){ addr.p + sizeof(mapped), 4 };
    return addr;
}

int sws_upstream_key_get(const sws_upstream_key_t *key, const sws_header_t *headers,
                         unsigned nheaders, sws_str_t client, sws_str_t *out)
{
    sws_str_t v = { "", 0 };
    switch (key->kind) {
    case SWS_UPSTREAM_KEY_CLIENT_IP:
        v = unmap_ipv4(client);
        break;
    case SWS_UPSTREAM_KEY_HEADER:
        for (unsigned i = 0; i < nheaders; i++) {
            if (sws_str_caseeq(headers[i].name, key->name)) {
                v = headers[i].value;
                break;
            }
        }
        break;
    case SWS_UPSTREAM_KEY_COOKIE:
        /* HTTP/2 may split the cookies over several fields (RFC 9113
         * 8.2.3): each is searched, in order. */
        for (unsigned i = 0; i < nheaders; i++)
            if (sws_str_caseeq_lit(headers[i].name, "cookie") &&
                sws_upstream_cookie_value(headers[i].value, key->name, &v))
                break;
        break;
    default:
        break;
    }
    if (v.len == 0)
        return 0;
    *out = v;
    return 1;
}
