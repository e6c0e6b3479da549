"""server.admin.token_file against the real scalwsd (docs/admin-api.md,
"Authentication"; ADR 0064): a loopback port answers only with the bearer
token, the Unix socket and the probes without it; a reload reads the file
again; `-t`, a start and a reload refuse a file the server could not use;
a loopback port without a token file is warned about at start."""

import os
import re
import shutil
import signal
import tempfile
import unittest

from harness import HELLO_HOSTS, ServerTestCase, free_port, make_config, poll, sanitized
from test_admin import POOLS_YAML, admin_request
import test_cli

TOKEN = "3f9c2a7d41e8b06c5d2f9a1e7b3c8d40"
OTHER = "b7e1d04c9a2f68e35c1b7d9a0e4f2c86"


def bearer(token):
    return ("Authorization: Bearer %s" % token,)


def write_token(path, text, mode=0o600):
    """Replace the token file at once (a reload never reads half of it)."""
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def config(port, token_file=True):
    key = ", token_file: admin.token" if token_file else ""
    return make_config(HELLO_HOSTS, server='admin: {listen: ["@DIR@/run/admin.sock", '
                                           '"127.0.0.1:%d"]%s}' % (port, key)) + POOLS_YAML


def memory_holding(pid, needle):
    """The writable mappings of process pid ("start-end path") that hold
    needle: its heap, stack and data, read through /proc/PID/mem (root)."""
    found = []
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "w" not in fields[1] or "r" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            # In pieces that overlap by the needle's length, so that a
            # large mapping (the shared table) is never read whole.
            at, tail = start, b""
            while at < end:
                try:
                    mem.seek(at)
                    data = tail + mem.read(min(end - at, 1 << 24))
                except OSError:
                    break  # a guard page or a device mapping
                if needle in data:
                    found.append(fields[0] + " " + (fields[5] if len(fields) > 5 else ""))
                    break
                tail = data[-(len(needle) - 1):]
                at += 1 << 24
    return found


class AdminToken(ServerTestCase):
    def token_server(self, token_file=True):
        port = free_port()
        srv = self.server(config(port, token_file), start=False)
        srv.admin = os.path.join(srv.dir, "run", "admin.sock")
        srv.tcp = ("127.0.0.1", port)
        srv.token_path = os.path.join(srv.dir, "admin.token")
        write_token(srv.token_path, TOKEN + "\n")
        srv.start()
        poll(lambda: os.path.exists(srv.admin), what="the admin socket")
        return srv

    def members(self, srv):
        code, _, body = admin_request(srv.admin, "GET", "/v1/pools")
        self.assertEqual(code, 200, body)
        return [m["address"] for m in body["pools"][0]["members"]]

    def assert_refused(self, srv, method, target, headers=(), body=None, wrong=False):
        code, head, answer = admin_request(srv.tcp, method, target, body=body, headers=headers)
        self.assertEqual(code, 401, answer)
        challenge = 'Bearer realm="scalws-admin"'
        if wrong:
            challenge += ', error="invalid_token"'
        self.assertEqual(head["www-authenticate"], challenge)
        self.assertIn("wrong bearer token" if wrong else "server.admin.token_file",
                      answer["error"])

    def test_a_loopback_port_needs_the_token_the_socket_and_probes_do_not(self):
        srv = self.token_server()
        srv.wait_log(r"\[info\] supervisor\[\d+\]: admin API: bearer token read from "
                     r"/\S*/admin\.token\n")
        self.assertNotIn("no server.admin.token_file", srv.log())

        self.assert_refused(srv, "GET", "/v1/status")
        self.assert_refused(srv, "GET", "/v1/pools", headers=bearer(OTHER), wrong=True)
        self.assert_refused(srv, "GET", "/v1/pools", headers=bearer(TOKEN[:-1]), wrong=True)
        self.assert_refused(srv, "GET", "/v1/pools", headers=("Authorization: Basic " + TOKEN,))
        self.assert_refused(srv, "PUT", "/v1/pools/api/members/127.0.0.1:9003",
                            headers=bearer(OTHER), body="{}", wrong=True)
        self.assert_refused(srv, "POST", "/v1/upgrade", body="{}")
        self.assertEqual(self.members(srv), ["127.0.0.1:9001"])
        srv.wait_log(r"\[warn\] supervisor\[\d+\]: admin API: 127\.0\.0\.1:\d+: 1 "
                            r"request\(s\) answered 401 \(the last: GET /v1/status, no bearer "
                            r"token\); this listener needs the token of server.admin.token_file")

        code, _, body = admin_request(srv.tcp, "GET", "/v1/status", headers=bearer(TOKEN))
        self.assertEqual(code, 200, body)
        code, _, body = admin_request(srv.tcp, "PUT", "/v1/pools/api/members/127.0.0.1:9002",
                                      body='{"weight": 2}',
                                      headers=("authorization: bearer  %s " % TOKEN,))
        self.assertEqual(code, 201, body)
        self.assertEqual(self.members(srv), ["127.0.0.1:9001", "127.0.0.1:9002"])

        # The socket's mode guards it; the probes tell nothing and change nothing.
        code, _, body = admin_request(srv.admin, "DELETE", "/v1/pools/api/members/127.0.0.1:9002")
        self.assertEqual(code, 200, body)
        for target in ("/healthz", "/readyz"):
            code, head, body = admin_request(srv.tcp, "GET", target)
            self.assertEqual((code, body), (200, {"status": "ok"}))
            self.assertNotIn("www-authenticate", head)

    def test_a_reload_reads_the_token_again(self):
        srv = self.token_server()
        said = r"admin API: bearer token read from "
        srv.wait_log(said)
        write_token(srv.token_path, OTHER)
        srv.signal(signal.SIGHUP)
        poll(lambda: len(re.findall(said, srv.log())) == 2, what="the token read again")
        self.assert_refused(srv, "GET", "/v1/status", headers=bearer(TOKEN), wrong=True)
        self.assertEqual(admin_request(srv.tcp, "GET", "/v1/status",
                                       headers=bearer(OTHER))[0], 200)

        # A file the server cannot use fails the reload; the token stays.
        os.chmod(srv.token_path, 0o640)
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"reload failed: [^\n]*scalws.yaml:4:\d+: server.admin.token_file: "
                     r"/\S*/admin\.token: mode 0640 lets group or others at it; chmod 600 it")
        self.assertEqual(admin_request(srv.tcp, "GET", "/v1/status",
                                       headers=bearer(OTHER))[0], 200)

        # The key taken out: the port is open again, and the log says so.
        srv.write_config(config(srv.tcp[1], token_file=False))
        srv.signal(signal.SIGHUP)
        srv.wait_log(r"\[warn\] supervisor\[\d+\]: admin API on 127\.0\.0\.1:%d: no "
                     r"server.admin.token_file, so any local user may change pool members "
                     r"and start an upgrade through it" % srv.tcp[1])
        self.assertEqual(admin_request(srv.tcp, "GET", "/v1/status")[0], 200)

    @unittest.skipIf(sanitized(), "ASan reserves terabytes of writable address space (its "
                     "heap and shadow): the plain build's run reads a worker's whole memory")
    def test_workers_hold_no_copy_of_the_token(self):
        # A worker parses what clients send; one taken over through a bug
        # must not find in its memory the credential that reconfigures
        # every worker (the admin API on a loopback port). Forked from the
        # supervisor, it starts with a copy of everything there: the
        # token is wiped in it, in every copy, at its start, including a
        # worker restarted after a reload that rotated the token.
        srv = self.token_server()
        srv.wait_log(r"admin API: bearer token read from ")
        for pid in srv.wait_workers(1):
            self.assertEqual(memory_holding(pid, TOKEN.encode()), [], "worker %d" % pid)
        write_token(srv.token_path, OTHER)
        srv.signal(signal.SIGHUP)
        poll(lambda: admin_request(srv.tcp, "GET", "/v1/status", headers=bearer(OTHER))[0] == 200,
             what="the rotated token in force")
        old = srv.wait_workers(1)
        os.kill(old[0], signal.SIGKILL)
        for pid in srv.wait_workers(1, exclude=old):
            for token in (TOKEN, OTHER):
                self.assertEqual(memory_holding(pid, token.encode()), [],
                                 "restarted worker %d, token %s" % (pid, token))
        # The supervisor still has it, or nothing would pass.
        self.assertEqual(admin_request(srv.tcp, "GET", "/v1/status", headers=bearer(OTHER))[0], 200)

    def test_a_loopback_port_without_a_token_file_is_warned_about(self):
        srv = self.token_server(token_file=False)
        srv.wait_log(r"\[warn\] supervisor\[\d+\]: admin API on 127\.0\.0\.1:%d: no "
                     r"server.admin.token_file" % srv.tcp[1])
        # One line, for the port only: the Unix socket needs none.
        self.assertEqual(len(re.findall("no server.admin.token_file", srv.log())), 1)
        self.assertEqual(admin_request(srv.tcp, "GET", "/v1/status")[0], 200)


class AdminTokenCheck(unittest.TestCase):
    """-t (and a start) refuse a token file the server could not use, at
    the key, with FILE:LINE:COL."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-token-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    # test_cli's: it also fails on a sanitizer report.
    run_scalwsd = test_cli.Cli.run_scalwsd
    write = test_cli.Cli.write

    def refused(self, content, mode, why):
        token = os.path.join(self.dir, "admin.token")
        if os.path.exists(token):
            os.unlink(token)
        if content is not None:
            write_token(token, content, mode)
        path = self.write(config(free_port()))
        for args in (("-t", "-c", path), ("-c", path)):
            code, out, _ = self.run_scalwsd(*args)
            self.assertEqual(code, 1, out)
            self.assertRegex(out, r"%s:4:\d+: server.admin.token_file: /\S*/admin\.token: %s"
                             % (re.escape(path), why))
            self.assertNotIn("successful", out)

    def test_t_refuses_what_a_token_file_must_not_be(self):
        self.refused(None, 0, "cannot open: No such file or directory")
        self.refused(TOKEN, 0o644, "mode 0644 lets group or others at it")
        self.refused(TOKEN, 0o606, "mode 0606 lets group or others at it")
        self.refused("\n", 0o600, "empty")
        self.refused("short\n", 0o600, "a token of 5 bytes is too easy to guess")
        self.refused("two words " + TOKEN, 0o600, "byte 4 of the token is a space")

    def test_t_accepts_a_good_one(self):
        write_token(os.path.join(self.dir, "admin.token"), TOKEN + "\r\n", 0o400)
        code, out, _ = self.run_scalwsd("-t", "-c", self.write(config(free_port())))
        self.assertEqual(code, 0, out)
