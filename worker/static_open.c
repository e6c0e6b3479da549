#include "worker/static_open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

#define OPEN_FLAGS (O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)

/* sws_static_open_status: every errno with an answer other than 500. */
static const struct {
    int err;
    unsigned status;
} open_status[] = {
    { ENOENT, 404 }, { ENOTDIR, 404 }, { ENAMETOOLONG, 404 },
    { EACCES, 403 }, { EPERM, 403 },   { ELOOP, 403 },  { EXDEV, 403 }, { ENXIO, 403 },
    { EMFILE, 503 }, { ENFILE, 503 },  { ENOMEM, 503 }, { ENOBUFS, 503 }, { EAGAIN, 503 },
    { EINTR, 503 },
};

unsigned sws_static_open_status(int err)
{
    for (size_t i = 0; i < sizeof(open_status) / sizeof(open_status[0]); i++)
        if (open_status[i].err == err)
            return open_status[i].status;
    return 500;
}

static int open_root(sws_static_root_t *e, const char *path, size_t len, uint64_t now_ms)
{
    struct stat st;
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    e->fd = fd;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->checked_ms = now_ms;
    e->used_ms = now_ms;
    e->warned_ms = 0;
    memcpy(e->path, path, len);
    e->path[len] = '\0';
    e->len = len;
    return fd;
}

static void drop_root(sws_static_root_t *e)
{
    close(e->fd);
    e->fd = -1;
    e->len = 0;
}

/* Does the path still name the directory the entry holds? */
static int root_is_current(const sws_static_root_t *e)
{
    struct stat st;
    return stat(e->path, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino;
}

int sws_static_root_fd(sws_static_roots_t *roots, const char *path, size_t len, uint64_t now_ms)
{
    sws_static_root_t *victim = &roots->slot[0];

    if (len == 0 || len >= PATH_MAX) {
        errno = len == 0 ? ENOENT : ENAMETOOLONG;
        return -1;
    }
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++) {
        sws_static_root_t *e = &roots->slot[i];
        if (e->len == len && memcmp(e->path, path, len) == 0) {
            if (now_ms - e->checked_ms >= SWS_STATIC_ROOT_CHECK_MS) {
                if (!root_is_current(e)) {
                    drop_root(e);
                    return open_root(e, path, len, now_ms);
                }
                e->checked_ms = now_ms;
            }
            e->used_ms = now_ms;
            return e->fd;
        }
        if (victim->len != 0 && (e->len == 0 || e->used_ms < victim->used_ms))
            victim = e;
    }
    if (victim->len != 0)
        drop_root(victim);
    return open_root(victim, path, len, now_ms);
}

int sws_static_root_warn_due(sws_static_roots_t *roots, int rootfd, uint64_t now_ms)
{
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++) {
        sws_static_root_t *e = &roots->slot[i];
        if (e->len == 0 || e->fd != rootfd)
            continue;
        if (e->warned_ms != 0 && now_ms - e->warned_ms < SWS_STATIC_ROOT_WARN_MS)
            return 0;
        e->warned_ms = now_ms != 0 ? now_ms : 1;
        return 1;
    }
    return 0;
}

int sws_static_fail_log_due(sws_static_roots_t *roots, uint64_t now_ms, unsigned *quiet)
{
    if (roots->failed_logged_ms != 0 && now_ms - roots->failed_logged_ms < SWS_STATIC_FAIL_LOG_MS) {
        roots->failed_quiet++;
        return 0;
    }
    roots->failed_logged_ms = now_ms != 0 ? now_ms : 1;
    *quiet = roots->failed_quiet;
    roots->failed_quiet = 0;
    return 1;
}

void sws_static_roots_close(sws_static_roots_t *roots)
{
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++)
        if (roots->slot[i].len != 0)
            drop_root(&roots->slot[i]);
}

/* Open one directory component below dir without following a symlink. An
 * intermediate symlink shows as ENOTDIR; report it as ELOOP, like the final
 * component, so that the caller answers both the same way. */
static int walk_dir(int dir, const char *name)
{
    struct stat st;
    int fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOTDIR && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
        errno = ELOOP;
    return fd;
}

int sws_static_open_walk(int rootfd, const char *rel)
{
    char name[NAME_MAX + 1];
    int dir = rootfd;
    const char *p = rel;
    const char *slash;
    int fd, err;

    while ((slash = strchr(p, '/')) != NULL) {
        size_t n = (size_t)(slash - p);
        if (n > NAME_MAX) {
            errno = ENAMETOOLONG;
            goto fail;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        p = slash + 1;
        if (n == 0 || strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            errno = EXDEV;
            goto fail;
        }
        fd = walk_dir(dir, name);
        if (fd < 0)
            goto fail;
        if (dir != rootfd)
            close(dir);
        dir = fd;
    }
    if (strcmp(p, "..") == 0) {
        errno = EXDEV;
        goto fail;
    }
    fd = openat(dir, *p ? p : ".", OPEN_FLAGS | O_NOFOLLOW);
    err = errno;
    if (dir != rootfd)
        close(dir);
    errno = err;
    return fd;

fail:
    err = errno;
    if (dir != rootfd)
        close(dir);
    errno = err;
    return -1;
}

static int open_beneath(int rootfd, const char *rel, int follow_symlinks)
{
    struct open_how how = {
        .flags = OPEN_FLAGS,
        .resolve = RESOLVE_NO_MAGICLINKS | (follow_symlinks ? 0 : RESOLVE_BENEATH),
    };
    long fd;
    int tries = 0;

    /* EAGAIN: a concurrent rename made the kernel unsure that ".." (from a
     * symlink's target) stayed below the root; the walk may be retried. */
    do
        fd = syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof(how));
    while (fd < 0 && errno == EAGAIN && ++tries < 3);
    return (int)fd;
}

int sws_static_open(sws_static_roots_t *roots, int rootfd, const char *rel, int follow_symlinks)
{
    if (!roots->no_openat2) {
        int fd = open_beneath(rootfd, rel, follow_symlinks);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
            return fd;
        roots->no_openat2 = 1;
        sws_log_notice("openat2 is not available (%s): static files are opened one path "
                       "component at a time and every symlink below a root is refused",
                       strerror(errno));
    }
    if (follow_symlinks)
        return openat(rootfd, *rel ? rel : ".", OPEN_FLAGS);
    return sws_static_open_walk(rootfd, rel);
}
