"""TLS termination end to end (issue 8, ADR 0033): real clients (curl,
openssl s_client, Python's ssl) against a TLS listener beside a plain one,
with certificates generated at test time (certs.py)."""

import hashlib
import os
import re
import signal
import socket
import ssl
import subprocess

from certs import make_pair
from harness import TIMEOUT, Client, free_port, poll, request, syscr
from test_proxy import ProxyTestCase

HOSTS = """
hosts:
  - names: [a.test]
    certificates: [{cert: a-rsa.crt, key: a-rsa.key}, {cert: a-ec.crt, key: a-ec.key}]
    routes:
      - path: /
        respond: {body: "hello a\\n"}
      - path: /files/
        static: {root: www}
%(proxy)s
  - names: ["*.wild.test"]
    https_redirect: true
    certificates: [{cert: wild.crt, key: wild.key}]
    routes:
      - path: /
        respond: {body: "hello wild\\n"}
  - name: "*"
    routes:
      - path: /
        respond: {body: "hello any\\n"}
"""


def tls_config(tls_port, tls="", proxy_member=None):
    """Plain listener on @PORT@, TLS on tls_port; `tls`: YAML lines of
    server.tls (indented by four)."""
    text = ('server:\n  listen: ["127.0.0.1:@PORT@", {address: "127.0.0.1:%d", tls: true}]\n'
            "  event_loops: 1\n  admin: {listen: []}\n" % tls_port)
    if tls:
        text += "  tls:\n" + tls
    proxy = ""
    if proxy_member:
        proxy = "      - path: /up/\n        proxy: {pool: up}\n"
    text += HOSTS % {"proxy": proxy}
    if proxy_member:
        text += 'pools:\n  - name: up\n    members: ["%s"]\n' % proxy_member
    return text


def s_client(port, *args, data=b""):
    """openssl s_client's output (stdout and stderr) and exit status."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input=data, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=TIMEOUT)
    return p.stdout.decode("utf-8", "replace"), p.returncode


def subject(out):
    m = re.search(r"^subject=(.*)$", out, re.M)
    return m.group(1) if m else None


class RecordSocket:
    """A TLS client whose records the test places: an ssl.SSLObject over
    memory BIOs on a connected TCP socket, with the socket calls the
    harness Client uses (sendall, recv, settimeout, close)."""

    def __init__(self, sock, ctx, server_hostname):
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=server_hostname)
        for _ in range(100):
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._push()
                if not self._pull():
                    raise ConnectionError("closed during the handshake")
        self._push()

    def _push(self):
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def _pull(self):
        data = self.sock.recv(65536)
        if not data:
            self.inc.write_eof()
            return False
        self.inc.write(data)
        return True

    def records(self, *pieces):
        """The wire bytes of one record per piece (nothing is sent)."""
        for p in pieces:
            self.obj.write(p)
        return self.out.read()

    def close_notify(self):
        """The wire bytes of our close_notify (nothing is sent)."""
        try:
            self.obj.unwrap()
        except ssl.SSLWantReadError:
            pass  # the server's close_notify comes later, if at all
        return self.out.read()

    def sendall(self, data):
        self.sock.sendall(self.records(data))

    def recv(self, n):
        for _ in range(10000):
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                if not self._pull():
                    return b""
            except ssl.SSLZeroReturnError:
                return b""
        raise AssertionError("no plaintext after 10000 socket reads")

    def settimeout(self, t):
        self.sock.settimeout(t)

    def close(self):
        self.sock.close()


class TlsTestCase(ProxyTestCase):
    def start(self, tls="", default=True, proxy_member=None):
        """A server with its certificates: a.test (RSA O=rsa and ECDSA O=ec),
        *.wild.test, and a default (CN=default) unless default is False."""
        self.tls_port = free_port()
        if default:
            tls = "    default_certificate: {cert: def.crt, key: def.key}\n" + tls
        srv = self.server(tls_config(self.tls_port, tls, proxy_member), start=False)
        make_pair(srv.dir, "a-rsa", "a.test", org="rsa")
        make_pair(srv.dir, "a-ec", "a.test", kind="ec", org="ec")
        make_pair(srv.dir, "wild", "*.wild.test", kind="ec")
        make_pair(srv.dir, "def", "default", kind="ec")
        os.makedirs(os.path.join(srv.dir, "www", "files"))
        srv.start()
        srv.wait_ready(port=self.tls_port)
        self.srv = srv
        return srv

    def curl(self, path, *args, host="a.test", cacert="a-ec.crt"):
        """curl --http1.1 over TLS to host (resolved to 127.0.0.1); returns
        the CompletedProcess (stdout: the body)."""
        return subprocess.run(
            ["curl", "-sS", "--http1.1", "--max-time", str(TIMEOUT),
             "--cacert", os.path.join(self.srv.dir, cacert),
             "--resolve", "%s:%d:127.0.0.1" % (host, self.tls_port),
             "https://%s:%d%s" % (host, self.tls_port, path)] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT + 5)

    def ssl_context(self, cafile):
        ctx = ssl.create_default_context(cafile=os.path.join(self.srv.dir, cafile))
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def tls_client(self):
        """A harness Client over TLS to a.test (its EC certificate trusted)."""
        ctx = self.ssl_context("a-ec.crt")
        return Client(self.tls_port,
                      wrap=lambda s: ctx.wrap_socket(s, server_hostname="a.test"))

    def record_client(self):
        """A harness Client over a RecordSocket to a.test (c.sock)."""
        ctx = self.ssl_context("a-ec.crt")
        return Client(self.tls_port, wrap=lambda s: RecordSocket(s, ctx, "a.test"))

    def assert_hello_a(self, r):
        self.assertEqual((r.status, r.body), (200, b"hello a\n"))

    def assert_no_error_lines(self):
        bad = [l for l in self.srv.log().splitlines() if "[error]" in l or "[warn]" in l
               or "[crit]" in l]
        self.assertEqual(bad, [])


class Serving(TlsTestCase):
    def test_get_and_post_with_curl(self):
        self.start()
        r = self.curl("/", "-w", "%{http_code} %{ssl_verify_result}")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"hello a\n200 0")
        r = self.curl("/", "-X", "POST", "--data-binary", "x" * 5000)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"hello a\n")

    def test_alpn_h2_is_chosen_and_served(self):
        # The worker speaks HTTP/2 (set->h2_proto): ALPN picks h2 when the
        # client offers it, and the stream is answered over HTTP/2.
        self.start()
        r = self.curl("/", "-v", "--http2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"ALPN: server accepted h2", r.stderr)
        self.assertIn(b"< HTTP/2 200", r.stderr)
        self.assertEqual(r.stdout, b"hello a\n")

    def test_alpn_http11_when_offered_alone(self):
        self.start()
        r = self.curl("/", "-v", "--http1.1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"ALPN: server accepted http/1.1", r.stderr)
        self.assertIn(b"< HTTP/1.1 200", r.stderr)
        self.assertEqual(r.stdout, b"hello a\n")

    def test_nghttp_streams_over_tls(self):
        # nghttp negotiates h2 by ALPN and sends its four requests as
        # streams of one connection (no SNI to an IP: the default host).
        self.start()
        urls = ["https://127.0.0.1:%d/%s" % (self.tls_port, name) for name in ("", "1", "2", "3")]
        p = subprocess.run(["nghttp", "-nv", "-t", str(TIMEOUT)] + urls,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT + 5)
        out = p.stdout.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("The negotiated protocol: h2", out)
        self.assertEqual(len(re.findall(r"recv \(stream_id=\d+\) :status: 200", out)), 4, out)
        self.assertEqual(len(set(re.findall(r"send HEADERS frame <length=\d+, flags=0x\w+, stream_id=(\d+)>",
                                            out))), 4, out)

    def test_h2load_over_tls_without_errors(self):
        self.start()
        p = subprocess.run(["h2load", "-n", "1000", "-c", "2", "-m", "10",
                            "https://127.0.0.1:%d/" % self.tls_port],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT + 30)
        out = p.stdout.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("Application protocol: h2", out)
        self.assertIn("1000 succeeded, 0 failed, 0 errored, 0 timeout", out)
        self.assertIn("status codes: 1000 2xx", out)

    def test_static_file_over_1mib_whole_and_exact(self):
        srv = self.start()
        data = os.urandom(3 * 1024 * 1024 + 12345)
        with open(os.path.join(srv.dir, "www", "files", "big.bin"), "wb") as f:
            f.write(data)
        r = self.curl("/files/big.bin")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), len(data))
        self.assertEqual(hashlib.sha256(r.stdout).hexdigest(), hashlib.sha256(data).hexdigest())

    def test_keep_alive_requests_on_one_tls_connection(self):
        self.start()
        with self.tls_client() as c:
            for _ in range(3):
                self.assert_hello_a(c.get("/", host="a.test"))

    def test_proxied_request_says_https(self):
        b = self.backend("up")
        self.start(proxy_member=b.address)
        body = os.urandom(200000)
        path = os.path.join(self.srv.dir, "body.bin")
        with open(path, "wb") as f:
            f.write(body)
        r = self.curl("/up/x", "--data-binary", "@" + path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"up POST /up/x")
        req = b.requests[-1]
        self.assertEqual(req.header("X-Forwarded-Proto"), "https")
        self.assertEqual(req.body, body)

    def test_https_redirect_only_on_the_plain_listener(self):
        srv = self.start()
        with Client(srv.port) as c:
            r = c.get("/p?q=1", host="x.wild.test")
            self.assertEqual(r.status, 308)
            self.assertEqual(r.header("Location"), "https://x.wild.test/p?q=1")
        r = self.curl("/p", host="x.wild.test", cacert="wild.crt")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"hello wild\n")

    def test_plain_listener_still_serves_plain_http(self):
        srv = self.start()
        with Client(srv.port) as c:
            r = c.get("/", host="a.test")
            self.assertEqual((r.status, r.body), (200, b"hello a\n"))


class Certificates(TlsTestCase):
    def test_sni_picks_the_hosts_certificate(self):
        self.start()
        cases = [("a.test", "CN = a.test, O = ec"), ("x.wild.test", "CN = *.wild.test"),
                 ("y.x.wild.test", "CN = default"),  # a wildcard covers one label
                 ("unknown.test", "CN = default")]
        for name, want in cases:
            out, _ = s_client(self.tls_port, "-servername", name)
            self.assertEqual(subject(out), want, name)
        out, _ = s_client(self.tls_port, "-noservername")
        self.assertEqual(subject(out), "CN = default")

    def test_rsa_or_ecdsa_by_the_clients_signature_algorithms(self):
        self.start()
        out, _ = s_client(self.tls_port, "-servername", "a.test", "-sigalgs",
                          "rsa_pss_rsae_sha256:RSA+SHA256")
        self.assertEqual(subject(out), "CN = a.test, O = rsa")
        out, _ = s_client(self.tls_port, "-servername", "a.test", "-sigalgs", "ECDSA+SHA256")
        self.assertEqual(subject(out), "CN = a.test, O = ec")
        # TLS 1.2 by cipher: ECDHE-RSA gets the RSA pair.
        out, _ = s_client(self.tls_port, "-servername", "a.test", "-tls1_2", "-cipher",
                          "ECDHE-RSA-AES128-GCM-SHA256")
        self.assertEqual(subject(out), "CN = a.test, O = rsa")

    def test_unknown_name_without_default_gets_an_alert(self):
        self.start(default=False)
        out, rc = s_client(self.tls_port, "-servername", "unknown.test")
        self.assertNotEqual(rc, 0)
        self.assertIn("unrecognized name", out)
        self.assertIsNone(subject(out))
        out, rc = s_client(self.tls_port, "-noservername")
        self.assertNotEqual(rc, 0)
        self.assertIn("handshake failure", out)
        out, _ = s_client(self.tls_port, "-servername", "a.test")
        self.assertEqual(subject(out), "CN = a.test, O = ec")
        self.assert_no_error_lines()

    def test_tls11_is_refused(self):
        self.start()
        # The client side is allowed TLS 1.1 (SECLEVEL=0), so the refusal is the server's.
        out, rc = s_client(self.tls_port, "-servername", "a.test", "-tls1_1", "-cipher",
                           "DEFAULT@SECLEVEL=0")
        self.assertNotEqual(rc, 0)
        self.assertIn("alert protocol version", out)
        out, rc = s_client(self.tls_port, "-servername", "a.test", "-tls1_2")
        self.assertEqual(rc, 0, out)

    def test_only_tls13_when_configured(self):
        self.start(tls="    protocols: [TLSv1.3]\n")
        out, rc = s_client(self.tls_port, "-servername", "a.test", "-tls1_2")
        self.assertNotEqual(rc, 0)
        self.assertIn("alert protocol version", out)
        out, rc = s_client(self.tls_port, "-servername", "a.test", "-tls1_3")
        self.assertEqual(rc, 0, out)

    def test_reload_changes_the_certificate_and_open_connections_keep_working(self):
        srv = self.start()
        with self.tls_client() as c:
            self.assert_hello_a(c.get("/", host="a.test"))
            make_pair(srv.dir, "a-ec", "a.test", kind="ec", org="ec2")
            srv.signal(signal.SIGHUP)
            srv.wait_log(r"generation 2 published")
            poll(lambda: subject(s_client(self.tls_port, "-servername", "a.test")[0])
                 == "CN = a.test, O = ec2", what="the new certificate on new connections")
            # The connection opened before the reload goes on with its session.
            self.assert_hello_a(c.get("/", host="a.test"))


class Reading(TlsTestCase):
    """How the worker reads TLS input (ADR 0053): one read(2) per keep-alive
    request, and whatever the records and segments look like, every request
    is answered and every close is seen."""

    def test_one_read_per_keep_alive_request(self):
        srv = self.start()
        (worker,) = srv.worker_pids()
        with self.tls_client() as c:
            self.assert_hello_a(c.get("/", host="a.test"))
            before = syscr(worker)
            for _ in range(200):
                self.assert_hello_a(c.get("/", host="a.test"))
            reads = syscr(worker) - before
        # Reading on until EAGAIN made it 2 per request (400).
        self.assertLess(reads, 260, "read(2) calls of the worker for 200 requests")

    def reads_until_answered(self, worker, act):
        """The worker's read(2) calls while act() runs and then a request on
        another, idle connection is answered: the worker is single-threaded,
        so by then it has handled every event act() caused."""
        with self.tls_client() as sync:
            self.assert_hello_a(sync.get("/", host="a.test"))
            before = syscr(worker)
            act()
            self.assert_hello_a(sync.get("/", host="a.test"))
            return syscr(worker) - before - 1  # sync's request

    def test_close_reads_nothing_until_the_client_acts(self):
        srv = self.start()
        (worker,) = srv.worker_pids()
        with self.tls_client() as c:
            self.assert_hello_a(c.get("/", host="a.test"))

            def last_request():
                # A close we choose (an upgrade we do not take) lingers; a
                # Connection: close from the client would close at once
                # (ADR 0057) and never reach the lingering read.
                r = c.get("/", host="a.test", headers=["Upgrade: websocket", "Connection: Upgrade"])
                self.assert_hello_a(r)
                self.assertEqual(r.header("Connection"), "close")
                self.assertFalse(c._fill(), "no close_notify after Connection: close")

            reads = self.reads_until_answered(worker, last_request)
            # The request only: no lingering read right after our FIN (the
            # socket was drained) nor at the client's ACK of it.
            self.assertEqual(reads, 1, "read(2) calls for the last request")

    def test_input_after_the_last_answer_is_still_read(self):
        srv = self.start()
        (worker,) = srv.worker_pids()
        with self.record_client() as c:
            # We end the connection (an upgrade we do not take), not the
            # client: it may be sending already (a client that said
            # Connection: close promised not to, ADR 0057).
            r = c.get("/", host="a.test", headers=["Upgrade: websocket", "Connection: Upgrade"])
            self.assert_hello_a(r)
            self.assertEqual(r.header("Connection"), "close")
            self.assertFalse(c._fill(), "no close_notify after Connection: close")

            def more_input():
                # Our socket drained before the close: what arrives after it
                # must still be read (the lingering close), or closing with it
                # unread would reset the connection.
                c.sock.sock.sendall(os.urandom(100000))
                c.sock.sock.shutdown(socket.SHUT_WR)

            reads = self.reads_until_answered(worker, more_input)
        self.assertGreaterEqual(reads, 1, "read(2) calls for input after the close")

    def test_large_request_body_over_many_records(self):
        b = self.backend("up")
        self.start(proxy_member=b.address)
        body = os.urandom(1 << 20)  # 64 records of 16 KiB
        with self.tls_client() as c:
            c.send(request("POST", "/up/big", host="a.test",
                           headers=[("Content-Length", str(len(body)))], body=body))
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"up POST /up/big"))
            self.assert_hello_a(c.get("/", host="a.test"))
        self.assertEqual(b.requests[-1].body, body)

    def test_pipelined_requests_in_records_of_one_segment(self):
        self.start()
        with self.record_client() as c:
            # Records OpenSSL reads ahead in one read(2): the ones after the
            # first are decrypted without another read, and must be.
            c.sock.sock.sendall(c.sock.records(*[request("GET", "/", host="a.test")] * 20))
            for _ in range(20):
                self.assert_hello_a(c.read_response())
            # Many requests in one record too.
            c.send(request("GET", "/", host="a.test") * 20)
            for _ in range(20):
                self.assert_hello_a(c.read_response())

    def test_request_sent_byte_by_byte(self):
        self.start()
        with self.record_client() as c:
            c.sock.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Each byte its own segment (no Nagle): the server reads parts
            # of a record header and body, each read short.
            for _ in range(2):
                wire = c.sock.records(request("GET", "/", host="a.test"))
                for i in range(len(wire)):
                    c.sock.sock.sendall(wire[i:i + 1])
                self.assert_hello_a(c.read_response())

    def test_close_notify_with_the_request_is_answered_then_closed(self):
        self.start()
        with self.record_client() as c:
            wire = c.sock.records(request("GET", "/", host="a.test")) + c.sock.close_notify()
            c.sock.sock.sendall(wire)
            self.assert_hello_a(c.read_response())
            self.assertFalse(c._fill(), "no EOF after the answer")

    def test_close_notify_after_a_short_read_is_seen(self):
        self.start()
        with self.record_client() as c:
            self.assert_hello_a(c.get("/", host="a.test"))
            c.sock.sock.sendall(c.sock.close_notify())
            self.assertFalse(c._fill(), "no EOF after our close_notify")

    def test_fin_after_a_request_is_answered_then_closed(self):
        self.start()
        with self.record_client() as c:
            self.assert_hello_a(c.get("/", host="a.test"))
            c.send(request("GET", "/", host="a.test"))
            c.sock.sock.shutdown(socket.SHUT_WR)  # no close_notify
            self.assert_hello_a(c.read_response())
            self.assertFalse(c._fill(), "no EOF after the answer")


class Tickets(TlsTestCase):
    def test_one_ticket_after_a_full_and_after_a_resumed_handshake(self):
        self.start()
        sess = os.path.join(self.srv.dir, "sess.pem")
        req = b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
        for resume in (False, True):
            out, rc = s_client(self.tls_port, "-servername", "a.test", "-ign_eof",
                               "-sess_in" if resume else "-sess_out", sess, data=req)
            self.assertEqual(rc, 0, out)
            self.assertIn("hello a", out)
            self.assertIn("Reused, TLSv1.3" if resume else "New, TLSv1.3", out)
            # OpenSSL's default is two after a full handshake (ADR 0051).
            self.assertEqual(out.count("Post-Handshake New Session Ticket arrived"), 1, out)


class Misbehaving(TlsTestCase):
    def test_stalled_handshake_is_closed_after_handshake_timeout(self):
        self.start(tls="    handshake_timeout: 300ms\n")
        for first in (b"", b"\x16\x03\x01\x02\x00"):  # nothing; half a record header
            with socket.create_connection(("127.0.0.1", self.tls_port), timeout=TIMEOUT) as s:
                s.sendall(first)
                # Closed by the server well before the 60 s header timeout.
                self.assertEqual(s.recv(100), b"")
        self.assert_no_error_lines()

    def test_garbage_instead_of_a_client_hello(self):
        srv = self.start()
        for garbage in (b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", os.urandom(3000)):
            with socket.create_connection(("127.0.0.1", self.tls_port), timeout=TIMEOUT) as s:
                s.sendall(garbage)
                try:
                    while s.recv(4096):  # an alert at most, then the close
                        pass
                except ConnectionResetError:
                    pass  # closed with some of the garbage unread
        # The server is fine and says nothing above debug about it.
        out, _ = s_client(self.tls_port, "-servername", "a.test")
        self.assertEqual(subject(out), "CN = a.test, O = ec")
        self.assert_no_error_lines()
        self.assertTrue(srv.running())

