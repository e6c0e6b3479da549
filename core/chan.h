/*
 * The control channel between the supervisor and one worker: small typed
 * messages, each of which may carry open file descriptors.
 *
 * One SOCK_SEQPACKET socketpair per worker (sws_chan_pair), made by the
 * supervisor before the fork; the worker keeps one end, the supervisor the
 * other. A message is one datagram: a type, a body of at most
 * SWS_CHAN_MAX_BODY bytes and at most SWS_CHAN_MAX_FDS descriptors
 * (SCM_RIGHTS), so it arrives whole or not at all and never needs framing.
 * Neither side ever waits: sends fail with EAGAIN when the peer's queue is
 * full (a stuck worker), and the receiver reads from its event loop.
 *
 * Messages (add a type here, with who sends it and what it carries):
 *   SWS_CHAN_LOGS  supervisor -> worker. Body: struct sws_chan_logs. The
 *                  descriptors, in this order: the error log's when
 *                  SWS_CHAN_LOGS_ERROR is set, the access log's when
 *                  SWS_CHAN_LOGS_ACCESS is set. The worker writes what it
 *                  buffered to the old ones, then swaps (SIGUSR1, a reload
 *                  that moved the access log).
 *   SWS_CHAN_GENERATION  supervisor -> worker. No body, no descriptors.
 *                  A table generation was published: the message only wakes
 *                  an idle worker, whose wake-up adopts the generation (so
 *                  GET /v1/status shows every worker on it, and the old
 *                  arena is freed, without waiting for traffic).
 *   SWS_CHAN_ACCEPT  supervisor -> worker. No body, no descriptors. A
 *                  worker started in standby (a binary upgrade's new
 *                  generation, supervisor/upgrade.h) registers its
 *                  listening sockets now; until then it accepts nothing.
 *
 * The binary upgrade's socket (supervisor/upgrade.h) uses the same
 * transport with its own types.
 * Who may call: both processes; the descriptors are the caller's (the
 * socketpair's ends, and those sent, which stay open in the sender). A
 * received message's fds belong to the receiver, which must close those it
 * does not keep.
 */
#ifndef SWS_CORE_CHAN_H
#define SWS_CORE_CHAN_H

#include <stddef.h>
#include <stdint.h>

#define SWS_CHAN_MAX_BODY 256u
#define SWS_CHAN_MAX_FDS 64u /* a binary upgrade hands listening sockets over in batches */

enum sws_chan_type {
    SWS_CHAN_LOGS = 1,
    SWS_CHAN_GENERATION = 2,
    SWS_CHAN_ACCEPT = 3,
};

#define SWS_CHAN_LOGS_ERROR 1u  /* an error-log descriptor follows */
#define SWS_CHAN_LOGS_ACCESS 2u /* an access-log descriptor follows */

struct sws_chan_logs {
    uint32_t flags; /* SWS_CHAN_LOGS_* */
};

typedef struct sws_chan_msg {
    uint32_t type;
    size_t len;
    unsigned char body[SWS_CHAN_MAX_BODY];
    int fds[SWS_CHAN_MAX_FDS];
    unsigned nfds;
} sws_chan_msg_t;

/* A connected pair, both ends close-on-exec and non-blocking. 0, or -1
 * with a message in err. */
int sws_chan_pair(int ends[2], char *err, size_t errlen);

/* Send one message. 0, or -1 with a message in err (errno EAGAIN when
 * the peer's queue is full, EPIPE when it is gone). */
int sws_chan_send(int fd, uint32_t type, const void *body, size_t len, const int *fds,
                  unsigned nfds, char *err, size_t errlen);

/* Receive one message: 1 and *m filled, 0 when none is waiting, -1 when
 * the peer is gone (errno 0) or on an error (message in err). A message
 * that came with more descriptors than fit is refused (-1) and every
 * descriptor in it closed. */
int sws_chan_recv(int fd, sws_chan_msg_t *m, char *err, size_t errlen);

/* Close the descriptors of m that the receiver did not take (set to -1). */
void sws_chan_msg_close_fds(sws_chan_msg_t *m);

#endif
