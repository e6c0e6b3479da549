/*
 * The one check of a RouteSet, whatever its source (the YAML file today;
 * ingressd and the admin API later): what a RouteSet must satisfy before a
 * table is built from it.
 *
 * sws_table_build() calls sws_routeset_check() first and refuses what it
 * refuses, so no source can bypass it. The YAML reader calls the rule
 * functions below while it walks (so its messages name the YAML node) and
 * sws_routeset_check() on the result, mapping a refusal's field path back
 * onto FILE:LINE:COL.
 *
 * Checked: host names (exact, "*.suffix" wildcard, "*"; an optional trailing
 * dot), every name once across all hosts (ASCII case-insensitive, trailing
 * dot ignored), a host has names; route paths start with '/', hold no
 * query, spaces or controls, and are in normal form (core/path.h: requests
 * are matched in it); match is prefix or exact (regex not yet); one route
 * per (match, path) in a host; exactly one action; respond status 200..599,
 * header names are tokens other than the framing headers the server sets,
 * values without controls, no body on 204/304; redirect status 301, 302,
 * 303, 307 or 308 and a location without spaces or controls; a static root
 * that is absolute and an index that is a file name; a proxy names a pool
 * that exists, pool names are unique; the settings' log level and Server
 * name. Not checked: the per-request limits of Settings (sources fill them
 * with the defaults of shm/table.h; the YAML reader checks its ranges).
 *
 * Pure functions on memory: any process may call them; nothing is kept.
 */
#ifndef SWS_SHM_ROUTESET_CHECK_H
#define SWS_SHM_ROUTESET_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "proto/scalws.pb-c.h"

/* Where a RouteSet was refused and why. path is the field path inside the
 * RouteSet, as the config errors write keys: "hosts[0].routes[2].respond.
 * headers[1]" ("" for the RouteSet itself). msg is one sentence in the form
 * of the config errors ("expected X, got Y" where that fits). */
typedef struct sws_routeset_refusal {
    char path[160];
    char msg[352];
} sws_routeset_refusal_t;

/* 0, or -1 with one refusal in *why: the settings and pools first, then
 * each host and its routes in order, then names and routes used twice (the
 * later use is the one refused). */
int sws_routeset_check(const Sws__RouteSet *rs, sws_routeset_refusal_t *why);

/* ---- the rules, one per kind of value: NULL when fine, else why not (a
 * static string) ---- */

/* A host name as configured: "a.example", "*.example", "*", "[::1]". */
const char *sws_routeset_host_name_problem(const char *name);

/* A header name in a respond route. */
const char *sws_routeset_header_name_problem(const char *name);

/* A header value (or the Server name): no CR, LF or other control
 * characters; tab is fine. 1 when fine. */
int sws_routeset_field_value_ok(const char *value);

/* A route path: msg gets the whole message ("\"/a/../b\" is not in normal
 * form ...: write \"/b\"") and -1 is returned; 0 when fine. */
int sws_routeset_route_path_check(const char *path, char *msg, size_t msglen);

/* A static index: a file name, no '/', not "." or "..". 1 when fine. */
int sws_routeset_index_ok(const char *index);

/* A redirect status (301, 302, 303, 307, 308). 1 when fine. */
int sws_routeset_redirect_status_ok(uint32_t status);

/* A redirect location: NULL when fine, else why not. */
const char *sws_routeset_location_problem(const char *location);

/* The lowest and highest respond status (no 1xx: an interim answer is never
 * a final response, and the HTTP layer sends 100 Continue itself). */
#define SWS_ROUTESET_RESPOND_STATUS_MIN 200u
#define SWS_ROUTESET_RESPOND_STATUS_MAX 599u

#endif
