/*
 * Known HTTP field names, as tokens with flags: the rules that depend on a
 * header's name (drop it when proxying, refuse it in HTTP/2, allow it once,
 * leave it to the protocol layer) are data in one table rather than name
 * comparisons spread over the code, as h2o's token.h and nginx's
 * ngx_http_headers_in[] do.
 *
 * The table is constant; any process and any thread may read it.
 */
#ifndef SWS_CORE_HTTP_TOKEN_H
#define SWS_CORE_HTTP_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

enum sws_http_token_id {
    SWS_TK_CONNECTION = 0,
    SWS_TK_CONTENT_LENGTH,
    SWS_TK_EXPECT,
    SWS_TK_HOST,
    SWS_TK_KEEP_ALIVE,
    SWS_TK_PROXY_AUTHENTICATE,
    SWS_TK_PROXY_AUTHORIZATION,
    SWS_TK_PROXY_CONNECTION,
    SWS_TK_TE,
    SWS_TK_TRAILER,
    SWS_TK_TRANSFER_ENCODING,
    SWS_TK_UPGRADE,
    SWS_TK_COUNT
};

enum sws_http_token_flag {
    /* Describes one connection, not the message (RFC 9110 7.6.1, RFC 2616
     * 13.5.1): a proxy drops it and writes its own. */
    SWS_TKF_HOP_BY_HOP = 1u << 0,
    /* Connection-specific: a request carrying it in HTTP/2 is malformed
     * (RFC 9113 8.2.2; TE is allowed there only as "trailers"). */
    SWS_TKF_H2_FORBIDDEN = 1u << 1,
    /* At most one field line with this name (several: 400). */
    SWS_TKF_SINGLE = 1u << 2,
    /* Frames the message or the connection: only the protocol layer writes
     * it, so a configured response header may not name it. */
    SWS_TKF_FRAMING = 1u << 3,
};

typedef struct sws_http_token {
    sws_str_t name; /* lowercase */
    uint8_t id;     /* enum sws_http_token_id: its index in sws_http_tokens */
    uint8_t flags;  /* enum sws_http_token_flag */
} sws_http_token_t;

extern const sws_http_token_t sws_http_tokens[SWS_TK_COUNT];

/* The known token named name[0..len) (ASCII case-insensitive), or NULL. */
const sws_http_token_t *sws_http_token_find(const char *name, size_t len);

#endif
