/*
 * The Server header value a worker sends: the generation's server_name,
 * followed, as its server_tokens says (proto Settings), by the version of
 * the binary this worker runs and its build id. The worker adds them, not
 * the supervisor, so that during a binary upgrade each generation of
 * workers names its own build.
 *
 * Pure; any process. The worker calls it when it adopts a generation.
 */
#ifndef SWS_WORKER_SERVER_TOKENS_H
#define SWS_WORKER_SERVER_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

/* The worker's buffer for the value: a server_name longer than some 450
 * bytes goes without its tokens. */
#define SWS_SERVER_TOKENS_BUF 512

/* The header value for name and tokens (Sws__Settings__ServerTokens):
 * name itself (its bytes, not a copy) when tokens is off, when name is
 * empty (no Server header at all) or when the value would not fit in cap
 * bytes (the name goes alone rather than cut); else the value written into
 * buf, which the result borrows. */
sws_str_t sws_server_tokens_apply(sws_str_t name, uint32_t tokens, char *buf, size_t cap);

#endif
