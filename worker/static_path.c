#include "worker/static_path.h"

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20; /* ASCII lower case */
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Is the segment that ends at out[end] (exclusive) "." or ".."? */
static int is_dot_segment(const char *out, size_t start, size_t end)
{
    size_t n = end - start;
    return (n == 1 && out[start] == '.') || (n == 2 && out[start] == '.' && out[start + 1] == '.');
}

sws_static_path_rc_t sws_static_path_decode(const char *raw, size_t len, char *out,
                                            size_t outsize, size_t *out_len)
{
    size_t i = 0, o = 0, seg = 0;

    if (outsize == 0)
        return SWS_STATIC_PATH_TOO_LONG;
    while (i < len) {
        unsigned char c = (unsigned char)raw[i++];
        if (c == '%') {
            int hi = i < len ? hex_value((unsigned char)raw[i]) : -1;
            int lo = i + 1 < len ? hex_value((unsigned char)raw[i + 1]) : -1;
            if (hi < 0 || lo < 0)
                return SWS_STATIC_PATH_BAD;
            c = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (c == '\0')
            return SWS_STATIC_PATH_BAD;
        if (c == '/') {
            /* A leading slash would make the name absolute (the root is the
             * base), and an empty segment means nothing: drop both. A
             * decoded '/' ("%2F") counts like a literal one, since the file
             * system sees no difference, so neither may the check. */
            if (o == seg)
                continue;
            if (is_dot_segment(out, seg, o))
                return SWS_STATIC_PATH_BAD;
            seg = o + 1;
        }
        if (o + 1 >= outsize)
            return SWS_STATIC_PATH_TOO_LONG;
        out[o++] = (char)c;
    }
    if (is_dot_segment(out, seg, o))
        return SWS_STATIC_PATH_BAD;
    out[o] = '\0';
    *out_len = o;
    return SWS_STATIC_PATH_OK;
}
