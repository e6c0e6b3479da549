/* A worker's cache of pipes for splice(2) (pipe_cache.h). */
#include "worker/pipe_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "core/err.h"

int sws_pipe_get(sws_pipe_cache_t *pc, sws_pipe_t *out, char *err, size_t errlen)
{
    if (pc->n > 0) {
        *out = pc->idle[--pc->n];
        return 0;
    }
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
        return sws_errf(err, errlen, "pipe2: %s", strerror(errno));
    /* A larger pipe means fewer rounds per body; refused (the user's pipe
     * pages are spent), the default size serves. */
    int size = fcntl(fds[1], F_SETPIPE_SZ, (int)SWS_PIPE_SIZE);
    if (size < 0)
        size = fcntl(fds[1], F_GETPIPE_SZ);
    if (size <= 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return sws_errf(err, errlen, "F_GETPIPE_SZ: %s", strerror(e));
    }
    *out = (sws_pipe_t){ fds[0], fds[1], (size_t)size };
    return 0;
}

void sws_pipe_put(sws_pipe_cache_t *pc, sws_pipe_t *pp, int drained)
{
    if (pp->rd < 0)
        return;
    /* Bytes left in it (a client gone mid-body) would go to the next
     * response: such a pipe is not kept. */
    int left = drained ? 0 : 1;
    if (pc->n < SWS_PIPE_CACHE_MAX &&
        (drained || (ioctl(pp->rd, FIONREAD, &left) == 0 && left == 0))) {
        pc->idle[pc->n++] = *pp;
    } else {
        close(pp->rd);
        close(pp->wr);
    }
    pp->rd = pp->wr = -1;
}

void sws_pipe_cache_close(sws_pipe_cache_t *pc)
{
    while (pc->n > 0) {
        sws_pipe_t *pp = &pc->idle[--pc->n];
        close(pp->rd);
        close(pp->wr);
    }
}
