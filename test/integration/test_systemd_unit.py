"""dist/systemd/scalwsd.service (ADR 0045): systemd follows the supervisor
through a binary upgrade (PIDFile= on a foreground service), reloads with
SIGHUP, stops gracefully with SIGQUIT to the supervisor alone and waits
longer than the drain may take; `systemd-analyze verify` accepts it."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

from harness import ROOT, TIMEOUT, binary

UNIT = os.path.join(ROOT, "dist", "systemd", "scalwsd.service")
# supervisor/supervisor.c: the workers get shutdown_timeout, then this
# much more before the supervisor kills them.
STOP_GRACEFUL_EXTRA_S = 5


def parse_unit(path):
    """{section: {key: [values]}} of a unit file (continuations joined)."""
    sections, current, pending = {}, None, ""
    with open(path) as f:
        for raw in f:
            line = pending + raw.rstrip("\n")
            pending = ""
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            m = re.fullmatch(r"\[(\w+)\]", line)
            if m:
                current = sections.setdefault(m.group(1), {})
                continue
            key, _, value = line.partition("=")
            current.setdefault(key.strip(), []).append(value.strip())
    return sections


def seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", text)
    return int(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]


class SystemdUnit(unittest.TestCase):
    def setUp(self):
        self.unit = parse_unit(UNIT)
        self.service = {k: v[-1] for k, v in self.unit["Service"].items()}

    def test_upgrade_keeps_systemd_on_the_new_supervisor(self):
        # Type=forking would wait for a fork scalwsd never makes; simple,
        # exec or notify with PIDFile=: systemd reads the file again when
        # the main process exits, and follows the new supervisor.
        self.assertIn(self.service["Type"], ("exec", "simple", "notify"))
        self.assertTrue(self.service["PIDFile"].startswith("/run/scalws/"))
        self.assertEqual(self.service["RuntimeDirectory"], "scalws")

    def test_reload_and_graceful_stop(self):
        self.assertEqual(self.service["ExecReload"], "/bin/kill -HUP $MAINPID")
        self.assertEqual(self.service["KillSignal"], "SIGQUIT")
        # The supervisor alone: it stops its workers in order.
        self.assertEqual(self.service["KillMode"], "mixed")

    def test_stop_waits_longer_than_the_drain(self):
        with open(os.path.join(ROOT, "conf", "scalws.yaml")) as f:
            drain = seconds(yaml.safe_load(f)["server"].get("shutdown_timeout", "30s"))
        self.assertGreater(seconds(self.service["TimeoutStopSec"]),
                           drain + STOP_GRACEFUL_EXTRA_S)

    def test_start_checks_the_file_it_serves(self):
        start = self.service["ExecStart"].split()
        self.assertEqual(start[1:], ["-c", "/etc/scalws/scalws.yaml"])
        self.assertEqual(self.service["ExecStartPre"].split(), [start[0], "-t"] + start[1:])

    @unittest.skipIf(shutil.which("systemd-analyze") is None, "systemd-analyze is not installed")
    def test_systemd_analyze_verify(self):
        # verify wants the binaries to exist: the build's stands in for the
        # installed one. Unknown keys and bad values are only warnings, so
        # any line naming the unit fails the test.
        d = tempfile.mkdtemp(prefix="scalws-unit-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "scalwsd.service")
        with open(UNIT) as f:
            text = f.read().replace("/usr/local/sbin/scalwsd", binary())
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                           timeout=TIMEOUT)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual([l for l in out.splitlines() if "scalwsd" in l], [], out)


if __name__ == "__main__":
    unittest.main()
