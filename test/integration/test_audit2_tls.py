"""An attacker's TLS client, side by side with nginx 1.22 (the audit of
session 8; docs/operations.md, "TLS"). The handshake timeout, TLS 1.0/1.1,
an unknown SNI name and renegotiation are test_tls's."""

import ssl

from harness import Client
from test_tls import TlsTestCase


class AuditTls(TlsTestCase):
    def client_offering(self, protocols):
        ctx = self.ssl_context("a-ec.crt")
        ctx.set_alpn_protocols(protocols)
        return Client(self.tls_port, wrap=lambda s: ctx.wrap_socket(s, server_hostname="a.test"))

    def test_alpn_without_a_protocol_we_speak_is_refused_with_an_alert(self):
        # We went on without ALPN and served HTTP/1.1 to a client that asked
        # for another protocol (RFC 7301 3.2: a fatal alert; nginx since
        # 1.21.4 sends it).
        self.start()
        with self.assertRaisesRegex(ssl.SSLError, "no application protocol"):
            self.client_offering(["imap", "smtp"])
        # http/1.0 is HTTP/1, as nginx takes it.
        with self.client_offering(["http/1.0"]) as c:
            self.assertEqual(c.sock.selected_alpn_protocol(), "http/1.0")
            c.send(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
            self.assert_hello_a(c.read_response())

    def test_host_that_is_not_the_sni_name_is_served_by_host(self):
        # As nginx (without client certificates): the certificate follows
        # SNI, the host that answers follows Host.
        self.start()
        with self.tls_client() as c:
            c.send(b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
            self.assertEqual(c.read_response().body, b"hello any\n")


if __name__ == "__main__":
    import unittest
    unittest.main()
