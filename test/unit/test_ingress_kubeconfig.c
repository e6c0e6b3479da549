/* ingressd/kubeconfig.c: kubeconfigs as kind, kubeadm and a token-based
 * setup write them; every refusal names its file and key; the in-cluster
 * service account; the token file re-read when it changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ingressd/kubeconfig.h"

typedef struct fixture {
    char dir[64];
    char path[128];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_kubeconfig.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/config", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void write_file(const fixture_t *f, const char *name, const char *text)
{
    char path[192];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", f->dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* "CA PEM\n" and "CERT\n", "KEY\n" in base64. */
#define CA_B64 "Q0EgUEVNCg=="
#define CERT_B64 "Q0VSVAo="
#define KEY_B64 "S0VZCg=="

/* As `kind create cluster` writes it. */
static void test_kind_client_certificate(void **state)
{
    fixture_t *f = *state;
    sws_kube_conn_t c;
    char err[512];

    write_file(f, "config",
               "apiVersion: v1\n"
               "clusters:\n"
               "- cluster:\n"
               "    certificate-authority-data: " CA_B64 "\n"
               "    server: https://127.0.0.1:39457/\n"
               "  name: kind-kind\n"
               "contexts:\n"
               "- context:\n"
               "    cluster: kind-kind\n"
               "    user: kind-kind\n"
               "  name: kind-kind\n"
               "current-context: kind-kind\n"
               "kind: Config\n"
               "preferences: {}\n"
               "users:\n"
               "- name: kind-kind\n"
               "  user:\n"
               "    client-certificate-data: " CERT_B64 "\n"
               "    client-key-data: " KEY_B64 "\n");
    if (sws_kubeconfig_load(&c, f->path, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_string_equal(c.server, "https://127.0.0.1:39457");
    assert_int_equal(c.ca_len, 7);
    assert_memory_equal(c.ca_pem, "CA PEM\n", 7);
    assert_int_equal(c.cert_len, 5);
    assert_memory_equal(c.cert_pem, "CERT\n", 5);
    assert_memory_equal(c.key_pem, "KEY\n", 4);
    assert_null(c.token);
    assert_non_null(strstr(c.source, "context kind-kind"));
    sws_kube_conn_free(&c);
}

/* Several contexts, a CA file relative to the kubeconfig, a token; the
 * context named by the caller wins over current-context. */
static void test_token_ca_file_and_named_context(void **state)
{
    fixture_t *f = *state;
    sws_kube_conn_t c;
    char err[512];

    write_file(f, "ca.crt", "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n");
    write_file(f, "config",
               "apiVersion: v1\n"
               "kind: Config\n"
               "clusters:\n"
               "- name: prod\n"
               "  cluster: {server: 'https://prod.example:6443', certificate-authority: ca.crt}\n"
               "- name: dev\n"
               "  cluster:\n"
               "    server: https://[::1]:6443\n"
               "    certificate-authority: ca.crt\n"
               "    extensions: [{name: x, extension: {a: 1}}]\n"
               "contexts:\n"
               "- name: prod\n"
               "  context: {cluster: prod, user: admin}\n"
               "- name: dev\n"
               "  context: {cluster: dev, user: ingressd, namespace: web}\n"
               "current-context: prod\n"
               "users:\n"
               "- name: admin\n"
               "  user: {token: admintoken}\n"
               "- name: ingressd\n"
               "  user:\n"
               "    token: \"eyJhbGciOiJSUzI1NiJ9.e30.sig\"\n");
    if (sws_kubeconfig_load(&c, f->path, "dev", err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_string_equal(c.server, "https://[::1]:6443");
    assert_string_equal(c.token, "eyJhbGciOiJSUzI1NiJ9.e30.sig");
    assert_int_equal(c.ca_len, 56);
    assert_null(c.token_file);
    sws_kube_conn_free(&c);

    if (sws_kubeconfig_load(&c, f->path, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_string_equal(c.server, "https://prod.example:6443");
    assert_string_equal(c.token, "admintoken");
    sws_kube_conn_free(&c);
}

/* A tokenFile (relative) is read at load and again when it changes. */
static void test_token_file_reread_when_it_changes(void **state)
{
    fixture_t *f = *state;
    sws_kube_conn_t c;
    char err[512], path[192];

    write_file(f, "token", "first-token\n");
    write_file(f, "config",
               "current-context: c\n"
               "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
               "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
               "users: [{name: u, user: {tokenFile: token}}]\n");
    if (sws_kubeconfig_load(&c, f->path, NULL, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    snprintf(path, sizeof(path), "%s/token", f->dir);
    assert_string_equal(c.token_file, path);
    assert_string_equal(c.token, "first-token");
    assert_null(c.ca_pem);
    assert_int_equal(sws_kube_conn_refresh_token(&c, err, sizeof(err)), 0);

    /* The kubelet replaces the file (a new inode through ..data). */
    write_file(f, "token.new", "second-token-rotated\n");
    snprintf(path, sizeof(path), "%s/token.new", f->dir);
    char old[192];
    snprintf(old, sizeof(old), "%s/token", f->dir);
    assert_int_equal(rename(path, old), 0);
    assert_int_equal(sws_kube_conn_refresh_token(&c, err, sizeof(err)), 1);
    assert_string_equal(c.token, "second-token-rotated");

    /* A file gone: an error, and the token read before stays. */
    assert_int_equal(unlink(old), 0);
    assert_int_equal(sws_kube_conn_refresh_token(&c, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "/token"));
    assert_string_equal(c.token, "second-token-rotated");
    sws_kube_conn_free(&c);
}

#define HEAD "current-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"

static void test_refusals_name_file_and_key(void **state)
{
    fixture_t *f = *state;
    static const struct {
        const char *yaml;
        const char *want;
    } cases[] = {
        { "clusters: []\n", "no current-context" },
        { "current-context: other\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n",
          "contexts: no entry named \"other\"" },
        { HEAD "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
               "users: [{name: u, user: {token: t}}]\n",
          "clusters[0].cluster.server: the server must be an https:// URL" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1', "
               "insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t}}]\n",
          "clusters[0].cluster.insecure-skip-tls-verify: refused" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1'}}]\n"
               "users: [{name: x, user: {token: t}}, {name: u, user: {exec: {command: aws}}}]\n",
          "users[1].user.exec: not supported" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1', "
               "certificate-authority-data: '!!!'}}]\nusers: [{name: u, user: {token: t}}]\n",
          "clusters[0].cluster.certificate-authority-data: not base64" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1', "
               "certificate-authority: missing.crt}}]\nusers: [{name: u, user: {token: t}}]\n",
          "clusters[0].cluster.certificate-authority: /tmp/" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1'}}]\n"
               "users: [{name: u, user: {}}]\n",
          "users[0].user: no credentials" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1'}}]\n"
               "users: [{name: u, user: {token: t, tokenFile: f}}]\n",
          "token and tokenFile both given" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1'}}]\n"
               "users: [{name: u, user: {client-certificate-data: " CERT_B64 "}}]\n",
          "needs its key" },
        { HEAD "clusters: [{name: k, cluster: {server: 'https://a:1'}}]\n"
               "users: [{name: u, user: {token: 'a b'}}]\n",
          "users[0].user.token: empty, or not a bearer token" },
        { HEAD "clusters: [{name: k, cluster: {server: [x]}}]\n",
          "clusters[0].cluster.server: expected a string" },
        { HEAD "clusters:\n  - name: k\n\tcluster: {}\n", ":5:1: expected spaces, got a tab" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sws_kube_conn_t c;
        char err[512] = "";
        write_file(f, "config", cases[i].yaml);
        assert_int_equal(sws_kubeconfig_load(&c, f->path, NULL, err, sizeof(err)), -1);
        if (strstr(err, cases[i].want) == NULL || strncmp(err, f->path, strlen(f->path)) != 0)
            fail_msg("case %zu: \"%s\" does not start with the file and say \"%s\"", i, err,
                     cases[i].want);
        assert_null(c.server);
    }
}

static void test_missing_file(void **state)
{
    fixture_t *f = *state;
    sws_kube_conn_t c;
    char err[512];

    assert_int_equal(sws_kubeconfig_load(&c, f->path, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot open the kubeconfig"));
}

static void test_in_cluster(void **state)
{
    fixture_t *f = *state;
    sws_kube_conn_t c;
    char err[512];

    write_file(f, "ca.crt", "CA\n");
    write_file(f, "token", "sa-token\n");
    write_file(f, "namespace", "ingress\n");
    if (sws_kube_conn_incluster(&c, "10.96.0.1", "443", f->dir, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.token, "sa-token");
    assert_int_equal(c.ca_len, 3);
    assert_non_null(c.token_file);
    sws_kube_conn_free(&c);

    if (sws_kube_conn_incluster(&c, "fd00::1", "6443", f->dir, err, sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_string_equal(c.server, "https://[fd00::1]:6443");
    sws_kube_conn_free(&c);

    assert_int_equal(sws_kube_conn_incluster(&c, NULL, NULL, f->dir, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
    assert_int_equal(sws_kube_conn_incluster(&c, "h", "44x", f->dir, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "is not a port"));

    char path[192];
    snprintf(path, sizeof(path), "%s/token", f->dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(sws_kube_conn_incluster(&c, "h", "443", f->dir, err, sizeof(err)), -1);
    assert_non_null(strstr(err, path));
    assert_null(c.ca_pem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kind_client_certificate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_ca_file_and_named_context, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_file_reread_when_it_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_name_file_and_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
