/*
 * One admin API request, read with llhttp (as the workers read theirs):
 * bytes in, and once the message is complete its method, target and body.
 *
 * One request per connection: the response closes it (admin clients are
 * curl and scripts sending a few requests; keep-alive would bring idle
 * timers and pipelining rules to the supervisor for no gain). So whatever
 * follows the first message is ignored.
 *
 * Bounded: the whole request (head and body) is at most
 * SWS_ADMIN_MAX_REQUEST bytes, the target SWS_ADMIN_MAX_TARGET, the body
 * SWS_ADMIN_MAX_BODY; past a bound the request fails with 413 or 414, so a
 * client cannot make the supervisor hold more than that per connection.
 *
 * Of the headers only Authorization is kept (admin_token.h checks it):
 * past SWS_ADMIN_MAX_AUTHORIZATION bytes the request fails with 431, and
 * a second one with 400 (which one would count is ambiguous).
 *
 * Caller: the supervisor (supervisor/admin.c), and the unit and fuzz
 * tests. The struct is the caller's (embedded in its connection).
 */
#ifndef SWS_SUPERVISOR_ADMIN_HTTP_H
#define SWS_SUPERVISOR_ADMIN_HTTP_H

#include <llhttp.h>
#include <stddef.h>

#define SWS_ADMIN_MAX_REQUEST (16u << 10)
#define SWS_ADMIN_MAX_TARGET 1024u
#define SWS_ADMIN_MAX_BODY 4096u
/* "Bearer ", a token (admin_token.h's bound) and room for spaces. */
#define SWS_ADMIN_MAX_AUTHORIZATION 1024u

typedef enum sws_admin_req_state {
    SWS_ADMIN_REQ_MORE = 0, /* give more bytes */
    SWS_ADMIN_REQ_DONE,     /* method, target and body are set */
    SWS_ADMIN_REQ_ERROR,    /* status and why are set: answer and close */
} sws_admin_req_state_t;

typedef struct sws_admin_req {
    llhttp_t parser;
    sws_admin_req_state_t state;
    size_t total;                     /* bytes fed */
    const char *method;               /* "GET", ... (llhttp's name) once DONE */
    char target[SWS_ADMIN_MAX_TARGET + 1]; /* NUL-terminated */
    size_t target_len;
    char body[SWS_ADMIN_MAX_BODY];
    size_t body_len;
    char authorization[SWS_ADMIN_MAX_AUTHORIZATION]; /* its value, not NUL-terminated */
    size_t authorization_len;
    int has_authorization;            /* the header came (its value may be empty) */
    int in_authorization;             /* reading its value */
    int in_trailers;                  /* the head is read: names now are trailers' */
    char field[16];                   /* the header name being read, its first bytes */
    size_t field_len;                 /* its whole length */
    unsigned status;                  /* ERROR: 400, 413, 414 or 431 */
    const char *why;                  /* ERROR: a static sentence */
} sws_admin_req_t;

void sws_admin_req_init(sws_admin_req_t *r);

/* Feed the next n bytes; returns the state (unchanged once DONE or
 * ERROR: later bytes are ignored). eof: the client ended its side, so a
 * request still incomplete is an ERROR (400). */
sws_admin_req_state_t sws_admin_req_feed(sws_admin_req_t *r, const char *p, size_t n);
sws_admin_req_state_t sws_admin_req_eof(sws_admin_req_t *r);

#endif
