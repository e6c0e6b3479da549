"""HTTP/2 over cleartext with prior knowledge (h2c, worker/http2.c): real
clients (curl, nghttp, h2load) for the answers, a graceful stop with a
stream in flight, and raw frames (hyperframe and hpack, from python3-h2)
for each protection, while a well-behaved client on another connection
keeps getting answers."""

import hashlib
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import time
import unittest

from backend import Backend
from harness import TIMEOUT, ServerTestCase, curl, make_config, poll, scale

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings
    import hpack
    from hyperframe.frame import (ContinuationFrame, DataFrame, HeadersFrame, PingFrame,
                                  RstStreamFrame, SettingsFrame, WindowUpdateFrame)
except ImportError:  # python3-h2 is in scripts/deps.sh's test set
    hpack = None

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
BIG = os.urandom(1 << 20)

HOSTS = """
- name: "*"
  routes:
    - path: /hello
      respond: {status: 200, headers: {Content-Type: text/plain}, body: "hello, world\\n"}
    - path: /moved
      redirect: {status: 301, location: "/hello"}
    - path: /app
      proxy: {pool: app}
    - path: /
      static: {root: www}
"""

# Frame types and the error codes tests look for (RFC 9113).
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
FLAG_END_STREAM = 0x1
REFUSED_STREAM, ENHANCE_YOUR_CALM = 7, 11


def config(backend_address, server="", pool=""):
    return (make_config(HOSTS, server) +
            'pools:\n  - name: app\n    members:\n      - {address: "%s"}\n' % backend_address +
            pool)


class RawH2:
    """A client connection that sends the frames a test builds and reads
    the server's frames (headers decoded, to keep HPACK in step)."""

    def __init__(self, port, settings=None, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect: the window scale depends on it
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(("127.0.0.1", port))
        self.enc = hpack.Encoder()
        self.dec = hpack.Decoder()
        self.buf = b""
        self.eof = False
        self.ack_pings = True  # as a real client does (the drain waits for it)
        self.sock.sendall(PREFACE + SettingsFrame(0, settings=settings or {}).serialize())

    def close(self):
        self.sock.close()

    def request_frame(self, stream_id, path="/hello", method="GET", extra=(), end_stream=True,
                      end_headers=True):
        block = self.enc.encode([(":method", method), (":path", path), (":scheme", "http"),
                                 (":authority", "t.test")] + list(extra))
        f = HeadersFrame(stream_id, data=block)
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f.serialize()

    def send(self, data):
        self.sock.sendall(data)

    def frame(self, deadline):
        """The next frame (type, flags, stream, payload, headers or None),
        or None at EOF or the deadline."""
        while True:
            if len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + length:
                    ftype, flags = self.buf[3], self.buf[4]
                    stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                    payload = self.buf[9:9 + length]
                    self.buf = self.buf[9 + length:]
                    headers = None
                    if ftype == HEADERS:
                        headers = dict(self.dec.decode(payload))
                    if ftype == PING and not flags & 0x1 and self.ack_pings:
                        self.send(PingFrame(0, flags=["ACK"], opaque_data=payload).serialize())
                    return ftype, flags, stream, payload, headers
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, OSError):
                data = b""
            if not data:
                self.eof = True
                continue
            self.buf += data

    def until(self, predicate, timeout=TIMEOUT):
        """Read frames until predicate(frame) is true: that frame, or None
        (EOF or timeout); every frame read is kept in self.seen."""
        deadline = time.monotonic() + timeout
        self.seen = getattr(self, "seen", [])
        while True:
            f = self.frame(deadline)
            if f is None:
                return None
            self.seen.append(f)
            if predicate(f):
                return f

    def goaway(self, timeout=TIMEOUT):
        """The next GOAWAY's (last stream id, error code), or None."""
        f = self.until(lambda f: f[0] == GOAWAY, timeout)
        return None if f is None else struct.unpack(">II", f[3][:8])

    def goaway_code(self, timeout=TIMEOUT):
        g = self.goaway(timeout)
        return None if g is None else g[1]

    def closed(self, timeout=TIMEOUT):
        self.until(lambda f: False, timeout)
        return self.eof


@unittest.skipIf(hpack is None, "python3-h2 is not installed")
class H2TestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.backend = Backend("app")

    def tearDown(self):
        self.backend.stop()
        super().tearDown()

    def start(self, server="", member=None, pool=""):
        srv = self.server(config(member or self.backend.address, server, pool), start=False)
        www = os.path.join(srv.dir, "www")
        os.makedirs(www)
        with open(os.path.join(www, "big.bin"), "wb") as f:
            f.write(BIG)
        srv.start()
        return srv

    def curl2(self, *args):
        return curl("--http2-prior-knowledge", *args)

    CLOSED = re.compile(r"HTTP/2: closed after taking (\d+) bytes from the client; request "
                        r"bodies held at most (\d+) bytes at once")

    def connections_closed(self, srv, n):
        """(bytes taken from the client, most request-body bytes held) of
        each HTTP/2 connection closed, once n of them are (their debug
        line at the close: the server's own count)."""
        poll(lambda: len(self.CLOSED.findall(srv.log())) >= n,
             what=lambda: "%d HTTP/2 connections closed; log tail:\n%s" % (n, srv.log_tail()))
        return [(int(t), int(h)) for t, h in self.CLOSED.findall(srv.log())]

    def assert_well_behaved_client_served(self, srv):
        r = self.curl2("-o", "-", "-w", "%{http_version} %{http_code}",
                       srv.url("/hello"))
        self.assertEqual(r.stdout, b"hello, world\n2 200", r.stderr)


class Answers(H2TestCase):
    def test_get_head_404_redirect(self):
        srv = self.start()
        self.assert_well_behaved_client_served(srv)
        r = self.curl2("-I", srv.url("/hello"))
        self.assertIn(b"HTTP/2 200", r.stdout)
        self.assertIn(b"content-length: 13", r.stdout)
        r = self.curl2("-o", "/dev/null", "-w", "%{http_code}", srv.url("/nothing"))
        self.assertEqual(r.stdout, b"404")
        r = self.curl2("-D", "-", "-o", "/dev/null", srv.url("/moved"))
        self.assertIn(b"HTTP/2 301", r.stdout)
        self.assertIn(b"location: /hello", r.stdout)
        poll(lambda: srv.access_log().count('HTTP/2.0"') >= 4, what="four HTTP/2.0 log lines")

    def test_post_with_a_body(self):
        srv = self.start()
        r = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                            "-w", " %{http_code}", srv.url("/hello")],
                           input=b"x" * 200000, capture_output=True, timeout=TIMEOUT)
        self.assertEqual(r.stdout, b"hello, world\n 200", r.stderr)

    def test_static_file_of_one_mib_exact(self):
        srv = self.start()
        r = self.curl2("-o", "-", srv.url("/big.bin"))
        self.assertEqual(hashlib.sha256(r.stdout).hexdigest(), hashlib.sha256(BIG).hexdigest())

    def test_proxied_answer_before_the_body_resets_the_stream(self):
        # The member answers (417) without the body: once our END_STREAM
        # is out, RST_STREAM NO_ERROR tells the client to stop sending.
        srv = self.start()
        self.backend.set_mode("expect_reject")
        c = RawH2(srv.port)
        c.send(c.request_frame(1, "/app/up", "POST", end_stream=False,
                               extra=[("content-length", "100000"), ("expect", "100-continue")]))
        f = c.until(lambda f: f[0] == RST_STREAM and f[2] == 1)
        self.assertIsNotNone(f, "no RST_STREAM after the answer")
        self.assertEqual(struct.unpack(">I", f[3])[0], 0)
        statuses = [g[4][":status"] for g in c.seen if g[0] == HEADERS and g[2] == 1]
        self.assertEqual(statuses, ["417"])
        self.assertTrue([g for g in c.seen if g[2] == 1 and g[1] & FLAG_END_STREAM])
        self.assert_well_behaved_client_served(srv)

    def test_methods_as_http1(self):
        # CONNECT (no :path in HTTP/2) is dispatched as HTTP/1's
        # authority-form is (no route here: 404, as HTTP/1 answers), and
        # only HTTP/1's methods are known: RTSP's and PRI get 501.
        srv = self.start()
        c = RawH2(srv.port)
        block = c.enc.encode([(":method", "CONNECT"), (":authority", "t.test:443")])
        f = HeadersFrame(1, data=block)
        f.flags.add("END_HEADERS")
        c.send(f.serialize())
        c.send(c.request_frame(3, method="DESCRIBE") + c.request_frame(5, method="PRI") +
               c.request_frame(7, method="PATCH"))
        statuses = {}
        c.until(lambda f: f[0] == HEADERS and statuses.update({f[2]: f[4][":status"]}) is None
                and len(statuses) == 4)
        self.assertEqual(statuses, {1: "404", 3: "501", 5: "501", 7: "200"})

    def test_streams_nghttp2_refuses_are_logged_400(self):
        # A head without :path, a connection-specific field, DATA beyond
        # content-length: each stream reset by nghttp2, each logged once.
        srv = self.start()
        c = RawH2(srv.port)
        block = c.enc.encode([(":method", "GET"), (":scheme", "http"), (":authority", "t.test")])
        f = HeadersFrame(1, data=block)
        f.flags.add("END_HEADERS")
        f.flags.add("END_STREAM")
        c.send(f.serialize())
        c.send(c.request_frame(3, extra=[("connection", "close")]))
        c.send(c.request_frame(5, "/hello", "POST", end_stream=False,
                               extra=[("content-length", "5")]) +
               DataFrame(5, data=b"z" * 10, flags=["END_STREAM"]).serialize())
        rsts = set()
        c.until(lambda f: f[0] == RST_STREAM and rsts.add(f[2]) is None and len(rsts) == 3)
        self.assertEqual(rsts, {1, 3, 5})
        self.assert_well_behaved_client_served(srv)
        srv.stop()
        lines = [l for l in srv.access_log().splitlines() if "\" 400 " in l]
        self.assertEqual(len(lines), 3, srv.access_log())

    def test_expect_after_split_cookies_not_417(self):
        # Cookies split into fields are joined first; Expect is read after.
        srv = self.start()
        c = RawH2(srv.port)
        c.send(c.request_frame(1, "/hello", "POST", end_stream=False,
                               extra=[("cookie", "a=1"), ("cookie", "b=2"),
                                      ("expect", "100-continue"), ("x-after", "zz")]))
        f = c.until(lambda f: f[0] == HEADERS and f[2] == 1)
        self.assertIsNotNone(f)
        self.assertEqual(f[4][":status"], "100")

    def test_proxied_get_and_post_streaming_through(self):
        srv = self.start()
        r = self.curl2("-o", "-", srv.url("/app/x?y=1"))
        self.assertEqual(r.stdout, b"app GET /app/x?y=1")
        r = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "--data-binary", "@-",
                            srv.url("/app/up")],
                           input=BIG[:900000], capture_output=True, timeout=TIMEOUT)
        self.assertEqual(r.stdout, b"app POST /app/up", r.stderr)
        req = self.backend.requests[-1]
        self.assertEqual(req.sha256, hashlib.sha256(BIG[:900000]).hexdigest())
        self.assertEqual(req.header("Host"), "127.0.0.1:%d" % srv.port)

    def test_nghttp_several_streams_on_one_connection(self):
        if shutil.which("nghttp") is None:
            self.skipTest("nghttp2-client is not installed")
        srv = self.start()
        r = subprocess.run(["nghttp", "-nv", srv.url("/hello"), srv.url("/big.bin"),
                            srv.url("/app/a"), srv.url("/nothing")],
                           capture_output=True, timeout=TIMEOUT)
        out = r.stdout.decode()
        self.assertEqual(out.count(":status: 200"), 3, out[-2000:])
        self.assertEqual(out.count(":status: 404"), 1)
        # One connection, four streams on it.
        self.assertEqual(out.count("Connected"), 1)
        self.assertEqual(out.count("send HEADERS frame"), 4)

    def test_h2load_without_errors(self):
        if shutil.which("h2load") is None:
            self.skipTest("nghttp2-client is not installed")
        srv = self.start()
        r = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "10", srv.url("/hello")],
                           capture_output=True, timeout=TIMEOUT * 6)
        out = r.stdout.decode()
        self.assertIn("2000 succeeded, 0 failed, 0 errored", out, out)

    def test_http1_still_served_beside(self):
        srv = self.start()
        r = curl("-o", "-", "-w", " %{http_version}", srv.url("/hello"))
        self.assertEqual(r.stdout, b"hello, world\n 1.1")


class GracefulStop(H2TestCase):
    def test_goaway_then_streams_in_flight_finish(self):
        srv = self.start()
        self.backend.set_mode("slow")
        self.backend.delay = 0.01
        c = RawH2(srv.port)
        c.send(c.request_frame(1, "/app/slow"))
        poll(lambda: self.backend.count() == 1, what="the request at the backend")
        srv.signal(signal.SIGQUIT)
        self.assertEqual(c.goaway_code(), 0)
        end = c.until(lambda f: f[2] == 1 and f[1] & FLAG_END_STREAM)
        self.assertIsNotNone(end, "the stream in flight did not finish")
        statuses = [f[4][":status"] for f in c.seen if f[0] == HEADERS and f[2] == 1]
        self.assertEqual(statuses, ["200"])
        body = b"".join(f[3] for f in c.seen if f[0] == DATA and f[2] == 1)
        self.assertEqual(body, b"app GET /app/slow")
        self.assertTrue(c.closed(), "connection not closed after its last stream")
        c.close()
        srv.wait_exit()


    def _answered(self, c, sid):
        f = c.until(lambda f: f[2] == sid and f[1] & FLAG_END_STREAM)
        self.assertIsNotNone(f, "stream %d not answered" % sid)

    def test_idle_connection_gets_goaway_on_drain(self):
        # The shutdown notice, then, once its PING is acknowledged, the
        # final GOAWAY naming the last stream taken.
        srv = self.start()
        c = RawH2(srv.port)
        c.send(c.request_frame(1))
        self._answered(c, 1)
        srv.signal(signal.SIGQUIT)
        self.assertEqual(c.goaway(), (0x7FFFFFFF, 0), "closed without GOAWAY")
        self.assertEqual(c.goaway(), (1, 0))
        self.assertTrue(c.closed())
        c.close()
        srv.wait_exit()

    def test_stream_sent_before_the_notice_was_seen_is_taken(self):
        # A stream the client sends between the notice and its PING's
        # acknowledgement is answered, and the final GOAWAY names it.
        srv = self.start()
        c = RawH2(srv.port)
        c.ack_pings = False
        c.send(c.request_frame(1))
        self._answered(c, 1)
        srv.signal(signal.SIGQUIT)
        self.assertEqual(c.goaway(), (0x7FFFFFFF, 0))
        is_ping = lambda f: f[0] == PING and not f[1] & 0x1
        ping = next(filter(is_ping, c.seen), None) or c.until(is_ping)
        self.assertIsNotNone(ping, "no PING with the notice")
        c.send(c.request_frame(3))
        self._answered(c, 3)
        self.assertFalse([f for f in c.seen if f[0] == RST_STREAM])
        c.send(PingFrame(0, flags=["ACK"], opaque_data=ping[3]).serialize())
        self.assertEqual(c.goaway(), (3, 0))
        self.assertTrue(c.closed())
        c.close()
        srv.wait_exit()

    def test_idle_connection_gets_goaway_at_keepalive_timeout(self):
        srv = self.start("timeouts: {keepalive: 300ms}")
        c = RawH2(srv.port)
        c.send(c.request_frame(1))
        self._answered(c, 1)
        self.assertEqual(c.goaway(), (1, 0), "closed without GOAWAY")
        self.assertTrue(c.closed())


class Protections(H2TestCase):
    def test_rapid_reset_gets_enhance_your_calm(self):
        srv = self.start()
        c = RawH2(srv.port)
        burst = b""
        for i in range(400):
            sid = 2 * i + 1
            burst += c.request_frame(sid, "/app/r") + RstStreamFrame(sid, error_code=8).serialize()
        try:
            c.send(burst)
        except OSError:
            pass  # cut off mid-burst
        self.assertEqual(c.goaway_code(), ENHANCE_YOUR_CALM)
        self.assertTrue(c.closed())
        self.assert_well_behaved_client_served(srv)

    def test_continuation_flood_cut(self):
        srv = self.start()
        c = RawH2(srv.port)
        block = c.enc.encode([(":method", "GET"), (":path", "/hello"), (":scheme", "http")])
        c.send(HeadersFrame(1, data=block).serialize())
        sent = 0
        try:
            for i in range(20000):
                c.send(ContinuationFrame(1, data=b"\x40\x01a\x7f\xff\x00" + b"b" * 1000).serialize())
                sent += 1
        except OSError:
            pass
        # nghttp2 gives up after 8 CONTINUATION frames: GOAWAY, and the
        # lingering close reads the rest for a bounded time (conn.c).
        self.assertIsNotNone(c.goaway_code(), "no GOAWAY after %d CONTINUATION frames" % sent)
        self.assertTrue(c.closed())
        self.assertFalse([f for f in c.seen if f[0] == HEADERS])
        self.assert_well_behaved_client_served(srv)

    def test_hpack_bomb_header_list_bounded(self):
        srv = self.start("limits: {max_header_size: 4k}")
        c = RawH2(srv.port)
        # One 3000-byte field into the dynamic table, then referenced: a few
        # bytes on the wire each, 3 KB each once decoded.
        big = ("x-bomb", "v" * 3000)
        c.send(c.request_frame(1, extra=[big]))
        f = c.until(lambda f: f[0] == HEADERS and f[2] == 1)
        self.assertEqual(f[4][":status"], "200")
        bomb = c.request_frame(3, extra=[big] * 200)
        self.assertLess(len(bomb), 1000)  # 600 KB once decoded
        c.send(bomb)
        f = c.until(lambda f: f[0] in (HEADERS, RST_STREAM, GOAWAY) and f[2] in (0, 3))
        self.assertIsNotNone(f)
        self.assertEqual((f[0], f[4] and f[4][":status"]), (HEADERS, "431"))
        self.assert_well_behaved_client_served(srv)

    def _flood(self, frame):
        """Send frame as fast as possible without reading (a small receive
        buffer, so that answers back up at once): the server must either
        stop reading (our writes block) or cut the connection (nghttp2's
        limit of queued acknowledgements), not read on and queue answers.
        Judged by what the server says it took from us (its debug line at
        the close), not by how long our writes blocked: the send timeout
        only ends our attempt. Returns the server."""
        srv = self.start("logging: {level: debug}")
        c = RawH2(srv.port, rcvbuf=4096)
        c.sock.settimeout(0.5)
        data = frame * 1000
        chunks = 3000  # three million frames
        for _ in range(chunks):
            try:
                c.sock.sendall(data)
            except (socket.timeout, OSError):
                break
        self.assert_well_behaved_client_served(srv)
        c.close()
        taken = max(t for t, _ in self.connections_closed(srv, 2))  # the flood's and curl's
        self.assertLess(taken, len(data) * chunks // 10,
                        "the server read on while its answers piled up")
        return srv

    def test_ping_flood_bounded(self):
        self._flood(PingFrame(0, opaque_data=b"12345678").serialize())

    def test_settings_flood_cut_by_the_ack_limit(self):
        # What bounds it is not the output mark (the test passed with it
        # broken) but nghttp2's limit of 1000 queued acknowledgements
        # (nghttp2_option_set_max_outbound_ack): the first read holds more
        # SETTINGS than that, and the session is cut as a flood.
        srv = self._flood(SettingsFrame(0, settings={4: 65535}).serialize())
        srv.wait_log(r"client 127\.0\.0\.1: HTTP/2: Flooding was detected in this HTTP/2 session")

    def test_zero_window_reader_cut_by_timeout(self):
        srv = self.start("timeouts: {body: 500ms}")
        c = RawH2(srv.port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(c.request_frame(1, "/big.bin"))
        f = c.until(lambda f: f[0] == HEADERS and f[2] == 1)
        self.assertEqual(f[4][":status"], "200")
        self.assert_well_behaved_client_served(srv)
        self.assertTrue(c.closed(), "a client that never opens its window is kept")
        self.assertFalse([f for f in c.seen if f[0] == DATA and f[3]])

    def test_zero_window_reader_not_kept_alive_by_pings(self):
        # A window stall's deadline moves only when DATA goes out: PINGs
        # (any input but a WINDOW_UPDATE that lets bytes go) do not move it.
        srv = self.start("timeouts: {body: 500ms}")
        c = RawH2(srv.port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(b"".join(c.request_frame(2 * i + 1, "/big.bin") for i in range(100)))
        deadline = time.monotonic() + scale(5)
        while time.monotonic() < deadline and not c.eof:
            c.send(PingFrame(0, opaque_data=b"12345678").serialize())
            c.closed(0.2)
        self.assertTrue(c.eof, "100 zero-window streams kept past a 500 ms body timeout")

    def test_stalled_stream_reset_while_another_goes_on(self):
        # Only the stream the window stalls is reset at the deadline; the
        # connection and its other streams go on.
        srv = self.start("timeouts: {body: 500ms}")
        self.backend.set_mode("slow")
        self.backend.delay = 0.05  # a byte at a time: stream 3 outlives stream 1's deadline
        c = RawH2(srv.port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(c.request_frame(1, "/big.bin") + c.request_frame(3, "/app/slow") +
               WindowUpdateFrame(3, window_increment=1 << 20).serialize())
        f = c.until(lambda f: f[0] == RST_STREAM and f[2] == 1)
        self.assertIsNotNone(f, "the stalled stream was not reset")
        end = c.until(lambda f: f[2] == 3 and f[1] & FLAG_END_STREAM)
        self.assertIsNotNone(end, "the other stream did not finish")
        self.assertFalse([f for f in c.seen if f[0] == GOAWAY])

    def test_streams_beyond_128_refused(self):
        srv = self.start()
        c = RawH2(srv.port)
        frames = b"".join(c.request_frame(2 * i + 1, "/hello", "POST", end_stream=False)
                          for i in range(130))
        c.send(frames)
        rsts = []
        c.until(lambda f: f[0] == RST_STREAM and rsts.append(
            struct.unpack(">I", f[3])[0]) is None and len(rsts) == 2)
        self.assertEqual(rsts, [REFUSED_STREAM, REFUSED_STREAM])
        self.assert_well_behaved_client_served(srv)

    def test_stalled_head_cut_by_header_timeout(self):
        srv = self.start("timeouts: {header: 500ms}")
        c = RawH2(srv.port)
        c.send(c.request_frame(1, end_headers=False))
        self.assert_well_behaved_client_served(srv)
        self.assertTrue(c.closed(), "a stream whose head never ends is kept")

    def test_body_over_max_body_size_413(self):
        srv = self.start("limits: {max_body_size: 1k}")
        c = RawH2(srv.port)
        c.send(c.request_frame(1, "/hello", "POST", end_stream=False) +
               DataFrame(1, data=b"z" * 4000).serialize())
        f = c.until(lambda f: f[0] == HEADERS and f[2] == 1)
        self.assertEqual(f[4][":status"], "413")
        self.assert_well_behaved_client_served(srv)


    def test_proxied_body_over_limit_gets_413(self):
        # The proxy took the body (it is the stream's source): still 413,
        # not a reset.
        srv = self.start("limits: {max_body_size: 1k}")
        c = RawH2(srv.port)
        c.send(c.request_frame(1, "/app/up", "POST", end_stream=False) +
               DataFrame(1, data=b"z" * 4000).serialize())
        f = c.until(lambda f: f[2] == 1 and f[0] in (HEADERS, RST_STREAM))
        self.assertIsNotNone(f)
        self.assertEqual((f[0], f[4] and f[4][":status"]), (HEADERS, "413"),
                         "got RST_STREAM %r" % (f[3],))
        self.assert_well_behaved_client_served(srv)
        srv.stop()
        self.assertIn('"POST /app/up HTTP/2.0" 413', srv.access_log())

class Reuse(H2TestCase):
    """A connection's streams reuse the memory of those that ended (ADR
    0052): each stream gets its own body, whatever ran before it there."""

    SIZES = (1, 13, 900, 1000, 1500, 3000, 4096, 5000, 16384, 40000)
    WINDOW = 1000  # the client's stream window: responses above it wait in the server

    def test_interleaved_streams_of_different_sizes_each_get_their_body(self):
        srv = self.server(config(self.backend.address), start=False)
        www = os.path.join(srv.dir, "www")
        os.makedirs(www)
        files = {}
        for n in self.SIZES:
            files["/f%d" % n] = os.urandom(n)
            with open(os.path.join(www, "f%d" % n), "wb") as f:
                f.write(files["/f%d" % n])
        srv.start()
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.WINDOW})
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
        self.addCleanup(sock.close)
        sock.sendall(conn.data_to_send())

        def get(path):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                    (":authority", "t.test")], end_stream=True)
            return sid

        def run(streams, reset_after_first_data=()):
            """Read until every stream ended or was reset: {id: body}."""
            bodies = {sid: b"" for sid in streams}
            left = set(streams)
            sock.sendall(conn.data_to_send())
            deadline = time.monotonic() + TIMEOUT
            while left and time.monotonic() < deadline:
                data = sock.recv(65536)
                self.assertTrue(data, "the server closed the connection")
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.DataReceived):
                        bodies[ev.stream_id] += ev.data
                        if ev.stream_id in reset_after_first_data:
                            conn.reset_stream(ev.stream_id)  # its window stays unacknowledged
                            left.discard(ev.stream_id)
                        else:
                            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                        left.discard(ev.stream_id)
                sock.sendall(conn.data_to_send())
            self.assertEqual(left, set(), "streams still open at the deadline")
            return bodies

        # Responses cut with bytes still waiting in their stream's buffer.
        cut = [get("/f3000"), get("/f40000")]
        run(cut, reset_after_first_data=cut)
        paths = sorted(files)
        for rnd in range(3):
            order = paths[rnd:] + paths[:rnd]  # each stream's memory served another size before
            ids = {get(p): p for p in order}
            bodies = run(list(ids))
            for sid, p in ids.items():
                self.assertEqual(len(bodies[sid]), len(files[p]), "round %d %s" % (rnd, p))
                self.assertTrue(bodies[sid] == files[p], "round %d %s: other bytes" % (rnd, p))


class BodyBudget(H2TestCase):
    """Request bodies held for one connection's streams stay under the
    connection's budget (ADR 0035), judged by the server's own count (its
    debug lines), not by RSS."""

    BUDGET = 1 << 20  # SWS_HTTP2_BODY_BUDGET
    STREAMS = 100
    BODY = 1 << 20

    def member_never_connected(self):
        """A listener whose accept queue is full (backlog 0, filled by two
        connections of ours that nobody accepts): the kernel drops further
        SYNs, so the proxy's connects wait and its requests hold their
        bodies (an upstream that answers its socket but never reads would
        let the kernel's send buffers, MiBs on loopback, take them)."""
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(0)
        self.addCleanup(s.close)
        for _ in range(2):
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.setblocking(False)
            c.connect_ex(s.getsockname())
            self.addCleanup(c.close)
        return "127.0.0.1:%d" % s.getsockname()[1]

    def greedy_uploads(self, srv):
        """A client that respects flow control and uses all of it: 100
        POSTs of 1 MiB each to the proxy route, sent as fast as the
        windows allow, until the server says the budget holds it. The
        socket, the body bytes sent and the events the server caused."""
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
        self.addCleanup(sock.close)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        left = {}
        for i in range(self.STREAMS):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "POST"), (":path", "/app/up"),
                                    (":scheme", "http"), (":authority", "t.test"),
                                    ("content-length", str(self.BODY))])
            left[sid] = self.BODY
        chunk = b"u" * conn.max_outbound_frame_size
        sent = 0
        events = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for sid in left:
                n = min(left[sid], conn.local_flow_control_window(sid), len(chunk))
                if n > 0:
                    conn.send_data(sid, chunk[:n])
                    left[sid] -= n
                    sent += n
            sock.sendall(conn.data_to_send())
            if "reach the connection's budget" in srv.log():
                return sock, sent, events
            ready, _, _ = select.select([sock], [], [], 0.05)
            if ready:
                data = sock.recv(65536)
                self.assertTrue(data, "the server closed the connection")
                events += conn.receive_data(data)  # WINDOW_UPDATEs (and SETTINGS)
        self.fail("no budget line after %d body bytes sent; log tail:\n%s"
                  % (sent, srv.log_tail()))

    def test_greedy_uploads_held_to_the_budget_other_client_served(self):
        # The connects wait longer than the test: no timer decides it.
        srv = self.start("logging: {level: debug}", self.member_never_connected(),
                         "    timeouts: {connect: 1h}\n")
        sock, sent, events = self.greedy_uploads(srv)
        self.assertGreaterEqual(sent, self.BUDGET)
        self.assertFalse([e for e in events if isinstance(
            e, (h2.events.StreamReset, h2.events.ConnectionTerminated))],
            "held to the budget, a client waits: nothing is reset")
        self.assert_well_behaved_client_served(srv)
        sock.close()
        held = max(h for _, h in self.connections_closed(srv, 2))  # the uploads' and curl's
        self.assertLessEqual(held, self.BUDGET)
        self.assertGreater(held, self.BUDGET // 2)


if __name__ == "__main__":
    unittest.main()
