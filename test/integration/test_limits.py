"""Limits and malformed input: each gets its status, and after a request the
parser cannot trust the connection is closed."""

import os
import re
import time

from harness import ServerTestCase, make_config, poll, request, scale, static_hosts, HELLO_HOSTS

LIMITS = """
limits: {max_request_line: 1k, max_header_size: 4k, max_headers: 20, max_body_size: 1k}
timeouts: {header: 1s, body: 60s, keepalive: 1s, send: 60s}
"""


class Limits(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.srv = self.server(make_config(HELLO_HOSTS, LIMITS))

    def conn(self):
        return self.client(self.srv)

    def expect_status_and_close(self, raw, status):
        c = self.conn()
        c.send(raw)
        responses, closed = c.responses_until_close()
        self.assertEqual([r.status for r in responses], [status], responses)
        self.assertTrue(closed, "connection left open after %d" % status)
        return responses[0]

    def test_request_line_within_limit(self):
        self.assertEqual(self.conn().get("/" + "a" * 900).status, 200)

    def test_414_request_line_too_long(self):
        self.expect_status_and_close(request("GET", "/" + "a" * 1100), 414)

    def test_414_request_line_far_too_long(self):
        # More than any read buffer: the limit must hold while reading too.
        self.expect_status_and_close(request("GET", "/" + "a" * 100000), 414)

    def test_headers_within_limit(self):
        headers = [("X-H%d" % i, "v" * 100) for i in range(18)]
        self.assertEqual(self.conn().get("/", headers=headers).status, 200)

    def test_431_header_too_big(self):
        self.expect_status_and_close(request("GET", "/", headers=[("X-Big", "b" * 5000)]), 431)

    def test_431_headers_total_too_big(self):
        headers = [("X-H%d" % i, "v" * 300) for i in range(15)]
        self.expect_status_and_close(request("GET", "/", headers=headers), 431)

    def test_431_too_many_headers(self):
        headers = [("X-H%d" % i, "v") for i in range(25)]
        self.expect_status_and_close(request("GET", "/", headers=headers), 431)

    def test_body_within_limit(self):
        c = self.conn()
        c.send(request("POST", "/", headers=[("Content-Length", "1000")], body=b"b" * 1000))
        self.assertEqual(c.read_response().status, 200)

    def test_413_content_length(self):
        # The body is not sent: the head alone is refused, and the
        # connection, with a body it will not read, closed.
        self.expect_status_and_close(request("POST", "/", headers=[("Content-Length", "2000")]), 413)

    def test_413_chunked(self):
        chunks = (b"320\r\n" + b"c" * 800 + b"\r\n") * 2 + b"0\r\n\r\n"
        self.expect_status_and_close(
            request("POST", "/", headers=[("Transfer-Encoding", "chunked")]) + chunks, 413)

    def test_413_expect_100_continue_too_large(self):
        c = self.conn()
        c.send(request("POST", "/", headers=[("Content-Length", "5000"), ("Expect", "100-continue")]))
        r = c.read_response(allow_1xx=True)
        self.assertEqual(r.status, 413, "expected 413 without a 100 Continue first")

    def test_408_header_timeout(self):
        c = self.conn()
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        r = c.read_response()  # bounded by the client's socket timeout
        self.assertEqual(r.status, 408)
        self.assertTrue(c.wait_closed())

    def test_408_header_timeout_nothing_sent(self):
        # A connection that never sends a byte is closed too (408 or a
        # silent close, both fine); it must not stay open forever.
        c = self.conn()
        c.read_until_close()
        self.assertTrue(c.eof, "idle new connection not closed")
        if c.buf:
            self.assertEqual(c.read_response().status, 408)

    def test_idle_keepalive_closed(self):
        c = self.conn()
        self.assertEqual(c.get("/").status, 200)
        self.assertTrue(c.wait_closed(), "idle keep-alive connection not closed")

    def test_400_malformed_request_line(self):
        self.expect_status_and_close(b"GARBAGE\r\n\r\n", 400)

    def test_400_malformed_header(self):
        self.expect_status_and_close(request("GET", "/", headers=["NoColonHere"]), 400)

    def test_400_http11_without_host(self):
        self.expect_status_and_close(request("GET", "/", host=None), 400)

    def test_400_http11_two_hosts(self):
        self.expect_status_and_close(request("GET", "/", headers=[("Host", "y")]), 400)

    def test_505_http2_version(self):
        self.expect_status_and_close(request("GET", "/", version="HTTP/2.0"), 505)

    def test_505_http3_version(self):
        self.expect_status_and_close(request("GET", "/", version="HTTP/3.0"), 505)


# A body larger than what the kernel queues for a client on loopback (about
# 3 MiB here, up to net.ipv4.tcp_wmem's 4 MiB), so the server still has
# some to send while the client reads.
SLOW_BODY_SIZE = 8 << 20
SLOW_CHUNK = 4096
SLOW_PAUSE = 0.002  # between reads: about 2 MB/s, far below the server's pace
# Short, so that a client reading nothing is cut soon; scaled like every
# bound, so that an ASan server (or a loaded machine's pause in the slow
# reader) does not pass for a client that stopped reading.
SEND_TIMEOUT_MS = int(scale(0.3) * 1000)


class SendTimeout(ServerTestCase):
    """timeouts.send cuts a client that takes no bytes for that long, not
    one that reads slowly: with megabytes queued in the kernel, EPOLLOUT
    comes only after the client has read a good part of them, much later
    than a short send timeout."""

    def setUp(self):
        super().setUp()
        self.srv = self.server(make_config(static_hosts(),
                                           "timeouts: {send: %dms}\nlogging: {level: info}"
                                           % SEND_TIMEOUT_MS),
                               start=False)
        os.makedirs(os.path.join(self.srv.dir, "www"))
        with open(os.path.join(self.srv.dir, "www", "big.bin"), "wb") as f:
            f.write(b"s" * SLOW_BODY_SIZE)
        self.srv.start()

    def download(self):
        c = self.client(self.srv, rcvbuf=4096)
        c.send(request("GET", "/big.bin"))
        r = c.read_head()
        self.assertEqual((r.status, r.header("Content-Length")), (200, str(SLOW_BODY_SIZE)))
        return c

    def test_slow_reader_gets_the_whole_body(self):
        c = self.download()
        got = len(c.buf)
        deadline = time.monotonic() + scale(60)
        for _ in range(SLOW_BODY_SIZE):
            if got >= SLOW_BODY_SIZE or time.monotonic() > deadline:
                break
            chunk = c.sock.recv(SLOW_CHUNK)
            if not chunk:
                break
            got += len(chunk)
            time.sleep(SLOW_PAUSE)
        self.assertEqual(got, SLOW_BODY_SIZE, "body cut short; log:\n" + self.srv.log_tail())
        self.assertNotIn("send timeout", self.srv.log())

    def test_client_reading_nothing_is_cut(self):
        self.download()
        self.srv.wait_log(r"client 127\.0\.0\.1: send timeout, closing")
        # Logged once, when cut, with the bytes that reached the socket: not
        # the whole file it never took.
        line = re.compile(r'"GET /big\.bin HTTP/1\.1" 200 (\d+) ')
        poll(lambda: line.search(self.srv.access_log()),
             what="the access log line of the cut download")
        sent = [int(m) for m in line.findall(self.srv.access_log())]
        self.assertEqual(len(sent), 1)
        self.assertLess(sent[0], SLOW_BODY_SIZE)
