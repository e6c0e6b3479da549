/* HTTP/1.1 serialization of a stream's response (sws_http1_sink, declared
 * in worker/http1.h): the stream knows no protocol, this file is where its
 * head, body and end become bytes on the connection. */
#include "worker/http1.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "core/fmt.h"
#include "worker/conn.h"

/* Files up to this size are read into the output buffer, so the response
 * leaves in one write with the responses around it; larger ones go with
 * sendfile(2) from the page cache. */
#define INLINE_FILE (16u * 1024)

/* Body pieces from this size on are written at once from the producer's
 * memory (sws_conn_write_through) rather than copied into the output:
 * below it the copy is cheaper than a system call of its own, and small
 * responses keep leaving in one write with their neighbours. */
#define WRITE_THROUGH_MIN (8u * 1024)

/* The fixed pieces of a response head, each written by sink_head and
 * sized by its reservation (SWS_LIT_LEN), so the room reserved is what the
 * lines take by construction. */
static const char head_version[] = "HTTP/1.1 ";
#define HEAD_STATUS_LEN 4 /* "NNN ": three digits and a space */
static const char head_date[] = "\r\nDate: "; /* ends the status line */
static const char head_server[] = "Server: ";
static const char head_length[] = "Content-Length: ";
static const char head_chunked[] = "Transfer-Encoding: chunked\r\n";
static const char head_close[] = "Connection: close\r\n";
static const char head_keep_alive[] = "Connection: keep-alive\r\n";
static const char field_sep[] = ": ";
static const char crlf[] = "\r\n";
static const char last_chunk[] = "0\r\n";
/* A chunk's size line: hex digits of a 64-bit size and its CRLF; its data
 * ends with another CRLF. */
#define CHUNK_FRAMING_MAX (16 + 2 * SWS_LIT_LEN(crlf))
/* The framing that may follow bytes up to the mark fits the output's
 * slack: a chunk-size line for the last piece, then the last chunk. */
_Static_assert(2 * CHUNK_FRAMING_MAX <= SWS_CONN_OUT_SLACK, "output slack below chunk framing");

/* Bytes the fields take as "Name: value\r\n" lines. */
static size_t fields_len(const sws_header_t *h, unsigned n)
{
    size_t len = 0;
    for (unsigned i = 0; i < n; i++)
        len += h[i].name.len + SWS_LIT_LEN(field_sep) + h[i].value.len + SWS_LIT_LEN(crlf);
    return len;
}

static char *put_fields(char *o, const sws_header_t *h, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        o = sws_put(o, h[i].name.p, h[i].name.len);
        o = SWS_PUT_LIT(o, field_sep);
        o = sws_put(o, h[i].value.p, h[i].value.len);
        o = SWS_PUT_LIT(o, crlf);
    }
    return o;
}

/* The output position of what is queued now: bytes already written plus
 * those waiting (stable across the buffer's compaction). */
static uint64_t out_pos(const sws_conn_t *c)
{
    return c->bytes_out + (c->olen - c->osent);
}

/* How the body is delimited (RFC 9112 6.3): none for 204 and 304, a length
 * when the producer knows it (also for HEAD, which gets the headers GET
 * would), else chunks on HTTP/1.1 and the end of the connection on
 * HTTP/1.0. */
static sws_str_t framing_field(sws_http1_t *h, sws_stream_t *st)
{
    sws_request_t *r = &st->req;
    h->out_chunked = 0;
    if (r->status == 204 || r->status == 304)
        return SWS_STR("");
    if (st->length != SWS_STREAM_LENGTH_UNKNOWN)
        return SWS_STR(head_length);
    if (r->is_head)
        return SWS_STR("");
    if (r->version_minor == 0) {
        r->keep_alive = 0;
        return SWS_STR("");
    }
    h->out_chunked = 1;
    return SWS_STR(head_chunked);
}

/* A producer wrote outside the connection's turn (from an upstream's
 * event): have the connection write it and look at the exchange again. */
static void sink_wake(sws_conn_t *c)
{
    if (!c->running) {
        c->want_writable = 1;
        sws_conn_wake(c);
    }
}

/* "HTTP/1.1 NNN Reason" (no line end), at o. */
static char *put_status_line(char *o, unsigned status, const char *reason, size_t reason_len)
{
    o = SWS_PUT_LIT(o, head_version);
    *o++ = (char)('0' + status / 100 % 10);
    *o++ = (char)('0' + status / 10 % 10);
    *o++ = (char)('0' + status % 10);
    *o++ = ' ';
    return sws_put(o, reason, reason_len);
}

/* The fields h[0..n) and the empty line end a head written up to o. */
static void finish_head(sws_conn_t *c, char *o, const sws_header_t *h, unsigned n)
{
    o = put_fields(o, h, n);
    o = SWS_PUT_LIT(o, crlf);
    c->olen = (size_t)(o - c->obuf);
    sink_wake(c);
}

static int sink_head(sws_stream_t *st, const sws_header_t *fields, unsigned nfields,
                     size_t body_room)
{
    sws_request_t *r = &st->req;
    sws_conn_t *c = r->conn;
    sws_http1_t *h = sws_http1_of(c);
    sws_conn_set_t *s = c->set;
    sws_loop_t *loop = s->loop;
    unsigned status = r->status;
    const char *reason = sws_http_reason(status);
    size_t reason_len = strlen(reason);
    sws_str_t framing = framing_field(h, st);
    int with_length = framing.p == head_length;
    if (s->draining)
        r->keep_alive = 0;
    /* HTTP/1.1 keeps alive unless told; HTTP/1.0 closes unless told. */
    sws_str_t connection = { "", 0 };
    if (!r->keep_alive)
        connection = SWS_STR(head_close);
    else if (r->version_minor == 0)
        connection = SWS_STR(head_keep_alive);
    size_t need = SWS_LIT_LEN(head_version) + HEAD_STATUS_LEN + reason_len +
                  SWS_LIT_LEN(head_date) + loop->http_date_len + SWS_LIT_LEN(crlf) +
                  connection.len + fields_len(fields, nfields) + SWS_LIT_LEN(crlf) + body_room;
    if (s->server_name.len > 0)
        need += SWS_LIT_LEN(head_server) + s->server_name.len + SWS_LIT_LEN(crlf);
    if (with_length)
        need += SWS_LIT_LEN(head_length) + SWS_FMT_U64_MAX + SWS_LIT_LEN(crlf);
    else
        need += framing.len;
    if (h->out_chunked)
        need += CHUNK_FRAMING_MAX;
    if (sws_conn_reserve(c, need) < 0)
        return -1;
    h->head_pos = out_pos(c);
    char *o = put_status_line(c->obuf + c->olen, status, reason, reason_len);
    o = SWS_PUT_LIT(o, head_date);
    o = sws_put(o, loop->http_date, loop->http_date_len);
    o = SWS_PUT_LIT(o, crlf);
    if (s->server_name.len > 0) {
        o = SWS_PUT_LIT(o, head_server);
        o = sws_put(o, s->server_name.p, s->server_name.len);
        o = SWS_PUT_LIT(o, crlf);
    }
    if (with_length) {
        o = SWS_PUT_LIT(o, head_length);
        o = sws_put_u64(o, st->length);
        o = SWS_PUT_LIT(o, crlf);
    } else {
        o = sws_put(o, framing.p, framing.len);
    }
    o = sws_put(o, connection.p, connection.len);
    finish_head(c, o, fields, nfields);
    return 0;
}

/* The output takes more body while sws_conn_output_blocked is clear:
 * below its high-water mark, and no file range queued (bytes appended now
 * would overtake it). A closed connection takes everything and drops it,
 * so no producer waits on it. */
static size_t sink_room_bytes(const sws_stream_t *st)
{
    sws_conn_t *c = st->req.conn;
    if (c->phase == SWS_CONN_CLOSED)
        return SIZE_MAX;
    size_t room = sws_conn_out_room(c);
    if (room == 0)
        return 0;
    /* Chunk framing goes into the output too. Bytes read from a chunked
     * upstream carry their own framing, about as long as ours, except for
     * the first piece (the rest of a chunk begun in an earlier read) and
     * the reservation of the last (CHUNK_FRAMING_MAX): two framings' worth
     * keeps a read's output within the mark. Never 0 while the output
     * is not blocked, or nothing would call the producer again: so the last few
     * bytes below the mark are read one at a time, and one of them may
     * pass the mark by its framing (SWS_CONN_OUT_SLACK holds that). */
    if (sws_http1_of(c)->out_chunked)
        room = room > 2 * CHUNK_FRAMING_MAX ? room - 2 * CHUNK_FRAMING_MAX : 1;
    return room;
}

/* Room for n body bytes at the end of the output, after a chunk-size line
 * when the body goes in chunks; where the bytes go. NULL: out of memory. */
static char *body_room(sws_conn_t *c, size_t n)
{
    sws_http1_t *h = sws_http1_of(c);
    if (sws_conn_reserve(c, n + (h->out_chunked ? CHUNK_FRAMING_MAX : 0)) < 0)
        return NULL;
    char *o = c->obuf + c->olen;
    if (h->out_chunked) {
        o = sws_put_hex(o, n);
        o = SWS_PUT_LIT(o, crlf);
    }
    return o;
}

/* n bytes were written at o (from body_room): close the chunk. */
static void body_done(sws_conn_t *c, char *o, size_t n)
{
    o += n;
    if (sws_http1_of(c)->out_chunked)
        o = SWS_PUT_LIT(o, crlf);
    c->olen = (size_t)(o - c->obuf);
}

static size_t sink_data(sws_stream_t *st, const char *p, size_t n)
{
    sws_conn_t *c = st->req.conn;
    if (c->phase == SWS_CONN_CLOSED)
        return n;
    if (sws_conn_output_blocked(c))
        return 0;
    sink_wake(c);
    if (!sws_http1_of(c)->out_chunked) {
        /* A large piece goes from where the producer holds it, with what
         * is queued before it; only what the socket leaves is copied. */
        size_t sent = n >= WRITE_THROUGH_MIN ? sws_conn_write_through(c, p, n) : 0;
        if (sent == n)
            return n;
        return sws_conn_append(c, p + sent, n - sent) == 0 ? n : sent;
    }
    char *o = body_room(c, n);
    if (o == NULL)
        return 0; /* kept by the stream: the output may drain and shrink */
    memcpy(o, p, n);
    body_done(c, o, n);
    return n;
}

static int64_t sink_file(sws_stream_t *st, int fd, off_t off, uint64_t len)
{
    sws_conn_t *c = st->req.conn;
    sws_http1_t *h = sws_http1_of(c);
    if (c->phase == SWS_CONN_CLOSED)
        return (int64_t)len;
    if (sws_conn_output_blocked(c))
        return 0;
    sink_wake(c);
    if (!h->out_chunked && len > INLINE_FILE) {
        sws_conn_queue_file(c, fd, off, len);
        return (int64_t)len;
    }
    /* Small files, and chunked bodies (whose framing follows the bytes),
     * are read into the output, a bounded piece at a time. */
    size_t want = len < SWS_CONN_OUT_HWM ? (size_t)len : SWS_CONN_OUT_HWM;
    char *o = body_room(c, want);
    if (o == NULL)
        return 0;
    ssize_t n = pread(fd, o, want, off);
    if (n <= 0) {
        if (n == 0)
            errno = 0; /* the file shrank */
        return -1;
    }
    if (h->out_chunked && (size_t)n < want) {
        /* The size line promised want bytes: rewrite it for what came. */
        char *data = SWS_PUT_LIT(sws_put_hex(c->obuf + c->olen, (uint64_t)n), crlf);
        memmove(data, o, (size_t)n);
        o = data;
    }
    body_done(c, o, (size_t)n);
    return n;
}

static int64_t sink_pipe(sws_stream_t *st, int fd, uint64_t len)
{
    sws_conn_t *c = st->req.conn;
    if (c->phase == SWS_CONN_CLOSED)
        return (int64_t)len;
    if (sws_conn_output_blocked(c))
        return 0;
    /* Never chunked: sws_stream_can_pipe asks for an announced length. */
    sink_wake(c);
    sws_conn_queue_pipe(c, fd, len);
    return (int64_t)len;
}

static int sink_end(sws_stream_t *st, const sws_header_t *t, unsigned n)
{
    sws_conn_t *c = st->req.conn;
    sink_wake(c);
    if (!sws_http1_of(c)->out_chunked || c->phase == SWS_CONN_CLOSED)
        return 1; /* a length, or the connection's end, delimits the body */
    if (sws_conn_output_blocked(c))
        return 0;
    size_t need = SWS_LIT_LEN(last_chunk) + fields_len(t, n) + SWS_LIT_LEN(crlf);
    if (sws_conn_reserve(c, need) < 0)
        return -1;
    char *o = SWS_PUT_LIT(c->obuf + c->olen, last_chunk);
    o = put_fields(o, t, n);
    o = SWS_PUT_LIT(o, crlf);
    c->olen = (size_t)(o - c->obuf);
    return 1;
}

static int sink_retract(sws_stream_t *st)
{
    sws_conn_t *c = st->req.conn;
    uint64_t head = sws_http1_of(c)->head_pos;
    if (c->file_left > 0 || head < c->bytes_out || c->phase == SWS_CONN_CLOSED)
        return -1;
    c->olen = c->osent + (size_t)(head - c->bytes_out);
    return 0;
}

static const char head_upgrade[] = "Connection: upgrade\r\n";

/* "HTTP/1.1 1xx Reason", the fields, and for a 101 the Connection field
 * the switch needs; no Date or Server (RFC 9110 6.6.1: a 1xx has none). */
static int sink_interim(sws_stream_t *st, unsigned status, const sws_header_t *h, unsigned n)
{
    sws_conn_t *c = st->req.conn;
    const char *reason = sws_http_reason(status);
    size_t reason_len = strlen(reason);
    sws_str_t upgrade = status == 101 ? SWS_STR(head_upgrade) : SWS_STR("");
    size_t need = SWS_LIT_LEN(head_version) + HEAD_STATUS_LEN + reason_len + SWS_LIT_LEN(crlf) +
                  upgrade.len + fields_len(h, n) + SWS_LIT_LEN(crlf);
    /* An HTTP/1.0 client knows no 1xx (RFC 9110 15.2); it cannot ask for
     * a switch either. */
    if (c->phase == SWS_CONN_CLOSED || st->req.version_minor == 0)
        return 0;
    if (sws_conn_reserve(c, need) < 0)
        return -1;
    char *o = put_status_line(c->obuf + c->olen, status, reason, reason_len);
    o = SWS_PUT_LIT(o, crlf);
    o = sws_put(o, upgrade.p, upgrade.len);
    finish_head(c, o, h, n);
    return 0;
}

/* The connection becomes the tunnel's: HTTP/1 parses nothing more on it,
 * and its state (the stream, the request head it points into) waits
 * untouched until the connection closes and releases it. */
static int sink_upgrade(sws_stream_t *st, const sws_proto_ops_t *ops, void *state)
{
    sws_conn_t *c = st->req.conn;
    if (c->phase != SWS_CONN_ACTIVE)
        return -1;
    sws_http1_of(c)->state = SWS_H1_DEAD;
    sws_conn_switch_proto(c, ops, state);
    return 0;
}

static void sink_abort(sws_stream_t *st)
{
    sws_conn_t *c = st->req.conn;
    sink_wake(c);
    sws_http1_of(c)->state = SWS_H1_DEAD;
    c->close_after = 1;
}

const sws_stream_sink_t sws_http1_sink = {
    .head = sink_head,
    .data = sink_data,
    .room = sink_room_bytes,
    .file = sink_file,
    .pipe = sink_pipe,
    .end = sink_end,
    .retract = sink_retract,
    .interim = sink_interim,
    .upgrade = sink_upgrade,
    .abort = sink_abort,
};
