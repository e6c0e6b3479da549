#include "core/http_token.h"

#include <string.h>


#define TK(id_, lit, fl) [id_] = { SWS_STR(lit), id_, fl }

const sws_http_token_t sws_http_tokens[SWS_TK_COUNT] = {
    TK(SWS_TK_CONNECTION, "connection", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN | SWS_TKF_FRAMING),
    TK(SWS_TK_CONTENT_LENGTH, "content-length", SWS_TKF_SINGLE | SWS_TKF_FRAMING),
    TK(SWS_TK_EXPECT, "expect", 0),
    TK(SWS_TK_HOST, "host", SWS_TKF_SINGLE),
    TK(SWS_TK_KEEP_ALIVE, "keep-alive", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN),
    TK(SWS_TK_PROXY_AUTHENTICATE, "proxy-authenticate", SWS_TKF_HOP_BY_HOP),
    TK(SWS_TK_PROXY_AUTHORIZATION, "proxy-authorization", SWS_TKF_HOP_BY_HOP),
    TK(SWS_TK_PROXY_CONNECTION, "proxy-connection", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN),
    TK(SWS_TK_TE, "te", SWS_TKF_HOP_BY_HOP),
    TK(SWS_TK_TRAILER, "trailer", SWS_TKF_HOP_BY_HOP),
    TK(SWS_TK_TRANSFER_ENCODING, "transfer-encoding",
       SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN | SWS_TKF_FRAMING),
    TK(SWS_TK_UPGRADE, "upgrade", SWS_TKF_HOP_BY_HOP | SWS_TKF_H2_FORBIDDEN),
};

/* The candidates for each name length, as ids + 1 (0 ends a list): every
 * request header is looked up, so a lookup is one index and, for the one
 * or two names of its length, a first-letter check before a full compare.
 * test_http_token.c checks that every entry is reached. */
#define LEN_MAX (sizeof("proxy-authorization") - 1)
static const uint8_t by_len[LEN_MAX + 1][3] = {
    [2] = { SWS_TK_TE + 1 },
    [4] = { SWS_TK_HOST + 1 },
    [6] = { SWS_TK_EXPECT + 1 },
    [7] = { SWS_TK_TRAILER + 1, SWS_TK_UPGRADE + 1 },
    [10] = { SWS_TK_CONNECTION + 1, SWS_TK_KEEP_ALIVE + 1 },
    [14] = { SWS_TK_CONTENT_LENGTH + 1 },
    [16] = { SWS_TK_PROXY_CONNECTION + 1 },
    [17] = { SWS_TK_TRANSFER_ENCODING + 1 },
    [18] = { SWS_TK_PROXY_AUTHENTICATE + 1 },
    [19] = { SWS_TK_PROXY_AUTHORIZATION + 1 },
};

/* Whether name[0..len) is tok[0..len) in any letter case. A token's name
 * is lowercase letters and '-' (test_http_token.c checks), and bit 0x40 is
 * set in every letter and not in '-': (tok & 0x40) >> 1 is 0x20 exactly
 * where the case may differ, so the bytes must be equal but for that bit
 * there, and equal elsewhere (CR is no '-'). Eight bytes at a time: the
 * names looked up most are full matches of 10 to 17 bytes. */
static int same_name(const char *name, const char *tok, size_t len)
{
    const uint64_t case_bits = 0x4040404040404040ull;
    size_t i = 0;
    for (; i + sizeof(uint64_t) <= len; i += sizeof(uint64_t)) {
        uint64_t x, t;
        memcpy(&x, name + i, sizeof(x));
        memcpy(&t, tok + i, sizeof(t));
        if (((x ^ t) & ~((t & case_bits) >> 1)) != 0)
            return 0;
    }
    for (; i < len; i++) {
        unsigned t = (unsigned char)tok[i];
        if ((((unsigned char)name[i] ^ t) & ~((t & 0x40u) >> 1)) != 0)
            return 0;
    }
    return 1;
}

const sws_http_token_t *sws_http_token_find(const char *name, size_t len)
{
    if (len > LEN_MAX)
        return NULL;
    for (const uint8_t *id = by_len[len]; id < by_len[len] + 3 && *id != 0; id++) {
        const sws_http_token_t *t = &sws_http_tokens[*id - 1];
        if (same_name(name, t->name.p, len))
            return t;
    }
    return NULL;
}
