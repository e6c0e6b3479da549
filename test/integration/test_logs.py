"""The logs as an operator and an attacker meet them: request bytes that
reach the error log cannot forge a line, a destination that stops reading
never stops a worker, the supervisor opens every log file (so a worker
without the right to open them still logs), SIGUSR1 reopens them."""

import os
import subprocess

from harness import (HELLO_BODY, HELLO_HOSTS, LIVE_SERVERS, Client, Server, ServerTestCase,
                     binary, make_config, request, static_hosts)


class PipedServer(Server):
    """A Server whose standard output is a pipe that nobody reads (a stuck
    docker log driver, `| logger` stopped): the access log goes there."""

    def start(self, wait=True):
        self.pipe_r, w = os.pipe()
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(
                [binary(), "-c", self.config_path], stdin=subprocess.DEVNULL,
                stdout=w, stderr=err, cwd=self.dir, start_new_session=True)
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


class BlockedAccessLog(ServerTestCase):
    CONNECTIONS = 30
    PIPELINED = 100  # requests per connection, sent at once

    def test_unread_stdout_pipe_never_stops_the_worker(self):
        srv = PipedServer(make_config(HELLO_HOSTS, server='logging: {access_log_path: "-"}'))
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
