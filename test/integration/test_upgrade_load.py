"""Issue 11, "What it must show" 1 and 3: reloads and binary upgrades under
a fixed-rate load (loadgen.py: HTTP/1.1 keep-alive, a new connection per
request, HTTP/2 over TLS; through a respond route and a proxy route to
backend.py) fail no request, reset or refuse no connection, and move
neither ListenOverflows nor ListenDrops; a WebSocket and a slow 100 MiB
download opened before an upgrade complete after it.

Each run happens in a forked child in a network namespace of its own
(loadgen.in_own_netns), so the kernel's listen counters are this run's
alone; the child is a child subreaper, so a supervisor started by an
upgrade (and orphaned when its predecessor exits) is reaped by it. The
parent asserts on what the child reports.

The upgrade interface (issue 11, branch upg): SIGUSR2 makes the supervisor
start the binary at the path it was started from; the log says
"upgrade: pid N ready, old workers draining" when the new one serves, or
"upgrade failed: WHY; still serving"; server.pid_file names the serving
supervisor (FILE.oldbin the old one while both run). The two builds differ
by their Server header under `server_tokens: build` (branch upops, with
build/scalwsd-alt). Keys a build does not know yet are left out (said in
the output), so that before those branches are merged the upgrade tests
fail at their first upgrade, for that reason only.
"""

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

from backend import Backend, ws_frame, ws_read_frame
from harness import Client, Server, TIMEOUT, binary, free_port, poll, process_state, scale
from loadgen import format_summary, in_own_netns, listen_counters
from test_admin import admin_request
from test_loadgen import load_certs, load_config, start_load
from test_process import SlowDownload, write_big_file
from test_tunnel import _ClientReader, ws_handshake

RELOADS = 50
UPGRADES = 10
WORKERS = 2
REQUESTS_PER_GENERATION = 9
RUN_LIMIT = scale(100)  # the child's bound; run.py's per-test bound is 120 s
# The issue wants the new build serving within 2 s of the SIGUSR2; timing
# does not decide a verdict here, this only catches a switch that never comes.
SWITCH_BOUND = scale(10)
DOWNLOAD_SIZE = 100 * 1024 * 1024
PR_SET_CHILD_SUBREAPER = 36


def generation_routes(k):
    """Reload k changes "/"'s body ("gen k", in load_config) and, every
    other time, a route: /alt exists when k is odd."""
    if k % 2 == 0:
        return ""
    return ('      - path: /alt\n'
            '        match: exact\n'
            '        respond: {status: 200, body: "alt %d"}\n' % k)


class Run:
    """What a run in the child sets up: a backend, certificates, a server
    with its admin socket in its dir; close() stops them all."""

    def __init__(self, server_lines="", routes="", exe=None, files=False):
        self.backend = Backend("app")
        self.ws = None
        self.tls_port = free_port()
        self.server_lines = server_lines
        self.extra_routes = routes
        self.srv = UpgradableServer(self.config(0), exe)
        self.admin = os.path.join(self.srv.dir, "run", "admin.sock")
        self.ctx = load_certs(self.srv.dir)

    def config(self, k):
        return load_config(self.tls_port, self.backend.address, body="gen %d" % k,
                           server=self.server_lines +
                           '  admin: {listen: ["@DIR@/run/admin.sock"]}\n',
                           routes=generation_routes(k) + self.extra_routes)

    def start(self):
        self.srv.start()
        self.srv.wait_ready(port=self.tls_port)
        poll(lambda: os.path.exists(self.admin), what="the admin socket")
        self.wait_generation(0)

    def status(self):
        code, _, body = admin_request(self.admin, "GET", "/v1/status")
        if code != 200:
            raise AssertionError("GET /v1/status: %d %r" % (code, body))
        return body

    def wait_generation(self, above):
        """Poll the admin API until a generation above `above` is published
        and every worker holds it; returns it."""
        def adopted():
            st = self.status()
            gens = {w["generation"] for w in st["workers"]}
            return (st["generation"] if st["generation"] > above and len(st["workers"]) == WORKERS
                    and gens == {st["generation"]} else None)
        return poll(adopted, interval=0.002,
                    what=lambda: "every worker on a generation above %d: %r" % (above, self.status()))

    def reload(self, k, pid):
        """Reload k through SIGHUP to pid; waits until every worker holds
        the new generation."""
        before = self.status()["generation"]
        self.srv.write_config(self.config(k))
        os.kill(pid, signal.SIGHUP)
        return self.wait_generation(before)

    def close(self):
        try:
            self.srv.stop_all()
        finally:
            self.backend.stop()
            if self.ws is not None:
                self.ws.stop()
            shutil.rmtree(self.srv.dir, ignore_errors=True)


class UpgradableServer(Server):
    """A Server started from a copy of the binary in its own dir (so a test
    can replace it, by rename, between upgrades), that follows its
    supervisor across upgrades through server.pid_file."""

    def __init__(self, config_text, exe=None):
        super().__init__(config_text)
        self.exe = exe
        self.pid_file = os.path.join(self.dir, "scalws.pid")
        self.current = None  # the serving supervisor's pid
        self.upgrades = 0

    def install(self, source):
        """Put source at the started path: copied beside it, then renamed
        over it, so a running binary is never written to."""
        tmp = self.exe + ".new"
        shutil.copy2(source, tmp)
        os.rename(tmp, self.exe)

    def start(self, wait=True):
        with open(self.out_path, "ab") as out:
            self.spawn([self.exe or binary(), "-c", self.config_path], stdout=out, cwd=self.dir)
        self.current = self.pid
        if wait:
            self.wait_ready()
        return self

    def upgrade(self):
        """SIGUSR2 to the serving supervisor; returns (time of the signal,
        old pid, new pid) once the new one says it is ready and the pid
        file names it. An AssertionError naming the cause otherwise."""
        old = self.current
        ready = re.compile(r"upgrade: pid (\d+) ready, old workers draining")
        failed = re.compile(r"upgrade failed: (.*); still serving")
        seen_ready = len(ready.findall(self.log()))
        seen_failed = len(failed.findall(self.log()))
        t = time.monotonic()
        os.kill(old, signal.SIGUSR2)

        def done():
            log = self.log()
            fails = failed.findall(log)
            if len(fails) > seen_failed:
                raise AssertionError("upgrade %d failed: %s" % (self.upgrades + 1, fails[-1]))
            if process_state(old) in (None, "Z") and len(ready.findall(log)) == seen_ready:
                raise AssertionError("the supervisor %d exited on SIGUSR2 without an upgrade:\n%s"
                                     % (old, self.log_tail()))
            pids = ready.findall(log)
            return int(pids[-1]) if len(pids) > seen_ready else None
        new = poll(done, timeout=SWITCH_BOUND, what=lambda: "upgrade %d: no \"upgrade: pid N ready\" "
                   "line from the supervisor %d (SIGUSR2 needs issue 11's upgrade); log tail:\n%s"
                   % (self.upgrades + 1, old, self.log_tail()))
        poll(lambda: self.pid_file_names() == new, what=lambda: "the pid file to name %d (it has %r)"
             % (new, self.pid_file_names()))
        self.current = new
        self.upgrades += 1
        return t, old, new

    def pid_file_names(self):
        try:
            with open(self.pid_file) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return None

    def wait_gone(self, pid, timeout=TIMEOUT):
        """Wait until pid exits; its exit status. The first supervisor is
        the harness's child (left to it to reap); the later ones are ours
        as the child subreaper."""
        if pid == self.pid:
            status = self.wait_exit(timeout)
            if status is None:
                raise AssertionError("the old supervisor %d still runs after %.0fs" % (pid, timeout))
            return status

        def reaped():
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return ("gone", None) if process_state(pid) is None else None
            return ("exited", os.waitstatus_to_exitcode(status)) if got == pid else None
        return poll(reaped, timeout=timeout,
                    what="the old supervisor %d to exit" % pid)[1]

    def stop_all(self):
        """Stop the serving supervisor (gracefully, then the harness's way:
        the whole process group, which upgrades keep), then the first."""
        if self.current is not None and self.current != self.pid:
            try:
                os.kill(self.current, signal.SIGTERM)
                self.wait_gone(self.current)
            except (ProcessLookupError, AssertionError):
                pass
        self.stop()


def accepted_keys(srv, text, keys):
    """The lines of keys (server-block YAML lines) that srv's binary
    accepts (`-t`) beside text's server block; the others are printed as
    left out."""
    tmp = os.path.join(srv.dir, "probe.yaml")

    def check(line):
        with open(tmp, "w") as f:
            f.write(srv.expand(text.replace("server:\n", "server:\n" + line, 1)))
        p = subprocess.run([srv.exe, "-t", "-c", tmp], capture_output=True, timeout=TIMEOUT,
                           cwd=srv.dir)
        return p.returncode == 0, (p.stdout.decode().strip() or p.stderr.decode().strip())
    ok, why = check("")
    if not ok:
        raise AssertionError("the test's configuration is refused: %s" % why)
    out = []
    for line in keys:
        ok, why = check(line)
        if ok:
            out.append(line)
        else:
            sys.stdout.write("    left out %r: %s\n" % (line.strip(), why))
    os.unlink(tmp)
    return "".join(out)


def server_header(port):
    """The Server header of "/" on a new connection."""
    with Client(port) as c:
        return c.get("/").header("Server")


def become_subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def finish(run, gen, counters_before, extra):
    """The child's report: the load's summary, the listen counters' moves,
    sanitizer reports, plus extra."""
    after = listen_counters()
    out = {"load": gen.summary() if gen else None,
           "overflows": after[0] - counters_before[0], "drops": after[1] - counters_before[1],
           "sanitizer": run.srv.sanitizer_errors()[:5], "log": run.srv.log_tail(15)}
    out.update(extra)
    return out


def reloads_under_load():
    """Part one: RELOADS reloads under the load."""
    run = Run()
    gen = None
    try:
        run.start()
        before = listen_counters()
        gen = start_load(run.srv, run.tls_port, run.ctx, rate=90, seconds=scale(90))
        gen.wait_requests(60, timeout=scale(10))
        t0 = time.monotonic()
        for k in range(1, RELOADS + 1):
            run.reload(k, run.srv.pid)
            # Each generation serves a few requests before the next.
            gen.wait_requests(gen.ended() + REQUESTS_PER_GENERATION, timeout=scale(10))
        took = time.monotonic() - t0
        n = len(gen.records)
        gen.wait_requests(n + 60, timeout=scale(10))
        gen.stop()
        bodies = sorted({r.body.decode() for r in gen.records if r.url == "/" and r.outcome == "ok"})
        with Client(run.srv.port) as c:
            alt = c.get("/alt")
        return finish(run, gen, before, {"took": took, "bodies": bodies, "workers":
                                         run.srv.worker_pids(), "alt": alt.body.decode()})
    finally:
        if gen is not None:
            gen.close()
        run.close()


def upgrades_under_load():
    """Part two: UPGRADES upgrades, alternating the two builds, with
    RELOADS reloads between them, under the load."""
    become_subreaper()
    builds = [binary(), os.path.join(os.path.dirname(binary()), "scalwsd-alt")]
    run = Run()
    run.srv.exe = os.path.join(run.srv.dir, "scalwsd")
    run.srv.install(builds[0])
    run.server_lines = accepted_keys(run.srv, run.config(0), [
        "  pid_file: @DIR@/scalws.pid\n", "  server_tokens: build\n", "  upgrade_timeout: %ds\n" % scale(30)])
    run.srv.write_config(run.config(0))
    gen = None
    switches = []
    try:
        if not os.access(builds[1], os.X_OK):
            raise AssertionError("%s is missing (the second build, issue 11)" % builds[1])
        run.start()
        headers = [server_header(run.srv.port), None]  # builds[0]'s, builds[1]'s
        before = listen_counters()
        gen = start_load(run.srv, run.tls_port, run.ctx, rate=90, seconds=scale(100),
                         max_requests=100000)
        gen.wait_requests(30, timeout=scale(10))
        k = 0
        for i in range(1, UPGRADES + 1):
            for _ in range(RELOADS // UPGRADES):
                k += 1
                run.reload(k, run.srv.current)
                gen.wait_requests(gen.ended() + REQUESTS_PER_GENERATION, timeout=scale(10))
            run.srv.install(builds[i % 2])
            t, old, new = run.srv.upgrade()

            def switched():
                for r in sorted((r for r in gen.records if r.outcome == "ok" and r.start >= t),
                                key=lambda r: r.end):
                    if r.server != headers[(i + 1) % 2] and (headers[i % 2] in (None, r.server)):
                        return r
                return None
            first = poll(switched, timeout=SWITCH_BOUND,
                         what=lambda: "a response from the new build (Server other than %r): %s"
                         % (headers[(i + 1) % 2], format_summary(gen.summary())))
            headers[i % 2] = first.server
            status = run.srv.wait_gone(old, timeout=scale(30))
            gone = time.monotonic()
            stale = [r.server for r in gen.records
                     if r.outcome == "ok" and r.start > gone and r.server != first.server]
            switches.append({"upgrade": i, "old": old, "new": new, "server": first.server,
                             "first_new_s": round(first.end - t, 3), "old_exit": status,
                             "stale_after_exit": stale[:3]})
        n = len(gen.records)
        gen.wait_requests(n + 30, timeout=scale(10))
        gen.stop()
        return finish(run, gen, before, {"switches": switches, "headers": headers})
    finally:
        if gen is not None:
            gen.close()
        run.close()


def download_and_websocket_across_upgrade():
    """Part three: a WebSocket through the proxy and a slow 100 MiB
    download, both opened before an upgrade, complete after it, while the
    new build already answers new requests."""
    become_subreaper()
    run = Run(routes=('      - path: /ws\n        proxy: {pool: ws}\n'
                      '      - path: /files/\n        static: {root: www}\n'))
    run.ws = Backend("ws", "websocket")
    run.srv.exe = os.path.join(run.srv.dir, "scalwsd")
    run.srv.install(binary())
    digest = write_big_file(os.path.join(run.srv.dir, "www", "files"), size=DOWNLOAD_SIZE)
    ws_pool = '  - name: ws\n    members: ["%s"]\n' % run.ws.address
    run.server_lines = accepted_keys(run.srv, run.config(0) + ws_pool, [
        "  pid_file: @DIR@/scalws.pid\n", "  server_tokens: build\n"])
    run.srv.write_config(run.config(0) + ws_pool)
    try:
        alt = os.path.join(os.path.dirname(binary()), "scalwsd-alt")
        if not os.access(alt, os.X_OK):
            raise AssertionError("%s is missing (the second build, issue 11)" % alt)
        run.start()
        old_server = server_header(run.srv.port)
        dl = SlowDownload(run.srv.port, path="/files/big.bin", size=DOWNLOAD_SIZE)
        dl.read(1 << 20)
        ws = Client(run.srv.port)
        r, _ = ws_handshake(ws, "/ws")
        if r.status != 101:
            raise AssertionError("WebSocket handshake: %r" % r)
        reader = _ClientReader(ws)
        ws.send(ws_frame(1, b"before", mask=b"abcd"))
        before_msg = ws_read_frame(reader)
        run.srv.install(alt)
        t, old, new = run.srv.upgrade()
        # New requests reach the new build while both are still open.
        new_server = poll(lambda: (lambda s: s if s != old_server else None)(
            server_header(run.srv.port)), timeout=SWITCH_BOUND,
            what="a Server header other than %r" % old_server)
        old_alive = process_state(old) not in (None, "Z")
        ws.send(ws_frame(1, b"after", mask=b"abcd"))
        after_msg = ws_read_frame(reader)
        ws.send(ws_frame(8, b"\x03\xe8", mask=b"abcd"))
        close_msg = ws_read_frame(reader)
        ws_closed = ws.wait_closed()
        ws.close()
        got = dl.read(DOWNLOAD_SIZE)
        dl.close()
        status = run.srv.wait_gone(old, timeout=scale(30))
        return {"old_server": old_server, "new_server": new_server, "old_alive": old_alive,
                "messages": [before_msg[1].decode(), after_msg[1].decode()],
                "close": list(close_msg[1]), "ws_closed": ws_closed, "received": got,
                "digest_ok": dl.digest.hexdigest() == digest, "old_exit": status,
                "took": round(time.monotonic() - t, 2),
                "sanitizer": run.srv.sanitizer_errors()[:5], "log": run.srv.log_tail(15)}
    finally:
        run.close()


class UnderLoad(unittest.TestCase):
    def in_netns(self, fn):
        if os.geteuid() != 0:
            self.skipTest("needs root for a network namespace of its own")
        out = in_own_netns(fn, limit=RUN_LIMIT)
        if "skip" in out:
            self.skipTest(out["skip"])
        self.assertEqual(out["sanitizer"], [], out["log"])
        return out

    def assert_clean_load(self, out):
        s = out["load"]
        sys.stdout.write(format_summary(s) + "\n    ListenOverflows +%d, ListenDrops +%d\n"
                         % (out["overflows"], out["drops"]))
        sys.stdout.flush()
        self.assertEqual(s["failed"], 0, format_summary(s))
        for kind, counts in s["counts"].items():
            self.assertGreater(counts["ok"], 0, kind)
        self.assertEqual((out["overflows"], out["drops"]), (0, 0),
                         "listen queue overflows / drops")

    def test_reloads(self):
        out = self.in_netns(reloads_under_load)
        sys.stdout.write("    %d reloads in %.1fs\n" % (RELOADS, out["took"]))
        self.assert_clean_load(out)
        # The load saw the reloads: "/" answered with many generations.
        self.assertIn("gen %d" % RELOADS, out["bodies"])
        self.assertGreater(len(out["bodies"]), RELOADS // 5, out["bodies"])
        # /alt is gone after the last (even) reload: "/" answers it.
        self.assertEqual(out["alt"], "gen %d" % RELOADS)
        self.assertEqual(len(out["workers"]), WORKERS)

    def test_upgrades(self):
        out = self.in_netns(upgrades_under_load)
        for sw in out["switches"]:
            sys.stdout.write("    upgrade %(upgrade)d: %(old)d -> %(new)d, Server %(server)r "
                             "after %(first_new_s).3fs, old exit %(old_exit)s\n" % sw)
        self.assert_clean_load(out)
        self.assertEqual(len(out["switches"]), UPGRADES)
        self.assertNotEqual(out["headers"][0], out["headers"][1], "the two builds look alike")
        for sw in out["switches"]:
            self.assertEqual(sw["server"], out["headers"][sw["upgrade"] % 2], sw)
            self.assertEqual(sw["old_exit"], 0, sw)
            self.assertEqual(sw["stale_after_exit"], [], sw)
            self.assertLess(sw["first_new_s"], SWITCH_BOUND, sw)

    def test_websocket_and_download_across_upgrade(self):
        out = self.in_netns(download_and_websocket_across_upgrade)
        sys.stdout.write("    new build serving while a WebSocket and a %d MiB download were open"
                         " (old supervisor %s); both done %.1fs after SIGUSR2\n"
                         % (DOWNLOAD_SIZE >> 20, "still running" if out["old_alive"] else "gone",
                            out["took"]))
        self.assertNotEqual(out["new_server"], out["old_server"])
        self.assertEqual(out["messages"], ["before", "after"])
        self.assertEqual(out["close"], [3, 0xe8])
        self.assertTrue(out["ws_closed"])
        self.assertEqual(out["received"], DOWNLOAD_SIZE)
        self.assertTrue(out["digest_ok"], "the download's bytes differ from the file's")
        self.assertEqual(out["old_exit"], 0)


if __name__ == "__main__":
    unittest.main()
