/*
 * bench/uring/relay.c: a minimal keep-alive TCP relay, for one experiment
 * only (docs/benchmarks/2026-12-02-io-uring-relay.md). NOT part of ScalWS:
 * the product neither builds nor links it, and it does no HTTP at all.
 *
 *     relay --port PORT --backend-port BPORT --io epoll|uring
 *           [--recv multi|single] [--wait N [--wait-us US]]
 *
 * One process, one thread. It listens on 127.0.0.1:PORT; for each client
 * connection it accepts it opens one connection to 127.0.0.1:BPORT and
 * relays bytes both ways as they come, unparsed (no HTTP parsing, no
 * routing, no headers added): in steady state a keep-alive request through
 * it costs the four system calls a proxy's keep-alive request costs (read
 * the client, write upstream, read upstream, write the client), which is
 * what the experiment compares; a real proxy adds its parser and its
 * routing (user time) to that.
 *
 * The two I/O modes share everything else (the listener, the backend
 * connect, the close rules):
 *
 *   --io epoll  epoll_wait + read/write on nonblocking sockets, each
 *               registered once edge-triggered (EPOLLIN | EPOLLOUT |
 *               EPOLLRDHUP | EPOLLET), one 16 KiB buffer per direction, as
 *               ScalWS's worker registers its connections. A read shorter
 *               than the buffer is taken as "drained" (no read to EAGAIN:
 *               the next arrival raises a new edge); a peer's FIN is seen
 *               by EPOLLRDHUP, after which reads go on to the 0.
 *   --io uring  liburing, one ring set up with IORING_SETUP_SINGLE_ISSUER |
 *               IORING_SETUP_DEFER_TASKRUN (else COOP_TASKRUN, else none:
 *               printed at start), its fd registered; multishot accept;
 *               recv from a provided buffer ring (io_uring_register_buf_ring,
 *               512 buffers of 16 KiB), multishot (--recv multi, the
 *               default) or one recv re-armed after each completion (--recv
 *               single); IORING_OP_SEND for writes, one send in flight per
 *               direction (a second could interleave after a short send);
 *               ONE io_uring_submit_and_wait(1) per loop iteration; with
 *               --wait N (N > 1), io_uring_submit_and_wait_timeout(N, US
 *               microseconds, 50 by default) instead: the ring wakes the
 *               relay when N completions are there, or after US (a
 *               variant that trades latency for fewer sleeps).
 *
 * Closes: a peer's EOF is passed on as shutdown(SHUT_WR) of the other
 * socket once everything read before it was sent; the pair is closed when
 * both directions are shut, or at once on an error (reset, EPIPE). Short
 * writes and sends keep the rest and send it first; a direction whose
 * bytes wait is not read further (epoll; in uring mode a multishot recv
 * keeps filling provided buffers, bounded by the pool: when it runs out the
 * recv ends with ENOBUFS and is re-armed once a buffer comes back).
 * The backend connect is a blocking connect() at accept time (loopback:
 * it does not sleep), outside any keep-alive request.
 *
 * SIGTERM or SIGINT: prints its counts (loop iterations: epoll_wait or
 * io_uring_enter calls; events or completions; bytes each way) on stderr
 * and exits 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFSZ 16384

static volatile sig_atomic_t stopping;
static int backend_port;

static struct {
    unsigned long long loops;       /* epoll_wait or io_uring_enter (submit_and_wait) calls */
    unsigned long long extra_enters; /* uring: submits forced by a full SQ */
    unsigned long long events;      /* epoll events or CQEs */
    unsigned long long accepted;
    unsigned long long closed;
    unsigned long long bytes[2];    /* [0] client -> backend, [1] backend -> client */
    unsigned long long short_writes;
    unsigned long long nobufs;
} st;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

    if (fd < 0)
        die("socket");
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        die("bind");
    if (listen(fd, 1024) < 0)
        die("listen");
    return fd;
}

/* A connected socket to the backend, TCP_NODELAY; -1 on failure. */
static int connect_backend(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)backend_port)};

    if (fd < 0)
        return -1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ------------------------------------------------------------------ epoll */

struct edir {
    char buf[BUFSZ];
    size_t off, len;
    int eof;  /* the source sent its FIN (read returned 0) */
    int shut; /* passed on: shutdown(dst, SHUT_WR) done */
};

struct epair {
    int fd[2];    /* [0] client, [1] backend; direction d reads fd[d], writes fd[!d] */
    int rd[2];    /* edge seen, not drained */
    int wr[2];    /* writable as far as we know */
    int hup[2];   /* EPOLLRDHUP/HUP/ERR seen: read on to the 0 or the error */
    int dead;
    struct epair *next_dead;
    struct edir d[2];
};

/* Moves what it can in direction D: 0 when blocked or done, -1 on an error. */
static int epump(struct epair *p, int d)
{
    struct edir *x = &p->d[d];
    int src = d, dst = !d;

    for (;;) {
        if (x->len > 0) {
            ssize_t n;

            if (!p->wr[dst])
                return 0;
            n = write(p->fd[dst], x->buf + x->off, x->len);
            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN) {
                    p->wr[dst] = 0;
                    return 0;
                }
                return -1;
            }
            st.bytes[d] += (unsigned long long)n;
            x->off += (size_t)n;
            x->len -= (size_t)n;
            if (x->len > 0) {
                /* short: the send buffer is full; EPOLLOUT's edge comes when it has room */
                st.short_writes++;
                p->wr[dst] = 0;
                return 0;
            }
            x->off = 0;
        }
        if (x->eof) {
            if (!x->shut) {
                shutdown(p->fd[dst], SHUT_WR);
                x->shut = 1;
            }
            return 0;
        }
        if (!p->rd[src])
            return 0;
        {
            ssize_t n = read(p->fd[src], x->buf, BUFSZ);

            if (n < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN) {
                    p->rd[src] = 0;
                    return 0;
                }
                return -1;
            }
            if (n == 0) {
                x->eof = 1;
                p->rd[src] = 0;
                continue;
            }
            x->len = (size_t)n;
            /* short read: the receive queue is empty, a new arrival raises a
             * new edge; unless the FIN is known to wait behind it */
            if (n < BUFSZ && !p->hup[src])
                p->rd[src] = 0;
        }
    }
}

static void run_epoll(int lfd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN}, evs[64];

    if (ep < 0)
        die("epoll_create1");
    ev.data.u64 = 0; /* the listener */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
        die("epoll_ctl");
    fprintf(stderr, "relay: io epoll (edge-triggered, read/write, %d-byte buffers)\n", BUFSZ);
    while (!stopping) {
        struct epair *dead = NULL;
        int n = epoll_wait(ep, evs, 64, -1);

        st.loops++;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        st.events += (unsigned long long)n;
        for (int i = 0; i < n; i++) {
            uint64_t u = evs[i].data.u64;
            struct epair *p;
            int side;

            if (u == 0) {
                for (;;) {
                    int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), bfd;

                    if (cfd < 0)
                        break;
                    bfd = connect_backend();
                    if (bfd < 0) {
                        close(cfd);
                        continue;
                    }
                    nodelay(cfd);
                    fcntl(bfd, F_SETFL, fcntl(bfd, F_GETFL) | O_NONBLOCK);
                    p = calloc(1, sizeof(*p));
                    if (p == NULL)
                        die("calloc");
                    p->fd[0] = cfd;
                    p->fd[1] = bfd;
                    for (int s = 0; s < 2; s++) {
                        struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

                        e.data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)s;
                        if (epoll_ctl(ep, EPOLL_CTL_ADD, p->fd[s], &e) < 0)
                            die("epoll_ctl");
                    }
                    st.accepted++;
                }
                continue;
            }
            p = (struct epair *)(uintptr_t)(u & ~(uint64_t)1);
            side = (int)(u & 1);
            if (p->dead)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                p->rd[side] = 1;
            if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                p->hup[side] = 1;
            if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                p->wr[side] = 1;
            if (epump(p, 0) < 0 || epump(p, 1) < 0 || (p->d[0].shut && p->d[1].shut)) {
                p->dead = 1;
                p->next_dead = dead;
                dead = p;
            }
        }
        while (dead != NULL) {
            struct epair *p = dead;

            dead = p->next_dead;
            close(p->fd[0]);
            close(p->fd[1]);
            free(p);
            st.closed++;
        }
    }
    close(ep);
}

/* ------------------------------------------------------------------ uring */

#define NBUFS 512 /* provided buffers, a power of 2 */
#define BGID 0
#define RING_ENTRIES 4096

enum { OP_ACCEPT = 0, OP_RECV = 1, OP_SEND = 2 };

struct udir {
    int head, tail;  /* queue of provided buffers read and not yet sent (bids; -1: empty) */
    int recv_armed;  /* a recv (multishot or not) is pending */
    int send_busy;   /* a send is pending (for the head of the queue) */
    int starved;     /* its recv ended with ENOBUFS: re-arm when buffers come back */
    int eof, shut;
};

struct upair {
    int fd[2];       /* [0] client, [1] backend; direction d reads fd[d], sends to fd[!d] */
    int closing;
    int inflight;    /* requests whose last completion has not come */
    struct udir d[2];
};

static struct io_uring ring;
static struct io_uring_buf_ring *bring;
static char *bufs;
static int seg_off[NBUFS], seg_len[NBUFS], seg_next[NBUFS];
static int multishot = 1;
static unsigned wait_nr = 1;
static long wait_us = 50;
static int returned; /* buffers given back since the last look at starved recvs */
static struct upair **starved_list;
static int starved_n, starved_cap;

static uint64_t udata(struct upair *p, int op, int d)
{
    return (uint64_t)(uintptr_t)p | (uint64_t)(op << 1) | (uint64_t)d;
}

static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);

    if (s == NULL) {
        io_uring_submit(&ring);
        st.extra_enters++;
        s = io_uring_get_sqe(&ring);
        if (s == NULL) {
            fprintf(stderr, "relay: no SQE\n");
            exit(1);
        }
    }
    return s;
}

static void buf_return(int bid)
{
    io_uring_buf_ring_add(bring, bufs + (size_t)bid * BUFSZ, BUFSZ, (unsigned short)bid,
                          io_uring_buf_ring_mask(NBUFS), 0);
    io_uring_buf_ring_advance(bring, 1);
    returned++;
}

static void arm_recv(struct upair *p, int d)
{
    struct io_uring_sqe *s = sqe_get();

    if (multishot)
        io_uring_prep_recv_multishot(s, p->fd[d], NULL, 0, 0);
    else
        io_uring_prep_recv(s, p->fd[d], NULL, 0, 0);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = BGID;
    io_uring_sqe_set_data64(s, udata(p, OP_RECV, d));
    p->d[d].recv_armed = 1;
    p->inflight++;
}

static void send_head(struct upair *p, int d)
{
    struct udir *x = &p->d[d];
    struct io_uring_sqe *s = sqe_get();
    int bid = x->head;

    io_uring_prep_send(s, p->fd[!d], bufs + (size_t)bid * BUFSZ + seg_off[bid],
                       (size_t)seg_len[bid], MSG_NOSIGNAL);
    io_uring_sqe_set_data64(s, udata(p, OP_SEND, d));
    x->send_busy = 1;
    p->inflight++;
}

static void drop_queue(struct udir *x)
{
    while (x->head >= 0) {
        int bid = x->head;

        x->head = seg_next[bid];
        buf_return(bid);
    }
    x->tail = -1;
}

static void ufree_if_done(struct upair *p)
{
    if (!p->closing || p->inflight > 0)
        return;
    close(p->fd[0]);
    close(p->fd[1]);
    for (int i = 0; i < starved_n; i++)
        if (starved_list[i] == p)
            starved_list[i] = NULL;
    free(p);
    st.closed++;
}

/* Close the pair: wake its pending requests (shutdown), give back its buffers
 * (those a pending send holds when the send completes). Only called from a
 * completion's handler, which frees the pair at its end (ufree_if_done) once
 * no request of it is pending. */
static void uclose(struct upair *p)
{
    if (p->closing)
        return;
    p->closing = 1;
    shutdown(p->fd[0], SHUT_RDWR);
    shutdown(p->fd[1], SHUT_RDWR);
    for (int d = 0; d < 2; d++)
        if (!p->d[d].send_busy)
            drop_queue(&p->d[d]);
}

/* After a direction's queue emptied: pass an EOF on, close a finished pair. */
static void uafter_drain(struct upair *p, int d)
{
    struct udir *x = &p->d[d];

    if (x->eof && !x->shut && x->head < 0 && !x->send_busy) {
        shutdown(p->fd[!d], SHUT_WR);
        x->shut = 1;
    }
    if (p->d[0].shut && p->d[1].shut)
        uclose(p);
}

static void on_accept(int lfd, struct io_uring_cqe *c)
{
    if (!(c->flags & IORING_CQE_F_MORE)) {
        struct io_uring_sqe *s = sqe_get();

        io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
        io_uring_sqe_set_data64(s, udata(NULL, OP_ACCEPT, 0));
    }
    if (c->res >= 0) {
        int cfd = c->res, bfd = connect_backend();
        struct upair *p;

        if (bfd < 0) {
            close(cfd);
            return;
        }
        nodelay(cfd);
        p = calloc(1, sizeof(*p));
        if (p == NULL)
            die("calloc");
        p->fd[0] = cfd;
        p->fd[1] = bfd;
        for (int d = 0; d < 2; d++) {
            p->d[d].head = p->d[d].tail = -1;
            arm_recv(p, d);
        }
        st.accepted++;
    }
}

static void on_recv(struct upair *p, int d, struct io_uring_cqe *c)
{
    struct udir *x = &p->d[d];
    int more = (c->flags & IORING_CQE_F_MORE) != 0;

    if (!more) {
        x->recv_armed = 0;
        p->inflight--;
    }
    if (c->res > 0) {
        int bid = (int)(c->flags >> IORING_CQE_BUFFER_SHIFT);

        if (!(c->flags & IORING_CQE_F_BUFFER)) {
            fprintf(stderr, "relay: recv completed without a buffer\n");
            exit(1);
        }
        if (p->closing) {
            buf_return(bid);
        } else {
            seg_off[bid] = 0;
            seg_len[bid] = c->res;
            seg_next[bid] = -1;
            if (x->tail >= 0)
                seg_next[x->tail] = bid;
            else
                x->head = bid;
            x->tail = bid;
            if (!x->send_busy)
                send_head(p, d);
            if (!more)
                arm_recv(p, d);
        }
    } else if (c->res == 0) {
        x->eof = 1;
        if (!p->closing)
            uafter_drain(p, d);
    } else if (c->res == -ENOBUFS && !p->closing) {
        st.nobufs++;
        if (!more && !x->starved) {
            x->starved = 1;
            if (starved_n == starved_cap) {
                starved_cap = starved_cap ? 2 * starved_cap : 64;
                starved_list = realloc(starved_list, sizeof(*starved_list) * (size_t)starved_cap);
                if (starved_list == NULL)
                    die("realloc");
            }
            starved_list[starved_n++] = p;
        }
    } else {
        uclose(p);
    }
    ufree_if_done(p);
}

static void on_send(struct upair *p, int d, struct io_uring_cqe *c)
{
    struct udir *x = &p->d[d];

    x->send_busy = 0;
    p->inflight--;
    if (p->closing) {
        drop_queue(x);
    } else if (c->res < 0) {
        uclose(p);
    } else {
        int bid = x->head;

        st.bytes[d] += (unsigned long long)c->res;
        seg_off[bid] += c->res;
        seg_len[bid] -= c->res;
        if (seg_len[bid] > 0) {
            st.short_writes++;
        } else {
            x->head = seg_next[bid];
            if (x->head < 0)
                x->tail = -1;
            buf_return(bid);
        }
        if (x->head >= 0)
            send_head(p, d);
        else
            uafter_drain(p, d);
    }
    ufree_if_done(p);
}

static void rearm_starved(void)
{
    int n = starved_n;

    starved_n = 0;
    for (int i = 0; i < n; i++) {
        struct upair *p = starved_list[i];

        if (p == NULL)
            continue;
        for (int d = 0; d < 2; d++) {
            if (p->d[d].starved) {
                p->d[d].starved = 0;
                if (!p->closing && !p->d[d].recv_armed && !p->d[d].eof)
                    arm_recv(p, d);
            }
        }
    }
}

static void run_uring(int lfd)
{
    struct io_uring_params prm;
    struct io_uring_buf_reg reg;
    const char *how = "SINGLE_ISSUER|DEFER_TASKRUN";
    size_t rsz = (sizeof(struct io_uring_buf) * NBUFS + 4095) & ~(size_t)4095;
    struct io_uring_sqe *s;
    int r;

    memset(&prm, 0, sizeof(prm));
    prm.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    r = io_uring_queue_init_params(RING_ENTRIES, &ring, &prm);
    if (r < 0) {
        memset(&prm, 0, sizeof(prm));
        prm.flags = IORING_SETUP_COOP_TASKRUN;
        how = "COOP_TASKRUN";
        r = io_uring_queue_init_params(RING_ENTRIES, &ring, &prm);
    }
    if (r < 0) {
        memset(&prm, 0, sizeof(prm));
        how = "no taskrun flags";
        r = io_uring_queue_init_params(RING_ENTRIES, &ring, &prm);
    }
    if (r < 0) {
        errno = -r;
        die("io_uring_queue_init_params");
    }
    r = io_uring_register_ring_fd(&ring);
    bring = mmap(NULL, rsz, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    bufs = mmap(NULL, (size_t)NBUFS * BUFSZ, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE,
                -1, 0);
    if (bring == MAP_FAILED || bufs == MAP_FAILED)
        die("mmap");
    memset(&reg, 0, sizeof(reg));
    reg.ring_addr = (uint64_t)(uintptr_t)bring;
    reg.ring_entries = NBUFS;
    reg.bgid = BGID;
    io_uring_buf_ring_init(bring);
    {
        int e = io_uring_register_buf_ring(&ring, &reg, 0);

        if (e < 0) {
            errno = -e;
            die("io_uring_register_buf_ring");
        }
    }
    for (int i = 0; i < NBUFS; i++)
        io_uring_buf_ring_add(bring, bufs + (size_t)i * BUFSZ, BUFSZ, (unsigned short)i,
                              io_uring_buf_ring_mask(NBUFS), i);
    io_uring_buf_ring_advance(bring, NBUFS);
    fprintf(stderr, "relay: io uring (%s, ring fd %sregistered, %s recv, %d provided "
            "buffers of %d bytes, send, wait for %u completion(s)", how, r == 1 ? "" : "NOT ",
            multishot ? "multishot" : "single-shot", NBUFS, BUFSZ, wait_nr);
    if (wait_nr > 1)
        fprintf(stderr, " or %ld us", wait_us);
    fprintf(stderr, ")\n");

    s = sqe_get();
    io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, udata(NULL, OP_ACCEPT, 0));
    while (!stopping) {
        struct io_uring_cqe *c;
        unsigned head, n = 0;

        if (wait_nr > 1) {
            struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = wait_us * 1000};

            r = io_uring_submit_and_wait_timeout(&ring, &c, wait_nr, &ts, NULL);
        } else {
            r = io_uring_submit_and_wait(&ring, 1);
        }
        st.loops++;
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME) {
            errno = -r;
            die("io_uring_submit_and_wait");
        }
        io_uring_for_each_cqe(&ring, head, c) {
            uint64_t u = io_uring_cqe_get_data64(c);
            struct upair *p = (struct upair *)(uintptr_t)(u & ~(uint64_t)7);
            int op = (int)((u >> 1) & 3), d = (int)(u & 1);

            n++;
            if (op == OP_ACCEPT) {
                if (c->res < 0 && c->res != -EINTR && c->res != -ECANCELED && c->res != -EAGAIN)
                    fprintf(stderr, "relay: accept: %s\n", strerror(-c->res));
                on_accept(lfd, c);
            } else if (op == OP_RECV) {
                on_recv(p, d, c);
            } else {
                on_send(p, d, c);
            }
        }
        io_uring_cq_advance(&ring, n);
        st.events += n;
        if (returned > 0 && starved_n > 0)
            rearm_starved();
        returned = 0;
    }
    io_uring_queue_exit(&ring);
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr, "usage: relay --port PORT --backend-port BPORT --io epoll|uring "
            "[--recv multi|single] [--wait N [--wait-us US]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int port = 0, uring = -1, lfd;
    struct sigaction sa;

    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (v == NULL)
            usage();
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(v);
        else if (strcmp(argv[i], "--backend-port") == 0)
            backend_port = atoi(v);
        else if (strcmp(argv[i], "--io") == 0 && strcmp(v, "epoll") == 0)
            uring = 0;
        else if (strcmp(argv[i], "--io") == 0 && strcmp(v, "uring") == 0)
            uring = 1;
        else if (strcmp(argv[i], "--recv") == 0 && strcmp(v, "multi") == 0)
            multishot = 1;
        else if (strcmp(argv[i], "--recv") == 0 && strcmp(v, "single") == 0)
            multishot = 0;
        else if (strcmp(argv[i], "--wait") == 0 && atoi(v) >= 1)
            wait_nr = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--wait-us") == 0 && atol(v) >= 1 && atol(v) < 1000000)
            wait_us = atol(v);
        else
            usage();
        i++;
    }
    if (port <= 0 || backend_port <= 0 || uring < 0)
        usage();
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: the wait returns EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    lfd = listen_on(port);
    if (uring)
        run_uring(lfd);
    else
        run_epoll(lfd);
    fprintf(stderr, "relay: loops %llu (+%llu forced submits), events %llu, connections %llu "
            "accepted %llu closed, bytes %llu up %llu down, short writes %llu, ENOBUFS %llu\n",
            st.loops, st.extra_enters, st.events, st.accepted, st.closed, st.bytes[0],
            st.bytes[1], st.short_writes, st.nobufs);
    return 0;
}
