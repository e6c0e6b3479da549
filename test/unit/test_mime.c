/* worker/mime.c: Content-Type by extension. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "worker/mime.h"

static void assert_type(const char *name, const char *want)
{
    sws_str_t t = sws_mime_type(name, strlen(name));
    if (t.len != strlen(want) || memcmp(t.p, want, t.len) != 0)
        fail_msg("%s: got \"%.*s\", want \"%s\"", name, (int)t.len, t.p, want);
}

static void test_common_extensions(void **state)
{
    (void)state;
    assert_type("index.html", "text/html; charset=utf-8");
    assert_type("a.htm", "text/html; charset=utf-8");
    assert_type("s.css", "text/css; charset=utf-8");
    assert_type("app.js", "text/javascript; charset=utf-8");
    assert_type("m.mjs", "text/javascript; charset=utf-8");
    assert_type("d.json", "application/json");
    assert_type("README.md", "text/markdown; charset=utf-8");
    assert_type("p.jpeg", "image/jpeg");
    assert_type("i.svg", "image/svg+xml");
    assert_type("f.woff2", "font/woff2");
    assert_type("f.woff", "font/woff");
    assert_type("m.wasm", "application/wasm");
    assert_type("app.js.map", "application/json");
    assert_type("v.webm", "video/webm");
}

static void test_extension_is_case_insensitive(void **state)
{
    (void)state;
    assert_type("PHOTO.PNG", "image/png");
    assert_type("Style.Css", "text/css; charset=utf-8");
}

static void test_only_last_extension_of_last_segment_counts(void **state)
{
    (void)state;
    assert_type("archive.tar.gz", "application/gzip");
    assert_type("docs/a.html/file", "application/octet-stream");
    assert_type("/srv/www.html/data.csv", "text/csv; charset=utf-8");
}

static void test_unknown_and_missing_extensions_are_octet_stream(void **state)
{
    (void)state;
    assert_type("Makefile", "application/octet-stream");
    assert_type("x.exe", "application/octet-stream");
    assert_type("trailing.", "application/octet-stream");
    assert_type(".html", "application/octet-stream"); /* a hidden file, no extension */
    assert_type("dir/.css", "application/octet-stream");
    assert_type("", "application/octet-stream");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_extensions),
        cmocka_unit_test(test_extension_is_case_insensitive),
        cmocka_unit_test(test_only_last_extension_of_last_segment_counts),
        cmocka_unit_test(test_unknown_and_missing_extensions_are_octet_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
