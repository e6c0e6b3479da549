/* core/chan.c: typed messages with descriptors over a socketpair, whole or
 * not at all, never waiting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/chan.h"

static void test_message_with_descriptors(void **state)
{
    (void)state;
    int ends[2], p[2];
    char err[256];
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    assert_int_equal(pipe(p), 0);

    struct sws_chan_logs logs = { .flags = SWS_CHAN_LOGS_ACCESS };
    assert_int_equal(sws_chan_send(ends[0], SWS_CHAN_LOGS, &logs, sizeof(logs), &p[1], 1, err,
                                   sizeof(err)), 0);
    close(p[1]); /* the receiver's copy keeps the pipe open */

    sws_chan_msg_t m;
    assert_int_equal(sws_chan_recv(ends[1], &m, err, sizeof(err)), 1);
    assert_int_equal(m.type, SWS_CHAN_LOGS);
    assert_int_equal(m.len, sizeof(logs));
    assert_memory_equal(m.body, &logs, sizeof(logs));
    assert_int_equal(m.nfds, 1);
    assert_true(fcntl(m.fds[0], F_GETFD) & FD_CLOEXEC);
    assert_int_equal(write(m.fds[0], "x", 1), 1);
    char c;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'x');
    sws_chan_msg_close_fds(&m);
    assert_int_equal(m.fds[0], -1);

    /* Nothing waiting: 0 at once. */
    assert_int_equal(sws_chan_recv(ends[1], &m, err, sizeof(err)), 0);
    /* The peer gone: -1 with errno 0. */
    close(ends[0]);
    assert_int_equal(sws_chan_recv(ends[1], &m, err, sizeof(err)), -1);
    assert_int_equal(errno, 0);
    close(ends[1]);
    close(p[0]);
}

/* A peer that does not read: the sender is told (EAGAIN), never blocked. */
static void test_full_queue_does_not_block(void **state)
{
    (void)state;
    int ends[2];
    char err[256];
    char body[SWS_CHAN_MAX_BODY];
    memset(body, 'b', sizeof(body));
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    int rc = 0;
    unsigned sent = 0;
    for (; sent < 1000000 && rc == 0; sent++)
        rc = sws_chan_send(ends[0], 1, body, sizeof(body), NULL, 0, err, sizeof(err));
    assert_int_equal(rc, -1);
    assert_int_equal(errno, EAGAIN);
    assert_non_null(strstr(err, "control message"));
    assert_true(sent > 1);
    close(ends[0]);
    close(ends[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_with_descriptors),
        cmocka_unit_test(test_full_queue_does_not_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
