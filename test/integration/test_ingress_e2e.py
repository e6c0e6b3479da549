"""The ingress controller end to end (issue 10, "What it must show" 2): the
fake Kubernetes API server (test/kube/), build/ingressd watching it and
publishing over ZeroMQ, scalwsd subscribed, backends of our own on
127.0.0.x sharing one port as a Service's endpoints do.

- an Ingress created is served (the time from `kubectl apply` to the
  first answer is printed; the verdict is that it is served);
- the EndpointSlice changed every 200 ms under a steady client loop: no
  request fails;
- a deleted Ingress answers 404;
- a TLS Secret is served with SNI;
- ingressd killed and restarted, the API server unavailable, a forced 410
  relist: scalwsd keeps serving with no failed request throughout, and
  serves an Ingress applied once the API is back (after the 410s).

Every wait is a bounded poll; no verdict depends on timing."""

import json
import os
import signal
import ssl
import sys
import time
import unittest

from backend import Backend
from certs import make_pair
from harness import (BUILD_DIR, ROOT, TIMEOUT, Client, KeepAliveLoop, Process, ServerTestCase,
                     free_port, poll, scale)

sys.path.insert(0, os.path.join(ROOT, "test", "kube"))
from fakekube import KUBECTL, FakeKube  # noqa: E402

HAVE_KUBECTL = os.path.exists(KUBECTL)

BASE = """
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: scalws}
spec: {controller: scalws.io/ingress-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  ports:
    - {name: http, port: 80, targetPort: %(port)d, protocol: TCP}
"""

INGRESS = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: %(name)s, namespace: demo}
spec:
  ingressClassName: scalws
  %(tls)s
  rules:
    - host: %(host)s
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service: {name: web, port: {number: 80}}
"""


def slice_manifest(port, addresses, terminating=()):
    eps = "".join("  - addresses: [\"%s\"]\n    conditions: {ready: true}\n" % a
                  for a in addresses)
    eps += "".join("  - addresses: [\"%s\"]\n    conditions: {ready: false, terminating: true}\n"
                   % a for a in terminating)
    return """
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: demo
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
  - {name: http, port: %d, protocol: TCP}
endpoints:
%s""" % (port, eps if eps else "  []\n")


class IngressE2E(ServerTestCase):
    def setUp(self):
        super().setUp()
        if not HAVE_KUBECTL:
            self.skipTest("kubectl is not installed")
        self.kube = FakeKube(verbose=False).start()
        self.addCleanup(self.kube.stop)
        # Three backends on one port, as the endpoints of Service web.
        self.backends = []
        port = 0
        for i in range(3):
            b = Backend("b%d" % i, delay=0, host="127.0.0.%d" % (i + 1), port=port)
            port = b.port
            self.addCleanup(b.stop)
            self.backends.append(b)
        self.port = port
        self.apply(BASE % {"port": port})
        self.apply(slice_manifest(port, ["127.0.0.1"]))

    # ---- the pieces ----

    def apply(self, text):
        self.kube.kubectl("apply", "-f", "-", input=text)

    def start_ingressd(self, srv):
        """ingressd publishing to srv, logging beside it; tearDown stops it
        and scans its log (a restarted one appends to the same log)."""
        self.health_port = free_port()
        self.ingressd = self.helper(Process(os.path.join(srv.dir, "ingressd.log")).spawn(
            [os.path.abspath(os.path.join(BUILD_DIR, "ingressd")), "--kubeconfig",
             self.kube.kubeconfig, "--publish", srv.endpoint,
             "--health", "127.0.0.1:%d" % self.health_port]))

    def ingressd_published(self):
        return self.ingressd.running() and "routes: sequence" in self.ingressd.log()

    def stack(self, extra=""):
        self.admin_port = free_port()
        srv = self.server('server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: 2\n'
                          '  admin: {listen: ["127.0.0.1:%d"]}\n'
                          'ingress: {subscribe: "ipc://@DIR@/run/routes.sock"}\n%s'
                          % (self.admin_port, extra))
        srv.endpoint = "ipc://%s/run/routes.sock" % srv.dir
        self.start_ingressd(srv)
        return srv

    def get(self, srv, host, path="/"):
        """(status, body) of a GET on a new connection."""
        with Client(srv.port) as c:
            r = c.get(path, host=host)
            return r.status, r.body.decode(errors="replace")

    def wait_answer(self, srv, host, predicate, what, timeout=TIMEOUT):
        last = [None]

        def ok():
            last[0] = self.get(srv, host)
            return predicate(*last[0])
        poll(ok, timeout=timeout, interval=0.05, what=lambda: "%s: %s (last answer %r); ingressd log:\n%s"
             % (host, what, last[0], self.ingressd.log_tail()))

    # ---- the tests ----

    def test_ingress_created_served_then_deleted_404(self):
        srv = self.stack()
        poll(self.ingressd_published, what=lambda: "ingressd's first publication:\n" + self.ingressd.log_tail())
        self.assertEqual(self.get(srv, "web.demo.test")[0], 404)
        t0 = time.monotonic()
        self.apply(INGRESS % {"name": "web", "host": "web.demo.test", "tls": ""})
        self.wait_answer(srv, "web.demo.test", lambda s, b: s == 200 and b.startswith("b0 "),
                         "served by b0")
        print("ingress created -> served: %.0f ms (kubectl apply included)"
              % ((time.monotonic() - t0) * 1000))
        self.kube.kubectl("delete", "ingress", "-n", "demo", "web")
        self.wait_answer(srv, "web.demo.test", lambda s, b: s == 404, "404 once deleted")
        # /readyz of ingressd says what it published.
        self.assertTrue(self.health("/readyz")["published"])

    def test_endpoint_changes_every_200ms_fail_no_request(self):
        srv = self.stack()
        self.apply(INGRESS % {"name": "web", "host": "web.demo.test", "tls": ""})
        self.wait_answer(srv, "web.demo.test", lambda s, b: s == 200, "served")
        loop = KeepAliveLoop(srv.port, "web.demo.test")
        # Up and down: 1, 2, 3 endpoints and back, the leaving one
        # terminating for a step before it goes, as a rollout does.
        steps = [(["127.0.0.1"], []), (["127.0.0.1", "127.0.0.2"], []),
                 (["127.0.0.1", "127.0.0.2", "127.0.0.3"], []),
                 (["127.0.0.2", "127.0.0.3"], ["127.0.0.1"]), (["127.0.0.2", "127.0.0.3"], []),
                 (["127.0.0.2"], ["127.0.0.3"]), (["127.0.0.1", "127.0.0.2"], [])]
        try:
            deadline = time.monotonic() + 10
            n = 0
            while time.monotonic() < deadline and n < 60:
                ready, term = steps[n % len(steps)]
                self.apply(slice_manifest(self.port, ready, term))
                n += 1
                time.sleep(0.2)  # the pace of the churn, not a readiness wait
        finally:
            loop.stop()
        print("endpoint churn: %d changes, %d requests answered, %d failed"
              % (n, loop.answered, len(loop.failures)))
        self.assertGreater(loop.answered, n)
        self.assertEqual(loop.failures, [])
        served = {b.name for b in self.backends if b.requests}
        self.assertGreaterEqual(len(served), 2, "the new endpoints took requests")
        # ADR 0047: a change of EndpointSlices alone redoes only their pools.
        self.assertIn("(endpoints), published in", self.ingressd.log(),
                      "no endpoint change took the incremental path")

    def test_tls_secret_served_with_sni(self):
        cert, key = make_pair(self.kube.dir, "web", "web.demo.test", dns=["web.demo.test"])
        p = self.kube.kubectl("create", "secret", "tls", "web-tls", "-n", "demo", "--cert", cert,
                              "--key", key, "--dry-run=client", "-o", "yaml")
        self.apply(p.stdout)
        default_cert, default_key = make_pair(self.kube.dir, "default", "default.test")
        tls_port = free_port()
        self.admin_port = free_port()
        srv = self.server(
            'server:\n  listen: ["127.0.0.1:@PORT@", {address: "127.0.0.1:%d", tls: true}]\n'
            '  event_loops: 1\n  admin: {listen: ["127.0.0.1:%d"]}\n'
            '  tls: {default_certificate: {cert: "%s", key: "%s"}}\n'
            'ingress: {subscribe: "ipc://@DIR@/run/routes.sock"}\n'
            % (tls_port, self.admin_port, default_cert, default_key))
        srv.endpoint = "ipc://%s/run/routes.sock" % srv.dir
        self.start_ingressd(srv)
        self.apply(INGRESS % {"name": "web", "host": "web.demo.test",
                              "tls": "tls: [{hosts: [web.demo.test], secretName: web-tls}]"})
        ctx = ssl.create_default_context(cafile=cert)

        def served():
            try:
                with Client(tls_port, timeout=5, wrap=lambda raw: ctx.wrap_socket(
                        raw, server_hostname="web.demo.test")) as c:
                    r = c.get("/", host="web.demo.test")
                    return r.status == 200 and r.body.startswith(b"b0 GET /")
            except (OSError, ssl.SSLError):
                return False
        poll(served, what=lambda: "web.demo.test over TLS with the Secret's certificate; "
             "ingressd log:\n" + self.ingressd.log_tail())

    def test_ingressd_restart_api_outage_and_relist_fail_no_request(self):
        srv = self.stack()
        self.apply(INGRESS % {"name": "web", "host": "web.demo.test", "tls": ""})
        self.wait_answer(srv, "web.demo.test", lambda s, b: s == 200, "served")
        loop = KeepAliveLoop(srv.port, "web.demo.test")
        try:
            # ingressd killed: scalwsd serves what it has; restarted: a new
            # publisher, a snapshot, the same routes.
            self.ingressd.stop(signal.SIGKILL)
            before = loop.answered
            poll(lambda: loop.answered > before + 20, what="requests while ingressd is gone")
            self.start_ingressd(srv)
            poll(self.ingressd_published, what=lambda: "the new ingressd's publication:\n" + self.ingressd.log_tail())
            # The API server unavailable (connections reset) for a while:
            # still served from what was published.
            self.kube.control("unavailable", seconds=30, mode="reset")
            before = loop.answered
            poll(lambda: loop.answered > before + 20, what="requests while the API is gone")
            poll(self.api_back, timeout=60, interval=0.5, what="the API server back")
            # A forced 410 on the next watches and lists: a relist.
            self.kube.control("gone", watches=5, lists=1)
            self.kube.control("drop-watches", clean=False)
            self.apply(INGRESS % {"name": "two", "host": "two.demo.test", "tls": ""})
            # ingressd comes back at its next retry: its backoff grew to
            # at most 30 s (+20% jitter) during the outage.
            self.wait_answer(srv, "two.demo.test", lambda s, b: s == 200,
                             "the change made after the outage and the 410",
                             timeout=scale(60))
        finally:
            loop.stop()
        print("ingressd restart, API outage, relist: %d requests answered, %d failed"
              % (loop.answered, len(loop.failures)))
        self.assertEqual(loop.failures, [])
        kinds = self.health("/healthz")["kinds"]
        self.assertGreater(sum(k["relists"] for k in kinds.values()), 0, kinds)
        self.assertGreater(sum(k["errors"] for k in kinds.values()), 0, kinds)

    def api_back(self):
        try:
            return self.kube.request("GET", "/version", timeout=2).status == 200
        except OSError:
            return False

    def health(self, target):
        """ingressd's --health answer to GET target, as JSON (200 only)."""
        with Client(self.health_port, timeout=5) as c:
            r = c.get(target)
        self.assertEqual(r.status, 200, r)
        return json.loads(r.body)


if __name__ == "__main__":
    unittest.main()
