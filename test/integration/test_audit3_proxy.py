"""A hostile or broken member, side by side with nginx 1.22 and HAProxy 2.6
(the audit of session 9: docs/audit/2026-12-02-proxy-audit3.md, probes in
audit3_probe.py). The member (backend.py, mode raw) answers with the exact
bytes a test gives it, on a connection it keeps open."""

import re

from harness import Client
from test_proxy import ProxyTestCase

# A 304 or 204 carries no body whatever its fields say (RFC 9112 6.3); a
# 304 may name the 200's length or coding (RFC 9110 8.6, RFC 9112 6.1).
# nginx and HAProxy end each at its head and reuse the connection; we
# waited for the body the fields announced, and the client's next request
# on the connection waited with it (until the read timeout cut both).
BODILESS = {
    "304_with_content_length": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 8\r\n\r\n",
    "304_with_chunked": b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
    "204_with_content_length": b"HTTP/1.1 204 No Content\r\nContent-Length: 8\r\n\r\n",
}

# A transfer coding we cannot undo: Transfer-Encoding is hop-by-hop and
# dropped, so the client got the coded bytes as the content, unnamed.
# HAProxy answers 502; nginx relays as we did.
CODINGS = {
    "gzip_to_close": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b coded",
    "gzip_then_chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                         b"5\r\n\x1f\x8b co\r\n0\r\n\r\n",
    "chunked_then_identity": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
                             b"2\r\nok\r\n0\r\n\r\n",
    "chunked_twice": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
}


class HostileMember(ProxyTestCase):
    def setUp(self):
        super().setUp()
        self.member = self.backend("m")
        self.srv = self.proxy(self.member, extra="    retries: 0\n")

    def answer_once(self, raw, close=False):
        self.member.raw = raw
        self.member.raw_close = close
        self.member.set_mode("raw", times=1)

    def check_bodiless(self, name):
        self.answer_once(BODILESS[name])
        status = int(BODILESS[name].split(b" ")[1])
        with self.client(self.srv) as c:
            c.send(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(c.read_response().status, status)
            c.send(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(c.read_response().body, b"m GET /next")
        # The answer ended where the member's did: its connection is clean.
        self.assertEqual(self.member.connections, 1)

    def check_coding(self, name):
        self.answer_once(CODINGS[name], close=True)
        with self.client(self.srv) as c:
            c.send(b"GET /coded HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(c.read_response().status, 502)
        self.srv.wait_log(re.escape("a Transfer-Encoding other than a single chunked (502)"))

    def test_a_100_with_content_length_is_followed_by_the_final_answer(self):
        # A 1xx has no body either: the bytes after its head are the final
        # answer (HAProxy relays it; nginx takes the 100 as final and
        # relays 2 bytes of the next head as its body). We waited for a
        # body of 2 bytes, and took "HT" for it.
        self.answer_once(b"HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\n"
                         b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal")
        with self.client(self.srv) as c:
            c.send(b"GET /interim HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(c.read_response(allow_1xx=True).status, 100)
            r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"final"))

    def test_the_parsers_reason_is_logged_whole(self):
        # The reason was cut at 48 bytes: "Content-Length can't be prese".
        self.answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", close=True)
        with self.client(self.srv) as c:
            c.send(b"GET /both HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(c.read_response().status, 502)
        self.srv.wait_log(re.escape("invalid response: Content-Length can't be present with "
                                    "Transfer-Encoding (502)"))


def _add(kind, name):
    check = getattr(HostileMember, "check_" + kind)
    setattr(HostileMember, "test_%s_%s" % (kind, name), lambda self: check(self, name))


for _name in BODILESS:
    _add("bodiless", _name)
for _name in CODINGS:
    _add("coding", _name)


if __name__ == "__main__":
    import unittest
    unittest.main()
