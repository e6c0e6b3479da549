/*
 * Pipes for splice(2): the proxy moves a large response body from the
 * upstream's socket into a pipe and from the pipe into the client's socket
 * without the bytes entering user space (ADR 0022).
 *
 * Owner: the worker context (worker/ctx.h) holds one cache per worker;
 * everything runs in the worker's one thread. A pipe is taken for one
 * response and given back when the response is done; only an empty pipe is
 * kept (one whose bytes may still be read by a closed connection's queue
 * is closed instead), at most SWS_PIPE_CACHE_MAX of them. Zeroed memory is
 * an empty cache.
 */
#ifndef SWS_WORKER_PIPE_CACHE_H
#define SWS_WORKER_PIPE_CACHE_H

#include <stddef.h>

#define SWS_PIPE_CACHE_MAX 16
/* The size asked of each pipe (F_SETPIPE_SZ): one 100 KiB body fits in one
 * round; the kernel may give less (pipe-user-pages-soft), then the default. */
#define SWS_PIPE_SIZE (256u * 1024)

typedef struct sws_pipe {
    int rd, wr;     /* O_NONBLOCK|O_CLOEXEC ends */
    size_t size;    /* bytes the pipe holds at most (fewer when the data comes in small pieces) */
} sws_pipe_t;

typedef struct sws_pipe_cache {
    sws_pipe_t idle[SWS_PIPE_CACHE_MAX];
    unsigned n;
} sws_pipe_cache_t;

/* An empty pipe: from the cache, or a new one. 0, or -1 with err set
 * (out of descriptors): the caller relays by copying instead. */
int sws_pipe_get(sws_pipe_cache_t *pc, sws_pipe_t *out, char *err, size_t errlen);

/* Give back a pipe taken with sws_pipe_get: kept when it is empty and the
 * cache has room, else closed. drained: the caller knows it is empty (every
 * byte put into it reached its socket), so FIONREAD need not ask. *pp is
 * marked closed (rd = wr = -1). */
void sws_pipe_put(sws_pipe_cache_t *pc, sws_pipe_t *pp, int drained);

/* Close every cached pipe (the worker stops). */
void sws_pipe_cache_close(sws_pipe_cache_t *pc);

#endif
