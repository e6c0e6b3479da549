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
 * moment it was due (no coordinated omission). Prints fixedrate.py's BENCH
 * line and its stderr line, and exits 1 when it noticed a due request more
 * than 10 ms late (it, not the server, was measured then). Answers must
 * carry Content-Length (every server run.sh measures sends it). Bounded:
 * the run, then at most 5 s for answers in flight.
 *
 * run.sh compiles it into its temporary directory; it is no part of
 * scalwsd, and reads only the servers run.sh started on loopback.
 */
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL
#define START_DELAY_NS (NS / 20)
#define GRACE_NS (5 * NS)
/* The client is the bottleneck when it notices a due request this late. */
#define LAG_LIMIT_NS (NS / 100)
/* A response head larger than this is a wrong answer, not a bench one. */
#define HEAD_MAX 16384

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
static int64_t *lat;

static int finish(int rc)
{
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

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
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

/* Reads what c has; 1 when its response is complete. */
static int on_readable(int ep, conn_t *c)
{
    char buf[65536];
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    size_t off = 0;

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        drop(ep, c, &errors.read);
        return 0;
    }
    if (c->due < 0)
        return 0; /* bytes nobody asked for: ignored, as fixedrate.py does */
    while (c->length < 0 && off < (size_t)n) {
        if (c->head_len == HEAD_MAX) {
            drop(ep, c, &errors.read);
            return 0;
        }
        c->head[c->head_len++] = buf[off++];
        if (c->head_len >= 4 && memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4) == 0) {
            if (parse_head(c) < 0) {
                drop(ep, c, &errors.read);
                return 0;
            }
            c->body_left = c->length;
        }
    }
    if (c->length < 0)
        return 0;
    c->body_left -= (int64_t)n - (int64_t)off;
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
    long nconn, total, sent = 0, due_count = 0, nlat = 0;
    int64_t start, stop, worst_lag = 0, nbytes = 0;
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
    lat = calloc((size_t)total + 1, sizeof(*lat));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || idle.slot == NULL || lat == NULL || ep < 0) {
        perror("openloop");
        return finish(1);
    }

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

        if (now < stop) {
            /* Every request due by now goes out, or waits for a connection. */
            long due = now >= start ? (long)((double)(now - start) * rate / NS) + 1 : 0;
            if (due > total)
                due = total;
            if (due_count < due) {
                int64_t lag = now - (start + (int64_t)((double)due_count * NS / rate));
                if (lag > worst_lag)
                    worst_lag = lag;
                due_count = due;
            }
            wake = start + (int64_t)((double)due_count * NS / rate);
            if (wake > stop)
                wake = stop;
        } else {
            long busy = 0;
            for (long i = 0; i < nconn; i++)
                busy += conns[i].fd >= 0 && conns[i].due >= 0;
            if (sent == due_count && busy == 0)
                break;
            if (now > stop + GRACE_NS) {
                errors.timeout += (due_count - sent) + busy;
                break;
            }
            wake = now + START_DELAY_NS;
        }
        while (sent < due_count && idle.len > 0) {
            conn_t *c = idle_pop();
            /* One the server closed while idle (counted then) stays out. */
            if (c->fd < 0)
                continue;
            send_request(ep, c, req, (size_t)reqlen, start + (int64_t)((double)sent * NS / rate));
            sent++;
        }
        wake = wake > now ? wake - now : 0;
        ts.tv_sec = wake / NS;
        ts.tv_nsec = wake % NS;
        n = epoll_pwait2(ep, evs, sizeof(evs) / sizeof(evs[0]), &ts, NULL);
        for (int i = 0; i < n; i++) {
            conn_t *c = evs[i].data.ptr;
            int64_t done;

            if (c->fd < 0 || !on_readable(ep, c))
                continue;
            done = now_ns();
            lat[nlat++] = done - c->due;
            nbytes += (int64_t)c->head_len + c->length;
            c->due = -1;
            if (c->status < 200 || c->status >= 400)
                errors.status++;
            if (sent < due_count && done < stop + GRACE_NS) {
                send_request(ep, c, req, (size_t)reqlen, start + (int64_t)((double)sent * NS / rate));
                sent++;
            } else {
                idle_push(c);
            }
        }
    }
    int64_t measured = now_ns() - start;

    if (nlat == 0) {
        fprintf(stderr, "openloop: no answer\n");
        return finish(1);
    }
    qsort(lat, (size_t)nlat, sizeof(*lat), cmp_i64);
    double sum = 0;
    for (long i = 0; i < nlat; i++)
        sum += (double)lat[i];
    /* fixedrate.py's nearest rank, in microseconds. */
#define PCT(p) (lat[(long)(nlat * (p) / 100) < nlat ? (long)(nlat * (p) / 100) : nlat - 1] / 1000)
    printf("BENCH requests=%ld duration_us=%lld bytes=%lld connect=%ld read=%ld write=%ld timeout=%ld "
           "status=%ld p50_us=%lld p90_us=%lld p99_us=%lld p999_us=%lld max_us=%lld mean_us=%.1f\n",
           nlat, (long long)(measured / 1000), (long long)nbytes, errors.connect, errors.read,
           errors.write, errors.timeout, errors.status, (long long)PCT(50), (long long)PCT(90),
           (long long)PCT(99), (long long)PCT(99.9), (long long)(lat[nlat - 1] / 1000),
           sum / (double)nlat / 1000);
    fprintf(stderr, "openloop: %ld requests due at %.0f/s over %.1f s, %ld answered; the client noticed "
            "one at most %.2f ms late\n", due_count, rate, seconds, nlat, (double)worst_lag / 1e6);
    if (worst_lag > LAG_LIMIT_NS) {
        fprintf(stderr, "openloop: FAIL: the client fell %.1f ms behind its schedule (it, not the server, "
                "was measured): lower the rate\n", (double)worst_lag / 1e6);
        return finish(1);
    }
    return finish(0);
}
