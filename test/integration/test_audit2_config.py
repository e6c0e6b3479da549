"""A new operator's configuration mistakes, as `scalwsd -t` and a start
meet them (the audit of session 8; docs/configuration.md, "Errors")."""

import os
import shutil
import tempfile
import unittest

import test_cli

from harness import HELLO_HOSTS, connect_refused, free_port, make_config

# TEST-NET-1 (RFC 5737): never an address of this host.
FOREIGN = "192.0.2.1"


class AuditConfig(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-audit2-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_scalwsd(self, *args):
        # test_cli's runner: it also fails on a sanitizer report.
        code, out, _ = test_cli.Cli.run_scalwsd(self, *args)
        return code, out

    def write(self, listen):
        path = os.path.join(self.dir, "scalws.yaml")
        text = make_config(HELLO_HOSTS)
        with open(path, "w") as f:
            f.write(text.replace('listen: "127.0.0.1:@PORT@"', "listen: " + listen))
        return path

    def test_a_foreign_listen_address_is_refused_at_its_line(self):
        # -t said "test is successful" (nginx -t fails on the bind, HAProxy
        # names the file and line at start); the start failed with a bare
        # "bind 192.0.2.1:PORT: Cannot assign requested address".
        port = free_port()
        path = self.write('["127.0.0.1:%d", "%s:%d"]' % (port, FOREIGN, port))
        with open(path) as f:
            line, col = next((i, text.index('"' + FOREIGN) + 1)
                             for i, text in enumerate(f, 1) if FOREIGN in text)
        want = "%s:%d:%d: server.listen[1]: %s is not an address of this host (bind: " \
            % (path, line, col, FOREIGN)
        for args in (("-t", "-c", path), ("-c", path)):
            code, out = self.run_scalwsd(*args)
            self.assertEqual(code, 1, out)
            self.assertIn(want, out)
            self.assertNotIn("successful", out)
        # Nothing was served on the address that could be bound.
        self.assertTrue(connect_refused(port))

    def test_a_bare_port_says_how_to_listen_everywhere(self):
        # nginx's `listen 8080;`: the message said "not an IPv4 address".
        path = self.write("8080")
        code, out = self.run_scalwsd("-t", "-c", path)
        self.assertEqual(code, 1, out)
        self.assertIn('server.listen: bad address "8080": expected HOST:PORT '
                      '(":8080" for every IPv4 address)', out)


if __name__ == "__main__":
    unittest.main()
