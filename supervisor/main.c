/*
 * scalwsd: the command line. Runs the supervisor in the foreground, checks
 * a configuration file (-t) the way `nginx -t` does, or signals the running
 * one named by the file's server.pid_file (-s, as `nginx -s`).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "core/version.h"
#include "ebpf/ebpf.h"
#include "supervisor/config.h"
#include "supervisor/pid_file.h"
#include "supervisor/proctitle.h"
#include "supervisor/supervisor.h"
#include "supervisor/upgrade.h"

#define DEFAULT_CONFIG "/etc/scalws/scalws.yaml"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: scalwsd [-t] [-c FILE] [-s reload|reopen|quit|stop|upgrade]\n"
            "\n"
            "Runs the ScalWS web server in the foreground (logs go to standard error\n"
            "until server.logging.error_log says otherwise).\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE  configuration file (default " DEFAULT_CONFIG ")\n"
            "  -t, --test         check the configuration file and exit\n"
            "  -s, --signal VERB  signal the server whose pid is in the file's\n"
            "                     server.pid_file: reload (HUP), reopen (USR1),\n"
            "                     quit (QUIT), stop (TERM), upgrade (USR2)\n"
            "  -h, --help         show this help and exit\n"
            "  -v, --version      show the version and exit\n"
            "\n"
            "Signals to the running server: HUP reload the configuration,\n"
            "USR1 reopen the log files, QUIT graceful stop, TERM or INT stop now,\n"
            "USR2 binary upgrade (docs/operations.md).\n");
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
    /* Here, not in the parse: a reload keeps the running pid file, and a
     * directory gone since the start must not refuse it. */
    char why[PATH_MAX + 64];
    if (rc == 0 && cfg->server->pid_file[0] != '\0' &&
        sws_pid_file_check(cfg->server->pid_file, why, sizeof(why)) < 0)
        rc = sws_errf(err, sizeof(err), "server.pid_file: %s", why);
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

/* `scalwsd -s VERB -c FILE`: the verb's signal to the pid in the file's
 * server.pid_file. */
static int signal_server(const char *config, const char *verb)
{
    static const struct {
        const char *verb;
        int sig;
    } verbs[] = {
        { "reload", SIGHUP }, { "reopen", SIGUSR1 }, { "quit", SIGQUIT },
        { "stop", SIGTERM },  { "upgrade", SIGUSR2 },
    };
    int sig = 0;
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        if (strcmp(verb, verbs[i].verb) == 0)
            sig = verbs[i].sig;
    }
    if (sig == 0) {
        fprintf(stderr, "scalwsd: -s %s: expected reload, reopen, quit, stop or upgrade\n", verb);
        return 2;
    }
    char err[PATH_MAX + 128];
    Sws__Config *cfg = NULL;
    if (sws_config_load(config, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 1, oldbin = 0;
    pid_t pid;
    if (cfg->server->pid_file[0] == '\0')
        fprintf(stderr, "scalwsd: -s %s: %s sets no server.pid_file\n", verb, config);
    else if (sws_pid_file_read_serving(cfg->server->pid_file, &pid, &oldbin, err, sizeof(err)) < 0)
        fprintf(stderr, "scalwsd: -s %s: server.pid_file %s\n", verb, err);
    else if (oldbin && sig == SIGUSR2)
        /* It would log and ignore it: say so here, with a status. */
        fprintf(stderr, "scalwsd: -s upgrade: an upgrade of pid %d is in progress (%s%s); "
                "its log says how it ends\n", (int)pid, cfg->server->pid_file,
                SWS_PID_FILE_OLDBIN);
    else if (sws_proctitle_is_ours(pid) == 0)
        /* Left by a supervisor that was killed (-9): never signal the
         * program that has its pid now. */
        fprintf(stderr, "scalwsd: -s %s: pid %d from %s is not scalwsd (a pid file left by a "
                "server that did not stop cleanly?)\n", verb, (int)pid,
                oldbin ? "the .oldbin pid file" : cfg->server->pid_file);
    else if (kill(pid, sig) < 0)
        fprintf(stderr, "scalwsd: -s %s: pid %d from %s: %s\n", verb, (int)pid,
                cfg->server->pid_file, errno == ESRCH ? "not running" : strerror(errno));
    else
        rc = 0;
    sws_config_free(cfg);
    return rc;
}

/* SWS_UPGRADE_ENV: set by an old supervisor that started this one; taken
 * out of the environment, so nothing this one starts sees it. -1: none,
 * -2: not a descriptor number. */
static int handoff_fd(void)
{
    const char *v = getenv(SWS_UPGRADE_ENV);
    if (v == NULL)
        return -1;
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    int bad = errno != 0 || end == v || *end != '\0' || fd < 3 || fd > INT_MAX;
    sws_proctitle_unsetenv(SWS_UPGRADE_ENV); /* frees v */
    return bad ? -2 : (int)fd;
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
        { "signal", required_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },
        { NULL, 0, NULL, 0 },
    };
    sws_proctitle_init(argc, argv);
    sws_log_init("supervisor", 2, SWS_LOG_INFO);

    const char *config = DEFAULT_CONFIG;
    int test = 0;
    const char *verb = NULL;
    int opt;
    char letter[3];
    opterr = 0; /* our own messages, named "scalwsd" whatever argv[0] is */
    while ((opt = getopt_long(argc, argv, ":c:ts:hv", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            config = optarg;
            break;
        case 't':
            test = 1;
            break;
        case 's':
            verb = optarg;
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
    if (verb != NULL)
        return signal_server(config, verb);

    int fd = handoff_fd();
    if (fd == -2) {
        fprintf(stderr, "scalwsd: %s is not a descriptor number\n", SWS_UPGRADE_ENV);
        return 1;
    }
    char why[256];
    char *abs = absolute_path(config);
    /* Without it, upgrades are refused (logged then); the server runs. */
    char *binary = sws_upgrade_binary_path(argv[0], why, sizeof(why));
    if (abs == NULL) {
        fprintf(stderr, "scalwsd: out of memory\n");
        free(binary);
        return 1;
    }
    /* argv as given (sws_proctitle_init moved the strings aside, so the
     * title does not overwrite them): an upgrade execs the same line. */
    sws_supervisor_exec_t exec = { .binary = binary, .argv = argv, .handoff_fd = fd };
    int rc = sws_supervisor_run(abs, &exec);
    free(binary);
    free(abs);
    return rc;
}
