/* supervisor/ingress_merge.c: the file's routes and ingressd's, merged:
 * the file wins every name it claims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "shm/routeset_check.h"
#include "supervisor/ingress_merge.h"
#include "support/routeset_build.h"

static void host_proxy(Sws__Host *h, const char *path, const char *pool)
{
    Sws__Route *r = host_route(h, SWS__ROUTE__MATCH__PREFIX, path);
    r->action_case = SWS__ROUTE__ACTION_PROXY;
    r->proxy = NEW(Sws__Proxy, SWS__PROXY__INIT);
    r->proxy->pool = strdup(pool);
}

static const char *const *names_of(const Sws__RouteSet *rs, size_t h)
{
    return (const char *const *)rs->hosts[h]->names;
}

static void test_file_host_names_win(void **state)
{
    (void)state;
    Sws__RouteSet *file = rs_new(), *ing = rs_new();
    host_respond(rs_host(file, "www.example"), SWS__ROUTE__MATCH__PREFIX, "/", "file");
    host_respond(rs_host(ing, "app.example WWW.example."), SWS__ROUTE__MATCH__PREFIX, "/", "i1");
    host_respond(rs_host(ing, "www.example"), SWS__ROUTE__MATCH__PREFIX, "/", "i2");
    host_respond(rs_host(ing, "api.example"), SWS__ROUTE__MATCH__PREFIX, "/", "i3");
    sws_ingress_merge_t m;
    assert_int_equal(sws_ingress_merge(file, ing, &m), 0);
    assert_int_equal(m.rs.n_hosts, 3);
    assert_ptr_equal(m.rs.hosts[0], file->hosts[0]);
    /* The name the file serves left the ingress host; the rest stays. */
    assert_int_equal(m.rs.hosts[1]->n_names, 1);
    assert_string_equal(names_of(&m.rs, 1)[0], "app.example");
    assert_ptr_equal(m.rs.hosts[1]->routes, ing->hosts[0]->routes);
    assert_int_equal(ing->hosts[0]->n_names, 2); /* untouched */
    assert_ptr_equal(m.rs.hosts[2], ing->hosts[2]);
    assert_int_equal(m.shadowed_names, 2);
    assert_int_equal(m.dropped_hosts, 1);
    assert_ptr_equal(m.rs.settings, file->settings);
    sws_routeset_refusal_t why;
    if (sws_routeset_check(&m.rs, &why) != 0)
        fail_msg("%s: %s", why.path, why.msg);
    sws_ingress_merge_free(&m);
    sws__route_set__free_unpacked(file, NULL);
    sws__route_set__free_unpacked(ing, NULL);
}

static void test_pool_named_like_the_files_is_not_served(void **state)
{
    (void)state;
    Sws__RouteSet *file = rs_new(), *ing = rs_new();
    rs_pool(file, "app");
    host_proxy(rs_host(file, "file.example"), "/", "app");
    rs_pool(ing, "app");
    rs_pool(ing, "ns.svc.80");
    host_proxy(rs_host(ing, "a.example"), "/", "app");
    host_proxy(rs_host(ing, "b.example"), "/", "ns.svc.80");
    sws_ingress_merge_t m;
    assert_int_equal(sws_ingress_merge(file, ing, &m), 0);
    assert_int_equal(m.rs.n_pools, 2);
    assert_ptr_equal(m.rs.pools[0], file->pools[0]);
    assert_ptr_equal(m.rs.pools[1], ing->pools[1]);
    assert_int_equal(m.shadowed_pools, 1);
    /* a.example would have reached the file's pool. */
    assert_int_equal(m.rs.n_hosts, 2);
    assert_string_equal(names_of(&m.rs, 1)[0], "b.example");
    assert_int_equal(m.dropped_hosts, 1);
    sws_ingress_merge_free(&m);
    sws__route_set__free_unpacked(file, NULL);
    sws__route_set__free_unpacked(ing, NULL);
}

static void test_no_ingress_yet_is_the_file(void **state)
{
    (void)state;
    Sws__RouteSet *file = rs_new();
    host_respond(rs_host(file, "*"), SWS__ROUTE__MATCH__PREFIX, "/", "file");
    sws_ingress_merge_t m;
    assert_int_equal(sws_ingress_merge(file, NULL, &m), 0);
    assert_int_equal(m.rs.n_hosts, 1);
    assert_int_equal(m.rs.n_pools, 0);
    assert_null(m.first_shadowed);
    sws_ingress_merge_free(&m);
    sws__route_set__free_unpacked(file, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_host_names_win),
        cmocka_unit_test(test_pool_named_like_the_files_is_not_served),
        cmocka_unit_test(test_no_ingress_yet_is_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
