/*
 * The admin API's bearer token (server.admin.token_file): reading the file,
 * and the check of a request's Authorization header against it.
 * docs/admin-api.md, "Authentication", is the operator's guide and
 * docs/adr/0064-admin-bearer-token.md the decisions.
 *
 * Who needs it: a request on a loopback TCP listener, once a token_file is
 * set; the Unix socket's mode (0600) guards it instead, and the probes
 * (/healthz, /readyz) stay open (admin_api.h decides which endpoint needs
 * it, on the target it routes by).
 *
 * Caller: the config reader (sws_admin_token_read: at -t, start and every
 * reload, so the file is checked where its key is and read again to
 * rotate it), supervisor/admin.c (sws_admin_token_check), the unit and
 * fuzz tests. Pure functions but for the file read; no state.
 */
#ifndef SWS_SUPERVISOR_ADMIN_TOKEN_H
#define SWS_SUPERVISOR_ADMIN_TOKEN_H

#include <stddef.h>
#include <stdint.h>

/* A token is printable ASCII without spaces (what a header carries as it
 * is), of this many bytes: fewer could be guessed over loopback, where
 * nothing slows a client down. */
#define SWS_ADMIN_TOKEN_MIN 16u
#define SWS_ADMIN_TOKEN_MAX 512u

/* What a request's credentials are worth. */
typedef enum sws_admin_auth {
    SWS_ADMIN_AUTH_OK = 0,  /* the right token, or none needed */
    SWS_ADMIN_AUTH_MISSING, /* no Authorization header, or not "Bearer TOKEN" */
    SWS_ADMIN_AUTH_WRONG,   /* a bearer token, not the one configured */
} sws_admin_auth_t;

/* Read the token at path into out (SWS_ADMIN_TOKEN_MAX bytes) and *len:
 * 0, or -1 with a sentence that starts with path. Refused: a file that is
 * not regular, one whose mode lets group or others read or write it (any
 * of 077: it guards a root process), and a token that is empty, shorter
 * than SWS_ADMIN_TOKEN_MIN, longer than SWS_ADMIN_TOKEN_MAX or holds a
 * byte outside 0x21..0x7e. Trailing CR and LF bytes are not part of it
 * (editors and `echo` add them). Opened once: the mode checked is the
 * file's that is read. out is wiped on failure. */
int sws_admin_token_read(const char *path, uint8_t *out, size_t *len, char *err, size_t errlen);

/* The Authorization header's value (value NULL: no such header) against
 * token (token_len 0: a token_file whose token is unknown, so nothing
 * passes). The scheme is "Bearer", any case, then spaces, the token and
 * optional trailing spaces or tabs. */
sws_admin_auth_t sws_admin_token_check(const uint8_t *token, size_t token_len, const char *value,
                                       size_t value_len);

/* given == secret, in a time that depends on secret_len only: how far a
 * guess matches never shows in how long the answer takes. 0 when
 * secret_len is 0. */
int sws_admin_token_equal(const uint8_t *secret, size_t secret_len, const char *given,
                          size_t given_len);

#endif
