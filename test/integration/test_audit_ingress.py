"""ingress.subscribe as a new operator gets it wrong (the audit of session
14; docs/configuration.md, "ingress")."""

import unittest

from harness import ServerTestCase, free_port, poll, scale
from test_admin import admin_request
from test_ingress_sub import FILE_HOSTS


class AuditIngress(ServerTestCase):
    def test_an_endpoint_nobody_publishes_on_is_said_in_the_log(self):
        # A typo in the path, or ingressd not started: /readyz stays 503
        # and, before, the log never said why (the silence was counted from
        # the last snapshot request, made again every second).
        admin = ("127.0.0.1", free_port())
        srv = self.server('server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: 1\n'
                          '  admin: {listen: ["%s:%d"]}\n'
                          'ingress: {subscribe: "ipc://@DIR@/run/routes.sock"}\n' % admin
                          + FILE_HOSTS)
        endpoint = "ipc://%s/run/routes.sock" % srv.dir

        def state():
            code, _, body = admin_request(admin, "GET", "/v1/status")
            return body["ingress"]["state"] if code == 200 else code
        poll(lambda: state() == "silent", timeout=scale(15),
             what=lambda: "the subscription to say silent (it says %r)" % state())
        srv.wait_log(r"ingress: nothing from %s for 3000 ms; still serving sequence 0 "
                     r"\(no snapshot yet: not ready\)" % endpoint)
        code, _, body = admin_request(admin, "GET", "/readyz")
        self.assertEqual(code, 503, body)


if __name__ == "__main__":
    unittest.main()
