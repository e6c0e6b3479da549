"""Via (RFC 9110 7.6.3) on proxied requests and responses: off by
default, `via: true` adds "1.1 scalws", a pseudonym replaces the name;
ours comes after the values already there."""

from harness import Client, make_config, request
from test_proxy import ProxyTestCase


def via_config(address, via):
    return make_config("""
- name: "*"
  routes:
    - path: /
      proxy: {pool: app%s}
""" % ("" if via is None else ", via: %s" % via)) + (
        'pools:\n  - name: app\n    members:\n      - {address: "%s"}\n' % address)


class Via(ProxyTestCase):
    def exchange(self, via):
        b = self.backend("a")
        srv = self.server(via_config(b.address, via))
        with Client(srv.port) as c:
            c.send(request("GET", "/v", host="x", headers=[("Via", "1.0 fred")]))
            r = c.read_response()
        self.assertEqual(r.status, 200)
        return b.requests[0], r

    def test_off_by_default(self):
        got, r = self.exchange(None)
        self.assertEqual(got.header_all("Via"), ["1.0 fred"])  # the client's, as it came
        self.assertEqual(r.header_all("Via"), [])

    def test_on_appends_to_the_request_and_the_response(self):
        got, r = self.exchange("true")
        self.assertEqual(got.header_all("Via"), ["1.0 fred, 1.1 scalws"])
        self.assertEqual(r.header_all("Via"), ["1.1 scalws"])

    def test_pseudonym(self):
        got, r = self.exchange("edge-7")
        self.assertEqual(got.header_all("Via"), ["1.0 fred, 1.1 edge-7"])
        self.assertEqual(r.header_all("Via"), ["1.1 edge-7"])

    def test_false_is_off(self):
        got, r = self.exchange("false")
        self.assertEqual(got.header_all("Via"), ["1.0 fred"])
        self.assertEqual(r.header_all("Via"), [])
