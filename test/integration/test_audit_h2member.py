"""A hostile HTTP/2 member (`protocol: h2`), side by side with HAProxy 2.6's
`proto h2` (the audit docs/audit/2026-12-02-h2-member-audit.md, probes in
test/tools/h2member_probe.py). The member (h2_raw_member.py) writes raw
frames as each test's script says.

The pool's timeouts are short (1 s) and the client waits TIMEOUT (10 s)
for the answer: a test fails when the answer does not come, never on how
fast it came."""

import re
import socket
import struct
import threading

from h2_raw_member import (END_HEADERS, PING, PUSH, S200, SLEEP, RawH2Member, block, data, frame,
                           headers)
from harness import TIMEOUT, ServerTestCase, make_config, poll

PING_FRAME = frame(PING, 0, 0, b"chatter!")

# A member's chatter every 0.2 s for up to 30 s (it stops when the proxy
# closes the connection): longer than the client waits, so only a
# timeout on the proxy's side ends the exchange in time.
def chatter(f, n=150):
    return [(SLEEP, 0.2), f] * n


SCRIPTS = {
    # A head and two bytes, then PINGs and no more of the stream.
    "stall_body_pings": lambda s: [headers(s, [S200]) + data(s, b"ok")] + chatter(PING_FRAME),
    # No head at all, PINGs only.
    "stall_head_pings": lambda s: chatter(PING_FRAME),
    # A head, then empty DATA frames: no byte of the body.
    "stall_body_empty_data": lambda s: [headers(s, [S200])] + chatter(data(s, b"")),
    # A field name HTTP/2 forbids (uppercase): the stream is reset.
    "uppercase_field": lambda s: [headers(s, [S200, ("X-Upper", "b")]) + data(s, b"ok", True)],
    # 103s without end, then a 200: 60,000 of them, 2 MB on the wire.
    "interim_flood": lambda s: [headers(s, [(":status", "103"), ("link", "</a>")]) * 60000 +
                                headers(s, [S200, ("content-length", "2")]) + data(s, b"ok", True)],
    # A stream that keeps moving: a byte every 0.2 s for 30 s.
    "moving": lambda s: [headers(s, [S200])] + chatter(data(s, b"."), 150),
    # A stream the member never answers.
    "starved": lambda s: [],
    # A push we disabled in our SETTINGS: the connection ends.
    "push_promise": lambda s: [frame(PUSH, END_HEADERS, s, struct.pack(">I", s + 1) + block(
        [(":method", "GET"), (":scheme", "http"), (":path", "/p"), (":authority", "x")]))],
}

UPLOADS = ("never_opens_window",)


def exchange(port, raw):
    """What a client sending raw gets until the proxy closes (it asks to),
    or None when nothing closed it within TIMEOUT."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    # Sent beside the reads: a large body may wait for the proxy, whose
    # answer comes first.
    sender = threading.Thread(target=send_all, args=(s, raw), daemon=True)
    sender.start()
    try:
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                return got
            got += d
    except socket.timeout:
        return None
    finally:
        s.close()
        sender.join(TIMEOUT)


def send_all(s, raw):
    try:
        s.sendall(raw)
    except OSError:
        pass  # the proxy answered and closed first


def get(name):
    return b"GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % name.encode()


class HostileH2Member(ServerTestCase):
    def start(self, timeouts="read: 1s, send: 1s"):
        self.member = RawH2Member(SCRIPTS, UPLOADS)
        self.addCleanup(self.member.close)
        pools = ("pools:\n  - {name: app, protocol: h2, retries: 0, health: {max_fails: 0},\n"
                 "     timeouts: {%s}, members: [\"%s\"]}\n" % (timeouts, self.member.address))
        hosts = '- name: "*"\n  routes:\n    - path: /\n      proxy: {pool: app}\n'
        self.srv = self.server(make_config(hosts, "limits: {max_body_size: 8m}") + pools)
        return self.srv

    def member_log(self, why):
        return r"proxy: pool app member %s: %s" % (re.escape(self.member.address), why)

    # ---- a stalled stream under connection chatter (defect 1) ----
    # The read timer was re-armed by any byte from the member: PINGs (as
    # gRPC servers send for keepalive), SETTINGS or empty DATA frames kept
    # a stream that moved no more waiting for ever, its client with it.
    # HAProxy's `timeout server` cuts it.

    def check_cut_body(self, name):
        srv = self.start()
        got = exchange(srv.port, get(name))
        self.assertIsNotNone(got, "the client still waits: the stalled stream was never timed out")
        self.assertTrue(got.startswith(b"HTTP/1.1 200 "), got[:80])
        head, _, body = got.partition(b"\r\n\r\n")
        self.assertIn(b"transfer-encoding: chunked", head.lower())
        # Cut, not passed off as whole: no last chunk.
        self.assertFalse(body.endswith(b"0\r\n\r\n"), body)
        srv.wait_log(self.member_log(r"read timed out"))

    def test_stalled_body_under_member_pings_is_cut_by_the_read_timeout(self):
        self.check_cut_body("stall_body_pings")

    def test_stalled_body_under_empty_data_frames_is_cut_by_the_read_timeout(self):
        self.check_cut_body("stall_body_empty_data")

    def test_stalled_head_under_member_pings_is_504(self):
        srv = self.start()
        got = exchange(srv.port, get("stall_head_pings"))
        self.assertIsNotNone(got, "the client still waits: the stalled stream was never timed out")
        self.assertTrue(got.startswith(b"HTTP/1.1 504 "), got[:80])
        srv.wait_log(self.member_log(r"read timed out \(504\)"))
        # The worker is fine: the next request is answered.
        self.assertTrue(exchange(srv.port, get("next")).endswith(b"next"))

    # ---- a member that never opens its window (defect 2) ----
    # The body waited for the window under the read timer (here 1 h:
    # for ever); it is the request that cannot be sent: the send timer.

    def test_member_that_never_opens_its_window_is_a_send_timeout(self):
        srv = self.start(timeouts="read: 1h, send: 1s")
        body = b"u" * (200 * 1024)  # beyond the 64 KiB initial window
        got = exchange(srv.port, b"POST /never_opens_window HTTP/1.1\r\nHost: x\r\n"
                       b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        self.assertIsNotNone(got, "the client still waits: the upload was never timed out")
        self.assertTrue(got.startswith(b"HTTP/1.1 504 "), got[:80])
        srv.wait_log(self.member_log(r"send timed out \(504\)"))

    # ---- what the member did wrong, in the log (defect 3) ----
    # nghttp2 refuses a response field or ends the session for a frame
    # that breaks the protocol; the log said only "stream reset
    # (PROTOCOL_ERROR)" or "session ended", which neither names the field
    # nor the frame. (HAProxy logs the termination flags PH--.)

    def test_refused_response_field_is_logged_by_name(self):
        srv = self.start()
        got = exchange(srv.port, get("uppercase_field"))
        self.assertTrue(got.startswith(b"HTTP/1.1 502 "), got[:80])
        srv.wait_log(self.member_log(r"invalid response: Invalid HTTP header field was received: "
                                     r".*name: \[X-Upper\], value: \[b\] \(502\)"))

    def test_member_breaking_the_protocol_is_logged_with_why(self):
        srv = self.start()
        got = exchange(srv.port, get("push_promise"))
        self.assertTrue(got.startswith(b"HTTP/1.1 502 "), got[:80])
        srv.wait_log(self.member_log(r"session ended: PROTOCOL_ERROR: PUSH_PROMISE: push disabled "
                                     r"\(502\)"))
        # A new connection serves the next request.
        self.assertTrue(exchange(srv.port, get("next")).endswith(b"next"))

    # ---- from the client's side (defect 4) ----
    # An HTTP/1 client's `TE: deflate, trailers` asks for trailers, as
    # gRPC-Web proxies and curl's --tr-encoding do; only an exact
    # `TE: trailers` sent `te: trailers` to the member (HAProxy sends it).

    def test_te_list_with_trailers_reaches_the_member_as_te_trailers(self):
        srv = self.start()
        got = exchange(srv.port, b"GET /te HTTP/1.1\r\nHost: x\r\nTE: deflate, trailers\r\n"
                       b"Connection: close, TE\r\n\r\n")
        self.assertTrue(got.endswith(b"next"), got[-80:])
        with self.member.lock:
            fields = [f for r in self.member.requests for f in r[2] if f[0] == "te"]
        self.assertEqual(fields, [("te", "trailers")])

    # ---- interim heads without end (defect 5) ----
    # HEADERS frames are not flow-controlled: every 103 went to the client
    # as it came, so a member's flood of them piled up in the output of a
    # client that reads slowly (23 MB for 300,000 in the probe). The HTTP/1
    # member path stops at 16 KiB of interim heads with a 502; so now does
    # HTTP/2. (HAProxy relays every one.)

    def test_interim_heads_beyond_16_kib_are_502(self):
        srv = self.start()
        got = exchange(srv.port, get("interim_flood"))
        self.assertIsNotNone(got, "no answer")
        heads = got.split(b"\r\n\r\n")
        interim = [h for h in heads if h.startswith(b"HTTP/1.1 103 ")]
        self.assertLess(len(interim), 1000, "interim heads relayed without a bound")
        self.assertIn(b"HTTP/1.1 502 ", got)
        srv.wait_log(self.member_log(r"interim \(1xx\) heads beyond 16 KiB \(502\)"))
        # The stream was reset, not the connection: the next request is served.
        self.assertTrue(exchange(srv.port, get("next")).endswith(b"next"))

    # ---- a stream starved beside a moving one (defect 6) ----
    # The read timer is the connection's (ADR 0034): a sibling that kept
    # moving re-armed it, so a stream the member never answered waited as
    # long as the sibling moved (here 30 s; for ever with a long stream).
    # HAProxy's timeout server is per stream.

    def test_stream_starved_beside_a_moving_one_is_504(self):
        srv = self.start()
        moving = threading.Thread(target=exchange, args=(srv.port, get("moving")), daemon=True)
        moving.start()
        self.addCleanup(moving.join, TIMEOUT)
        poll(lambda: len(self.member.requests) == 1, what="the moving stream reached the member")
        got = exchange(srv.port, get("starved"))
        self.assertIsNotNone(got, "the starved stream was never timed out")
        self.assertTrue(got.startswith(b"HTTP/1.1 504 "), got[:80])
        self.assertEqual(self.member.nconn, 1, "both streams on one member connection")
        srv.wait_log(self.member_log(r"read timed out \(504\)"))
