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

/* The fields of an answer about a file: Last-Modified, ETag, then
 * Content-Range or Accept-Ranges, then Content-Type. */
enum { F_LAST_MODIFIED, F_ETAG, F_RANGE, F_TYPE, F_MAX };

/* Answer a failed open (sws_static_open_status), logging what an operator
 * must know. A root the worker may not search refuses every file below it:
 * that is a deployment error (a root owned by another user, a mode of
 * 0700), named once a minute; one unreadable file is not. The rate limit
 * comes before the probe of the root, so a refused request costs no
 * system call beyond its open: the root is probed at most once a minute,
 * and an unreadable file uses that minute's probe too (a root that breaks
 * just after is then named up to a minute later). */
static void answer_open_error(sws_stream_t *st, const char *root, int rootfd, const char *rel,
                              int err)
{
    const sws_request_t *r = &st->req;
    unsigned status = sws_static_open_status(err);
    unsigned quiet = 0;
    if ((err == EACCES || err == EPERM) &&
        sws_static_root_warn_due(&sws_worker_ctx(r)->static_roots, rootfd, r->start_ms) &&
        faccessat(AT_FDCWD, root, X_OK, AT_EACCESS) < 0)
        sws_log_error("static: root %s: %s (uid %u): every file below it is answered 403", root,
                      strerror(errno), (unsigned)geteuid());
    else if (err == ELOOP || err == EXDEV)
        sws_log_info("static: \"%s\" below %s leads out of the root through a symlink: refused",
                     rel, root);
    else if (status >= 500 &&
             sws_static_fail_log_due(&sws_worker_ctx(r)->static_roots, r->start_ms, &quiet))
        sws_log_error("static: open \"%s\" below %s: %s (%u more such failures not logged)",
                      rel, root, strerror(err), quiet);
    sws_stream_error(st, status);
}

/* A directory asked for without its trailing slash: send the client to the
 * name with one, so that relative links in its index resolve below it. The
 * path is normal (core/path.h): it never starts with "//", which would be
 * a network-path reference, a redirect to another host. */
static void redirect_to_directory(sws_stream_t *st)
{
    const sws_str_t parts[2] = { st->req.path, SWS_STR("/") };
    sws_redirect_send(st, 301, parts, 2, st->req.query);
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

/* Serve the open regular file fd (ownership passes to the stream). */
static void serve_file(sws_stream_t *st, int fd, const struct stat *st_file, const char *name,
                       size_t name_len)
{
    const sws_request_t *r = &st->req;
    char date[SWS_HTTP_DATE_BUF];
    char etag_buf[SWS_STATIC_ETAG_MAX];
    char range_buf[SWS_STATIC_CONTENT_RANGE_MAX];
    sws_header_t f[F_MAX];
    uint64_t size = (uint64_t)st_file->st_size;
    uint64_t first = 0, len = size;
    unsigned status = 200;
    sws_str_t etag;

    etag.len = sws_static_etag(etag_buf, st_file->st_mtime, size);
    etag.p = etag_buf;

    /* Validators go on every answer about the file, 304 and 416 included. */
    f[F_LAST_MODIFIED].name = SWS_STR("Last-Modified");
    f[F_LAST_MODIFIED].value = (sws_str_t){ date, sws_http_date_format(st_file->st_mtime, date) };
    f[F_ETAG].name = SWS_STR("ETag");
    f[F_ETAG].value = etag;

    if (not_modified(r, etag, st_file->st_mtime)) {
        close(fd);
        sws_stream_respond(st, 304, f, F_ETAG + 1, NULL, 0);
        return;
    }

    /* HEAD answers with the fields GET would get (RFC 9110 9.3.2), so a
     * Range applies to it too: the 206 and its Content-Length. */
    f[F_RANGE].name = SWS_STR("Accept-Ranges");
    f[F_RANGE].value = SWS_STR("bytes");
    const sws_str_t *range = sws_request_header(r, "Range");
    if (range != NULL) {
        const sws_str_t *if_range = sws_request_header(r, "If-Range");
        sws_static_range_rc_t rc = SWS_STATIC_RANGE_NONE;
        if (if_range == NULL || sws_static_if_range_ok(*if_range, etag, st_file->st_mtime))
            rc = sws_static_range_parse(*range, size, &first, &len);
        if (rc != SWS_STATIC_RANGE_NONE) {
            /* Unsatisfiable: the range is written as "*" with the size. */
            int ok = rc == SWS_STATIC_RANGE_OK;
            f[F_RANGE].name = SWS_STR("Content-Range");
            f[F_RANGE].value = (sws_str_t){ range_buf, sws_static_content_range(
                                                           range_buf, ok ? first : 0,
                                                           ok ? len : 0, size) };
            if (!ok) {
                close(fd);
                sws_stream_respond(st, 416, f, F_RANGE + 1, NULL, 0);
                return;
            }
            status = 206;
        }
    }
    f[F_TYPE].name = SWS_STR("Content-Type");
    f[F_TYPE].value = sws_mime_type(name, name_len);
    sws_stream_respond_file(st, status, f, F_MAX, fd, (off_t)first, len);
}

void sws_static_handle(sws_stream_t *st)
{
    const sws_request_t *r = &st->req;
    const sws_route_t *route = r->route;
    char rel[PATH_MAX];
    size_t rel_len;
    struct stat sb;

    if (!r->is_head && !sws_str_eq(r->method, SWS_STR("GET"))) {
        static const sws_header_t allow = { SWS_STR("Allow"), SWS_STR("GET, HEAD") };
        sws_stream_respond(st, 405, &allow, 1, NULL, 0);
        return;
    }
    /* The path is normal (dispatch made it so): no dot segment, no "//",
     * no %00. What is still encoded is decoded into the file name, except
     * an encoded '/', which would be a separator the route never saw. */
    if (sws_path_decode(r->path, rel, sizeof(rel), &rel_len) != SWS_PATH_DECODE_OK) {
        sws_stream_error(st, 404);
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
            sws_stream_error(st, 404);
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
        sws_stream_error(st, sws_static_open_status(err));
        return;
    }
    int fd = sws_static_open(roots, rootfd, rel, route->follow_symlinks);
    if (fd < 0) {
        answer_open_error(st, root, rootfd, rel, errno);
        return;
    }
    if (fstat(fd, &sb) < 0) {
        sws_log_error("static: fstat \"%s\" below %s: %s", rel, root, strerror(errno));
        close(fd);
        sws_stream_error(st, 500);
        return;
    }
    if (S_ISDIR(sb.st_mode) && !want_dir) {
        close(fd);
        redirect_to_directory(st);
        return;
    }
    if (!S_ISREG(sb.st_mode)) {
        /* A directory named like the index, a FIFO, a device, a socket. */
        close(fd);
        sws_stream_error(st, 403);
        return;
    }
    serve_file(st, fd, &sb, rel, rel_len);
}
