"""Large response bodies through the proxy (issue 7, "splice"; ADR 0022):
a body announced with a Content-Length of 64 KiB or more goes upstream
socket -> pipe -> client socket by splice(2); a chunked or smaller one is
copied. Both arrive byte-exact (SHA-256) to a client that first reads
nothing and then reads slowly, with the worker's RSS bounded; a client that
leaves mid-body gets its upstream connection closed (not pooled); an
upstream that closes mid-body gets the client's connection closed after a
short body (not a second answer).

Which path a body took is seen from outside: while a spliced body is held
back by its client, the worker holds a pipe (/proc/PID/fd); a fresh worker
that only copied holds none."""

import hashlib
import os
import time

from backend import Listener
from harness import Client, ServerTestCase, TIMEOUT, make_config, poll, scale, status_kib

MIB = 1 << 20
# The worker's RSS bound while bodies move, ASan's build too: the chunked
# copy path's framing over the output's mark fits its slack
# (SWS_CONN_OUT_SLACK), so no buffer grows and is freed per 64 KiB for
# ASan's quarantine to keep.
RSS_LIMIT_KIB = 64 * 1024
BLOCK = os.urandom(MIB)          # bodies are this, repeated and cut


def body_digest(size):
    h = hashlib.sha256()
    left = size
    while left > 0:
        h.update(BLOCK[:min(MIB, left)])
        left -= min(MIB, left)
    return h.hexdigest()


def pipes_held(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("pipe:"):
                n += 1
        except OSError:
            pass
    return n


class BodyBackend(Listener):
    """Answers GET /SIZE/FRAMING[/cut] with SIZE bytes of BLOCK, framed by
    a Content-Length ("length") or in 64 KiB chunks ("chunked"); "cut"
    closes after half the body. Counts the bytes its sockets took and the
    connections the proxy closed."""

    def __init__(self):
        self.sent = 0
        self.peer_closed = 0      # connections on which the proxy closed its side
        super().__init__()

    def one(self, conn):
        conn.settimeout(TIMEOUT * 4)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        self.peer_closed += 1
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                parts = head.split(b" ")[1].decode().strip("/").split("/")
                if not self.answer(conn, int(parts[0]), parts[1], parts[2:] == ["cut"]):
                    return
        except OSError:
            self.peer_closed += 1
        finally:
            conn.close()

    def answer(self, conn, size, framing, cut):
        chunked = framing == "chunked"
        conn.sendall(b"HTTP/1.1 200 OK\r\n" +
                     (b"Transfer-Encoding: chunked\r\n" if chunked else
                      b"Content-Length: %d\r\n" % size) + b"\r\n")
        pos, end = 0, size // 2 if cut else size
        while pos < end:
            off = pos % MIB
            piece = BLOCK[off:off + min(65536 if chunked else MIB, end - pos)]
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            pos += len(piece)
            self.sent += len(piece)
        if cut:
            return False
        if chunked:
            conn.sendall(b"0\r\n\r\n")
        return True


class ProxySplice(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.backend = BodyBackend()
        self.addCleanup(self.backend.close)
        hosts = '- name: "*"\n  routes:\n    - path: /\n      proxy: {pool: app}\n'
        pools = 'pools:\n  - name: app\n    members: ["%s"]\n' % self.backend.address
        self.srv = self.server(make_config(hosts, "event_loops: 1\ntimeouts: {send: 300s}\n") +
                               pools)
        self.worker = self.srv.worker_pids()[0]

    def rss_ok(self):
        rss = status_kib(self.worker)
        self.assertLess(rss, RSS_LIMIT_KIB, "worker RSS %d KiB" % rss)

    def held_back(self):
        """Waits until the backend stops sending to a client reading nothing."""
        poll(lambda: self.backend.sent > 0, what="the backend to start sending")
        seen = [-1]

        def settled():
            prev, seen[0] = seen[0], self.backend.sent
            return prev == seen[0]
        poll(settled, interval=0.2, what="the backend to be held back")

    def fetch(self, size, framing, slow):
        """GET a body; with slow, read nothing until the backend is held
        back, then 64 KiB at a time. Returns (digest, pipes held while
        held back)."""
        c = Client(self.srv.port, timeout=TIMEOUT * 4, rcvbuf=65536)
        self.addCleanup(c.close)
        c.send(b"GET /%d/%s HTTP/1.1\r\nHost: x\r\n\r\n" % (size, framing.encode()))
        pipes = None
        if slow:
            self.held_back()
            pipes = pipes_held(self.worker)
            self.rss_ok()
        r = c.read_head()
        self.assertEqual(r.status, 200)
        if framing == "chunked":
            self.assertEqual(r.header("Transfer-Encoding"), "chunked")
            h = hashlib.sha256()
            for i in range(size // 1024 + 2):  # chunks are never under 1 KiB here
                if i % 256 == 0:
                    self.rss_ok()
                n = int(c._read_until(b"\r\n").split(b";")[0], 16)
                if n == 0:
                    break
                h.update(c._read_exact(n))
                self.assertEqual(c._read_exact(2), b"\r\n")
            self.assertEqual(c._read_until(b"\r\n"), b"\r\n")
            self.rss_ok()
            return h.hexdigest(), pipes
        self.assertEqual(r.header("Content-Length"), str(size))
        h = hashlib.sha256(c.buf)
        got = len(c.buf)
        c.buf = b""
        deadline = time.monotonic() + scale(120)
        reads = 0
        while got < size:
            self.assertLess(time.monotonic(), deadline, "only %d of %d bytes" % (got, size))
            data = c.sock.recv(min(65536, size - got))
            self.assertTrue(data, "connection closed after %d of %d bytes" % (got, size))
            h.update(data)
            got += len(data)
            reads += 1
            if reads % 256 == 0:
                self.rss_ok()
        self.rss_ok()
        # The connection is kept: a second request is answered on it.
        c.send(b"GET /1000/length HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(c.read_response().body, BLOCK[:1000])
        return h.hexdigest(), pipes

    def check(self, size, framing, spliced):
        digest, pipes = self.fetch(size, framing, slow=True)
        self.assertEqual(digest, body_digest(size), "%d bytes, %s" % (size, framing))
        if spliced:
            self.assertGreater(pipes, 0, "no pipe held: the body was not spliced")
        else:
            self.assertEqual(pipes, 0, "a pipe held: the body was spliced")

    def test_1mib_with_a_length_is_spliced_byte_exact(self):
        self.check(MIB, "length", spliced=True)

    def test_50mib_with_a_length_is_spliced_byte_exact(self):
        self.check(50 * MIB, "length", spliced=True)

    def test_1mib_chunked_is_copied_byte_exact(self):
        self.check(MIB, "chunked", spliced=False)

    def test_50mib_chunked_is_copied_byte_exact(self):
        self.check(50 * MIB, "chunked", spliced=False)

    def test_bodies_around_the_splice_threshold_arrive_byte_exact(self):
        for size in (1, 16 * 1024, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 300 * 1024):
            digest, _ = self.fetch(size, "length", slow=False)
            self.assertEqual(digest, body_digest(size), "%d bytes" % size)

    def client_leaves_mid_body(self, framing):
        c = Client(self.srv.port, timeout=TIMEOUT * 4, rcvbuf=65536)
        c.send(b"GET /%d/%s HTTP/1.1\r\nHost: x\r\n\r\n" % (50 * MIB, framing.encode()))
        self.assertEqual(c.read_head().status, 200)
        self.held_back()
        self.assertEqual(pipes_held(self.worker) > 0, framing == "length",
                         "the body did not take the path the test is about")
        c.close()
        # A pooled connection would stay open: the backend would never see it end.
        poll(lambda: self.backend.peer_closed > 0, timeout=scale(10),
             what="the proxy to close the upstream connection")
        self.assertTrue(self.srv.running())
        # What the left client did not take is not in the next response
        # (a pipe that still held bytes is not reused).
        digest, _ = self.fetch(MIB, framing, slow=False)
        self.assertEqual(digest, body_digest(MIB))

    def test_client_leaving_a_spliced_body_closes_the_upstream_connection(self):
        self.client_leaves_mid_body("length")

    def test_client_leaving_a_copied_body_closes_the_upstream_connection(self):
        self.client_leaves_mid_body("chunked")

    def upstream_cuts(self, size, framing):
        c = Client(self.srv.port, timeout=TIMEOUT * 4)
        self.addCleanup(c.close)
        c.send(b"GET /%d/%s/cut HTTP/1.1\r\nHost: x\r\n\r\n" % (size, framing.encode()))
        r = c.read_head()
        self.assertEqual(r.status, 200)
        self.assertTrue(c.read_until_close(), "the connection stayed open")
        rest = c.buf
        # A short body, then the end of the connection: no second answer.
        self.assertLess(len(rest), size)
        self.assertNotIn(b"HTTP/1.1 ", rest)
        if framing == "length":
            self.assertEqual(rest, (BLOCK * (size // MIB))[:len(rest)])

    def test_upstream_closing_a_spliced_body_closes_the_client_connection(self):
        self.upstream_cuts(4 * MIB, "length")

    def test_upstream_closing_a_copied_body_closes_the_client_connection(self):
        self.upstream_cuts(4 * MIB, "chunked")
