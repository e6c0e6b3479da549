/* supervisor/admin_token.c: the token file's rules (mode, length, bytes,
 * the trailing newline), the Authorization header's reading and the
 * comparison, which must tell every near miss from the token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/admin_token.h"

#define TOKEN "0123456789abcdef0123456789abcdef"
#define TOKEN_LEN (sizeof(TOKEN) - 1)

typedef struct fixture {
    char dir[64];
    char path[128];
    uint8_t token[SWS_ADMIN_TOKEN_MAX];
    size_t len;
    char err[512];
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/sws-token-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/token", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The token file holds n bytes of text with mode. */
static void write_file(fixture_t *f, const char *text, size_t n, mode_t mode)
{
    unlink(f->path);
    int fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static int read_token(fixture_t *f, const char *text, mode_t mode)
{
    write_file(f, text, strlen(text), mode);
    f->len = 0;
    f->err[0] = '\0';
    return sws_admin_token_read(f->path, f->token, &f->len, f->err, sizeof(f->err));
}

/* Refused, with a sentence that names the file and says why. */
static void refused(fixture_t *f, const char *text, mode_t mode, const char *why)
{
    assert_int_equal(read_token(f, text, mode), -1);
    assert_int_equal(strncmp(f->err, f->path, strlen(f->path)), 0);
    if (strstr(f->err, why) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", f->err, why);
}

static void test_a_file_of_mode_0600_or_0400_is_read_without_its_newline(void **state)
{
    fixture_t *f = *state;
    static const char *const texts[] = { TOKEN, TOKEN "\n", TOKEN "\r\n", TOKEN "\n\n" };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        for (mode_t mode = 0400; mode <= 0600; mode += 0200) {
            assert_int_equal(read_token(f, texts[i], mode), 0);
            assert_int_equal(f->len, TOKEN_LEN);
            assert_memory_equal(f->token, TOKEN, TOKEN_LEN);
        }
    }
}

static void test_group_or_world_access_is_refused(void **state)
{
    fixture_t *f = *state;
    static const mode_t modes[] = { 0640, 0604, 0644, 0620, 0602, 0610 };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        refused(f, TOKEN, modes[i], "lets group or others at it; chmod 600 it");
    /* Nothing of the token is left in out. */
    for (size_t i = 0; i < sizeof(f->token); i++)
        assert_int_equal(f->token[i], 0);
}

static void test_bad_tokens_are_refused(void **state)
{
    fixture_t *f = *state;
    refused(f, "", 0600, "empty");
    refused(f, "\n", 0600, "empty");
    refused(f, "0123456789abcde", 0600, "a token of 15 bytes is too easy to guess");
    refused(f, "0123456789 abcdef", 0600, "byte 11 of the token is a space");
    refused(f, "0123456789abcdef\x01", 0600, "byte 17 of the token");
    refused(f, "\xc3\xa9" "0123456789abcdef", 0600, "byte 1 of the token");
    char big[SWS_ADMIN_TOKEN_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    refused(f, big, 0600, "longer than a token of 512 bytes");
    big[sizeof(big) - 2] = '\n';
    assert_int_equal(read_token(f, big, 0600), 0);
    assert_int_equal(f->len, SWS_ADMIN_TOKEN_MAX);
    /* A long file is refused whatever its end: only its start is read. */
    char huge[4096];
    memset(huge, 'a', sizeof(huge) - 1);
    memset(huge + SWS_ADMIN_TOKEN_MAX, '\n', 3);
    huge[sizeof(huge) - 1] = '\0';
    refused(f, huge, 0600, "longer than a token");
}

static void test_what_is_not_a_readable_file_is_refused(void **state)
{
    fixture_t *f = *state;
    char err[512];
    size_t len;
    assert_int_equal(sws_admin_token_read(f->dir, f->token, &len, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not a regular file"));
    unlink(f->path);
    assert_int_equal(sws_admin_token_read(f->path, f->token, &len, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "cannot open: No such file or directory"));
}

static sws_admin_auth_t check(const char *value)
{
    return sws_admin_token_check((const uint8_t *)TOKEN, TOKEN_LEN, value,
                                 value != NULL ? strlen(value) : 0);
}

static void test_the_bearer_scheme_and_the_token_are_read(void **state)
{
    (void)state;
    assert_int_equal(check("Bearer " TOKEN), SWS_ADMIN_AUTH_OK);
    assert_int_equal(check("bearer " TOKEN), SWS_ADMIN_AUTH_OK);
    assert_int_equal(check("BEARER   " TOKEN " \t"), SWS_ADMIN_AUTH_OK);
    assert_int_equal(check(NULL), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check(""), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Bearer"), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Bearer   "), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Bearer\t" TOKEN), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Basic " TOKEN), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Bearerx " TOKEN), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check(TOKEN), SWS_ADMIN_AUTH_MISSING);
    assert_int_equal(check("Bearer " TOKEN "x"), SWS_ADMIN_AUTH_WRONG);
    assert_int_equal(check("Bearer " TOKEN " x"), SWS_ADMIN_AUTH_WRONG);
    assert_int_equal(check("Bearer x"), SWS_ADMIN_AUTH_WRONG);
    /* A token_file whose token is unknown lets nothing through. */
    assert_int_equal(sws_admin_token_check((const uint8_t *)"", 0, "Bearer x", 8),
                     SWS_ADMIN_AUTH_WRONG);
}

static void test_every_near_miss_differs(void **state)
{
    (void)state;
    const uint8_t *secret = (const uint8_t *)TOKEN;
    char given[TOKEN_LEN + 2];
    memcpy(given, TOKEN, TOKEN_LEN);
    assert_true(sws_admin_token_equal(secret, TOKEN_LEN, given, TOKEN_LEN));
    /* One byte off, at each place and by each bit. */
    for (size_t i = 0; i < TOKEN_LEN; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            given[i] = (char)(TOKEN[i] ^ (1u << bit));
            assert_false(sws_admin_token_equal(secret, TOKEN_LEN, given, TOKEN_LEN));
        }
        given[i] = TOKEN[i];
    }
    /* Every prefix, and the token with a byte more (a NUL too). */
    for (size_t n = 0; n < TOKEN_LEN; n++)
        assert_false(sws_admin_token_equal(secret, TOKEN_LEN, given, n));
    given[TOKEN_LEN] = 'x';
    assert_false(sws_admin_token_equal(secret, TOKEN_LEN, given, TOKEN_LEN + 1));
    given[TOKEN_LEN] = '\0';
    assert_false(sws_admin_token_equal(secret, TOKEN_LEN, given, TOKEN_LEN + 1));
    /* No secret matches nothing. */
    assert_false(sws_admin_token_equal(secret, 0, given, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_a_file_of_mode_0600_or_0400_is_read_without_its_newline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_or_world_access_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_tokens_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_what_is_not_a_readable_file_is_refused, setup,
                                        teardown),
        cmocka_unit_test(test_the_bearer_scheme_and_the_token_are_read),
        cmocka_unit_test(test_every_near_miss_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
