#include "worker/static.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fmt.h"
#include "core/http_date.h"
#include "core/log.h"
#include "worker/ctx.h"
#include "worker/handlers.h"
#include "worker/mime.h"
#include "core/path.h"
#include "worker/static_cond.h"
#include "worker/static_open.h"

/* The header lines serve_file writes, each sized by its literal: the
 * validators, then Content-Range or Accept-Ranges, then Content-Type. The
 * value bounds count the NUL their formatters write. */
static const char hdr_last_modified[] = "Last-Modified: ";
static const char hdr_etag[] = "\r\nETag: "; /* ends Last-Modified */
static const char hdr_content_range[] = "Content-Range: ";
static const char hdr_accept_ranges[] = "Accept-Ranges: bytes\r\n";
static const char hdr_content_type[] = "Content-Type: ";
static const char crlf[] = "\r\n";
#define RANGE_LINE_MAX \
    (SWS_LIT_LEN(hdr_content_range) + SWS_STATIC_CONTENT_RANGE_MAX + SWS_LIT_LEN(crlf))
#define HEADERS_MAX                                                                      \
    (SWS_LIT_LEN(hdr_last_modified) + SWS_HTTP_DATE_BUF + SWS_LIT_LEN(hdr_etag) +       \
     SWS_STATIC_ETAG_MAX + SWS_LIT_LEN(crlf) +                                           \
     (RANGE_LINE_MAX > SWS_LIT_LEN(hdr_accept_ranges) ? RANGE_LINE_MAX                   \
                                                      : SWS_LIT_LEN(hdr_accept_ranges)) + \
     SWS_LIT_LEN(hdr_content_type) + SWS_MIME_TYPE_MAX + SWS_LIT_LEN(crlf))
_Static_assert(HEADERS_MAX <= 512, "serve_file's header lines stay a small stack buffer");

/* Answer a failed open (sws_static_open_status), logging what an operator
 * must know. A root the worker may not search refuses every file below it:
 * that is a deployment error (a root owned by another user, a mode of
 * 0700), named once a minute; one unreadable file is not. */
static void answer_open_error(sws_request_t *r, const char *root, int rootfd, const char *rel,
                              int err)
{
    unsigned status = sws_static_open_status(err);
    unsigned quiet = 0;
    if ((err == EACCES || err == EPERM) && faccessat(AT_FDCWD, root, X_OK, AT_EACCESS) < 0 &&
        sws_static_root_warn_due(&sws_worker_ctx(r)->static_roots, rootfd, r->start_ms))
        sws_log_error("static: root %s: %s (uid %u): every file below it is answered 403", root,
                      strerror(errno), (unsigned)geteuid());
    else if (err == ELOOP || err == EXDEV)
        sws_log_info("static: \"%s\" below %s leads out of the root through a symlink: refused",
                     rel, root);
    else if (status >= 500 &&
             sws_static_fail_log_due(&sws_worker_ctx(r)->static_roots, r->start_ms, &quiet))
        sws_log_error("static: open \"%s\" below %s: %s (%u more such failures not logged)",
                      rel, root, strerror(err), quiet);
    sws_response_error(r, status);
}

/* A directory asked for without its trailing slash: send the client to the
 * name with one, so that relative links in its index resolve below it. The
 * path is normal (core/path.h): it never starts with "//", which would be
 * a network-path reference, a redirect to another host. */
static void redirect_to_directory(sws_request_t *r)
{
    const sws_str_t parts[2] = { r->path, SWS_STR("/") };
    sws_redirect_send(r, 301, parts, 2, r->query);
}

/* 304 for a matching If-None-Match (it takes precedence) or, without one,
 * an If-Modified-Since not older than the file (RFC 9110 13.2.2). */
static int not_modified(const sws_request_t *r, sws_str_t etag, time_t mtime)
{
    const sws_str_t *inm = sws_request_header(r, "If-None-Match");
    if (inm != NULL)
        return sws_static_etag_listed(*inm, etag);
    const sws_str_t *ims = sws_request_header(r, "If-Modified-Since");
    time_t since;
    return ims != NULL && sws_static_date_parse(*ims, &since) == 0 && mtime <= since;
}

/* Serve the open regular file fd (ownership passes to the response). */
static void serve_file(sws_request_t *r, int fd, const struct stat *st, const char *name,
                       size_t name_len)
{
    char hdr[HEADERS_MAX];
    char etag_buf[SWS_STATIC_ETAG_MAX];
    char *o = hdr;
    uint64_t size = (uint64_t)st->st_size;
    uint64_t first = 0, len = size;
    unsigned status = 200;
    sws_str_t etag;

    etag.len = sws_static_etag(etag_buf, st->st_mtime, size);
    etag.p = etag_buf;

    /* Validators go on every answer about the file, 304 and 416 included. */
    o = SWS_PUT_LIT(o, hdr_last_modified);
    o += sws_http_date_format(st->st_mtime, o);
    o = SWS_PUT_LIT(o, hdr_etag);
    o = sws_put(o, etag.p, etag.len);
    o = SWS_PUT_LIT(o, crlf);

    if (not_modified(r, etag, st->st_mtime)) {
        close(fd);
        sws_response_send(r, 304, hdr, (size_t)(o - hdr), "", 0);
        return;
    }

    /* HEAD answers with the headers GET would get (RFC 9110 9.3.2), so a
     * Range applies to it too: the 206 and its Content-Length. */
    const sws_str_t *range = sws_request_header(r, "Range");
    if (range != NULL) {
        const sws_str_t *if_range = sws_request_header(r, "If-Range");
        sws_static_range_rc_t rc = SWS_STATIC_RANGE_NONE;
        if (if_range == NULL || sws_static_if_range_ok(*if_range, etag, st->st_mtime))
            rc = sws_static_range_parse(*range, size, &first, &len);
        if (rc != SWS_STATIC_RANGE_NONE) {
            /* Unsatisfiable: the range is written as "*" with the size. */
            int ok = rc == SWS_STATIC_RANGE_OK;
            o = SWS_PUT_LIT(o, hdr_content_range);
            o += sws_static_content_range(o, ok ? first : 0, ok ? len : 0, size);
            o = SWS_PUT_LIT(o, crlf);
            if (!ok) {
                close(fd);
                sws_response_send(r, 416, hdr, (size_t)(o - hdr), "", 0);
                return;
            }
            status = 206;
        }
    }
    if (status == 200)
        o = SWS_PUT_LIT(o, hdr_accept_ranges);
    sws_str_t type = sws_mime_type(name, name_len);
    o = SWS_PUT_LIT(o, hdr_content_type);
    o = sws_put(o, type.p, type.len);
    o = SWS_PUT_LIT(o, crlf);
    sws_response_sendfile(r, status, hdr, (size_t)(o - hdr), fd, (off_t)first, len);
}

void sws_static_handle(sws_request_t *r)
{
    const sws_route_t *route = r->route;
    char rel[PATH_MAX];
    size_t rel_len;
    struct stat st;

    if (!r->is_head && !sws_str_eq(r->method, SWS_STR("GET"))) {
        static const char allow[] = "Allow: GET, HEAD\r\n";
        sws_response_send(r, 405, allow, SWS_LIT_LEN(allow), "", 0);
        return;
    }
    /* The path is normal (dispatch made it so): no dot segment, no "//",
     * no %00. What is still encoded is decoded into the file name, except
     * an encoded '/', which would be a separator the route never saw. */
    if (sws_path_decode(r->path, rel, sizeof(rel), &rel_len) != SWS_PATH_DECODE_OK) {
        sws_response_error(r, 404);
        return;
    }

    /* A name ending in '/' (or the root itself) asks for the directory's
     * index: open that directly rather than the directory first. */
    int want_dir = rel_len == 0 || rel[rel_len - 1] == '/';
    if (want_dir) {
        /* Never empty: the config layer fills it and the table refuses "". */
        const char *index = sws_table_str(r->table, route->index);
        size_t index_len = route->index.len;
        if (rel_len + index_len >= sizeof(rel)) {
            sws_response_error(r, 404);
            return;
        }
        memcpy(rel + rel_len, index, index_len + 1);
        rel_len += index_len;
    }

    sws_static_roots_t *roots = &sws_worker_ctx(r)->static_roots;
    const char *root = sws_table_str(r->table, route->root);
    int rootfd = sws_static_root_fd(roots, root, route->root.len, r->start_ms);
    if (rootfd < 0) {
        int err = errno;
        unsigned quiet = 0;
        if (sws_static_fail_log_due(roots, r->start_ms, &quiet))
            sws_log_error("static: root %s: %s (%u more such failures not logged)", root,
                          strerror(err), quiet);
        sws_response_error(r, sws_static_open_status(err));
        return;
    }
    int fd = sws_static_open(roots, rootfd, rel, route->follow_symlinks);
    if (fd < 0) {
        answer_open_error(r, root, rootfd, rel, errno);
        return;
    }
    if (fstat(fd, &st) < 0) {
        sws_log_error("static: fstat \"%s\" below %s: %s", rel, root, strerror(errno));
        close(fd);
        sws_response_error(r, 500);
        return;
    }
    if (S_ISDIR(st.st_mode) && !want_dir) {
        close(fd);
        redirect_to_directory(r);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        /* A directory named like the index, a FIFO, a device, a socket. */
        close(fd);
        sws_response_error(r, 403);
        return;
    }
    serve_file(r, fd, &st, rel, rel_len);
}
