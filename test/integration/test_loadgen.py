"""The fixed-rate load of loadgen.py against the real build: every request
of every kind counted ok while the server serves; failures counted when
the server dies under it; an idle close and a Connection: close answer are
not failures. The load tests of issue 11 (test_upgrade_load.py) trust
these counts, so each check here must be able to fail."""

import os
import shutil
import signal
import socket
import ssl
import tempfile
import threading
import unittest

import h2.config
import h2.connection
import h2.errors
import h2.events
from hyperframe.frame import GoAwayFrame

from backend import Backend
from certs import make_pair
from harness import TIMEOUT, ServerTestCase, free_port, scale
from loadgen import REQUEST_TIMEOUT, LoadGen, format_summary

# A respond route ("/", its body given per test) and a proxy route to one
# backend: "/proxy/".
URLS = ("/", "/proxy/x")


def load_config(tls_port, backend_address, body="hello", server="", routes=""):
    """A plain listener on @PORT@ and a TLS one on tls_port (certificate
    load.crt/load.key in the server's dir, see load_certs), two workers,
    "/" answering body, "/proxy/" proxied to backend_address. server: more
    lines of the server block (indented by two); routes: more routes
    (indented by six)."""
    return ('server:\n'
            '  listen: ["127.0.0.1:@PORT@", {address: "127.0.0.1:%d", tls: true}]\n'
            '  event_loops: 2\n'
            '  tls: {default_certificate: {cert: load.crt, key: load.key}}\n'
            '%s'
            'hosts:\n'
            '  - name: "*"\n'
            '    routes:\n'
            '      - path: /proxy/\n'
            '        proxy: {pool: app}\n'
            '%s'
            '      - path: /\n'
            '        respond: {status: 200, headers: {Content-Type: text/plain}, body: "%s"}\n'
            'pools:\n'
            '  - name: app\n'
            '    members: ["%s"]\n'
            % (tls_port, server if "admin" in server else server + "  admin: {listen: []}\n",
               routes, body, backend_address))


def load_certs(directory):
    """load.crt and load.key for load.test in directory; the client's
    context trusting it."""
    crt, _ = make_pair(directory, "load", "load.test", kind="ec")
    return ssl.create_default_context(cafile=crt)


def start_load(srv, tls_port, ctx, **kw):
    """A LoadGen on URLS against srv, started."""
    kw.setdefault("rate", 60)
    kw.setdefault("seconds", scale(30))
    return LoadGen(srv.port, URLS, tls_port=tls_port, tls_context=ctx,
                   server_name="load.test", **kw).start()


class LoadGenChecks(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.backend = Backend("app")
        self.addCleanup(self.backend.stop)
        self.tls_port = free_port()

    def start(self, **kw):
        srv = self.server(load_config(self.tls_port, self.backend.address, **kw), start=False)
        self.ctx = load_certs(srv.dir)
        srv.start()
        srv.wait_ready(port=self.tls_port)
        return srv

    def test_every_kind_answers_ok_through_both_routes(self):
        srv = self.start()
        gen = start_load(srv, self.tls_port, self.ctx, max_requests=120)
        gen.wait_requests(120, timeout=scale(30))
        gen.stop()
        s = gen.summary()
        print(format_summary(s))
        self.assertEqual(s["failed"], 0, format_summary(s))
        self.assertEqual(s["requests"], 120)
        for kind, counts in s["counts"].items():
            self.assertEqual(counts["ok"], 40, kind)
        self.assertEqual(list(s["servers"]), ["scalws"])
        bodies = {(r.kind, r.url, r.body) for r in gen.records}
        for kind in ("h1", "h1-new", "h2"):
            self.assertIn((kind, "/", b"hello"), bodies)
            self.assertIn((kind, "/proxy/x", b"app GET /proxy/x"), bodies)

    def test_server_killed_under_load_counts_failures(self):
        srv = self.start()
        gen = start_load(srv, self.tls_port, self.ctx)
        gen.wait_requests(30, timeout=scale(30))
        os.killpg(srv.pid, signal.SIGKILL)
        killed = len(gen.records)
        # Requests due after the kill find no listener: refused, or the
        # connections the workers held end (reset, closed).
        gen.wait_requests(killed + 30, timeout=REQUEST_TIMEOUT * 2)
        gen.stop()
        s = gen.summary()
        print(format_summary(s))
        late = gen.records[killed:]
        self.assertTrue(late and all(r.outcome != "ok" for r in late), format_summary(s))
        for kind, counts in s["counts"].items():
            self.assertGreater(counts["refused"] + counts["reset"] + counts["closed"], 0,
                               "%s: %r" % (kind, counts))

    def test_idle_close_and_connection_close_are_not_failures(self):
        """The server ends idle connections (keepalive 50ms, below the
        interval at which a client reuses one) and every second request
        on a connection gets Connection: close: the clients reconnect and
        nothing fails. Without the check before reuse, h1 requests would
        be written on connections the server already closed."""
        srv = self.start(server="  keepalive_requests: 2\n  timeouts: {keepalive: 50ms}\n")
        gen = start_load(srv, self.tls_port, self.ctx, rate=12, max_requests=36,
                         keepalive_conns=1, h2_conns=1)
        gen.wait_requests(36, timeout=scale(30))
        gen.stop()
        s = gen.summary()
        print(format_summary(s))
        self.assertEqual(s["failed"], 0, format_summary(s))
        # The server did close them: at least every second h1 request
        # (keepalive_requests) came on a new connection (nearly all, as the
        # idle closes come first, but that depends on timing), and the h2
        # client needed more than one.
        self.assertGreaterEqual(gen.connects["h1"], 6, dict(gen.connects))
        self.assertGreater(gen.connects["h2"], 1, dict(gen.connects))


class _GoawayServer(threading.Thread):
    """An HTTP/2-over-TLS server (python3-h2) that makes a client retry:
    on its first connection it takes two streams, sends GOAWAY naming the
    first as the last it processes, answers that one and closes; on its
    second it refuses the first stream (RST_STREAM REFUSED_STREAM), then
    answers every stream. Each answer: 200, Server: fake, body "fake"."""

    def __init__(self, directory):
        super().__init__(daemon=True)
        crt, key = make_pair(directory, "fake", "load.test", kind="ec")
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(crt, key)
        self.ctx.set_alpn_protocols(["h2"])
        self.client_ctx = ssl.create_default_context(cafile=crt)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.start()

    def stop(self):
        self.stopping.set()
        self.listener.close()
        self.join(TIMEOUT)

    def answer(self, conn, sid):
        conn.send_headers(sid, [(":status", "200"), ("server", "fake"),
                                ("content-length", "4")])
        conn.send_data(sid, b"fake", end_stream=True)

    def run(self):
        for n in range(2):
            try:
                raw, _ = self.listener.accept()
                with self.ctx.wrap_socket(raw, server_side=True) as sock:
                    sock.settimeout(TIMEOUT)
                    self.serve(sock, first=n == 0)
            except OSError:
                if self.stopping.is_set():
                    return

    def serve(self, sock, first):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        streams = []
        for _ in range(10000):
            data = sock.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    streams.append(ev.stream_id)
                    if not first and len(streams) == 1:
                        conn.reset_stream(ev.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
                    elif not first:
                        self.answer(conn, ev.stream_id)
            if first and len(streams) == 2:
                # GOAWAY before the answer it lets finish (python3-h2
                # would send nothing after its own GOAWAY: built by hand).
                self.answer(conn, streams[0])
                goaway = GoAwayFrame(0, last_stream_id=streams[0], error_code=0).serialize()
                sock.sendall(goaway + conn.data_to_send())
                return
            sock.sendall(conn.data_to_send())


class LoadGenRetries(unittest.TestCase):
    def test_streams_refused_or_above_goaway_are_retried_not_failed(self):
        d = tempfile.mkdtemp(prefix="scalws-it-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        srv = _GoawayServer(d)
        self.addCleanup(srv.stop)
        gen = LoadGen(None, ["/"], rate=50, max_requests=6, kinds=("h2",), h2_conns=1,
                      h2_streams=2, tls_port=srv.port, tls_context=srv.client_ctx,
                      server_name="load.test").start()
        gen.wait_requests(6, timeout=scale(10))
        gen.stop()
        s = gen.summary()
        print(format_summary(s))
        self.assertEqual(s["failed"], 0, format_summary(s))
        self.assertEqual(s["counts"]["h2"]["ok"], 6)
        # Stream 3 above the GOAWAY's last stream id, then the refused one.
        self.assertEqual(s["retried"]["h2"], 2, format_summary(s))
        self.assertEqual(gen.connects["h2"], 2)
        self.assertEqual(list(s["servers"]), ["fake"])
