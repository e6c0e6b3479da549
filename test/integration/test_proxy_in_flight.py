"""What counts as a request in flight on a member (GET /v1/pools,
least_conn, max_conns), and when it stops counting.

A client that goes away while its proxied request waits for the member
(ADR 0025): the attempt is cancelled at once, as nginx does with
proxy_ignore_client_abort off. The upstream connection closes (never
pooled), the member's in-flight count drops, nothing is retried, passive
health is not charged, and the access log says 499 with the attempt's
upstream fields.

An open tunnel (after a 101) is a long request: it counts until it ends.
"""

import json
import socket
import struct

from backend import Backend
from harness import Client, poll, request
from test_admin import PROXY_HOSTS, AdminTestCase


def pool(members, retries, balance="round_robin"):
    return ("pools:\n  - name: app\n    retries: %d\n    balance: %s\n"
            "    health: {max_fails: 1, cooldown: 60s}\n    members:\n%s"
            % (retries, balance, "".join('      - "%s"\n' % m for m in members)))


class InFlightTestCase(AdminTestCase):
    def backend(self, mode, **kw):
        # Each test has its own instance: the list starts with its first backend.
        self.backends = getattr(self, "backends", [])
        b = Backend("b%d" % len(self.backends), mode=mode, **kw)
        self.backends.append(b)
        self.addCleanup(b.stop)
        return b

    def start(self, members, retries=0, balance="round_robin"):
        return self.admin_server(loops=1, hosts=PROXY_HOSTS, tail=pool(members, retries, balance),
                                 settings="logging: {access_log: json}\n")

    def access_lines(self, srv):
        return [json.loads(line) for line in srv.access_log().splitlines()
                if line.startswith("{")]

    def wait_access(self, srv, path):
        return poll(lambda: [x for x in self.access_lines(srv) if x["path"] == path],
                    what=lambda: "an access line for %s: %r" % (path, srv.log_tail()))[0]


class ClientAbort(InFlightTestCase):
    def check_cancelled(self, srv, held, path):
        """The member held the request until we closed its connection; the
        figures and the log show a cancel, not a failure."""
        poll(lambda: held.closed_by_peer == 1,
             what="the backend to see its connection closed")
        m = self.wait_member(srv, held.address, {"in_flight": 0, "connections": 0},
                             "the attempt cancelled")
        self.assertEqual((m["failures"], m["health"], m["idle"]), (0, "up", 0), m)
        line = self.wait_access(srv, path)
        self.assertEqual((line["status"], line["upstream_addr"], line["upstream_status"]),
                         (499, held.address, "-"), line)
        self.assertEqual(sum(b.count() for b in self.backends), 1, "nothing retried")

    def send_and_wait_in_flight(self, srv, held, path):
        c = Client(srv.port)
        c.send(request("GET", path))
        self.wait_member(srv, held.address, {"in_flight": 1, "connections": 1},
                         "the request in flight on the held member")
        return c

    def test_client_close_cancels_the_attempt(self):
        held, other = self.backend("hold"), self.backend("hold")
        srv = self.start([held.address, other.address], retries=2)
        c = self.send_and_wait_in_flight(srv, held, "/app/close")
        c.close()
        self.check_cancelled(srv, held, "/app/close")
        srv.wait_log(r"\[info\] .*client 127\.0\.0\.1: connection closed before the response "
                     r"was complete: request cancelled")

    def test_client_reset_cancels_the_attempt(self):
        held = self.backend("hold")
        srv = self.start([held.address])
        c = self.send_and_wait_in_flight(srv, held, "/app/reset")
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        self.check_cancelled(srv, held, "/app/reset")

    def test_half_close_after_the_request_cancels_as_nginx_does(self):
        """A FIN after a complete request cannot be told from a client that
        left: nginx cancels (499) unless proxy_ignore_client_abort is on,
        and so do we (docs/operations.md)."""
        held = self.backend("hold")
        srv = self.start([held.address])
        c = self.send_and_wait_in_flight(srv, held, "/app/half")
        c.sock.shutdown(socket.SHUT_WR)
        self.check_cancelled(srv, held, "/app/half")
        self.assertTrue(c.wait_closed(), "no answer, the connection closed")
        c.close()

    def test_pipelined_patient_client_is_answered(self):
        """Bytes of the next request arrive while the first waits on its
        member: they are input, not a close."""
        slow = self.backend("slow", times=1, delay=0.002)
        srv = self.start([slow.address])
        with Client(srv.port) as c:
            c.send(request("GET", "/app/one") + request("GET", "/app/two"))
            self.assertEqual(c.read_response().body, b"b0 GET /app/one")
            self.assertEqual(c.read_response().body, b"b0 GET /app/two")
        poll(lambda: len(self.access_lines(srv)) == 2, what="two access lines")
        lines = self.access_lines(srv)
        self.assertEqual([x["status"] for x in lines], [200, 200], lines)
        m = self.wait_member(srv, slow.address, {"in_flight": 0, "requests": 2}, "both ended")
        self.assertEqual(m["failures"], 0)


class Tunnels(InFlightTestCase):
    def test_an_open_tunnel_counts_in_flight_until_it_ends(self):
        a, b = self.backend("echo"), self.backend("echo")
        srv = self.start([a.address, b.address], balance="least_conn")
        tunnel = Client(srv.port)
        tunnel.send(request("GET", "/app/raw", headers=[("Upgrade", "echo"),
                                                         ("Connection", "upgrade")]))
        self.assertEqual(tunnel.read_response(allow_1xx=True).status, 101)
        busy = poll(lambda: [x for x in (a, b) if self.member(srv, x.address)["in_flight"] == 1],
                    what="the tunnel in flight on its member")[0]
        free = b if busy is a else a
        # least_conn sends every request to the other member while the
        # tunnel is open (with the tunnel not counted, ties would alternate).
        for i in range(4):
            with Client(srv.port) as c:
                r = c.get("/app/n%d" % i)
                self.assertEqual(r.body, ("%s GET /app/n%d" % (free.name, i)).encode())
        m = self.member(srv, busy.address)
        self.assertEqual((m["in_flight"], m["requests"]), (1, 0), m)
        tunnel.send(b"close\n")
        self.assertTrue(tunnel.read_until_close())
        tunnel.close()
        m = self.wait_member(srv, busy.address, {"in_flight": 0, "requests": 1},
                             "the tunnel ended")
        self.assertEqual(m["failures"], 0)
