/* supervisor/supervisor.c: the policy decisions (restart backoff, worker
 * count, CPU choice, restart-only keys, the table check). The processes
 * themselves are exercised by test/integration/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <string.h>

#include "shm/shm.h"
#include "supervisor/supervisor.h"

/* Stuck: silent for more than a second, counted from the start until the
 * first heartbeat (a worker still setting up is not stuck). */
static void test_worker_stuck_counts_from_the_last_heartbeat_or_the_start(void **state)
{
    (void)state;
    assert_false(sws_worker_stuck(10500, 10000, 0));
    assert_true(sws_worker_stuck(11001, 10000, 0));
    assert_false(sws_worker_stuck(12000, 10000, 11500));
    assert_true(sws_worker_stuck(12501, 10000, 11500));
    assert_false(sws_worker_stuck(11500, 10000, 11504)); /* a heartbeat a tick ahead */
}

static void test_accept_policies_that_need_ebpf(void **state)
{
    (void)state;
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED), 0);
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT), 0);
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__HASH), SWS_EBPF_HASH);
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__LEAST_LOADED),
                     SWS_EBPF_LEAST_LOADED);
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__FOUNTAIN),
                     SWS_EBPF_FOUNTAIN);
    assert_int_equal(sws_accept_ebpf_policy(SWS__SERVER_CONFIG__ACCEPT_POLICY__CPU), SWS_EBPF_CPU);
}

static void test_placement_line_names_the_policy_and_each_worker(void **state)
{
    (void)state;
    sws_shm_counters_t c[3] = { { 120, 8, 500 }, { 0, 0, 0 }, { 7, 1, 9 } };
    char out[128];
    size_t len = sws_placement_format("least-loaded", c, 3, out, sizeof(out));
    assert_string_equal(out, "placement, accept_policy least-loaded (worker:accepted/live): "
                             "0:120/8 1:0/0 2:7/1");
    assert_int_equal(len, strlen(out));
    char small[40];
    len = sws_placement_format("least-loaded", c, 3, small, sizeof(small));
    assert_int_equal(len, sizeof(small) - 1); /* cut, still terminated */
    assert_int_equal(strlen(small), len);
}

static void test_restart_delay_sequence(void **state)
{
    (void)state;
    /* First crash: at once. Then 100 ms doubling, capped at 10 s. */
    const uint64_t want[] = { 0, 0, 100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000 };
    for (unsigned crashes = 0; crashes < sizeof(want) / sizeof(want[0]); crashes++)
        assert_int_equal(sws_restart_delay_ms(crashes), want[crashes]);
    assert_int_equal(sws_restart_delay_ms(64), SWS_RESTART_MAX_DELAY_MS);
    assert_int_equal(sws_restart_delay_ms(UINT_MAX), SWS_RESTART_MAX_DELAY_MS);
}

static void test_crash_count_resets_after_a_long_run(void **state)
{
    (void)state;
    assert_int_equal(sws_restart_crashes(0, 0), 1);
    assert_int_equal(sws_restart_crashes(1, SWS_RESTART_MIN_UPTIME_MS - 1), 2);
    assert_int_equal(sws_restart_crashes(7, 50), 8);
    assert_int_equal(sws_restart_crashes(7, SWS_RESTART_MIN_UPTIME_MS), 1);
    assert_int_equal(sws_restart_crashes(UINT_MAX, 0), UINT_MAX);
}

/* What an operator sees: a worker killed once after a long run comes
 * back at once; one that keeps crashing backs off. */
static void test_crash_loop_backs_off_and_recovers(void **state)
{
    (void)state;
    unsigned crashes = 0;
    crashes = sws_restart_crashes(crashes, 3600 * 1000);
    assert_int_equal(sws_restart_delay_ms(crashes), 0);

    const uint64_t want[] = { 100, 200, 400, 800 };
    for (unsigned i = 0; i < 4; i++) {
        crashes = sws_restart_crashes(crashes, 20);
        assert_int_equal(sws_restart_delay_ms(crashes), want[i]);
    }
    crashes = sws_restart_crashes(crashes, SWS_RESTART_MIN_UPTIME_MS + 1);
    assert_int_equal(sws_restart_delay_ms(crashes), 0);
}

static cpu_set_t mask_of(const int *cpus, size_t n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (size_t i = 0; i < n; i++)
        CPU_SET(cpus[i], &set);
    return set;
}

static void test_worker_count(void **state)
{
    (void)state;
    const int three[] = { 0, 2, 5 };
    cpu_set_t mask = mask_of(three, 3);
    assert_int_equal(sws_worker_count(0, &mask), 3);
    assert_int_equal(sws_worker_count(1, &mask), 1);
    assert_int_equal(sws_worker_count(8, &mask), 8); /* more workers than CPUs: allowed */
    assert_int_equal(sws_worker_count(100000, &mask), SWS_SHM_MAX_WORKERS);

    cpu_set_t none;
    CPU_ZERO(&none);
    assert_int_equal(sws_worker_count(0, &none), 1);
}

static void test_worker_cpu_walks_the_allowed_cpus(void **state)
{
    (void)state;
    const int allowed[] = { 1, 3, 4 };
    cpu_set_t mask = mask_of(allowed, 3);
    assert_int_equal(sws_worker_cpu(&mask, 0), 1);
    assert_int_equal(sws_worker_cpu(&mask, 1), 3);
    assert_int_equal(sws_worker_cpu(&mask, 2), 4);
    assert_int_equal(sws_worker_cpu(&mask, 3), 1); /* wraps */
    assert_int_equal(sws_worker_cpu(&mask, 5), 4);

    const int high[] = { CPU_SETSIZE - 1 };
    cpu_set_t last = mask_of(high, 1);
    assert_int_equal(sws_worker_cpu(&last, 7), CPU_SETSIZE - 1);

    cpu_set_t none;
    CPU_ZERO(&none);
    assert_int_equal(sws_worker_cpu(&none, 0), -1);
}

/* Two server sections that start out equal. */
typedef struct server_pair {
    Sws__Listen l1, l2;
    Sws__Listen *listen_a[2], *listen_b[2];
    Sws__ServerConfig a, b;
} server_pair_t;

static void server_pair_init(server_pair_t *p)
{
    Sws__Listen l = SWS__LISTEN__INIT;
    Sws__ServerConfig s = SWS__SERVER_CONFIG__INIT;
    p->l1 = l;
    p->l1.address = "127.0.0.1:8080";
    p->l2 = l;
    p->l2.address = "[::1]:8080";
    p->listen_a[0] = p->listen_b[0] = &p->l1;
    p->listen_a[1] = p->listen_b[1] = &p->l2;
    s.backlog = 4096;
    s.table_size = 1 << 20;
    p->a = p->b = s;
    p->a.listen = p->listen_a;
    p->b.listen = p->listen_b;
    p->a.n_listen = p->b.n_listen = 2;
}

static void test_restart_only_changes_names_the_keys(void **state)
{
    (void)state;
    server_pair_t p;
    server_pair_init(&p);
    char out[256];
    assert_int_equal(sws_restart_only_changes(&p.a, &p.b, out, sizeof(out)), 0);
    assert_string_equal(out, "");

    p.b.n_listen = 1;
    p.b.backlog = 511;
    size_t n = sws_restart_only_changes(&p.a, &p.b, out, sizeof(out));
    assert_string_equal(out, "server.listen, server.backlog");
    assert_int_equal(n, strlen(out));

    server_pair_init(&p);
    Sws__Listen moved = p.l2;
    moved.address = "[::1]:8081";
    p.listen_b[1] = &moved;
    p.b.event_loops = 4;
    p.b.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT;
    p.b.user = "www-data";
    p.b.error_log = "/var/log/scalws.log";
    p.b.table_size = 2 << 20;
    sws_restart_only_changes(&p.a, &p.b, out, sizeof(out));
    assert_string_equal(out, "server.listen, server.event_loops, server.accept_policy, "
                             "server.user, server.error_log, server.table_size");

    /* A short buffer truncates, stays terminated, and says how much it holds. */
    char small[10];
    n = sws_restart_only_changes(&p.a, &p.b, small, sizeof(small));
    assert_int_equal(n, strlen(small));
    assert_string_equal(small, "server.li");

    /* One eBPF policy for another is applied by a reload (a store into the
     * program's map); into or out of shared or reuseport is not. */
    server_pair_init(&p);
    p.a.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__LEAST_LOADED;
    p.b.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__FOUNTAIN;
    assert_int_equal(sws_restart_only_changes(&p.a, &p.b, out, sizeof(out)), 0);
    p.b.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__CPU;
    assert_int_equal(sws_restart_only_changes(&p.a, &p.b, out, sizeof(out)), 0);
    p.b.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__REUSEPORT;
    sws_restart_only_changes(&p.a, &p.b, out, sizeof(out));
    assert_string_equal(out, "server.accept_policy");
    p.a.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__SHARED;
    p.b.accept_policy = SWS__SERVER_CONFIG__ACCEPT_POLICY__HASH;
    sws_restart_only_changes(&p.a, &p.b, out, sizeof(out));
    assert_string_equal(out, "server.accept_policy");

    /* The admin API's addresses: NULL (built in code) is no address. */
    server_pair_init(&p);
    char *sock = "/run/scalws/admin.sock";
    Sws__Admin admin = SWS__ADMIN__INIT;
    admin.listen = &sock;
    admin.n_listen = 1;
    p.b.admin = &admin;
    sws_restart_only_changes(&p.a, &p.b, out, sizeof(out));
    assert_string_equal(out, "server.admin.listen");
    p.a.admin = &admin;
    assert_int_equal(sws_restart_only_changes(&p.a, &p.b, out, sizeof(out)), 0);
}

static void test_check_table_reports_a_table_too_large(void **state)
{
    (void)state;
    Sws__RouteSet rs = SWS__ROUTE_SET__INIT;
    Sws__Settings settings = SWS__SETTINGS__INIT;
    Sws__AccessLog access_log = SWS__ACCESS_LOG__INIT;
    settings.access_log = &access_log;
    rs.settings = &settings;
    char err[256];

    assert_int_equal(sws_supervisor_check_table(&rs, 16 << 20, err, sizeof(err)), 0);

    assert_int_equal(sws_supervisor_check_table(&rs, 8, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "server.table_size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_delay_sequence),
        cmocka_unit_test(test_placement_line_names_the_policy_and_each_worker),
        cmocka_unit_test(test_worker_stuck_counts_from_the_last_heartbeat_or_the_start),
        cmocka_unit_test(test_accept_policies_that_need_ebpf),
        cmocka_unit_test(test_crash_count_resets_after_a_long_run),
        cmocka_unit_test(test_crash_loop_backs_off_and_recovers),
        cmocka_unit_test(test_worker_count),
        cmocka_unit_test(test_worker_cpu_walks_the_allowed_cpus),
        cmocka_unit_test(test_restart_only_changes_names_the_keys),
        cmocka_unit_test(test_check_table_reports_a_table_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
