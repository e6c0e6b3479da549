#include "core/path.h"

#include <string.h>

static const char hex_digits[] = "0123456789ABCDEF";

/* RFC 3986 unreserved: its %XX form means the same, so it is decoded. */
static int is_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* May stand raw in a segment (RFC 3986 pchar without pct-encoded). The
 * sub-delims, ':' and '@' are kept as the client wrote them, raw or
 * encoded: RFC 3986 lets an application give the two spellings different
 * meanings (";" starts a path parameter for some upstreams). */
static int is_raw_ok(unsigned char c)
{
    return is_unreserved(c) || (c != '\0' && strchr("!$&'()*+,;=:@", c) != NULL);
}

/* The output so far, written lazily: while it equals the input byte for
 * byte (the common case), it is in[0..o) and nothing is copied. */
typedef struct writer {
    const char *in;
    char *out;  /* NULL: no room given */
    size_t o;   /* output length */
    int copied; /* the output lives in out */
} writer_t;

static const char *writer_base(const writer_t *w)
{
    return w->copied ? w->out : w->in;
}

/* Append n bytes standing for the input in[i0..i0+consumed). -1: the
 * output departs from the input and there is no room. */
static int emit(writer_t *w, const char *b, size_t n, size_t i0, size_t consumed)
{
    if (!w->copied) {
        if (i0 == w->o && consumed == n && memcmp(w->in + i0, b, n) == 0) {
            w->o += n;
            return 0;
        }
        if (w->out == NULL)
            return -1;
        memcpy(w->out, w->in, w->o);
        w->copied = 1;
    }
    memcpy(w->out + w->o, b, n);
    w->o += n;
    return 0;
}

/* The segment output[*seg..o) is complete: drop it when it is ".", drop it
 * and the one before when it is "..". Dropping only shortens the output, so
 * it never needs room. -1: ".." above the root. */
static int close_segment(writer_t *w, size_t *seg)
{
    const char *b = writer_base(w) + *seg;
    size_t n = w->o - *seg;

    if (n == 1 && b[0] == '.') {
        w->o = *seg;
    } else if (n == 2 && b[0] == '.' && b[1] == '.') {
        if (*seg == 1)
            return -1;
        /* output[0] is '/', so the walk back stops at 1 at the latest. */
        size_t k = *seg - 1;
        while (writer_base(w)[k - 1] != '/')
            k--;
        w->o = *seg = k;
    }
    return 0;
}

sws_path_rc_t sws_path_normalize(sws_str_t in, char *out, size_t outsize, sws_str_t *res,
                                 const char **why)
{
    writer_t w = { in.p, out, 1, 0 };
    size_t i = 1, seg = 1;
    char enc[3] = { '%', 0, 0 };

    if (in.len == 0 || in.p[0] != '/') {
        *why = "not an absolute path";
        return SWS_PATH_BAD;
    }
    if (outsize < SWS_PATH_OUT_MAX(in.len))
        w.out = NULL;
    while (i < in.len) {
        unsigned char c = (unsigned char)in.p[i];
        size_t i0 = i;
        if (c == '/') {
            i++;
            if (w.o > seg && close_segment(&w, &seg) < 0)
                goto above_root;
            if (w.o == seg)
                continue; /* an empty or dot segment: its '/' goes too */
            if (emit(&w, "/", 1, i0, 1) < 0)
                return SWS_PATH_NEED_ROOM;
            seg = w.o;
            continue;
        }
        if (c == '%') {
            int hi = i + 1 < in.len ? sws_hex_value((unsigned char)in.p[i + 1]) : -1;
            int lo = i + 2 < in.len ? sws_hex_value((unsigned char)in.p[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                *why = "malformed percent-encoding";
                return SWS_PATH_BAD;
            }
            c = (unsigned char)(hi << 4 | lo);
            i += 3;
            if (c == '\0') {
                *why = "encoded NUL";
                return SWS_PATH_BAD;
            }
        } else {
            if (c <= ' ' || c == 0x7f || c == '#') {
                *why = "control character, space or '#' in the path";
                return SWS_PATH_BAD;
            }
            i++;
        }
        int rc;
        if (is_unreserved(c) || (i - i0 == 1 && is_raw_ok(c))) {
            rc = emit(&w, (const char *)&c, 1, i0, i - i0);
        } else {
            enc[1] = hex_digits[c >> 4];
            enc[2] = hex_digits[c & 15];
            rc = emit(&w, enc, 3, i0, i - i0);
        }
        if (rc < 0)
            return SWS_PATH_NEED_ROOM;
    }
    if (w.o > seg && close_segment(&w, &seg) < 0)
        goto above_root;
    /* Uncopied, the output is a prefix of the input (dot segments at the
     * end only shorten it): hand out that prefix. */
    *res = (sws_str_t){ writer_base(&w), w.o };
    return !w.copied && w.o == in.len ? SWS_PATH_NORMAL : SWS_PATH_CHANGED;

above_root:
    *why = "\"..\" above the root";
    return SWS_PATH_BAD;
}

sws_path_decode_rc_t sws_path_decode(sws_str_t path, char *out, size_t outsize, size_t *out_len)
{
    size_t i = path.len > 0 && path.p[0] == '/' ? 1 : 0, o = 0;

    if (outsize == 0)
        return SWS_PATH_DECODE_TOO_LONG;
    while (i < path.len) {
        unsigned char c = (unsigned char)path.p[i++];
        int hi, lo;
        if (c == '%' && i + 1 < path.len && (hi = sws_hex_value((unsigned char)path.p[i])) >= 0 &&
            (lo = sws_hex_value((unsigned char)path.p[i + 1])) >= 0) {
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
            if (c == '/' || c == '\0')
                return SWS_PATH_DECODE_SLASH;
        }
        if (o + 1 >= outsize)
            return SWS_PATH_DECODE_TOO_LONG;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    *out_len = o;
    return SWS_PATH_DECODE_OK;
}
