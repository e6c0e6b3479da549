"""kill -9 under load (issue 11, "What it must show" 4). A worker: only
requests on the connections it held may fail, every other request
succeeds, and a replacement serves. The supervisor: its workers stop
(PR_SET_PDEATHSIG), the port is free, and a new scalwsd on the same
configuration serves. (test_process.py kills without load.)"""

import os
import re
import signal
import threading
import time

from harness import (HELLO_BODY, HELLO_HOSTS, Client, ConnectionClosed, ServerTestCase,
                     connect_refused, make_config, poll, process_state, scale, socket_inodes)

KEEPALIVE_CLIENTS = 6
NEWCONN_CLIENTS = 2
INTERVAL = 0.01          # seconds between two requests of one client
MAX_REQUESTS = 5000      # per client: the load ends by itself
STAMP = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z"


def held_ports(pid, port):
    """The client ports of the established TCP connections to `port` that
    process pid holds (its fds matched to /proc/net/tcp by inode)."""
    inodes = socket_inodes(pid)
    if not inodes:
        return set()
    ports = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state == "01" and inode in inodes and int(local.split(":")[1], 16) == port:
                ports.add(int(remote.split(":")[1], 16))
    return ports


class Load:
    """Fixed-interval GETs of / from KEEPALIVE_CLIENTS threads on one
    connection each (a new one after a failure) and NEWCONN_CLIENTS threads
    on a new connection per request. Each outcome is kept as (client port
    or None, ok, what); bounded by MAX_REQUESTS per thread and by stop()."""

    def __init__(self, port):
        self.port = port
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.results = []
        self.threads = [threading.Thread(target=self.keepalive, daemon=True)
                        for _ in range(KEEPALIVE_CLIENTS)]
        self.threads += [threading.Thread(target=self.newconn, daemon=True)
                         for _ in range(NEWCONN_CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(scale(10))
            if t.is_alive():
                raise AssertionError("a load thread did not stop")

    def record(self, port, ok, what=""):
        with self.lock:
            self.results.append((port, ok, what))

    def successes(self):
        with self.lock:
            return sum(1 for r in self.results if r[1])

    def failures(self):
        with self.lock:
            return [r for r in self.results if not r[1]]

    def one(self, c):
        """One GET on c; True if answered as it should be."""
        r = c.get("/")
        return r.status == 200 and r.body == HELLO_BODY, r

    def keepalive(self):
        c, port = None, None
        for _ in range(MAX_REQUESTS):
            if self.stopping.is_set():
                break
            try:
                if c is None:
                    c = Client(self.port, timeout=scale(5))
                    port = c.sock.getsockname()[1]
                ok, r = self.one(c)
                self.record(port, ok, "" if ok else "status %d" % r.status)
                if not ok or (r.header("Connection") or "").lower() == "close":
                    c.close()
                    c = None
            except (OSError, ConnectionClosed) as e:
                self.record(port if c is not None else None, False, repr(e))
                if c is not None:
                    c.close()
                c = None
            self.stopping.wait(INTERVAL)
        if c is not None:
            c.close()

    def newconn(self):
        for _ in range(MAX_REQUESTS):
            if self.stopping.is_set():
                break
            port = None
            try:
                with Client(self.port, timeout=scale(5)) as c:
                    port = c.sock.getsockname()[1]
                    ok, r = self.one(c)
                    self.record(port, ok, "" if ok else "status %d" % r.status)
            except (OSError, ConnectionClosed) as e:
                self.record(port, False, repr(e))
            self.stopping.wait(INTERVAL)


class KillUnderLoad(ServerTestCase):
    def start_load(self, srv):
        load = Load(srv.port).start()
        self.addCleanup(load.stop)
        return load

    def more_successes(self, load, n):
        want = load.successes() + n
        poll(lambda: load.successes() >= want, timeout=scale(20),
             what="%d more answered requests" % n)

    def stamp(self, srv, pattern):
        m = re.search(STAMP + r".*" + pattern, srv.log(), re.M)
        self.assertIsNotNone(m, "no log line /%s/" % pattern)
        return time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) + \
            int(m.group(1)[20:]) / 1000

    def test_kill9_worker_fails_only_its_own_connections(self):
        # least-loaded spreads the connections over both workers and sends
        # none to a dead one (reuseport when eBPF is not available).
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2\naccept_policy: least-loaded\n"
                                      "logging: {access_log: off}"))
        workers = srv.wait_workers(2)
        load = self.start_load(srv)
        self.more_successes(load, 20 * (KEEPALIVE_CLIENTS + NEWCONN_CLIENTS))
        victim = max(workers, key=lambda p: len(held_ports(p, srv.port)))
        survivor = [p for p in workers if p != victim][0]
        # Stopped, it takes no more connections: what it holds is final.
        os.kill(victim, signal.SIGSTOP)
        held = held_ports(victim, srv.port)
        survivor_held = held_ports(survivor, srv.port)
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        new = [p for p in srv.wait_workers(2, exclude=[victim]) if p != survivor]
        self.assertEqual(len(new), 1, "the survivor was restarted too")
        # The replacement's first answer: a fresh keep-alive connection it
        # holds after answering.
        served = None
        for _ in range(1000):
            with Client(srv.port) as c:
                ok, _ = load.one(c)
                self.assertTrue(ok)
                if c.sock.getsockname()[1] in held_ports(new[0], srv.port):
                    served = time.monotonic() - t0
                    break
            if time.monotonic() - t0 > scale(10):
                break
        self.assertIsNotNone(served, "the replacement answered nothing")
        self.more_successes(load, 20 * (KEEPALIVE_CLIENTS + NEWCONN_CLIENTS))
        load.stop()

        failures = load.failures()
        restart = self.stamp(srv, r"worker \d+ \(pid %d\) started" % new[0]) - \
            self.stamp(srv, r"worker \d+ \(pid %d\) killed by signal 9" % victim)
        print("kill -9 of a worker under load: %d requests, %d failed; it held %d connections, "
              "the other %d; replacement serving %.0f ms after the kill (test clock), "
              "forked %.0f ms after the supervisor reaped the dead one (log stamps)"
              % (len(load.results), len(failures), len(held), len(survivor_held),
                 served * 1000, restart * 1000))
        self.assertTrue(held, "the killed worker held no connection: nothing was tested")
        strays = [f for f in failures if f[0] not in held]
        self.assertEqual(strays, [], "failures on connections the killed worker did not hold")
        # A connection fails at most once: its client then opens another.
        self.assertLessEqual(len(failures), len(held))
        self.assertLess(served, scale(5), "the replacement took too long")
        self.assertTrue(srv.running())

    def test_kill9_supervisor_stops_workers_and_a_new_one_serves(self):
        config = make_config(HELLO_HOSTS, "event_loops: 2\nlogging: {access_log: off}")
        srv = self.server(config)
        workers = srv.wait_workers(2)
        load = self.start_load(srv)
        self.more_successes(load, 10 * (KEEPALIVE_CLIENTS + NEWCONN_CLIENTS))
        os.kill(srv.pid, signal.SIGKILL)
        poll(lambda: all(process_state(p) in (None, "Z") for p in workers),
             what="the workers to exit after their supervisor")
        poll(lambda: connect_refused(srv.port), what="the port to be free")
        load.stop()
        print("kill -9 of the supervisor under load: %d requests, %d failed"
              % (len(load.results), len(load.failures())))
        again = self.server(config, port=srv.port)
        again.wait_workers(2)
        again.wait_answer()
        load = self.start_load(again)
        self.more_successes(load, 10 * (KEEPALIVE_CLIENTS + NEWCONN_CLIENTS))
        load.stop()
        self.assertEqual(load.failures(), [])


if __name__ == "__main__":
    import unittest
    unittest.main()
