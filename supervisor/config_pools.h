/*
 * The configuration file's upstream pools (top-level `pools:`) and the
 * route action `proxy:`: the schema and defaults of both, on the walker of
 * supervisor/config_yaml.h. The rules of the values are the RouteSet
 * checker's (shm/routeset_check.h), applied here where the YAML node is at
 * hand so that each error names it.
 *
 * The config reader's own interface (prefix cfg_): included by
 * supervisor/config*.c only. Caller: the supervisor.
 */
#ifndef SWS_SUPERVISOR_CONFIG_POOLS_H
#define SWS_SUPERVISOR_CONFIG_POOLS_H

#include "proto/scalws.pb-c.h"
#include "supervisor/config_yaml.h"

/* pools: [...] into rs->pools, every default filled (shm/table.h's
 * SWS_DEFAULT_POOL_*). node NULL: no pools. */
int cfg_pools(cfg_parser_t *p, yaml_node_t *node, Sws__RouteSet *rs);

/* proxy: {pool: NAME, host_header: HOST[:PORT], via: BOOL|PSEUDONYM} into
 * msg (a Sws__Proxy).
 * That the pool exists is the checker's (reported at pool:). */
int cfg_proxy(cfg_parser_t *p, yaml_node_t *node, void *msg);

#endif
