/*
 * server.pid_file: the supervisor's pid, for `scalwsd -s VERB` and for
 * operators' scripts, kept right across a binary upgrade the way nginx
 * does (docs/operations.md, "Binary upgrade"):
 *
 *   start          write FILE
 *   upgrade begun  the old supervisor renames FILE to FILE.oldbin
 *   GO             the new supervisor writes FILE
 *   rollback       the old one renames FILE.oldbin back to FILE
 *   old one exits  it removes FILE.oldbin; a clean stop removes FILE
 *
 * Every write is "pid\n" to a temporary file in the same directory, then
 * rename(), so a reader never sees a partial file.
 *
 * Caller: the supervisor (write, rename, remove) and `scalwsd -s` (read).
 */
#ifndef SWS_SUPERVISOR_PID_FILE_H
#define SWS_SUPERVISOR_PID_FILE_H

#include <stddef.h>
#include <sys/types.h>

#define SWS_PID_FILE_OLDBIN ".oldbin"

/* Write pid to path atomically. 0, or -1 with a message in err. */
int sws_pid_file_write(const char *path, pid_t pid, char *err, size_t errlen);

/* Whether a start could write path: its temporary file is written in
 * path's directory and removed, path itself is left alone (scalwsd -t,
 * so -t and a start cannot disagree). 0, or -1 with "PATH: why" in err. */
int sws_pid_file_check(const char *path, char *err, size_t errlen);

/* The pid in path: 0 and *pid, or -1 with a message in err (no file, not
 * a pid). */
int sws_pid_file_read(const char *path, pid_t *pid, char *err, size_t errlen);

/* The pid of the supervisor that serves, for `scalwsd -s`: path's, or
 * while an upgrade is in progress (path moved aside, not written again
 * yet) path.oldbin's, then *oldbin is 1. 0, or -1 with path's message in
 * err when neither reads. */
int sws_pid_file_read_serving(const char *path, pid_t *pid, int *oldbin, char *err,
                              size_t errlen);

/* Remove path when it still names pid (a newer process may have written
 * it since). */
void sws_pid_file_remove(const char *path, pid_t pid);

/* rename(path + from_suffix, path + to_suffix), either suffix "" or
 * SWS_PID_FILE_OLDBIN. 0, or -1 with a message in err. */
int sws_pid_file_move(const char *path, const char *from_suffix, const char *to_suffix,
                      char *err, size_t errlen);

#endif
