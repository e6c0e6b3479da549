/*
 * Fuzz target: the configuration loader, as `scalwsd -t` and a reload run
 * it: sws_config_parse() on the input (the YAML walker, every value parser,
 * the RouteSet checks), then, for a file it accepts, the table build the
 * supervisor does before it starts (sws_supervisor_check_table).
 *
 * Listen addresses are resolved with getaddrinfo(); the wrapper below makes
 * every lookup numeric ("localhost" aside), so no input reaches a DNS
 * server. Relative paths resolve under a directory in /tmp (the process's
 * working directory), static roots are only stat()ed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "supervisor/config.h"
#include "supervisor/supervisor.h"

#define FUZZ_DIR "/tmp/scalws-fuzz-config"

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static getaddrinfo_fn real;
    if (real == NULL)
        real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    struct addrinfo h = { 0 };
    if (hints != NULL)
        h = *hints;
    h.ai_flags |= AI_NUMERICHOST;
    if (node != NULL && strcmp(node, "localhost") == 0)
        node = "127.0.0.1";
    return real(node, service, &h, res);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    /* One directory for every run: nothing is created in it. */
    if ((mkdir(FUZZ_DIR, 0700) != 0 && errno != EEXIST) || chdir(FUZZ_DIR) != 0)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    Sws__Config *cfg = NULL;
    if (sws_config_parse((const char *)data, size, "fuzz.yaml", &cfg, err, sizeof(err)) != 0) {
        /* A refusal must say why. */
        if (err[0] == '\0')
            abort();
        return 0;
    }
    if (cfg == NULL || cfg->routes == NULL || cfg->server == NULL)
        abort();
    (void)sws_supervisor_check_table(cfg->routes, cfg->server->table_size, err, sizeof(err));
    sws_config_free(cfg);
    return 0;
}
