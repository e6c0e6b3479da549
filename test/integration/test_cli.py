"""The command line: -t, --help, --version, errors with FILE:LINE:COL."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import TIMEOUT, HELLO_HOSTS, SANITIZER_PATTERNS, binary, make_config


def line_of(text, needle):
    """The 1-based number of the first line of text containing needle."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-cli-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_scalwsd(self, *args):
        p = subprocess.run([binary()] + list(args), capture_output=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL, cwd=self.dir)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        for pat in SANITIZER_PATTERNS:
            self.assertNotIn(pat, out)
        return p.returncode, out, p.stdout.decode("utf-8", "replace")

    def write(self, text, name="scalws.yaml"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text.replace("@PORT@", "18080").replace("@DIR@", self.dir))
        return path

    def check_error(self, text, line, needle=None):
        """-t on text fails with exit 1 and "FILE:LINE:COL: message"."""
        path = self.write(text)
        code, out, _ = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 1, out)
        m = re.search(re.escape(path) + r":(\d+):(\d+): (.+)", out)
        self.assertTrue(m, "no FILE:LINE:COL in %r" % out)
        self.assertEqual(int(m.group(1)), line, out)
        self.assertGreaterEqual(int(m.group(2)), 1, out)
        if needle:
            self.assertIn(needle, m.group(3))
        self.assertNotIn("test is successful", out)
        return m

    def test_t_ok(self):
        path = self.write(make_config(HELLO_HOSTS))
        code, out, _ = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 0, out)
        self.assertIn("test is successful", out)

    def test_t_full_schema(self):
        os.makedirs(os.path.join(self.dir, "docs"))
        path = self.write("""\
server:
  listen: ["127.0.0.1:@PORT@", "[::1]:@PORT@"]
  event_loops: auto
  accept_policy: reuseport
  backlog: 4096
  shutdown_timeout: 30s
  keepalive_requests: 1000
  server_header: scalws
  limits: {max_request_line: 8k, max_header_size: 16k, max_headers: 100, max_body_size: 1m}
  timeouts: {header: 60s, body: 60s, keepalive: 75s, send: 60s}
  logging: {level: info, error_log: "-", access_log: json, access_log_path: "-"}
hosts:
  - names: ["example.com", "*.example.com"]
    https_redirect: false
    routes:
      - path: /
        respond: {status: 200, headers: {Content-Type: text/plain}, body: "hello, world\\n"}
      - path: /docs/
        static: {root: docs, index: index.html, follow_symlinks: false}
      - path: /old
        match: exact
        redirect: {status: 301, location: "https://example.com/new"}
  - name: "*"
    routes:
      - path: /
        respond: {status: 404, body: "no such host\\n"}
""")
        code, out, _ = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 0, out)
        self.assertIn("test is successful", out)

    def test_t_unknown_server_key(self):
        text = make_config(HELLO_HOSTS, "event_loopz: 2")
        self.check_error(text, line_of(text, "event_loopz"), "event_loopz")

    def test_t_unknown_route_key(self):
        text = make_config(HELLO_HOSTS).replace("      - path: /\n",
                                                "      - path: /\n        colour: red\n")
        self.check_error(text, line_of(text, "colour"), "colour")

    def test_t_bad_value(self):
        text = make_config(HELLO_HOSTS, "backlog: lots")
        self.check_error(text, line_of(text, "backlog"))

    def test_t_bad_size_and_duration(self):
        for extra in ("limits: {max_body_size: 12zb}", "timeouts: {header: soon}"):
            text = make_config(HELLO_HOSTS, extra)
            self.check_error(text, line_of(text, extra))

    def test_t_bad_accept_policy(self):
        text = make_config(HELLO_HOSTS, "accept_policy: random")
        self.check_error(text, line_of(text, "accept_policy"))

    def test_t_yaml_syntax_error(self):
        text = make_config(HELLO_HOSTS) + "  - [unclosed\n"
        path = self.write(text)
        code, out, _ = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 1, out)
        self.assertRegex(out, re.escape(path) + r":\d+:\d+: ")

    # -t checks what a start needs from the system, with the start's own
    # functions, and names the key's place.
    def test_t_no_such_user(self):
        text = make_config(HELLO_HOSTS, "user: nosuchuser")
        self.check_error(text, line_of(text, "nosuchuser"), 'server.user: no such user "nosuchuser"')

    def test_t_error_log_in_a_missing_directory(self):
        text = make_config(HELLO_HOSTS, 'logging: {error_log: "@DIR@/nodir/error.log"}')
        self.check_error(text, line_of(text, "error_log"),
                         "server.logging.error_log: %s/nodir/error.log: No such file or directory"
                         % self.dir)

    def test_t_access_log_that_cannot_be_opened(self):
        # A directory: not writable as a file, even by root.
        text = make_config(HELLO_HOSTS, 'logging: {access_log_path: "@DIR@"}')
        self.check_error(text, line_of(text, "access_log_path"),
                         "server.logging.access_log_path: %s: Is a directory" % self.dir)
        # Off: not opened at start, so not checked either.
        text = make_config(HELLO_HOSTS, 'logging: {access_log: off, access_log_path: "@DIR@"}')
        code, out, _ = self.run_scalwsd("-t", "-c", self.write(text))
        self.assertEqual(code, 0, out)

    def test_start_fails_as_t_does(self):
        text = make_config(HELLO_HOSTS, 'logging: {access_log_path: "@DIR@/nodir/access.log"}')
        path = self.write(text)
        code, out, _ = self.run_scalwsd("-c", path)
        self.assertEqual(code, 1, out)
        self.assertRegex(out, re.escape(path) + r":%d:\d+: server\.logging\.access_log_path: "
                         % line_of(text, "access_log_path"))

    def test_t_missing_file(self):
        path = os.path.join(self.dir, "nope.yaml")
        code, out, _ = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 1, out)
        self.assertIn(path, out)

    def test_run_with_bad_config_exits(self):
        text = make_config(HELLO_HOSTS, "event_loopz: 2")
        path = self.write(text)
        code, out, _ = self.run_scalwsd("-c", path)
        self.assertNotEqual(code, 0, out)
        self.assertRegex(out, re.escape(path) + r":%d:\d+: " % line_of(text, "event_loopz"))

    def test_help(self):
        code, out, _ = self.run_scalwsd("--help")
        self.assertEqual(code, 0, out)
        self.assertIn("-c", out)
        self.assertIn("-t", out)
        self.assertIn("--version", out)

    def test_version(self):
        code, out, stdout = self.run_scalwsd("--version")
        self.assertEqual(code, 0, out)
        self.assertEqual(stdout.strip(), "scalwsd 0.1.0")

    def test_unknown_option(self):
        code, out, _ = self.run_scalwsd("--no-such-option")
        self.assertNotEqual(code, 0, out)
        self.assertTrue(out.strip(), "no message for an unknown option")
