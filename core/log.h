/*
 * The error log: one line per event, to standard error or a file.
 *
 *   2026-11-30T02:33:30.123Z [error] worker 1[4242]: message
 *
 * Each process has one logger (a private struct in log.c, owned by the
 * process's main function); sws_log_init() sets it, workers call
 * sws_log_set_role() after fork. Lines are written with one write(2) so the
 * processes sharing a file or a terminal never interleave inside a line.
 * Every control byte and DEL of the formatted message is written as \xHH
 * (core/escape.h), so an argument that comes from a request cannot forge a
 * line or drive a terminal; callers pass request bytes as they are.
 * Not thread-safe; ScalWS processes are single-threaded.
 */
#ifndef SWS_CORE_LOG_H
#define SWS_CORE_LOG_H

#include <stdarg.h>
#include <stddef.h>

typedef enum sws_log_level {
    SWS_LOG_DEBUG = 0,
    SWS_LOG_INFO,
    SWS_LOG_NOTICE,
    SWS_LOG_WARN,
    SWS_LOG_ERROR,
    SWS_LOG_CRIT,
} sws_log_level_t;

/* fd: where lines go (2 for stderr); the logger does not own it until
 * sws_log_open() replaces it. */
void sws_log_init(const char *role, int fd, sws_log_level_t min_level);

/* Open path (append, sws_log_file_open) and log there from now on; "" or
 * "-": standard error, through a descriptor of its own that never blocks
 * (a full pipe loses lines rather than stopping a worker). 0, or -1 with a message in err
 * (nothing logged: the caller reports). SIGUSR1 in the supervisor. */
int sws_log_open(const char *path, char *err, size_t errlen);

/* Log to fd from now on; the logger owns it (closes it when replaced).
 * A worker, with the descriptor the supervisor sent (core/chan.h). */
void sws_log_set_fd(int fd);

/* The descriptor lines go to now (the supervisor sends it to workers). */
int sws_log_fd(void);

/* Open a log destination for appending: path, or for "" and "-" the
 * standard stream std_fd (1 or 2). Returns a new close-on-exec descriptor
 * that the caller owns, or -1 with a message in err. A pipe or FIFO gets
 * an open file description of its own, non-blocking: a writer that must
 * never wait (a worker) can have it without making the description it
 * shares with other processes (the supervisor's stdout) non-blocking. A
 * socket is duplicated as it is: its writer sends with MSG_DONTWAIT.
 * What the supervisor uses for every log file, and `scalwsd -t` too. */
int sws_log_file_open(const char *path, int std_fd, char *err, size_t errlen);

void sws_log_set_level(sws_log_level_t min_level);

/* While on, lines at error level or above are also written to standard
 * error when the log goes to another file: the supervisor turns it on
 * while it starts, so that an operator at a terminal sees why a start
 * failed, and off before it forks workers (they inherit the setting). */
void sws_log_set_startup_echo(int on);
sws_log_level_t sws_log_get_level(void);

/* "worker 3", "supervisor": the name printed before the pid. */
void sws_log_set_role(const char *role);

/* Parse "debug", "info", "notice", "warn", "error", "crit". 0 or -1. */
int sws_log_level_parse(const char *name, sws_log_level_t *out);

void sws_log(sws_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message of the last line logged at error level or above ("" when
 * none), cut to 255 bytes: what a process that gives up tells another
 * (a new binary that refuses an upgrade tells the old one why). */
const char *sws_log_last_error(void);
void sws_logv(sws_log_level_t level, const char *fmt, va_list ap);

#define sws_log_debug(...) \
    do { if (sws_log_get_level() <= SWS_LOG_DEBUG) sws_log(SWS_LOG_DEBUG, __VA_ARGS__); } while (0)
#define sws_log_info(...)   sws_log(SWS_LOG_INFO, __VA_ARGS__)
#define sws_log_notice(...) sws_log(SWS_LOG_NOTICE, __VA_ARGS__)
#define sws_log_warn(...)   sws_log(SWS_LOG_WARN, __VA_ARGS__)
#define sws_log_error(...)  sws_log(SWS_LOG_ERROR, __VA_ARGS__)
#define sws_log_crit(...)   sws_log(SWS_LOG_CRIT, __VA_ARGS__)

#endif
