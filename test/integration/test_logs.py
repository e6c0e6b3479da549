"""The logs as an operator and an attacker meet them: request bytes that
reach the error log cannot forge a line, a destination that stops reading
never stops a worker, the supervisor opens every log file (so a worker
without the right to open them still logs), SIGUSR1 reopens them."""

import os
import re

from harness import Client, ServerTestCase, make_config, static_hosts


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
