/*
 * server_tokens: server_name + "/VERSION" [+ " (BUILD_ID)"]
 * (worker/server_tokens.h).
 */
#include "worker/server_tokens.h"

#include "core/fmt.h"
#include "core/version.h"
#include "proto/scalws.pb-c.h"

sws_str_t sws_server_tokens_apply(sws_str_t name, uint32_t tokens, char *buf, size_t cap)
{
    static const char version[] = "/" SWS_VERSION;
    static const char open[] = " (", close[] = ")";
    const char *id = sws_build_id();
    size_t id_len = strlen(id);

    if (name.len == 0 || tokens == SWS__SETTINGS__SERVER_TOKENS__OFF)
        return name;
    size_t need = name.len + SWS_LIT_LEN(version);
    if (tokens == SWS__SETTINGS__SERVER_TOKENS__BUILD)
        need += SWS_LIT_LEN(open) + id_len + SWS_LIT_LEN(close);
    if (need > cap)
        return name;
    char *o = sws_put(buf, name.p, name.len);
    o = sws_put(o, version, SWS_LIT_LEN(version));
    if (tokens == SWS__SETTINGS__SERVER_TOKENS__BUILD) {
        o = sws_put(o, open, SWS_LIT_LEN(open));
        o = sws_put(o, id, id_len);
        o = sws_put(o, close, SWS_LIT_LEN(close));
    }
    return (sws_str_t){ buf, (size_t)(o - buf) };
}
