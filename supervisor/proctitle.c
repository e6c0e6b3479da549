#include "supervisor/proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

extern char **environ;

/* Owner: the process (set once by main, inherited by forked children). The
 * copies stay referenced here so leak checkers see them as live. */
static struct sws_proctitle {
    char *area;      /* the original argv + environment strings */
    size_t size;     /* bytes of room, the final NUL included */
    char **argv_copy;
    char **env_copy;
} proctitle;

/* Free an array from copy_strings(); NULL is fine. */
static void free_strings(char **s)
{
    for (size_t i = 0; s != NULL && s[i] != NULL; i++)
        free(s[i]);
    free(s);
}

/* Copy n strings into a new NULL-terminated array of heap copies. */
static char **copy_strings(char *const *src, size_t n)
{
    char **dst = calloc(n + 1, sizeof(*dst));
    for (size_t i = 0; dst != NULL && i < n; i++) {
        dst[i] = strdup(src[i]);
        if (dst[i] == NULL) {
            free_strings(dst);
            return NULL;
        }
    }
    return dst;
}

int sws_proctitle_init(int argc, char **argv)
{
    prctl(PR_SET_NAME, SWS_PROCTITLE_COMM, 0, 0, 0);
    if (argc <= 0 || argv[0] == NULL)
        return -1;

    /* The room: argv[0] through the last string that directly follows the
     * previous one; the kernel lays argv and then the environment out
     * back to back, but a launcher may not have. */
    char *end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc; i++) {
        if (argv[i] == end)
            end = argv[i] + strlen(argv[i]) + 1;
    }
    size_t nenv = 0;
    while (environ != NULL && environ[nenv] != NULL)
        nenv++;
    for (size_t i = 0; i < nenv; i++) {
        if (environ[i] == end)
            end = environ[i] + strlen(environ[i]) + 1;
    }

    char **env_copy = copy_strings(environ, nenv);
    char **argv_copy = copy_strings(argv, (size_t)argc);
    if (env_copy == NULL || argv_copy == NULL) {
        free_strings(env_copy);
        free_strings(argv_copy);
        return -1;
    }
    proctitle.area = argv[0];
    proctitle.size = (size_t)(end - argv[0]);
    proctitle.env_copy = env_copy;
    proctitle.argv_copy = argv_copy;
    environ = env_copy;
    for (int i = 0; i < argc; i++)
        argv[i] = argv_copy[i];
    return 0;
}

void sws_proctitle_unsetenv(const char *name)
{
    size_t len = strlen(name);
    char *ours = NULL;
    for (size_t i = 0; proctitle.env_copy != NULL && environ == proctitle.env_copy &&
                       environ[i] != NULL; i++) {
        if (strncmp(environ[i], name, len) == 0 && environ[i][len] == '=') {
            ours = environ[i];
            break;
        }
    }
    unsetenv(name);
    free(ours);
}

void sws_proctitle_set(const char *fmt, ...)
{
    if (proctitle.area == NULL || proctitle.size < 2)
        return;
    /* Zero the whole room: ps reads up to the first NUL at the end of the
     * original argv, or through the environment room when the title
     * spills into it. */
    memset(proctitle.area, 0, proctitle.size);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(proctitle.area, proctitle.size - 1, fmt, ap);
    va_end(ap);
}

int sws_proctitle_is_ours(pid_t pid)
{
    char path[64], comm[32];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    int ours = fgets(comm, sizeof(comm), f) != NULL &&
               strcmp(comm, SWS_PROCTITLE_COMM "\n") == 0;
    fclose(f);
    return ours;
}
