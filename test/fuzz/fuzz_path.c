/*
 * Fuzz target: the normalized request path (core/path.h, ADR 0006).
 *
 * The input is a path as a client could send it; it is tried as it is and
 * with a leading '/' (so most inputs reach the segment logic). For each,
 * sws_path_normalize() without room, then with room when it asks, and the
 * properties of the rule are checked:
 *   - asking for room changes nothing: with room the answer is the same;
 *   - NORMAL hands back the input itself;
 *   - the output starts with '/', has no "//", no "." or ".." segment, no
 *     raw byte a normal path may not hold, every '%' starts an upper-case
 *     %XX that is neither %00 nor an unreserved character;
 *   - it is at most SWS_PATH_OUT_MAX(input) long, and not longer than the
 *     input when the input needed no encoding;
 *   - normalizing it again gives NORMAL (a fixed point);
 *   - sws_path_decode() of it gives a relative name without a "." or ".."
 *     segment, a NUL or an empty segment, or refuses an encoded '/'.
 * A broken property aborts with the input's normal form on stderr.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/path.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

static void broken(const char *what, sws_str_t in, sws_str_t out)
{
    fprintf(stderr, "fuzz_path: %s\n  in:  \"%.*s\"\n  out: \"%.*s\"\n", what, (int)in.len, in.p,
            (int)out.len, out.p);
    abort();
}

static int is_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static int is_upper_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

/* A byte that may stand raw in a normal path. */
static int raw_ok(unsigned char c)
{
    return is_unreserved(c) || (c != '\0' && strchr("!$&'()*+,;=:@/%", c) != NULL);
}

static int hex_of(unsigned char c)
{
    return c <= '9' ? c - '0' : c - 'A' + 10;
}

static void check_form(sws_str_t in, sws_str_t out)
{
    if (out.len == 0 || out.p[0] != '/')
        broken("does not start with '/'", in, out);
    size_t seg = 1;
    for (size_t i = 1; i <= out.len; i++) {
        if (i < out.len && out.p[i] != '/')
            continue;
        size_t n = i - seg;
        const char *s = out.p + seg;
        if (n == 0 && i < out.len)
            broken("empty segment", in, out);
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            broken("dot segment", in, out);
        seg = i + 1;
    }
    for (size_t i = 0; i < out.len; i++) {
        unsigned char c = (unsigned char)out.p[i];
        if (!raw_ok(c))
            broken("raw byte a normal path may not hold", in, out);
        if (c != '%')
            continue;
        if (i + 2 >= out.len)
            broken("'%' without two digits", in, out);
        unsigned char h = (unsigned char)out.p[i + 1], l = (unsigned char)out.p[i + 2];
        if (!is_upper_hex(h) || !is_upper_hex(l))
            broken("%XX not in upper-case hex", in, out);
        unsigned v = (unsigned)(hex_of(h) << 4 | hex_of(l));
        if (v == 0 || is_unreserved((unsigned char)v))
            broken("%00 or an encoded unreserved character", in, out);
        i += 2;
    }
}

static void check_decode(sws_str_t in, sws_str_t out)
{
    char name[4096];
    size_t len = 0;
    sws_path_decode_rc_t rc = sws_path_decode(out, name, sizeof(name), &len);
    if (rc != SWS_PATH_DECODE_OK)
        return;
    if (len != strlen(name))
        broken("decoded name holds a NUL", in, out);
    if (len > 0 && name[0] == '/')
        broken("decoded name is absolute", in, out);
    size_t seg = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && name[i] != '/')
            continue;
        size_t n = i - seg;
        if ((n == 1 && name[seg] == '.') || (n == 2 && name[seg] == '.' && name[seg + 1] == '.'))
            broken("decoded name has a dot segment", in, out);
        if (n == 0 && i < len)
            broken("decoded name has an empty segment", in, out);
        seg = i + 1;
    }
}

static int needs_encoding(sws_str_t in)
{
    for (size_t i = 0; i < in.len; i++)
        if (!raw_ok((unsigned char)in.p[i]))
            return 1;
    return 0;
}

static void check(sws_str_t in)
{
    const char *why = NULL;
    sws_str_t res = { NULL, 0 };
    sws_path_rc_t rc = sws_path_normalize(in, NULL, 0, &res, &why);
    size_t room = SWS_PATH_OUT_MAX(in.len);
    char *buf = malloc(room > 0 ? room : 1);
    if (buf == NULL)
        abort();
    sws_str_t res2 = { NULL, 0 };
    const char *why2 = NULL;
    sws_path_rc_t rc2 = sws_path_normalize(in, buf, room, &res2, &why2);

    if (rc2 == SWS_PATH_NEED_ROOM)
        broken("asks for room when given SWS_PATH_OUT_MAX", in, in);
    if (rc != SWS_PATH_NEED_ROOM && rc != rc2)
        broken("answer depends on the room given", in, res2);
    if (rc2 == SWS_PATH_BAD) {
        if (why2 == NULL || why2[0] == '\0')
            broken("refused without a reason", in, in);
        free(buf);
        return;
    }
    if (rc != SWS_PATH_NEED_ROOM && !sws_str_eq(res, res2))
        broken("output depends on the room given", in, res2);
    if (rc2 == SWS_PATH_NORMAL && (res2.p != in.p || res2.len != in.len))
        broken("NORMAL but not the input itself", in, res2);
    if (res2.len > room)
        broken("longer than SWS_PATH_OUT_MAX", in, res2);
    if (!needs_encoding(in) && res2.len > in.len)
        broken("longer than an input that needed no encoding", in, res2);
    check_form(in, res2);

    sws_str_t again;
    const char *why3 = NULL;
    if (sws_path_normalize(res2, NULL, 0, &again, &why3) != SWS_PATH_NORMAL)
        broken("the normal form is not normal", in, res2);
    check_decode(in, res2);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check((sws_str_t){ (const char *)data, size });
    char *slashed = malloc(size + 1);
    if (slashed == NULL)
        return 0;
    slashed[0] = '/';
    if (size > 0)
        memcpy(slashed + 1, data, size);
    check((sws_str_t){ slashed, size + 1 });
    free(slashed);
    return 0;
}
