"""Processes: workers and their restart, crash-loop backoff, signals
(SIGQUIT graceful, SIGTERM/SIGINT now), process titles, accept policies."""

import hashlib
import os
import re
import signal
import socket
import subprocess
import time

from harness import (Client, ServerTestCase, HELLO_HOSTS, TIMEOUT, connect_refused, make_config,
                     poll, process_state, scale, static_hosts)

BACKOFF_LINE = r"crashed \d+ times in a row; restarting in \d+ ms"
BIG_SIZE = 30 * 1024 * 1024


def listening_sockets(port):
    """How many TCP sockets listen on port (IPv4, this network namespace)."""
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":
                n += 1
    return n


def write_big_file(root):
    """root/big.bin: BIG_SIZE bytes, every MiB different; returns its sha256."""
    os.makedirs(root, exist_ok=True)
    block = hashlib.sha256(b"scalws").digest() * (1024 * 1024 // 32)
    digest = hashlib.sha256()
    with open(os.path.join(root, "big.bin"), "wb") as f:
        for i in range(BIG_SIZE // len(block)):
            data = i.to_bytes(4, "big") + block[4:]
            f.write(data)
            digest.update(data)
    return digest.hexdigest()


class SlowDownload:
    """GET /big.bin through a 4 KiB receive buffer: the server has most of
    the body still to send when a test stops it, and for as long as the
    test does not read."""

    def __init__(self, port, size=BIG_SIZE):
        self.size = size
        self.c = Client(port, rcvbuf=4096)
        self.c.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        r = self.c.read_head()
        if (r.status, r.header("Content-Length")) != (200, str(size)):
            raise AssertionError("GET /big.bin: %d, Content-Length %s"
                                 % (r.status, r.header("Content-Length")))
        self.digest = hashlib.sha256(self.c.buf)  # body bytes read along with the head
        self.received = len(self.c.buf)
        self.c.buf = b""

    def close(self):
        self.c.close()

    def read(self, upto):
        """Read in small pieces until upto bytes of body or the end of the
        stream; returns the body bytes received in all."""
        for _ in range(self.size):
            if self.received >= upto:
                break
            chunk = self.c.sock.recv(min(16384, upto - self.received))
            if not chunk:
                break
            self.digest.update(chunk)
            self.received += len(chunk)
        return self.received


def ps_args(pid):
    p = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p.stdout.strip()


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


class Process(ServerTestCase):
    def test_event_loops_gives_workers(self):
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2"))
        srv.wait_workers(2)  # exactly two live workers, or the poll fails
        for _ in range(10):
            with Client(srv.port) as c:
                self.assertEqual(c.get("/").status, 200)
        self.assertEqual(listening_sockets(srv.port), 1, "shared policy: one socket")

    def test_workers_hold_no_shm_fd(self):
        # A worker reads the table through the mapping it inherited; holding
        # the memfd as well would let it ftruncate the region under the
        # supervisor (SIGBUS).
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2"))
        supervisor_fds = [os.readlink("/proc/%d/fd/%s" % (srv.pid, fd))
                          for fd in os.listdir("/proc/%d/fd" % srv.pid)]
        self.assertTrue(any("memfd:scalws-shm" in t for t in supervisor_fds), supervisor_fds)
        for pid in srv.wait_workers(2):
            targets = [os.readlink("/proc/%d/fd/%s" % (pid, fd))
                       for fd in os.listdir("/proc/%d/fd" % pid)]
            self.assertFalse([t for t in targets if "memfd:" in t], "worker %d: %s" % (pid, targets))
        self.assertTrue(srv.answers())

    def test_ps_titles(self):
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2"))
        workers = srv.wait_workers(2)
        self.assertRegex(ps_args(srv.pid), r"^scalwsd: supervisor")
        titles = sorted(ps_args(p) for p in workers)
        self.assertRegex(titles[0], r"^scalwsd: worker 0\b")
        self.assertRegex(titles[1], r"^scalwsd: worker 1\b")
        for pid in [srv.pid] + workers:
            self.assertTrue(comm(pid).startswith("scalwsd"), comm(pid))

    def test_reuseport_serves(self):
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2\naccept_policy: reuseport"))
        srv.wait_workers(2)
        poll(lambda: listening_sockets(srv.port) == 2, what="a listening socket per worker")
        for _ in range(30):
            with Client(srv.port) as c:
                r = c.get("/")
                self.assertEqual((r.status, r.body), (200, b"hello, world\n"))

    def test_kill9_worker_is_replaced(self):
        srv = self.server(make_config(HELLO_HOSTS))
        old = srv.wait_workers(1)
        self.assertTrue(srv.answers())
        t0 = time.monotonic()
        os.kill(old[0], signal.SIGKILL)
        new = srv.wait_workers(1, exclude=old)
        srv.wait_answer()
        took = time.monotonic() - t0
        print("worker restart after kill -9: new pid %d serving after %.0f ms" % (new[0], took * 1000))
        self.assertLess(took, scale(5))
        self.assertTrue(srv.running())

    def test_kill9_one_of_two_workers(self):
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2"))
        old = srv.wait_workers(2)
        os.kill(old[1], signal.SIGKILL)
        new = srv.wait_workers(2, exclude=old[1:])
        self.assertIn(old[0], new, "the other worker must not be restarted")
        for _ in range(10):
            self.assertTrue(srv.answers())

    def test_crash_loop_backoff_logged(self):
        srv = self.server(make_config(HELLO_HOSTS))
        killed = []
        for _ in range(6):
            pid = srv.wait_workers(1, exclude=killed, timeout=scale(30))[0]
            if re.search(BACKOFF_LINE, srv.log()):
                break
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        srv.wait_log(BACKOFF_LINE, timeout=scale(30))
        self.assertTrue(srv.running(), "supervisor gave up")
        # The backoff ends: a worker serves again.
        srv.wait_workers(1, exclude=killed, timeout=scale(60))
        srv.wait_answer(timeout=scale(60))

    def test_sigquit_finishes_request_in_flight(self):
        srv = self.server(make_config(static_hosts(), "shutdown_timeout: 120s"), start=False)
        want = write_big_file(os.path.join(srv.dir, "www"))
        with open(os.path.join(srv.dir, "www", "small.txt"), "wb") as f:
            f.write(b"small\n")
        srv.start()
        idle = self.client(srv)
        self.assertEqual(idle.get("/small.txt").body, b"small\n")

        d = SlowDownload(srv.port)
        self.addCleanup(d.close)
        self.assertEqual(d.read(1 << 20), 1 << 20, "closed early")  # the first MiB, then the stop
        srv.signal(signal.SIGQUIT)
        # The idle keep-alive connection is closed at once, while the
        # transfer is still in flight.
        self.assertTrue(idle.wait_closed(), "idle keep-alive connection not closed on SIGQUIT")
        self.assertEqual(d.read(BIG_SIZE), BIG_SIZE, "body cut short")
        self.assertEqual(d.digest.hexdigest(), want, "body corrupted")
        self.assertTrue(d.c.wait_closed(), "connection not closed after the graceful stop")
        self.assertEqual(srv.wait_exit(), 0, srv.log_tail())
        self.assertTrue(connect_refused(srv.port), "port still accepts after the stop")

    def test_sigquit_idle_server_exits(self):
        # Far beyond the wait below: the workers must exit because nothing is
        # left to finish, not because the timeout ran out.
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2\nshutdown_timeout: 120s"))
        workers = srv.wait_workers(2)
        srv.signal(signal.SIGQUIT)
        self.assertEqual(srv.wait_exit(), 0, srv.log_tail())
        self.assertTrue(all(process_state(p) in (None, "Z") for p in workers), "workers left")
        self.assertTrue(connect_refused(srv.port))

    def check_stops_now(self, sig):
        srv = self.server(make_config(HELLO_HOSTS, "event_loops: 2"))
        workers = srv.wait_workers(2)
        busy = self.client(srv)  # an open keep-alive connection must not delay the stop
        busy.get("/")
        t0 = time.monotonic()
        srv.signal(sig)
        self.assertEqual(srv.wait_exit(), 0, srv.log_tail())
        took = time.monotonic() - t0
        print("stop on %s: %.0f ms" % (signal.Signals(sig).name, took * 1000))
        poll(lambda: all(process_state(p) in (None, "Z") for p in workers), what="workers to exit")
        self.assertTrue(connect_refused(srv.port))
        self.assertTrue(busy.wait_closed())

    def test_sigterm_stops_now(self):
        self.check_stops_now(signal.SIGTERM)

    def test_sigint_stops_now(self):
        self.check_stops_now(signal.SIGINT)

    def test_port_in_use_fails_to_start(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            srv = self.server(make_config(HELLO_HOSTS), start=False, port=taken.getsockname()[1])
            srv.start(wait=False)
            status = srv.wait_exit()
            self.assertIsNotNone(status, "scalwsd did not exit although its port is taken")
            self.assertNotEqual(status, 0)
            self.assertIn(str(srv.port), srv.log())


def real_uid(pid):
    """The real uid from /proc/PID/status (the /proc/PID files belong to
    root once a process changed its credentials), or None if gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class SupervisorDeath(ServerTestCase):
    # Linux clears the parent-death signal when credentials change: a worker
    # that dropped privileges must set it again, or it outlives a supervisor
    # killed with -9 and keeps serving with nobody to restart or stop it.
    def test_worker_with_dropped_privileges_exits_with_supervisor(self):
        if os.geteuid() != 0:
            self.skipTest("dropping privileges needs root")
        srv = self.server(make_config(HELLO_HOSTS, "user: nobody"))
        worker = srv.wait_workers(1)[0]
        poll(lambda: real_uid(worker) not in (None, 0), what="the worker to drop privileges")
        os.kill(srv.pid, signal.SIGKILL)
        poll(lambda: process_state(worker) in (None, "Z"),
             what="the worker to exit after its supervisor")
