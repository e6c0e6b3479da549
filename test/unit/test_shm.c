/* shm/shm.c: the region, publication of generations, reader slots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/shm.h"

#define ARENA 4096

/* A hang guard for the forked tests, never a pass condition: the work takes
 * well under a second, ASan included. */
#define FORK_TEST_LIMIT_MS 60000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* In a forked child: die with the test binary, whatever it is doing (a
 * failed assert in the parent leaves it running to the next test). */
static void child_dies_with_parent(void)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        _exit(4);
}

/* A RouteSet of one catch-all host with one respond route whose body tells
 * the generations apart. Everything lives in the struct. */
typedef struct one_route {
    Sws__RouteSet rs;
    Sws__Host host, *hosts[1];
    Sws__Route route, *routes[1];
    Sws__Respond respond;
    char *names[1];
} one_route_t;

static void one_route_init(one_route_t *o, const char *body)
{
    *o = (one_route_t){
        .rs = SWS__ROUTE_SET__INIT,
        .host = SWS__HOST__INIT,
        .route = SWS__ROUTE__INIT,
        .respond = SWS__RESPOND__INIT,
    };
    o->names[0] = "*";
    o->host.names = o->names;
    o->host.n_names = 1;
    o->respond.status = 200;
    o->respond.body.data = (uint8_t *)body;
    o->respond.body.len = strlen(body);
    o->route.path = "/";
    o->route.action_case = SWS__ROUTE__ACTION_RESPOND;
    o->route.respond = &o->respond;
    o->routes[0] = &o->route;
    o->host.routes = o->routes;
    o->host.n_routes = 1;
    o->hosts[0] = &o->host;
    o->rs.hosts = o->hosts;
    o->rs.n_hosts = 1;
}

static uint64_t publish(sws_shm_t *shm, const char *body)
{
    one_route_t o;
    char err[256] = "";
    uint64_t gen = 0;
    one_route_init(&o, body);
    if (sws_shm_publish(shm, &o.rs, &gen, err, sizeof(err)) != 0)
        fail_msg("publish failed: %s", err);
    return gen;
}

static const char *body_of(const sws_table_t *t)
{
    const sws_route_t *r = sws_table_lookup(t, "x", 1, "/", 1);
    assert_non_null(r);
    return sws_table_str(t, r->body);
}

static void create(sws_shm_t *shm, unsigned narenas, unsigned workers)
{
    char err[256] = "";
    if (sws_shm_create(shm, ARENA, narenas, workers, err, sizeof(err)) != 0)
        fail_msg("create failed: %s", err);
}

static void test_publish_and_acquire(void **state)
{
    (void)state;
    sws_shm_t shm;
    create(&shm, 4, 2);
    assert_int_equal(sws_shm_current_generation(&shm), 0);
    assert_null(sws_shm_reader_acquire(&shm, 0, getpid()));
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 0);

    assert_int_equal(publish(&shm, "one"), 1);
    assert_int_equal(sws_shm_current_generation(&shm), 1);
    const sws_table_t *t = sws_shm_reader_acquire(&shm, 0, getpid());
    assert_non_null(t);
    assert_int_equal(sws_table_generation(t), 1);
    assert_string_equal(body_of(t), "one");
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 1);
    assert_int_equal(sws_shm_reader_generation(&shm, 1), 0); /* others untouched */
    assert_ptr_equal(sws_shm_reader_acquire(&shm, 0, getpid()), t); /* nothing changed */

    assert_int_equal(publish(&shm, "two"), 2);
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 1); /* until it acquires */
    t = sws_shm_reader_acquire(&shm, 0, getpid());
    assert_int_equal(sws_table_generation(t), 2);
    assert_string_equal(body_of(t), "two");
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 2);

    assert_null(sws_shm_reader_acquire(&shm, 2, getpid())); /* no such slot */
    sws_shm_close(&shm);
}

/* Pages of the region in memory (mincore), for sws_shm_warm. */
static size_t resident_pages(const sws_shm_t *shm)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = (shm->size + page - 1) / page;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore(shm->base, shm->size, vec), 0);
    size_t in = 0;
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    return in;
}

/* After a publication the supervisor faults in every arena up to the
 * current table's size and a quarter more, so that the next builds (into
 * arenas never written) do not pay those page faults; the tables read as
 * before, and a smaller table never shrinks what is warm. */
static void test_warm_faults_every_arena_in(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    if (sws_shm_create(&shm, 1u << 20, 4, 1, err, sizeof(err)) != 0)
        fail_msg("create failed: %s", err);
    sws_shm_warm(&shm); /* nothing published: nothing to size it by */
    assert_int_equal(shm.warm, 0);
    /* A table of some 50 pages: a body of 200,000 bytes. */
    char *big = malloc(200001);
    assert_non_null(big);
    memset(big, 'o', 200000);
    big[200000] = '\0';
    assert_int_equal(publish(&shm, big), 1);
    size_t before = resident_pages(&shm);
    sws_shm_warm(&shm);
    assert_true(shm.warm >= 200000 && shm.warm <= 1u << 20);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* Three arenas never written before, each now at least warm's pages
     * (less the one its first page may share with what was resident). */
    assert_true(resident_pages(&shm) >= before + 3 * (shm.warm / page - 1));
    size_t warm = shm.warm;
    const sws_table_t *t = sws_shm_reader_acquire(&shm, 0, getpid());
    assert_non_null(t);
    assert_string_equal(body_of(t), big);
    free(big);
    assert_int_equal(publish(&shm, "two"), 2);
    sws_shm_warm(&shm);
    assert_int_equal(shm.warm, warm);
    t = sws_shm_reader_acquire(&shm, 0, getpid());
    assert_string_equal(body_of(t), "two");
    sws_shm_close(&shm);
}

/* Pages of [base, base + len) mapped in this process's page tables
 * (/proc/self/pagemap, bit 63): unlike mincore, which says what the
 * memfd holds, whoever faulted it in. */
static size_t mapped_pages(const void *base, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    assert_true(fd >= 0);
    size_t in = 0;
    for (uintptr_t p = (uintptr_t)base; p < (uintptr_t)base + len; p += page) {
        uint64_t e = 0;
        assert_int_equal(pread(fd, &e, sizeof(e), (off_t)(p / page * sizeof(e))),
                         (ssize_t)sizeof(e));
        in += (size_t)(e >> 63);
    }
    close(fd);
    return in;
}

/* A worker maps the region at fork, but its page tables start empty:
 * after adopting a generation it maps every arena in up to the current
 * table's size and a quarter (the supervisor's extent), so its first
 * adoption of a table in each arena does not fault its pages in; it
 * grows only. A second mapping of the region (attach) stands for the
 * worker's. */
static void test_reader_warm_maps_every_arena_in(void **state)
{
    (void)state;
    sws_shm_t shm, worker;
    char err[256] = "";
    if (sws_shm_create(&shm, 1u << 20, 4, 1, err, sizeof(err)) != 0)
        fail_msg("create failed: %s", err);
    char *big = malloc(200001);
    assert_non_null(big);
    memset(big, 'o', 200000);
    big[200000] = '\0';
    assert_int_equal(publish(&shm, big), 1);
    sws_shm_warm(&shm);
    assert_int_equal(sws_shm_attach(&worker, dup(shm.fd), err, sizeof(err)), 0);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t before = mapped_pages(worker.base, worker.size);
    assert_true(before < shm.warm / page); /* not even one arena's worth */
    size_t warm = sws_shm_reader_warm(&worker, 0);
    assert_int_equal(warm, shm.warm);
    assert_true(mapped_pages(worker.base, worker.size) >= before + 4 * (warm / page - 1));
    assert_int_equal(publish(&shm, "two"), 2);
    assert_int_equal(sws_shm_reader_warm(&worker, warm), warm);
    const sws_table_t *t = sws_shm_reader_acquire(&worker, 0, getpid());
    assert_non_null(t);
    assert_string_equal(body_of(t), "two");
    free(big);
    sws_shm_close(&worker);
    sws_shm_close(&shm);
}

/* Before the build of a RouteSet whose member records alone exceed what
 * is warm (ingressd's first full set), the supervisor warms the arena the
 * build will take, outside the build; a set within what is warm costs
 * nothing. */
static void test_prepare_warms_the_next_arena_for_a_larger_set(void **state)
{
    (void)state;
    enum { MEMBERS = 4000 };
    sws_shm_t shm;
    char err[256] = "";
    if (sws_shm_create(&shm, 1u << 20, 4, 1, err, sizeof(err)) != 0)
        fail_msg("create failed: %s", err);
    assert_int_equal(publish(&shm, "small"), 1);
    sws_shm_warm(&shm);
    one_route_t small;
    one_route_init(&small, "small");
    size_t before = mapped_pages(shm.base, shm.size);
    sws_shm_prepare(&shm, &small.rs);
    assert_int_equal(mapped_pages(shm.base, shm.size), before);

    Sws__Pool pool = SWS__POOL__INIT, *pools[1] = { &pool };
    Sws__Member *members = calloc(MEMBERS, sizeof(*members));
    Sws__Member **mp = calloc(MEMBERS, sizeof(*mp));
    char (*addr)[24] = calloc(MEMBERS, sizeof(*addr));
    assert_true(members != NULL && mp != NULL && addr != NULL);
    for (unsigned i = 0; i < MEMBERS; i++) {
        sws__member__init(&members[i]);
        snprintf(addr[i], sizeof(addr[i]), "10.0.%u.%u:80", i / 250, i % 250 + 1);
        members[i].address = addr[i];
        mp[i] = &members[i];
    }
    pool.name = "big";
    pool.members = mp;
    pool.n_members = MEMBERS;
    one_route_t big;
    one_route_init(&big, "big");
    big.rs.pools = pools;
    big.rs.n_pools = 1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), need = sws_table_size(&big.rs);
    assert_true(need > 4 * MEMBERS * sizeof(uint64_t)); /* far beyond what is warm */
    sws_shm_prepare(&shm, &big.rs);
    assert_true(mapped_pages(shm.base, shm.size) >= before + need / page - 1);
    uint64_t gen = 0;
    assert_int_equal(sws_shm_publish(&shm, &big.rs, &gen, err, sizeof(err)), 0);
    assert_int_equal(gen, 2);
    const sws_table_t *t = sws_shm_reader_acquire(&shm, 0, getpid());
    assert_int_equal(sws_table_pool_count(t), 1);
    assert_string_equal(body_of(t), "big");
    free(addr);
    free(mp);
    free(members);
    sws_shm_close(&shm);
}

static void test_counters_per_slot(void **state)
{
    (void)state;
    sws_shm_t shm;
    create(&shm, 2, 3);
    sws_shm_counters_t *a = sws_shm_counters(&shm, 0), *b = sws_shm_counters(&shm, 2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->requests, 0);
    a->requests = 5;
    assert_int_equal(b->requests, 0);
    assert_true((char *)b - (char *)a >= 2 * 64); /* each on its own line */
    assert_null(sws_shm_counters(&shm, 3));
    sws_shm_close(&shm);
}

static void test_member_stats_written_and_found_by_id(void **state)
{
    (void)state;
    sws_shm_t shm;
    sws_shm_member_stats_t out;
    create(&shm, 2, 2);
    sws_shm_member_stats_t in[] = {
        { .id = 7, .requests = 1, .failures = 2, .down_until_ms = 3, .active = 4, .idle = 5 },
        { .id = 9, .requests = 10 },
    };
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 7, 0, &out), 0); /* nothing yet */
    sws_shm_member_stats_write(&shm, 0, in, 2);
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 7, 0, &out), 1);
    assert_memory_equal(&out, &in[0], sizeof(out));
    /* A hint that misses (the worker holds another generation) still finds it. */
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 9, 0, &out), 1);
    assert_int_equal(out.requests, 10);
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 9, 12345, &out), 1);
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 8, 0, &out), 0);
    assert_int_equal(sws_shm_member_stats_read(&shm, 1, 7, 0, &out), 0); /* per worker */
    assert_int_equal(sws_shm_member_stats_read(&shm, 2, 7, 0, &out), 0); /* no such slot */
    /* A shorter publication hides the records after it. */
    sws_shm_member_stats_write(&shm, 0, &in[1], 1);
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 7, 0, &out), 0);
    /* The supervisor clears a reaped worker's slot: its figures go too. */
    sws_shm_member_stats_write(&shm, 0, in, 2);
    sws_shm_reader_clear(&shm, 0);
    assert_int_equal(sws_shm_member_stats_read(&shm, 0, 9, 1, &out), 0);
    sws_shm_close(&shm);
}

/* Records with every figure equal to one counter value: a reader that
 * mixed two publications would see two values in one record. */
static void stats_of(uint64_t v, sws_shm_member_stats_t *r, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        r[i] = (sws_shm_member_stats_t){ .id = i + 1, .requests = v, .failures = v,
                                          .down_until_ms = v, .active = (uint32_t)v,
                                          .idle = (uint32_t)v };
}

static void test_member_stats_reader_never_mixes_publications(void **state)
{
    (void)state;
    enum { N = 64 };
    const uint64_t reads = 3000000;
    sws_shm_t shm;
    sws_shm_member_stats_t r[N];
    create(&shm, 2, 1);
    stats_of(1, r, N);
    sws_shm_member_stats_write(&shm, 0, r, N);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_dies_with_parent();
        for (uint64_t v = 2;; v++) {
            stats_of(v, r, N);
            sws_shm_member_stats_write(&shm, 0, r, N);
        }
    }
    uint64_t found = 0, last = 0, deadline = now_ms() + FORK_TEST_LIMIT_MS;
    for (uint64_t i = 0; i < reads && now_ms() < deadline; i++) {
        sws_shm_member_stats_t out;
        int rc = sws_shm_member_stats_read(&shm, 0, 1 + i % N, (uint32_t)i, &out);
        if (rc != 1)
            continue; /* -1: the writer kept it busy; never a mix */
        found++;
        if (out.failures != out.requests || out.down_until_ms != out.requests ||
            out.active != (uint32_t)out.requests || out.idle != (uint32_t)out.requests) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            fail_msg("a record mixed publications: requests %llu, failures %llu, idle %u",
                     (unsigned long long)out.requests, (unsigned long long)out.failures,
                     out.idle);
        }
        last = out.requests;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(found > 0);
    assert_true(last > 1); /* the reads raced the writer */
    sws_shm_close(&shm);
}

static void test_held_arena_never_reused(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    uint64_t gen = 0;
    one_route_t o;
    create(&shm, 3, 2);

    publish(&shm, "held");
    const sws_table_t *held = sws_shm_reader_acquire(&shm, 0, 1001);
    assert_int_equal(sws_table_generation(held), 1);
    size_t size = ARENA;
    char *snapshot = malloc(size);
    assert_non_null(snapshot);
    memcpy(snapshot, held, size);

    /* Slot 0 stays on generation 1 while the others cycle through. */
    for (int i = 0; i < 10; i++) {
        publish(&shm, "cycling");
        assert_memory_equal(held, snapshot, size);
    }
    assert_int_equal(sws_shm_current_generation(&shm), 11);

    /* Slot 1 takes the current one; one arena is left, then none. */
    const sws_table_t *t1 = sws_shm_reader_acquire(&shm, 1, 1002);
    assert_int_equal(sws_table_generation(t1), 11);
    assert_int_equal(publish(&shm, "last free"), 12);
    one_route_init(&o, "too many");
    assert_int_equal(sws_shm_publish(&shm, &o.rs, &gen, err, sizeof(err)), SWS_SHM_BUSY);
    assert_non_null(strstr(err, "all 3 table arenas are in use"));
    assert_int_equal(sws_shm_current_generation(&shm), 12); /* nothing changed */
    assert_memory_equal(held, snapshot, size);
    assert_string_equal(body_of(t1), "cycling");

    /* Slot 0's worker is reaped: its arena, and only it, is free again. */
    sws_shm_reader_clear(&shm, 0);
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 0);
    assert_int_equal(publish(&shm, "reused"), 13);
    const sws_table_t *t0 = sws_shm_reader_acquire(&shm, 0, 1003);
    assert_ptr_equal(t0, held);
    assert_string_equal(body_of(t0), "reused");
    assert_string_equal(body_of(t1), "cycling"); /* slot 1 is still safe */
    free(snapshot);
    sws_shm_close(&shm);
}

static void test_table_too_large(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    uint64_t gen = 0;
    one_route_t o;
    char *big = malloc(ARENA + 1);
    assert_non_null(big);
    memset(big, 'b', ARENA);
    big[ARENA] = '\0';
    create(&shm, 2, 1);
    publish(&shm, "small");

    one_route_init(&o, big);
    assert_int_equal(sws_shm_publish(&shm, &o.rs, &gen, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "arena has 4096; raise server.table_size"));
    assert_int_equal(sws_shm_current_generation(&shm), 1);
    assert_string_equal(body_of(sws_shm_reader_acquire(&shm, 0, getpid())), "small");
    free(big);
    sws_shm_close(&shm);
}

static void test_invalid_routeset_keeps_current(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    uint64_t gen = 0;
    one_route_t o;
    create(&shm, 2, 1);
    publish(&shm, "good");

    one_route_init(&o, "bad");
    o.route.match = SWS__ROUTE__MATCH__REGEX;
    for (int i = 0; i < 3; i++) { /* a failed build never uses up an arena */
        assert_int_equal(sws_shm_publish(&shm, &o.rs, &gen, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "regex"));
    }
    assert_int_equal(sws_shm_current_generation(&shm), 1);
    assert_int_equal(publish(&shm, "next"), 2);
    sws_shm_close(&shm);
}

/* Reads one line the child wrote; an empty string if it died first or
 * wrote nothing within the limit. */
static void read_report(int fd, char *buf, size_t len)
{
    size_t got = 0;
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    while (got + 1 < len) {
        if (poll(&pfd, 1, FORK_TEST_LIMIT_MS) != 1)
            break;
        ssize_t n = read(fd, buf + got, 1);
        if (n <= 0 || buf[got] == '\n')
            break;
        got++;
    }
    buf[got] = '\0';
}

/* In the child: no cmocka asserts (a failure would unwind into a copy of
 * the test runner); what it sees goes to the parent, which checks it. */
static void child_report(sws_shm_t *shm, int fd)
{
    char line[64];
    const sws_table_t *t = sws_shm_reader_acquire(shm, 0, getpid());
    const sws_route_t *r = t ? sws_table_lookup(t, "x", 1, "/", 1) : NULL;
    int n = snprintf(line, sizeof(line), "%llu %s\n",
                     (unsigned long long)(t ? sws_table_generation(t) : 0),
                     r ? sws_table_str(t, r->body) : "(none)");
    if (write(fd, line, (size_t)n) != n)
        _exit(2);
}

static void test_forked_reader(void **state)
{
    (void)state;
    sws_shm_t shm;
    int report[2], go[2];
    char line[64], byte = 'g';
    create(&shm, 2, 1);
    publish(&shm, "first");
    assert_int_equal(pipe(report), 0);
    assert_int_equal(pipe(go), 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_dies_with_parent();
        close(report[0]);
        close(go[1]);
        child_report(&shm, report[1]);
        if (read(go[0], &byte, 1) != 1)
            _exit(3);
        child_report(&shm, report[1]);
        _exit(0);
    }
    close(report[1]);
    close(go[0]);

    read_report(report[0], line, sizeof(line));
    assert_string_equal(line, "1 first");
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 1); /* the child's slot */

    /* With two arenas and the child on 1, generation 2 goes to the other
     * one; a third would have nowhere to go until the child moves on. */
    assert_int_equal(publish(&shm, "second"), 2);
    assert_int_equal(write(go[1], &byte, 1), 1);
    read_report(report[0], line, sizeof(line));
    assert_string_equal(line, "2 second");

    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 2);
    sws_shm_reader_clear(&shm, 0); /* as the supervisor does on reap */
    assert_int_equal(sws_shm_reader_generation(&shm, 0), 0);
    close(report[0]);
    close(go[1]);
    sws_shm_close(&shm);
}

/* Child of the stress test: acquire over and over and check that the table
 * it holds is whole: its body names its own generation. Exit 0 when it has
 * seen the last generation, 1 if a table ever changed under it, 2 if the
 * last generation never came. */
static void child_verify(sws_shm_t *shm, uint64_t last)
{
    char want[32];
    uint64_t deadline = now_ms() + FORK_TEST_LIMIT_MS;
    child_dies_with_parent();
    for (unsigned long round = 0;; round++) {
        if ((round & 1023) == 0 && now_ms() > deadline)
            _exit(2);
        const sws_table_t *t = sws_shm_reader_acquire(shm, 0, getpid());
        if (t == NULL)
            continue;
        uint64_t gen = sws_table_generation(t);
        snprintf(want, sizeof(want), "gen %llu", (unsigned long long)gen);
        for (int i = 0; i < 64; i++) { /* long enough to overlap a publish */
            const sws_route_t *r = sws_table_lookup(t, "x", 1, "/", 1);
            if (r == NULL || strcmp(sws_table_str(t, r->body), want) != 0 ||
                sws_table_generation(t) != gen)
                _exit(1);
        }
        if (gen >= last)
            _exit(0);
    }
}

static void test_concurrent_reader_sees_whole_tables(void **state)
{
    (void)state;
    const uint64_t last = 20000;
    sws_shm_t shm;
    char body[32], err[256];
    one_route_t o;
    create(&shm, 2, 1); /* two arenas: every publish races the reader */
    publish(&shm, "gen 1");

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child_verify(&shm, last);

    int status = -1;
    pid_t done = 0;
    uint64_t deadline = now_ms() + FORK_TEST_LIMIT_MS;
    for (uint64_t gen = 2; gen <= last && done == 0;) {
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("published up to generation %llu of %llu before the limit",
                     (unsigned long long)gen - 1, (unsigned long long)last);
        }
        uint64_t got;
        snprintf(body, sizeof(body), "gen %llu", (unsigned long long)gen);
        one_route_init(&o, body);
        int rc = sws_shm_publish(&shm, &o.rs, &got, err, sizeof(err));
        if (rc == 0) {
            assert_int_equal(got, gen);
            gen++;
            continue;
        }
        /* The reader holds the other arena: wait for it to move on (or
         * to have died, which the waitpid below reports). */
        assert_int_equal(rc, SWS_SHM_BUSY);
        assert_non_null(strstr(err, "in use"));
        done = waitpid(pid, &status, WNOHANG);
    }
    if (done == 0)
        assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(sws_shm_current_generation(&shm), last);
    sws_shm_close(&shm);
}

static void test_attach_same_fd(void **state)
{
    (void)state;
    sws_shm_t shm, other;
    char err[256] = "";
    create(&shm, 3, 2);
    publish(&shm, "before");

    assert_int_equal(sws_shm_attach(&other, dup(shm.fd), err, sizeof(err)), 0);
    assert_ptr_not_equal(other.base, shm.base);
    assert_int_equal(other.size, shm.size);
    assert_int_equal(sws_shm_current_generation(&other), 1);
    const sws_table_t *t = sws_shm_reader_acquire(&other, 1, getpid());
    assert_string_equal(body_of(t), "before");
    assert_int_equal(sws_shm_reader_generation(&shm, 1), 1); /* one region, two maps */

    publish(&shm, "after");
    assert_int_equal(sws_shm_current_generation(&other), 2);
    assert_string_equal(body_of(sws_shm_reader_acquire(&other, 1, getpid())), "after");
    sws_shm_close(&other);
    sws_shm_close(&shm);
}

static void test_attach_rejects_foreign(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    int fd = memfd_create("not-scalws", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(sws_shm_attach(&shm, fd, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "too small"));
    assert_int_equal(ftruncate(fd, 1 << 20), 0);
    assert_int_equal(sws_shm_attach(&shm, fd, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "bad magic"));
    close(fd); /* a failed attach leaves the fd to the caller */

    /* A region cut short is refused, not mapped past its end. */
    create(&shm, 2, 1);
    assert_int_equal(ftruncate(shm.fd, (off_t)shm.size / 2), 0);
    sws_shm_t again;
    fd = dup(shm.fd);
    assert_int_equal(sws_shm_attach(&again, fd, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "header describes"));
    close(fd);
    munmap(shm.base, shm.size); /* its tail is gone: unmap without touching it */
    close(shm.fd);

    /* A header whose arena size is off by 2^63 (and its stride with it)
     * describes the same total size, the products wrapping; refused before
     * any arena address is computed from it. The header starts: magic,
     * version, narenas, then arena_size and arena_stride. */
    create(&shm, 2, 1);
    uint64_t *geometry = (uint64_t *)((char *)shm.base + 16);
    geometry[0] += 1ull << 63;
    geometry[1] += 1ull << 63;
    fd = dup(shm.fd);
    assert_int_equal(sws_shm_attach(&again, fd, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "table size"));
    close(fd);
    sws_shm_close(&shm);
}

/* Found by fuzz_table: a region (attached on upgrade) whose current word
 * holds the last generation the word can count; the next publication
 * wrapped to generation 0, which readers take for "nothing published". The
 * word lies on the header's second cache line. */
static void test_publish_refuses_generation_overflow(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    create(&shm, 2, 1);
    *(uint64_t *)((char *)shm.base + 64) = UINT64_MAX << 8; /* last generation, arena 0 */
    one_route_t o;
    one_route_init(&o, "x");
    uint64_t gen = 0;
    assert_int_equal(sws_shm_publish(&shm, &o.rs, &gen, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "last one"));
    assert_int_equal(sws_shm_current_generation(&shm), UINT64_MAX >> 8);
    sws_shm_close(&shm);
}

static void test_create_rejects_bad_geometry(void **state)
{
    (void)state;
    sws_shm_t shm;
    char err[256] = "";
    assert_int_equal(sws_shm_create(&shm, ARENA, 1, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "arenas"));
    assert_int_equal(sws_shm_create(&shm, ARENA, 2, SWS_SHM_MAX_WORKERS + 1, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "workers"));
    assert_int_equal(sws_shm_create(&shm, 100, 2, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "table size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_publish_and_acquire),
        cmocka_unit_test(test_counters_per_slot),
        cmocka_unit_test(test_warm_faults_every_arena_in),
        cmocka_unit_test(test_reader_warm_maps_every_arena_in),
        cmocka_unit_test(test_prepare_warms_the_next_arena_for_a_larger_set),
        cmocka_unit_test(test_held_arena_never_reused),
        cmocka_unit_test(test_table_too_large),
        cmocka_unit_test(test_invalid_routeset_keeps_current),
        cmocka_unit_test(test_forked_reader),
        cmocka_unit_test(test_member_stats_written_and_found_by_id),
        cmocka_unit_test(test_member_stats_reader_never_mixes_publications),
        cmocka_unit_test(test_concurrent_reader_sees_whole_tables),
        cmocka_unit_test(test_attach_same_fd),
        cmocka_unit_test(test_publish_refuses_generation_overflow),
        cmocka_unit_test(test_attach_rejects_foreign),
        cmocka_unit_test(test_create_rejects_bad_geometry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
