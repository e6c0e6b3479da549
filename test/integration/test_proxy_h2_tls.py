"""Pools that speak HTTP/2 over TLS to their members: `protocol: h2` or
`grpc` with `tls:` (docs/adr/0034, worker/upstream_h2.c over
worker/upstream_tls.c). The members are real TLS h2 peers: nghttpd
(Debian's nghttp2-server) and the project's gRPC-style backend over
Python's ssl (h2_backend.py), with certificates made at test time
(certs.py). Every test of test_proxy_h2.py runs again over TLS
(H2PoolsOverTls); H2TlsPools has what only TLS has: nghttpd, the member's
CA, resumption, and ALPN, which must choose h2: a member that speaks only
HTTP/1.1 over TLS fails the connection, which is a connect failure for the
retries and the passive health."""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest

import certs
import test_proxy_h2
from h2_backend import H2Backend, H2Client, tls_context
from harness import TIMEOUT, Client, ServerTestCase, free_port, make_config, poll, request
from test_proxy_h2 import GRPC_HEADERS, HOSTS

FILE_BODY = b"served by nghttpd over TLS\n" * 40


def nghttpd_path():
    for d in ("/usr/sbin", "/usr/bin"):
        if os.access(os.path.join(d, "nghttpd"), os.X_OK):
            return os.path.join(d, "nghttpd")
    return shutil.which("nghttpd")


class Nghttpd:
    """nghttpd on 127.0.0.1 over TLS, serving htdocs, echoing request
    bodies back (--echo-upload) and ending every response with the
    trailer x-end: 1. Ready when it accepts a connection."""

    def __init__(self, tmp, crt, key):
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        self.htdocs = os.path.join(tmp, "htdocs")
        os.makedirs(os.path.join(self.htdocs, "h2"), exist_ok=True)
        with open(os.path.join(self.htdocs, "h2", "file.txt"), "wb") as f:
            f.write(FILE_BODY)
        self.log = open(os.path.join(tmp, "nghttpd.log"), "wb")
        self.proc = subprocess.Popen(
            [nghttpd_path(), "-a", "127.0.0.1", "--htdocs", self.htdocs, "--echo-upload",
             "--trailer", "x-end: 1", str(self.port), key, crt],
            stdout=self.log, stderr=subprocess.STDOUT)
        poll(self._accepts, what="nghttpd accepting on %s" % self.address)

    def _accepts(self):
        if self.proc.poll() is not None:
            raise AssertionError("nghttpd exited with %s" % self.proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)
        self.log.close()


class Http1OnlyMember:
    """A TLS member that offers only http/1.1 in ALPN (and answers
    nothing): it counts the handshakes it completed."""

    def __init__(self, crt, key):
        self.ctx = tls_context(crt, key, alpn=("http/1.1",))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.handshakes = 0
        self.stopped = False
        self.conns = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                continue
            try:
                s.settimeout(TIMEOUT)
                self.conns.append(self.ctx.wrap_socket(s, server_side=True))
                self.handshakes += 1
            except (ssl.SSLError, OSError):
                s.close()

    def stop(self):
        self.stopped = True
        self.thread.join(timeout=TIMEOUT)
        self.sock.close()
        for c in self.conns:
            c.close()


class MemberCerts:
    """A member certificate for 127.0.0.1, self-signed (its own CA), and
    `other`, a CA that did not sign it."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="scalws-h2tls-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.crt, self.key = certs.make_pair(self.tmp, "member", "backend.test",
                                             kind="ec", ips=["127.0.0.1"])
        self.other_crt, _ = certs.make_pair(self.tmp, "other", "other.test", kind="ec",
                                            ips=["127.0.0.1"])

    def backend(self, name="m", mode="echo"):
        b = H2Backend(name, mode, tls=tls_context(self.crt, self.key))
        self.addCleanup(b.stop)
        return b


class H2PoolsOverTls(MemberCerts, test_proxy_h2.H2Pools):
    """test_proxy_h2's tests, each member over TLS (verified, ALPN h2)."""

    def start(self, members, rpc_extra="", tls="", extra=""):
        return super().start(members, rpc_extra, tls=", tls: {ca: %s}" % self.crt, extra=extra)

    def test_body_dropped_after_the_answer_gives_the_connection_window_back(self):
        self.skipTest("about the client side: its member refuses connects, no TLS happens")


class H2TlsPools(MemberCerts, ServerTestCase):

    def nghttpd(self):
        if nghttpd_path() is None:
            self.skipTest("nghttpd (nghttp2-server) is not installed")
        n = Nghttpd(self.tmp, self.crt, self.key)
        self.addCleanup(n.stop)
        return n

    def start(self, members, tls=None, extra=""):
        """Both pools over TLS to members (verified against our CA)."""
        tls = tls or "{ca: %s}" % self.crt
        addresses = ", ".join('"%s"' % m.address for m in members)
        pools = ("pools:\n"
                 "  - {name: plain, protocol: h2, tls: %s, members: [%s]%s}\n"
                 "  - {name: rpc, protocol: grpc, tls: %s, members: [%s]%s}\n"
                 % (tls, addresses, extra, tls, addresses, extra))
        return self.server(make_config(HOSTS) + pools)

    def h2client(self, srv):
        c = H2Client(srv.port)
        self.addCleanup(c.close)
        return c

    def exchange(self, srv, method="GET", path="/h2/file.txt", body=b""):
        with Client(srv.port) as c:
            c.send(request(method, path, body=body,
                           headers=[("Content-Length", str(len(body)))] if body else []))
            return c.read_response(method)

    # ---- against nghttpd ----

    def test_get_from_nghttpd(self):
        n = self.nghttpd()
        srv = self.start([n])
        r = self.exchange(srv)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, FILE_BODY)

    def test_post_body_echoed_by_nghttpd(self):
        n = self.nghttpd()
        srv = self.start([n])
        body = os.urandom(100 * 1024)
        r = self.exchange(srv, "POST", "/h2/upload", body)
        self.assertEqual(r.status, 200)
        self.assertTrue(r.body == body, "the echoed body differs (%d bytes)" % len(r.body))

    def test_nghttpd_trailers_reach_an_http2_client(self):
        n = self.nghttpd()
        srv = self.start([n])
        c = self.h2client(srv)
        r = c.response(c.start("/h2/file.txt", method="GET"))
        self.assertEqual(r.status, 200)
        self.assertEqual(bytes(r.body), FILE_BODY)
        self.assertEqual(r.trailer("x-end"), "1")

    # ---- against the gRPC-style backend over TLS ----

    def test_grpc_call_with_trailers_over_tls(self):
        m = self.backend()
        srv = self.start([m])
        c = self.h2client(srv)
        msg = b"\0\0\0\0\x05hello"
        r = c.response(c.start("/rpc/pkg.Svc/Call", body=msg, headers=GRPC_HEADERS,
                               trailers=[("x-client-sum", "42")]))
        self.assertIsNone(r.reset)
        self.assertEqual(r.status, 200)
        self.assertEqual(bytes(r.body), msg)
        self.assertEqual(r.trailer("grpc-status"), "0")
        got = m.requests[0]
        self.assertEqual(bytes(got.body), msg)
        self.assertEqual(got.trailers, [("x-client-sum", "42")])
        self.assertEqual(got.header(":scheme"), "https")
        self.assertEqual(got.header("te"), "trailers")
        self.assertEqual(m.alpn, ["h2"])

    def test_a_new_connection_resumes_the_members_session(self):
        m = self.backend()
        # keepalive 0: the connection closes after its stream, so the
        # second request needs a new one, which offers the session.
        srv = self.start([m], extra=", keepalive: 0")
        self.assertEqual(self.exchange(srv, "POST", "/h2/a", b"one").status, 200)
        poll(lambda: m.connections == 1 and m.handshakes == 1, what="the first handshake")
        self.assertEqual(self.exchange(srv, "POST", "/h2/b", b"two").status, 200)
        self.assertEqual(m.handshakes, 2)
        self.assertEqual(m.resumed, 1)

    def test_a_connection_made_beside_an_open_one_resumes_its_session(self):
        # An HTTP/2 connection stays open (never back to the idle pool):
        # its session is kept when a stream ends, for the next connection.
        m = H2Backend("m", tls=tls_context(self.crt, self.key), max_streams=1)
        self.addCleanup(m.stop)
        srv = self.start([m])
        c = self.h2client(srv)
        r = c.response(c.start("/h2/a", body=b"a"))
        self.assertEqual((r.status, bytes(r.body)), (200, b"a"))
        # Two at once, answered only when both are open: one per
        # connection, since the member takes one stream per connection.
        m.mode = "gather:2"
        sids = [c.start("/h2/b", body=b"b"), c.start("/h2/c", body=b"c")]
        self.assertEqual([bytes(c.response(sid).body) for sid in sids], [b"b", b"c"])
        self.assertEqual((m.connections, m.handshakes, m.resumed), (2, 2, 1))

    # ---- refusals ----

    def test_certificate_outside_the_ca_is_a_502_with_the_reason(self):
        m = self.backend()
        srv = self.start([m], tls="{ca: %s}" % self.other_crt)
        r = self.exchange(srv, "POST", "/h2/x", b"body")
        self.assertEqual(r.status, 502)
        line = srv.wait_log(r".*certificate verify failed.*").group(0)
        self.assertIn(m.address, line)
        self.assertEqual(m.requests, [])

    def test_member_without_h2_in_alpn_is_refused_then_the_next_is_tried(self):
        bad = Http1OnlyMember(self.crt, self.key)
        self.addCleanup(bad.stop)
        good = self.backend("good")
        # max_fails 1: one refusal takes the member out for the cooldown.
        health = ", retries: 1, health: {max_fails: 1, fail_window: 60s, cooldown: 60s}"
        srv = self.start([bad, good], extra=health)
        for i in range(4):
            r = self.exchange(srv, "POST", "/h2/n%d" % i, b"x%d" % i)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, b"x%d" % i)
        line = srv.wait_log(r".*chose no ALPN protocol, not h2.*").group(0)
        self.assertIn(bad.address, line)
        # Round robin would have sent half of them to it: health counted
        # the refusal and kept it out.
        self.assertEqual(bad.handshakes, 1)
        self.assertEqual(len(good.requests), 4)

    def test_member_without_h2_alone_is_a_502(self):
        bad = Http1OnlyMember(self.crt, self.key)
        self.addCleanup(bad.stop)
        srv = self.start([bad])
        r = self.exchange(srv)
        self.assertEqual(r.status, 502)
        line = srv.wait_log(r".*chose no ALPN protocol, not h2.*\(502\)").group(0)
        self.assertIn(bad.address, line)


if __name__ == "__main__":
    unittest.main()
