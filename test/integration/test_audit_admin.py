"""The admin API as an attacker and a confused operator meet it (the audit
of session 7; docs/admin-api.md, "Requests")."""

import re
import socket
import unittest

from harness import TIMEOUT, free_port, poll
from test_admin import AdminTestCase, admin_request

MAX_CONNS = 64  # SWS_ADMIN_MAX_CONNS


class AuditAdmin(AdminTestCase):
    def test_connections_past_the_limit_are_refused_with_a_log_line(self):
        srv = self.admin_server()
        held = []
        self.addCleanup(lambda: [s.close() for s in held])
        for _ in range(MAX_CONNS):
            held.append(poll(lambda: self.connect(srv), what="a connection to the admin socket"))
        # Every slot held by a silent client: the next is closed unanswered,
        # and the log says why (it said nothing: a reset and no line).
        poll(lambda: self.refused_once(srv), what="a connection past the limit refused")
        line = srv.wait_log(r"admin API: \S+admin\.sock: \d+ connection\(s\) closed at once: "
                            r"64 open, the most served at a time \(each is closed 10 s after it "
                            r"was accepted\)").group(0)
        self.assertTrue(line)
        # More refusals within the period add no line.
        for _ in range(5):
            poll(lambda: self.refused_once(srv) is not None, what="one more refused")
        self.assertEqual(len(re.findall(r"closed at once", srv.log())), 1)
        for s in held:
            s.close()
        held.clear()
        poll(lambda: self.answers_status(srv), what="the API serving again")

    def test_a_binary_is_named_only_over_the_unix_socket(self):
        # Any local user reaches a loopback port (in a pod: every
        # container); the binary named would run as the supervisor, root.
        port = free_port()
        srv = self.admin_server(extra=', "127.0.0.1:%d"' % port)
        body = '{"binary": "/bin/true"}'
        code, _, answer = admin_request(("127.0.0.1", port), "POST", "/v1/upgrade", body=body)
        self.assertEqual(code, 403, answer)
        self.assertIn("only over the admin API's Unix socket", answer["error"])
        # Over the socket the same field is taken (then refused here as not
        # a regular file, so nothing starts either way).
        code, _, answer = admin_request(srv.admin, "POST", "/v1/upgrade",
                                        body='{"binary": "/"}')
        self.assertEqual((code, answer), (422, {"error": "/: not a regular file"}))
        self.assertNotIn("upgrade: started", srv.log())

    @staticmethod
    def connect(srv):
        """A connected socket, or None while the listen queue is full (the
        supervisor accepts between two turns of its loop)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(TIMEOUT)
        try:
            s.connect(srv.admin)
            return s
        except BlockingIOError:
            s.close()
            return None

    def refused_once(self, srv):
        """One request on a new connection: True when the server closed it
        without an answer (None: not connected yet)."""
        s = self.connect(srv)
        if s is None:
            return None
        with s:
            try:
                s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: a\r\n\r\n")
                return s.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                return True

    @staticmethod
    def answers_status(srv):
        try:
            return admin_request(srv.admin, "GET", "/v1/status")[0] == 200
        except OSError:
            return False


if __name__ == "__main__":
    unittest.main()
