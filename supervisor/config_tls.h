/*
 * The configuration file's TLS keys (ADR 0033): `server.tls` and
 * `hosts[].certificates`, on the walker of supervisor/config_yaml.h. The
 * certificate and key files are read here, by the supervisor (as root,
 * before workers exist, and again at each reload): the RouteSet carries
 * their PEM bytes, never a path a worker would open. Whether a pair loads
 * is the RouteSet checker's (shm/routeset_check.h), reported at the file's
 * node.
 *
 * The config reader's own interface (prefix cfg_): included by
 * supervisor/config*.c only. Caller: the supervisor.
 */
#ifndef SWS_SUPERVISOR_CONFIG_TLS_H
#define SWS_SUPERVISOR_CONFIG_TLS_H

#include "proto/scalws.pb-c.h"
#include "supervisor/config_yaml.h"

/* A certificate or key file is at most this large. */
#define CFG_MAX_PEM_SIZE (1u << 20)

/* server.tls: {default_certificate, protocols, ciphers, ciphersuites,
 * handshake_timeout, session_tickets, ticket_key_rotation} into rs->tls
 * (always set, every default filled). node NULL: the defaults. */
int cfg_tls(cfg_parser_t *p, yaml_node_t *node, Sws__RouteSet *rs);

/* certificates: [{cert: PATH, key: PATH}, ...] of a host, at node (NULL:
 * none). */
int cfg_host_certificates(cfg_parser_t *p, yaml_node_t *node, Sws__Host *h);

/* The PEM file *path names (relative to the configuration file's
 * directory; *path becomes the full path), read whole into *pem (at most
 * max bytes; what names it in messages). Only from a file on disk: a text
 * given to sws_config_parse has no directory, and the fuzzer must not open
 * what its input names; the RouteSet checker then refuses the empty
 * bytes. Errors at n, under key. */
int cfg_pem_file(cfg_parser_t *p, yaml_node_t *n, const char *key, char **path,
                 ProtobufCBinaryData *pem, const char *what, size_t max);

/* The whole file at path into a malloc'ed buffer (at most max bytes);
 * what names it in messages ("the configuration file"). NULL with err. */
char *cfg_read_file(const char *path, const char *what, size_t max, size_t *len, char *err,
                    size_t errlen);

#endif
