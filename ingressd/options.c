/* ingressd's command line (ingressd/options.h). */
#include "ingressd/options.h"

#include <getopt.h>
#include <string.h>

#include "core/err.h"
#include "ingressd/store.h"
#include "shm/ingress_endpoint.h"
#include "shm/routeset_check.h"

const char sws_ingressd_usage[] =
    "Usage: ingressd [OPTIONS]\n"
    "\n"
    "Watches the Kubernetes API for Ingresses of its class and publishes the\n"
    "routes they describe to scalwsd (docs/kubernetes.md).\n"
    "\n"
    "Options:\n"
    "  --kubeconfig FILE      API server, CA and token from FILE (default: in-cluster,\n"
    "                         the pod's service account)\n"
    "  --namespace NS         watch NS only (default: all namespaces)\n"
    "  --ingress-class NAME   serve IngressClass NAME (default " SWS_INGRESSD_DEFAULT_CLASS
    ", controller\n"
    "                         " SWS_INGRESS_CONTROLLER ")\n"
    "  --publish ENDPOINT     ZeroMQ endpoint for scalwsd (default\n"
    "                         " SWS_INGRESS_DEFAULT_ENDPOINT ")\n"
    "  --health HOST:PORT     serve GET /healthz there (default: none)\n"
    "  --from-dir DIR         read the objects from DIR/NAME.json (as `kubectl get -o json`\n"
    "                         prints them) instead of the API server\n"
    "  --print                print a summary of the translated routes and exit\n"
    "                         (with --from-dir)\n"
    "  --log-level LEVEL      debug, info, notice, warn, error or crit (default info)\n"
    "  -h, --help             show this help and exit\n"
    "  -v, --version          show the version and exit\n";

/* A name as the API spells names: a DNS subdomain's characters. */
static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SWS_INGRESS_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return 0;
    return 1;
}

int sws_ingressd_options_parse(int argc, char **argv, sws_ingressd_options_t *o, char *err,
                               size_t errlen)
{
    enum { KUBECONFIG = 256, NAMESPACE, CLASS, PUBLISH, HEALTH, FROM_DIR, PRINT, LOG_LEVEL };
    static const struct option options[] = {
        { "kubeconfig", required_argument, NULL, KUBECONFIG },
        { "namespace", required_argument, NULL, NAMESPACE },
        { "ingress-class", required_argument, NULL, CLASS },
        { "publish", required_argument, NULL, PUBLISH },
        { "health", required_argument, NULL, HEALTH },
        { "from-dir", required_argument, NULL, FROM_DIR },
        { "print", no_argument, NULL, PRINT },
        { "log-level", required_argument, NULL, LOG_LEVEL },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    sws_ingress_endpoint_t ep;
    char why[200];
    const char *bad;
    int c;

    *o = (sws_ingressd_options_t){ .ingress_class = SWS_INGRESSD_DEFAULT_CLASS,
                                   .publish = SWS_INGRESS_DEFAULT_ENDPOINT,
                                   .log_level = SWS_LOG_INFO };
    optind = 0; /* 0: a full reset, so a second parse (the tests) starts afresh */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hv", options, NULL)) != -1) {
        switch (c) {
        case KUBECONFIG:
            o->kubeconfig = optarg;
            break;
        case NAMESPACE:
            if (!name_ok(optarg))
                return sws_errf(err, errlen, "--namespace: expected a namespace name, got \"%s\"",
                                optarg);
            o->namespace_ = optarg;
            break;
        case CLASS:
            if (!name_ok(optarg))
                return sws_errf(err, errlen,
                                "--ingress-class: expected an IngressClass name, got \"%s\"",
                                optarg);
            o->ingress_class = optarg;
            break;
        case PUBLISH:
            /* The publisher's own check, here too: a bad endpoint is a
             * usage error (exit 2), not a failure once the daemon runs. */
            if (sws_ingress_endpoint_parse(optarg, &ep, why, sizeof(why)) < 0)
                return sws_errf(err, errlen, "--publish: %s", why);
            o->publish = optarg;
            break;
        case HEALTH:
            if ((bad = sws_routeset_address_problem(optarg, 1, NULL)) != NULL)
                return sws_errf(err, errlen, "--health: expected HOST:PORT, got \"%s\": %s", optarg,
                                bad);
            o->health = optarg;
            break;
        case FROM_DIR:
            o->from_dir = optarg;
            break;
        case PRINT:
            o->print = 1;
            break;
        case LOG_LEVEL:
            if (sws_log_level_parse(optarg, &o->log_level) < 0)
                return sws_errf(err, errlen,
                                "--log-level: expected debug, info, notice, warn, error or crit, "
                                "got \"%s\"",
                                optarg);
            break;
        case 'h':
            o->help = 1;
            break;
        case 'v':
            o->version = 1;
            break;
        case ':':
            return sws_errf(err, errlen, "%s needs a value", argv[optind - 1]);
        default:
            if (optopt != 0)
                return sws_errf(err, errlen, "unknown option -%c", optopt);
            return sws_errf(err, errlen, "unknown option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return sws_errf(err, errlen, "unexpected argument \"%s\"", argv[optind]);
    if (o->print && o->from_dir == NULL)
        return sws_errf(err, errlen, "--print needs --from-dir (the API server mode publishes)");
    if (o->from_dir != NULL && !o->print)
        return sws_errf(err, errlen, "--from-dir needs --print (files are only printed, never published)");
    return 0;
}
