"""TLS session resumption across workers and reloads (issue 8): the ticket
keys live in the shared region, so a session made on one worker resumes on
any other, and after a SIGHUP. Driven with `openssl s_client -sess_out /
-sess_in`.

Skipped, with the reason, while the build has no TLS listener (`scalwsd -t`
refuses the config below): the key store and its callback (shm/tickets.c,
worker/tls_tickets.c) are tested without one in test/unit/."""

import os
import shutil
import signal
import subprocess

from certs import make_pair
from harness import TIMEOUT, ServerTestCase, binary

CONFIG = """server:
  listen: [{address: "127.0.0.1:@PORT@", tls: true}]
  event_loops: 2
  accept_policy: reuseport
  admin: {listen: []}
  tls:
    default_certificate: {cert: "@DIR@/cert.crt", key: "@DIR@/cert.key"}
hosts:
  - name: "*"
    routes:
      - path: /
        respond: {status: 200, body: "hello, tls\\n"}
"""

# Connections that offer the first session. The kernel's reuseport hash
# spreads them over both workers: were the keys per worker, all of them
# resuming would have a chance of 1 in 2^(RESUMES-1).
RESUMES = 8

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


class TlsResume(ServerTestCase):
    def setUp(self):
        super().setUp()
        if shutil.which("openssl") is None:
            self.skipTest("no openssl command")
        self.srv = self.server(CONFIG, start=False)
        make_pair(self.srv.dir, "cert", "localhost", kind="ec")
        check = subprocess.run([binary(), "-t", "-c", self.srv.config_path],
                               capture_output=True, timeout=TIMEOUT, cwd=self.srv.dir)
        if check.returncode != 0:
            why = (check.stdout + check.stderr).decode("utf-8", "replace").strip().splitlines()
            self.skipTest("this build has no TLS listener: scalwsd -t refuses it: %s"
                          % (why[-1] if why else "(no message)"))
        self.srv.start()

    def s_client(self, sess_in=None, sess_out=None):
        """One connection and one request; whether the session was reused."""
        cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % self.srv.port,
               "-servername", "localhost", "-ign_eof"]
        if sess_in:
            cmd += ["-sess_in", sess_in]
        if sess_out:
            cmd += ["-sess_out", sess_out]
        # -ign_eof: s_client stays until the server closes, so it reads
        # the TLS 1.3 tickets that follow the handshake.
        p = subprocess.run(cmd, input=REQUEST, capture_output=True, timeout=TIMEOUT)
        out = p.stdout.decode("utf-8", "replace")
        self.assertIn("hello, tls", out, out + p.stderr.decode("utf-8", "replace"))
        self.assertTrue("Reused," in out or "New," in out, out)
        return "Reused," in out

    def test_session_resumes_on_every_worker_and_after_reload(self):
        first = os.path.join(self.srv.dir, "session.pem")
        self.assertFalse(self.s_client(sess_out=first))
        self.assertTrue(os.path.getsize(first) > 0)
        for i in range(RESUMES):
            self.assertTrue(self.s_client(sess_in=first), "connection %d did not resume" % i)

        self.srv.signal(signal.SIGHUP)
        self.srv.wait_log(r"generation 2 published")
        for i in range(RESUMES):
            self.assertTrue(self.s_client(sess_in=first),
                            "connection %d after the reload did not resume" % i)

    def test_a_restart_loses_the_keys_not_the_handshake(self):
        """A stop zeroes the keys; the session from before gets a full
        handshake, never an error."""
        first = os.path.join(self.srv.dir, "session.pem")
        self.assertFalse(self.s_client(sess_out=first))
        self.srv.stop()
        self.srv.start()
        self.assertFalse(self.s_client(sess_in=first))
