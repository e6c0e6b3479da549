/*
 * server.tls and hosts[].certificates (supervisor/config_tls.h).
 * docs/configuration.md, "TLS", lists the same keys and defaults.
 */
#include "supervisor/config_tls.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shm/table.h"

#define CFG_DAY_MS (24ull * 3600 * 1000)

int cfg_pem_file(cfg_parser_t *p, yaml_node_t *n, const char *key, char **path,
                 ProtobufCBinaryData *pem, const char *what, size_t max)
{
    char full[PATH_MAX], err[PATH_MAX + 128];
    size_t mark, len;
    char *bytes;

    mark = cfg_push(p, key);
    if (cfg_path(p, n, *path, full, sizeof(full)) < 0 || cfg_set_str(p, n, path, full) < 0)
        return -1;
    if (p->check_system) {
        bytes = cfg_read_file(full, what, max, &len, err, sizeof(err));
        if (bytes == NULL)
            return cfg_fail(p, n, "%s", err);
        if (cfg_charge(p, n, len) < 0) {
            free(bytes);
            return -1;
        }
        pem->data = (uint8_t *)bytes;
        pem->len = len;
    }
    cfg_pop(p, mark);
    return 0;
}

/* One file of a pair: a path that must be given. */
static int cfg_pair_file(cfg_parser_t *p, const cfg_fields_t *f, const char *key, char **path,
                         ProtobufCBinaryData *pem)
{
    if (cfg_string(p, f, key, path) < 0)
        return -1;
    return cfg_pem_file(p, cfg_field(f, key), key, path, pem, "a PEM file", CFG_MAX_PEM_SIZE);
}

/* {cert: PATH, key: PATH} */
static int cfg_certificate(cfg_parser_t *p, yaml_node_t *node, void *msg, cfg_set_t *seen)
{
    static const char *const keys[] = { "cert", "key", NULL };
    Sws__Certificate *c = msg;
    cfg_fields_t f;

    (void)seen;
    if (node->type != YAML_MAPPING_NODE)
        return cfg_fail(p, node, "expected {cert: PATH, key: PATH}, got %s", cfg_kind(node));
    if (cfg_map(p, node, keys, &f) < 0)
        return -1;
    if (cfg_field(&f, "cert") == NULL || cfg_field(&f, "key") == NULL)
        return cfg_fail(p, node, "needs cert: (the PEM chain) and key: (its PEM private key)");
    if (cfg_pair_file(p, &f, "cert", &c->cert_path, &c->cert_pem) < 0 ||
        cfg_pair_file(p, &f, "key", &c->key_path, &c->key_pem) < 0)
        return -1;
    return 0;
}

int cfg_host_certificates(cfg_parser_t *p, yaml_node_t *node, Sws__Host *h)
{
    return cfg_repeated(p, node, &sws__certificate__descriptor, &h->n_certificates,
                        (void ***)&h->certificates, cfg_certificate);
}

/* protocols: [TLSv1.2, TLSv1.3] (either or both); absent: both. */
static int cfg_protocols(cfg_parser_t *p, yaml_node_t *node, Sws__Tls *tls)
{
    yaml_node_item_t *items;
    size_t n, mark;
    char got[64];

    if (node == NULL)
        return 0;
    mark = cfg_push(p, "protocols");
    if (cfg_list(p, node, &items, &n) < 0)
        return -1;
    if (n == 0)
        return cfg_fail(p, node, "needs TLSv1.2, TLSv1.3 or both");
    if ((tls->protocols = calloc(n, sizeof(*tls->protocols))) == NULL)
        return cfg_oom(p, node);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *v = cfg_node(p, items[i]);
        const char *t = v->type == YAML_SCALAR_NODE ? cfg_text(v) : "";
        size_t at = cfg_push_index(p, i);
        if (strcmp(t, "TLSv1.2") == 0)
            tls->protocols[i] = SWS__TLS__PROTOCOL__TLSV1_2;
        else if (strcmp(t, "TLSv1.3") == 0)
            tls->protocols[i] = SWS__TLS__PROTOCOL__TLSV1_3;
        else
            return cfg_fail(p, v, "expected TLSv1.2 or TLSv1.3 (nothing older is offered), got %s",
                            cfg_quote(v, got, sizeof(got)));
        tls->n_protocols++;
        cfg_pop(p, at);
    }
    cfg_pop(p, mark);
    return 0;
}

int cfg_tls(cfg_parser_t *p, yaml_node_t *node, Sws__RouteSet *rs)
{
    static const char *const keys[] = { "default_certificate", "protocols", "ciphers",
                                        "ciphersuites", "handshake_timeout", "session_tickets",
                                        "ticket_key_rotation", NULL };
    yaml_node_t *at = node != NULL ? node : cfg_node(p, 1);
    yaml_node_t *dc;
    cfg_fields_t f;
    Sws__Tls *tls;
    size_t mark;

    if ((tls = rs->tls = cfg_new(p, at, &sws__tls__descriptor)) == NULL)
        return -1;
    tls->handshake_timeout_ms = SWS_DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS;
    tls->session_tickets = 1;
    tls->ticket_key_rotation_ms = SWS_DEFAULT_TLS_TICKET_KEY_ROTATION_MS;
    if (cfg_set_str(p, at, &tls->ciphers, SWS_DEFAULT_TLS_CIPHERS) < 0 ||
        cfg_set_str(p, at, &tls->ciphersuites, SWS_DEFAULT_TLS_CIPHERSUITES) < 0)
        return -1;
    if (cfg_map(p, node, keys, &f) < 0 || cfg_protocols(p, cfg_field(&f, "protocols"), tls) < 0 ||
        cfg_string(p, &f, "ciphers", &tls->ciphers) < 0 ||
        cfg_string(p, &f, "ciphersuites", &tls->ciphersuites) < 0 ||
        cfg_u32(p, &f, "handshake_timeout", CFG_DURATION, 1, CFG_DAY_MS,
                &tls->handshake_timeout_ms) < 0 ||
        cfg_bool(p, &f, "session_tickets", &tls->session_tickets) < 0 ||
        cfg_u32(p, &f, "ticket_key_rotation", CFG_DURATION, 60000, 7 * CFG_DAY_MS,
                &tls->ticket_key_rotation_ms) < 0)
        return -1;
    dc = cfg_field(&f, "default_certificate");
    if (dc == NULL)
        return 0;
    mark = cfg_push(p, "default_certificate");
    if ((tls->default_certificate = cfg_new(p, dc, &sws__certificate__descriptor)) == NULL ||
        cfg_certificate(p, dc, tls->default_certificate, NULL) < 0)
        return -1;
    cfg_pop(p, mark);
    return 0;
}
