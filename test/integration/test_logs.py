"""The logs as an operator and an attacker meet them: request bytes that
reach the error log cannot forge a line, a destination that stops reading
never stops a worker, the supervisor opens every log file (so a worker
without the right to open them still logs), SIGUSR1 reopens them."""

import fcntl
import os
import re
import signal
import subprocess

from harness import (HELLO_BODY, HELLO_HOSTS, LIVE_SERVERS, Client, Server, ServerTestCase,
                     binary, make_config, poll, request, static_hosts)


def read_text(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def access_lines(path, marker):
    """The access-log lines of requests to /marker..., in order."""
    return [l for l in read_text(path).splitlines() if ('"GET /%s' % marker) in l]


def get_all(srv, paths):
    """One keep-alive connection, a GET per path, each answered 200."""
    with Client(srv.port) as c:
        for p in paths:
            r = c.get(p)
            if r.status != 200:
                raise AssertionError("%s -> %r" % (p, r))


F_GETPIPE_SZ = 1032  # linux/fcntl.h


class LaunchedServer(Server):
    """A Server started as the harness does not: from another working
    directory (systemd uses /), or with standard output or error a pipe
    that nobody reads (a stuck docker log driver, `| logger` stopped);
    pipe_r is then its read end, never read unless a test does."""

    def __init__(self, config_text, cwd=None, unread_pipe=None):
        super().__init__(config_text)
        self.cwd = cwd or self.dir
        self.unread_pipe = unread_pipe  # None, "stdout" or "stderr"
        self.pipe_r = None

    def start(self, wait=True):
        w = None
        if self.unread_pipe:
            self.pipe_r, w = os.pipe()
        with open(self.err_path, "ab") as err, open(self.out_path, "ab") as out:
            streams = {"stdout": out, "stderr": err}
            if w is not None:
                streams[self.unread_pipe] = w
            self.proc = subprocess.Popen(
                [binary(), "-c", self.config_path], stdin=subprocess.DEVNULL,
                stdout=streams["stdout"], stderr=streams["stderr"], cwd=self.cwd,
                start_new_session=True)
        if w is not None:
            os.close(w)
        LIVE_SERVERS.add(self)
        if wait:
            self.wait_ready()
        return self


class ErrorLogEscaping(ServerTestCase):
    def test_request_bytes_cannot_forge_error_log_lines(self):
        srv = self.server(make_config(static_hosts()), start=False)
        www = os.path.join(srv.dir, "www")
        os.makedirs(www)
        # Names that lead out of the root through a symlink: the refusal
        # logs the decoded path (at info, the default level).
        forged = "a\n2026-01-01T00:00:00.000Z [crit] supervisor[1]: forged"
        os.symlink("/etc/hostname", os.path.join(www, forged))
        os.symlink("/etc/hostname", os.path.join(www, "b\x1b[2Jc"))
        srv.start()
        with Client(srv.port) as c:
            r = c.get("/a%0a2026-01-01T00:00:00.000Z%20[crit]%20supervisor[1]:%20forged")
            self.assertEqual(r.status, 403)
            r = c.get("/b%1b[2Jc")
            self.assertEqual(r.status, 403)
        srv.wait_log(r"b\\x1b\[2Jc")
        srv.wait_log(r"a\\x0a2026-01-01T00:00:00\.000Z \[crit\] supervisor\[1\]: forged")
        with open(srv.err_path, "rb") as f:
            raw = f.read()
        self.assertNotIn(b"\x1b", raw)
        for line in raw.splitlines():
            self.assertFalse(line.startswith(b"2026-01-01T"), line)


class BlockedLogDestination(ServerTestCase):
    CONNECTIONS = 30
    PIPELINED = 100  # requests per connection, sent at once

    def test_unread_stdout_pipe_never_stops_the_worker(self):
        srv = LaunchedServer(make_config(HELLO_HOSTS, server='logging: {access_log_path: "-"}'),
                             unread_pipe="stdout")
        self.servers.append(srv)
        srv.start()
        self.addCleanup(os.close, srv.pipe_r)
        # ~300 bytes per line: 3,000 lines are far more than the pipe (64 KiB)
        # and the worker's buffer (64 KiB) hold.
        ua = ("User-Agent", "x" * 200)
        batch = request("GET", "/", headers=[ua]) * self.PIPELINED
        answered = 0
        for _ in range(self.CONNECTIONS):
            with Client(srv.port) as c:
                c.send(batch)
                for _ in range(self.PIPELINED):
                    r = c.read_response()
                    self.assertEqual((r.status, r.body), (200, HELLO_BODY))
                    answered += 1
        self.assertEqual(answered, self.CONNECTIONS * self.PIPELINED)
        srv.wait_log(r"\[warn\] worker 0\[\d+\]: access log: [1-9]\d* lines? dropped in the last "
                     r"\d+ s \(destination not reading\)")
        # The reader resumes, no request comes: what the worker kept
        # buffered (lines that did not fit the full pipe) still arrives.
        pipe_size = fcntl.fcntl(srv.pipe_r, F_GETPIPE_SZ)
        os.set_blocking(srv.pipe_r, False)
        got = bytearray()

        def drained():
            try:
                while True:
                    chunk = os.read(srv.pipe_r, 65536)
                    if not chunk:
                        break
                    got.extend(chunk)
            except BlockingIOError:
                pass
            return len(got) > pipe_size and got.endswith(b"\n")
        poll(drained, what=lambda: "more than the pipe held (%d bytes), got %d"
             % (pipe_size, len(got)))
        self.assertTrue(got.endswith(b"\n"), got[-200:])

    def test_unread_stderr_pipe_never_stops_the_worker(self):
        # The error log on standard error, a pipe nobody reads: each
        # rejected request logs a line, far more than the pipe holds.
        srv = LaunchedServer(make_config(HELLO_HOSTS), unread_pipe="stderr")
        self.servers.append(srv)
        srv.start()
        self.addCleanup(os.close, srv.pipe_r)
        for i in range(1500):
            with Client(srv.port) as c:
                c.send(b"GET /%d HTTP/1.1\r\n\r\n" % i)  # no Host: 400, one info line
                self.assertEqual(c.read_response().status, 400)
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").status, 200)


class LogFilesOpenedBySupervisor(ServerTestCase):
    def log_dir(self, srv):
        d = os.path.join(srv.dir, "logs")
        os.makedirs(d)
        os.chmod(d, 0o755)  # root's: a worker running as nobody cannot create files here
        return d

    def test_worker_as_nobody_logs_to_a_root_owned_directory(self):
        if os.geteuid() != 0:
            self.skipTest("dropping privileges needs root")
        srv = self.server(make_config(HELLO_HOSTS, """
            user: nobody
            logging: {access_log_path: "@DIR@/logs/access.log"}
        """), start=False)
        logs = self.log_dir(srv)
        srv.start()
        get_all(srv, ["/nobody-%d" % i for i in range(5)])
        path = os.path.join(logs, "access.log")
        poll(lambda: len(access_lines(path, "nobody-")) == 5,
             what=lambda: "5 access lines in %s; error log:\n%s" % (path, srv.log_tail()))
        self.assertNotIn("[error]", srv.log())

    def test_sigusr1_reopens_both_logs_after_mv(self):
        srv = self.server(make_config(HELLO_HOSTS, """
            event_loops: 2
            logging: {error_log: "@DIR@/logs/error.log", access_log_path: "@DIR@/logs/access.log"}
        """), start=False)
        logs = self.log_dir(srv)
        srv.start()
        workers = srv.wait_workers(2)
        access, error = os.path.join(logs, "access.log"), os.path.join(logs, "error.log")
        # Several connections, so that both workers (shared accept) are likely
        # to log; the count below does not depend on which one did.
        for i in range(4):
            get_all(srv, ["/before-%d-%d" % (i, j) for j in range(5)])
        poll(lambda: len(access_lines(access, "before-")) == 20, what="20 lines before the mv")

        os.rename(access, access + ".1")
        os.rename(error, error + ".1")
        srv.signal(signal.SIGUSR1)
        poll(lambda: "SIGUSR1: log files reopened" in read_text(error),
             what=lambda: "the supervisor's line in the new error log:\n" + read_text(error + ".1")[-2000:])
        poll(lambda: len(re.findall(r"\[info\] worker \d\[\d+\]: log files reopened",
                                    read_text(error))) == 2,
             what=lambda: "both workers' line in the new error log:\n" + read_text(error))

        for i in range(4):
            get_all(srv, ["/after-%d-%d" % (i, j) for j in range(5)])
        # A worker's own error-log line (a rejected request) lands in the new file.
        with Client(srv.port) as c:
            c.send(b"GET / HTTP/1.1\r\n\r\n")  # no Host
            self.assertEqual(c.read_response().status, 400)
        poll(lambda: "(400)" in read_text(error), what="the 400 line in the new error log")
        poll(lambda: len(access_lines(access, "after-")) == 20,
             what=lambda: "20 lines after the mv in the new file:\n" + read_text(access))
        # None lost, none in the wrong file.
        self.assertEqual(len(access_lines(access + ".1", "before-")), 20)
        self.assertEqual(access_lines(access + ".1", "after-"), [])
        self.assertEqual(access_lines(access, "before-"), [])
        self.assertNotIn("(400)", read_text(error + ".1"))
        # SIGUSR1 killed nothing.
        self.assertTrue(srv.running())
        self.assertEqual(srv.worker_pids(), workers)

    def test_reload_to_an_unopenable_access_log_fails_and_keeps_the_old(self):
        srv = self.server(make_config(HELLO_HOSTS, """
            logging: {access_log_path: "@DIR@/logs/access.log"}
        """), start=False)
        logs = self.log_dir(srv)
        srv.start()
        access = os.path.join(logs, "access.log")
        srv.write_config(make_config(HELLO_HOSTS, """
            logging: {access_log_path: "@DIR@/no/such/dir/access.log"}
        """))
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"\[error\] supervisor\[\d+\]: reload failed: .*server\.logging\."
                     r"access_log_path: .*/no/such/dir/access\.log: No such file or directory; "
                     r"still serving generation 1")
        get_all(srv, ["/kept-%d" % i for i in range(3)])
        poll(lambda: len(access_lines(access, "kept-")) == 3, what="3 lines in the old file")


class RelativePaths(ServerTestCase):
    def test_log_paths_are_relative_to_the_config_file(self):
        srv = LaunchedServer(make_config(HELLO_HOSTS, """
            logging: {error_log: "logs/error.log", access_log_path: "logs/access.log"}
        """), cwd="/")
        self.servers.append(srv)
        os.makedirs(os.path.join(srv.dir, "logs"))
        srv.start()
        get_all(srv, ["/relative-%d" % i for i in range(3)])
        access = os.path.join(srv.dir, "logs", "access.log")
        error = os.path.join(srv.dir, "logs", "error.log")
        poll(lambda: len(access_lines(access, "relative-")) == 3,
             what=lambda: "3 lines in %s; stderr:\n%s" % (access, srv.log_tail()))
        self.assertIn("starting:", read_text(error))
