#include "core/tls_err.h"

#include <errno.h>
#include <string.h>

#include <openssl/err.h>

void sws_tls_err_reset(void)
{
    /* SSL_get_error reads the queue with the same peek: empty for it is
     * empty for this. */
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

const char *sws_tls_reason(const char *none)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
    sws_tls_err_reset();
    return r != NULL ? r : none;
}

ssize_t sws_tls_io_result(SSL *ssl, int r, int eof_errno, uint8_t *wants_write,
                          const char **why)
{
    int saved = errno;
    int e = SSL_get_error(ssl, r);
    const char *text;

    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        sws_tls_err_reset();
        if (wants_write != NULL)
            *wants_write = e == SSL_ERROR_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        sws_tls_err_reset();
        return 0;
    case SSL_ERROR_SYSCALL:
        sws_tls_err_reset();
        if (saved == 0 && eof_errno == 0)
            return 0;
        saved = saved != 0 ? saved : eof_errno;
        text = strerror(saved);
        break;
    default:
        text = sws_tls_reason("unknown error");
        saved = EPROTO;
        break;
    }
    if (why != NULL)
        *why = text;
    errno = saved;
    return -1;
}
