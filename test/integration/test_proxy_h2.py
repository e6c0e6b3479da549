"""Pools that speak HTTP/2 to their members: `protocol: h2` and `grpc`
(docs/adr/0034). The configuration is accepted; until the HTTP/2 client
to the members (worker/upstream_h2.c) is in, a request to such a pool is
answered by scalwsd itself and the member never sees a byte in the wrong
protocol. A grpc pool refuses HTTP/1 clients with 426 either way."""

import unittest

from backend import Backend
from harness import Client, ServerTestCase, curl, make_config, request

HOSTS = """
- name: "*"
  routes:
    - path: /h2/
      proxy: {pool: plain}
    - path: /rpc/
      proxy: {pool: rpc}
"""


class H2Pools(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.member = Backend("m")

    def tearDown(self):
        self.member.stop()
        super().tearDown()

    def start(self):
        pools = ("pools:\n"
                 '  - {name: plain, protocol: h2, members: ["%s"]}\n'
                 '  - {name: rpc, protocol: grpc, members: ["%s"]}\n'
                 % (self.member.address, self.member.address))
        return self.server(make_config(HOSTS) + pools)

    def http1(self, srv, method, path, body=b""):
        with Client(srv.port) as c:
            c.send(request(method, path, body=body,
                           headers=[("Content-Type", "application/grpc"),
                                    ("Content-Length", str(len(body)))]))
            return c.read_response()

    def test_grpc_from_an_http1_client_is_426_with_a_log_line(self):
        srv = self.start()
        r = self.http1(srv, "POST", "/rpc/pkg.Svc/Call", body=b"\0\0\0\0\0")
        self.assertEqual(r.status, 426)
        srv.wait_log(r"proxy: pool rpc \(grpc\): client 127\.0\.0\.1 spoke HTTP/1\.1, "
                     r"gRPC needs HTTP/2 \(426\)")
        self.assertEqual(self.member.connections, 0)

    def test_h2_pool_is_answered_502_and_the_member_never_spoken_to(self):
        srv = self.start()
        self.assertEqual(self.http1(srv, "GET", "/h2/x").status, 502)
        # Without a body: answered before an upload ends, the stream is
        # reset (NO_ERROR, RFC 9113 8.1), which some curl builds report
        # as an error.
        r = curl("--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                 "-X", "POST", "-H", "content-type: application/grpc", "-H", "te: trailers",
                 srv.url("/rpc/pkg.Svc/Call"))
        self.assertEqual(r.stdout, b"2 502", r.stderr)
        srv.wait_log(r"proxy: pool rpc: HTTP/2 to the members is not implemented yet \(502\)")
        srv.wait_log(r"proxy: pool plain: HTTP/2 to the members is not implemented yet \(502\)")
        self.assertEqual(self.member.connections, 0)


if __name__ == "__main__":
    unittest.main()
