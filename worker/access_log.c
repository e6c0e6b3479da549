#include "worker/access_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/escape.h"
#include "core/fmt.h"
#include "core/json.h"
#include "core/log.h"
#include "proto/scalws.pb-c.h"

#define FIELD_MAX SWS_ACCESS_LOG_FIELD_MAX

_Static_assert(SWS_ACCESS_LOG_LINE_MAX <= SWS_ACCESS_LOG_BUF, "a line must fit an empty buffer");

void sws_access_log_init(sws_access_log_t *l)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    l->format = SWS__ACCESS_LOG__FORMAT__OFF;
}

static uint64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void count_dropped(sws_access_log_t *l, uint64_t lines, int err)
{
    if (lines == 0)
        return;
    if (l->dropped == 0) {
        /* Counted from the last report while drops go on, else from now:
         * "in the last N s" never spans a quiet hour. */
        uint64_t now = monotonic_ms();
        if (l->reported_ms == 0 || now - l->reported_ms >= SWS_ACCESS_LOG_DROP_REPORT_MS)
            l->drop_since_ms = now;
    }
    l->dropped += lines;
    l->drop_errno = err;
}

/* At once for the first drops, then at most every
 * SWS_ACCESS_LOG_DROP_REPORT_MS, or now when force (the log closes). Reads
 * the clock only while lines are being lost. */
static void report_drops(sws_access_log_t *l, int force)
{
    if (l->dropped == 0)
        return;
    uint64_t now = monotonic_ms();
    if (!force && l->reported_ms != 0 && now - l->reported_ms < SWS_ACCESS_LOG_DROP_REPORT_MS)
        return;
    uint64_t secs = (now - l->drop_since_ms + 999) / 1000;
    sws_log_warn("access log: %llu line%s dropped in the last %llu s (%s)",
                 (unsigned long long)l->dropped, l->dropped == 1 ? "" : "s",
                 (unsigned long long)(secs > 0 ? secs : 1),
                 l->drop_errno == 0 ? "destination not reading" : strerror(l->drop_errno));
    l->dropped = 0;
    l->reported_ms = now;
    l->drop_since_ms = now;
}

static uint64_t count_lines(const char *p, size_t n)
{
    uint64_t lines = 0;
    if (n == 0)
        return 0; /* p may be NULL: no buffer yet */
    for (const char *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        lines++;
    return lines;
}

static ssize_t write_some(const sws_access_log_t *l, const char *p, size_t n)
{
    if (l->is_socket)
        return send(l->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    return write(l->fd, p, n);
}

void sws_access_log_flush(sws_access_log_t *l)
{
    size_t off = 0;
    while (off < l->len && l->fd >= 0) {
        ssize_t n = write_some(l, l->buf + off, l->len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; /* the rest waits for the next tick */
        /* A full disk or a closed pipe: drop the lines, keep serving. */
        count_dropped(l, count_lines(l->buf + off, l->len - off), n < 0 ? errno : EIO);
        off = l->len;
    }
    if (l->fd < 0)
        off = l->len;
    if (off > 0 && off < l->len)
        memmove(l->buf, l->buf + off, l->len - off);
    l->len -= off;
    report_drops(l, 0);
}

int sws_access_log_waiting(const sws_access_log_t *l)
{
    return (l->len > 0 && l->fd >= 0) || l->dropped > 0;
}

static void close_fd(sws_access_log_t *l)
{
    /* Whatever the old destination did not take is lost with it. */
    count_dropped(l, count_lines(l->buf, l->len), 0);
    l->len = 0;
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    l->is_socket = 0;
}

void sws_access_log_close(sws_access_log_t *l)
{
    sws_access_log_flush(l);
    close_fd(l);
    report_drops(l, 1);
    free(l->buf);
    l->buf = NULL;
}

int sws_access_log_set_format(sws_access_log_t *l, unsigned format)
{
    if (format != SWS__ACCESS_LOG__FORMAT__OFF && l->buf == NULL &&
        (l->buf = malloc(SWS_ACCESS_LOG_BUF)) == NULL) {
        sws_log_error("access log: out of memory");
        return -1;
    }
    if (format == SWS__ACCESS_LOG__FORMAT__OFF)
        sws_access_log_flush(l); /* what was logged before still lands */
    l->format = format;
    return 0;
}

void sws_access_log_set_fd(sws_access_log_t *l, int fd)
{
    sws_access_log_flush(l); /* lines so far belong to the old destination */
    close_fd(l);
    l->fd = fd;
    struct stat st;
    l->is_socket = fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void update_stamps(sws_access_log_t *l, time_t now)
{
    static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    if (now == l->stamp_sec && l->stamp_iso[0] != '\0')
        return;
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(l->stamp_clf, sizeof(l->stamp_clf), "%02d/%s/%04d:%02d:%02d:%02d +0000",
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    snprintf(l->stamp_iso, sizeof(l->stamp_iso), "%04d-%02d-%02dT%02d:%02d:%02dZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    l->stamp_sec = now;
}

static char *put_str(char *o, const char *s)
{
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

/* nginx's escaping for combined: '"', '\\' and bytes outside 0x20-0x7e as
 * \xHH. An empty field is "-". */
static char *put_clf(char *o, sws_str_t s)
{
    if (s.len == 0)
        return SWS_PUT_LIT(o, "-");
    size_t n = s.len < FIELD_MAX ? s.len : FIELD_MAX;
    return sws_put_escaped(o, s.p, n, SWS_ESC_CTL | SWS_ESC_HIGH | SWS_ESC_QUOTE);
}

/* A JSON string by the rule of core/json.h (valid UTF-8 as it is, the
 * rest escaped so the bytes sent can be read back from the line). */
static char *put_json(char *o, sws_str_t s)
{
    size_t n = s.len < FIELD_MAX ? s.len : FIELD_MAX;
    *o++ = '"';
    o = sws_json_put_escaped(o, s.p, n);
    *o++ = '"';
    return o;
}

static sws_str_t cstr(const char *s)
{
    return (sws_str_t){ s, strlen(s) };
}

static sws_str_t header_or_empty(const sws_request_t *r, const char *name)
{
    const sws_str_t *v = sws_request_header(r, name);
    return v != NULL ? *v : SWS_STR("");
}

/* The version the request line carried, also a refused one (HTTP/9.9 gets
 * its 505 and is logged as what it was); versions are one digit each. */
static sws_str_t proto_of(const sws_request_t *r, char buf[sizeof("HTTP/x.y")])
{
    memcpy(buf, "HTTP/x.y", sizeof("HTTP/x.y"));
    buf[5] = (char)('0' + r->version_major % 10);
    buf[7] = (char)('0' + r->version_minor % 10);
    return (sws_str_t){ buf, sizeof("HTTP/x.y") - 1 };
}

void sws_access_log_request(sws_access_log_t *l, const sws_request_t *r, const char *remote,
                            time_t now, uint64_t duration_ms)
{
    char proto[sizeof("HTTP/x.y")];
    if (l->format == SWS__ACCESS_LOG__FORMAT__OFF || l->fd < 0 || l->buf == NULL)
        return;
    if (SWS_ACCESS_LOG_BUF - l->len < SWS_ACCESS_LOG_LINE_MAX)
        sws_access_log_flush(l);
    if (SWS_ACCESS_LOG_BUF - l->len < SWS_ACCESS_LOG_LINE_MAX) {
        count_dropped(l, 1, 0); /* the destination is not taking lines */
        return;
    }
    update_stamps(l, now);
    sws_str_t ua = header_or_empty(r, "User-Agent");
    sws_str_t remote_s = { remote, strlen(remote) };
    char *o = l->buf + l->len;
    if (l->format == SWS__ACCESS_LOG__FORMAT__JSON) {
        o = SWS_PUT_LIT(o, "{\"ts\":\"");
        o = put_str(o, l->stamp_iso);
        o = SWS_PUT_LIT(o, "\",\"remote\":");
        o = put_json(o, remote_s);
        o = SWS_PUT_LIT(o, ",\"method\":");
        o = put_json(o, r->method);
        o = SWS_PUT_LIT(o, ",\"path\":");
        o = put_json(o, r->target);
        o = SWS_PUT_LIT(o, ",\"proto\":");
        o = put_json(o, proto_of(r, proto));
        o = SWS_PUT_LIT(o, ",\"status\":");
        o = sws_put_u64(o, r->status);
        o = SWS_PUT_LIT(o, ",\"bytes\":");
        o = sws_put_u64(o, r->body_bytes);
        o = SWS_PUT_LIT(o, ",\"request_bytes\":");
        o = sws_put_u64(o, r->request_body_bytes);
        o = SWS_PUT_LIT(o, ",\"duration_ms\":");
        o = sws_put_u64(o, duration_ms);
        o = SWS_PUT_LIT(o, ",\"host\":");
        o = put_json(o, r->host);
        o = SWS_PUT_LIT(o, ",\"ua\":");
        o = put_json(o, ua);
        if (r->upstream.addr[0] != '\0') {
            o = SWS_PUT_LIT(o, ",\"upstream_addr\":");
            o = put_json(o, cstr(r->upstream.addr));
            o = SWS_PUT_LIT(o, ",\"upstream_status\":");
            o = put_json(o, cstr(r->upstream.status));
            o = SWS_PUT_LIT(o, ",\"upstream_ms\":");
            o = put_json(o, cstr(r->upstream.ms));
        }
        o = SWS_PUT_LIT(o, "}\n");
    } else {
        o = put_clf(o, remote_s);
        o = SWS_PUT_LIT(o, " - - [");
        o = put_str(o, l->stamp_clf);
        o = SWS_PUT_LIT(o, "] \"");
        if (r->target.len > 0) {
            o = put_clf(o, r->method);
            *o++ = ' ';
            o = put_clf(o, r->target);
            *o++ = ' ';
            o = put_clf(o, proto_of(r, proto));
        } else {
            *o++ = '-';
        }
        o = SWS_PUT_LIT(o, "\" ");
        o = sws_put_u64(o, r->status);
        *o++ = ' ';
        o = sws_put_u64(o, r->body_bytes);
        o = SWS_PUT_LIT(o, " \"");
        o = put_clf(o, header_or_empty(r, "Referer"));
        o = SWS_PUT_LIT(o, "\" \"");
        o = put_clf(o, ua);
        *o++ = '"';
        if (r->upstream.addr[0] != '\0') {
            /* nginx's $upstream_addr, $upstream_status and
             * $upstream_response_time (in ms), quoted: they are lists. */
            o = SWS_PUT_LIT(o, " \"");
            o = put_clf(o, cstr(r->upstream.addr));
            o = SWS_PUT_LIT(o, "\" \"");
            o = put_clf(o, cstr(r->upstream.status));
            o = SWS_PUT_LIT(o, "\" \"");
            o = put_clf(o, cstr(r->upstream.ms));
            *o++ = '"';
        }
        *o++ = '\n';
    }
    l->len = (size_t)(o - l->buf);
}
