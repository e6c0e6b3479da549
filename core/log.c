#include "core/log.h"

#include "core/err.h"
#include "core/escape.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The process's logger. Owner: the process's main function (sws_log_init). */
static struct sws_logger {
    int fd;
    int owns_fd;
    int is_socket; /* send(MSG_DONTWAIT): never wait for a reader */
    int echo;      /* errors also to standard error (sws_log_set_startup_echo) */
    sws_log_level_t min_level;
    char role[32];
    char last_error[256]; /* sws_log_last_error */
} logger = { 2, 0, 0, 0, SWS_LOG_INFO, "scalwsd", "" };

/* A message is cut at SWS_LOG_MSG_MAX bytes before escaping (4 bytes per
 * escaped byte), a line at PIPE_BUF: writes up to that size to a pipe are
 * atomic, so processes sharing one never interleave inside a line. */
#define SWS_LOG_MSG_MAX 2048
#define SWS_LOG_HEAD_MAX 128
#define SWS_LOG_LINE_MAX (SWS_LOG_HEAD_MAX + SWS_ESC_MAX(SWS_LOG_MSG_MAX))
#define SWS_LOG_WRITE_MAX PIPE_BUF

static const char *const level_names[] = {
    "debug", "info", "notice", "warn", "error", "crit",
};

void sws_log_init(const char *role, int fd, sws_log_level_t min_level)
{
    logger.fd = fd;
    logger.owns_fd = 0;
    logger.is_socket = 0;
    logger.min_level = min_level;
    sws_log_set_role(role);
}

int sws_log_open(const char *path, char *err, size_t errlen)
{
    int fd = sws_log_file_open(path, 2, err, errlen);
    if (fd < 0)
        return -1;
    sws_log_set_fd(fd);
    return 0;
}

void sws_log_set_fd(int fd)
{
    if (logger.owns_fd && logger.fd != fd)
        close(logger.fd);
    logger.fd = fd;
    logger.owns_fd = 1;
    struct stat st;
    logger.is_socket = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

int sws_log_fd(void) { return logger.fd; }

int sws_log_file_open(const char *path, int std_fd, char *err, size_t errlen)
{
    if (path != NULL && path[0] != '\0' && strcmp(path, "-") != 0) {
        /* O_NONBLOCK matters only for a FIFO: without a reader the open
         * fails (ENXIO) instead of hanging the supervisor. */
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
        if (fd < 0)
            return sws_errf(err, errlen, "%s: %s", path, strerror(errno));
        return fd;
    }
    struct stat st;
    if (fstat(std_fd, &st) < 0)
        return sws_errf(err, errlen, "standard %s: %s", std_fd == 2 ? "error" : "output",
                        strerror(errno));
    int fd;
    if (S_ISFIFO(st.st_mode)) {
        char proc[32];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", std_fd);
        fd = open(proc, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    } else {
        fd = fcntl(std_fd, F_DUPFD_CLOEXEC, 3);
    }
    if (fd < 0)
        return sws_errf(err, errlen, "standard %s: %s", std_fd == 2 ? "error" : "output",
                        strerror(errno));
    return fd;
}

void sws_log_set_level(sws_log_level_t min_level) { logger.min_level = min_level; }

void sws_log_set_startup_echo(int on) { logger.echo = on; }

/* The log already goes to standard error's file (a terminal, a pipe). */
static int log_is_stderr(void)
{
    struct stat a, b;
    if (fstat(logger.fd, &a) < 0 || fstat(2, &b) < 0)
        return 1;
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
sws_log_level_t sws_log_get_level(void) { return logger.min_level; }

void sws_log_set_role(const char *role)
{
    snprintf(logger.role, sizeof(logger.role), "%s", role);
}

int sws_log_level_parse(const char *name, sws_log_level_t *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (sws_log_level_t)i;
            return 0;
        }
    }
    if (strcmp(name, "warning") == 0) {
        *out = SWS_LOG_WARN;
        return 0;
    }
    return -1;
}

void sws_logv(sws_log_level_t level, const char *fmt, va_list ap)
{
    if (level < logger.min_level)
        return;
    int saved_errno = errno;
    /* The message is formatted first and escaped into the line, so no
     * argument (a request path, a header) can end the line or reach a
     * terminal: one rule here instead of one at every call site. */
    char msg[SWS_LOG_MSG_MAX];
    char line[SWS_LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ [%s] %s[%d]: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], logger.role,
                     (int)getpid());
    if (n < 0 || n > SWS_LOG_HEAD_MAX)
        n = 0; /* cannot happen: role is 32 bytes at most */
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (m < 0)
        m = 0;
    size_t mlen = (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
    if (level >= SWS_LOG_ERROR) {
        size_t keep = mlen < sizeof(logger.last_error) ? mlen : sizeof(logger.last_error) - 1;
        memcpy(logger.last_error, msg, keep);
        logger.last_error[keep] = '\0';
    }
    char *end = sws_put_escaped(line + n, msg, mlen, SWS_ESC_CTL);
    size_t len = (size_t)(end - line);
    if (len > SWS_LOG_WRITE_MAX - 1)
        len = SWS_LOG_WRITE_MAX - 1; /* truncated: still one line */
    line[len++] = '\n';
    /* One write per line; a short write to a pipe or file is not retried
     * and a full one (EAGAIN: sws_log_file_open made it non-blocking) not
     * waited for: losing a log line beats blocking a worker. */
    ssize_t w = logger.is_socket ? send(logger.fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL)
                                 : write(logger.fd, line, len);
    (void)w;
    if (logger.echo && level >= SWS_LOG_ERROR && !log_is_stderr())
        w = write(2, line, len);
    (void)w;
    errno = saved_errno;
}

void sws_log(sws_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sws_logv(level, fmt, ap);
    va_end(ap);
}

const char *sws_log_last_error(void)
{
    return logger.last_error;
}
