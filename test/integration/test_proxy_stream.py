"""Bodies stream through the proxy with bounded memory (issue 7, "What it must
show" 2): a 1 GiB response to a client that first reads nothing, then
slowly, then all, keeps the worker's RSS under 64 MiB; a 256 MiB upload
reaches the backend whole (its SHA-256 checked there).

The backends here stream: they never hold a body (backend.py keeps what it
receives, which is right for its small requests, not for these)."""

import hashlib
import os
import time

from backend import Listener, recv_head
from harness import Client, ServerTestCase, TIMEOUT, make_config, poll, scale, status_kib

DOWNLOAD = 1 << 30            # the 1 GiB
UPLOAD = 256 << 20            # and 256 MiB
RSS_LIMIT_KIB = 64 * 1024     # the worker's RSS bound while they move
BLOCK = bytes(range(256)) * 256  # 64 KiB; the download is this, repeated


class StreamingBackend(Listener):
    """One listener; each connection gets one request: GET answers DOWNLOAD
    bytes of BLOCK with a Content-Length, a POST answers the SHA-256 of the
    body it read (Content-Length), computed as it comes."""

    def __init__(self):
        self.sent = 0           # download bytes the backend's socket took
        super().__init__()

    def one(self, conn):
        conn.settimeout(TIMEOUT * 4)
        try:
            got = recv_head(conn)
            if got is None:
                return
            head, rest = got
            lines = head.split(b"\r\n")
            method = lines[0].split(b" ")[0]
            fields = dict(l.split(b": ", 1) for l in lines[1:] if b": " in l)
            fields = {k.lower(): v for k, v in fields.items()}
            if method == b"POST":
                self.upload(conn, rest, int(fields[b"content-length"]))
            else:
                self.download(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def upload(self, conn, rest, length):
        h = hashlib.sha256(rest)
        got = len(rest)
        while got < length:
            data = conn.recv(1 << 20)
            if not data:
                return
            h.update(data)
            got += len(data)
        body = h.hexdigest().encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def download(self, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % DOWNLOAD)
        chunk = BLOCK * 16  # 1 MiB
        left = DOWNLOAD
        while left > 0:
            n = conn.send(chunk[:min(len(chunk), left)])
            left -= n
            self.sent += n


class ProxyStreaming(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.backend = StreamingBackend()
        self.addCleanup(self.backend.close)
        hosts = '- name: "*"\n  routes:\n    - path: /\n      proxy: {pool: app}\n'
        pools = 'pools:\n  - name: app\n    members: ["%s"]\n' % self.backend.address
        self.srv = self.server(make_config(hosts, "event_loops: 1\ntimeouts: {send: 300s}\n"
                                           "limits: {max_body_size: 512m}") +
                               pools)
        self.worker = self.srv.worker_pids()[0]

    def rss_ok(self, peak):
        rss = status_kib(self.worker)
        peak[0] = max(peak[0], rss)
        self.assertLess(rss, RSS_LIMIT_KIB, "worker RSS %d KiB" % rss)

    def test_1gib_download_to_a_slow_reader_keeps_rss_bounded(self):
        peak = [0]
        c = Client(self.srv.port, timeout=TIMEOUT * 4, rcvbuf=65536)
        self.addCleanup(c.close)
        c.send(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_head()
        self.assertEqual((r.status, r.header("Content-Length")), (200, str(DOWNLOAD)))
        got = len(c.buf)
        # Reading nothing: the backend soon cannot send more, while far
        # less than the body is in flight (buffers of the kernel and the
        # proxy's bounded one), and the worker holds none of the rest.
        poll(lambda: self.backend.sent > 0, what="the backend to start sending")
        stalled = [self.backend.sent, 0]

        def settled():
            prev, stalled[0] = stalled[0], self.backend.sent
            return prev == stalled[0]
        poll(settled, interval=0.2, what="the backend to be held back")
        self.assertLess(self.backend.sent, 64 << 20, "no backpressure: the backend sent "
                        "%d bytes to a client that read none" % self.backend.sent)
        self.rss_ok(peak)
        # Slowly: 64 KiB reads, 400 of them, RSS sampled.
        for i in range(400):
            data = c.sock.recv(65536)
            self.assertTrue(data, "connection closed after %d bytes" % got)
            got += len(data)
            if i % 50 == 0:
                self.rss_ok(peak)
        # Then all of it, checking the bytes by position.
        deadline = time.monotonic() + scale(120)
        while got < DOWNLOAD:
            self.assertLess(time.monotonic(), deadline, "only %d of %d bytes" % (got, DOWNLOAD))
            data = c.sock.recv(1 << 20)
            self.assertTrue(data, "connection closed after %d bytes" % got)
            off = got % len(BLOCK)
            self.assertEqual(data[:64], (BLOCK[off:] + BLOCK)[:min(64, len(data))])
            got += len(data)
            if got % (64 << 20) < len(data):
                self.rss_ok(peak)
        self.assertEqual(got, DOWNLOAD)
        self.rss_ok(peak)
        print("1 GiB relayed; worker peak RSS sampled %d KiB; the backend was held at %d "
              "bytes sent while the client read nothing" % (peak[0], stalled[0]))

    def test_256mib_upload_arrives_whole(self):
        body_block = os.urandom(1 << 20)
        want = hashlib.sha256()
        for _ in range(UPLOAD >> 20):
            want.update(body_block)
        peak = [0]
        c = Client(self.srv.port, timeout=TIMEOUT * 4)
        self.addCleanup(c.close)
        c.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % UPLOAD)
        for i in range(UPLOAD >> 20):
            c.sock.sendall(body_block)
            if i % 32 == 0:
                self.rss_ok(peak)
        r = c.read_head()
        body = c._read_exact(int(r.header("Content-Length")))
        self.assertEqual(r.status, 200)
        self.assertEqual(body.decode(), want.hexdigest())
        self.rss_ok(peak)
        print("256 MiB uploaded; SHA-256 matched at the backend; worker peak RSS sampled "
              "%d KiB" % peak[0])
