#include "supervisor/pid_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"

/* "pid\n" in path's temporary name (tmp, the caller's); 0, or -1 with
 * err naming path, not the temporary name the operator never wrote. */
static int write_tmp(const char *path, pid_t pid, char *tmp, size_t tmplen, char *err,
                     size_t errlen)
{
    char line[32];
    if (snprintf(tmp, tmplen, "%s.%d.tmp", path, (int)getpid()) >= (int)tmplen)
        return sws_errf(err, errlen, "%s: path too long", path);
    int len = snprintf(line, sizeof(line), "%d\n", (int)pid);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return sws_errf(err, errlen, "%s: %s", path, strerror(errno));
    ssize_t n = write(fd, line, (size_t)len);
    int e = errno;
    if (close(fd) < 0 && n == len) {
        n = -1;
        e = errno;
    }
    if (n != len) {
        unlink(tmp);
        return sws_errf(err, errlen, "%s: %s", path, strerror(e));
    }
    return 0;
}

int sws_pid_file_write(const char *path, pid_t pid, char *err, size_t errlen)
{
    char tmp[PATH_MAX], why[PATH_MAX + 64];
    if (write_tmp(path, pid, tmp, sizeof(tmp), why, sizeof(why)) < 0)
        return sws_errf(err, errlen, "server.pid_file: %s", why);
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return sws_errf(err, errlen, "server.pid_file: %s: %s", path, strerror(e));
    }
    return 0;
}

int sws_pid_file_check(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (write_tmp(path, getpid(), tmp, sizeof(tmp), err, errlen) < 0)
        return -1;
    unlink(tmp);
    return 0;
}

int sws_pid_file_read(const char *path, pid_t *pid, char *err, size_t errlen)
{
    char buf[32];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sws_errf(err, errlen, "%s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return sws_errf(err, errlen, "%s: empty", path);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno != 0 || end == buf || v <= 0 || v > INT_MAX || (*end != '\n' && *end != '\0'))
        return sws_errf(err, errlen, "%s: \"%.*s\" is not a pid", path, (int)strcspn(buf, "\n"),
                        buf);
    *pid = (pid_t)v;
    return 0;
}

int sws_pid_file_read_serving(const char *path, pid_t *pid, int *oldbin, char *err,
                              size_t errlen)
{
    char aside[PATH_MAX], ignored[PATH_MAX + 64];
    *oldbin = 0;
    if (sws_pid_file_read(path, pid, err, errlen) == 0)
        return 0;
    snprintf(aside, sizeof(aside), "%s%s", path, SWS_PID_FILE_OLDBIN);
    if (access(path, F_OK) < 0 && errno == ENOENT &&
        sws_pid_file_read(aside, pid, ignored, sizeof(ignored)) == 0) {
        *oldbin = 1;
        return 0;
    }
    return -1;
}

void sws_pid_file_remove(const char *path, pid_t pid)
{
    pid_t in_file;
    char err[PATH_MAX + 64];
    if (sws_pid_file_read(path, &in_file, err, sizeof(err)) == 0 && in_file == pid)
        unlink(path);
}

int sws_pid_file_move(const char *path, const char *from_suffix, const char *to_suffix,
                      char *err, size_t errlen)
{
    char from[PATH_MAX], to[PATH_MAX];
    snprintf(from, sizeof(from), "%s%s", path, from_suffix);
    snprintf(to, sizeof(to), "%s%s", path, to_suffix);
    if (rename(from, to) < 0)
        return sws_errf(err, errlen, "server.pid_file: rename %s to %s: %s", from, to,
                        strerror(errno));
    return 0;
}
