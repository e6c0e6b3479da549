"""scalwsd subscribed to ingressd's routes (`ingress: {subscribe: ...}`,
docs/configuration.md, ADR 0037), driven by build/test/routes_pub: a
publisher that speaks ingressd's side of the clone pattern with the routes
of a YAML file (SIGHUP: publish what changed).

- /readyz 503 before the first snapshot, 200 after; the routes published
  are served beside the file's (whose names win);
- a pool's members changed every 200 ms under a client loop: no request
  fails, and the new members take requests;
- the publisher killed: still served, still ready, /v1/status shows the
  silence and the age growing; a new publisher (new id): a snapshot, its
  routes served;
- a lost sequence number (routes_pub --skip-at): a snapshot is taken;
- routes the table build refuses: nothing of them served, not ready, a
  snapshot asked for again and taken once the source is fixed.

Every wait is a bounded poll; no verdict depends on timing."""

import os
import queue
import signal
import subprocess
import threading
import time

from backend import Backend
from harness import (BUILD_DIR, TIMEOUT, Client, KeepAliveLoop, Process, ServerTestCase, binary,
                     free_port, poll, scale)
from test_admin import admin_request

FILE_HOSTS = """
hosts:
  - names: [file.example, shared.example]
    routes:
      - {path: /, respond: {body: "from the file"}}
"""


def respond_routes(body, names="app.example, shared.example"):
    return """
hosts:
  - names: [%s]
    routes:
      - {path: /, respond: {body: "%s"}}
""" % (names, body)


def proxy_routes(addresses):
    members = "".join("      - %s\n" % a for a in addresses)
    return """
pools:
  - name: ing-app
    retries: 2
    members:
%shosts:
  - names: [app.example]
    routes:
      - {path: /, proxy: {pool: ing-app}}
""" % members


class RoutesPub(Process):
    """build/test/routes_pub on endpoint, publishing the routes of its own
    file; its stdout lines are read by a thread into a queue, its stderr
    goes to a log beside the file."""

    def __init__(self, directory, endpoint, routes, extra=()):
        self.path = os.path.join(directory, "routes-%d.yaml" % id(self))
        super().__init__(self.path + ".log")
        self.write(routes)
        self.spawn([os.path.abspath(os.path.join(BUILD_DIR, "test", "routes_pub")), "-c",
                    self.path, "-p", endpoint] + list(extra), stdout=subprocess.PIPE)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("routes_pub: ready")

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.decode(errors="replace").strip())

    def expect(self, text, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("routes_pub did not say %r; it said %r; its log:\n%s"
                                     % (text, self.seen, self.log_tail()))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line == text:
                return

    def write(self, routes):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(routes)
        os.replace(tmp, self.path)

    def publish(self, routes, sequence):
        """New routes, published as the delta numbered sequence."""
        self.write(routes)
        self.signal(signal.SIGHUP)
        self.expect("routes_pub: sequence %d" % sequence)


class IngressSubTestCase(ServerTestCase):
    def subscribed_server(self, settings=""):
        self.admin_port = free_port()
        srv = self.server('server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: 2\n'
                          '  admin: {listen: ["127.0.0.1:%d"]}\n%s'
                          'ingress: {subscribe: "ipc://@DIR@/run/routes.sock"}\n'
                          % (self.admin_port, settings) + FILE_HOSTS)
        srv.endpoint = "ipc://%s/run/routes.sock" % srv.dir
        poll(lambda: self.admin_up(), what="the admin API")
        return srv

    def admin_up(self):
        try:
            admin_request(("127.0.0.1", self.admin_port), "GET", "/healthz")
            return True
        except OSError:
            return False

    def admin(self, target):
        return admin_request(("127.0.0.1", self.admin_port), "GET", target)

    def ingress_status(self):
        code, _, body = self.admin("/v1/status")
        self.assertEqual(code, 200, body)
        return body["ingress"]

    def publisher(self, srv, routes, extra=()):
        return self.helper(RoutesPub(srv.dir, srv.endpoint, routes, extra))

    def body_for(self, srv, host):
        with Client(srv.port) as c:
            r = c.get("/", host=host)
            return r.body.decode(errors="replace") if r.status == 200 else "status %d" % r.status

    def wait_body(self, srv, host, body):
        poll(lambda: self.body_for(srv, host) == body,
             what=lambda: "%s to answer %r (it answers %r)" % (host, body,
                                                              self.body_for(srv, host)))

    def test_ready_after_the_first_snapshot_and_routes_served(self):
        srv = self.subscribed_server()
        code, _, body = self.admin("/readyz")
        self.assertEqual((code, body), (503, {"error": "not ready: no ingress snapshot applied "
                                                       "yet"}))
        self.assertEqual(self.admin("/healthz")[0], 200)
        self.assertFalse(self.ingress_status()["ready"])
        # The file serves meanwhile.
        self.assertEqual(self.body_for(srv, "file.example"), "from the file")
        self.assertEqual(self.body_for(srv, "app.example"), "status 404")

        self.publisher(srv, respond_routes("ingress one"))
        poll(lambda: self.admin("/readyz")[0] == 200, what="/readyz 200")
        self.wait_body(srv, "app.example", "ingress one")
        # A name the file claims stays the file's.
        self.assertEqual(self.body_for(srv, "shared.example"), "from the file")
        st = self.ingress_status()
        self.assertEqual((st["state"], st["sequence"], st["snapshots"]), ("in-step", 1, 1))
        self.assertTrue(st["ready"])

        # A reload of the file keeps the ingress routes.
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"reload: generation \d+ published")
        self.assertEqual(self.body_for(srv, "app.example"), "ingress one")

    def test_member_changes_under_load_fail_no_request(self):
        srv = self.subscribed_server()
        backends = [Backend("b0", delay=0), Backend("b1", delay=0)]
        for b in backends:
            self.addCleanup(b.stop)
        a0, a1 = backends[0].address, backends[1].address
        pub = self.publisher(srv, proxy_routes([a0]))
        poll(lambda: self.body_for(srv, "app.example").startswith("b0 "), what="the pool")

        loop = KeepAliveLoop(srv.port, "app.example")
        sets = [[a0, a1], [a1], [a0, a1], [a0]] * 4
        for i, members in enumerate(sets):
            pub.publish(proxy_routes(members), i + 2)
            poll(lambda: self.ingress_status()["sequence"] == i + 2, what="delta %d" % (i + 2))
            time.sleep(0.2)  # the step of the churn, not a readiness wait
        loop.stop()
        self.assertEqual(loop.failures, [])
        self.assertGreater(loop.answered, len(sets))
        self.assertGreater(backends[1].count(), 0)
        st = self.ingress_status()
        self.assertEqual((st["snapshots"], st["deltas"], st["refused"]), (1, len(sets), 0), srv.log_tail(80))

    def test_publisher_gone_then_restarted(self):
        srv = self.subscribed_server()
        pub = self.publisher(srv, respond_routes("ingress one"))
        self.wait_body(srv, "app.example", "ingress one")
        first_id = self.ingress_status()["publisher"]
        pub.stop(signal.SIGKILL)
        poll(lambda: self.ingress_status()["state"] == "silent", timeout=scale(15),
             what="the silence noticed")
        srv.wait_log(r"ingress: nothing from ipc://.* for 3000 ms; still serving sequence 1")
        age = self.ingress_status()["heard_age_ms"]
        self.assertGreaterEqual(age, 3000)
        poll(lambda: self.ingress_status()["heard_age_ms"] > age, what="the age growing")
        self.assertEqual(self.body_for(srv, "app.example"), "ingress one")
        self.assertEqual(self.admin("/readyz")[0], 200)

        self.publisher(srv, respond_routes("ingress two"))
        self.wait_body(srv, "app.example", "ingress two")
        st = self.ingress_status()
        self.assertNotEqual(st["publisher"], first_id)
        self.assertEqual((st["state"], st["snapshots"]), ("in-step", 2))
        srv.wait_log(r"ingress: publisher [0-9a-f]+ replaces %s" % first_id)

    def test_a_lost_sequence_number_takes_a_snapshot(self):
        srv = self.subscribed_server()
        pub = self.publisher(srv, respond_routes("ingress one"), extra=["--skip-at", "2"])
        self.wait_body(srv, "app.example", "ingress one")
        pub.publish(respond_routes("ingress two"), 3)  # 2 never comes
        self.wait_body(srv, "app.example", "ingress two")
        srv.wait_log(r"ingress: sequence 3 after 1: messages lost; asking for a snapshot")
        st = self.ingress_status()
        self.assertEqual((st["sequence"], st["snapshots"], st["deltas"]), (3, 2, 0))

    def test_routes_the_table_refuses_are_not_applied(self):
        # A 64 KiB table cannot hold a 100 KB answer: the build refuses the
        # snapshot, and nothing of it is served.
        srv = self.subscribed_server(settings="  table_size: 64k\n")
        pub = self.publisher(srv, respond_routes("x" * 100000))
        srv.wait_log(r"ingress: snapshot 1 of publisher [0-9a-f]+ refused: .*; still serving "
                     r"sequence 0; asking for a snapshot")
        self.assertEqual(self.admin("/readyz")[0], 503)
        self.assertGreaterEqual(self.ingress_status()["refused"], 1)
        self.assertEqual(self.body_for(srv, "app.example"), "status 404")
        self.assertEqual(self.body_for(srv, "file.example"), "from the file")
        # Fixed at the source: the next snapshot is taken.
        pub.publish(respond_routes("small"), 2)
        self.wait_body(srv, "app.example", "small")
        poll(lambda: self.admin("/readyz")[0] == 200, what="/readyz 200")

    def test_a_bad_endpoint_is_refused_by_the_check(self):
        srv = self.server('ingress: {subscribe: "tcp://192.0.2.1:5555"}\n', start=False)
        r = subprocess.run([binary(), "-t", "-c", srv.config_path], capture_output=True,
                           text=True, timeout=TIMEOUT)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('ingress.subscribe: "tcp://192.0.2.1:5555": not a loopback address',
                      r.stderr)
