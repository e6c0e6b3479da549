/* worker/static_cond.c, static_open.c: the pure logic of the
 * static action and the confinement of opens below a root. The handler
 * itself (static.c) is driven end to end by the integration tests; here
 * only where it keeps its roots (the worker context, worker/ctx.h) and how
 * often a refused open probes its root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/http_date.h"
#include "core/log.h"
#include "support/routeset_build.h"
#include "worker/conn.h"
#include "worker/http1.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/static_cond.h"
#include "worker/static_open.h"

static sws_str_t S(const char *s)
{
    return (sws_str_t){ s, strlen(s) };
}

/* ---- ranges ---- */

static void assert_range(const char *value, uint64_t size, sws_static_range_rc_t want,
                         uint64_t want_first, uint64_t want_len)
{
    uint64_t first = 12345, len = 12345;
    sws_static_range_rc_t rc = sws_static_range_parse(S(value), size, &first, &len);
    if (rc != want)
        fail_msg("\"%s\" size %llu: rc %d, want %d", value, (unsigned long long)size, rc, want);
    if (rc == SWS_STATIC_RANGE_OK && (first != want_first || len != want_len))
        fail_msg("\"%s\": %llu+%llu, want %llu+%llu", value, (unsigned long long)first,
                 (unsigned long long)len, (unsigned long long)want_first,
                 (unsigned long long)want_len);
}

static void test_range_single_forms(void **state)
{
    (void)state;
    assert_range("bytes=0-99", 1000, SWS_STATIC_RANGE_OK, 0, 100);
    assert_range("bytes=0-0", 1000, SWS_STATIC_RANGE_OK, 0, 1);
    assert_range("bytes=900-", 1000, SWS_STATIC_RANGE_OK, 900, 100);
    assert_range("bytes=-100", 1000, SWS_STATIC_RANGE_OK, 900, 100);
    assert_range("BYTES=1-2", 1000, SWS_STATIC_RANGE_OK, 1, 2);
    assert_range("bytes= 1-2 ", 1000, SWS_STATIC_RANGE_OK, 1, 2);
}

static void test_range_clamped_to_file(void **state)
{
    (void)state;
    assert_range("bytes=500-5000", 1000, SWS_STATIC_RANGE_OK, 500, 500);
    assert_range("bytes=-5000", 1000, SWS_STATIC_RANGE_OK, 0, 1000);
    assert_range("bytes=0-99999999999999999999999", 1000, SWS_STATIC_RANGE_OK, 0, 1000);
    assert_range("bytes=-99999999999999999999999", 1000, SWS_STATIC_RANGE_OK, 0, 1000);
}

static void test_range_unsatisfiable(void **state)
{
    (void)state;
    assert_range("bytes=1000-", 1000, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
    assert_range("bytes=1000-2000", 1000, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
    assert_range("bytes=-0", 1000, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
    assert_range("bytes=99999999999999999999999-", 1000, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
    assert_range("bytes=0-", 0, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
    assert_range("bytes=-1", 0, SWS_STATIC_RANGE_UNSATISFIABLE, 0, 0);
}

static void test_range_ignored_when_invalid_or_multiple(void **state)
{
    (void)state;
    assert_range("bytes=5-1", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=0-1,5-6", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=0-1, 2000-3000", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("items=0-1", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=-", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=abc", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=1", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=1-2x", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes=--1", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
    assert_range("bytes", 1000, SWS_STATIC_RANGE_NONE, 0, 0);
}

static void test_content_range_format(void **state)
{
    (void)state;
    char buf[SWS_STATIC_CONTENT_RANGE_MAX];
    assert_int_equal(sws_static_content_range(buf, 0, 100, 1000), strlen("bytes 0-99/1000"));
    assert_string_equal(buf, "bytes 0-99/1000");
    sws_static_content_range(buf, 0, 0, 1000);
    assert_string_equal(buf, "bytes */1000");
    sws_static_content_range(buf, UINT64_MAX - 1, 1, UINT64_MAX);
    assert_string_equal(buf, "bytes 18446744073709551614-18446744073709551614/18446744073709551615");
}

/* ---- ETag and conditionals ---- */

static void test_etag_format(void **state)
{
    (void)state;
    char buf[SWS_STATIC_ETAG_MAX];
    assert_int_equal(sws_static_etag(buf, 0x5f5e1000, 0x1a2), strlen("\"5f5e1000-1a2\""));
    assert_string_equal(buf, "\"5f5e1000-1a2\"");
    sws_static_etag(buf, 0, 0);
    assert_string_equal(buf, "\"0-0\"");
    sws_static_etag(buf, (time_t)-1, UINT64_MAX);
    assert_string_equal(buf, "\"ffffffffffffffff-ffffffffffffffff\"");
}

static void test_if_none_match_lists(void **state)
{
    (void)state;
    sws_str_t etag = S("\"5f-1a\"");
    assert_true(sws_static_etag_listed(S("\"5f-1a\""), etag));
    assert_true(sws_static_etag_listed(S("\"a\", \"b\",\"5f-1a\""), etag));
    assert_true(sws_static_etag_listed(S("W/\"5f-1a\""), etag)); /* weak comparison */
    assert_true(sws_static_etag_listed(S("*"), etag));
    assert_true(sws_static_etag_listed(S(" ,\"x\" , *"), etag));
    assert_false(sws_static_etag_listed(S("\"5f-1b\""), etag));
    assert_false(sws_static_etag_listed(S("\"5f-1a"), etag));   /* unterminated */
    assert_false(sws_static_etag_listed(S("5f-1a"), etag));     /* unquoted */
    assert_false(sws_static_etag_listed(S("\"x\", 5f, \"5f-1a\""), etag)); /* stops at garbage */
    assert_false(sws_static_etag_listed(S(""), etag));
    assert_false(sws_static_etag_listed(S("W/"), etag));
}

static void assert_date(const char *s, time_t want)
{
    time_t t = 0;
    if (sws_static_date_parse(S(s), &t) != 0)
        fail_msg("\"%s\" not parsed", s);
    assert_int_equal(t, want);
}

static void assert_not_date(const char *s)
{
    time_t t;
    if (sws_static_date_parse(S(s), &t) == 0)
        fail_msg("\"%s\" parsed", s);
}

static void test_date_parse_three_forms(void **state)
{
    (void)state;
    /* RFC 9110's example instant. */
    assert_date("Sun, 06 Nov 1994 08:49:37 GMT", 784111777);
    assert_date("Sunday, 06-Nov-94 08:49:37 GMT", 784111777);
    assert_date("Sun Nov  6 08:49:37 1994", 784111777);
    assert_date("Thu, 01 Jan 1970 00:00:00 GMT", 0);
    assert_date("Thursday, 01-Jan-70 00:00:00 GMT", 0);
    assert_date("Tue, 29 Feb 2000 12:00:00 GMT", 951825600);
    assert_date("Wed, 01-Mar-17 00:00:00 GMT", 1488326400);
}

static void test_date_parse_round_trips_formatter(void **state)
{
    (void)state;
    static const time_t instants[] = { 0, 1, 86399, 951782400, 1709164800 /* 2024-02-29 */,
                                       1735689599, 4102444800 /* 2100-01-01 */, 253402300799 };
    char buf[SWS_HTTP_DATE_LEN + 1];
    for (size_t i = 0; i < sizeof(instants) / sizeof(instants[0]); i++) {
        sws_http_date_format(instants[i], buf);
        assert_date(buf, instants[i]);
    }
}

static void test_date_parse_rejects_malformed(void **state)
{
    (void)state;
    assert_not_date("");
    assert_not_date("Sun, 06 Nov 1994 08:49:37 UTC");
    assert_not_date("Sun, 06 Nov 1994 08:49:37 GMT ");
    assert_not_date("Sun, 6 Nov 1994 08:49:37 GMT");
    assert_not_date("Sun, 06 nov 1994 08:49:37 GMT");
    assert_not_date("Sun, 32 Nov 1994 08:49:37 GMT");
    assert_not_date("Sun, 00 Nov 1994 08:49:37 GMT");
    assert_not_date("Sun, 06 Nov 1994 24:00:00 GMT");
    assert_not_date("Sun, 06 Nov 1994 08:60:00 GMT");
    assert_not_date("Sun, 06 Nov 94 08:49:37 GMT");
    assert_not_date("Sun, 06-Nov 1994 08:49:37 GMT");
    assert_not_date("Sun Nov  6 08:49:37 1994 GMT");
    assert_not_date("1994-11-06T08:49:37Z");
    assert_not_date("Sun, 06 Nov 1994 08:49");
}

static void test_if_range(void **state)
{
    (void)state;
    sws_str_t etag = S("\"2ec13aa1-1a\"");
    time_t mtime = 784111777;
    assert_true(sws_static_if_range_ok(S("\"2ec13aa1-1a\""), etag, mtime));
    assert_false(sws_static_if_range_ok(S("W/\"2ec13aa1-1a\""), etag, mtime)); /* weak never */
    assert_false(sws_static_if_range_ok(S("\"other\""), etag, mtime));
    assert_true(sws_static_if_range_ok(S("Sun, 06 Nov 1994 08:49:37 GMT"), etag, mtime));
    assert_false(sws_static_if_range_ok(S("Sun, 06 Nov 1994 08:49:38 GMT"), etag, mtime));
    assert_false(sws_static_if_range_ok(S("Sun, 06 Nov 1994 08:49:36 GMT"), etag, mtime));
    assert_false(sws_static_if_range_ok(S("yesterday"), etag, mtime));
    assert_false(sws_static_if_range_ok(S(""), etag, mtime));
}

/* ---- opening below a root ----
 *
 *   base/root/a.txt            "A"
 *   base/root/sub/b.txt        "B"
 *   base/root/in      -> sub/b.txt            (inside)
 *   base/root/indir   -> sub                  (inside, a directory)
 *   base/root/out     -> ../outside/secret    (escapes)
 *   base/root/outdir  -> ../outside           (escapes, a directory)
 *   base/root/abs     -> <base>/outside/secret (escapes, absolute)
 *   base/root/fifo                            (a FIFO nobody writes)
 *   base/outside/secret        "S"
 */
typedef struct tree {
    char base[64];
    char root[128];
    int rootfd;
} tree_t;

static void write_file(const char *path, const char *data)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
    close(fd);
}

static int tree_setup(void **state)
{
    tree_t *t = calloc(1, sizeof(*t));
    char p[256];
    assert_non_null(t);
    strcpy(t->base, "/tmp/sws-static-XXXXXX");
    assert_non_null(mkdtemp(t->base));
    snprintf(t->root, sizeof(t->root), "%s/root", t->base);
    assert_int_equal(mkdir(t->root, 0755), 0);
    snprintf(p, sizeof(p), "%s/outside", t->base);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/outside/secret", t->base);
    write_file(p, "S");
    snprintf(p, sizeof(p), "%s/sub", t->root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/a.txt", t->root);
    write_file(p, "A");
    snprintf(p, sizeof(p), "%s/sub/b.txt", t->root);
    write_file(p, "B");
    snprintf(p, sizeof(p), "%s/fifo", t->root);
    assert_int_equal(mkfifo(p, 0644), 0);

    t->rootfd = open(t->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(t->rootfd >= 0);
    assert_int_equal(symlinkat("sub/b.txt", t->rootfd, "in"), 0);
    assert_int_equal(symlinkat("sub", t->rootfd, "indir"), 0);
    assert_int_equal(symlinkat("../outside/secret", t->rootfd, "out"), 0);
    assert_int_equal(symlinkat("../outside", t->rootfd, "outdir"), 0);
    snprintf(p, sizeof(p), "%s/outside/secret", t->base);
    assert_int_equal(symlinkat(p, t->rootfd, "abs"), 0);
    *state = t;
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int tree_teardown(void **state)
{
    tree_t *t = *state;
    close(t->rootfd);
    nftw(t->base, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
    return 0;
}

/* The first byte of what fd reads, or -1; closes fd. */
static int first_byte(int fd)
{
    char c;
    int rc = read(fd, &c, 1) == 1 ? c : -1;
    close(fd);
    return rc;
}

static int open_errno(sws_static_roots_t *roots, int rootfd, const char *rel, int follow)
{
    int fd = sws_static_open(roots, rootfd, rel, follow);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    return errno;
}

static void test_open_confined_with_openat2(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };

    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "a.txt", 0)), 'A');
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "sub/b.txt", 0)), 'B');
    /* Symlinks that stay inside the root keep working. */
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "in", 0)), 'B');
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "indir/b.txt", 0)), 'B');
    /* Escapes are refused by the kernel on the walk that opens. */
    assert_int_equal(open_errno(&roots, t->rootfd, "out", 0), EXDEV);
    assert_int_equal(open_errno(&roots, t->rootfd, "outdir/secret", 0), EXDEV);
    assert_int_equal(open_errno(&roots, t->rootfd, "abs", 0), EXDEV);
    assert_int_equal(open_errno(&roots, t->rootfd, "../outside/secret", 0), EXDEV);
    assert_int_equal(open_errno(&roots, t->rootfd, "missing", 0), ENOENT);
    assert_int_equal(open_errno(&roots, t->rootfd, "a.txt/x", 0), ENOTDIR);
    assert_int_equal(roots.no_openat2, 0);
}

static void test_open_follow_symlinks_allows_leaving_root(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };

    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "out", 1)), 'S');
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "outdir/secret", 1)), 'S');
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "abs", 1)), 'S');
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "in", 1)), 'B');
}

static void test_open_root_and_special_files(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };
    struct stat st;

    int fd = sws_static_open(&roots, t->rootfd, "", 0);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    close(fd);
    /* A FIFO without a writer opens at once (O_NONBLOCK): the worker must
     * not block; the handler then refuses it as not a regular file. */
    fd = sws_static_open(&roots, t->rootfd, "fifo", 0);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    close(fd);
}

static void test_open_walk_refuses_every_symlink(void **state)
{
    tree_t *t = *state;

    assert_int_equal(first_byte(sws_static_open_walk(t->rootfd, "a.txt")), 'A');
    assert_int_equal(first_byte(sws_static_open_walk(t->rootfd, "sub/b.txt")), 'B');
    assert_int_equal(first_byte(sws_static_open_walk(t->rootfd, "sub//b.txt")), 'B');
    assert_int_equal(sws_static_open_walk(t->rootfd, "in"), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sws_static_open_walk(t->rootfd, "indir/b.txt"), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sws_static_open_walk(t->rootfd, "outdir/secret"), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(sws_static_open_walk(t->rootfd, "../outside/secret"), -1);
    assert_int_equal(errno, EXDEV);
    assert_int_equal(sws_static_open_walk(t->rootfd, "sub/.."), -1);
    assert_int_equal(errno, EXDEV);
    assert_int_equal(sws_static_open_walk(t->rootfd, "sub/missing"), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(sws_static_open_walk(t->rootfd, "a.txt/x"), -1);
    assert_int_equal(errno, ENOTDIR);
}

static void test_open_without_openat2_uses_the_walk(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { .no_openat2 = 1 };

    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "sub/b.txt", 0)), 'B');
    assert_int_equal(open_errno(&roots, t->rootfd, "out", 0), ELOOP);
    assert_int_equal(open_errno(&roots, t->rootfd, "in", 0), ELOOP);
    assert_int_equal(first_byte(sws_static_open(&roots, t->rootfd, "out", 1)), 'S');
}

/* ---- the root dirfd table ---- */

static int same_dir(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

static void test_root_fd_is_reused_and_revalidated(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };
    char dir[160], moved[160];
    size_t len;

    snprintf(dir, sizeof(dir), "%s/swap", t->base);
    snprintf(moved, sizeof(moved), "%s/swap.old", t->base);
    len = strlen(dir);
    assert_int_equal(mkdir(dir, 0755), 0);

    int fd = sws_static_root_fd(&roots, dir, len, 1000);
    assert_true(fd >= 0);
    assert_true(same_dir(fd, dir));
    assert_int_equal(sws_static_root_fd(&roots, dir, len, 1500), fd);

    /* A deploy replaces the directory: within the check interval the old
     * one is still served, after it the new one. */
    assert_int_equal(rename(dir, moved), 0);
    assert_int_equal(mkdir(dir, 0755), 0);
    fd = sws_static_root_fd(&roots, dir, len, 1999);
    assert_true(fd >= 0);
    assert_true(same_dir(fd, moved));
    fd = sws_static_root_fd(&roots, dir, len, 2000);
    assert_true(fd >= 0);
    assert_true(same_dir(fd, dir));

    /* A root that disappears stops serving once checked. */
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(sws_static_root_fd(&roots, dir, len, 3000), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(rmdir(moved), 0);
    sws_static_roots_close(&roots);
}

static int holds(const sws_static_roots_t *roots, const char *path)
{
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++)
        if (roots->slot[i].len == strlen(path) && memcmp(roots->slot[i].path, path, roots->slot[i].len) == 0)
            return 1;
    return 0;
}

static unsigned count_open_fds(void)
{
    unsigned n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

static void test_root_table_replaces_least_recently_used(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };
    char dirs[SWS_STATIC_ROOTS + 1][160];
    int fds[SWS_STATIC_ROOTS + 1];

    for (unsigned i = 0; i <= SWS_STATIC_ROOTS; i++) {
        snprintf(dirs[i], sizeof(dirs[i]), "%s/r%u", t->base, i);
        assert_int_equal(mkdir(dirs[i], 0755), 0);
    }
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++) {
        fds[i] = sws_static_root_fd(&roots, dirs[i], strlen(dirs[i]), 100 + i);
        assert_true(fds[i] >= 0);
    }
    /* r0 is used again, so r1 is now the least recently used. */
    assert_int_equal(sws_static_root_fd(&roots, dirs[0], strlen(dirs[0]), 200), fds[0]);
    unsigned open_before = count_open_fds();
    int fd = sws_static_root_fd(&roots, dirs[SWS_STATIC_ROOTS], strlen(dirs[SWS_STATIC_ROOTS]), 201);
    assert_true(fd >= 0);
    assert_true(holds(&roots, dirs[0]));
    assert_false(holds(&roots, dirs[1]));
    assert_true(holds(&roots, dirs[SWS_STATIC_ROOTS]));
    assert_int_equal(count_open_fds(), open_before); /* r1's fd was closed, not leaked */

    sws_static_roots_close(&roots);
    assert_int_equal(count_open_fds(), open_before - SWS_STATIC_ROOTS);
    for (unsigned i = 0; i < SWS_STATIC_ROOTS; i++)
        assert_false(roots.slot[i].len);
}

static void test_root_fd_errors(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };
    char p[160];

    snprintf(p, sizeof(p), "%s/nonexistent", t->base);
    assert_int_equal(sws_static_root_fd(&roots, p, strlen(p), 0), -1);
    assert_int_equal(errno, ENOENT);
    snprintf(p, sizeof(p), "%s/a.txt", t->root);
    assert_int_equal(sws_static_root_fd(&roots, p, strlen(p), 0), -1);
    assert_int_equal(errno, ENOTDIR);
    assert_false(holds(&roots, p));
}

static void test_root_warning_once_per_interval(void **state)
{
    tree_t *t = *state;
    sws_static_roots_t roots = { 0 };
    int fd = sws_static_root_fd(&roots, t->root, strlen(t->root), 1000);
    assert_true(fd >= 0);
    assert_true(sws_static_root_warn_due(&roots, fd, 1000));
    assert_false(sws_static_root_warn_due(&roots, fd, 1000 + SWS_STATIC_ROOT_WARN_MS - 1));
    assert_true(sws_static_root_warn_due(&roots, fd, 1000 + SWS_STATIC_ROOT_WARN_MS));
    assert_false(sws_static_root_warn_due(&roots, -1, 1000)); /* not a root held */
    sws_static_roots_close(&roots);
}

/* Out of descriptors every request fails alike: one line a second, which
 * says how many were not logged. */
static void test_open_failures_logged_once_a_second(void **state)
{
    (void)state;
    sws_static_roots_t roots = { 0 };
    unsigned quiet = 99;
    assert_true(sws_static_fail_log_due(&roots, 5000, &quiet));
    assert_int_equal(quiet, 0);
    for (unsigned i = 0; i < 1000; i++)
        assert_false(sws_static_fail_log_due(&roots, 5000 + i % SWS_STATIC_FAIL_LOG_MS, &quiet));
    assert_true(sws_static_fail_log_due(&roots, 5000 + SWS_STATIC_FAIL_LOG_MS, &quiet));
    assert_int_equal(quiet, 1000);
    assert_false(sws_static_fail_log_due(&roots, 5001 + SWS_STATIC_FAIL_LOG_MS, &quiet));
}

/* ---- the handler and its worker context ---- */

/* Serve one request as a worker whose context is ctx would: a table with
 * one static route on t->root, a connection set carrying ctx, the client
 * on a socketpair. What the server sent (it closes: Connection: close)
 * goes to out, NUL-terminated. */
static void serve_as_worker(const tree_t *t, sws_worker_ctx_t *ctx, const char *request,
                            char *out, size_t outcap)
{
    Sws__RouteSet *rs = rs_new();
    host_static(rs_host(rs, "*"), SWS__ROUTE__MATCH__PREFIX, "/", t->root);
    size_t size;
    void *arena = rs_table(rs, 1, &size);

    sws_loop_t loop;
    sws_conn_set_t set;
    sws_shm_counters_t counters = { 0 };
    int sv[2];
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_conn_set_init(&set, &loop, &sws_http1_proto, sws_handlers_dispatch, &counters);
    set.ctx = ctx;
    sws_conn_set_configure(&set, arena, NULL, SWS_STR("scalws-test"));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_non_null(sws_conn_open(&set, sv[0], NULL, 0));
    assert_int_equal(write(sv[1], request, strlen(request)), (ssize_t)strlen(request));

    /* Every step is local (a socketpair): a few iterations answer it. */
    size_t len = 0;
    int eof = 0;
    for (int i = 0; i < 16 && !eof; i++) {
        assert_int_equal(sws_loop_run_once(&loop, 0), 0);
        sws_conn_set_reap(&set);
        ssize_t n;
        while ((n = read(sv[1], out + len, outcap - 1 - len)) > 0)
            if ((len += (size_t)n) + 1 == outcap)
                fail_msg("the answer is longer than %zu bytes", outcap - 1);
        eof = n == 0;
    }
    out[len] = '\0';
    if (!eof)
        fail_msg("no close after the answer; got \"%s\"", out);

    sws_conn_set_close_all(&set);
    sws_conn_set_reap(&set);
    sws_conn_set_destroy(&set);
    sws_loop_close(&loop);
    close(sv[1]);
    free(arena);
}

/* The roots a worker holds open are its context's, not the process's:
 * two contexts, two tables; closing a context closes its roots. */
static void test_handler_keeps_roots_in_the_workers_context(void **state)
{
    tree_t *t = *state;
    sws_worker_ctx_t a = { 0 }, b = { 0 };
    char out[4096];

    sws_log_init("test", 2, SWS_LOG_ERROR);
    serve_as_worker(t, &a, "GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", out,
                    sizeof(out));
    assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(out, "\r\n\r\nA"));
    assert_true(holds(&a.static_roots, t->root));
    assert_false(holds(&b.static_roots, t->root));

    serve_as_worker(t, &b, "GET /sub/b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                    out, sizeof(out));
    assert_non_null(strstr(out, "\r\n\r\nB"));
    assert_true(holds(&b.static_roots, t->root));

    unsigned open_before = count_open_fds();
    sws_worker_ctx_close(&a);
    sws_worker_ctx_close(&b);
    assert_false(holds(&a.static_roots, t->root));
    assert_int_equal(count_open_fds(), open_before - 2);
}

/* The test's faccessat, which static.c's probe of a root links to: it
 * counts the calls and says the root may not be searched. */
static unsigned faccessat_calls;

int faccessat(int dirfd, const char *path, int mode, int flags)
{
    (void)dirfd;
    (void)path;
    (void)mode;
    (void)flags;
    faccessat_calls++;
    errno = EACCES;
    return -1;
}

/* Requests for a file the worker may not read are refused (403) without a
 * probe of the root each: the root is probed once per
 * SWS_STATIC_ROOT_WARN_MS, not once per request. The worker's user is
 * nobody (as root, the test drops its effective uid for the requests). */
static void test_refused_open_probes_the_root_once(void **state)
{
    tree_t *t = *state;
    sws_worker_ctx_t ctx = { 0 };
    char p[256], out[3][4096];
    static const char req[] = "GET /locked.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

    snprintf(p, sizeof(p), "%s/locked.txt", t->root);
    write_file(p, "L");
    assert_int_equal(chmod(p, 0), 0);
    assert_int_equal(chmod(t->base, 0755), 0); /* nobody must reach the root */
    int dropped = geteuid() == 0;
    if (dropped)
        assert_int_equal(seteuid(65534), 0);
    faccessat_calls = 0;
    for (int i = 0; i < 3; i++)
        serve_as_worker(t, &ctx, req, out[i], sizeof(out[i]));
    unsigned calls = faccessat_calls;
    if (dropped)
        assert_int_equal(seteuid(0), 0);
    sws_worker_ctx_close(&ctx);
    unlink(p);
    for (int i = 0; i < 3; i++)
        if (strstr(out[i], "HTTP/1.1 403 ") == NULL)
            fail_msg("request %d: not a 403: %.80s", i, out[i]);
    assert_int_equal(calls, 1);
}

/* What a failed open answers: a transient failure (out of descriptors or
 * memory) is never a 404 a cache would keep. */
static void test_open_errno_to_status(void **state)
{
    (void)state;
    static const struct {
        int err;
        unsigned status;
    } cases[] = {
        { ENOENT, 404 }, { ENOTDIR, 404 }, { ENAMETOOLONG, 404 },
        { EACCES, 403 }, { EPERM, 403 },   { ELOOP, 403 },  { EXDEV, 403 }, { ENXIO, 403 },
        { EMFILE, 503 }, { ENFILE, 503 },  { ENOMEM, 503 }, { ENOBUFS, 503 }, { EAGAIN, 503 },
        { EINTR, 503 },  { EIO, 500 },     { EINVAL, 500 }, { EOVERFLOW, 500 }, { 0, 500 },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (sws_static_open_status(cases[i].err) != cases[i].status)
            fail_msg("%s: %u, want %u", strerror(cases[i].err),
                     sws_static_open_status(cases[i].err), cases[i].status);
    }
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_range_single_forms),
        cmocka_unit_test(test_range_clamped_to_file),
        cmocka_unit_test(test_range_unsatisfiable),
        cmocka_unit_test(test_range_ignored_when_invalid_or_multiple),
        cmocka_unit_test(test_content_range_format),
        cmocka_unit_test(test_etag_format),
        cmocka_unit_test(test_if_none_match_lists),
        cmocka_unit_test(test_date_parse_three_forms),
        cmocka_unit_test(test_date_parse_round_trips_formatter),
        cmocka_unit_test(test_date_parse_rejects_malformed),
        cmocka_unit_test(test_if_range),
        cmocka_unit_test(test_open_errno_to_status),
    };
    const struct CMUnitTest files[] = {
        cmocka_unit_test(test_open_confined_with_openat2),
        cmocka_unit_test(test_open_follow_symlinks_allows_leaving_root),
        cmocka_unit_test(test_open_root_and_special_files),
        cmocka_unit_test(test_open_walk_refuses_every_symlink),
        cmocka_unit_test(test_open_without_openat2_uses_the_walk),
        cmocka_unit_test(test_root_fd_is_reused_and_revalidated),
        cmocka_unit_test(test_root_table_replaces_least_recently_used),
        cmocka_unit_test(test_root_fd_errors),
        cmocka_unit_test(test_root_warning_once_per_interval),
        cmocka_unit_test(test_open_failures_logged_once_a_second),
        cmocka_unit_test(test_handler_keeps_roots_in_the_workers_context),
        cmocka_unit_test(test_refused_open_probes_the_root_once),
    };
    int failed = cmocka_run_group_tests_name("static pure", pure, NULL, NULL);
    failed += cmocka_run_group_tests_name("static files", files, tree_setup, tree_teardown);
    return failed;
}
