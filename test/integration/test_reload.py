"""SIGHUP reload: a new table generation serves while connections and
requests in flight keep working; an invalid file leaves the old table."""

import http.client
import os
import re
import signal
import threading
import time

from harness import Client, HELLO_HOSTS, ServerTestCase, TIMEOUT, make_config, static_hosts
from test_process import BIG_SIZE, SlowDownload, write_big_file

RELOADS = 50
CLIENTS = 4
MAX_REQUESTS_PER_CLIENT = 1000000


def generation_config(k, loops=2):
    """Generation k: "/" answers "gen k"; routes /g1 .. /gk answer "gen i"."""
    hosts = ('- name: "*"\n'
             '  routes:\n'
             '    - path: /\n'
             '      respond: {status: 200, headers: {Content-Type: text/plain}, body: "gen %d"}\n'
             % k)
    for i in range(1, k + 1):
        hosts += ('    - path: /g%d\n'
                  '      match: exact\n'
                  '      respond: {status: 200, body: "gen %d"}\n' % (i, i))
    return make_config(hosts, server="event_loops: %d" % loops)


class TrafficClient(threading.Thread):
    """Requests "/" on a keep-alive connection until told to stop; every
    response must be a 200 with some generation's body."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port = port
        self.stop = stop
        self.ok = 0
        self.errors = []
        self.connections = 1

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
        try:
            for _ in range(MAX_REQUESTS_PER_CLIENT):
                if self.stop.is_set():
                    break
                self.one(conn)
        finally:
            conn.close()

    def one(self, conn):
        try:
            conn.request("GET", "/")
            r = conn.getresponse()
            body = r.read()
            if r.will_close:
                self.connections += 1  # http.client reconnects on the next request
        except (OSError, http.client.HTTPException) as e:
            self.errors.append("request %d: %r" % (self.ok + len(self.errors), e))
            conn.close()
            return
        if r.status == 200 and re.fullmatch(rb"gen \d+", body):
            self.ok += 1
        else:
            self.errors.append("status %d body %r" % (r.status, body[:100]))


class Reload(ServerTestCase):
    def test_reload_under_traffic(self):
        srv = self.server(generation_config(0))
        workers = srv.wait_workers(2)
        stop = threading.Event()
        clients = [TrafficClient(srv.port, stop) for _ in range(CLIENTS)]
        for c in clients:
            c.start()
        t0 = time.monotonic()
        try:
            for k in range(1, RELOADS + 1):
                srv.write_config(generation_config(k))
                srv.signal(signal.SIGHUP)
                srv.wait_answer("/g%d" % k, b"gen %d" % k)
        finally:
            took = time.monotonic() - t0
            stop.set()
            for c in clients:
                c.join(TIMEOUT)
        self.assertFalse(any(c.is_alive() for c in clients), "a client thread hangs")
        total = sum(c.ok for c in clients)
        errors = [e for c in clients for e in c.errors]
        print("reload under traffic: %d reloads in %.1fs, %d requests, %d failed"
              % (RELOADS, took, total, len(errors)))
        self.assertEqual(errors, [], "%d failed requests" % len(errors))
        self.assertTrue(all(c.ok > 0 for c in clients), [c.ok for c in clients])
        # The final table serves every route, on old and new connections.
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen %d" % RELOADS)
            for i in range(1, RELOADS + 1):
                self.assertEqual(c.get("/g%d" % i).body, b"gen %d" % i)
        self.assertRegex(srv.log(), r"reload: generation \d+ published")
        self.assertEqual(srv.worker_pids(), workers, "a worker was restarted during the reloads")

    def test_keepalive_connection_survives_reload(self):
        srv = self.server(generation_config(1))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen 1")
            srv.write_config(generation_config(2))
            srv.signal(signal.SIGHUP)
            srv.wait_answer("/g2", b"gen 2")
            # Same connection, new generation: its worker adopts it when the
            # request wakes it.
            self.assertEqual(c.get("/g2").body, b"gen 2")
            self.assertEqual(c.get("/").body, b"gen 2")

    def test_idle_connection_first_request_after_reload_sees_new_table(self):
        """A worker asleep in epoll_wait when a generation is published
        adopts it when the next request wakes it, before handling it: the
        first request on an idle keep-alive connection sees the new route
        (one worker, so nothing else wakes it in between)."""
        srv = self.server(generation_config(1, loops=1))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/g2").body, b"gen 1")  # "/" prefix: no /g2 yet
            srv.write_config(generation_config(2, loops=1))
            srv.signal(signal.SIGHUP)
            srv.wait_log(r"reload: generation 2 published")
            self.assertEqual(c.get("/g2").body, b"gen 2")

    def test_reload_changes_settings(self):
        srv = self.server(make_config("""
            - name: "*"
              routes:
                - path: /
                  respond: {status: 200, body: "one"}
            """, 'server_header: "first"'))
        srv.write_config(make_config("""
            - name: "*"
              routes:
                - path: /
                  respond: {status: 200, body: "two"}
            """, 'server_header: "second"'))
        srv.signal(signal.SIGHUP)
        srv.wait_answer("/", b"two")
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").header("Server"), "second")

    def test_reload_log_level_reaches_workers(self):
        """logging.level is applied by running workers, not only by the
        supervisor: after a reload to debug, a worker logs its adoption of
        the new generation (a debug line it would not write at warn)."""
        hosts = """
            - name: "*"
              routes:
                - path: /
                  respond: {status: 200, body: "%s"}
            """
        srv = self.server(make_config(hosts % "one", "logging: {level: warn, access_log: off}"))
        srv.write_config(make_config(hosts % "two", "logging: {level: debug, access_log: off}"))
        srv.signal(signal.SIGHUP)
        srv.wait_answer("/", b"two")
        srv.wait_log(r"worker 0\[\d+\]: using table generation 2")
        self.assertNotIn("using table generation 1", srv.log())

    def test_reload_shutdown_timeout_reaches_workers(self):
        """A download in flight since generation 1 (shutdown_timeout 1s)
        outlives a SIGQUIT sent after a reload to 120s: the worker takes the
        timeout from the newest generation when the stop begins."""
        hosts = static_hosts()
        srv = self.server(make_config(hosts, "event_loops: 1\nshutdown_timeout: 1s"), start=False)
        want = write_big_file(os.path.join(srv.dir, "www"))
        srv.start()
        d = SlowDownload(srv.port)
        self.addCleanup(d.close)
        self.assertEqual(d.read(1 << 20), 1 << 20, "closed early")

        srv.write_config(make_config(hosts, "event_loops: 1\nshutdown_timeout: 120s"))
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"reload: generation 2 published")
        srv.signal(signal.SIGQUIT)
        srv.wait_log(r"worker 0\[\d+\]: graceful stop: 1 connection to finish")
        # The supervisor's kill deadline follows too: 120 s + its 5 s margin.
        self.assertRegex(srv.log(), r"graceful stop; waiting up to 120000 ms for 1 worker\(s\), "
                                    r"then SIGKILL at 125000 ms")
        # A client that stalls past the old timeout: with 1 s the worker
        # would cut the transfer while this sleeps.
        time.sleep(2)
        self.assertEqual(d.read(BIG_SIZE), BIG_SIZE, "body cut short")
        self.assertEqual(d.digest.hexdigest(), want, "body corrupted")
        self.assertEqual(srv.wait_exit(), 0, srv.log_tail())
        self.assertNotIn("connection cut", srv.log())

    def test_invalid_config_keeps_old_table(self):
        srv = self.server(generation_config(1))
        bad = generation_config(2).replace("        match: exact\n",
                                           "        match: exact\n        bogus_key: 1\n", 1)
        bad_line = bad.splitlines().index("        bogus_key: 1") + 1
        srv.write_config(bad)
        srv.signal(signal.SIGHUP)
        m = srv.wait_log(r"scalws\.yaml:(\d+):(\d+):[^\n]*")
        self.assertEqual(int(m.group(1)), bad_line, m.group(0))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen 1")
            self.assertEqual(c.get("/g1").body, b"gen 1")
            self.assertEqual(c.get("/g2").body, b"gen 1")  # "/" prefix: /g2 does not exist
        self.assertTrue(srv.running(), "supervisor exited on a bad reload")
        # A good file afterwards is taken.
        srv.write_config(generation_config(3))
        srv.signal(signal.SIGHUP)
        srv.wait_answer("/g3", b"gen 3")

    def test_table_larger_than_running_arena_is_refused(self):
        # The arenas are sized at start: a reload whose table only fits the
        # file's new table_size fails at once instead of waiting for ever.
        srv = self.server(make_config(HELLO_HOSTS, "table_size: 64k"))
        big = "".join('    - path: /big%d\n'
                      '      respond: {status: 200, body: "%s"}\n' % (i, "x" * 30000)
                      for i in range(4))
        srv.write_config(make_config(HELLO_HOSTS.rstrip("\n") + "\n" + big, "table_size: 1m"))
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"changes to server\.table_size need a restart")
        srv.wait_log(r"reload failed: [^\n]*the routing table needs \d+ bytes, more than 65536")
        self.assertNotRegex(srv.log(), "cannot publish yet")
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"hello, world\n")
            self.assertEqual(c.get("/big0").body, b"hello, world\n")  # still generation 1
        small = '    - path: /small\n      respond: {status: 200, body: "small"}\n'
        srv.write_config(make_config(HELLO_HOSTS.rstrip("\n") + "\n" + small, "table_size: 64k"))
        srv.signal(signal.SIGHUP)
        srv.wait_answer("/small", b"small")

    def test_invalid_yaml_syntax_keeps_old_table(self):
        srv = self.server(generation_config(1))
        srv.write_config(generation_config(2) + "  - [unclosed\n")
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"scalws\.yaml:\d+:\d+:")
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"gen 1")
