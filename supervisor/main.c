/*
 * scalwsd: the command line. Runs the supervisor in the foreground, or
 * checks a configuration file (-t) the way `nginx -t` does.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/version.h"
#include "ebpf/ebpf.h"
#include "supervisor/config.h"
#include "supervisor/proctitle.h"
#include "supervisor/supervisor.h"

#define DEFAULT_CONFIG "/etc/scalws/scalws.yaml"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: scalwsd [-t] [-c FILE]\n"
            "\n"
            "Runs the ScalWS web server in the foreground (logs go to standard error\n"
            "until server.logging.error_log says otherwise).\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE  configuration file (default " DEFAULT_CONFIG ")\n"
            "  -t, --test         check the configuration file and exit\n"
            "  -h, --help         show this help and exit\n"
            "  -v, --version      show the version and exit\n"
            "\n"
            "Signals to the running server: HUP reload the configuration,\n"
            "USR1 reopen the log files, QUIT graceful stop, TERM or INT stop now.\n");
}

/* The option getopt stopped at: a short one by its letter (it may sit in
 * a bundle like "-tx"), a long one as written. */
static const char *option_name(char **argv, int letter, char buf[3])
{
    if (letter == 0)
        return argv[optind - 1];
    buf[0] = '-';
    buf[1] = (char)letter;
    buf[2] = '\0';
    return buf;
}

/* What the start would do about an eBPF accept policy: load the program
 * here and now (same privileges as the start, if -t runs as the server
 * would). */
static void test_accept_policy(const Sws__ServerConfig *sc)
{
    enum sws_ebpf_policy policy = sws_accept_ebpf_policy(sc->accept_policy);
    char err[256];
    if (policy == 0)
        return;
    if (sws_ebpf_probe(err, sizeof(err)) == 0)
        printf("scalwsd: accept_policy %s: eBPF available\n", sws_ebpf_policy_name(policy));
    else
        printf("scalwsd: accept_policy %s: %s; falling back to reuseport\n",
               sws_ebpf_policy_name(policy), err);
}

/* `scalwsd -t`: parse, then build the table into scratch memory, so an
 * error the table builder would find at reload is reported here too. */
static int test_config(const char *path)
{
    char err[512];
    Sws__Config *cfg = NULL;
    if (sws_config_load(path, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = sws_supervisor_check_table(cfg->routes, cfg->server->table_size, err, sizeof(err));
    if (rc == 0)
        test_accept_policy(cfg->server);
    sws_config_free(cfg);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    printf("scalwsd: configuration file %s test is successful\n", path);
    return 0;
}

/* The supervisor reloads the file by name, from wherever; and ps shows it. */
static char *absolute_path(const char *path)
{
    char *abs = realpath(path, NULL);
    if (abs != NULL || path[0] == '/')
        return abs != NULL ? abs : strdup(path);
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        return strdup(path);
    size_t len = strlen(cwd) + 1 + strlen(path) + 1;
    char *joined = malloc(len);
    if (joined != NULL)
        snprintf(joined, len, "%s/%s", cwd, path);
    return joined;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        { "config", required_argument, NULL, 'c' },
        { "test", no_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    sws_proctitle_init(argc, argv);
    sws_log_init("supervisor", 2, SWS_LOG_INFO);

    const char *config = DEFAULT_CONFIG;
    int test = 0;
    int opt;
    char letter[3];
    opterr = 0; /* our own messages, named "scalwsd" whatever argv[0] is */
    while ((opt = getopt_long(argc, argv, ":c:thv", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 't':
            test = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'v':
            printf("scalwsd " SWS_VERSION " (build %s)\n", sws_build_id());
            return 0;
        case ':':
            fprintf(stderr, "scalwsd: option %s needs an argument\n", option_name(argv, optopt, letter));
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, "scalwsd: unknown option %s\n", option_name(argv, optopt, letter));
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "scalwsd: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (test)
        return test_config(config);

    char *abs = absolute_path(config);
    if (abs == NULL) {
        fprintf(stderr, "scalwsd: out of memory\n");
        return 1;
    }
    int rc = sws_supervisor_run(abs);
    free(abs);
    return rc;
}
