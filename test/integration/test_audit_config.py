"""Configuration mistakes a new operator makes, checked by `scalwsd -t` as
a start would meet them (the audit of session 7; docs/operations.md,
"Command line")."""

import os
import shutil
import subprocess
import tempfile
import unittest

import test_cli

from harness import HELLO_HOSTS, TIMEOUT, free_port, make_config


class AuditConfig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-audit-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_scalwsd(self, *args):
        # test_cli's runner: it also fails on a sanitizer report.
        code, out, _ = test_cli.Cli.run_scalwsd(self, *args)
        return code, out

    def write(self, server):
        path = os.path.join(self.dir, "scalws.yaml")
        with open(path, "w") as f:
            f.write(make_config(HELLO_HOSTS, server).replace("@PORT@", str(free_port()))
                    .replace("@DIR@", self.dir))
        return path

    def test_t_refuses_a_pid_file_a_start_cannot_write(self):
        # -t said "test is successful", then the start failed on it.
        path = self.write("admin: {listen: []}\npid_file: @DIR@/nodir/scalws.pid")
        want = "server.pid_file: %s/nodir/scalws.pid: No such file or directory" % self.dir
        code, out = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 1, out)
        self.assertIn("%s: %s" % (path, want), out)
        self.assertNotIn("successful", out)
        # The start says the same, naming the file the operator wrote, not
        # the temporary one it is written through.
        code, out = self.run_scalwsd("-c", path)
        self.assertEqual(code, 1, out)
        self.assertIn(want + "\n", out)
        self.assertNotIn(".tmp", out)

    def test_t_leaves_no_file_beside_a_writable_pid_file(self):
        path = self.write("admin: {listen: []}\npid_file: @DIR@/run/scalws.pid")
        os.mkdir(os.path.join(self.dir, "run"))
        code, out = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 0, out)
        self.assertEqual(os.listdir(os.path.join(self.dir, "run")), [])

    def test_s_never_signals_a_program_that_took_a_stale_pid(self):
        # A supervisor killed with -9 leaves its pid file; the pid may be
        # another program's since. `-s stop` would have sent it SIGTERM.
        other = subprocess.Popen(["sleep", "60"])
        self.addCleanup(other.wait, TIMEOUT)
        self.addCleanup(other.kill)
        pid_path = os.path.join(self.dir, "scalws.pid")
        with open(pid_path, "w") as f:
            f.write("%d\n" % other.pid)
        path = self.write("admin: {listen: []}\npid_file: @DIR@/scalws.pid")
        code, out = self.run_scalwsd("-s", "stop", "-c", path)
        self.assertEqual(code, 1, out)
        self.assertIn("-s stop: pid %d from %s is not scalwsd" % (other.pid, pid_path), out)
        self.assertIsNone(other.poll(), "the other program was signalled")


if __name__ == "__main__":
    unittest.main()
