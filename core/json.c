#include "core/json.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/fmt.h"
#include "core/str.h"

/* ---- the writer ---- */

static int reserve(sws_json_out_t *o, size_t more)
{
    if (o->oom)
        return -1;
    if (o->cap - o->len >= more)
        return 0;
    size_t cap = o->cap != 0 ? o->cap : 256;
    while (cap - o->len < more)
        cap *= 2;
    char *p = realloc(o->p, cap);
    if (p == NULL) {
        o->oom = 1;
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

void sws_json_raw(sws_json_out_t *o, const char *s, size_t n)
{
    if (reserve(o, n) < 0)
        return;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* The length of the valid UTF-8 sequence at p (2 to 4 bytes, RFC 3629: no
 * overlong form, no surrogate, nothing past U+10FFFF), or 0. */
static size_t utf8_seq_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4;
    else
        return 0;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    }
    return len;
}

char *sws_json_put_escaped(char *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];
        size_t seq;
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            *o++ = (char)ch;
        } else if (ch >= 0x80 && (seq = utf8_seq_len(p + i, n - i)) > 0) {
            o = sws_put(o, p + i, seq);
            i += seq - 1;
        } else {
            o = SWS_PUT_LIT(o, "\\u00");
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    return o;
}

void sws_json_str(sws_json_out_t *o, const char *s, size_t n)
{
    if (reserve(o, SWS_JSON_ESC_MAX(n) + 2) < 0)
        return;
    char *w = o->p + o->len;
    *w++ = '"';
    w = sws_json_put_escaped(w, s, n);
    *w++ = '"';
    o->len = (size_t)(w - o->p);
}

void sws_json_cstr(sws_json_out_t *o, const char *s)
{
    sws_json_str(o, s, strlen(s));
}

void sws_json_u64(sws_json_out_t *o, uint64_t v)
{
    if (reserve(o, SWS_FMT_U64_MAX) < 0)
        return;
    o->len = (size_t)(sws_put_u64(o->p + o->len, v) - o->p);
}

void sws_json_out_free(sws_json_out_t *o)
{
    free(o->p);
    memset(o, 0, sizeof(*o));
}

void sws_json_error(sws_json_out_t *o, const char *msg)
{
    sws_json_lit(o, "{\"error\": ");
    sws_json_cstr(o, msg);
    sws_json_lit(o, "}\n");
}

/* ---- the reader ---- */

typedef struct reader {
    const char *start, *p, *end;
    char *err;
    size_t errlen;
} reader_t;

static void skip_ws(reader_t *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int expect(reader_t *r, char ch, const char *what)
{
    skip_ws(r);
    if (r->p >= r->end)
        return sws_errf(r->err, r->errlen, "bad JSON: expected %s, got the end", what);
    if (*r->p != ch)
        return sws_errf(r->err, r->errlen, "bad JSON: expected %s at byte %zu", what,
                        (size_t)(r->p - r->start));
    r->p++;
    return 0;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = sws_hex_value((unsigned char)p[i]);
        if (d < 0)
            return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *w, unsigned cp)
{
    if (cp < 0x80) {
        w[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        w[0] = (char)(0xc0 | (cp >> 6));
        w[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        w[0] = (char)(0xe0 | (cp >> 12));
        w[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        w[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    w[0] = (char)(0xf0 | (cp >> 18));
    w[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    w[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    w[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* \uXXXX (and its low surrogate when it is a high one) at r->p, just past
 * the 'u'. */
static int unicode_escape(reader_t *r, unsigned *cp)
{
    unsigned hi, lo;
    if (r->end - r->p < 4 || hex4(r->p, &hi) < 0)
        return sws_errf(r->err, r->errlen, "bad JSON: \\u needs four hex digits");
    r->p += 4;
    if (hi == 0)
        return sws_errf(r->err, r->errlen, "bad JSON: \\u0000 is not accepted");
    if (hi >= 0xdc00 && hi <= 0xdfff)
        return sws_errf(r->err, r->errlen, "bad JSON: a lone low surrogate");
    if (hi < 0xd800 || hi > 0xdbff) {
        *cp = hi;
        return 0;
    }
    if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' || hex4(r->p + 2, &lo) < 0 ||
        lo < 0xdc00 || lo > 0xdfff)
        return sws_errf(r->err, r->errlen, "bad JSON: a high surrogate without its low one");
    r->p += 6;
    *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    return 0;
}

/* A string at r->p (the opening quote), decoded into out (outsize bytes
 * with the NUL). what names it for the message ("a key", "a value"). */
static int read_string(reader_t *r, char *out, size_t outsize, const char *what)
{
    size_t len = 0;
    if (expect(r, '"', what) < 0)
        return -1;
    for (;;) {
        if (r->p >= r->end)
            return sws_errf(r->err, r->errlen, "bad JSON: a string without its closing quote");
        unsigned char ch = (unsigned char)*r->p++;
        char one[4];
        size_t n = 1;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return sws_errf(r->err, r->errlen, "bad JSON: a control byte inside a string");
        one[0] = (char)ch;
        if (ch == '\\') {
            if (r->p >= r->end)
                return sws_errf(r->err, r->errlen, "bad JSON: a string ends in a backslash");
            char e = *r->p++;
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            const char *at = e != '\0' ? strchr(from, e) : NULL;
            unsigned cp = 0;
            if (at != NULL) {
                one[0] = to[at - from];
            } else if (e == 'u') {
                if (unicode_escape(r, &cp) < 0)
                    return -1;
                n = put_utf8(one, cp);
            } else {
                return sws_errf(r->err, r->errlen, "bad JSON: unknown escape \\%c",
                                e >= 0x20 && e < 0x7f ? e : '?');
            }
        }
        if (len + n >= outsize)
            return sws_errf(r->err, r->errlen, "%s longer than %zu bytes", what, outsize - 1);
        memcpy(out + len, one, n);
        len += n;
    }
    out[len] = '\0';
    return 0;
}

static int is_digit(const reader_t *r)
{
    return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? copied as text. */
static int read_number(reader_t *r, char *out, size_t outsize)
{
    const char *start = r->p;
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (!is_digit(r))
        return sws_errf(r->err, r->errlen, "bad JSON: a number without digits");
    if (*r->p == '0')
        r->p++;
    else
        while (is_digit(r))
            r->p++;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (!is_digit(r))
            return sws_errf(r->err, r->errlen, "bad JSON: no digit after a decimal point");
        while (is_digit(r))
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (!is_digit(r))
            return sws_errf(r->err, r->errlen, "bad JSON: no digit in an exponent");
        while (is_digit(r))
            r->p++;
    }
    size_t n = (size_t)(r->p - start);
    if (n >= outsize)
        return sws_errf(r->err, r->errlen, "a number longer than %zu bytes", outsize - 1);
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}

static int read_word(reader_t *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return -1;
    r->p += n;
    return 0;
}

static int read_value(reader_t *r, sws_json_field_t *f)
{
    skip_ws(r);
    if (r->p >= r->end)
        return sws_errf(r->err, r->errlen, "bad JSON: expected a value, got the end");
    switch (*r->p) {
    case '"':
        f->type = SWS_JSON_STRING;
        return read_string(r, f->value, sizeof(f->value), "a value");
    case '{':
    case '[':
        return sws_errf(r->err, r->errlen, "\"%s\": nested objects and arrays are not accepted",
                        f->key);
    case 't':
        f->type = SWS_JSON_TRUE;
        break;
    case 'f':
        f->type = SWS_JSON_FALSE;
        break;
    case 'n':
        f->type = SWS_JSON_NULL;
        break;
    default:
        f->type = SWS_JSON_NUMBER;
        return read_number(r, f->value, sizeof(f->value));
    }
    static const char *const words[] = {
        [SWS_JSON_TRUE] = "true", [SWS_JSON_FALSE] = "false", [SWS_JSON_NULL] = "null"
    };
    if (read_word(r, words[f->type]) < 0)
        return sws_errf(r->err, r->errlen, "bad JSON: expected a value for \"%s\"", f->key);
    strcpy(f->value, words[f->type]);
    return 0;
}

const sws_json_field_t *sws_json_field(const sws_json_field_t *f, size_t count, const char *key)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(f[i].key, key) == 0)
            return &f[i];
    return NULL;
}

int sws_json_parse_flat(const char *text, size_t n, sws_json_field_t f[SWS_JSON_FIELDS_MAX],
                        size_t *count, char *err, size_t errlen)
{
    reader_t r = { .start = text, .p = text, .end = text + n, .err = err, .errlen = errlen };
    *count = 0;
    if (expect(&r, '{', "an object") < 0)
        return -1;
    skip_ws(&r);
    if (r.p < r.end && *r.p == '}') {
        r.p++;
    } else {
        for (;;) {
            if (*count == SWS_JSON_FIELDS_MAX)
                return sws_errf(err, errlen, "more than %d fields", SWS_JSON_FIELDS_MAX);
            sws_json_field_t *cur = &f[*count];
            if (read_string(&r, cur->key, sizeof(cur->key), "a key") < 0)
                return -1;
            if (sws_json_field(f, *count, cur->key) != NULL)
                return sws_errf(err, errlen, "\"%s\" is written twice", cur->key);
            if (expect(&r, ':', "':'") < 0 || read_value(&r, cur) < 0)
                return -1;
            (*count)++;
            skip_ws(&r);
            if (r.p < r.end && *r.p == ',') {
                r.p++;
                continue;
            }
            if (expect(&r, '}', "',' or '}'") < 0)
                return -1;
            break;
        }
    }
    skip_ws(&r);
    if (r.p != r.end)
        return sws_errf(err, errlen, "bad JSON: bytes after the object");
    return 0;
}
