"""The build id (core/version.h): `--version`, the start log line and the
Server header with server_tokens tell build/scalwsd from build/scalwsd-alt,
the two builds that the upgrade tests alternate between."""

import re
import signal
import subprocess
import unittest

from harness import HELLO_HOSTS, TIMEOUT, Client, ServerTestCase, binary, make_config, poll

VERSION_LINE = r"^scalwsd 0\.1\.0 \(build ([A-Za-z0-9._+~-]+)\)$"


def version_of(exe):
    out = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=TIMEOUT, check=True).stdout.decode()
    m = re.match(VERSION_LINE, out.strip())
    if m is None:
        raise AssertionError("%s --version: %r" % (exe, out))
    return m.group(1)


class BuildIdTest(ServerTestCase):
    def serve(self, exe, tokens, header="edge"):
        srv = self.server(make_config(HELLO_HOSTS, "server_header: %s\nserver_tokens: %s"
                                      % (header, tokens)), start=False)
        srv.exe = exe
        return srv.start()

    def server_header(self, srv):
        with Client(srv.port) as c:
            r = c.get("/")
            self.assertEqual(r.status, 200)
            return r.header("Server")

    def test_the_two_builds_differ_only_by_the_alt_suffix(self):
        main, alt = version_of(binary()), version_of(binary("scalwsd-alt"))
        self.assertEqual(alt, main + "-alt")

    def test_server_tokens_build_names_each_binary(self):
        main, alt = version_of(binary()), version_of(binary("scalwsd-alt"))
        a = self.serve(binary(), "build")
        b = self.serve(binary("scalwsd-alt"), "build")
        self.assertEqual(self.server_header(a), "edge/0.1.0 (%s)" % main)
        self.assertEqual(self.server_header(b), "edge/0.1.0 (%s)" % alt)
        # The start line names the build too, for the log of an upgrade.
        b.wait_log(r"scalwsd 0\.1\.0 \(build %s\) starting:" % re.escape(alt))

    def test_server_tokens_on_off_and_no_header(self):
        self.assertEqual(self.server_header(self.serve(binary(), "on")), "edge/0.1.0")
        self.assertEqual(self.server_header(self.serve(binary(), "off")), "edge")
        self.assertIsNone(self.server_header(self.serve(binary(), "build", header="false")))

    def test_server_tokens_reloads(self):
        srv = self.serve(binary("scalwsd-alt"), "off")
        self.assertEqual(self.server_header(srv), "edge")
        srv.write_config(make_config(HELLO_HOSTS, "server_header: edge\nserver_tokens: build"))
        srv.signal(signal.SIGHUP)
        want = "edge/0.1.0 (%s)" % version_of(binary("scalwsd-alt"))
        srv.wait_log(r"reload: generation 2 published")
        poll(lambda: self.server_header(srv) == want, what="Server: " + want)


if __name__ == "__main__":
    unittest.main()
