/*
 * Process titles: what `ps` shows for the supervisor and each worker.
 *
 *   scalwsd: supervisor -c /etc/scalws/scalws.yaml
 *   scalwsd: worker 0
 *
 * Linux shows a process's argv memory as its command line, so the title is
 * written over that memory. The environment strings that follow argv are
 * moved aside first (copied to the heap, `environ` repointed) so the title
 * may use their room too. The argv strings are copied as well and argv[i]
 * repointed at the copies, so the caller's argv stays valid (getopt works).
 * The comm name (/proc/PID/comm, what `pgrep` and `ps -C` match) is kept
 * "scalwsd" in every process.
 *
 * Caller: main(), once, before anything reads argv or the environment's
 * string addresses; then any process (the supervisor, a worker child after
 * fork) may set its title. The state is the process's own (each forked
 * child writes its copy of the memory).
 */
#ifndef SWS_SUPERVISOR_PROCTITLE_H
#define SWS_SUPERVISOR_PROCTITLE_H

#include <sys/types.h>

#define SWS_PROCTITLE_COMM "scalwsd"

/* 0, or -1 when out of memory (then titles are left alone). */
int sws_proctitle_init(int argc, char **argv);

/* Set the title; truncated to the room argv and the environment had.
 * Does nothing if sws_proctitle_init() was not called or failed. */
void sws_proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether pid's comm name is SWS_PROCTITLE_COMM: 1, 0 (another program:
 * a pid file that outlived its supervisor, its pid taken since), or -1
 * (no such process). Any process may call it. */
int sws_proctitle_is_ours(pid_t pid);

/* unsetenv(name), freeing the heap copy sws_proctitle_init() made of its
 * string (unsetenv only drops the pointer: the copy would leak). */
void sws_proctitle_unsetenv(const char *name);

#endif
