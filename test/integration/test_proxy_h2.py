"""Pools that speak HTTP/2 to their members: `protocol: h2` and `grpc`
(docs/adr/0034, worker/upstream_h2.c), against a gRPC-style HTTP/2
backend of our own (h2_backend.py): request bodies and trailers through
to the member, its grpc-status trailer back to the client, streams
multiplexed on one upstream connection, a GOAWAY's refused stream sent
again elsewhere, a client's reset passed on, HTTP/1 clients to an h2
pool, and a grpc pool refusing HTTP/1 clients with 426."""

import os
import re
import select
import socket
import time
import unittest

import h2.config
import h2.connection
import h2.events
import h2.settings

from h2_backend import H2Backend, H2Client
from harness import TIMEOUT, Client, ServerTestCase, make_config, poll, request

HOSTS = """
- name: "*"
  routes:
    - path: /h2/
      proxy: {pool: plain}
    - path: /rpc/
      proxy: {pool: rpc}
"""

GRPC_HEADERS = [("content-type", "application/grpc"), ("te", "trailers")]
MIB = os.urandom(1 << 20)


class H2Pools(ServerTestCase):
    def backend(self, name="m", mode="echo"):
        b = H2Backend(name, mode)
        self.addCleanup(b.stop)
        return b

    def start(self, members, rpc_extra="", tls="", extra=""):
        """tls: more keys for both pools (test_proxy_h2_tls.py's ", tls: ...");
        extra: more keys for both pools besides."""
        addresses = ", ".join('"%s"' % m.address for m in members)
        both = tls + extra
        pools = ("pools:\n"
                 '  - {name: plain, protocol: h2, members: [%s]%s}\n'
                 '  - {name: rpc, protocol: grpc, members: [%s]%s%s}\n'
                 % (addresses, both, addresses, both, rpc_extra))
        return self.server(make_config(HOSTS) + pools)

    def h2client(self, srv):
        c = H2Client(srv.port)
        self.addCleanup(c.close)
        return c

    def test_grpc_call_body_and_trailers_both_ways(self):
        m = self.backend()
        srv = self.start([m])
        c = self.h2client(srv)
        msg = b"\0\0\0\0\x05hello"
        sid = c.start("/rpc/pkg.Svc/Call", body=msg, headers=GRPC_HEADERS,
                      trailers=[("x-client-sum", "42"), ("x-client-note", "last")])
        r = c.response(sid)
        self.assertIsNone(r.reset)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("content-type"), "application/grpc")
        self.assertEqual(bytes(r.body), msg)
        self.assertEqual(r.trailer("grpc-status"), "0")
        self.assertEqual(r.trailer("grpc-message"), "ok")
        self.assertEqual(len(m.requests), 1)
        got = m.requests[0]
        self.assertEqual(bytes(got.body), msg)
        self.assertEqual(got.trailers, [("x-client-sum", "42"), ("x-client-note", "last")])
        self.assertEqual(got.header(":method"), "POST")
        self.assertEqual(got.header(":path"), "/rpc/pkg.Svc/Call")
        self.assertEqual(got.header(":authority"), "x")
        self.assertEqual(got.header("te"), "trailers")
        self.assertEqual(got.header("x-forwarded-for"), "127.0.0.1")
        self.assertEqual(got.header("x-forwarded-proto"), "http")

    def test_non_zero_grpc_status_reaches_the_client_as_a_trailer(self):
        m = self.backend(mode="status:5")
        srv = self.start([m])
        c = self.h2client(srv)
        r = c.response(c.start("/rpc/pkg.Svc/Missing", body=b"\0\0\0\0\0",
                               headers=GRPC_HEADERS))
        self.assertEqual(r.status, 200)
        self.assertEqual(r.trailer("grpc-status"), "5")
        self.assertEqual(r.trailer("grpc-message"), "failed 5")
        self.assertIsNone(r.header("grpc-status"))

    def test_concurrent_streams_share_one_upstream_connection(self):
        n = 6
        m = self.backend(mode="gather:%d" % n)
        srv = self.start([m])
        c = self.h2client(srv)
        sids = [c.start("/rpc/pkg.Svc/Call", body=b"\0\0\0\0\x01%d" % i, headers=GRPC_HEADERS)
                for i in range(n)]
        for i, sid in enumerate(sids):
            r = c.response(sid)
            self.assertEqual(bytes(r.body), b"\0\0\0\0\x01%d" % i)
            self.assertEqual(r.trailer("grpc-status"), "0")
        # The backend answered none until all six were open at once.
        self.assertEqual(m.streams, n)
        self.assertEqual(m.connections, 1)

    def exchange_spec(self, i):
        """Request i: even ones carry a field the member reflects, a body
        and trailers; odd ones none of them, so that anything a reused
        stream kept from the request or answer before shows."""
        path = "/rpc/pkg.Svc/Call%d" % i
        if i % 2:
            return path, GRPC_HEADERS, b"", None
        body = b"\0\0\0\0" + (b"body %d;" % i) * (1 + i % 5)
        return (path, GRPC_HEADERS + [("x-reflect", "r%d" % i)], body,
                [("x-client-n", str(i))])

    def send_exchange(self, c, i):
        path, headers, body, trailers = self.exchange_spec(i)
        return c.start(path, body=body, headers=headers, trailers=trailers)

    def check_exchange(self, i, r, m):
        path, _, body, trailers = self.exchange_spec(i)
        reflect = [] if i % 2 else ["r%d" % i]
        self.assertIsNone(r.reset, "request %d reset" % i)
        self.assertEqual(r.status, 200, "request %d" % i)
        self.assertEqual(bytes(r.body), body or ("m POST %s" % path).encode(), "request %d" % i)
        self.assertEqual([v for n, v in r.headers if n == "x-reflect"], reflect, "request %d" % i)
        self.assertEqual(r.trailers, [("grpc-status", "0"), ("grpc-message", "ok")] +
                         [("x-reflect-trailer", v) for v in reflect], "request %d" % i)
        got = [q for q in m.requests if q.header(":path") == path]
        self.assertEqual(len(got), 1, "request %d reached the member once" % i)
        self.assertEqual([v for n, v in got[0].headers if n == "x-reflect"], reflect,
                         "request %d's fields at the member" % i)
        self.assertEqual(bytes(got[0].body), body, "request %d's body at the member" % i)
        self.assertEqual(got[0].trailers, trailers or [], "request %d's trailers" % i)

    def test_sequential_requests_carry_nothing_into_the_next(self):
        # One upstream connection whose streams (and their state, reused
        # per worker) serve one request after the other.
        m = self.backend()
        srv = self.start([m])
        c = self.h2client(srv)
        for i in range(40):
            self.check_exchange(i, c.response(self.send_exchange(c, i)), m)
        self.assertEqual(m.connections, 1)

    def test_concurrent_requests_carry_nothing_into_each_other(self):
        m = self.backend()
        srv = self.start([m])
        c = self.h2client(srv)
        for _ in range(3):  # the second and third rounds reuse the first's streams
            m.requests.clear()
            sids = [self.send_exchange(c, i) for i in range(40)]
            for i, sid in enumerate(sids):
                self.check_exchange(i, c.response(sid), m)

    def test_http1_requests_in_turn_carry_nothing_into_the_next(self):
        m = self.backend()
        srv = self.start([m])
        with Client(srv.port) as cl:
            for i in range(20):
                headers = [("X-Reflect", "r%d" % i)] if i % 2 == 0 else []
                body = b"posted %d" % i if i % 3 == 0 else b""
                cl.send(request("POST", "/h2/n%d" % i, body=body,
                                headers=headers + [("Content-Length", str(len(body)))]))
                r = cl.read_response()
                self.assertEqual(r.status, 200, "request %d" % i)
                self.assertEqual(r.body, body or b"m POST /h2/n%d" % i, "request %d" % i)
                self.assertEqual([v for n, v in r.headers if n.lower() == "x-reflect"],
                                 [v for _, v in headers], "request %d" % i)
        self.assertEqual(m.connections, 1)

    def test_one_mib_bodies_both_ways_exact(self):
        m = self.backend()
        srv = self.start([m])
        c = self.h2client(srv)
        r = c.response(c.start("/rpc/pkg.Svc/Big", body=MIB, headers=GRPC_HEADERS,
                               trailers=[("x-end", "1")]), timeout=30)
        self.assertEqual(len(r.body), len(MIB))
        self.assertTrue(bytes(r.body) == MIB, "the echoed body differs")
        self.assertEqual(r.trailer("grpc-status"), "0")
        self.assertTrue(bytes(m.requests[0].body) == MIB, "the member got another body")
        self.assertEqual(m.requests[0].trailers, [("x-end", "1")])

    def test_goaway_refused_stream_goes_to_another_member(self):
        away = self.backend("away", mode="goaway")
        ok = self.backend("ok")
        srv = self.start([away, ok], rpc_extra=", retries: 1")
        for i in range(2):  # round robin: one of them meets the GOAWAY
            c = self.h2client(srv)
            r = c.response(c.start("/rpc/pkg.Svc/Call", body=b"\0\0\0\0\x01x",
                                   headers=GRPC_HEADERS))
            self.assertEqual(r.status, 200)
            self.assertEqual(r.trailer("grpc-status"), "0")
        self.assertGreaterEqual(away.goaways, 1)
        self.assertEqual(len(away.requests), 0)
        self.assertEqual(len(ok.requests), 2)  # a POST, sent again: it was not processed
        srv.wait_log(r"proxy: pool rpc member %s: stream refused \(GOAWAY\): retrying"
                     % away.address.replace(".", r"\."))

    def test_goaway_without_retries_left_is_502(self):
        away = self.backend("away", mode="goaway")
        srv = self.start([away])
        c = self.h2client(srv)
        r = c.response(c.start("/rpc/pkg.Svc/Call", body=b"\0\0\0\0\0", headers=GRPC_HEADERS))
        self.assertEqual(r.status, 502)
        self.assertEqual(len(away.requests), 0)

    def two_calls(self, srv, method):
        statuses = []
        for i in range(2):  # round robin: one of them meets the reset
            c = self.h2client(srv)
            body = b"\0\0\0\0\x01x" if method == "POST" else b""
            statuses.append(c.response(c.start("/rpc/pkg.Svc/Call", method=method, body=body,
                                               headers=GRPC_HEADERS)).status)
        return sorted(statuses)

    def test_stream_reset_after_processing_is_not_sent_again_for_a_post(self):
        bad = self.backend("bad", mode="reset")
        ok = self.backend("ok")
        srv = self.start([bad, ok], rpc_extra=", retries: 1")
        self.assertEqual(self.two_calls(srv, "POST"), [200, 502])
        self.assertEqual(len(bad.requests), 1)
        self.assertEqual(len(ok.requests), 1)  # the reset POST was not sent again
        srv.wait_log(r"proxy: pool rpc member %s: stream reset \(INTERNAL_ERROR\) \(502\)"
                     % bad.address.replace(".", r"\."))

    def test_stream_reset_is_retried_for_a_get(self):
        bad = self.backend("bad", mode="reset")
        ok = self.backend("ok")
        srv = self.start([bad, ok], rpc_extra=", retries: 1")
        self.assertEqual(self.two_calls(srv, "GET"), [200, 200])
        self.assertEqual(len(bad.requests), 1)
        self.assertEqual(len(ok.requests), 2)

    ZERO_LOG = (r"upstream h2: member %s announces SETTINGS_MAX_CONCURRENT_STREAMS 0: "
                r"no requests to it until it raises it")

    def test_member_announcing_zero_streams_gets_no_request_nor_a_connection_each(self):
        # Passive health is off, so that only the refusal without a new
        # connection bounds what the member sees: today's code opened one
        # per request and held the request until the read timeout.
        zero = self.backend("zero", mode="zero")
        ok = self.backend("ok")
        srv = self.start([zero, ok], extra=", health: {max_fails: 0}, timeouts: {read: 1h}")
        n = 12  # round robin: half of them pick the member announcing 0 first
        with Client(srv.port) as cl:
            for i in range(n):
                cl.send(request("POST", "/h2/n%d" % i, body=b"",
                                headers=[("Content-Length", "0")]))
                r = cl.read_response()
                self.assertEqual((r.status, r.body), (200, b"ok POST /h2/n%d" % i),
                                 "request %d" % i)
        self.assertEqual(len(zero.requests), 0)
        self.assertEqual(len(ok.requests), n)
        # One worker: its one connection to the member stays open (idle,
        # under keepalive) and says the member takes nothing.
        self.assertEqual(zero.connections, 1)
        # The stream sent before the member's SETTINGS came, if any.
        self.assertLessEqual(zero.refused, 1)
        rx = self.ZERO_LOG % zero.address.replace(".", r"\.")
        srv.wait_log(rx)
        self.assertEqual(len(re.findall(rx, srv.log())), 1, "logged once, not per request")

    def test_only_member_announcing_zero_streams_is_502_not_a_read_timeout(self):
        # The read timeout outlasts the client's wait: the answer must not
        # wait for it (today's 504 "read timed out" came after it).
        zero = self.backend("zero", mode="zero")
        srv = self.start([zero], extra=", timeouts: {read: 1h}")
        c = self.h2client(srv)
        for i in range(3):
            r = c.response(c.start("/rpc/pkg.Svc/Call%d" % i, body=b"\0\0\0\0\0",
                                   headers=GRPC_HEADERS))
            # 502 while the member may be picked (it refused: a bad
            # gateway), 503 once passive health marked it down (no member
            # may take the request).
            self.assertIn(r.status, (502,) if i == 0 else (502, 503), "request %d" % i)
        self.assertEqual(len(zero.requests), 0)
        self.assertEqual(zero.connections, 1)
        srv.wait_log(self.ZERO_LOG % zero.address.replace(".", r"\."))

    def test_http1_client_to_an_h2_pool(self):
        m = self.backend()
        srv = self.start([m])
        with Client(srv.port) as cl:
            cl.send(request("GET", "/h2/x"))
            r = cl.read_response()
            self.assertEqual((r.status, r.body), (200, b"m GET /h2/x"))
            cl.send(request("POST", "/h2/echo", body=b"posted",
                            headers=[("Content-Length", "6")]))
            r = cl.read_response()
            self.assertEqual((r.status, r.body), (200, b"posted"))
        self.assertEqual(m.connections, 1)
        self.assertIsNone(m.requests[0].header("te"))

    def test_client_reset_cancels_the_upstream_stream(self):
        m = self.backend(mode="hold")
        srv = self.start([m])
        c = self.h2client(srv)
        sid = c.start("/rpc/pkg.Svc/Wait", body=b"\0\0\0\0\0", headers=GRPC_HEADERS)
        poll(lambda: len(m.requests) == 1, what="the member has the request")
        c.reset(sid)
        poll(lambda: len(m.resets) == 1, what="the member sees RST_STREAM")
        self.assertEqual(m.resets, [m.requests[0].stream_id])

    def test_grpc_from_an_http1_client_is_426_with_a_log_line(self):
        m = self.backend()
        srv = self.start([m])
        with Client(srv.port) as cl:
            cl.send(request("POST", "/rpc/pkg.Svc/Call", body=b"\0\0\0\0\0",
                            headers=[("Content-Type", "application/grpc"),
                                     ("Content-Length", "5")]))
            r = cl.read_response()
        self.assertEqual(r.status, 426)
        srv.wait_log(r"proxy: pool rpc \(grpc\): client 127\.0\.0\.1 spoke HTTP/1\.1, "
                     r"gRPC needs HTTP/2 \(426\)")
        self.assertEqual(m.connections, 0)

    def test_body_dropped_after_the_answer_gives_the_connection_window_back(self):
        # The answer (502: the member refuses connects) is held by the
        # client's zero stream window, so the stream stays open while the
        # client goes on uploading: the bytes the proxy drops must not stay
        # counted against the connection's budget (1 MiB, ADR 0035), or
        # the connection's window shuts on every stream.
        dead = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        dead.bind(("127.0.0.1", 0))
        refused = type("Member", (), {"address": "127.0.0.1:%d" % dead.getsockname()[1]})
        dead.close()
        srv = self.server(make_config(HOSTS, "limits: {max_body_size: 8m}") +
                          "pools:\n" +
                          "".join('  - {name: %s, protocol: h2, members: ["%s"]}\n'
                                  % (name, refused.address) for name in ("plain", "rpc")))
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT)
        self.addCleanup(sock.close)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.local_settings = h2.settings.Settings(
            client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        conn.initiate_connection()
        total = 3 << 20
        conn.send_headers(1, [(":method", "POST"), (":path", "/h2/up"), (":scheme", "http"),
                              (":authority", "t.test"), ("content-length", str(total))])
        sock.sendall(conn.data_to_send())
        status, sent = None, 0
        deadline = time.monotonic() + TIMEOUT
        while sent < total and time.monotonic() < deadline:
            if status is not None:
                n = min(total - sent, conn.local_flow_control_window(1),
                        conn.max_outbound_frame_size)
                if n > 0:
                    conn.send_data(1, b"u" * n)
                    sent += n
            sock.sendall(conn.data_to_send())
            ready, _, _ = select.select([sock], [], [], 0.05)
            if ready:
                data = sock.recv(65536)
                self.assertTrue(data, "the server closed the connection")
                for ev in conn.receive_data(data):
                    self.assertNotIsInstance(ev, h2.events.StreamReset)
                    if isinstance(ev, h2.events.ResponseReceived):
                        status = dict(ev.headers)[b":status"]
        self.assertEqual(status, b"502")
        self.assertEqual(sent, total, "the connection's window shut after %d bytes" % sent)


if __name__ == "__main__":
    unittest.main()
