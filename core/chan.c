#include "core/chan.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/err.h"

int sws_chan_pair(int ends[2], char *err, size_t errlen)
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ends) < 0)
        return sws_errf(err, errlen, "control socketpair: %s", strerror(errno));
    return 0;
}

int sws_chan_send(int fd, uint32_t type, const void *body, size_t len, const int *fds,
                  unsigned nfds, char *err, size_t errlen)
{
    if (len > SWS_CHAN_MAX_BODY || nfds > SWS_CHAN_MAX_FDS)
        return sws_errf(err, errlen, "control message too large");
    struct iovec iov[2] = {
        { &type, sizeof(type) },
        { (void *)body, len },
    };
    union {
        char buf[CMSG_SPACE(sizeof(int) * SWS_CHAN_MAX_FDS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1 };
    if (nfds > 0) {
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    ssize_t n;
    do {
        n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return sws_errf(err, errlen, "control message: %s", strerror(errno));
    return 0;
}

void sws_chan_msg_close_fds(sws_chan_msg_t *m)
{
    for (unsigned i = 0; i < m->nfds; i++) {
        if (m->fds[i] >= 0)
            close(m->fds[i]);
        m->fds[i] = -1;
    }
}

int sws_chan_recv(int fd, sws_chan_msg_t *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    struct iovec iov[2] = {
        { &m->type, sizeof(m->type) },
        { m->body, sizeof(m->body) },
    };
    union {
        char buf[CMSG_SPACE(sizeof(int) * SWS_CHAN_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf) };
    ssize_t n;
    do {
        n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n < 0)
        return sws_errf(err, errlen, "control channel: %s", strerror(errno));
    if (n == 0) {
        sws_errf(err, errlen, "control channel: the peer is gone");
        errno = 0;
        return -1;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count && m->nfds < SWS_CHAN_MAX_FDS; i++)
            memcpy(&m->fds[m->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    if ((mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) || (size_t)n < sizeof(m->type)) {
        sws_chan_msg_close_fds(m);
        m->nfds = 0;
        return sws_errf(err, errlen, "control channel: a malformed message");
    }
    m->len = (size_t)n - sizeof(m->type);
    return 1;
}
