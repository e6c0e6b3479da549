/* bench/openloop.c: bench/fixedrate.py in C, for the rates Python cannot
 * keep (proxy-latency: half of nginx's maximum as a proxy, 10k requests/s
 * and more, on a CPU shared with the backend).
 *
 *     openloop URL RATE SECONDS CONNECTIONS      URL: http://IPV4:PORT/PATH
 *
 * The contract of fixedrate.py, which stays the reference: request i is
 * due at start + i/RATE whatever happened before (open loop); it goes out
 * on an idle keep-alive connection of the CONNECTIONS opened at start (the
 * longest idle first), or waits for one, and its latency counts from the
 * moment it was due (no coordinated omission, as wrk2 counts). Prints
 * fixedrate.py's BENCH line and its stderr line. Exits 0, or 3 when it
 * noticed a due request more than 10 ms late: the latencies then hold the
 * client's own stall (counted from when each request was due), so they are
 * not the server's, while the count of requests, and the server's CPU that
 * run.sh reads around the run, still are (ADR 0031); 1 when nothing was
 * measured, 2 on bad arguments. Answers must carry Content-Length (every server run.sh
 * measures sends it). Bounded: the run, then at most 5 s for answers in
 * flight; every request of the schedule (RATE x SECONDS) is either answered
 * or counted as a timeout.
 *
 * Beyond fixedrate.py's line, BENCH says how far the client itself fell
 * behind and how often the server made a request wait:
 *   late_p99_us, late_max_us, late_1ms  how late the client noticed that a
 *       request was due (its own scheduling: a CPU shared with the backend
 *       and whatever else runs there), the 99th percentile and the worst
 *       over all requests, and how many requests it noticed 1 ms late or more;
 *   queued, queued_max_us  requests that found every connection busy and
 *       waited for an answer to free one, and the longest such wait (the
 *       server's slowness: it is in their latency, as it should be; many
 *       of them say CONNECTIONS is small for RATE x latency).
 * Latencies go into a log-bucket histogram (HdrHistogram's layout, at most
 * 0.8 % above the true value), not a list of samples: constant memory and
 * constant work per answer, whatever the rate and duration.
 *
 * run.sh compiles it into its temporary directory; it is no part of
 * scalwsd, and reads only the servers run.sh started on loopback. The pure
 * parts (histogram, schedule, answer reader) are tested by
 * test/unit/test_openloop.c and fuzzed by test/fuzz/fuzz_openloop.c, both
 * of which include this file with main renamed.
 */
/* memmem; the project's build defines it already. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define START_DELAY_NS (NS / 20)
#define GRACE_NS (5 * NS)
/* Beyond this lag the client's stall, not the server, sets the tail of the
 * latencies: exit LAG_EXIT. */
#define LAG_LIMIT_NS (NS / 100)
#define LAG_EXIT 3
/* late_1ms counts the requests noticed at least this late. */
#define LATE_NS (NS / 1000)
/* A response head larger than this is a wrong answer, not a bench one. */
#define HEAD_MAX 16384

/* ---------------------------------------------------------------- histogram */

/* Values below OL_HIST_SUB (ns) have a bucket each; above, every power of
 * two is cut into OL_HIST_SUB / 2 buckets, so a bucket is at most 1/128 of
 * its values wide: HdrHistogram's layout with two significant digits. */
#define OL_HIST_SUB_BITS 8
#define OL_HIST_SUB (1 << OL_HIST_SUB_BITS)
#define OL_HIST_HALF (OL_HIST_SUB / 2)
#define OL_HIST_BUCKETS (OL_HIST_SUB + (64 - OL_HIST_SUB_BITS) * OL_HIST_HALF)

typedef struct {
    uint64_t count[OL_HIST_BUCKETS];
    uint64_t n;
    uint64_t max; /* exact: the largest value recorded */
    double sum;
} ol_hist_t;

static int ol_hist_index(uint64_t v)
{
    int shift;

    if (v < OL_HIST_SUB)
        return (int)v;
    /* v >> shift keeps the top OL_HIST_SUB_BITS - 1 bits: [HALF, SUB). */
    shift = 63 - __builtin_clzll(v) - (OL_HIST_SUB_BITS - 1);
    return OL_HIST_SUB + (shift - 1) * OL_HIST_HALF + (int)((v >> shift) - OL_HIST_HALF);
}

/* The largest value that falls into bucket i. */
static uint64_t ol_hist_high(int i)
{
    int shift;
    uint64_t top;

    if (i < OL_HIST_SUB)
        return (uint64_t)i;
    shift = (i - OL_HIST_SUB) / OL_HIST_HALF + 1;
    top = (uint64_t)((i - OL_HIST_SUB) % OL_HIST_HALF + OL_HIST_HALF);
    return ((top + 1) << shift) - 1;
}

static void ol_hist_add(ol_hist_t *h, int64_t v)
{
    uint64_t u = v > 0 ? (uint64_t)v : 0;

    h->count[ol_hist_index(u)]++;
    h->n++;
    h->sum += (double)u;
    if (u > h->max)
        h->max = u;
}

/* fixedrate.py's nearest rank: the value at index floor(n x p / 100) of
 * the sorted values, given as the top of its bucket (never above the
 * largest value recorded); 0 when empty. */
static uint64_t ol_hist_percentile(const ol_hist_t *h, double p)
{
    uint64_t rank, seen = 0;

    if (h->n == 0)
        return 0;
    rank = (uint64_t)((double)h->n * p / 100);
    if (rank >= h->n)
        rank = h->n - 1;
    for (int i = 0; i < OL_HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen > rank)
            return ol_hist_high(i) < h->max ? ol_hist_high(i) : h->max;
    }
    return h->max;
}

/* ---------------------------------------------------------------- schedule */

/* When request i is due, in ns after the start. */
static int64_t ol_due_ns(long i, double rate)
{
    return (int64_t)((double)i * NS / rate);
}

/* How many requests are due ELAPSED ns after the start (request 0 at 0),
 * at most TOTAL: exactly the i with ol_due_ns(i) <= elapsed, whatever the
 * rounding of the first guess. */
static long ol_due_by(int64_t elapsed, double rate, long total)
{
    long n;

    if (elapsed < 0)
        return 0;
    n = (long)((double)elapsed * rate / NS) + 1;
    if (n > total)
        n = total;
    while (n > 0 && ol_due_ns(n - 1, rate) > elapsed)
        n--;
    while (n < total && ol_due_ns(n, rate) <= elapsed)
        n++;
    return n;
}

/* ---------------------------------------------------------------- connections */

typedef struct {
    int fd;
    int64_t due;       /* when the request in flight was due; -1: idle */
    char head[HEAD_MAX];
    size_t head_len;   /* bytes of the response head read so far */
    int64_t length;    /* its Content-Length; -1: head not complete */
    int64_t body_left;
    int status;
} conn_t;

static struct {
    long connect, read, write, timeout, status;
} errors;

/* Idle connections, oldest first (fixedrate.py's deque). */
static struct {
    conn_t **slot;
    long cap, head, len;
} idle;

static void idle_push(conn_t *c)
{
    idle.slot[(idle.head + idle.len++) % idle.cap] = c;
}

static conn_t *idle_pop(void)
{
    conn_t *c = idle.slot[idle.head];

    idle.head = (idle.head + 1) % idle.cap;
    idle.len--;
    return c;
}

/* Everything main allocates, freed on every way out (LeakSanitizer). */
static conn_t *conns;
static ol_hist_t *lat, *late;

static int finish(int rc)
{
    free(late);
    free(lat);
    free(idle.slot);
    free(conns);
    return rc;
}

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * NS + ts.tv_nsec;
}

/* Status and Content-Length of c's complete head; -1 without them. */
static int parse_head(conn_t *c)
{
    const char *end = c->head + c->head_len;
    const char *line;
    static const char cl[] = "content-length:";

    if (c->head_len < sizeof("HTTP/1.1 200") - 1 || memcmp(c->head, "HTTP/1.", 7) != 0)
        return -1;
    c->status = atoi(c->head + sizeof("HTTP/1.1 ") - 1);
    c->length = -1;
    for (line = memchr(c->head, '\n', c->head_len); line != NULL && line + 1 < end;
         line = memchr(line + 1, '\n', (size_t)(end - line - 1))) {
        if ((size_t)(end - line - 1) > sizeof(cl) - 1 && strncasecmp(line + 1, cl, sizeof(cl) - 1) == 0)
            c->length = strtoll(line + sizeof(cl), NULL, 10);
    }
    return c->length < 0 ? -1 : 0;
}

static void drop(int ep, conn_t *c, long *counter)
{
    (*counter)++;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->due = -1;
}

static void send_request(int ep, conn_t *c, const char *req, size_t len, int64_t due)
{
    c->due = due;
    c->head_len = 0;
    c->length = -1;
    /* A few bytes into an empty send buffer: all of them, or an error. */
    if (send(c->fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
        drop(ep, c, &errors.write);
}

/* Takes the head's bytes from the n bytes at buf (appended to c->head, the
 * blank line searched from where the last piece ended); returns how many
 * of them belonged to the head, or -1 when c was dropped. */
static ssize_t take_head(int ep, conn_t *c, const char *buf, size_t n)
{
    size_t old = c->head_len, take = n < HEAD_MAX - old ? n : HEAD_MAX - old;
    size_t from = old < 3 ? 0 : old - 3;
    const char *blank;

    memcpy(c->head + old, buf, take);
    c->head_len = old + take;
    blank = memmem(c->head + from, c->head_len - from, "\r\n\r\n", 4);
    if (blank == NULL) {
        if (c->head_len == HEAD_MAX) {
            drop(ep, c, &errors.read);
            return -1;
        }
        return (ssize_t)take;
    }
    c->head_len = (size_t)(blank + 4 - c->head);
    if (parse_head(c) < 0) {
        drop(ep, c, &errors.read);
        return -1;
    }
    c->body_left = c->length;
    return (ssize_t)(c->head_len - old);
}

/* Reads what c has; 1 when its response is complete. */
static int on_readable(int ep, conn_t *c)
{
    char buf[65536];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0), off = 0;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        drop(ep, c, &errors.read);
        return 0;
    }
    if (c->due < 0)
        return 0; /* bytes nobody asked for: ignored, as fixedrate.py does */
    if (c->length < 0 && (off = take_head(ep, c, buf, (size_t)n)) < 0)
        return 0;
    if (c->length < 0)
        return 0;
    c->body_left -= (int64_t)(n - off);
    /* One request at a time per connection: nothing may follow the body. */
    return c->body_left <= 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: openloop URL RATE SECONDS CONNECTIONS   (URL: http://IPV4:PORT/PATH)\n");
    return 2;
}

int main(int argc, char **argv)
{
    char host[64], req[1024];
    const char *path;
    unsigned port;
    double rate, seconds;
    long nconn, total, sent = 0, due_count = 0, late_1ms = 0, queued = 0;
    int64_t start, stop, nbytes = 0, queued_max = 0;
    struct sockaddr_in sa = { .sin_family = AF_INET };
    int ep, reqlen;

    if (argc != 5 || sscanf(argv[1], "http://%63[0-9.]:%u", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa.sin_addr) != 1 || port == 0 || port > 65535)
        return usage();
    path = strchr(argv[1] + sizeof("http://") - 1, '/');
    rate = atof(argv[2]);
    seconds = atof(argv[3]);
    nconn = atol(argv[4]);
    if (!(rate > 0) || !(seconds > 0) || nconn < 1 || rate * seconds > 1e9)
        return usage();
    sa.sin_port = htons((uint16_t)port);
    reqlen = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%u\r\n\r\n", path ? path : "/",
                      host, port);
    if (reqlen < 0 || (size_t)reqlen >= sizeof(req))
        return usage();
    total = (long)(seconds * rate);
    conns = calloc((size_t)nconn, sizeof(*conns));
    idle.slot = calloc((size_t)nconn, sizeof(*idle.slot));
    idle.cap = nconn;
    lat = calloc(1, sizeof(*lat));
    late = calloc(1, sizeof(*late));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || idle.slot == NULL || lat == NULL || late == NULL || ep < 0) {
        perror("openloop");
        return finish(1);
    }
    /* The kernel may fire a sleeping task's timer up to its slack late (50 us
     * by default), and each such microsecond would count as the server's
     * latency: 1 us. At 15,000/s requests are 67 us apart, so a coarser
     * timer would save few wake-ups: answers wake the client as often. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    for (long i = 0; i < nconn; i++) {
        conn_t *c = &conns[i];
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        int one = 1;

        c->due = -1;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            errors.connect++;
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
            continue;
        }
        if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
            fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
            errors.connect++;
            close(c->fd);
            c->fd = -1;
            continue;
        }
        idle_push(c);
    }
    if (idle.len == 0) {
        fprintf(stderr, "openloop: no connection\n");
        return finish(1);
    }

    start = now_ns() + START_DELAY_NS;
    stop = start + (int64_t)(seconds * NS);
    for (;;) {
        int64_t now = now_ns(), wake;
        struct epoll_event evs[256];
        struct timespec ts;
        int n;

        /* Every request due by now goes out, or waits for a connection;
         * how late the client noticed each is its own lag. */
        long due = now >= stop ? total : ol_due_by(now - start, rate, total);
        for (; due_count < due; due_count++) {
            int64_t lag = now - (start + ol_due_ns(due_count, rate));
            ol_hist_add(late, lag);
            late_1ms += lag >= LATE_NS;
        }
        if (due_count < total) {
            wake = start + ol_due_ns(due_count, rate);
        } else {
            long busy = 0;
            for (long i = 0; i < nconn; i++)
                busy += conns[i].fd >= 0 && conns[i].due >= 0;
            if (sent == total && busy == 0)
                break;
            if (now > stop + GRACE_NS) {
                errors.timeout += (total - sent) + busy;
                break;
            }
            wake = now + START_DELAY_NS;
        }
        while (sent < due_count && idle.len > 0) {
            conn_t *c = idle_pop();
            /* One the server closed while idle (counted then) stays out. */
            if (c->fd < 0)
                continue;
            send_request(ep, c, req, (size_t)reqlen, start + ol_due_ns(sent, rate));
            sent++;
        }
        wake = wake > now ? wake - now : 0;
        ts.tv_sec = wake / NS;
        ts.tv_nsec = wake % NS;
        n = epoll_pwait2(ep, evs, sizeof(evs) / sizeof(evs[0]), &ts, NULL);
        if (n < 0 && errno != EINTR) {
            /* Returning at once forever would spin, not measure. */
            perror("openloop: epoll_pwait2");
            return finish(1);
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            int64_t done;

            if (c->fd < 0 || !on_readable(ep, c))
                continue;
            done = now_ns();
            ol_hist_add(lat, done - c->due);
            nbytes += (int64_t)c->head_len + c->length;
            c->due = -1;
            if (c->status < 200 || c->status >= 400)
                errors.status++;
            if (sent < due_count && done < stop + GRACE_NS) {
                /* Due since the last pass and no connection was idle: it
                 * waited for this answer, and its latency counts the wait. */
                int64_t due_at = start + ol_due_ns(sent, rate);
                queued++;
                if (done - due_at > queued_max)
                    queued_max = done - due_at;
                send_request(ep, c, req, (size_t)reqlen, due_at);
                sent++;
            } else {
                idle_push(c);
            }
        }
    }
    int64_t measured = now_ns() - start;

    if (lat->n == 0) {
        fprintf(stderr, "openloop: no answer\n");
        return finish(1);
    }
#define PCT(p) ((long long)(ol_hist_percentile(lat, (p)) / 1000))
    printf("BENCH requests=%llu duration_us=%lld bytes=%lld connect=%ld read=%ld write=%ld timeout=%ld "
           "status=%ld p50_us=%lld p90_us=%lld p99_us=%lld p999_us=%lld max_us=%lld mean_us=%.1f "
           "late_p99_us=%lld late_max_us=%lld late_1ms=%ld queued=%ld queued_max_us=%lld\n",
           (unsigned long long)lat->n, (long long)(measured / 1000), (long long)nbytes, errors.connect,
           errors.read, errors.write, errors.timeout, errors.status, PCT(50), PCT(90), PCT(99), PCT(99.9),
           (long long)(lat->max / 1000), lat->sum / (double)lat->n / 1000,
           (long long)(ol_hist_percentile(late, 99) / 1000), (long long)(late->max / 1000), late_1ms,
           queued, (long long)(queued_max / 1000));
#undef PCT
    fprintf(stderr, "openloop: %ld requests due at %.0f/s over %.1f s, %llu answered; the client noticed "
            "one at most %.2f ms late (%ld at least 1 ms late); %ld waited for a free connection\n",
            total, rate, seconds, (unsigned long long)lat->n, (double)late->max / 1e6, late_1ms, queued);
    if (queued * 100 > total)
        fprintf(stderr, "openloop: %.1f %% of the requests found all %ld connections busy (the longest "
                "waited %.1f ms, counted in its latency): more CONNECTIONS would measure the server "
                "rather than the queue\n", 100.0 * (double)queued / (double)total, nconn,
                (double)queued_max / 1e6);
    if ((int64_t)late->max > LAG_LIMIT_NS) {
        fprintf(stderr, "openloop: LAG: the client fell %.1f ms behind its schedule (%ld of %ld requests "
                "noticed at least 1 ms late): its latencies are not the server's, the request count is; "
                "lower the rate, or quiet the load's CPU\n", (double)late->max / 1e6, late_1ms, total);
        return finish(LAG_EXIT);
    }
    return finish(0);
}
