/*
 * The configuration file: YAML (libyaml) in, a Sws__Config (proto/) out.
 *
 * Every field of the result is set: defaults are filled here, once, so the
 * table builder and the supervisor never guess. Errors name the place:
 * "scalws.yaml:12:7: server.backlog: expected a number from 1 to 65535".
 * Unknown keys are errors (a typo must not silently fall back to a default).
 * docs/configuration.md documents every key and default.
 *
 * Caller: the supervisor (start, SIGHUP, `scalwsd -t`). The result is owned by
 * the caller and freed with sws_config_free().
 */
#ifndef SWS_SUPERVISOR_CONFIG_H
#define SWS_SUPERVISOR_CONFIG_H

#include <stddef.h>

#include "proto/scalws.pb-c.h"

/* 0 and *out set, or -1 with a "file:line:col: message" in err. Also
 * checks what a start needs from the system, with the functions the start
 * uses: server.user exists, the log files open (and are created) as the
 * supervisor opens them. sws_config_parse does not. */
int sws_config_load(const char *path, Sws__Config **out, char *err, size_t errlen);

/* Same, from memory; name is used in messages. */
int sws_config_parse(const char *text, size_t len, const char *name, Sws__Config **out,
                     char *err, size_t errlen);

/* Frees cfg (NULL: nothing), the admin token it holds wiped first. */
void sws_config_free(Sws__Config *cfg);

/* Wipes the bearer token cfg holds (server.admin.token, read from
 * token_file), leaving token_file: for a worker at its start, which
 * inherits the supervisor's configurations and must not keep the
 * credential of the admin API (ADR 0064). cfg may be NULL. */
void sws_config_forget_token(Sws__Config *cfg);

#endif
