/* core/map.c and core/hash.h: the hash map ingressd and the YAML reader
 * share, and the FNV-1a it hashes with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/hash.h"
#include "core/map.h"

#define KEYS 1000

/* The published FNV-1a 64 test vectors, and the incremental form. */
static void test_fnv1a_known_values(void **state)
{
    (void)state;
    assert_true(sws_fnv1a(SWS_FNV1A_INIT, "", 0) == 0xcbf29ce484222325ull);
    assert_true(sws_fnv1a(SWS_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(sws_fnv1a(SWS_FNV1A_INIT, "foobar", 6) == 0x85944171f73967e8ull);
    assert_true(sws_fnv1a(sws_fnv1a(SWS_FNV1A_INIT, "foo", 3), "bar", 3) ==
                sws_fnv1a(SWS_FNV1A_INIT, "foobar", 6));
}

static void test_put_get_replace(void **state)
{
    (void)state;
    sws_map_t m = { 0 };
    int a, b;
    assert_null(sws_map_get(&m, "x", 1));
    assert_null(sws_map_del(&m, "x", 1));
    assert_int_equal(sws_map_put(&m, "x", 1, &a), 0);
    assert_ptr_equal(sws_map_get(&m, "x", 1), &a);
    assert_int_equal(sws_map_put(&m, "x", 1, &b), 0);
    assert_ptr_equal(sws_map_get(&m, "x", 1), &b);
    assert_int_equal(m.n, 1);
    /* Keys are bytes with a length: a prefix is another key. */
    assert_null(sws_map_get(&m, "xy", 1 + 1));
    assert_null(sws_map_get(&m, "", 0));
    sws_map_free(&m);
    assert_int_equal(m.cap, 0);
}

/* Many keys make long probe runs; deleting every other one shifts the
 * rest back, and each survivor must still be found (no lookup stops at a
 * hole left in its run). */
static void test_delete_keeps_the_rest_reachable(void **state)
{
    (void)state;
    static char keys[KEYS][8];
    sws_map_t m = { 0 };
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        assert_int_equal(sws_map_put(&m, keys[i], strlen(keys[i]), keys[i]), 0);
    }
    assert_int_equal(m.n, KEYS);
    for (int i = 0; i < KEYS; i += 2)
        assert_ptr_equal(sws_map_del(&m, keys[i], strlen(keys[i])), keys[i]);
    assert_int_equal(m.n, KEYS / 2);
    for (int i = 0; i < KEYS; i++) {
        void *want = i % 2 ? keys[i] : NULL;
        if (sws_map_get(&m, keys[i], strlen(keys[i])) != want)
            fail_msg("%s: found %s", keys[i], want ? "nothing" : "a deleted key");
    }
    size_t it = 0, seen = 0;
    for (const sws_map_slot_t *s; (s = sws_map_next(&m, &it)) != NULL; seen++)
        assert_ptr_equal(s->val, s->key);
    assert_int_equal(seen, KEYS / 2);
    sws_map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv1a_known_values),
        cmocka_unit_test(test_put_get_replace),
        cmocka_unit_test(test_delete_keeps_the_rest_reachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
