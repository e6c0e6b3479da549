#include "worker/mime.h"

#include <strings.h>

#include "core/fmt.h"

typedef struct mime_entry {
    const char *ext;
    size_t ext_len;
    sws_str_t type;
} mime_entry_t;

/* A type longer than SWS_MIME_TYPE_MAX is a negative array size. */
#define MIME_FITS(type) (0 * sizeof(char[SWS_LIT_LEN(type) <= SWS_MIME_TYPE_MAX ? 1 : -1]))
#define MIME(ext, type) { ext, SWS_LIT_LEN(ext), { type, SWS_LIT_LEN(type) + MIME_FITS(type) } }
#define UTF8 "; charset=utf-8"
#define MIME_DEFAULT "application/octet-stream"
_Static_assert(SWS_LIT_LEN(MIME_DEFAULT) <= SWS_MIME_TYPE_MAX, "the default type fits");

/* Ordered roughly by how often a site serves them: the scan stops at the
 * first hit, and a table this small is faster scanned than hashed. */
static const mime_entry_t mime_table[] = {
    MIME("html", "text/html" UTF8),
    MIME("css", "text/css" UTF8),
    MIME("js", "text/javascript" UTF8),
    MIME("png", "image/png"),
    MIME("jpg", "image/jpeg"),
    MIME("svg", "image/svg+xml"),
    MIME("json", "application/json"),
    MIME("woff2", "font/woff2"),
    MIME("webp", "image/webp"),
    MIME("ico", "image/x-icon"),
    MIME("txt", "text/plain" UTF8),
    MIME("htm", "text/html" UTF8),
    MIME("mjs", "text/javascript" UTF8),
    MIME("jpeg", "image/jpeg"),
    MIME("gif", "image/gif"),
    MIME("avif", "image/avif"),
    MIME("woff", "font/woff"),
    MIME("ttf", "font/ttf"),
    MIME("otf", "font/otf"),
    MIME("map", "application/json"),
    MIME("xml", "text/xml" UTF8),
    MIME("md", "text/markdown" UTF8),
    MIME("csv", "text/csv" UTF8),
    MIME("wasm", "application/wasm"),
    MIME("pdf", "application/pdf"),
    MIME("zip", "application/zip"),
    MIME("gz", "application/gzip"),
    MIME("tar", "application/x-tar"),
    MIME("mp4", "video/mp4"),
    MIME("webm", "video/webm"),
    MIME("mp3", "audio/mpeg"),
    MIME("ogg", "audio/ogg"),
};

sws_str_t sws_mime_type(const char *name, size_t len)
{
    /* Walk back to the last '.' of the last path segment; a leading dot
     * (".profile") names a hidden file, not an extension. */
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i > 1 && name[i - 1] == '.' && name[i - 2] != '/') {
        const char *ext = name + i;
        size_t ext_len = len - i;
        for (size_t k = 0; k < sizeof(mime_table) / sizeof(mime_table[0]); k++) {
            const mime_entry_t *m = &mime_table[k];
            if (m->ext_len == ext_len && strncasecmp(m->ext, ext, ext_len) == 0)
                return m->type;
        }
    }
    return SWS_STR(MIME_DEFAULT);
}
