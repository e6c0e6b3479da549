"""Binary upgrade as an operator gets it wrong (the audit of session 7;
docs/operations.md, "Binary upgrade"): a path with no executable file, a
file the kernel will not run, and `scalwsd -s` while an upgrade is in
progress (the pid file is aside as FILE.oldbin then).
"""

import os
import re
import signal
import subprocess
import unittest

from harness import TIMEOUT, binary, poll
from test_admin import admin_request
from test_upgrade import UpgradeTestCase, gone, pool, replace_file


class AuditUpgrade(UpgradeTestCase):
    def assert_nothing_started(self, srv, old):
        self.assertNotIn("upgrade: started", srv.log())
        self.assertEqual(self.pid_in_file(srv), old)
        self.assertFalse(os.path.exists(srv.pid_path + ".oldbin"))
        self.assertTrue(srv.answers())

    def test_a_path_without_an_executable_file_is_refused_before_a_start(self):
        srv = self.start_copy()
        old = srv.pid
        missing = os.path.join(srv.dir, "no-such-scalwsd")
        code, _, body = admin_request(srv.admin, "POST", "/v1/upgrade",
                                      body='{"binary": "%s"}' % missing)
        self.assertEqual(code, 422, body)
        self.assertEqual(body["error"], "%s: No such file or directory" % missing)
        code, _, body = admin_request(srv.admin, "POST", "/v1/upgrade",
                                      body='{"binary": "%s"}' % srv.dir)
        self.assertEqual((code, body["error"]), (422, "%s: not a regular file" % srv.dir))
        # The binary at the server's own path, replaced by a file that lost
        # its execute bits (an installer's mistake): SIGUSR2 says so.
        replace_file(srv.bin, source=binary(), mode=0o644)
        os.kill(old, signal.SIGUSR2)
        line = self.wait_new_line(srv, r"upgrade failed: .*", 2)
        self.assertEqual(line, "upgrade failed: %s: not executable (mode 0644): Permission denied;"
                         " still serving" % srv.bin)
        self.assertIn("upgrade failed: %s: No such file or directory; still serving" % missing,
                      srv.log())
        self.assert_nothing_started(srv, old)

    def test_a_file_the_kernel_will_not_run_names_execs_reason(self):
        srv = self.start_copy()
        # Executable bits, no "#!" and not ELF: execv fails with ENOEXEC
        # in the child, after the check.
        replace_file(srv.bin, "not a program\n")
        line = self.failed_upgrade(srv, re.escape(srv.bin) +
                                   r" exited with status 127 before ready: execv: .*")
        self.assertIn("execv: Exec format error", line)

    def test_signal_verbs_during_an_upgrade_reach_the_serving_supervisor(self):
        srv = self.start_copy(upgrade_timeout="60s", tail=pool("127.0.0.1:9"))
        old = srv.pid
        replace_file(srv.bin + ".real", source=binary())
        replace_file(srv.bin, "#!/bin/sh\nexec sleep 600\n")
        os.kill(old, signal.SIGUSR2)
        poll(lambda: os.path.exists(srv.pid_path + ".oldbin"), what="the .oldbin pid file")
        self.assertFalse(os.path.exists(srv.pid_path))

        def verb(name):
            return subprocess.run([srv.bin + ".real", "-s", name, "-c", srv.config_path],
                                  capture_output=True, timeout=TIMEOUT)
        # The verbs reach the supervisor that serves until GO: the old one.
        p = verb("reopen")
        self.assertEqual(p.returncode, 0, p.stderr)
        srv.wait_log(r"SIGUSR1: log files reopened")
        # A change to the routes now would be lost at GO (the new binary
        # took them as they were): refused, said, and nothing changes.
        srv.write_config(open(srv.config_path).read().replace("hello, world", "hello, again"))
        p = verb("reload")
        self.assertEqual(p.returncode, 0, p.stderr)
        srv.wait_log(r"SIGHUP: an upgrade to pid \d+ is in progress: it took the routes as they "
                     r"were when it started, .*; not reloaded")
        code, _, body = admin_request(srv.admin, "PUT", "/v1/pools/app/members/127.0.0.1:10")
        self.assertEqual(code, 503, body)
        self.assertIn("an upgrade to pid", body["error"])
        self.assertTrue(srv.answers())
        # A second upgrade is refused here, with a status, not lost.
        p = verb("upgrade")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"-s upgrade: an upgrade of pid %d is in progress (%s.oldbin)"
                      % (old, srv.pid_path.encode()), p.stderr)
        # stop ends the old supervisor, and the upgrade with it.
        hung = int(re.findall(r"upgrade: started \S+ as pid (\d+)", srv.log())[-1])
        p = verb("stop")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(srv.wait_exit(), 0)
        poll(lambda: gone(hung), what="the hung binary %d to be ended" % hung)
        self.assertIn("upgrade failed: the running server stopped first; stopping as asked",
                      srv.log())
        self.assertNotIn("still serving", srv.log())
        self.assertFalse(os.path.exists(srv.pid_path + ".oldbin"))


if __name__ == "__main__":
    unittest.main()
