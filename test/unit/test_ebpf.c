/* ebpf/ebpf.c: the program loaded over real reuseport sockets on loopback,
 * the load map written by hand as workers would, and where connections
 * land (accept on each worker's socket). Skipped where BPF cannot load
 * (not root, no CAP_BPF): then the fallback is what runs, test_ebpf.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ebpf/ebpf.h"
#include "supervisor/listen.h"

#define WORKERS 4
#define WAIT_MS 2000

typedef struct fixture {
    sws_listen_set_t set;
    sws_ebpf_t ebpf;
    int clients[64];
    unsigned nclients;
} fixture_t;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void open_set(fixture_t *f, enum sws_ebpf_policy policy)
{
    sws_listen_addr_t a;
    memset(&a, 0, sizeof(a));
    struct sockaddr_in *sin = (struct sockaddr_in *)&a.ss;
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.len = sizeof(*sin);
    snprintf(a.name, sizeof(a.name), "127.0.0.1:0");
    char err[256];
    assert_int_equal(sws_listen_open(&f->set, &a, 1, SWS_ACCEPT_REUSEPORT, WORKERS, 64, err,
                                     sizeof(err)),
                     0);
    int cpus[WORKERS] = { -1, -1, -1, -1 };
    if (sws_ebpf_open(&f->ebpf, &f->set, 64, policy, 85, cpus, err, sizeof(err)) < 0) {
        sws_listen_close(&f->set);
        print_message("eBPF not available here: %s\n", err);
        skip();
    }
    for (unsigned i = 0; i < WORKERS; i++)
        sws_ebpf_worker(&f->ebpf, i)->heartbeat_ms = now_ms();
}

static int setup(void **state)
{
    static fixture_t f;
    memset(&f, 0, sizeof(f));
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (unsigned i = 0; i < f->nclients; i++)
        close(f->clients[i]);
    sws_ebpf_close(&f->ebpf);
    sws_listen_close(&f->set);
    return 0;
}

static void connect_one(fixture_t *f)
{
    assert_true(f->nclients < sizeof(f->clients) / sizeof(f->clients[0]));
    int c = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c >= 0);
    const sws_listen_addr_t *a = &f->set.addrs[0];
    assert_int_equal(connect(c, (const struct sockaddr *)&a->ss, a->len), 0);
    f->clients[f->nclients++] = c;
}

/* The worker whose socket holds the next connection: polls them all, up to
 * wait_ms; -1 when none does. Accepts it (and closes it). */
static int landed_within(fixture_t *f, int wait_ms)
{
    struct pollfd p[WORKERS];
    for (unsigned i = 0; i < WORKERS; i++)
        p[i] = (struct pollfd){ .fd = sws_listen_worker_fds(&f->set, i)[0], .events = POLLIN };
    if (poll(p, WORKERS, wait_ms) <= 0)
        return -1;
    for (unsigned i = 0; i < WORKERS; i++) {
        if (p[i].revents & POLLIN) {
            int fd = accept(p[i].fd, NULL, NULL);
            assert_true(fd >= 0);
            close(fd);
            return (int)i;
        }
    }
    return -1;
}

static int landed(fixture_t *f)
{
    return landed_within(f, WAIT_MS);
}

static void test_least_loaded_places_on_the_lightest_and_counts_it(void **state)
{
    fixture_t *f = *state;
    open_set(f, SWS_EBPF_LEAST_LOADED);
    for (unsigned i = 0; i < WORKERS; i++)
        sws_ebpf_worker(&f->ebpf, i)->live = i == 2 ? 0 : 10;
    connect_one(f);
    assert_int_equal(landed(f), 2);
    assert_int_equal(sws_ebpf_worker(&f->ebpf, 2)->selected, 1);
    for (unsigned i = 0; i < WORKERS; i++)
        if (i != 2)
            assert_int_equal(sws_ebpf_worker(&f->ebpf, i)->selected, 0);
}

static void test_a_worker_out_gets_nothing(void **state)
{
    fixture_t *f = *state;
    open_set(f, SWS_EBPF_HASH);
    sws_ebpf_worker(&f->ebpf, 0)->heartbeat_ms = now_ms() - 5000; /* stuck */
    sws_ebpf_worker(&f->ebpf, 1)->draining = 1;
    sws_ebpf_worker(&f->ebpf, 3)->down = 1;
    for (unsigned c = 0; c < 16; c++) {
        connect_one(f);
        assert_int_equal(landed(f), 2);
    }
}

/* ADR 0010: a parked worker's queue moves to the others, inside
 * shutdown(); unparked, it listens and takes connections again. */
static void test_park_migrates_the_queue_and_unpark_takes_connections_again(void **state)
{
    fixture_t *f = *state;
    char err[256];
    open_set(f, SWS_EBPF_LEAST_LOADED);
    for (unsigned i = 0; i < WORKERS; i++)
        sws_ebpf_worker(&f->ebpf, i)->live = i == 1 ? 0 : 100;
    for (unsigned c = 0; c < 3; c++)
        connect_one(f); /* all three queued on worker 1, not accepted */
    assert_int_equal(sws_ebpf_worker(&f->ebpf, 1)->selected, 3);

    assert_int_equal(sws_ebpf_park(&f->ebpf, 1, err, sizeof(err)), 0);
    assert_true(sws_ebpf_is_parked(&f->ebpf, 1));
    assert_int_equal(sws_ebpf_worker(&f->ebpf, 1)->down, 1);
    for (unsigned c = 0; c < 3; c++) {
        int w = landed(f);
        assert_true(w >= 0 && w != 1);
    }
    /* Migration is done when shutdown() returns: nothing left anywhere. */
    assert_int_equal(landed_within(f, 0), -1);

    assert_int_equal(sws_ebpf_unpark(&f->ebpf, 1, 1, err, sizeof(err)), 0);
    assert_false(sws_ebpf_is_parked(&f->ebpf, 1));
    assert_int_equal(sws_ebpf_worker(&f->ebpf, 1)->heartbeat_ms, 0); /* fresh: not yet */
    assert_int_equal(sws_ebpf_queued(sws_ebpf_worker(&f->ebpf, 1)), 0);
    sws_ebpf_worker(&f->ebpf, 1)->heartbeat_ms = now_ms();
    connect_one(f);
    assert_int_equal(landed(f), 1);
}

static void test_the_last_worker_is_marked_out_but_never_parked(void **state)
{
    fixture_t *f = *state;
    char err[256];
    open_set(f, SWS_EBPF_LEAST_LOADED);
    for (unsigned i = 0; i < WORKERS; i++)
        assert_int_equal(sws_ebpf_park(&f->ebpf, i, err, sizeof(err)), 0);
    assert_true(sws_ebpf_is_parked(&f->ebpf, WORKERS - 2));
    assert_false(sws_ebpf_is_parked(&f->ebpf, WORKERS - 1));
    assert_int_equal(sws_ebpf_worker(&f->ebpf, WORKERS - 1)->down, 1);
    /* No worker eligible: the kernel's hash over the sockets still
     * listening, the one not parked. */
    connect_one(f);
    assert_int_equal(landed(f), WORKERS - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_least_loaded_places_on_the_lightest_and_counts_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_worker_out_gets_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_park_migrates_the_queue_and_unpark_takes_connections_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_last_worker_is_marked_out_but_never_parked,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
