/* shm/tickets.c: the TLS session-ticket key ring in the shared region. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/shm.h"
#include "shm/tickets.h"

#define ARENA 4096
#define HOUR_MS (3600u * 1000u)

/* A hang guard for the forked test, never a pass condition. */
#define FORK_TEST_LIMIT_MS 60000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void create(sws_shm_t *shm)
{
    char err[256] = "";
    if (sws_shm_create(shm, ARENA, 2, 2, err, sizeof(err)) != 0)
        fail_msg("sws_shm_create: %s", err);
}

/* Each test gets a fresh region (*state), closed after it. */
static int region_setup(void **state)
{
    static sws_shm_t shm;
    create(&shm);
    *state = &shm;
    return 0;
}

static int region_teardown(void **state)
{
    sws_shm_close(*state);
    return 0;
}

/* The fresh region's ring, with a first key made at 10 ms when first_key. */
static sws_tickets_t *ring(void **state, int first_key)
{
    sws_tickets_t *t = sws_shm_tickets(*state);
    char err[256] = "";
    if (first_key && sws_tickets_init(t, 10, HOUR_MS, err, sizeof(err)) != 0)
        fail_msg("init: %s", err);
    return t;
}

/* A key whose every byte is b, made at b ms: a torn copy shows. */
static sws_ticket_key_t key_of(uint8_t b)
{
    sws_ticket_key_t k;
    memset(&k, b, sizeof(k));
    k.made_ms = b;
    return k;
}

static int is_key_of(const sws_ticket_key_t *k, uint8_t b)
{
    sws_ticket_key_t want = key_of(b);
    return memcmp(k->name, want.name, sizeof(k->name)) == 0 &&
           memcmp(k->aes, want.aes, sizeof(k->aes)) == 0 &&
           memcmp(k->hmac, want.hmac, sizeof(k->hmac)) == 0 && k->made_ms == b;
}

static void read_ok(const sws_tickets_t *t, sws_tickets_snapshot_t *s)
{
    assert_int_equal(sws_tickets_read(t, s), 0);
}

static void test_region_starts_without_keys_and_init_makes_one(void **state)
{
    sws_tickets_snapshot_t s;
    char err[256] = "";
    sws_tickets_t *t = ring(state, 0);
    assert_int_equal(sws_tickets_read(t, &s), -1);

    assert_int_equal(sws_tickets_init(t, 1000, 12 * HOUR_MS, err, sizeof(err)), 0);
    read_ok(t, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.period_ms, 12 * HOUR_MS);
    assert_int_equal(s.keys[0].made_ms, 1000);
    static const uint8_t zero[SWS_TICKET_AES_LEN];
    assert_memory_not_equal(s.keys[0].aes, zero, sizeof(zero));
    assert_int_equal(sws_tickets_due_ms(t), 1000 + 12 * HOUR_MS);
}

/* A reload or a new binary that attaches the region keeps the keys every
 * ticket in the wild was sealed with; only the period may change. */
static void test_init_keeps_the_keys_of_an_attached_region(void **state)
{
    sws_shm_t *old = *state, attached;
    sws_tickets_snapshot_t before, after;
    char err[256] = "";
    assert_int_equal(sws_tickets_init(ring(state, 0), 1000, HOUR_MS, err, sizeof(err)), 0);
    read_ok(ring(state, 0), &before);

    int fd = dup(old->fd);
    assert_true(fd >= 0);
    if (sws_shm_attach(&attached, fd, err, sizeof(err)) != 0)
        fail_msg("attach: %s", err);
    sws_tickets_t *t = sws_shm_tickets(&attached);
    assert_int_equal(sws_tickets_init(t, 5000, 2 * HOUR_MS, err, sizeof(err)), 0);
    read_ok(t, &after);
    assert_int_equal(after.n, 1);
    assert_memory_equal(&after.keys[0], &before.keys[0], sizeof(before.keys[0]));
    assert_int_equal(after.period_ms, 2 * HOUR_MS);
    assert_int_equal(sws_tickets_due_ms(t), 1000 + 2 * HOUR_MS);
    sws_shm_close(&attached);
}

static void test_rotation_keeps_the_previous_key_then_drops_it(void **state)
{
    sws_tickets_snapshot_t s;
    sws_tickets_t *t = ring(state, 0);
    sws_ticket_key_t a = key_of(0xa1), b = key_of(0xb2), c = key_of(0xc3);

    sws_tickets_install(t, &a);
    sws_tickets_install(t, &b);
    read_ok(t, &s);
    assert_int_equal(s.n, 2);
    assert_true(is_key_of(&s.keys[0], 0xb2)); /* current first */
    assert_true(is_key_of(&s.keys[1], 0xa1));
    assert_ptr_equal(sws_tickets_find(&s, a.name), &s.keys[1]);
    assert_int_equal(sws_tickets_due_ms(t), 0xb2);

    sws_tickets_install(t, &c);
    read_ok(t, &s);
    assert_int_equal(s.n, SWS_TICKETS_KEYS);
    assert_true(is_key_of(&s.keys[0], 0xc3));
    assert_true(is_key_of(&s.keys[1], 0xb2));
    assert_null(sws_tickets_find(&s, a.name));
}

static void test_rotate_makes_a_new_random_current_key(void **state)
{
    sws_tickets_snapshot_t s;
    char err[256] = "";
    sws_tickets_t *t = ring(state, 1);
    assert_int_equal(sws_tickets_rotate(t, 20 + HOUR_MS, err, sizeof(err)), 0);
    read_ok(t, &s);
    assert_int_equal(s.n, 2);
    assert_memory_not_equal(s.keys[0].name, s.keys[1].name, SWS_TICKET_NAME_LEN);
    assert_memory_not_equal(s.keys[0].aes, s.keys[1].aes, SWS_TICKET_AES_LEN);
    assert_int_equal(sws_tickets_due_ms(t), 20 + 2 * HOUR_MS);
}

/* The supervisor's rotations, each at its due time, up to to_ms. */
static void rotate_until(sws_tickets_t *t, uint64_t to_ms)
{
    char err[256] = "";
    while (sws_tickets_due_ms(t) <= to_ms)
        if (sws_tickets_rotate(t, sws_tickets_due_ms(t), err, sizeof(err)) != 0)
            fail_msg("rotate: %s", err);
}

/* Whether a ticket sealed under the key named name opens now. */
static int opens(const sws_tickets_t *t, const uint8_t name[SWS_TICKET_NAME_LEN])
{
    sws_tickets_snapshot_t s;
    read_ok(t, &s);
    int found = sws_tickets_find(&s, name) != NULL;
    sws_tickets_forget(&s);
    return found;
}

/* A ticket sealed at any moment of its key's period, up to just before
 * the next rotation, still opens at the end of the session lifetime a
 * worker announces (SSL_CTX_set_timeout), and no longer two periods on. */
static void test_a_ticket_opens_for_the_announced_lifetime_only(void **state)
{
    static const uint64_t sealed_after[] = { 0, HOUR_MS / 2, HOUR_MS - 1 };
    const uint64_t lifetime = sws_tickets_lifetime_ms(HOUR_MS);
    uint8_t name[SWS_TICKET_NAME_LEN];
    sws_tickets_snapshot_t s;

    for (size_t i = 0; i < sizeof(sealed_after) / sizeof(sealed_after[0]); i++) {
        sws_tickets_t *t = ring(state, 1); /* the first key made at 10 ms */
        uint64_t sealed = 10 + sealed_after[i];

        read_ok(t, &s);
        memcpy(name, s.keys[0].name, sizeof(name)); /* the key sealing now */
        sws_tickets_forget(&s);
        rotate_until(t, sealed + lifetime);
        assert_true(opens(t, name));
        rotate_until(t, sealed + 2 * (uint64_t)HOUR_MS);
        assert_false(opens(t, name));
        sws_tickets_wipe(t);
    }
}

/* seq odd: the supervisor is in the middle of a rotation. */
static void test_ring_being_rewritten_is_never_used(void **state)
{
    sws_tickets_snapshot_t s;
    sws_tickets_t *t = ring(state, 0);
    sws_ticket_key_t a = key_of(0xa1);
    sws_tickets_install(t, &a);

    atomic_fetch_add(&t->seq, 1);
    memset(&s, 0x55, sizeof(s));
    assert_int_equal(sws_tickets_read(t, &s), -1);
    assert_int_equal(s.n, 0);
    assert_null(sws_tickets_find(&s, a.name));
    atomic_fetch_add(&t->seq, 1);
    read_ok(t, &s);
    assert_true(is_key_of(&s.keys[0], 0xa1));
}

static void test_wipe_leaves_no_key(void **state)
{
    sws_tickets_snapshot_t s;
    char err[256] = "";
    sws_tickets_t *t = ring(state, 1);
    assert_int_equal(sws_tickets_rotate(t, 20, err, sizeof(err)), 0);
    sws_tickets_wipe(t);
    assert_int_equal(sws_tickets_read(t, &s), -1);
    for (unsigned i = 0; i < SWS_TICKETS_KEYS; i++)
        for (unsigned j = 0; j < SWS_TICKET_KEY_WORDS; j++)
            assert_int_equal(atomic_load(&t->keys[i].bytes[j]), 0);
}

/* Whether the mapping that starts at addr (/proc/self/smaps) has the
 * VmFlag flag; fails the test when no mapping starts there. */
static int vm_flag(const void *addr, const char *flag)
{
    char line[512], want[8];
    snprintf(want, sizeof(want), " %s ", flag);
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    int in = 0, found = 0, has = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        /* A mapping's line starts with its range in lower-case hex; its
         * fields' names start with a capital. */
        if (!isupper((unsigned char)line[0]) && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            in = lo == (unsigned long)addr;
            found |= in;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            line[strcspn(line, "\n")] = ' ';
            has = strstr(line, want) != NULL;
        }
    }
    fclose(f);
    if (!found)
        fail_msg("no mapping starts at %p", addr);
    return has;
}

/* Keys never reach a disk, core dumps included; the rest of the region
 * (routing tables) stays in them for debugging. */
static void test_keys_are_left_out_of_core_dumps(void **state)
{
    sws_shm_t *shm = *state;
    assert_true(vm_flag(ring(state, 0), "dd"));
    assert_false(vm_flag(shm->base, "dd"));
}

/* A worker reading while the supervisor rotates as fast as it can: every
 * key copied is one key, never half of two. */
static void test_reader_never_mixes_two_keys(void **state)
{
    const uint64_t reads = 2000000;
    sws_tickets_t *t = ring(state, 0);
    sws_ticket_key_t k = key_of(1);
    sws_tickets_install(t, &k);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
            _exit(4);
        for (unsigned v = 2;; v++) {
            k = key_of((uint8_t)(v % 255 + 1));
            sws_tickets_install(t, &k);
        }
    }
    uint64_t ok = 0, torn = 0, deadline = now_ms() + FORK_TEST_LIMIT_MS;
    uint8_t last = 1;
    for (uint64_t i = 0; i < reads && now_ms() < deadline; i++) {
        sws_tickets_snapshot_t s;
        if (sws_tickets_read(t, &s) != 0) {
            torn++;
            continue;
        }
        ok++;
        for (unsigned j = 0; j < s.n; j++) {
            if (!is_key_of(&s.keys[j], s.keys[j].name[0])) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                fail_msg("key %u of a copy mixes two keys (name byte %#x, aes byte %#x)", j,
                         s.keys[j].name[0], s.keys[j].aes[0]);
            }
        }
        last = s.keys[0].name[0];
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    print_message("%llu consistent reads, %llu gave up\n", (unsigned long long)ok,
                  (unsigned long long)torn);
    assert_true(ok > 0);
    assert_true(last != 1 || torn > 0); /* the reads raced the writer */
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, region_setup, region_teardown)
    const struct CMUnitTest tests[] = {
        T(test_region_starts_without_keys_and_init_makes_one),
        T(test_init_keeps_the_keys_of_an_attached_region),
        T(test_rotation_keeps_the_previous_key_then_drops_it),
        T(test_rotate_makes_a_new_random_current_key),
        T(test_a_ticket_opens_for_the_announced_lifetime_only),
        T(test_ring_being_rewritten_is_never_used),
        T(test_wipe_leaves_no_key),
        T(test_keys_are_left_out_of_core_dumps),
        T(test_reader_never_mixes_two_keys),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
