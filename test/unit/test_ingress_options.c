/* ingressd/options.c: the agreed flags, their defaults, and one clear
 * sentence for each kind of bad command line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "ingressd/options.h"
#include "ingressd/store.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof(*(a))) - 1)

static void test_defaults(void **state)
{
    (void)state;
    char *argv[] = { "ingressd", NULL }, err[256];
    sws_ingressd_options_t o;
    assert_int_equal(sws_ingressd_options_parse(ARGC(argv), argv, &o, err, sizeof(err)), 0);
    assert_null(o.kubeconfig);
    assert_null(o.namespace_);
    assert_string_equal(o.ingress_class, "scalws");
    assert_string_equal(o.publish, "ipc:///run/scalws/routes.sock");
    assert_null(o.health);
    assert_null(o.from_dir);
    assert_int_equal(o.log_level, SWS_LOG_INFO);
}

static void test_every_flag(void **state)
{
    (void)state;
    char *argv[] = { "ingressd", "--kubeconfig", "/k/config", "--namespace", "shop",
                     "--ingress-class=edge", "--publish", "tcp://127.0.0.1:5555",
                     "--health", "127.0.0.1:8081", "--from-dir", "/tmp/objs", "--print",
                     "--log-level", "debug", NULL };
    char err[256];
    sws_ingressd_options_t o;
    assert_int_equal(sws_ingressd_options_parse(ARGC(argv), argv, &o, err, sizeof(err)), 0);
    assert_string_equal(o.kubeconfig, "/k/config");
    assert_string_equal(o.namespace_, "shop");
    assert_string_equal(o.ingress_class, "edge");
    assert_string_equal(o.publish, "tcp://127.0.0.1:5555");
    assert_string_equal(o.health, "127.0.0.1:8081");
    assert_string_equal(o.from_dir, "/tmp/objs");
    assert_true(o.print);
    assert_int_equal(o.log_level, SWS_LOG_DEBUG);
}

static void test_bad_command_lines_say_why(void **state)
{
    (void)state;
    static const struct {
        const char *args[4];
        const char *why;
    } cases[] = {
        { { "--bogus" }, "unknown option --bogus" },
        { { "-x" }, "unknown option -x" },
        { { "--health" }, "--health needs a value" },
        { { "--health", "localhost" }, "--health: expected HOST:PORT" },
        { { "--namespace", "Shop_1" }, "--namespace: expected a namespace name" },
        { { "--ingress-class", "" }, "--ingress-class: expected an IngressClass name" },
        { { "--publish", "/run/x.sock" }, "--publish: \"/run/x.sock\": unknown transport" },
        { { "--publish", "ipc://run/x.sock" }, "--publish: \"ipc://run/x.sock\": an ipc path must "
                                               "be absolute" },
        { { "--publish", "tcp://10.0.0.1:5555" }, "--publish: \"tcp://10.0.0.1:5555\": not a "
                                                  "loopback address" },
        { { "--log-level", "loud" }, "--log-level: expected debug" },
        { { "--print" }, "--print needs --from-dir" },
        { { "--from-dir", "/tmp/objs" }, "--from-dir needs --print" },
        { { "extra" }, "unexpected argument \"extra\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char *argv[6] = { "ingressd" }, err[256] = "";
        int argc = 1;
        sws_ingressd_options_t o;
        for (int a = 0; a < 4 && cases[i].args[a] != NULL; a++)
            argv[argc++] = (char *)cases[i].args[a];
        assert_int_equal(sws_ingressd_options_parse(argc, argv, &o, err, sizeof(err)), -1);
        if (strstr(err, cases[i].why) == NULL)
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, err, cases[i].why);
    }
}

static void test_help_and_version(void **state)
{
    (void)state;
    char *argv[] = { "ingressd", "--help", "-v", NULL }, err[256];
    sws_ingressd_options_t o;
    assert_int_equal(sws_ingressd_options_parse(ARGC(argv), argv, &o, err, sizeof(err)), 0);
    assert_true(o.help);
    assert_true(o.version);
    assert_non_null(strstr(sws_ingressd_usage, "--ingress-class NAME"));
    assert_non_null(strstr(sws_ingressd_usage, SWS_INGRESS_CONTROLLER));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_flag),
        cmocka_unit_test(test_bad_command_lines_say_why),
        cmocka_unit_test(test_help_and_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
