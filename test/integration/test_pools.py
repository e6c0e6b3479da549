"""Pools and proxy routes in the configuration: the example file starts
with no member running, a reload takes a changed pool, and a bad pool in a
reload is refused at its line and column while the old table keeps
serving."""

import os
import re
import signal

from harness import Client, ServerTestCase

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
        with open(os.path.join(REPO, "conf/proxy.yaml")) as f:
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
