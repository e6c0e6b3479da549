"""Interim answers through the proxy (issue 7): Expect: 100-continue is
forwarded and the member's own 100 Continue relayed before the client
sends its body; a final answer instead of the 100 is relayed without
waiting for the body; 103 Early Hints is relayed. The backend marks its
100 (X-Continue: NAME), so the test tells it from one of scalwsd's."""

import hashlib
import os
import tempfile

from harness import Client, curl, request
from test_proxy import ProxyTestCase


class ExpectContinue(ProxyTestCase):
    def test_members_100_arrives_before_the_body_is_sent(self):
        b = self.backend("a")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            c.send(request("POST", "/up", host="x", headers=[
                ("Content-Length", "5"), ("Expect", "100-continue")]))
            # Nothing of the body is sent until the 100 is here.
            r = c.read_response(allow_1xx=True)
            self.assertEqual(r.status, 100)
            self.assertEqual(r.header("X-Continue"), "a")  # the member's, relayed
            c.send(b"hello")
            r = c.read_response("POST")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"a POST /up")
        got = b.requests[0]
        self.assertEqual(got.header("Expect"), "100-continue")
        self.assertEqual(got.body, b"hello")
        self.assertEqual(b.continues, 1)

    def test_final_answer_instead_of_100_is_relayed_without_the_body(self):
        b = self.backend("a", "expect_reject")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            c.send(request("PUT", "/big", host="x", headers=[
                ("Content-Length", "100000"), ("Expect", "100-continue")]))
            r = c.read_response("PUT", allow_1xx=True)
            self.assertEqual(r.status, 417)
            # The body was never read: the connection cannot carry another request.
            self.assertEqual(r.header("Connection"), "close")
            self.assertTrue(c.wait_closed())
        self.assertEqual(b.continues, 0)

    def test_curl_upload_with_expect(self):
        b = self.backend("a")
        srv = self.proxy(b)
        fd, path = tempfile.mkstemp()
        os.close(fd)
        self.addCleanup(os.unlink, path)
        data = os.urandom(300 * 1024)
        with open(path, "wb") as f:
            f.write(data)
        # --expect100-timeout: curl would send the body after 1 s without a
        # 100 anyway; a long wait makes a missing 100 fail the test instead.
        p = curl("-H", "Expect: 100-continue", "--expect100-timeout", "30",
                 "--data-binary", "@" + path, "-o", "/dev/null", "-w", "%{http_code}",
                 srv.url("/curl"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"200")
        got = b.requests[0]
        self.assertEqual(got.sha256, hashlib.sha256(data).hexdigest())
        self.assertEqual(got.header("Expect"), "100-continue")
        self.assertEqual(b.continues, 1)

    def test_local_route_still_answers_its_own_100(self):
        srv = self.server(
            'server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: 1\n  admin: {listen: []}\n'
            'hosts:\n  - name: "*"\n    routes:\n      - path: /\n'
            '        respond: {status: 200, body: "local"}\n')
        with Client(srv.port) as c:
            c.send(request("POST", "/", host="x", headers=[
                ("Content-Length", "2"), ("Expect", "100-continue")]))
            r = c.read_response(allow_1xx=True)
            self.assertEqual((r.status, r.headers), (100, []))
            c.send(b"ok")
            self.assertEqual(c.read_response("POST").body, b"local")


class EarlyHints(ProxyTestCase):
    def test_103_is_relayed_before_the_answer(self):
        b = self.backend("a", "early_hints")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            c.send(request("GET", "/page", host="x"))
            r = c.read_response(allow_1xx=True)
            self.assertEqual(r.status, 103)
            self.assertEqual(r.header("Link"), "</s.css>; rel=preload")
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"a GET /page"))
            # An HTTP/1.0 client gets no 1xx (RFC 9110 15.2).
        with Client(srv.port) as c:
            b.set_mode("early_hints", times=1)
            c.send(request("GET", "/old", host="x", version="HTTP/1.0"))
            r = c.read_response()
            self.assertEqual(r.status, 200)
