/*
 * Opening files below a static root, without escaping it.
 *
 * A file is opened relative to a directory fd of the root with openat2(2):
 * with RESOLVE_BENEATH when the route does not follow symlinks, so that a
 * symlink inside the root keeps working and one leading out of it (or an
 * absolute one) fails with EXDEV, checked by the kernel on the same walk
 * that opens the file (no check-then-open race). /proc-style magic links
 * are refused in both modes. Where openat2 is unavailable (ENOSYS/EPERM
 * from an old seccomp profile) the walk falls back to one openat per
 * component with O_NOFOLLOW: stricter (it refuses every symlink below the
 * root) but never looser.
 *
 * The root dirfds are kept open in a small per-process table, so a request
 * costs one open, not three (open root, open file, close root). An entry is
 * revalidated at most once a second: when the root path names another
 * directory than the one held (a deploy that swaps a "current" symlink, a
 * root that was removed and created again) the entry is reopened, so such a
 * change is served within a second. Roots no longer in the table (after a
 * reload) age out as other roots need the slots.
 *
 * Owner: one sws_static_roots_t per worker process, in its context
 * (worker/ctx.h); single-threaded like everything in a worker.
 * Zero-initialised memory is an empty table.
 */
#ifndef SWS_WORKER_STATIC_OPEN_H
#define SWS_WORKER_STATIC_OPEN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SWS_STATIC_ROOTS 8
#define SWS_STATIC_ROOT_CHECK_MS 1000
#define SWS_STATIC_ROOT_WARN_MS 60000 /* one line per root per minute at most */
#define SWS_STATIC_FAIL_LOG_MS 1000   /* one "cannot open" line per second at most */

typedef struct sws_static_root {
    int fd;              /* O_PATH directory fd; valid when len > 0 */
    dev_t dev;           /* what fd was when opened, to notice a swap */
    ino_t ino;
    uint64_t checked_ms; /* last time path was compared with fd */
    uint64_t used_ms;    /* for replacing the least recently used entry */
    uint64_t warned_ms;  /* last sws_static_root_warn_due() yes; 0: never */
    size_t len;          /* 0: empty slot */
    char path[PATH_MAX];
} sws_static_root_t;

typedef struct sws_static_roots {
    sws_static_root_t slot[SWS_STATIC_ROOTS];
    int no_openat2;      /* openat2 failed with ENOSYS/EPERM once: use the walk */
    uint64_t failed_logged_ms; /* last sws_static_fail_log_due() yes; 0: never */
    unsigned failed_quiet;     /* failures not logged since then */
} sws_static_roots_t;

/* A directory fd for the root path[0..len) (absolute; NUL at path[len]),
 * owned by roots (do not close it). now_ms: a monotonic clock in ms.
 * Returns the fd, or -1 with errno set (ENOENT, EACCES, ENAMETOOLONG...). */
int sws_static_root_fd(sws_static_roots_t *roots, const char *path, size_t len, uint64_t now_ms);

/* May a problem with the root held as rootfd (from sws_static_root_fd) be
 * logged at now_ms? Yes once per SWS_STATIC_ROOT_WARN_MS per root, and at
 * once after the root was reopened (another directory); a yes stamps the
 * time. So a broken root is named in the log without a line per request. */
int sws_static_root_warn_due(sws_static_roots_t *roots, int rootfd, uint64_t now_ms);

/* May an open that failed through no fault of the request (out of
 * descriptors or memory: a 5xx) be logged at now_ms? Yes at most once per
 * SWS_STATIC_FAIL_LOG_MS per worker, with *quiet set to how many such
 * failures were not logged since the last yes: when every request fails
 * the same way, the log gets one line a second, not one per request. */
int sws_static_fail_log_due(sws_static_roots_t *roots, uint64_t now_ms, unsigned *quiet);

/* Close every fd the table holds and empty it. */
void sws_static_roots_close(sws_static_roots_t *roots);

/* Open rel (relative, no "." or ".." segments expected but harmless) below
 * rootfd for reading: O_RDONLY | O_NONBLOCK (a FIFO must not block the
 * worker) | O_CLOEXEC | O_NOCTTY. The caller owns the returned fd. Returns
 * -1 with errno: EXDEV or ELOOP when the name leads out of the root or
 * through a refused symlink, else what open(2) says. "" opens the root. */
int sws_static_open(sws_static_roots_t *roots, int rootfd, const char *rel, int follow_symlinks);

/* The status for a request whose root or file could not be opened with
 * errno err: 404 for what is not there, 403 for what is refused (no
 * permission, a way out of the root), 503 for what a retry may get (out of
 * descriptors or memory: never an answer a cache would keep, like a 404),
 * 500 for anything else. Pure; any process. */
unsigned sws_static_open_status(int err);

/* The fallback walk, exposed for tests: every component opened with
 * O_NOFOLLOW, so any symlink fails with ELOOP. */
int sws_static_open_walk(int rootfd, const char *rel);

#endif
