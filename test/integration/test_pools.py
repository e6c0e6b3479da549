"""Pools and proxy routes in the configuration: the example file starts
with no member running, a reload takes a changed pool, and a bad pool in a
reload is refused at its line and column while the old table keeps
serving."""

import os
import re
import signal
import socket

from backend import Backend
from harness import ROOT, Client, ServerTestCase



def pools_config(members, body):
    """One pool "app" with members (YAML list items), a proxy route /app/
    to it, and "/" answering body (what shows a generation was taken)."""
    return ('server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: 1\n  admin: {listen: []}\n'
            'pools:\n  - name: app\n    members:\n%s'
            'hosts:\n  - name: "*"\n    routes:\n'
            '      - {path: /, match: exact, respond: {body: "%s"}}\n'
            '      - {path: /app/, proxy: {pool: app, host_header: app.internal}}\n'
            % ("".join("      - %s\n" % m for m in members), body))


class ProxyConfig(ServerTestCase):
    def test_example_starts_without_members_running(self):
        with open(os.path.join(ROOT, "conf/proxy.yaml")) as f:
            text = f.read()
        # A free port, and no admin socket (the example's default is the
        # machine's /run/scalws/admin.sock).
        text, n = re.subn(r'listen: "127\.0\.0\.1:8080"',
                          'listen: "127.0.0.1:@PORT@"\n  admin: {listen: []}', text)
        self.assertEqual(n, 1, "conf/proxy.yaml: no listen line to point at a free port")
        srv = self.server(text)
        with Client(srv.port) as c:
            r = c.get("/")
            self.assertEqual((r.status, r.body), (200, b"hello from the proxy example\n"))
            # No member of the example runs: the route is forwarded, and
            # every member refuses the connection.
            self.assertEqual(c.get("/app/x").status, 502)
            self.assertEqual(c.get("/login/").status, 502)

    def test_reload_refuses_a_bad_member_and_takes_a_good_pool(self):
        srv = self.server(pools_config(["127.0.0.1:9"], "gen 1"))
        bad = pools_config(["127.0.0.1:9", '"[::1]"'], "gen 2")
        bad_line = bad.splitlines().index('      - "[::1]"') + 1
        srv.write_config(bad)
        srv.signal(signal.SIGHUP)
        m = srv.wait_log(r"scalws\.yaml:(\d+):(\d+): pools\[0\]\.members\[1\]: [^\n]*")
        self.assertEqual((int(m.group(1)), int(m.group(2))), (bad_line, 9), m.group(0))
        self.assertIn('"[::1]": the port is missing (expected HOST:PORT)', m.group(0))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen 1")
        self.assertTrue(srv.running(), "supervisor exited on a bad reload")

        srv.write_config(pools_config(["127.0.0.1:9", '{address: "[::1]:9", weight: 3}'],
                                      "gen 3"))
        srv.signal(signal.SIGHUP)
        srv.wait_answer("/", b"gen 3")
        with Client(srv.port) as c:
            self.assertEqual(c.get("/app/").status, 502)


def localhost_families():
    """The families "localhost" resolves to here (/etc/hosts): AF_INET,
    and AF_INET6 where ::1 is listed too."""
    return sorted({ai[0] for ai in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)})


class NameMembers(ServerTestCase):
    """A member given by name is resolved by the supervisor when it reads
    the file (ADR 0024): each address a member, a name that does not
    resolve an error at its line at start and at reload."""

    def test_localhost_is_resolved_into_a_member_per_address(self):
        v4 = Backend("v4")
        self.addCleanup(v4.stop)
        backends = [v4]
        if socket.AF_INET6 in localhost_families():
            # The same port on ::1: both addresses of the name are members.
            v6 = Backend("v6", family=socket.AF_INET6, port=v4.port)
            self.addCleanup(v6.stop)
            backends.append(v6)
        srv = self.server(pools_config(["localhost:%d" % v4.port], "gen 1"))
        with Client(srv.port) as c:
            for _ in range(2 * len(backends)):
                r = c.get("/app/x")
                self.assertEqual(r.status, 200, r)
        for b in backends:
            self.assertGreater(b.count(), 0, "%s got nothing" % b.name)
        # The worker names the member by its name and the address it used.
        v4.stop()
        with Client(srv.port) as c:
            c.get("/app/x")
        srv.wait_log(r"pool app member localhost:%d \(127\.0\.0\.1\)" % v4.port)

    def test_a_name_that_does_not_resolve_stops_the_start_at_its_line(self):
        text = pools_config(["127.0.0.1:9", "nonexistent.invalid:80"], "gen 1")
        line = text.splitlines().index("      - nonexistent.invalid:80") + 1
        srv = self.server(text, start=False)
        srv.start(wait=False)
        self.assertEqual(srv.wait_exit(), 1, srv.log_tail())
        self.assertRegex(srv.log(), r"scalws\.yaml:%d:9: pools\[0\]\.members\[1\]: "
                         r'"nonexistent\.invalid" does not resolve' % line)

    def test_a_reload_with_a_name_that_does_not_resolve_keeps_the_generation(self):
        srv = self.server(pools_config(["localhost:9"], "gen 1"))
        srv.write_config(pools_config(["localhost:9", "nonexistent.invalid:80"], "gen 2"))
        srv.signal(signal.SIGHUP)
        srv.wait_log(r'pools\[0\]\.members\[1\]: "nonexistent\.invalid" does not resolve')
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen 1")
        self.assertTrue(srv.running(), "supervisor exited on a bad reload")
