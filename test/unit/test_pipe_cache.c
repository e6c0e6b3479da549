/* worker/pipe_cache.c: the worker's empty pipes for splice. A pipe given
 * back empty is the next one taken; one with bytes left in it (a client
 * gone mid-body) is closed, never handed to the next response; the cache
 * keeps at most SWS_PIPE_CACHE_MAX. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "worker/pipe_cache.h"

static int fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static void test_new_pipe_is_nonblocking_and_sized(void **state)
{
    (void)state;
    sws_pipe_cache_t pc = { .n = 0 };
    sws_pipe_t p;
    char err[128];
    assert_int_equal(sws_pipe_get(&pc, &p, err, sizeof(err)), 0);
    assert_true(fcntl(p.rd, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(p.wr, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(p.rd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal((size_t)fcntl(p.wr, F_GETPIPE_SZ), p.size);
    assert_true(p.size >= 4096);
    sws_pipe_put(&pc, &p, 0);
    assert_int_equal(p.rd, -1);
    sws_pipe_cache_close(&pc);
}

static void test_empty_pipe_is_kept_and_taken_again(void **state)
{
    (void)state;
    sws_pipe_cache_t pc = { .n = 0 };
    sws_pipe_t p, q;
    char err[128];
    assert_int_equal(sws_pipe_get(&pc, &p, err, sizeof(err)), 0);
    int rd = p.rd, wr = p.wr;
    /* Used, then emptied: fit for the next response. */
    assert_int_equal(write(p.wr, "abc", 3), 3);
    char buf[3];
    assert_int_equal(read(p.rd, buf, 3), 3);
    sws_pipe_put(&pc, &p, 0);
    assert_int_equal(pc.n, 1);
    assert_int_equal(sws_pipe_get(&pc, &q, err, sizeof(err)), 0);
    assert_int_equal(q.rd, rd);
    assert_int_equal(q.wr, wr);
    assert_int_equal(pc.n, 0);
    sws_pipe_put(&pc, &q, 0);
    sws_pipe_cache_close(&pc);
    assert_int_equal(pc.n, 0);
    assert_false(fd_open(rd));
    assert_false(fd_open(wr));
}

static void test_pipe_with_bytes_left_is_closed(void **state)
{
    (void)state;
    sws_pipe_cache_t pc = { .n = 0 };
    sws_pipe_t p;
    char err[128];
    assert_int_equal(sws_pipe_get(&pc, &p, err, sizeof(err)), 0);
    int rd = p.rd, wr = p.wr;
    assert_int_equal(write(p.wr, "left", 4), 4);
    sws_pipe_put(&pc, &p, 0);
    assert_int_equal(pc.n, 0);
    assert_false(fd_open(rd));
    assert_false(fd_open(wr));
}

/* A caller that knows the pipe is drained spares the check. */
static void test_drained_pipe_is_kept_without_asking(void **state)
{
    (void)state;
    sws_pipe_cache_t pc = { .n = 0 };
    sws_pipe_t p;
    char err[128];
    assert_int_equal(sws_pipe_get(&pc, &p, err, sizeof(err)), 0);
    sws_pipe_put(&pc, &p, 1);
    assert_int_equal(pc.n, 1);
    sws_pipe_cache_close(&pc);
}

static void test_cache_keeps_at_most_its_max(void **state)
{
    (void)state;
    sws_pipe_cache_t pc = { .n = 0 };
    sws_pipe_t p[SWS_PIPE_CACHE_MAX + 1];
    char err[128];
    for (unsigned i = 0; i <= SWS_PIPE_CACHE_MAX; i++)
        assert_int_equal(sws_pipe_get(&pc, &p[i], err, sizeof(err)), 0);
    int last_rd = p[SWS_PIPE_CACHE_MAX].rd;
    for (unsigned i = 0; i <= SWS_PIPE_CACHE_MAX; i++)
        sws_pipe_put(&pc, &p[i], 0);
    assert_int_equal(pc.n, SWS_PIPE_CACHE_MAX);
    assert_false(fd_open(last_rd));
    sws_pipe_cache_close(&pc);
    assert_int_equal(pc.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_pipe_is_nonblocking_and_sized),
        cmocka_unit_test(test_empty_pipe_is_kept_and_taken_again),
        cmocka_unit_test(test_pipe_with_bytes_left_is_closed),
        cmocka_unit_test(test_drained_pipe_is_kept_without_asking),
        cmocka_unit_test(test_cache_keeps_at_most_its_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
