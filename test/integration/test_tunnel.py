"""Upgrade tunnels through the proxy (issue 7, ADR 0020): a WebSocket echo
backend and a raw "Upgrade: echo" backend (backend.py) behind scalwsd;
handshake, messages both ways (one larger than every buffer on the way),
the client's close, the upstream's close, a half-close, a non-101 answer,
h2c, the access log line, a graceful stop with a tunnel open."""

import base64
import json
import os
import signal
import socket

from backend import ws_frame, ws_read_frame, websocket_accept
from harness import TIMEOUT, Client, ConnectionClosed, make_config, poll, request
from test_proxy import ProxyTestCase, proxy_config


def ws_handshake(c, path="/chat"):
    key = base64.b64encode(os.urandom(16)).decode()
    c.send(request("GET", path, host="ws.test", headers=[
        ("Upgrade", "websocket"), ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]))
    r = c.read_response(allow_1xx=True)
    return r, key


class _ClientReader:
    """backend.ws_read_frame over a harness Client."""

    def __init__(self, c):
        self.c = c

    def exactly(self, n):
        return self.c._read_exact(n)


def echo_upgrade(c, extra=b""):
    """An "Upgrade: echo" request, with extra bytes right after its head."""
    c.send(request("GET", "/raw", host="e.test",
                   headers=[("Upgrade", "echo"), ("Connection", "upgrade")]) + extra)
    return c.read_response(allow_1xx=True)


def read_exactly(c, n):
    return c._read_exact(n)


class WebSocket(ProxyTestCase):
    def test_handshake_and_messages_both_ways(self):
        b = self.backend("ws", "websocket")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            r, key = ws_handshake(c)
            self.assertEqual(r.status, 101)
            self.assertEqual(r.header("Upgrade").lower(), "websocket")
            self.assertEqual(r.header("Connection").lower(), "upgrade")
            self.assertEqual(r.header("Sec-WebSocket-Accept"), websocket_accept(key))
            got = b.requests[0]
            self.assertEqual(got.header("Upgrade"), "websocket")
            self.assertEqual(got.header("Connection"), "upgrade")
            self.assertEqual(got.header("Sec-WebSocket-Key"), key)
            reader = _ClientReader(c)
            # Larger than the tunnel's buffer and the output's high-water mark.
            big = os.urandom(300 * 1024)
            for msg in (b"hello", b"x" * 1000, big, b"after the big one"):
                c.send(ws_frame(2, msg, mask=os.urandom(4)))
                opcode, payload = ws_read_frame(reader)
                self.assertEqual((opcode, len(payload)), (2, len(msg)))
                self.assertEqual(payload, msg)
            # Several in flight at once, then read back in order.
            msgs = [("m%d" % i).encode() * 50 for i in range(20)]
            c.send(b"".join(ws_frame(1, m, mask=b"abcd") for m in msgs))
            for m in msgs:
                self.assertEqual(ws_read_frame(reader), (1, m))
            # The client's close: the backend answers it and closes; so do we.
            c.send(ws_frame(8, b"\x03\xe8", mask=b"abcd"))
            self.assertEqual(ws_read_frame(reader), (8, b"\x03\xe8"))
            self.assertTrue(c.wait_closed())

    def test_client_close_closes_the_upstream(self):
        b = self.backend("ws", "websocket")
        srv = self.proxy(b)
        c = Client(srv.port)
        r, _ = ws_handshake(c)
        self.assertEqual(r.status, 101)
        c.send(ws_frame(1, b"ping", mask=b"abcd"))
        self.assertEqual(ws_read_frame(_ClientReader(c)), (1, b"ping"))
        c.close()
        poll(lambda: not b.socks, what="the backend's connection to close")
        srv.stop()
        line = json.loads(srv.access_log().splitlines()[-1])
        self.assertEqual((line["status"], line["path"]), (101, "/chat"), line)
        self.assertEqual(line["upstream_status"], "101", line)
        # The 101's body is nothing: bytes are the tunnel's, both ways.
        self.assertEqual(line["bytes"], len(ws_frame(1, b"ping")), line)
        self.assertEqual(line["request_bytes"], len(ws_frame(1, b"ping", mask=b"abcd")), line)

    def proxy(self, *backends, **kw):
        return self.server(proxy_config(*[b.address for b in backends], **kw)
                           .replace("  admin:", "  logging: {access_log: json}\n  admin:", 1))


class RawUpgrade(ProxyTestCase):
    def test_bytes_sent_with_the_head_and_a_half_close(self):
        b = self.backend("e", "echo")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            # Bytes right behind the head: the tunnel's first.
            r = echo_upgrade(c, b"early ")
            self.assertEqual(r.status, 101)
            self.assertEqual(r.header("Upgrade"), "echo")
            self.assertEqual(read_exactly(c, 6), b"early ")
            c.send(b"more")
            self.assertEqual(read_exactly(c, 4), b"more")
            # Our FIN reaches the backend (it answers "<eof>" and its own
            # FIN), and its answer still reaches us after ours.
            c.sock.shutdown(socket.SHUT_WR)
            self.assertTrue(c.read_until_close())
            self.assertEqual(c.buf, b"<eof>")

    def test_upstream_close_reaches_the_client(self):
        b = self.backend("e", "echo")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            self.assertEqual(echo_upgrade(c).status, 101)
            c.send(b"close\n")
            self.assertTrue(c.read_until_close())
            self.assertEqual(c.buf, b"close\n")
        poll(lambda: not b.socks, what="the backend's connection to be gone")

    def test_answer_other_than_101_is_a_normal_response(self):
        b = self.backend("a", "ok")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            r = echo_upgrade(c)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, b"a GET /raw")
            self.assertEqual(r.header("Connection"), "close")
            self.assertTrue(c.wait_closed())
        self.assertEqual(b.requests[0].header("Upgrade"), "echo")

    def test_upgrade_is_not_retried_once_sent(self):
        # A GET would be retried on the other member after a reset; a
        # request for a switch is not (it may have started something).
        a, b = self.backend("a", "reset"), self.backend("b", "reset")
        srv = self.proxy(a, b)
        with Client(srv.port) as c:
            self.assertEqual(echo_upgrade(c).status, 502)
        self.assertEqual(a.count() + b.count(), 1)

    def test_h2c_is_not_tunnelled(self):
        b = self.backend("a", "ok")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            c.send(request("GET", "/h", host="x", headers=[
                ("Upgrade", "h2c"), ("Connection", "Upgrade, HTTP2-Settings"),
                ("HTTP2-Settings", "AAMAAABkAAQAoAAAAAIAAAAA")]))
            r = c.read_response()
        self.assertEqual(r.status, 200)
        got = b.requests[0]
        self.assertIsNone(got.header("Upgrade"))
        self.assertIsNone(got.header("Connection"))
        self.assertIsNone(got.header("HTTP2-Settings"))

    def test_upgrade_without_connection_upgrade_is_not_forwarded(self):
        b = self.backend("a", "ok")
        srv = self.proxy(b)
        with Client(srv.port) as c:
            c.send(request("GET", "/h", host="x", headers=[("Upgrade", "echo")]))
            self.assertEqual(c.read_response().status, 200)
        self.assertIsNone(b.requests[0].header("Upgrade"))

    def test_idle_tunnel_is_closed_after_the_pools_idle_timeout(self):
        b = self.backend("e", "echo")
        srv = self.proxy(b, extra="    timeouts: {idle: 300ms}\n")
        with Client(srv.port) as c:
            self.assertEqual(echo_upgrade(c).status, 101)
            c.send(b"x")
            self.assertEqual(read_exactly(c, 1), b"x")
            self.assertTrue(c.read_until_close())
        srv.wait_log(r"tunnel to .*: idle timeout")

    def test_graceful_stop_lets_an_open_tunnel_work(self):
        b = self.backend("e", "echo")
        srv = self.server(make_config("""
- name: "*"
  routes:
    - path: /
      proxy: {pool: app}
""", "shutdown_timeout: 20s") + 'pools:\n  - name: app\n    members:\n      - {address: "%s"}\n'
                          % b.address)
        with Client(srv.port) as c:
            self.assertEqual(echo_upgrade(c).status, 101)
            srv.signal(signal.SIGQUIT)
            srv.wait_log(r"graceful stop: 1 connection to finish")
            c.send(b"still here")
            self.assertEqual(read_exactly(c, 10), b"still here")
            c.sock.shutdown(socket.SHUT_WR)
            self.assertTrue(c.read_until_close())
        srv.wait_exit()

    def test_a_request_on_a_respond_route_is_answered_as_before(self):
        srv = self.server(make_config("""
- name: "*"
  routes:
    - path: /
      respond: {status: 200, body: "local\\n"}
"""))
        with Client(srv.port) as c:
            r = echo_upgrade(c)
            self.assertEqual((r.status, r.body), (200, b"local\n"))
            self.assertTrue(c.wait_closed())


if __name__ == "__main__":
    import unittest
    unittest.main()
