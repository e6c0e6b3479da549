"""Binary upgrade and its rollback (issue 11; docs/operations.md, "Binary
upgrade"; docs/adr/0046-binary-upgrade.md).

Each test starts a copy of the build's scalwsd from its own directory and
replaces that file to upgrade, as an operator replaces the installed
binary. Builds are told apart by the supervisor's pid and its `upgrade:`
log lines; the pid file (server.pid_file) follows the upgrade, so the tests
track the running supervisor by it (the new one is not the harness's child).
"""

import os
import re
import shutil
import signal
import subprocess
import threading
import time
import unittest

from backend import Backend
from certs import make_pair
from harness import (HELLO_BODY, HELLO_HOSTS, TIMEOUT, Client, ServerTestCase, binary, make_config, poll,
                     process_state, scale)
from test_admin import admin_request

PROXY_HOSTS = """
- name: "*"
  routes:
    - {path: /app/, proxy: {pool: app}}
    - path: /
      respond: {status: 200, headers: {Content-Type: text/plain}, body: "hello, world\\n"}
"""


def pool(member):
    return ("pools:\n  - name: app\n    retries: 0\n    members:\n      - \"%s\"\n" % member)


def gone(pid):
    """Exited: no such process, or a zombie (the old supervisor is the
    harness's child, reaped only at its stop)."""
    return process_state(pid) in (None, "Z")


def replace_file(path, data=None, source=None, mode=0o755):
    """Put a new file at path the way an installer does (write aside, then
    rename): the running binary's file is never written in place."""
    tmp = path + ".new"
    if source is not None:
        shutil.copyfile(source, tmp)
    else:
        with open(tmp, "w") as f:
            f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class Load(threading.Thread):
    """GET / on a new connection each time, until stop(); counts failures.
    Bounded by `seconds` and by a count."""

    def __init__(self, port, seconds=scale(60)):
        super().__init__(daemon=True)
        self.port = port
        self.seconds = seconds
        self.stopping = threading.Event()
        self.ok = 0
        self.failures = []

    def run(self):
        deadline = threading.Event()
        timer = threading.Timer(self.seconds, deadline.set)
        timer.start()
        try:
            for _ in range(1000000):
                if self.stopping.is_set() or deadline.is_set():
                    break
                try:
                    with Client(self.port, timeout=TIMEOUT) as c:
                        r = c.get("/")
                        if r.status == 200 and r.body == HELLO_BODY:
                            self.ok += 1
                        else:
                            self.failures.append("status %d" % r.status)
                except OSError as e:
                    self.failures.append(repr(e))
        finally:
            timer.cancel()

    def stop(self):
        self.stopping.set()
        self.join(TIMEOUT)
        return self.ok, self.failures


class UpgradeTestCase(ServerTestCase):
    def start_copy(self, hosts=HELLO_HOSTS, extra="", tail="", loops=2, tls=False,
                   upgrade_timeout="2s"):
        """A server started from a copy of the binary in its directory, with
        a pid file, a 2 s upgrade timeout and the admin API on a Unix
        socket (tls: its listener is TLS, with a certificate made here)."""
        server = ("event_loops: %d\npid_file: @DIR@/scalws.pid\nupgrade_timeout: %s\n"
                  "admin: {listen: [\"@DIR@/run/admin.sock\"]}\n%s"
                  % (loops, upgrade_timeout, extra))
        text = make_config(hosts, server=server) + tail
        if tls:
            text = text.replace('  listen: "127.0.0.1:@PORT@"\n',
                                '  listen: [{address: "127.0.0.1:@PORT@", tls: true}]\n')
        srv = self.server(text, start=False)
        srv.bin = os.path.join(srv.dir, "scalwsd")
        replace_file(srv.bin, source=binary())
        srv.exe = srv.bin
        srv.pid_path = os.path.join(srv.dir, "scalws.pid")
        srv.admin = os.path.join(srv.dir, "run", "admin.sock")
        if tls:
            make_pair(srv.dir, "cert", "localhost", kind="ec")
        srv.start()
        poll(lambda: self.pid_in_file(srv) == srv.pid, what="the pid file to name the server")
        poll(lambda: os.path.exists(srv.admin), what="the admin socket")
        return srv

    def tearDown(self):
        # The supervisor an upgrade started is not the harness's: stop it
        # here, gracefully, so its sanitizer report (if any) reaches the log.
        for srv in self.servers:
            pid = self.pid_in_file(srv) if hasattr(srv, "pid_path") else None
            if pid and pid != srv.pid and not gone(pid):
                os.kill(pid, signal.SIGTERM)
                poll(lambda: gone(pid), what="the new supervisor %d to stop" % pid)
        super().tearDown()

    @staticmethod
    def pid_in_file(srv, suffix=""):
        try:
            with open(srv.pid_path + suffix) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def new_line(srv, pattern, seen):
        """The first line matching pattern after the `seen` earlier ones."""
        found = re.findall(pattern, srv.log())
        return found[seen] if len(found) > seen else None

    def wait_new_line(self, srv, pattern, seen):
        return poll(lambda: self.new_line(srv, pattern, seen),
                    what=lambda: "log line %d of /%s/; log:\n%s" % (seen + 1, pattern,
                                                                   srv.log_tail()))

    def upgrade(self, srv, trigger=None):
        """Upgrade (SIGUSR2 to the running supervisor unless trigger does
        it), wait for the take-over and for the old supervisor to exit;
        returns the new pid."""
        old = self.pid_in_file(srv)
        taken = len(re.findall(r"upgrade: took over from pid %d\b" % old, srv.log()))
        if trigger is None:
            os.kill(old, signal.SIGUSR2)
        else:
            trigger()
        self.wait_new_line(srv, r"upgrade: took over from pid %d\b" % old, taken)
        poll(lambda: gone(old), what="the old supervisor %d to exit" % old)
        new = poll(lambda: self.pid_in_file(srv) not in (None, old) and self.pid_in_file(srv),
                   what="the pid file to name the new supervisor")
        self.assertFalse(os.path.exists(srv.pid_path + ".oldbin"))
        self.assertRegex(srv.log(), r"upgrade: started /\S+ as pid %d\n" % new)
        self.assertTrue(srv.answers())
        return new

    def failed_upgrade(self, srv, why):
        """SIGUSR2 under load: the upgrade fails with why (a regex); the old
        supervisor keeps serving every request, and the pid file is back."""
        old = self.pid_in_file(srv)
        load = Load(srv.port)
        load.start()
        poll(lambda: load.ok > 0, what="the load's first answer")
        failed = len(re.findall(r"upgrade failed: .*", srv.log()))
        os.kill(old, signal.SIGUSR2)
        line = self.wait_new_line(srv, r"upgrade failed: .*", failed)
        ok, failures = load.stop()
        self.assertRegex(line, r"upgrade failed: %s; still serving$" % why)
        self.assertEqual(failures, [], "requests failed during the rollback")
        self.assertGreater(ok, 0)
        self.assertEqual(self.pid_in_file(srv), old)
        self.assertFalse(os.path.exists(srv.pid_path + ".oldbin"))
        self.assertFalse(gone(old))
        self.assertTrue(srv.answers())
        started = re.findall(r"upgrade: started \S+ as pid (\d+)", srv.log())[-1]
        poll(lambda: gone(int(started)), what="the refused binary %s to be ended" % started)
        return line


class Upgrade(UpgradeTestCase):
    def test_new_build_takes_over_and_in_flight_request_finishes(self):
        backend = Backend("b", mode="slow", delay=0.1)
        self.addCleanup(backend.stop)
        srv = self.start_copy(hosts=PROXY_HOSTS, tail=pool(backend.address))
        old = srv.pid
        with Client(srv.port) as c:
            r = c.get("/")
            self.assertEqual((r.status, r.body), (200, HELLO_BODY))
            # In flight on the old generation: the backend answers a byte
            # every 0.1 s while the upgrade happens.
            c.send(b"GET /app/slow HTTP/1.1\r\nHost: x\r\n\r\n")
            poll(lambda: backend.count() == 1, what="the request at the backend")
            replace_file(srv.bin, source=binary())  # "another build"
            os.kill(old, signal.SIGUSR2)
            new = int(srv.wait_log(r"upgrade: pid (\d+) ready, old workers draining").group(1))
            r = c.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, b"b GET /app/slow")
            # Then the old worker lets the connection go: Connection: close
            # on that response, or a clean close before the next one.
            if r.header("connection") != "close":
                self.assertTrue(c.wait_closed(), "the drained connection stayed open")
        srv.wait_log(r"upgrade: took over from pid %d\b" % old)
        poll(lambda: gone(old), what="the old supervisor to exit")
        poll(lambda: self.pid_in_file(srv) == new, what="the pid file to name %d" % new)
        self.assertFalse(os.path.exists(srv.pid_path + ".oldbin"))
        self.assertNotEqual(new, old)
        self.assertIn("upgrade: started %s as pid %d" % (srv.bin, new), srv.log())
        # Every answer now comes from the new generation: the old is gone.
        for _ in range(20):
            self.assertTrue(srv.answers())
        # A second upgrade from the upgraded one works the same way.
        third = self.upgrade(srv)
        self.assertNotIn(third, (old, new))

    def test_rollbacks_keep_serving_then_a_good_upgrade_works(self):
        srv = self.start_copy()
        real = srv.bin + ".real"
        replace_file(real, source=binary())
        # A binary that exits at once.
        replace_file(srv.bin, "#!/bin/sh\nexit 3\n")
        self.failed_upgrade(srv, re.escape(srv.bin) + r" exited with status 3 before ready")

        # One that hangs: ended after upgrade_timeout (2 s); a second
        # SIGUSR2 meanwhile is ignored; the pid file waits aside as .oldbin.
        replace_file(srv.bin, "#!/bin/sh\nexec sleep 600\n")
        old = self.pid_in_file(srv)
        failed = len(re.findall(r"upgrade failed: .*", srv.log()))
        os.kill(old, signal.SIGUSR2)
        poll(lambda: os.path.exists(srv.pid_path + ".oldbin"), what="the .oldbin pid file")
        self.assertFalse(os.path.exists(srv.pid_path))
        os.kill(old, signal.SIGUSR2)
        srv.wait_log(r"SIGUSR2: an upgrade is in progress \(pid \d+\); ignored")
        line = self.wait_new_line(srv, r"upgrade failed: .*", failed)
        self.assertRegex(line, re.escape(srv.bin) + r" \(pid \d+\) not ready after 2000 ms")
        self.assertEqual(self.pid_in_file(srv), old)
        self.assertTrue(srv.answers())

        # A configuration the new binary refuses.
        replace_file(srv.bin, source=real)
        good = open(srv.config_path).read()
        srv.write_config(good.replace("server:\n", "server:\n  no_such_key: 1\n", 1))
        self.failed_upgrade(srv, re.escape(srv.bin) + r" exited with status 1 before ready: "
                            r".*server\.no_such_key: unknown key.*")

        # And a listen address the running sockets do not have.
        other = srv.port + 1 if srv.port < 65535 else srv.port - 1
        srv.write_config(good.replace("127.0.0.1:%d" % srv.port, "127.0.0.1:%d" % other))
        self.failed_upgrade(srv, r".*server\.listen is 127\.0\.0\.1:%d here, the running server "
                            r"listens on 127\.0\.0\.1:%d.*" % (other, srv.port))

        srv.write_config(good)
        new = self.upgrade(srv)
        self.assertNotEqual(new, old)

    def test_reload_and_admin_api_work_after(self):
        srv = self.start_copy()
        code, _, body = admin_request(srv.admin, "GET", "/v1/status")
        self.assertEqual(code, 200, body)
        new = self.upgrade(srv)
        # The admin socket file is the same one, served by the new supervisor.
        code, _, body = admin_request(srv.admin, "GET", "/v1/status")
        self.assertEqual(code, 200, body)
        self.assertEqual(len(body["workers"]), 2)
        self.assertEqual(body["generation"], 1)
        text = open(srv.config_path).read()
        srv.write_config(text.replace("hello, world", "hello, again"))
        os.kill(new, signal.SIGHUP)
        srv.wait_answer(body=b"hello, again\n")
        code, _, body = admin_request(srv.admin, "GET", "/v1/status")
        self.assertEqual((code, body["generation"]), (200, 2), body)

    def test_signal_verb_and_admin_endpoint_start_one(self):
        srv = self.start_copy()
        def verb():
            p = subprocess.run([srv.bin, "-s", "upgrade", "-c", srv.config_path],
                               capture_output=True, timeout=TIMEOUT)
            self.assertEqual(p.returncode, 0, p.stderr)
        first = self.upgrade(srv, trigger=verb)

        answers = []
        second = self.upgrade(srv, trigger=lambda: answers.append(
            admin_request(srv.admin, "POST", "/v1/upgrade", body="{}")))
        code, _, body = answers[0]
        self.assertEqual((code, body), (202, {"pid": second}))
        self.assertNotEqual(first, second)

        # One in progress (a binary that hangs): a second POST is refused.
        real = srv.bin + ".real"
        replace_file(real, source=binary())
        replace_file(srv.bin, "#!/bin/sh\nexec sleep 600\n")
        code, _, body = admin_request(srv.admin, "POST", "/v1/upgrade")
        self.assertEqual(code, 202, body)
        code, _, body = admin_request(srv.admin, "POST", "/v1/upgrade")
        self.assertEqual(code, 409, body)
        self.assertIn("in progress", body["error"])
        srv.wait_log(r"not ready after 2000 ms; still serving")
        third = self.upgrade(srv, trigger=lambda: answers.append(
            admin_request(srv.admin, "POST", "/v1/upgrade", body='{"binary": "%s"}' % real)))
        self.assertEqual(answers[-1][0], 202, answers[-1])
        self.assertIn("upgrade: started %s as pid %d" % (real, third), srv.log())

    def test_signal_verb_errors(self):
        srv = self.start_copy()
        text = open(srv.config_path).read()
        nopid = os.path.join(srv.dir, "nopid.yaml")
        with open(nopid, "w") as f:
            f.write(re.sub(r"\n *pid_file: .*\n", "\n", text))
        p = subprocess.run([srv.bin, "-s", "reload", "-c", nopid], capture_output=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"sets no server.pid_file", p.stderr)
        p = subprocess.run([srv.bin, "-s", "bounce", "-c", srv.config_path],
                           capture_output=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 2)
        # A pid file naming a process that is gone (one we started and reaped).
        child = subprocess.Popen(["true"])
        child.wait(TIMEOUT)
        dead = os.path.join(srv.dir, "dead.pid")
        with open(dead, "w") as f:
            f.write("%d\n" % child.pid)
        stale = os.path.join(srv.dir, "stale.yaml")
        with open(stale, "w") as f:
            f.write(text.replace(srv.pid_path, dead))
        p = subprocess.run([srv.bin, "-s", "quit", "-c", stale], capture_output=True,
                           timeout=TIMEOUT)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"pid %d from %s: not running" % (child.pid, dead.encode()), p.stderr)
        # reload through the verb
        srv.write_config(text.replace("hello, world", "hello, verb"))
        p = subprocess.run([srv.bin, "-s", "reload", "-c", srv.config_path],
                           capture_output=True, timeout=TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        srv.wait_answer(body=b"hello, verb\n")


# A "new binary" that runs the real one behind a relay of the hand-off
# socket: the old supervisor's messages (and their descriptors) go through,
# the new one's never come back, so READY is lost and the old one gives up.
SWALLOW_READY = r"""#!/usr/bin/python3
import os, select, socket, sys
up = socket.socket(fileno=int(os.environ["SCALWS_UPGRADE_FD"]))
mine, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
if os.fork() == 0:
    up.close()
    mine.close()
    os.set_inheritable(child.fileno(), True)
    os.environ["SCALWS_UPGRADE_FD"] = str(child.fileno())
    os.execv(sys.argv[0] + ".real", [sys.argv[0] + ".real"] + sys.argv[1:])
child.close()
for _ in range(100000):
    ready, _, _ = select.select([up, mine], [], [], 60)
    if not ready:
        break
    if up in ready:
        msg, fds, _, _ = socket.recv_fds(up, 4096, 64)
        if not msg:
            break
        socket.send_fds(mine, [msg], fds)
        for fd in fds:
            os.close(fd)
    if mine in ready and not mine.recv(4096):
        break
"""


def socket_inodes(pid):
    """The inodes of the sockets process pid holds."""
    found = set()
    try:
        for name in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, name))
            except OSError:
                continue
            if link.startswith("socket:["):
                found.add(int(link[8:-1]))
    except OSError:
        pass
    return found


def established_inodes(port):
    """The inodes of the server ends of established TCP connections on
    127.0.0.1:port (/proc/net/tcp: local address, state 01)."""
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].split(":")[1], 16) == port:
                found.add(int(fields[9]))
    return found


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class Standby(UpgradeTestCase):
    def test_a_rolled_back_generation_accepted_nothing(self):
        """Workers of a new binary that never hears GO accept nothing: the
        connections made while they stand by are all the old workers'. And
        until GO the old supervisor serves the admin API and refuses a
        reload, taken once it rolled back."""
        srv = self.start_copy(upgrade_timeout="5s")
        replace_file(srv.bin + ".real", source=binary())
        replace_file(srv.bin, SWALLOW_READY)
        old = srv.pid
        old_workers = srv.wait_workers(2)
        os.kill(old, signal.SIGUSR2)
        new = int(srv.wait_log(r"supervisor\[(\d+)\]: upgrade: workers ready; waiting for pid "
                               r"%d's GO" % old).group(1))
        new_workers = poll(lambda: len(children(new)) == 2 and children(new),
                           what="the new binary's two workers")
        # The old workers are stopped while the connections come: only a
        # standby worker that wrongly accepts could take them now.
        for p in old_workers:
            os.kill(p, signal.SIGSTOP)
        clients = []
        try:
            try:
                for _ in range(16):
                    c = Client(srv.port)
                    clients.append(c)
                    c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                taken = set()
                # Bounded: 50 looks over about a second; a wrong accept shows
                # within milliseconds, a right standby never.
                for _ in range(50):
                    taken = set().union(*(socket_inodes(p) for p in new_workers))
                    taken &= established_inodes(srv.port)
                    if taken:
                        break
                    time.sleep(0.02)
                self.assertEqual(taken, set(), "a standby worker accepted")
            finally:
                for p in old_workers:
                    os.kill(p, signal.SIGCONT)
            for c in clients:
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, HELLO_BODY))
            held_old = set().union(*(socket_inodes(p) for p in old_workers))
            self.assertEqual(len(held_old & established_inodes(srv.port)), 16)
            # Meanwhile the old supervisor serves the admin API (the new
            # one serves it only after GO) and refuses a reload: the new
            # binary took the routes as they were, a change would be lost
            # at GO (docs/operations.md, "Binary upgrade").
            code, _, body = admin_request(srv.admin, "GET", "/v1/status")
            self.assertEqual((code, body["generation"]), (200, 1), body)
            srv.write_config(open(srv.config_path).read().replace("hello, world", "hello, hup"))
            os.kill(old, signal.SIGHUP)
            srv.wait_log(r"supervisor\[%d\]: SIGHUP: an upgrade to pid \d+ is in progress" % old)
            self.assertTrue(srv.answers())
            line = srv.wait_log(r"upgrade failed: .*; still serving").group(0)
            self.assertIn("not ready after 5000 ms", line)
            # Rolled back: the reload sent again is taken.
            os.kill(old, signal.SIGHUP)
            srv.wait_answer(body=b"hello, hup\n")
            for c in clients:
                r = c.get("/")
                self.assertEqual((r.status, r.body), (200, b"hello, hup\n"))
        finally:
            for c in clients:
                c.close()
        # The relay died with the rollback: the new supervisor hears its
        # socket close and stops.
        srv.wait_log(r"upgrade: pid %d gave up before GO; stopping" % old)
        poll(lambda: gone(new), what="the abandoned new supervisor to exit")
        self.assertEqual(self.pid_in_file(srv), old)


TLS_HOSTS = """
- name: "*"
  routes:
    - path: /
      respond: {status: 200, body: "hello, tls\\n"}
"""


class UpgradeTls(UpgradeTestCase):
    def test_session_from_before_resumes_after(self):
        if shutil.which("openssl") is None:
            self.skipTest("no openssl command")
        extra = ('tls:\n  default_certificate: {cert: "@DIR@/cert.crt", '
                 'key: "@DIR@/cert.key"}\n')
        srv = self.start_copy(hosts=TLS_HOSTS, extra=extra, tls=True)
        session = os.path.join(srv.dir, "session.pem")
        self.assertFalse(self.s_client(srv, sess_out=session))
        self.assertTrue(self.s_client(srv, sess_in=session))
        self.upgrade_tls(srv)
        for i in range(4):
            self.assertTrue(self.s_client(srv, sess_in=session),
                            "connection %d after the upgrade did not resume" % i)

    def upgrade_tls(self, srv):
        old = self.pid_in_file(srv)
        os.kill(old, signal.SIGUSR2)
        srv.wait_log(r"upgrade: took over from pid %d\b" % old)
        poll(lambda: gone(old), what="the old supervisor to exit")

    def s_client(self, srv, sess_in=None, sess_out=None):
        cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % srv.port,
               "-servername", "localhost", "-ign_eof"]
        if sess_in:
            cmd += ["-sess_in", sess_in]
        if sess_out:
            cmd += ["-sess_out", sess_out]
        p = subprocess.run(cmd, input=b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                           capture_output=True, timeout=TIMEOUT)
        out = p.stdout.decode("utf-8", "replace")
        self.assertIn("hello, tls", out, out + p.stderr.decode("utf-8", "replace"))
        return "Reused," in out


@unittest.skipUnless(os.geteuid() == 0, "needs root to load BPF")
class UpgradeEbpf(UpgradeTestCase):
    def test_least_loaded_upgrade_serves_from_the_new_workers(self):
        srv = self.start_copy(extra="accept_policy: least-loaded\n")
        if "falling back to reuseport" in srv.log():
            self.skipTest("eBPF cannot load here: " + srv.log_tail(3))
        load = Load(srv.port)
        load.start()
        poll(lambda: load.ok > 0, what="the load's first answer")
        new = self.upgrade(srv)
        before = load.ok
        poll(lambda: load.ok > before + 50, what="50 answers after the take-over")
        ok, failures = load.stop()
        self.assertEqual(failures, [])
        self.assertNotIn("falling back to reuseport", srv.log())
        # The new workers accepted them: their counters in the new
        # supervisor's GET /v1/status.
        code, _, body = admin_request(srv.admin, "GET", "/v1/status")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["accept_policy"], "least-loaded")
        self.assertGreaterEqual(sum(w["connections_accepted"] for w in body["workers"]), 50)
        self.assertNotEqual(new, srv.pid)


if __name__ == "__main__":
    unittest.main()
