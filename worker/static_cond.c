#include "worker/static_cond.h"

#include <string.h>

#include "core/fmt.h"

size_t sws_static_etag(char *out, time_t mtime, uint64_t size)
{
    char *o = out;
    *o++ = '"';
    o = sws_put_hex(o, (uint64_t)mtime);
    *o++ = '-';
    o = sws_put_hex(o, size);
    *o++ = '"';
    *o = '\0';
    return (size_t)(o - out);
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int sws_static_etag_listed(sws_str_t inm, sws_str_t etag)
{
    const char *p = inm.p, *end = inm.p + inm.len;

    while (p < end) {
        if (is_ows(*p) || *p == ',') {
            p++;
            continue;
        }
        if (*p == '*')
            return 1;
        if (end - p >= 2 && p[0] == 'W' && p[1] == '/')
            p += 2;
        if (p == end || *p != '"')
            return 0;
        const char *close = memchr(p + 1, '"', (size_t)(end - p - 1));
        if (close == NULL)
            return 0;
        size_t n = (size_t)(close + 1 - p);
        if (n == etag.len && memcmp(p, etag.p, n) == 0)
            return 1;
        p = close + 1;
    }
    return 0;
}

/* Cursor over a date being parsed; every reader fails once past the end. */
typedef struct date_cursor {
    const char *p, *end;
} date_cursor_t;

static int take_char(date_cursor_t *c, char want)
{
    if (c->p < c->end && *c->p == want) {
        c->p++;
        return 1;
    }
    return 0;
}

/* Exactly `digits` decimal digits, or -1. */
static int take_num(date_cursor_t *c, int digits)
{
    int v = 0;
    if (c->end - c->p < digits)
        return -1;
    for (int i = 0; i < digits; i++) {
        char d = c->p[i];
        if (d < '0' || d > '9')
            return -1;
        v = v * 10 + (d - '0');
    }
    c->p += digits;
    return v;
}

/* "Jan".."Dec" (case-sensitive, as the grammar says) -> 0..11, or -1. */
static int take_month(date_cursor_t *c)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (c->end - c->p < 3)
        return -1;
    for (int m = 0; m < 12; m++) {
        if (memcmp(c->p, months + 3 * m, 3) == 0) {
            c->p += 3;
            return m;
        }
    }
    return -1;
}

/* "HH:MM:SS" -> seconds of the day, or -1. */
static long take_time(date_cursor_t *c)
{
    int h = take_num(c, 2);
    if (h < 0 || h > 23 || !take_char(c, ':'))
        return -1;
    int m = take_num(c, 2);
    if (m < 0 || m > 59 || !take_char(c, ':'))
        return -1;
    int s = take_num(c, 2);
    if (s < 0 || s > 60) /* 60: a leap second */
        return -1;
    return (long)h * 3600 + m * 60 + s;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (month 0..11): the
 * year is shifted to start in March so that the leap day comes last. */
static long days_from_civil(long y, int m, int d)
{
    y -= m < 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long mp = (m + 10) % 12; /* March = 0 */
    long doy = (153 * mp + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int sws_static_date_parse(sws_str_t s, time_t *out)
{
    date_cursor_t c = { s.p, s.p + s.len };
    int day, month, year;
    long secs;

    /* The day name is redundant with the date: skip it unchecked. */
    while (c.p < c.end && ((*c.p >= 'A' && *c.p <= 'Z') || (*c.p >= 'a' && *c.p <= 'z')))
        c.p++;
    if (take_char(&c, ',')) {
        /* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or
         * RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT". */
        if (!take_char(&c, ' ') || (day = take_num(&c, 2)) < 0)
            return -1;
        char sep = c.p < c.end ? *c.p : 0;
        if ((sep != ' ' && sep != '-') || !take_char(&c, sep) || (month = take_month(&c)) < 0 ||
            !take_char(&c, sep))
            return -1;
        if (sep == ' ') {
            year = take_num(&c, 4);
        } else {
            /* Two-digit years: 00-69 are 20xx, 70-99 are 19xx. A fixed
             * pivot rather than RFC 9110's sliding 50-year window: the two
             * disagree only on dates decades ahead, and only old software
             * still sends this form. */
            year = take_num(&c, 2);
            if (year >= 0)
                year += year < 70 ? 2000 : 1900;
        }
        if (year < 0 || !take_char(&c, ' ') || (secs = take_time(&c)) < 0)
            return -1;
        if (c.end - c.p != 4 || memcmp(c.p, " GMT", 4) != 0)
            return -1;
    } else {
        /* asctime "Sun Nov  6 08:49:37 1994". */
        if (!take_char(&c, ' ') || (month = take_month(&c)) < 0 || !take_char(&c, ' '))
            return -1;
        if (take_char(&c, ' '))
            day = take_num(&c, 1);
        else
            day = take_num(&c, 2);
        if (day < 0 || !take_char(&c, ' ') || (secs = take_time(&c)) < 0 || !take_char(&c, ' ') ||
            (year = take_num(&c, 4)) < 0 || c.p != c.end)
            return -1;
    }
    if (day < 1 || day > 31)
        return -1;
    *out = (time_t)(days_from_civil(year, month, day) * 86400L + secs);
    return 0;
}

int sws_static_if_range_ok(sws_str_t if_range, sws_str_t etag, time_t mtime)
{
    time_t t;

    /* A weak tag ("W/...") never matches: If-Range needs strong validators. */
    if (if_range.len > 0 && (if_range.p[0] == '"' || if_range.p[0] == 'W'))
        return sws_str_eq(if_range, etag);
    return sws_static_date_parse(if_range, &t) == 0 && t == mtime;
}

/* Decimal digits at *p, saturating at UINT64_MAX: a position too large to
 * represent is past the end of any file, and the answer is the same. */
static int take_pos(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    while (*p < end && **p >= '0' && **p <= '9') {
        unsigned d = (unsigned)(**p - '0');
        v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
        (*p)++;
    }
    *out = v;
    return *p > s;
}

sws_static_range_rc_t sws_static_range_parse(sws_str_t range, uint64_t size, uint64_t *first,
                                             uint64_t *len)
{
    const char *p = range.p, *end = range.p + range.len;
    uint64_t a, b;

    if (range.len < 6 || strncasecmp(p, "bytes=", 6) != 0)
        return SWS_STATIC_RANGE_NONE;
    p += 6;
    if (memchr(p, ',', (size_t)(end - p)) != NULL)
        return SWS_STATIC_RANGE_NONE;
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;

    if (p < end && *p == '-') {
        p++;
        if (!take_pos(&p, end, &b) || p != end)
            return SWS_STATIC_RANGE_NONE;
        if (b == 0 || size == 0)
            return SWS_STATIC_RANGE_UNSATISFIABLE;
        *len = b < size ? b : size;
        *first = size - *len;
        return SWS_STATIC_RANGE_OK;
    }
    if (!take_pos(&p, end, &a) || p == end || *p++ != '-')
        return SWS_STATIC_RANGE_NONE;
    if (p == end) {
        b = UINT64_MAX;
    } else if (!take_pos(&p, end, &b) || p != end || b < a) {
        return SWS_STATIC_RANGE_NONE;
    }
    if (a >= size)
        return SWS_STATIC_RANGE_UNSATISFIABLE;
    if (b >= size)
        b = size - 1;
    *first = a;
    *len = b - a + 1;
    return SWS_STATIC_RANGE_OK;
}

size_t sws_static_content_range(char *out, uint64_t first, uint64_t len, uint64_t size)
{
    char *o = SWS_PUT_LIT(out, "bytes ");
    if (len == 0) {
        *o++ = '*';
    } else {
        o = sws_put_u64(o, first);
        *o++ = '-';
        o = sws_put_u64(o, first + len - 1);
    }
    *o++ = '/';
    o = sws_put_u64(o, size);
    *o = '\0';
    return (size_t)(o - out);
}
