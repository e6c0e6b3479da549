"""An attacker's HTTP/1.1 through the proxy, side by side with nginx 1.22
and HAProxy 2.6 (the audit of session 8): a member that answers with bad
framing or bad fields, and requests the proxy must forward well formed.
The member here records the exact bytes it gets and answers each request
with the bytes its path names."""

import re
import threading

from backend import Listener, recv_head
from harness import Client, ServerTestCase, TIMEOUT, poll
from test_proxy import proxy_config

# path -> the member's raw answer.
ANSWERS = {
    # nginx: 502; HAProxy: "x-a: a   b". We relayed "X-A:  b": the line
    # before the fold was lost.
    "/fold": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
    # nginx and HAProxy: 502. We relayed "X A: b" as it came.
    "/name-space": b"HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok",
    "/trailer-name": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"2\r\nok\r\n0\r\nX T: v\r\n\r\n",
}
GOOD = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood"


class RawMember(Listener):
    """One request per connection: records its head, sends ANSWERS[path]
    (or GOOD) and closes."""

    def __init__(self):
        self.heads = []
        self.lock = threading.Lock()
        super().__init__()

    def one(self, conn):
        conn.settimeout(TIMEOUT)
        try:
            got = recv_head(conn)
            if got is None:
                return
            head = got[0]
            with self.lock:
                self.heads.append(head)
            path = head.split(b" ")[1].decode("latin-1")
            conn.sendall(ANSWERS.get(path, GOOD))
        except OSError:
            pass
        finally:
            conn.close()


class AuditProxy(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.member = RawMember()
        self.addCleanup(self.member.close)
        self.srv = self.server(proxy_config(self.member.address, extra="    retries: 0\n"))

    def get(self, path):
        with self.client(self.srv) as c:
            c.send(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
            return c.read_response()

    def assert_refused(self, path, why):
        r = self.get(path)
        self.assertEqual(r.status, 502, r)
        self.srv.wait_log(re.escape(why))

    def test_a_folded_response_field_is_502_never_a_mangled_value(self):
        self.assert_refused("/fold", "a folded response field (obs-fold)")

    def test_a_response_field_name_with_a_space_is_502(self):
        self.assert_refused("/name-space", "a response field name that is not a token")

    def test_a_trailer_name_with_a_space_is_not_relayed(self):
        # The head and body went out before the trailers came: the response
        # is cut (no last chunk), the trailer never reaches the client.
        with self.client(self.srv) as c:
            c.send(b"GET /trailer-name HTTP/1.1\r\nHost: x\r\n\r\n")
            c.read_until_close()
            self.assertNotIn(b"X T", c.buf)
            self.assertNotIn(b"0\r\n\r\n", c.buf)
        self.srv.wait_log("a response field name that is not a token")

    def test_http10_without_host_goes_out_with_an_empty_host(self):
        # The request goes out as HTTP/1.1, which needs a Host (RFC 9112
        # 3.2): there was none. nginx sends its upstream's name, HAProxy
        # forwards HTTP/1.0 as it came.
        with self.client(self.srv) as c:
            c.send(b"GET /ten HTTP/1.0\r\n\r\n")
            self.assertEqual(c.read_response().body, b"good")
        head = poll(lambda: self.member.heads and self.member.heads[-1], what="the head")
        lines = head.split(b"\r\n")
        self.assertEqual(lines[0], b"GET /ten HTTP/1.1")
        self.assertEqual([l for l in lines if l.lower().startswith(b"host:")], [b"Host: "])


if __name__ == "__main__":
    import unittest
    unittest.main()
