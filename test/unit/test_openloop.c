/* bench/openloop.c: the fixed-rate client's histogram, schedule and answer
 * reader, without a network (the client itself runs in
 * test/integration/test_bench.py). The file is included with its main
 * renamed, as test/fuzz/fuzz_openloop.c does: it is no library module. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#define main openloop_main
#include "bench/openloop.c"
#undef main

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Every value lands in a bucket whose top is at most 1/128 above it, and
 * larger values never land in earlier buckets. */
static void test_histogram_buckets_are_ordered_and_narrow(void **state)
{
    (void)state;
    int last = -1;

    for (uint64_t v = 0; v < 5000000; v += v < 4096 ? 1 : v / 97) {
        int i = ol_hist_index(v);
        assert_true(i >= last);
        assert_true(i < OL_HIST_BUCKETS);
        assert_true(ol_hist_high(i) >= v);
        assert_true(ol_hist_high(i) - v <= v / 128);
        if (i > 0)
            assert_true(ol_hist_high(i - 1) < v);
        last = i;
    }
    assert_int_equal(ol_hist_index(UINT64_MAX), OL_HIST_BUCKETS - 1);
    assert_true(ol_hist_high(OL_HIST_BUCKETS - 1) == UINT64_MAX);
    for (int s = 8; s < 64; s++) {
        uint64_t p = (uint64_t)1 << s;
        assert_int_equal(ol_hist_index(p), ol_hist_index(p - 1) + 1);
    }
}

/* The percentiles are fixedrate.py's nearest rank of the sorted samples,
 * at most 1/128 above, never below; the largest is exact. */
static void test_percentiles_match_the_sorted_samples(void **state)
{
    (void)state;
    enum { N = 20000 };
    static uint64_t v[N];
    static ol_hist_t h;
    static const double ps[] = { 0, 1, 50, 90, 99, 99.9, 99.99, 100 };
    uint64_t x = 12345;

    memset(&h, 0, sizeof(h));
    assert_true(ol_hist_percentile(&h, 50) == 0);
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        /* Latencies from 20 us to about 80 ms, skewed towards the small. */
        v[i] = 20000 + ((x >> 33) % 1000) * ((x >> 20) % 80);
        ol_hist_add(&h, (int64_t)v[i]);
    }
    qsort(v, N, sizeof(v[0]), cmp_u64);
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        size_t rank = (size_t)(N * ps[k] / 100) < N ? (size_t)(N * ps[k] / 100) : N - 1;
        uint64_t got = ol_hist_percentile(&h, ps[k]);
        assert_true(got >= v[rank]);
        assert_true(got - v[rank] <= v[rank] / 128);
    }
    assert_true(ol_hist_percentile(&h, 100) == v[N - 1]);
    assert_true(h.max == v[N - 1]);
    assert_true(h.n == N);
}

/* A negative lag (a wake-up a little early) counts as none. */
static void test_histogram_takes_negative_values_as_zero(void **state)
{
    (void)state;
    static ol_hist_t h;

    memset(&h, 0, sizeof(h));
    ol_hist_add(&h, -5);
    assert_true(h.count[0] == 1);
    assert_true(ol_hist_percentile(&h, 99) == 0);
}

/* ol_due_by counts exactly the requests whose due time has come, at rates
 * whose periods are no whole number of nanoseconds, and the schedule ends
 * with every one of RATE x SECONDS due. */
static void test_schedule_counts_each_request_once(void **state)
{
    (void)state;
    static const double rates[] = { 15000, 12695, 333, 7.7, 1e6 / 3 };

    for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++) {
        double rate = rates[r];
        long total = (long)(2 * rate);
        assert_int_equal(ol_due_by(-1, rate, total), 0);
        assert_int_equal(ol_due_by(0, rate, total), 1);
        for (long i = 1; i < total; i++) {
            int64_t t = ol_due_ns(i, rate);
            assert_true(t > ol_due_ns(i - 1, rate));
            assert_int_equal(ol_due_by(t, rate, total), i + 1);
            assert_int_equal(ol_due_by(t - 1, rate, total), i);
        }
        assert_int_equal(ol_due_by(3 * NS, rate, total), total);
    }
}

/* An answer cut at every place into two pieces, the blank line too: the
 * head is found, the body counted, and the answer complete only with its
 * last byte. */
static void test_answer_split_anywhere_completes_at_its_end(void **state)
{
    (void)state;
    static const char answer[] = "HTTP/1.1 503 Busy\r\nServer: x\r\nContent-Length: 13\r\n\r\nhello, world\n";
    static conn_t c;
    size_t len = sizeof(answer) - 1;
    int sv[2];

    for (size_t cut = 1; cut < len; cut++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        c.fd = sv[1];
        c.due = 0;
        c.head_len = 0;
        c.length = -1;
        assert_int_equal(write(sv[0], answer, cut), (ssize_t)cut);
        assert_int_equal(on_readable(-1, &c), 0);
        assert_int_equal(write(sv[0], answer + cut, len - cut), (ssize_t)(len - cut));
        assert_int_equal(on_readable(-1, &c), 1);
        assert_int_equal(c.status, 503);
        assert_int_equal(c.length, 13);
        assert_int_equal(c.head_len, len - 13);
        assert_int_equal(c.body_left, 0);
        close(sv[0]);
        close(sv[1]);
    }
}

/* A head that never ends is dropped at HEAD_MAX, as a read error. */
static void test_endless_head_is_dropped(void **state)
{
    (void)state;
    static conn_t c;
    static char junk[HEAD_MAX];
    int sv[2];
    long before = errors.read;

    memset(junk, 'a', sizeof(junk));
    memcpy(junk, "HTTP/1.1 200 OK\r\n", 17);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    c.fd = sv[1];
    c.due = 0;
    c.head_len = 0;
    c.length = -1;
    for (size_t off = 0; off < sizeof(junk) && c.fd >= 0; off += 4000) {
        size_t n = sizeof(junk) - off < 4000 ? sizeof(junk) - off : 4000;
        assert_int_equal(write(sv[0], junk + off, n), (ssize_t)n);
        assert_int_equal(on_readable(-1, &c), 0);
    }
    assert_int_equal(c.fd, -1);
    assert_int_equal(errors.read, before + 1);
    close(sv[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histogram_buckets_are_ordered_and_narrow),
        cmocka_unit_test(test_percentiles_match_the_sorted_samples),
        cmocka_unit_test(test_histogram_takes_negative_values_as_zero),
        cmocka_unit_test(test_schedule_counts_each_request_once),
        cmocka_unit_test(test_answer_split_anywhere_completes_at_its_end),
        cmocka_unit_test(test_endless_head_is_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
