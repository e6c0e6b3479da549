/* worker/upstream_conn.c: address parsing, and the timer queues per
 * duration.
 * The idle pool and the timers are exercised through the proxy, with real
 * upstream connections, in test_proxy.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/upstream_conn.h"

/* A connection's timer goes to the queue of its pool's duration, made on
 * demand and shared; past SWS_UPSTREAM_MAX_QUEUES durations, to the
 * nearest longer one kept (late, never early), else the longest. */
static void test_timer_queue_per_duration(void **state)
{
    (void)state;
    sws_loop_t loop;
    sws_upstream_set_t s = { 0 };
    int sv[2];
    char err[128];
    assert_int_equal(sws_loop_init(&loop), 0);
    sws_upstream_set_init(&s, &loop);
    unsigned defaults = s.nq;
    assert_int_equal(defaults, 2); /* 5 s connect; 60 s send, read, idle */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(sws_upstream_adopt(&s, 7, sv[0]), 0);
    sws_upstream_addr_t none = { .len = 0 };
    sws_upstream_conn_t *u = sws_upstream_get(&s, 7, &none, NULL, NULL, err, sizeof(err));
    assert_non_null(u);
    sws_upstream_conf_t c = sws_upstream_conf_default;
    uint64_t now = sws_loop_now_ms(&loop);
    for (unsigned k = 0; k < SWS_UPSTREAM_MAX_QUEUES - defaults; k++) {
        c.timeout_ms[SWS_UPSTREAM_T_READ] = 1001 + 1000 * k; /* none a default */
        sws_upstream_configure(u, &c);
        sws_upstream_arm(u, SWS_UPSTREAM_T_READ);
        assert_int_equal(u->timer.deadline_ms, now + 1001 + 1000 * k);
    }
    assert_int_equal(s.nq, SWS_UPSTREAM_MAX_QUEUES);
    c.timeout_ms[SWS_UPSTREAM_T_READ] = 1001; /* kept: shared */
    sws_upstream_configure(u, &c);
    sws_upstream_arm(u, SWS_UPSTREAM_T_READ);
    assert_int_equal(u->timer.deadline_ms, now + 1001);
    c.timeout_ms[SWS_UPSTREAM_T_READ] = 1500; /* no room: the nearest longer, 2001 */
    sws_upstream_configure(u, &c);
    sws_upstream_arm(u, SWS_UPSTREAM_T_READ);
    assert_int_equal(u->timer.deadline_ms, now + 2001);
    c.timeout_ms[SWS_UPSTREAM_T_READ] = 90000; /* longer than all: the longest, 60 s */
    sws_upstream_configure(u, &c);
    sws_upstream_arm(u, SWS_UPSTREAM_T_READ);
    assert_int_equal(u->timer.deadline_ms, now + 60000);
    assert_int_equal(s.nq, SWS_UPSTREAM_MAX_QUEUES);
    sws_upstream_close(u);
    sws_upstream_set_close(&s);
    sws_loop_close(&loop);
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timer_queue_per_duration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
