"""TLS to upstream members: a pool's `protocol: https` (docs/adr/0030).

The member is the project's test backend behind Python's ssl module,
with certificates made at test time by openssl(1): a CA and a member
certificate it signed (for backend.test and 127.0.0.1), and a self-signed
one no CA vouches for. The backend counts handshakes, resumed ones and
the SNI names it was sent."""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import unittest

import backend
from harness import Client, binary, make_config, poll, request
from test_proxy import ProxyTestCase
from test_tunnel import _ClientReader, echo_upgrade, read_exactly, ws_handshake

BIG = 1 << 20


def openssl(*args, cwd):
    subprocess.run(("openssl",) + args, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_certs(d):
    """ca.pem; member.pem (signed by it) and self.pem (self-signed), both
    for backend.test and 127.0.0.1 with key member.key."""
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=d)
    openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=scalws test CA",
            "-days", "2", "-out", "ca.pem", cwd=d)
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "member.key", cwd=d)
    names = ("-addext", "subjectAltName=DNS:backend.test,IP:127.0.0.1",
             "-addext", "basicConstraints=critical,CA:FALSE")
    openssl("req", "-x509", "-new", "-key", "member.key", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-subj", "/CN=backend.test", *names, "-days", "2", "-out", "member.pem", cwd=d)
    openssl("req", "-x509", "-new", "-key", "member.key", "-subj", "/CN=backend.test", *names,
            "-days", "2", "-out", "self.pem", cwd=d)


class PlainAnswer(backend.Listener):
    """A plain HTTP server that answers whatever it reads (a ClientHello
    too) with a 400 and closes, as nginx or HAProxy do."""

    def __init__(self):
        self.reads = 0
        super().__init__()

    def one(self, conn):
        with conn:
            conn.settimeout(backend.IO_TIMEOUT)
            if conn.recv(4096):
                self.reads += 1
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                             b"Connection: close\r\n\r\n")


class TlsBackend(backend.Backend):
    """backend.Backend over TLS; GET /big answers BIG bytes."""

    def __init__(self, name, certfile, keyfile, **kw):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.ctx.sni_callback = self._sni
        self.snis = []
        self.handshakes = 0
        self.resumed = 0
        self.failed_handshakes = 0
        super().__init__(name, **kw)

    def _sni(self, sock, name, ctx):
        with self.lock:
            self.snis.append(name)

    def _serve(self, sock):
        try:
            tls = self.ctx.wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError):
            with self.lock:
                self.failed_handshakes += 1
                self.socks.discard(sock)
            sock.close()
            return
        with self.lock:
            self.handshakes += 1
            self.resumed += 1 if tls.session_reused else 0
            self.socks.discard(sock)
            self.socks.add(tls)
        super()._serve(tls)

    def _answer(self, sock, req, mode):
        if req.target != "/big":
            return super()._answer(sock, req, mode)
        body = bytes(i % 251 for i in range(BIG))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % BIG + body)
        return True


def tls_config(address, tls="", retries=0):
    return make_config("""
- name: "*"
  routes:
    - path: /
      proxy: {pool: app}
""") + ('pools:\n  - name: app\n    protocol: https\n    retries: %d\n%s'
        '    members:\n      - "%s"\n' % (retries, tls, address))


class UpstreamTls(ProxyTestCase):
    def setUp(self):
        super().setUp()
        self.certs = tempfile.mkdtemp(prefix="scalws-upstls-")
        self.addCleanup(shutil.rmtree, self.certs, True)
        make_certs(self.certs)

    def path(self, name):
        return os.path.join(self.certs, name)

    def tls_backend(self, name="a", cert="member.pem"):
        b = TlsBackend(name, self.path(cert), self.path("member.key"))
        self.backends.append(b)
        return b

    def tls_server(self, b, tls=None, retries=0):
        if tls is None:
            tls = "    tls: {ca: %s}\n" % self.path("ca.pem")
        return self.server(tls_config(b.address, tls, retries))

    def exchange(self, srv, method="GET", path="/x", body=b""):
        with Client(srv.port) as c:
            c.send(request(method, path, host="site.test", body=body,
                           headers=[("Content-Length", str(len(body)))] if body else []))
            return c.read_response(method)

    def test_get_and_post_verified_against_the_ca(self):
        b = self.tls_backend()
        srv = self.tls_server(b)
        r = self.exchange(srv)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"a GET /x")
        r = self.exchange(srv, "POST", "/form", b"k=v&x=1")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"a POST /form")
        self.assertEqual(b.requests[-1].body, b"k=v&x=1")

    def test_certificate_outside_the_ca_is_a_502_naming_member_and_reason(self):
        b = self.tls_backend(cert="self.pem")
        srv = self.tls_server(b)
        r = self.exchange(srv)
        self.assertEqual(r.status, 502)
        self.assertEqual(b.count(), 0)
        line = srv.wait_log(r".*certificate verify failed.*").group(0)
        self.assertIn(b.address, line)
        self.assertIn("self-signed certificate", line)

    def test_verify_off_takes_any_certificate(self):
        b = self.tls_backend(cert="self.pem")
        srv = self.tls_server(b, "    tls: {verify: false}\n")
        r = self.exchange(srv)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"a GET /x")

    def test_sni_is_sent_and_verified(self):
        b = self.tls_backend()
        srv = self.tls_server(b, "    tls: {ca: %s, sni: backend.test}\n" % self.path("ca.pem"))
        self.assertEqual(self.exchange(srv).status, 200)
        self.assertEqual(b.snis, ["backend.test"])

    def test_sni_the_certificate_does_not_name_is_refused(self):
        b = self.tls_backend()
        srv = self.tls_server(b, "    tls: {ca: %s, sni: other.test}\n" % self.path("ca.pem"))
        self.assertEqual(self.exchange(srv).status, 502)
        self.assertEqual(b.snis, ["other.test"])
        srv.wait_log("certificate verify failed: hostname mismatch")

    def test_ip_member_sends_no_sni(self):
        b = self.tls_backend()
        srv = self.tls_server(b)
        self.assertEqual(self.exchange(srv).status, 200)
        self.assertEqual(b.snis, [None])

    def test_keep_alive_reuses_the_tls_connection(self):
        b = self.tls_backend()
        srv = self.tls_server(b)
        for i in range(3):
            r = self.exchange(srv, path="/k%d" % i)
            self.assertEqual(r.body, b"a GET /k%d" % i)
        self.assertEqual((b.handshakes, b.connections), (1, 1))

    def test_a_new_connection_resumes_the_members_session(self):
        b = self.tls_backend()
        srv = self.tls_server(b)
        self.assertEqual(self.exchange(srv).status, 200)
        # The member closes its side: the pooled connection is dropped and
        # the next request needs a new one, which offers the session.
        for s in list(b.socks):
            s.shutdown(2)
        poll(lambda: not b.socks, what="the backend's connection closed")
        # One exchange, 200: should the pool still hand out the closed
        # connection, the stale-connection resend (ADR 0026) goes on a new
        # one; a 502 is a regression, not a race to wait out.
        self.assertEqual(self.exchange(srv).status, 200)
        self.assertEqual(b.handshakes, 2)
        self.assertEqual(b.resumed, 1)

    def test_one_mib_response_exact(self):
        b = self.tls_backend()
        srv = self.tls_server(b)
        r = self.exchange(srv, path="/big")
        self.assertEqual(r.status, 200)
        self.assertEqual(len(r.body), BIG)
        self.assertEqual(r.body, bytes(i % 251 for i in range(BIG)))

    def test_plain_http_member_is_a_502_not_a_hang(self):
        b = PlainAnswer()
        self.addCleanup(b.close)
        srv = self.tls_server(b)
        r = self.exchange(srv)
        # A hang would end at the connect timeout (5 s) with a 504.
        self.assertEqual(r.status, 502)
        self.assertEqual(b.reads, 1)
        line = srv.wait_log(r".*TLS handshake.*").group(0)
        self.assertIn(b.address, line)

    def test_websocket_tunnel_over_tls(self):
        b = self.tls_backend("ws")
        b.set_mode("websocket")
        srv = self.tls_server(b)
        with Client(srv.port) as c:
            r, key = ws_handshake(c)
            self.assertEqual(r.status, 101)
            self.assertEqual(r.header("Sec-WebSocket-Accept"), backend.websocket_accept(key))
            reader = _ClientReader(c)
            big = os.urandom(100 * 1024)  # several TLS records, more than the tunnel's buffer
            for msg in (b"hello", big, b"after"):
                c.send(backend.ws_frame(2, msg, mask=os.urandom(4)))
                self.assertEqual(backend.ws_read_frame(reader), (2, msg))

    def test_half_close_through_a_tls_tunnel(self):
        b = self.tls_backend("e")
        b.set_mode("echo")
        srv = self.tls_server(b)
        with Client(srv.port) as c:
            self.assertEqual(echo_upgrade(c, b"early ").status, 101)
            self.assertEqual(read_exactly(c, 6), b"early ")
            c.send(b"more")
            self.assertEqual(read_exactly(c, 4), b"more")
            # Our FIN goes to the member as close_notify and FIN; its
            # "<eof>" and end come back.
            c.sock.shutdown(socket.SHUT_WR)
            self.assertTrue(c.read_until_close())
            self.assertEqual(c.buf, b"<eof>")


class Config(ProxyTestCase):
    def test_tls_on_an_http_pool_is_refused(self):
        srv = self.server(tls_config("127.0.0.1:1", "    tls: {verify: false}\n").replace(
            "protocol: https", "protocol: http"), start=False)
        p = subprocess.run([binary(), "-t", "-c", srv.config_path],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("tls needs protocol: https, h2 or grpc", p.stderr + p.stdout)

    def test_h2_over_tls_is_accepted(self):
        srv = self.server(tls_config("127.0.0.1:1", "    tls: {verify: false}\n").replace(
            "protocol: https", "protocol: h2"), start=False)
        p = subprocess.run([binary(), "-t", "-c", srv.config_path],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)

    def test_ca_that_is_no_pem_is_refused_at_its_line(self):
        srv = self.server(tls_config("127.0.0.1:1", "    tls: {ca: garbage.pem}\n"), start=False)
        with open(os.path.join(srv.dir, "garbage.pem"), "w") as f:
            f.write("not a certificate\n")
        p = subprocess.run([binary(), "-t", "-c", srv.config_path],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(p.stderr + p.stdout, r"scalws\.yaml:\d+:\d+: pools\[0\]\.tls\.ca: .*"
                         r"garbage\.pem: holds no PEM certificate")


if __name__ == "__main__":
    unittest.main()
