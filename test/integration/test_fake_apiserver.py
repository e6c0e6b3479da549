"""The fake Kubernetes API server (test/kube/fake_apiserver.py) speaks the
real wire protocol: kubectl drives it from real manifests, and a raw client
sees what the real API server sends (pagination with consistent continue
tokens, watches from a resourceVersion, BOOKMARKs, 410 Gone past the
history) and what the control API does (unavailability, forced 410).

It runs no scalwsd: the sanitizer build skips it (it would test nothing
more)."""

import json
import os
import socket
import ssl
import sys
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
KUBE = os.path.join(HERE, "..", "kube")
sys.path.insert(0, KUBE)

import fakekube  # noqa: E402
from certs import make_pair  # noqa: E402
from harness import LIVE_SERVERS, TIMEOUT, poll, sanitized  # noqa: E402

MANIFESTS = os.path.join(KUBE, "manifests")
SVC = "/api/v1/namespaces/default/services"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
ING = "/apis/networking.k8s.io/v1/namespaces/demo/ingresses"


def service(name, port=80, labels=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"ports": [{"name": "http", "port": port}]}}


def endpoint_slice(name, service_name, addresses):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses]}


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


@unittest.skipIf(sanitized(), "runs no scalwsd: nothing for the sanitizers to check")
class FakeApiServer(unittest.TestCase):
    def setUp(self):
        self.kube = fakekube.FakeKube(bookmark_interval=3600).start()
        LIVE_SERVERS.add(self.kube)
        self.addCleanup(LIVE_SERVERS.discard, self.kube)
        self.addCleanup(self.kube.stop)

    def ok(self, method, path, body=None, status=(200, 201), **kw):
        r = self.kube.request(method, path, body, **kw)
        self.assertIn(r.status, status, r)
        return r.json()

    def create_services(self, *names):
        return [self.ok("POST", SVC, service(n)) for n in names]

    def now_rv(self):
        return self.kube.control("stats")["resourceVersion"]

    def list(self, path, **params):
        return self.ok("GET", path + "?" + urllib.parse.urlencode(params))

    # -- authentication and discovery ----------------------------------------

    def test_bearer_token_required(self):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = self.kube.request("GET", "/api/v1/namespaces", token=False, headers=headers)
            self.assertEqual(r.status, 401, r)
            self.assertEqual((r.json()["kind"], r.json()["reason"]), ("Status", "Unauthorized"))
        self.assertEqual(self.ok("GET", "/version")["major"], "1")

    def test_discovery_names_kinds_scope_and_verbs(self):
        groups = {g["name"] for g in self.ok("GET", "/apis")["groups"]}
        self.assertTrue({"networking.k8s.io", "discovery.k8s.io"} <= groups, groups)
        self.assertEqual(self.ok("GET", "/api")["versions"], ["v1"])
        found = {}
        for path in ("/api/v1", "/apis/networking.k8s.io/v1", "/apis/discovery.k8s.io/v1"):
            for r in self.ok("GET", path)["resources"]:
                found[r["name"]] = r
        for name, kind, namespaced in (("namespaces", "Namespace", False),
                                       ("services", "Service", True),
                                       ("secrets", "Secret", True),
                                       ("endpointslices", "EndpointSlice", True),
                                       ("ingresses", "Ingress", True),
                                       ("ingressclasses", "IngressClass", False)):
            self.assertEqual((found[name]["kind"], found[name]["namespaced"]), (kind, namespaced))
            self.assertTrue({"get", "list", "watch", "create", "update", "patch", "delete"}
                            <= set(found[name]["verbs"]), name)
        self.assertIn("ingresses/status", found)
        self.assertEqual(self.kube.request("GET", "/openapi/v2").status, 404)

    # -- kubectl ------------------------------------------------------------------

    @unittest.skipUnless(os.access(fakekube.KUBECTL, os.X_OK), "kubectl is not installed")
    def test_kubectl_apply_get_patch_delete_real_manifests(self):
        kube = self.kube
        kube.kubectl("apply", "-f", os.path.join(MANIFESTS, "00-namespace.yaml"))
        crt, key = make_pair(kube.dir, "web", "web.demo.test", kind="ec")
        # kubectl create sends protobuf, which the fake does not read: the
        # Secret goes through apply, as in `create --dry-run=client -o yaml | apply`.
        secret = kube.kubectl("-n", "demo", "create", "secret", "tls", "web-tls", "--cert", crt,
                              "--key", key, "--dry-run=client", "-o", "yaml").stdout
        kube.kubectl("apply", "-f", "-", input=secret)
        out = kube.kubectl("apply", "-f", MANIFESTS).stdout
        for line in ("namespace/demo unchanged", "ingressclass.networking.k8s.io/scalws created",
                     "service/web created", "endpointslice.discovery.k8s.io/web-1 created",
                     "ingress.networking.k8s.io/web created"):
            self.assertIn(line, out)

        ing = json.loads(kube.kubectl("-n", "demo", "get", "ingress", "web", "-o", "json").stdout)
        paths = ing["spec"]["rules"][0]["http"]["paths"]
        self.assertEqual([(p["path"], p["pathType"]) for p in paths],
                         [("/healthz", "Exact"), ("/", "Prefix")])
        self.assertEqual(ing["spec"]["ingressClassName"], "scalws")
        meta = ing["metadata"]
        self.assertEqual(meta["generation"], 1)
        self.assertTrue(meta["uid"] and meta["creationTimestamp"].endswith("Z"), meta)
        secret = self.ok("GET", "/api/v1/namespaces/demo/secrets/web-tls")
        self.assertEqual(secret["type"], "kubernetes.io/tls")
        self.assertEqual(set(secret["data"]), {"tls.crt", "tls.key"})
        cls = self.ok("GET", "/apis/networking.k8s.io/v1/ingressclasses/scalws")
        self.assertEqual(cls["spec"]["controller"], "scalws.io/ingress-controller")

        # A second apply of a changed manifest is a strategic merge PATCH:
        # the Service's ports merge by port, and the generation moves.
        with open(os.path.join(MANIFESTS, "20-service.yaml")) as f:
            text = f.read().replace("targetPort: 8080", "targetPort: 8081\n"
                                    "    - name: https\n      port: 443\n      targetPort: 8443")
        changed = os.path.join(kube.dir, "service.yaml")
        with open(changed, "w") as f:
            f.write(text)
        self.assertIn("service/web configured", kube.kubectl("apply", "-f", changed).stdout)
        svc = self.ok("GET", "/api/v1/namespaces/demo/services/web")
        self.assertEqual([(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
                         [(80, 8081), (443, 8443)])
        self.assertEqual(svc["metadata"]["generation"], 2)
        kube.kubectl("apply", "-f", os.path.join(MANIFESTS, "20-service.yaml"))
        svc = self.ok("GET", "/api/v1/namespaces/demo/services/web")
        self.assertEqual([(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]], [(80, 8080)])

        listed = kube.kubectl("get", "ingresses", "--all-namespaces").stdout
        self.assertRegex(listed, r"demo\s+web\s")
        self.assertIn('ingress.networking.k8s.io "web" deleted',
                      kube.kubectl("delete", "-f", os.path.join(MANIFESTS, "40-ingress.yaml"))
                      .stdout)
        self.assertEqual(kube.request("GET", ING + "/web").status, 404)
        gone = kube.kubectl("-n", "demo", "get", "ingress", "web", check=False)
        self.assertNotEqual(gone.returncode, 0)
        self.assertIn("NotFound", gone.stderr)
        # A namespace's deletion takes its objects along.
        kube.kubectl("delete", "namespace", "demo")
        self.assertEqual(self.list("/api/v1/services")["items"], [])

    # -- writes -------------------------------------------------------------

    def test_update_conflict_patches_and_status(self):
        svc = self.create_services("a")[0]
        self.assertEqual(self.kube.request("POST", SVC, service("a")).json()["reason"],
                         "AlreadyExists")
        stale = dict(svc, spec={"ports": [{"port": 81}]})
        self.ok("PUT", SVC + "/a", stale)
        r = self.kube.request("PUT", SVC + "/a", stale)
        self.assertEqual((r.status, r.json()["reason"]), (409, "Conflict"))
        merged = self.ok("PATCH", SVC + "/a", {"metadata": {"labels": {"x": "1"}}},
                         content_type="application/merge-patch+json")
        self.assertEqual(merged["metadata"]["labels"], {"x": "1"})
        patched = self.ok("PATCH", SVC + "/a", [{"op": "replace", "path": "/spec/ports/0/port",
                                                 "value": 82}],
                          content_type="application/json-patch+json")
        self.assertEqual(patched["spec"]["ports"][0]["port"], 82)
        self.assertEqual(self.kube.request("PATCH", SVC + "/a", {}, content_type="text/plain")
                         .status, 415)
        # The status subresource changes the status only.
        self.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "demo"}})
        self.ok("POST", ING, {"metadata": {"name": "i"}, "spec": {"rules": []}})
        lb = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
        after = self.ok("PUT", ING + "/i/status", {"metadata": {"name": "i"}, "spec": {},
                                                    "status": lb})
        self.assertEqual((after["status"], after["spec"]), (lb, {"rules": []}))
        self.assertEqual(after["metadata"]["generation"], 1)
        r = self.kube.request("POST", "/api/v1/namespaces/nowhere/services", service("b"))
        self.assertEqual(r.status, 404)

    # -- LIST ---------------------------------------------------------------------

    def test_list_pages_are_one_consistent_snapshot_across_a_change(self):
        self.create_services("s1", "s2", "s3", "s4", "s5")
        first = self.list(SVC, limit=2)
        rv = first["metadata"]["resourceVersion"]
        self.assertEqual([i["metadata"]["name"] for i in first["items"]], ["s1", "s2"])
        self.assertEqual(first["metadata"]["remainingItemCount"], 3)
        self.assertNotIn("kind", first["items"][0])     # as the API sends list items
        # Changes between the pages: the continued list does not see them.
        self.create_services("s0", "s6")
        self.ok("DELETE", SVC + "/s4")
        self.ok("PATCH", SVC + "/s3", {"metadata": {"labels": {"new": "yes"}}},
                content_type="application/merge-patch+json")
        second = self.list(SVC, limit=2, **{"continue": first["metadata"]["continue"]})
        self.assertEqual(second["metadata"]["resourceVersion"], rv)
        self.assertEqual([i["metadata"]["name"] for i in second["items"]], ["s3", "s4"])
        self.assertNotIn("labels", second["items"][0]["metadata"])
        third = self.list(SVC, limit=2, **{"continue": second["metadata"]["continue"]})
        self.assertEqual([i["metadata"]["name"] for i in third["items"]], ["s5"])
        self.assertNotIn("continue", third["metadata"])
        now = self.list(SVC)
        self.assertEqual([i["metadata"]["name"] for i in now["items"]],
                         ["s0", "s1", "s2", "s3", "s5", "s6"])
        self.assertGreater(int(now["metadata"]["resourceVersion"]), int(rv))

    def test_list_selectors(self):
        self.ok("POST", SLICES, endpoint_slice("web-a", "web", ["10.0.0.1"]))
        self.ok("POST", SLICES, endpoint_slice("web-b", "web", ["10.0.0.2"]))
        self.ok("POST", SLICES, endpoint_slice("api-a", "api", ["10.0.0.3"]))
        names = [i["metadata"]["name"] for i in self.list(
            SLICES, labelSelector="kubernetes.io/service-name=web")["items"]]
        self.assertEqual(names, ["web-a", "web-b"])
        names = [i["metadata"]["name"] for i in self.list(
            "/apis/discovery.k8s.io/v1/endpointslices",
            labelSelector="kubernetes.io/service-name!=web")["items"]]
        self.assertEqual(names, ["api-a"])
        names = [i["metadata"]["name"] for i in self.list(
            SLICES, fieldSelector="metadata.name=web-b")["items"]]
        self.assertEqual(names, ["web-b"])

    def test_list_continue_and_exact_resource_version_expire_with_410(self):
        self.create_services("a", "b", "c")
        first = self.list(SVC, limit=1)
        old_rv = first["metadata"]["resourceVersion"]
        # Before compaction, an exact list at the old resourceVersion is
        # the state then; too new a resourceVersion is a timeout.
        self.ok("DELETE", SVC + "/c")
        at = self.list(SVC, resourceVersion=old_rv, resourceVersionMatch="Exact")
        self.assertEqual(len(at["items"]), 3)
        r = self.kube.request("GET", SVC + "?resourceVersion=999999")
        self.assertEqual((r.status, r.json()["reason"]), (504, "Timeout"))

        self.kube.control("compact")
        r = self.kube.request("GET", SVC + "?limit=1&continue="
                              + urllib.parse.quote(first["metadata"]["continue"]))
        st = r.json()
        self.assertEqual((r.status, st["kind"], st["reason"], st["code"]),
                         (410, "Status", "Expired", 410))
        self.assertTrue(st["metadata"]["continue"])
        for query in ("resourceVersion=%s&limit=10" % old_rv,
                      "resourceVersion=%s&resourceVersionMatch=Exact" % old_rv):
            r = self.kube.request("GET", SVC + "?" + query)
            self.assertEqual((r.status, r.json()["reason"]), (410, "Expired"), query)
        # Not older than: any state at least that new, so no 410.
        self.assertEqual(len(self.list(SVC, resourceVersion=old_rv)["items"]), 2)
        self.assertEqual(self.kube.control("stats")["gone_list"], 3)

    # -- WATCH --------------------------------------------------------------------

    def test_watch_from_resource_version_sees_exactly_the_later_events_in_order(self):
        a = self.create_services("a")[0]
        since = rv_of(a)
        b = self.create_services("b")[0]
        a2 = self.ok("PATCH", SVC + "/a", {"metadata": {"labels": {"v": "2"}}},
                     content_type="application/merge-patch+json")
        self.ok("DELETE", SVC + "/b")
        self.ok("POST", SLICES, endpoint_slice("other-kind", "a", ["10.0.0.1"]))
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % since) as w:
            self.assertEqual(w.status, 200)
            self.assertEqual(w.resp.getheader("Transfer-Encoding"), "chunked")
            events = [w.next_event() for _ in range(3)]
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                             [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")])
            rvs = [rv_of(e["object"]) for e in events]
            self.assertEqual(rvs[:2], [rv_of(b), rv_of(a2)])
            self.assertEqual(rvs, sorted(rvs))
            self.assertEqual((events[0]["object"]["kind"], events[0]["object"]["apiVersion"]),
                             ("Service", "v1"))
            # Then live events.
            self.create_services("c")
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "c"))

    def test_watch_without_resource_version_starts_with_the_state(self):
        self.create_services("a", "b")
        with self.kube.watch(SVC + "?watch=true") as w:
            got = [w.next_event() for _ in range(2)]
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in got],
                             [("ADDED", "a"), ("ADDED", "b")])
            self.ok("DELETE", SVC + "/a")
            self.assertEqual(w.next_event()["type"], "DELETED")

    def test_watch_label_selector_sees_objects_enter_and_leave(self):
        path = SLICES + "?watch=1&labelSelector=kubernetes.io%2Fservice-name%3Dweb"
        with self.kube.watch(path + "&resourceVersion=%d" % self.now_rv()) as w:
            self.ok("POST", SLICES, endpoint_slice("api-1", "api", ["10.0.0.9"]))
            made = self.ok("POST", SLICES, endpoint_slice("web-1", "web", ["10.0.0.1"]))
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "web-1"))
            made["metadata"]["labels"]["kubernetes.io/service-name"] = "api"
            self.ok("PUT", SLICES + "/web-1", made)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "web-1"))

    def test_bookmarks_on_demand_and_periodic_only_when_allowed(self):
        self.create_services("a")
        rv = self.now_rv()
        with self.kube.watch(SVC + "?watch=1&allowWatchBookmarks=true&resourceVersion=%d"
                             % rv) as w, \
                self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % rv) as plain:
            self.ok("POST", SLICES, endpoint_slice("s", "a", ["10.0.0.1"]))  # another kind
            self.kube.control("bookmark")
            ev = w.next_event()
            self.assertEqual(ev["type"], "BOOKMARK")
            self.assertEqual(ev["object"]["kind"], "Service")
            self.assertEqual(rv_of(ev["object"]), rv + 1)   # past the other kind's change
            self.kube.control("config", bookmark_interval=0.05)
            self.assertEqual(w.next_event()["type"], "BOOKMARK")
            # The watch that did not ask for bookmarks gets the next change.
            self.create_services("b")
            ev = plain.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))
        # The initial state of a streaming list ends with a marked bookmark.
        with self.kube.watch(SVC + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
                             "&resourceVersionMatch=NotOlderThan") as w:
            got = w.events_until(lambda e: e["type"] == "BOOKMARK")
            self.assertEqual([e["type"] for e in got], ["ADDED", "ADDED", "BOOKMARK"])
            self.assertEqual(got[-1]["object"]["metadata"]["annotations"],
                             {"k8s.io/initial-events-end": "true"})

    def assert_gone_event(self, w):
        self.assertEqual(w.status, 200)
        ev = w.next_event()
        self.assertEqual(ev["type"], "ERROR", ev)
        st = ev["object"]
        self.assertEqual((st["kind"], st["status"], st["reason"], st["code"]),
                         ("Status", "Failure", "Expired", 410))
        self.assertIn("too old resource version", st["message"])
        self.assertIsNone(w.next_event())

    def test_watch_older_than_the_history_gets_an_error_event_410(self):
        self.kube.control("config", history=3)
        first = self.create_services("a")[0]
        self.create_services("b", "c", "d", "e")
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % rv_of(first)) as w:
            self.assert_gone_event(w)
        recent = self.now_rv() - 2
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % recent) as w:
            self.assertEqual(w.next_event()["object"]["metadata"]["name"], "d")
        # Compaction to the newest resourceVersion: every older one is gone.
        self.kube.control("compact")
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % recent) as w:
            self.assert_gone_event(w)
        self.assertEqual(self.kube.control("stats")["gone_watch"], 2)

    def test_forced_gone_on_next_watch_and_on_open_watches(self):
        rv = rv_of(self.create_services("a")[0])
        self.kube.control("gone", watches=1)
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % rv) as w:
            self.assert_gone_event(w)
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % rv) as w:
            self.kube.control("gone", open=True)
            self.assert_gone_event(w)
        self.kube.control("gone", lists=1)
        self.assertEqual(self.kube.request("GET", SVC + "?limit=5&resourceVersion=%d" % rv)
                         .status, 410)
        self.assertEqual(self.kube.request("GET", SVC + "?limit=5&resourceVersion=%d" % rv)
                         .status, 200)

    def test_forced_http_410_on_next_watch_and_the_requests_seen(self):
        rv = rv_of(self.create_services("a")[0])
        self.kube.control("gone", http_watches=1)
        r = self.kube.request("GET", SVC + "?watch=1&resourceVersion=%d" % rv)
        self.assertEqual((r.status, r.json()["reason"]), (410, "Expired"))
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % rv) as w:
            self.assertEqual(w.status, 200)
        watches = [q for q in self.kube.control("requests")
                   if q["path"] == SVC and q["query"].get("watch") == "1"]
        self.assertEqual([q["query"]["resourceVersion"] for q in watches], [str(rv)] * 2)
        self.assertTrue(all(q["method"] == "GET" for q in watches))

    def test_timeout_seconds_and_drop_watches_end_the_stream(self):
        with self.kube.watch(SVC + "?watch=1&timeoutSeconds=1&resourceVersion=%d"
                             % self.now_rv()) as w:
            self.assertIsNone(w.next_event(timeout=30))
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % self.now_rv()) as w:
            poll(lambda: self.kube.control("stats")["watches_open"] == 1, what="watch open")
            self.kube.control("drop-watches", clean=True)
            self.assertIsNone(w.next_event())
        poll(lambda: self.kube.control("stats")["watches_open"] == 0, what="watches closed")

    # -- unavailability ------------------------------------------------------------

    def test_unavailable_cuts_connections_refuses_then_recovers(self):
        idle = self.kube.connection()
        self.addCleanup(idle.close)
        idle.request("GET", "/version", headers={"Authorization": "Bearer " + self.kube.token})
        idle.getresponse().read()
        with self.kube.watch(SVC + "?watch=1&resourceVersion=%d" % self.now_rv()) as w:
            poll(lambda: self.kube.control("stats")["watches_open"] == 1, what="watch open")
            self.kube.control("unavailable", seconds=600)
            self.assertIsNone(w.next_event())
        # The idle keep-alive connection is closed too, unasked.
        idle.sock.settimeout(TIMEOUT)
        try:
            self.assertEqual(idle.sock.recv(1), b"")
        except socket.timeout:
            self.fail("the idle connection stayed open")
        except (ConnectionError, ssl.SSLError):
            pass
        with self.assertRaises((ConnectionError, OSError)):
            self.kube.request("GET", SVC)
        self.kube.control("unavailable", seconds=600, mode="503")
        r = self.kube.request("GET", SVC)
        self.assertEqual((r.status, r.json()["reason"]), (503, "ServiceUnavailable"))
        self.assertTrue(self.kube.control("stats")["unavailable"])
        # It ends by itself.
        self.kube.control("unavailable", seconds=0.2)

        def answers():
            try:
                return self.kube.request("GET", SVC).status == 200
            except OSError:
                return False
        poll(answers, what="the API server back")
        self.assertGreaterEqual(self.kube.control("stats")["refused"], 2)

    # -- bulk load -------------------------------------------------------------------

    def test_bulk_load_makes_services_slices_and_ingresses(self):
        done = self.kube.control("load", namespace="bench", ingresses=30, endpoints=3500)
        self.assertEqual(done["endpoints"], 3500)
        self.assertEqual(done["objects"]["ingresses"], 30)
        # 3500 endpoints over 30 services: 117 or 116 each, in slices of <= 100.
        self.assertEqual(done["objects"]["endpointslices"], 60)
        slices = self.list("/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices",
                           labelSelector="kubernetes.io/service-name=svc-7")["items"]
        self.assertEqual([len(s["endpoints"]) for s in slices], [100, 17])
        ing = self.ok("GET", "/apis/networking.k8s.io/v1/namespaces/bench/ingresses/ing-7")
        self.assertEqual(ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
                         ["name"], "svc-7")
        total = sum(len(self.list("/apis/networking.k8s.io/v1/ingresses", limit=7,
                                  **({"continue": c} if c else {}))["items"])
                    for c in self.continues("/apis/networking.k8s.io/v1/ingresses", 7))
        self.assertEqual(total, 30)

    def continues(self, path, limit):
        """The continue tokens of a paginated list, "" for the first page."""
        tokens, token = [""], ""
        for _ in range(1000):
            page = self.list(path, limit=limit, **({"continue": token} if token else {}))
            token = page["metadata"].get("continue")
            if not token:
                return tokens
            tokens.append(token)
        raise AssertionError("no end of the list")


if __name__ == "__main__":
    unittest.main()
