/* supervisor/upgrade.c: the hand-off from an old supervisor to a new
 * binary. A state crosses a socketpair whole (layout, sockets, names,
 * keys, routes); a short, long or foreign blob is refused by name; the
 * descriptors arrive with their messages and in their places. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/chan.h"
#include "supervisor/upgrade.h"

#define NADDRS 2u
#define NGROUPS 3u

/* An old supervisor's state: pipes stand in for sockets (any descriptor
 * crosses), so a test can tell which one arrived where by its inode. */
typedef struct fixture {
    sws_upgrade_state_t st;
    sws_listen_addr_t addrs[NADDRS];
    int fds[NADDRS * NGROUPS];
    int peers[NADDRS * NGROUPS]; /* the other ends, kept to compare */
    uint8_t *routes;
    size_t routes_len;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->st.old_pid = 4242;
    f->st.backlog = 511;
    f->st.listen.policy = SWS_ACCEPT_REUSEPORT;
    f->st.listen.naddrs = NADDRS;
    f->st.listen.ngroups = NGROUPS;
    f->st.listen.addrs = f->addrs;
    f->st.listen.fds = f->fds;
    for (unsigned i = 0; i < NADDRS; i++) {
        char err[128];
        unsigned len;
        snprintf(f->addrs[i].name, sizeof(f->addrs[i].name), "127.0.0.1:%u", 8080 + i);
        assert_int_equal(sws_listen_parse_address(f->addrs[i].name, &f->addrs[i].ss, &len, err,
                                                  sizeof(err)), 0);
        f->addrs[i].len = (socklen_t)len;
    }
    for (unsigned i = 0; i < NADDRS * NGROUPS; i++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        f->fds[i] = p[1];
        f->peers[i] = p[0];
    }
    f->st.nadmin = 1;
    snprintf(f->st.admin_names[0], sizeof(f->st.admin_names[0]), "/run/scalws/admin.sock");
    int p[2];
    assert_int_equal(pipe(p), 0);
    f->st.admin_fds[0] = p[1];
    close(p[0]);
    f->st.tickets.n = 2;
    f->st.tickets.period_ms = 3600000;
    memset(f->st.tickets.keys[0].name, 'a', SWS_TICKET_NAME_LEN);
    memset(f->st.tickets.keys[1].name, 'b', SWS_TICKET_NAME_LEN);
    f->st.tickets.keys[0].made_ms = 77;

    Sws__RouteSet rs = SWS__ROUTE_SET__INIT;
    Sws__Host h = SWS__HOST__INIT;
    Sws__Host *hosts[] = { &h };
    char *names[] = { "example.test" };
    h.names = names;
    h.n_names = 1;
    rs.n_hosts = 1;
    rs.hosts = hosts;
    f->routes_len = sws__route_set__get_packed_size(&rs);
    f->routes = malloc(f->routes_len);
    assert_non_null(f->routes);
    sws__route_set__pack(&rs, f->routes);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (unsigned i = 0; i < NADDRS * NGROUPS; i++) {
        close(f->fds[i]);
        close(f->peers[i]);
    }
    close(f->st.admin_fds[0]);
    free(f->routes);
    free(f);
    return 0;
}

static int same_file(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
           sa.st_dev == sb.st_dev;
}

static void test_state_crosses_whole_with_its_descriptors(void **state)
{
    fixture_t *f = *state;
    int ends[2];
    char err[256];
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    assert_int_equal(sws_upgrade_send_state(ends[0], &f->st, f->routes, f->routes_len, err,
                                            sizeof(err)), 0);
    sws_upgrade_state_t got;
    assert_int_equal(sws_upgrade_recv_state(ends[1], 1000, &got, err, sizeof(err)), 0);
    assert_int_equal(got.old_pid, 4242);
    assert_int_equal(got.backlog, 511);
    assert_int_equal(got.listen.policy, SWS_ACCEPT_REUSEPORT);
    assert_int_equal(got.listen.naddrs, NADDRS);
    assert_int_equal(got.listen.ngroups, NGROUPS);
    for (unsigned i = 0; i < NADDRS; i++) {
        assert_string_equal(got.listen.addrs[i].name, f->addrs[i].name);
        assert_int_equal(got.listen.addrs[i].len, f->addrs[i].len);
        assert_memory_equal(&got.listen.addrs[i].ss, &f->addrs[i].ss, f->addrs[i].len);
    }
    /* Each socket in its slot: group g, address a is still fds[g * naddrs + a]. */
    for (unsigned i = 0; i < NADDRS * NGROUPS; i++) {
        assert_true(got.listen.fds[i] >= 0);
        assert_int_not_equal(got.listen.fds[i], f->fds[i]);
        assert_true(same_file(got.listen.fds[i], f->fds[i]));
    }
    assert_int_equal(got.nadmin, 1);
    assert_string_equal(got.admin_names[0], "/run/scalws/admin.sock");
    assert_true(same_file(got.admin_fds[0], f->st.admin_fds[0]));
    assert_int_equal(got.tickets.n, 2);
    assert_int_equal(got.tickets.period_ms, 3600000);
    assert_memory_equal(&got.tickets.keys[0], &f->st.tickets.keys[0], sizeof(sws_ticket_key_t));
    assert_memory_equal(&got.tickets.keys[1], &f->st.tickets.keys[1], sizeof(sws_ticket_key_t));
    assert_non_null(got.routes);
    assert_int_equal(got.routes->n_hosts, 1);
    assert_string_equal(got.routes->hosts[0]->names[0], "example.test");

    /* Nothing more was sent: the queue is empty. */
    sws_chan_msg_t m;
    assert_int_equal(sws_chan_recv(ends[1], &m, err, sizeof(err)), 0);
    sws_upgrade_state_free(&got);
    assert_null(got.routes);
    assert_int_equal(got.admin_fds[0], -1);
    close(ends[0]);
    close(ends[1]);
}

/* Many sockets: more than one message's worth, in order. */
static void test_many_sockets_cross_in_batches(void **state)
{
    fixture_t *f = *state;
    enum { GROUPS = 100 };
    int fds[NADDRS * GROUPS];
    for (unsigned i = 0; i < NADDRS * GROUPS; i++)
        fds[i] = f->fds[i % (NADDRS * NGROUPS)];
    f->st.listen.ngroups = GROUPS;
    f->st.listen.fds = fds;
    int ends[2];
    char err[256];
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    assert_int_equal(sws_upgrade_send_state(ends[0], &f->st, f->routes, f->routes_len, err,
                                            sizeof(err)), 0);
    sws_upgrade_state_t got;
    assert_int_equal(sws_upgrade_recv_state(ends[1], 1000, &got, err, sizeof(err)), 0);
    for (unsigned i = 0; i < NADDRS * GROUPS; i++)
        assert_true(same_file(got.listen.fds[i], fds[i]));
    sws_upgrade_state_free(&got);
    f->st.listen.ngroups = NGROUPS;
    f->st.listen.fds = f->fds;
    close(ends[0]);
    close(ends[1]);
}

static void test_every_truncation_is_refused(void **state)
{
    fixture_t *f = *state;
    uint8_t *blob;
    size_t len;
    char err[256];
    assert_int_equal(sws_upgrade_blob_encode(&f->st, f->routes, f->routes_len, &blob, &len, err,
                                             sizeof(err)), 0);
    sws_upgrade_state_t got;
    assert_int_equal(sws_upgrade_blob_decode(blob, len, &got, err, sizeof(err)), 0);
    sws_upgrade_state_free(&got);
    for (size_t cut = 0; cut < len; cut++) {
        err[0] = '\0';
        assert_int_equal(sws_upgrade_blob_decode(blob, cut, &got, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "upgrade state: "));
        assert_null(got.routes);
    }
    /* A byte too many is as wrong as one too few. */
    uint8_t *longer = calloc(1, len + 1);
    assert_non_null(longer);
    memcpy(longer, blob, len);
    assert_int_equal(sws_upgrade_blob_decode(longer, len + 1, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "expected"));
    free(longer);
    free(blob);
}

static void test_foreign_or_malformed_blob_is_refused(void **state)
{
    fixture_t *f = *state;
    uint8_t *blob;
    size_t len;
    char err[256];
    sws_upgrade_state_t got;
    assert_int_equal(sws_upgrade_blob_encode(&f->st, f->routes, f->routes_len, &blob, &len, err,
                                             sizeof(err)), 0);
    /* Another version: the head's second word. */
    blob[4] ^= 0xff;
    assert_int_equal(sws_upgrade_blob_decode(blob, len, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "version"));
    blob[4] ^= 0xff;
    /* An address name without its NUL: the last byte of the first name. */
    size_t head = 56, name_end = head + 79;
    blob[name_end] = 'x';
    assert_int_equal(sws_upgrade_blob_decode(blob, len, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "listen address 0 is malformed"));
    blob[name_end] = '\0';
    /* A RouteSet that does not decode. */
    memset(blob + len - f->routes_len, 0xff, f->routes_len);
    assert_int_equal(sws_upgrade_blob_decode(blob, len, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "RouteSet"));
    free(blob);
}

/* Descriptors announced for a slot they do not fill are refused, and the
 * received ones closed (not leaked: the sanitizer build would not see it,
 * so the test counts on the stated order instead). */
static void test_descriptors_out_of_order_are_refused(void **state)
{
    fixture_t *f = *state;
    int ends[2];
    char err[256];
    uint8_t *blob;
    size_t len;
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    assert_int_equal(sws_upgrade_send_state(ends[0], &f->st, f->routes, f->routes_len, err,
                                            sizeof(err)), 0);
    /* Read the state and the first batch away, then send a batch that
     * starts where none ends. */
    sws_chan_msg_t m;
    assert_int_equal(sws_chan_recv(ends[1], &m, err, sizeof(err)), 1);
    assert_int_equal(m.type, SWS_UPGRADE_STATE);
    int memfd = m.fds[0];
    m.fds[0] = -1;
    sws_chan_msg_close_fds(&m);
    while (sws_chan_recv(ends[1], &m, err, sizeof(err)) == 1)
        sws_chan_msg_close_fds(&m);
    assert_int_equal(sws_upgrade_blob_encode(&f->st, f->routes, f->routes_len, &blob, &len, err,
                                             sizeof(err)), 0);
    free(blob);
    struct sws_upgrade_state_msg head = { SWS_UPGRADE_MAGIC, SWS_UPGRADE_VERSION, len };
    assert_int_equal(sws_chan_send(ends[0], SWS_UPGRADE_STATE, &head, sizeof(head), &memfd, 1,
                                   err, sizeof(err)), 0);
    close(memfd);
    struct sws_upgrade_fds_msg bad = { SWS_UPGRADE_FD_LISTEN, 1, 1 };
    assert_int_equal(sws_chan_send(ends[0], SWS_UPGRADE_FDS, &bad, sizeof(bad), f->fds, 1, err,
                                   sizeof(err)), 0);
    sws_upgrade_state_t got;
    assert_int_equal(sws_upgrade_recv_state(ends[1], 1000, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "out of order"));
    close(ends[0]);
    close(ends[1]);
}

/* The old side dies (or never sends): the new side says so, it does not
 * wait past its bound. */
static void test_missing_hand_off_is_an_error(void **state)
{
    (void)state;
    int ends[2];
    char err[256];
    sws_upgrade_state_t got;
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    assert_int_equal(sws_upgrade_recv_state(ends[1], 20, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "did not arrive"));
    close(ends[0]);
    assert_int_equal(sws_upgrade_recv_state(ends[1], 1000, &got, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "gone"));
    close(ends[1]);
}

/* The next message on fd is FAILED with reason why. */
static void assert_failed_with(int fd, const char *why)
{
    char err[256];
    sws_chan_msg_t m;
    assert_int_equal(sws_upgrade_recv_one(fd, 1000, &m, err, sizeof(err)), 1);
    assert_int_equal(m.type, SWS_UPGRADE_FAILED);
    assert_int_equal(m.len, strlen(why));
    assert_memory_equal(m.body, why, m.len);
}

static void test_failure_reason_reaches_the_old_side(void **state)
{
    (void)state;
    int ends[2];
    char err[256];
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    sws_upgrade_send_failed(ends[1], "config: bad key");
    assert_failed_with(ends[0], "config: bad key");
    close(ends[0]);
    close(ends[1]);
}

/* A child whose exec failed exits with the hand-off unread: its reason
 * must still reach the old side (an end closed over unread messages
 * resets its peer, and the reason went with it). */
static void test_exec_failure_reason_survives_an_unread_hand_off(void **state)
{
    (void)state;
    int ends[2];
    char err[256];
    assert_int_equal(sws_chan_pair(ends, err, sizeof(err)), 0);
    int fd = dup(0);
    assert_true(fd >= 0);
    assert_int_equal(sws_chan_send(ends[0], SWS_UPGRADE_STATE, "s", 1, &fd, 1, err, sizeof(err)),
                     0);
    close(fd);
    sws_upgrade_exec_failed(ends[1], "execv: Exec format error");
    close(ends[1]);
    assert_failed_with(ends[0], "execv: Exec format error");
    close(ends[0]);
}

static void test_a_binary_must_be_an_executable_file(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(sws_upgrade_check_binary("/bin/sh", err, sizeof(err)), 0);
    assert_int_equal(sws_upgrade_check_binary("/nonexistent/scalwsd", err, sizeof(err)), -1);
    assert_string_equal(err, "/nonexistent/scalwsd: No such file or directory");
    assert_int_equal(sws_upgrade_check_binary("/", err, sizeof(err)), -1);
    assert_string_equal(err, "/: not a regular file");
    char path[] = "/tmp/test_upgrade_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(path, 0644), 0);
    int rc = sws_upgrade_check_binary(path, err, sizeof(err));
    /* root may execute a file only when some execute bit is set */
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, "not executable (mode 0644)"));
    assert_int_equal(chmod(path, 0755), 0);
    assert_int_equal(sws_upgrade_check_binary(path, err, sizeof(err)), 0);
    unlink(path);
}

static void test_binary_path_is_absolute_and_unresolved(void **state)
{
    (void)state;
    char err[256], cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    char *p = sws_upgrade_binary_path("/opt/x/../scalwsd", err, sizeof(err));
    assert_string_equal(p, "/opt/x/../scalwsd");
    free(p);
    p = sws_upgrade_binary_path("build/scalwsd", err, sizeof(err));
    char want[4200];
    snprintf(want, sizeof(want), "%s/build/scalwsd", cwd);
    assert_string_equal(p, want);
    free(p);
    setenv("PATH", "/nonexistent:/bin", 1);
    p = sws_upgrade_binary_path("sh", err, sizeof(err));
    assert_string_equal(p, "/bin/sh");
    free(p);
    assert_null(sws_upgrade_binary_path("no-such-binary-here", err, sizeof(err)));
    assert_non_null(strstr(err, "PATH"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_crosses_whole_with_its_descriptors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_many_sockets_cross_in_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_truncation_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_or_malformed_blob_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_descriptors_out_of_order_are_refused, setup,
                                        teardown),
        cmocka_unit_test(test_missing_hand_off_is_an_error),
        cmocka_unit_test(test_failure_reason_reaches_the_old_side),
        cmocka_unit_test(test_binary_path_is_absolute_and_unresolved),
        cmocka_unit_test(test_exec_failure_reason_survives_an_unread_hand_off),
        cmocka_unit_test(test_a_binary_must_be_an_executable_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
