/*
 * ingressd's command line: the agreed flags (docs/kubernetes.md), parsed
 * into one struct, checked, with one sentence for what is wrong. Pure: the
 * caller prints and exits. ingressd's main only.
 */
#ifndef SWS_INGRESSD_OPTIONS_H
#define SWS_INGRESSD_OPTIONS_H

#include <stddef.h>

#include "core/log.h"

#define SWS_INGRESSD_DEFAULT_CLASS "scalws"

typedef struct sws_ingressd_options {
    const char *kubeconfig;    /* NULL: in-cluster (service account) */
    const char *namespace_;    /* NULL: all namespaces */
    const char *ingress_class; /* never NULL */
    const char *publish;       /* ZeroMQ endpoint; never NULL */
    const char *health;        /* HOST:PORT of /healthz; NULL: none */
    const char *from_dir;      /* NULL, or read objects from DIR/NAME.json (no API server) */
    int print;                 /* print a summary of the RouteSet and exit */
    sws_log_level_t log_level;
    int help, version;
} sws_ingressd_options_t;

/* Parse argv (the strings are borrowed: they must outlive *o). 0, or -1
 * with one sentence in err ("unknown option --x", "--health: expected
 * HOST:PORT, ..."). Uses getopt_long: resets optind itself. */
int sws_ingressd_options_parse(int argc, char **argv, sws_ingressd_options_t *o, char *err,
                               size_t errlen);

/* The --help text. */
extern const char sws_ingressd_usage[];

#endif
