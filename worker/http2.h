/*
 * HTTP/2 on a connection (RFC 9113), with nghttp2: the second protocol of
 * worker/proto.h, beside HTTP/1 (ADR 0007, 0008; the decisions in the
 * HTTP/2 ADR).
 *
 * How a connection gets here. A connection starts as HTTP/1 (the set's
 * protocol); it switches to HTTP/2 through sws_conn_switch_proto(c,
 * c->set->h2_proto, NULL):
 *   - h2c with prior knowledge: HTTP/1 sees the connection preface
 *     (SWS_HTTP2_PREFACE) as a connection's first bytes (worker/http1.c);
 *   - TLS with ALPN "h2" (worker/conn.c, the TLS part).
 * The state argument is NULL: HTTP/2 allocates its own state in init and
 * frees it in close (proto_state then points to it). The bytes still
 * unparsed, the preface among them, are HTTP/2's.
 *
 * One nghttp2 server session per connection, whose small allocations
 * are kept by the connection for its next streams (ADR 0052) and freed
 * with it. conn.c's input goes to
 * nghttp2_session_mem_recv as it arrives and is used up at once (header
 * bytes are copied into each stream's own buffer, body bytes go to the
 * stream's consumer), so no slice points into the read buffer. Frames go
 * into conn.c's output with nghttp2_session_mem_send while the output is
 * below its high-water mark (it passes the mark by at most one frame);
 * above it nothing more is made and no input is parsed until conn.c calls
 * writable: a client that does not read stops being read.
 *
 * Streams. Each client stream is a sws_stream_t (worker/stream.h) in its
 * own allocation, from its HEADERS to its close; a released one is kept
 * for the connection's next stream (at most SWS_HTTP2_SPARE_STREAMS, with
 * their header and body buffers when small), so that a stream in the
 * steady state costs no allocation; the request is filled
 * like HTTP/1's (method, target, path and query, :authority as the host,
 * fields) and goes to the set's head handler (a body follows) and handler
 * as HTTP/1's does. The sink turns the response into HEADERS, DATA (a data
 * provider pulling from a bounded per-stream buffer, at most
 * SWS_HTTP2_STREAM_BUF, as large as the response needed so far;
 * a file is read into it a piece at a time) and trailers. Request bodies
 * are given back to the client's stream window only once their consumer
 * took them (a full consumer holds the window shut), and to the
 * connection's window only once the consumer passed them on (its
 * sws_stream_body_resume): a connection's streams hold at most
 * SWS_HTTP2_BODY_BUDGET request-body bytes together, whatever the number
 * of streams; at the budget the client gets no window and waits (ADR
 * 0035). A client that sends beyond its window is a FLOW_CONTROL_ERROR
 * (nghttp2: GOAWAY, closed).
 *
 * Limits (SETTINGS and checks): SWS_HTTP2_MAX_STREAMS concurrent streams
 * (more are refused by nghttp2 with REFUSED_STREAM), a header list of
 * max_header_size (431 past it, however it was compressed or split into
 * CONTINUATION frames; nghttp2 ends a connection after 8 CONTINUATIONs),
 * max_headers fields (431), max_body_size (413, then RST_STREAM), the
 * header timeout while a stream's head is in progress, the body timeout
 * while a body is in progress, or from when a response began to wait for
 * the client's window (only DATA going out moves it: that stream is reset
 * at its end, the connection closed when no other stream is left), the
 * keep-alive timeout on a connection without streams. A client that
 * resets more than SWS_HTTP2_RESET_FLOOR streams before their answer
 * within a window of SWS_HTTP2_RESET_WINDOW streams opened gets GOAWAY
 * ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487); a request reset in the
 * read that brought it is not handled. keepalive_requests does not apply.
 *
 * Graceful stop (the op drain, idle connections too): a shutdown notice
 * with a PING, then, once the PING is acknowledged (or at the header
 * timeout), GOAWAY with the last stream id processed; streams in flight
 * finish, then the connection closes. At the keep-alive timeout: that
 * GOAWAY, then close.
 *
 * All functions run in the worker that owns the connection.
 */
#ifndef SWS_WORKER_HTTP2_H
#define SWS_WORKER_HTTP2_H

#include "worker/proto.h"

/* The client connection preface (RFC 9113 3.4), without its SETTINGS. */
#define SWS_HTTP2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define SWS_HTTP2_PREFACE_LEN (sizeof(SWS_HTTP2_PREFACE) - 1)

#define SWS_HTTP2_MAX_STREAMS 128u        /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define SWS_HTTP2_WINDOW 65535u           /* a stream's initial window */
#define SWS_HTTP2_STREAM_BUF (16u * 1024) /* response body bytes held per stream */
/* Released streams a connection keeps for its next ones: enough for the
 * streams a browser or a load generator keeps in flight, a bounded part
 * of what SWS_HTTP2_MAX_STREAMS may hold. */
#define SWS_HTTP2_SPARE_STREAMS 32u
/* Request-body bytes a connection's consumers may hold (received, not yet
 * passed on), all streams together: the connection's flow-control window.
 * 1 MiB, 16 stream windows: one stream never waits on it, 16 uploads at
 * full window do not either (ADR 0035). */
#define SWS_HTTP2_BODY_BUDGET (1024u * 1024)
#define SWS_HTTP2_RESET_FLOOR 100u        /* resets before the answer tolerated... */
#define SWS_HTTP2_RESET_WINDOW 400u       /* ...per this many streams opened */

/* HTTP/2 as a protocol of worker/proto.h (state_size 0: its state is its
 * own allocation, made in init). */
extern const sws_proto_ops_t sws_http2_proto;

/* How far buf[0, len) matches the connection preface: 1 it starts with
 * the whole preface, 0 it is a proper prefix of it (wait for more; also
 * when len is 0, buf then may be NULL), -1 it is not HTTP/2's preface. */
int sws_http2_preface_match(const char *buf, size_t len);

#endif
