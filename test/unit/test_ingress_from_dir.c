/* ingressd/from_dir.c: objects from DIR/NAME.json, single or in a List,
 * delivered as one LIST per kind; a broken file delivers nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "ingressd/from_dir.h"
#include "ingressd/store.h"
#include "support/ingress_objects.h"

typedef struct dir {
    char path[64];
} dir_t;

static void put(dir_t *d, const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", d->path, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void dir_remove(dir_t *d, const char *const *names)
{
    char p[128];
    for (; *names != NULL; names++) {
        snprintf(p, sizeof(p), "%s/%s", d->path, *names);
        unlink(p);
    }
    rmdir(d->path);
}

#define PORTS "[{\"port\": 80}]"
#define SVC(name) "{\"kind\": \"Service\", \"apiVersion\": \"v1\", \"metadata\": {\"name\": \"" name "\", \"namespace\": \"default\"}, \"spec\": {\"ports\": [{\"port\": 80}]}}"

static void test_single_objects_and_lists(void **state)
{
    (void)state;
    dir_t d = { "/tmp/sws-from-dir-XXXXXX" };
    sws_ingress_store_t st;
    char err[256];
    size_t n;
    assert_non_null(mkdtemp(d.path));
    put(&d, "a.json", SVC("a"));
    put(&d, "b.json", "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [" SVC("b") ", "
                      "{\"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\", \"namespace\": \"default\"}},"
                      "{\"kind\": \"IngressClass\", \"metadata\": {\"name\": \"scalws\"}, "
                      "\"spec\": {\"controller\": \"scalws.io/ingress-controller\"}}]}");
    put(&d, "notes.txt", "not read");
    sws_ingress_store_init(&st);
    /* What the store held before and the files do not name is swept. */
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "gone", PORTS));
    assert_int_equal(sws_ingress_from_dir(d.path, sws_ingress_store_event, &st, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "a"));
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "b"));
    assert_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "gone"));
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_INGRESSCLASS, "", "scalws"));
    sws_ingress_store_free(&st);
    dir_remove(&d, (const char *const[]){ "a.json", "b.json", "notes.txt", NULL });
}

static void test_broken_file_delivers_nothing(void **state)
{
    (void)state;
    dir_t d = { "/tmp/sws-from-dir-XXXXXX" };
    sws_ingress_store_t st;
    char err[256];
    size_t n;
    assert_non_null(mkdtemp(d.path));
    put(&d, "a.json", SVC("a"));
    put(&d, "b.json", "{\"kind\": \"Service\",");
    sws_ingress_store_init(&st);
    /* Not even the LIST's end: it would sweep what the store holds. */
    KUPSERT(&st, SWS_KUBE_SERVICE, k_service("default", "kept", PORTS));
    assert_int_equal(sws_ingress_from_dir(d.path, sws_ingress_store_event, &st, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "b.json:1:"));
    assert_int_equal(n, 0);
    assert_int_equal(sws_ingress_store_count(&st, SWS_KUBE_SERVICE), 1);
    assert_non_null(sws_ingress_store_get(&st, SWS_KUBE_SERVICE, "default", "kept"));
    assert_int_equal(sws_ingress_from_dir("/nonexistent-dir", sws_ingress_store_event, &st, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/nonexistent-dir"));
    sws_ingress_store_free(&st);
    dir_remove(&d, (const char *const[]){ "a.json", "b.json", NULL });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_objects_and_lists),
        cmocka_unit_test(test_broken_file_delivers_nothing),
    };
    sws_log_init("test", 2, SWS_LOG_CRIT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
