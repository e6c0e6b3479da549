"""The admin API (docs/admin-api.md) against the real scalwsd: over its
Unix socket (mode 0600) and a loopback port; status and pools; refusals
that change nothing; workers adopting a new generation with no traffic to
wake them; a start that goes on when the socket cannot be made; and, once
pools can be written in the file, member changes published and replaced
by a reload."""

import json
import os
import re
import signal
import socket
import stat
import subprocess
import time

from backend import Backend
from harness import (HELLO_HOSTS, TIMEOUT, ServerTestCase, binary, free_port, make_config,
                     poll)


def admin_request(address, method, target, body=None, timeout=TIMEOUT, headers=()):
    """One request to the admin API at address (a Unix socket path or a
    (host, port) pair), with more header lines ("Name: value"); returns
    (status, headers dict, parsed JSON or None)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    data = b"" if body is None else (body if isinstance(body, bytes) else body.encode())
    head = "%s %s HTTP/1.1\r\nHost: admin\r\n" % (method, target)
    head += "".join(h + "\r\n" for h in headers)
    if body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(data)
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(address)
        s.sendall(head.encode() + b"\r\n" + data)
        raw = b""
        # The server closes after its answer; bounded by the timeout and
        # by the size an answer can have here.
        while len(raw) < (1 << 20):
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
    head, _, payload = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    assert int(headers["content-length"]) == len(payload) or method == "HEAD", raw
    return status, headers, (json.loads(payload) if payload else None)


POOLS_YAML = """pools:
  - name: api
    members:
      - {address: "127.0.0.1:9001", weight: 1}
"""


class AdminTestCase(ServerTestCase):
    def admin_server(self, extra="", loops=2, hosts=HELLO_HOSTS, tail="", settings=""):
        """A server with its admin socket in its directory (extra: more
        admin addresses; settings: more server settings, one per line)."""
        srv = self.server(make_config(hosts, server="event_loops: %d\n%sadmin: {listen: "
                                      "[\"@DIR@/run/admin.sock\"%s]}" % (loops, settings, extra))
                          + tail, start=False)
        srv.admin = os.path.join(srv.dir, "run", "admin.sock")
        srv.start()
        poll(lambda: os.path.exists(srv.admin), what="the admin socket")
        return srv

    def status(self, srv):
        code, _, body = admin_request(srv.admin, "GET", "/v1/status")
        self.assertEqual(code, 200, body)
        return body

    def wait_all_workers_on(self, srv, gen, loops=2):
        """Poll GET /v1/status until every worker holds gen; returns the
        seconds it took (reported, never judged)."""
        t0 = time.monotonic()

        def adopted():
            st = self.status(srv)
            return (len(st["workers"]) == loops and
                    all(w["generation"] == gen for w in st["workers"]))
        poll(adopted, interval=0.002, what=lambda: "every worker on generation %d: %r"
             % (gen, self.status(srv)))
        return time.monotonic() - t0

    def member(self, srv, address):
        """The first pool's member at address, as GET /v1/pools gives it."""
        pools = admin_request(srv.admin, "GET", "/v1/pools")[2]["pools"]
        return next(m for m in pools[0]["members"] if m["address"] == address)

    def wait_member(self, srv, address, want, what):
        """Poll until every key of want has its value in the member."""
        poll(lambda: all(self.member(srv, address)[k] == v for k, v in want.items()),
             what=lambda: "%s: %r" % (what, self.member(srv, address)))
        return self.member(srv, address)


class Admin(AdminTestCase):
    def test_socket_is_0600_in_a_directory_made_for_it(self):
        srv = self.admin_server()
        mode = os.stat(srv.admin).st_mode
        self.assertTrue(stat.S_ISSOCK(mode))
        self.assertEqual(stat.S_IMODE(mode), 0o600)
        srv.stop()
        self.assertFalse(os.path.exists(srv.admin), "the socket file outlived the server")

    def test_workers_hold_no_admin_socket(self):
        srv = self.admin_server()
        workers = srv.wait_workers(2)
        with open("/proc/net/unix") as f:
            inodes = [line.split()[6] for line in f.read().splitlines()[1:]
                      if line.split()[-1] == srv.admin]
        self.assertEqual(len(inodes), 1, "the listening socket in /proc/net/unix")
        target = "socket:[%s]" % inodes[0]

        def holds(pid):
            fds = "/proc/%d/fd" % pid
            return any(os.readlink(os.path.join(fds, fd)) == target for fd in os.listdir(fds))
        self.assertTrue(holds(srv.pid), "the supervisor serves it")
        for pid in workers:
            self.assertFalse(holds(pid), "worker %d holds the admin socket" % pid)

    def test_status_names_the_accept_policy_in_force(self):
        if os.geteuid() != 0:
            self.skipTest("the eBPF accept policies need root (CAP_BPF)")
        srv = self.server(make_config(HELLO_HOSTS, server="event_loops: 2\n"
                                      "accept_policy: least-loaded\n"
                                      "admin: {listen: [\"@DIR@/run/admin.sock\"]}"),
                          start=False)
        srv.admin = os.path.join(srv.dir, "run", "admin.sock")
        srv.start()
        poll(lambda: os.path.exists(srv.admin), what="the admin socket")
        self.assertTrue(srv.answers())
        st = self.status(srv)
        want = "reuseport" if "falling back to reuseport" in srv.log() else "least-loaded"
        self.assertEqual(st["accept_policy"], want)
        poll(lambda: sum(w["connections_accepted"] for w in self.status(srv)["workers"]) >= 1,
             what="the accepted connection in a worker's figures")

    def test_status_and_pools(self):
        srv = self.admin_server()
        self.wait_all_workers_on(srv, 1)
        st = self.status(srv)
        self.assertEqual(st["generation"], 1)
        self.assertEqual([w["index"] for w in st["workers"]], [0, 1])
        self.assertEqual(st["accept_policy"], "shared")  # the policy in force
        self.assertTrue(srv.answers())
        poll(lambda: sum(w["requests"] for w in self.status(srv)["workers"]) == 1,
             what="the request counted in a worker's figures")
        code, headers, body = admin_request(srv.admin, "GET", "/v1/pools")
        self.assertEqual(code, 200)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(body, {"generation": 1, "pools": []})

    def test_stop_logs_the_placement_status_served(self):
        """The placement line at stop carries the per-worker accepted
        connections that GET /v1/status served just before."""
        srv = self.admin_server()
        self.wait_all_workers_on(srv, 1)
        for _ in range(3):
            self.assertTrue(srv.answers())
        poll(lambda: sum(w["requests"] for w in self.status(srv)["workers"]) == 3,
             what=lambda: "3 requests in the figures: %r" % self.status(srv))
        accepted = [w["connections_accepted"] for w in self.status(srv)["workers"]]
        self.assertEqual(srv.stop(), 0)
        want = r"placement, accept_policy shared \(worker:accepted/live\): 0:%d/\d+ 1:%d/\d+$" \
            % tuple(accepted)
        self.assertRegex(srv.log(), re.compile(want, re.M))

    def test_loopback_port(self):
        port = free_port()
        srv = self.admin_server(extra=', "127.0.0.1:%d"' % port)
        code, _, body = admin_request(("127.0.0.1", port), "GET", "/v1/status")
        self.assertEqual(code, 200)
        self.assertEqual(body["generation"], 1)

    def test_bad_input_gets_4xx_json_and_changes_nothing(self):
        srv = self.admin_server()
        cases = [
            ("PUT", "/v1/pools/nope/members/127.0.0.1:9000", '{"weight": 2}', 404,
             'no pool "nope"'),
            ("DELETE", "/v1/pools/nope/members/127.0.0.1:9000", None, 404, 'no pool "nope"'),
            ("PUT", "/v1/pools/nope/members/127.0.0.1:99999", "{}", 400,
             'member "127.0.0.1:99999": the port must be a number from 1 to 65535'),
            ("PUT", "/v1/pools/nope/members/127.0.0.1:9000", '{"weight": 2', 400,
             "bad JSON: expected ',' or '}', got the end"),
            ("PUT", "/v1/pools/nope/members/127.0.0.1:9000", '{"weight": 2, "colour": "red"}',
             400, 'unknown field "colour" (known: weight, state)'),
            ("PUT", "/v1/pools/nope/members/127.0.0.1:9000", '{"state": "sleepy"}', 400,
             'state: expected "up" or "draining"'),
            ("PUT", "/v1/pools/nope/members/127.0.0.1:9000", "x" * 5000, 413,
             "request body too large"),
            ("POST", "/v1/status", "{}", 405, "method POST not allowed here (allowed: GET, HEAD)"),
            ("GET", "/v1/nothing", None, 404, "no such endpoint (see docs/admin-api.md)"),
        ]
        for method, target, body, want_code, want_error in cases:
            code, headers, answer = admin_request(srv.admin, method, target, body)
            self.assertEqual((code, answer), (want_code, {"error": want_error}),
                             (method, target, body))
        self.assertEqual(admin_request(srv.admin, "POST", "/v1/status")[1]["allow"], "GET, HEAD")
        self.assertEqual(self.status(srv)["generation"], 1)
        self.assertEqual(srv.log().count("admin API: pool"), 0)

    def test_workers_adopt_a_new_generation_without_traffic(self):
        # No request reaches a worker here: only the supervisor's nudge
        # can wake an idle one to adopt the reload's generation.
        srv = self.admin_server()
        self.wait_all_workers_on(srv, 1)
        srv.write_config(make_config(HELLO_HOSTS.replace("hello", "hi"),
                                     server='event_loops: 2\nadmin: {listen: '
                                            '["@DIR@/run/admin.sock"]}'))
        srv.signal(signal.SIGHUP)
        poll(lambda: self.status(srv)["generation"] == 2, what="generation 2 published")
        took = self.wait_all_workers_on(srv, 2)
        print("every worker on generation 2 %.1f ms after its publication was seen"
              % (took * 1000))

    def test_start_goes_on_without_the_admin_socket(self):
        srv = self.server(make_config(HELLO_HOSTS, server='admin: {listen: '
                                      '["@DIR@/no/such/dir/admin.sock"]}'))
        self.assertTrue(srv.answers())
        srv.wait_log(r"\[error\] supervisor\[\d+\]: admin API: create [^ ]*/no/such/dir: "
                     r"No such file or directory; not served there")

    def test_a_second_server_does_not_take_a_live_socket(self):
        first = self.admin_server()
        second = self.server(make_config(HELLO_HOSTS, server='admin: {listen: ["%s"]}'
                                         % first.admin))
        second.wait_log(r"admin API: %s: another process serves it; not replaced; "
                        r"not served there" % first.admin)
        self.assertEqual(self.status(first)["generation"], 1)

    def test_non_loopback_address_is_refused_by_the_check(self):
        srv = self.server(make_config(HELLO_HOSTS, server='admin:\n  listen: ["0.0.0.0:9180"]'),
                          start=False)
        p = subprocess.run([binary(), "-t", "-c", srv.config_path], capture_output=True,
                           timeout=TIMEOUT)
        out = (p.stdout + p.stderr).decode()
        self.assertEqual(p.returncode, 1, out)
        self.assertRegex(out, r"scalws.yaml:\d+:\d+: server.admin.listen\[0\]: \"0.0.0.0:9180\" "
                              r"is not a loopback address")


class AdminPools(AdminTestCase):
    def test_put_delete_publish_and_reload_replaces(self):
        srv = self.admin_server(tail=POOLS_YAML)
        code, _, body = admin_request(srv.admin, "GET", "/v1/pools")
        self.assertEqual([m["address"] for m in body["pools"][0]["members"]], ["127.0.0.1:9001"])

        code, _, body = admin_request(srv.admin, "PUT", "/v1/pools/api/members/127.0.0.1:9002",
                                      '{"weight": 3, "state": "draining"}')
        self.assertEqual(code, 201, body)
        self.assertEqual(body["generation"], 2)
        took = self.wait_all_workers_on(srv, 2)
        print("every worker on the admin change's generation after %.1f ms" % (took * 1000))
        srv.wait_log(r'admin API: pool "api": member 127.0.0.1:9002 added \(id \d+, weight 3, '
                     r'draining\); generation 2')
        members = admin_request(srv.admin, "GET", "/v1/pools")[2]["pools"][0]["members"]
        self.assertEqual([(m["address"], m["weight"], m["state"]) for m in members],
                         [("127.0.0.1:9001", 1, "up"), ("127.0.0.1:9002", 3, "draining")])

        code, _, body = admin_request(srv.admin, "DELETE",
                                      "/v1/pools/api/members/127.0.0.1:9001")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["generation"], 3)

        srv.signal(signal.SIGHUP)
        srv.wait_log(r"admin API: generation 4 from the configuration file replaces the 2 "
                     r"change\(s\) made through the admin API")
        members = admin_request(srv.admin, "GET", "/v1/pools")[2]["pools"][0]["members"]
        self.assertEqual([m["address"] for m in members], ["127.0.0.1:9001"])


PROXY_HOSTS = """
- name: "*"
  routes:
    - {path: /app/, proxy: {pool: app}}
"""


def live_pool(members, health="{max_fails: 2, cooldown: 60s}"):
    """Pool "app" (the route /app/ of PROXY_HOSTS) with members, a long
    cooldown (a member marked down stays down for the test) and no retry
    (each request reaches its member once)."""
    return ("pools:\n  - name: app\n    retries: 0\n    health: %s\n    members:\n%s"
            % (health, "".join('      - "%s"\n' % m for m in members)))


class AdminLiveFigures(AdminTestCase):
    """GET /v1/pools shows what the workers see of each member: requests in
    flight, idle keep-alive connections, requests ended, failures and
    passive health, summed and per worker."""

    def test_requests_to_a_stalled_member_show_in_flight(self):
        be = Backend("b", mode="stall")
        self.addCleanup(be.stop)
        srv = self.admin_server(loops=1, hosts=PROXY_HOSTS, tail=live_pool([be.address]))
        clients = [self.client(srv) for _ in range(2)]
        for c in clients:
            c.send(b"GET /app/x HTTP/1.1\r\nHost: x\r\n\r\n")
        m = self.wait_member(srv, be.address, {"in_flight": 2, "connections": 2},
                             "two requests in flight on the stalled member")
        self.assertEqual((m["idle"], m["requests"], m["failures"], m["health"]),
                         (0, 0, 0, "up"))
        self.assertEqual([(w["index"], w["in_flight"]) for w in m["workers"]], [(0, 2)])
        # The backend closes both connections: the requests end (502).
        be.stop()
        for c in clients:
            self.assertEqual(c.read_response().status, 502)
        self.wait_member(srv, be.address, {"in_flight": 0, "connections": 0, "requests": 2},
                         "the requests ended")

    def test_kept_alive_connections_show_idle(self):
        be = Backend("b")
        self.addCleanup(be.stop)
        srv = self.admin_server(loops=1, hosts=PROXY_HOSTS, tail=live_pool([be.address]))
        with self.client(srv) as c:
            for _ in range(3):
                self.assertEqual(c.get("/app/x").status, 200)
        m = self.wait_member(srv, be.address, {"requests": 3, "idle": 1},
                             "three requests ended, their connection kept idle")
        self.assertEqual((m["in_flight"], m["connections"], m["failures"], m["health"]),
                         (0, 1, 0, "up"))

    def test_failing_members_show_failures_and_down(self):
        bad = Backend("bad", mode="status:503")
        self.addCleanup(bad.stop)
        refusing = "127.0.0.1:%d" % free_port()
        srv = self.admin_server(loops=1, hosts=PROXY_HOSTS,
                                tail=live_pool([bad.address, refusing]))
        # Round robin over two members with max_fails 2: four requests give
        # each two failures (a member down gets no more; then 503).
        with self.client(srv) as c:
            statuses = sorted(c.get("/app/x").status for _ in range(4))
        self.assertEqual(statuses, [502, 502, 503, 503], "the 503s passed on, then 502s")
        for address in (bad.address, refusing):
            m = self.wait_member(srv, address, {"failures": 2, "health": "down"},
                                 "%s marked down" % address)
            self.assertEqual(m["down_workers"], 1)
            self.assertEqual(m["state"], "up")  # the configured state is unchanged
            self.assertGreater(m["workers"][0]["down_for_ms"], 0)
            self.assertEqual(m["in_flight"], 0)


class AdminNames(AdminTestCase):
    def test_put_by_name_resolves_and_serves(self):
        be = Backend("b")
        self.addCleanup(be.stop)
        srv = self.admin_server(loops=1, hosts=PROXY_HOSTS, tail=live_pool([]))
        code, _, body = admin_request(srv.admin, "PUT",
                                      "/v1/pools/app/members/localhost:%d" % be.port)
        self.assertEqual(code, 201, body)
        self.assertIn("127.0.0.1:%d" % be.port, [r["address"] for r in body["added"]["resolved"]])
        self.wait_all_workers_on(srv, 2, loops=1)
        members = admin_request(srv.admin, "GET", "/v1/pools")[2]["pools"][0]["members"]
        v4 = next(m for m in members if m["address"] == "127.0.0.1:%d" % be.port)
        self.assertEqual(v4["name"], "localhost:%d" % be.port)
        with self.client(srv) as c:
            self.assertEqual(c.get("/app/x").status, 200)
        code, _, body = admin_request(srv.admin, "PUT",
                                      "/v1/pools/app/members/nonexistent.invalid:80")
        self.assertEqual(code, 422, body)
        self.assertIn("does not resolve", body["error"])
        code, _, body = admin_request(srv.admin, "DELETE",
                                      "/v1/pools/app/members/localhost:%d" % be.port)
        self.assertEqual(code, 200, body)
        self.assertEqual(admin_request(srv.admin, "GET", "/v1/pools")[2]["pools"][0]["members"],
                         [])
