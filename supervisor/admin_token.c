#include "supervisor/admin_token.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"
#include "core/str.h"

#define BEARER "Bearer"

/* The bytes a token may hold: visible ASCII, as a header value carries it
 * unquoted and a shell variable without quoting surprises. */
static int is_token_byte(uint8_t c)
{
    return c >= 0x21 && c <= 0x7e;
}

/* The token in buf[0..n), its trailing CR/LF dropped: 0 and *len, or -1. */
static int token_check(const char *path, const uint8_t *buf, size_t n, size_t *len, char *err,
                       size_t errlen)
{
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n == 0)
        return sws_errf(err, errlen, "%s: empty; write a token of %u to %u printable "
                        "characters into it (openssl rand -hex 32)", path, SWS_ADMIN_TOKEN_MIN,
                        SWS_ADMIN_TOKEN_MAX);
    if (n > SWS_ADMIN_TOKEN_MAX)
        return sws_errf(err, errlen, "%s: longer than a token of %u bytes", path,
                        SWS_ADMIN_TOKEN_MAX);
    for (size_t i = 0; i < n; i++) {
        if (!is_token_byte(buf[i]))
            return sws_errf(err, errlen, "%s: byte %zu of the token is a space or a control "
                            "character; a token is printable ASCII without spaces", path, i + 1);
    }
    if (n < SWS_ADMIN_TOKEN_MIN)
        return sws_errf(err, errlen, "%s: a token of %zu bytes is too easy to guess; it needs "
                        "at least %u (openssl rand -hex 32)", path, n, SWS_ADMIN_TOKEN_MIN);
    *len = n;
    return 0;
}

int sws_admin_token_read(const char *path, uint8_t *out, size_t *len, char *err, size_t errlen)
{
    /* A token, its CRLF and one byte more: a longer file is refused
     * without reading it all. */
    uint8_t buf[SWS_ADMIN_TOKEN_MAX + 3];
    size_t n = 0;
    struct stat st;
    int rc = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return sws_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0) {
        sws_errf(err, errlen, "%s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        sws_errf(err, errlen, "%s: not a regular file", path);
    } else if ((st.st_mode & 077) != 0) {
        /* Whoever reads it may change pools and upgrade the server; whoever
         * writes it may choose the token. */
        sws_errf(err, errlen, "%s: mode %04o lets group or others at it; chmod 600 it",
                 path, (unsigned)(st.st_mode & 07777));
    } else {
        for (;;) {
            ssize_t got = read(fd, buf + n, sizeof(buf) - n);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0) {
                sws_errf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
                break;
            }
            n += (size_t)got;
            if (got == 0 || n == sizeof(buf)) {
                rc = 0;
                break;
            }
        }
    }
    close(fd);
    if (rc == 0 && n == sizeof(buf))
        rc = sws_errf(err, errlen, "%s: longer than a token of %u bytes", path,
                      SWS_ADMIN_TOKEN_MAX);
    if (rc == 0)
        rc = token_check(path, buf, n, len, err, errlen);
    if (rc == 0)
        memcpy(out, buf, *len);
    else
        explicit_bzero(out, SWS_ADMIN_TOKEN_MAX);
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

int sws_admin_token_equal(const uint8_t *secret, size_t secret_len, const char *given,
                          size_t given_len)
{
    if (secret_len == 0)
        return 0;
    /* volatile: the compiler may not stop at the first difference. The
     * loop runs over the secret whatever was given; which bytes of given
     * are read depends on its own length, which its sender knows. */
    volatile uint8_t diff = secret_len != given_len;
    for (size_t i = 0; i < secret_len; i++)
        diff |= secret[i] ^ (uint8_t)(i < given_len ? given[i] : 0);
    return diff == 0;
}

sws_admin_auth_t sws_admin_token_check(const uint8_t *token, size_t token_len, const char *value,
                                       size_t value_len)
{
    size_t scheme = sizeof(BEARER) - 1, at = scheme;
    if (value == NULL || value_len <= scheme || value[scheme] != ' ' ||
        !sws_str_caseeq_lit((sws_str_t){ value, scheme }, BEARER))
        return SWS_ADMIN_AUTH_MISSING;
    while (at < value_len && value[at] == ' ')
        at++;
    size_t end = value_len;
    while (end > at && (value[end - 1] == ' ' || value[end - 1] == '\t'))
        end--;
    if (end == at)
        return SWS_ADMIN_AUTH_MISSING;
    return sws_admin_token_equal(token, token_len, value + at, end - at) ? SWS_ADMIN_AUTH_OK
                                                                         : SWS_ADMIN_AUTH_WRONG;
}
