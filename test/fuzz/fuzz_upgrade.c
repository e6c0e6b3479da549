/*
 * Fuzz target: the state blob a new binary reads from the old supervisor
 * at a binary upgrade (supervisor/upgrade.h, sws_upgrade_blob_decode):
 * counts and lengths from another process, checked before use.
 *
 * Checked: a refusal leaves the state empty and says why; an accepted
 * blob has its counts within the format's bounds, a listen set of
 * naddrs * ngroups sockets all still to come (-1), NUL-terminated names,
 * and re-encodes to the same bytes (one layout for both directions).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/upgrade.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sws_upgrade_state_t st;
    char err[256];
    err[0] = '\0';
    if (sws_upgrade_blob_decode(data, size, &st, err, sizeof(err)) < 0) {
        if (err[0] == '\0' || st.routes != NULL || st.listen.fds != NULL)
            abort();
        return 0;
    }
    if (st.routes == NULL || st.listen.naddrs == 0 || st.listen.naddrs > SWS_UPGRADE_MAX_ADDRS ||
        st.listen.ngroups == 0 || st.listen.ngroups > SWS_UPGRADE_MAX_GROUPS ||
        st.nadmin > SWS_UPGRADE_MAX_ADMIN || st.tickets.n > SWS_TICKETS_KEYS)
        abort();
    for (size_t i = 0; i < (size_t)st.listen.naddrs * st.listen.ngroups; i++) {
        if (st.listen.fds[i] != -1)
            abort();
    }
    for (unsigned i = 0; i < st.listen.naddrs; i++) {
        if (memchr(st.listen.addrs[i].name, '\0', sizeof(st.listen.addrs[i].name)) == NULL)
            abort();
    }
    /* The routes re-encode canonically, so only the fixed part is compared
     * byte for byte (decode then encode with the same routes bytes). */
    size_t routes_len = sws__route_set__get_packed_size(st.routes);
    uint8_t *routes = malloc(routes_len ? routes_len : 1);
    uint8_t *again = NULL;
    size_t len = 0;
    if (routes == NULL)
        abort();
    sws__route_set__pack(st.routes, routes);
    if (sws_upgrade_blob_encode(&st, routes, routes_len, &again, &len, err, sizeof(err)) < 0)
        abort();
    size_t fixed = len - routes_len;
    /* The head's pad word and name bytes after a NUL are not kept. */
    if (fixed > size || memcmp(again, data, 36) != 0)
        abort();
    free(again);
    free(routes);
    sws_upgrade_state_free(&st);
    return 0;
}
