/* supervisor/admin.c: admin addresses, the Unix socket's file (mode 0600,
 * stale one replaced, live one or a non-socket kept), and requests
 * answered over a real socket by a real event loop. */
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
#include <sys/un.h>
#include <unistd.h>

#include "core/log.h"
#include "core/loop.h"
#include "supervisor/admin.h"
#include "support/routeset_build.h"

#define LOOP_TURNS 200 /* of at most 50 ms each: a bound, never a verdict */

typedef struct fixture {
    char dir[64];
    char path[96];
    sws_loop_t loop;
    Sws__Admin cfg;
    char *listen[1];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/sws-admin-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    /* A directory that does not exist yet: the start makes it. */
    snprintf(f->path, sizeof(f->path), "%s/run/admin.sock", f->dir);
    assert_int_equal(sws_loop_init(&f->loop), 0);
    sws__admin__init(&f->cfg);
    f->listen[0] = f->path;
    f->cfg.listen = f->listen;
    f->cfg.n_listen = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char cmd[128];
    sws_loop_close(&f->loop);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static const char *dirname_of(const char *path)
{
    static char dir[128];
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    return dir;
}

static int unreachable_publish(void *ctx, const Sws__RouteSet *rs, uint64_t *gen, char *err,
                               size_t errlen)
{
    (void)ctx, (void)rs, (void)gen, (void)err, (void)errlen;
    fail_msg("nothing here publishes");
    return -1;
}

static sws_admin_t *start(fixture_t *f)
{
    return sws_admin_start(&f->loop, &f->cfg, NULL, 0, unreachable_publish, NULL);
}

static int connect_to(const char *path)
{
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send req, turn the loop until the server closes, return what came. */
static char *exchange(fixture_t *f, const char *req)
{
    static char buf[8192];
    size_t len = 0;
    int fd = connect_to(f->path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    int turns = 0;
    for (;;) {
        assert_true(turns++ < LOOP_TURNS);
        assert_int_equal(sws_loop_run_once(&f->loop, 50), 0);
        ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, MSG_DONTWAIT);
        if (n == 0)
            break;
        if (n > 0)
            len += (size_t)n;
        else
            assert_int_equal(errno, EAGAIN);
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

static void test_parse_address(void **state)
{
    (void)state;
    sws_admin_addr_t a;
    char err[256];
    assert_int_equal(sws_admin_parse_address("/run/x.sock", &a, err, sizeof(err)), 0);
    assert_int_equal(a.ss.ss_family, AF_UNIX);
    assert_int_equal(sws_admin_parse_address("127.9.0.1:1", &a, err, sizeof(err)), 0);
    assert_int_equal(a.ss.ss_family, AF_INET);
    assert_int_equal(sws_admin_parse_address("[::1]:1", &a, err, sizeof(err)), 0);
    assert_int_equal(a.ss.ss_family, AF_INET6);
    assert_int_equal(sws_admin_parse_address("[::]:1", &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a loopback address"));
    assert_int_equal(sws_admin_parse_address("*:1", &a, err, sizeof(err)), -1);
    assert_int_equal(sws_admin_parse_address("192.168.1.1:1", &a, err, sizeof(err)), -1);
    assert_int_equal(sws_admin_parse_address("run/x.sock", &a, err, sizeof(err)), -1);
}

static void test_socket_is_0600_and_answers_then_is_removed(void **state)
{
    fixture_t *f = *state;
    sws_admin_t *admin = start(f);
    assert_non_null(admin);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);

    /* Before the first publication there is nothing to show. */
    assert_non_null(strstr(exchange(f, "GET /v1/pools HTTP/1.1\r\nHost: x\r\n\r\n"),
                           "HTTP/1.1 503 Service Unavailable\r\n"));
    Sws__RouteSet *rs = rs_new();
    sws_admin_published(admin, rs, 7, SWS_PUBLISHED_BY_FILE);
    sws__route_set__free_unpacked(rs, NULL);
    const char *r = exchange(f, "GET /v1/pools HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_string_equal(r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Content-Length: 31\r\nConnection: close\r\n\r\n"
                           "{\"generation\": 7, \"pools\": []}\n");
    /* HEAD: the head alone. */
    r = exchange(f, "HEAD /v1/pools HTTP/1.1\r\n\r\n");
    assert_non_null(strstr(r, "Content-Length: 31\r\n"));
    assert_null(strstr(r, "{"));
    /* What the reader refuses gets its status and a JSON error. */
    r = exchange(f, "BLAH\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.1 400 Bad Request\r\n"));
    assert_non_null(strstr(r, "{\"error\": \"malformed HTTP request\"}\n"));

    sws_admin_stop(admin);
    assert_int_equal(stat(f->path, &st), -1);
}

static void test_stale_socket_is_replaced(void **state)
{
    fixture_t *f = *state;
    /* What a dead server leaves: a socket file nobody accepts on. */
    assert_int_equal(mkdir(dirname_of(f->path), 0755), 0);
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    snprintf(un.sun_path, sizeof(un.sun_path), "%s", f->path);
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(dead, (struct sockaddr *)&un, sizeof(un)), 0);
    close(dead);
    assert_int_equal(connect_to(f->path), -1);

    sws_admin_t *admin = start(f);
    assert_non_null(admin);
    int fd = connect_to(f->path);
    assert_true(fd >= 0);
    close(fd);
    sws_admin_stop(admin);
}

static void test_live_socket_and_other_files_are_kept(void **state)
{
    fixture_t *f = *state;
    sws_admin_t *first = start(f);
    assert_non_null(first);
    struct stat before, after;
    assert_int_equal(stat(f->path, &before), 0);
    /* A second server: not served there, and the first one's file stays. */
    sws_admin_t *second = start(f);
    assert_int_equal(stat(f->path, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    sws_admin_stop(second);
    assert_int_equal(stat(f->path, &after), 0);
    sws_admin_stop(first);

    FILE *file = fopen(f->path, "w");
    assert_non_null(file);
    fclose(file);
    second = start(f);
    assert_int_equal(stat(f->path, &after), 0);
    assert_true(S_ISREG(after.st_mode));
    sws_admin_stop(second);
}

static void test_connections_past_the_limit_are_closed(void **state)
{
    fixture_t *f = *state;
    sws_admin_t *admin = start(f);
    assert_non_null(admin);
    int fds[SWS_ADMIN_MAX_CONNS + 1];
    for (unsigned i = 0; i <= SWS_ADMIN_MAX_CONNS; i++) {
        fds[i] = connect_to(f->path);
        assert_true(fds[i] >= 0);
        /* Accepted one by one, so the last is the one past the limit. */
        assert_int_equal(sws_loop_run_once(&f->loop, 0), 0);
    }
    char ch;
    int turns = 0;
    while (recv(fds[SWS_ADMIN_MAX_CONNS], &ch, 1, MSG_DONTWAIT) != 0) {
        assert_true(turns++ < LOOP_TURNS);
        assert_int_equal(sws_loop_run_once(&f->loop, 50), 0);
    }
    /* The others are still open, waiting for their request. */
    assert_int_equal(recv(fds[0], &ch, 1, MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);
    for (unsigned i = 0; i <= SWS_ADMIN_MAX_CONNS; i++)
        close(fds[i]);
    sws_admin_stop(admin);
}

static void test_no_address_means_off(void **state)
{
    fixture_t *f = *state;
    f->cfg.n_listen = 0;
    assert_null(start(f));
    /* Every call takes the NULL an API that is off is. */
    sws_admin_published(NULL, NULL, 1, SWS_PUBLISHED_BY_FILE);
    sws_admin_close_fds(NULL);
    sws_admin_stop(NULL);
}

int main(void)
{
    sws_log_set_level(SWS_LOG_CRIT);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_address),
        T(test_socket_is_0600_and_answers_then_is_removed),
        T(test_stale_socket_is_replaced),
        T(test_live_socket_and_other_files_are_kept),
        T(test_connections_past_the_limit_are_closed),
        T(test_no_address_means_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
