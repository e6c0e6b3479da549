"""The command line: -t, --help, --version, errors with FILE:LINE:COL."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import (ROOT, TIMEOUT, HELLO_HOSTS, SANITIZER_PATTERNS, ServerTestCase, binary,
                     make_config, sanitized)


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

    def test_start_failure_reaches_the_terminal_with_a_log_file(self):
        """With error_log in a file, why a start failed is on standard
        error too (an operator at a terminal sees it, as with nginx), and
        in the file."""
        import socket
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        text = make_config(HELLO_HOSTS, 'logging: {error_log: "@DIR@/error.log"}')
        path = self.write(text.replace("@PORT@", str(port)))
        p = subprocess.run([binary(), "-c", path], capture_output=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL, cwd=self.dir)
        err = p.stderr.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, err)
        want = "bind 127.0.0.1:%d: Address already in use" % port
        self.assertIn(want, err)
        with open(os.path.join(self.dir, "error.log")) as f:
            self.assertIn(want, f.read())

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
        self.assertRegex(stdout.strip(), r"^scalwsd 0\.1\.0 \(build [A-Za-z0-9._+~-]+\)$")

    def test_unknown_option(self):
        code, out, _ = self.run_scalwsd("--no-such-option")
        self.assertNotEqual(code, 0, out)
        self.assertTrue(out.strip(), "no message for an unknown option")


class SecondInstance(ServerTestCase):
    """A second scalwsd on an address the first one listens on."""

    def test_reuseport_second_instance_refuses_the_address(self):
        hosts = HELLO_HOSTS.replace("hello, world", "first")
        first = self.server(make_config(hosts, "accept_policy: reuseport\nevent_loops: 2"))
        second = self.server(make_config(HELLO_HOSTS.replace("hello, world", "second"),
                                         "accept_policy: reuseport\nevent_loops: 2"),
                             start=False, port=first.port)
        second.start(wait=False)
        code = second.wait_exit()
        self.assertIsNotNone(code, "the second instance is still running:\n" + second.log_tail())
        self.assertNotEqual(code, 0, second.log_tail())
        self.assertIn("bind 127.0.0.1:%d: Address already in use" % first.port, second.log())
        # Every new connection still reaches the first instance (the
        # kernel would have hashed about half of them to a second group).
        for i in range(20):
            self.assertTrue(first.answers(body=b"first\n"), "connection %d" % i)




class Make(unittest.TestCase):
    """The Makefile as an operator meets it: what each target needs and
    where `make install` puts things."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-make-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def make(self, *args, env=None):
        p = subprocess.run(["make", "--no-print-directory", "-C", ROOT] + list(args),
                           capture_output=True, timeout=TIMEOUT * 6, env=env,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def test_run_builds_the_server_alone(self):
        # Dry run into an empty build dir: every command `make run` would run.
        code, out, err = self.make("-n", "run", "BUILD=" + os.path.join(self.dir, "b"))
        self.assertEqual(code, 0, err)
        self.assertIn("-o %s/b/scalwsd" % self.dir, out)
        self.assertNotIn("cmocka", out)
        self.assertNotIn("test/unit/", out)

    def test_missing_package_is_named_before_any_compiler_runs(self):
        # A PATH where pkg-config and protoc-c are not installed.
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        for name in os.listdir("/usr/bin"):
            if name not in ("pkg-config", "protoc-c") and not name.endswith("-pkg-config"):
                os.symlink(os.path.join("/usr/bin", name), os.path.join(bindir, name))
        env = dict(os.environ, PATH=bindir + ":/usr/sbin")
        code, out, err = self.make("BUILD=" + os.path.join(self.dir, "b"), env=env)  # `make` alone
        self.assertNotEqual(code, 0, out + err)
        self.assertIn("missing Debian packages: pkg-config protobuf-c-compiler", err)
        self.assertIn("scripts/deps.sh run", err)
        self.assertNotIn("not found", err)  # no shell or pkg-config error
        self.assertFalse(os.path.exists(os.path.join(self.dir, "b")), out)

    def test_install_layout(self):
        build = os.path.abspath(os.path.dirname(binary()))
        dest = os.path.join(self.dir, "stage")
        args = ["BUILD=" + build, "SANITIZE=%d" % sanitized(), "DESTDIR=" + dest, "PREFIX=/usr"]
        code, out, err = self.make("install", *args)
        self.assertEqual(code, 0, out + err)
        for b in ("scalwsd", "ingressd"):
            self.assertTrue(os.access(os.path.join(dest, "usr/sbin", b), os.X_OK), b)
        for f in ("etc/scalws/scalws.yaml", "etc/scalws/scalws.yaml.example",
                  "usr/share/doc/scalws/README.md",
                  "usr/share/doc/scalws/docs/configuration.md"):
            self.assertTrue(os.path.isfile(os.path.join(dest, f)), f)
        with open(os.path.join(dest, "etc/scalws/scalws.yaml")) as f:
            self.assertRegex(f.read(), r"\n +root: /usr/share/doc/scalws\n")
        # An operator's own configuration survives a reinstall.
        with open(os.path.join(dest, "etc/scalws/scalws.yaml"), "w") as f:
            f.write("# mine\n")
        code, out, err = self.make("install", *args)
        self.assertEqual(code, 0, out + err)
        with open(os.path.join(dest, "etc/scalws/scalws.yaml")) as f:
            self.assertEqual(f.read(), "# mine\n")
        code, out, err = self.make("uninstall", *args)
        self.assertEqual(code, 0, out + err)
        for b in ("scalwsd", "ingressd"):
            self.assertFalse(os.path.exists(os.path.join(dest, "usr/sbin", b)), b)
        self.assertTrue(os.path.exists(os.path.join(dest, "etc/scalws/scalws.yaml")))


class DocsAgree(unittest.TestCase):
    """What the README, the docs and --help tell an operator is what the
    binary does."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-docs-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def read(self, path):
        with open(os.path.join(ROOT, path)) as f:
            return f.read()

    def check(self, text):
        path = os.path.join(self.dir, "c.yaml")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([binary(), "-t", "-c", path], capture_output=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL, cwd=self.dir)
        return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")

    def test_readme_yaml_passes_t(self):
        blocks = re.findall(r"```yaml\n(.*?)```", self.read("README.md"), re.S)
        self.assertTrue(blocks, "no yaml block in README.md")
        for block in blocks:
            code, out = self.check(block)
            self.assertEqual(code, 0, out + "\n" + block)

    def test_configuration_pools_examples_pass_t(self):
        blocks = [b for b in re.findall(r"```yaml\n(.*?)```", self.read("docs/configuration.md"),
                                        re.S) if b.startswith("pools:")]
        self.assertTrue(blocks, "no pools: example in docs/configuration.md")
        for block in blocks:
            code, out = self.check(block)
            self.assertEqual(code, 0, out + "\n" + block)

    def test_readme_layout_lists_present_folders(self):
        rows = re.findall(r"^\| ([^|]+) \|", self.read("README.md"), re.M)
        folders = [f for row in rows for f in re.findall(r"`([\w.-]+/)`", row)]
        self.assertIn("supervisor/", folders)
        for folder in folders:
            self.assertTrue(os.path.isdir(os.path.join(ROOT, folder)), folder)

    def test_help_names_keys_the_file_takes(self):
        p = subprocess.run([binary(), "--help"], capture_output=True, timeout=TIMEOUT)
        keys = set(re.findall(r"\bserver(?:\.\w+)+", p.stdout.decode()))
        self.assertTrue(keys, "--help names no key")
        for key in keys:
            # The key with a value "-": any error but "unknown key" will do.
            parts = key.split(".")
            text = "".join("%s%s:\n" % ("  " * i, k) for i, k in enumerate(parts[:-1]))
            text += '%s%s: "-"\n' % ("  " * (len(parts) - 1), parts[-1])
            code, out = self.check(text)
            self.assertNotIn("unknown key", out, key)

    def test_operations_error_example_is_the_real_message(self):
        code, out = self.check(make_config("""
- name: "*"
  routes:
    - path: /
      respond: {status: 2000}
""").replace("@PORT@", "18080"))
        self.assertEqual(code, 1, out)
        message = re.search(r"respond\.status: [^\n]*", out).group(0)
        self.assertIn(message, self.read("docs/operations.md"))


class StopLog(ServerTestCase):
    def test_sigquit_logs_the_configured_shutdown_timeout(self):
        srv = self.server(make_config(HELLO_HOSTS, "shutdown_timeout: 5s"))
        srv.signal(signal.SIGQUIT)
        self.assertEqual(srv.wait_exit(), 0, srv.log_tail())
        self.assertRegex(srv.log(), r"SIGQUIT: graceful stop; waiting up to 5000 ms for 1 "
                                    r"worker\(s\), then SIGKILL at 10000 ms")
