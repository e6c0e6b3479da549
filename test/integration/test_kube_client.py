"""ingressd's Kubernetes client (ingressd/kube.c) against test/kube's fake
API server (fakekube.py), through build/test/kube_probe, which prints the
events the client delivers to the object store, one per line: paginated
LIST, WATCH events, BOOKMARK, 410 Gone -> relist (an ERROR event, or HTTP
410), the server gone and back (reconnect with backoff, no relist), the
bearer token and its rotation."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube"))
from fakekube import FakeKube  # noqa: E402

INGRESSES = "/apis/networking.k8s.io/v1/namespaces/%s/ingresses"


def probe_binary():
    return os.path.abspath(os.path.join(harness.BUILD_DIR, "test", "kube_probe"))


class Probe:
    """kube_probe running, its output lines collected by a thread."""

    def __init__(self, args, directory, env=None):
        self.err_path = os.path.join(directory, "probe.log")
        self.lines = []
        self.lock = threading.Lock()
        with open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen([probe_binary()] + args, stdout=subprocess.PIPE,
                                         stderr=err, stdin=subprocess.DEVNULL, env=env)
        harness.LIVE_SERVERS.add(self)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.lock:
                self.lines.append(raw.decode().rstrip("\n"))

    def output(self):
        with self.lock:
            return list(self.lines)

    def log(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def wait_lines(self, want, start=0):
        """Wait until the lines from index start on begin with want."""
        def got():
            out = self.output()[start:]
            return out[:len(want)] == want
        harness.poll(got, what=lambda: "lines %r; got %r; log tail:\n%s"
                     % (want, self.output()[start:], self.log()[-2000:]))
        return start + len(want)

    def wait_log(self, pattern):
        rx = re.compile(pattern)
        return harness.poll(lambda: rx.search(self.log()),
                            what=lambda: "log /%s/; tail:\n%s" % (pattern, self.log()[-2000:]))

    def stop(self):
        """SIGTERM; returns {kind: {counter: n}} from its STATS lines."""
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=harness.TIMEOUT)
        self.reader.join(timeout=harness.TIMEOUT)
        harness.LIVE_SERVERS.discard(self)
        # Non-zero also when LeakSanitizer found a leak at exit.
        assert rc == 0, "kube_probe exited %d; log tail:\n%s" % (rc, self.log()[-3000:])
        stats = {}
        for line in self.output():
            if line.startswith("STATS "):
                _, kind, *pairs = line.split()
                stats[kind] = {k: int(v) for k, v in (p.split("=") for p in pairs)}
        return stats

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        harness.LIVE_SERVERS.discard(self)


class KubeClientTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-kube-")
        # No periodic bookmarks: the tests ask for each one.
        self.api = FakeKube(os.path.join(self.dir, "api"), bookmark_interval=3600,
                            verbose=False)
        os.mkdir(self.api.dir)
        self.api.start()
        harness.LIVE_SERVERS.add(self.api)
        self.kubeconfig = self.api.kubeconfig
        self.api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "web"}})
        self.rv = {}
        for ns, name in (("default", "a"), ("default", "b"), ("web", "c")):
            self.add(ns, name)
        self.probes = []

    def tearDown(self):
        for p in self.probes:
            p.kill()
        self.api.stop()
        harness.LIVE_SERVERS.discard(self.api)
        for p in self.probes:
            bad = [l for l in p.log().splitlines()
                   if any(s in l for s in harness.SANITIZER_PATTERNS)]
            self.assertEqual(bad, [], "sanitizer reports in kube_probe's log")
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- the cluster's side ----

    def add(self, ns, name, annotations=None):
        """Create or replace the Ingress ns/name; its resourceVersion."""
        obj = {"metadata": {"name": name, "annotations": annotations or {}}, "spec": {}}
        exists = self.api.request("GET", INGRESSES % ns + "/" + name).status == 200
        r = self.api.request("PUT" if exists else "POST",
                             INGRESSES % ns + ("/" + name if exists else ""), obj)
        self.assertIn(r.status, (200, 201), r)
        rv = int(r.json()["metadata"]["resourceVersion"])
        self.rv["%s/%s" % (ns, name)] = rv
        return rv

    modify = add

    def delete(self, ns, name):
        r = self.api.request("DELETE", INGRESSES % ns + "/" + name)
        self.assertEqual(r.status, 200, r)
        return self.api.control("stats")["resourceVersion"]

    def bookmark(self):
        """A BOOKMARK on every open watch at a resourceVersion no Ingress
        event has (a Namespace made meanwhile, as when other kinds
        change); returns it."""
        n = len(self.api.control("requests"))
        r = self.api.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bump%d" % n}})
        self.assertEqual(r.status, 201, r)
        self.api.control("bookmark")
        return int(r.json()["metadata"]["resourceVersion"])

    def requests(self, watch):
        return [q["query"] for q in self.api.control("requests")
                if q["method"] == "GET" and q["path"].endswith("/ingresses")
                and (q["query"].get("watch") in ("1", "true")) == watch]

    def watch_requests(self):
        return self.requests(True)

    def list_requests(self):
        return self.requests(False)

    # ---- the client's side ----

    def probe(self, *extra, env=None):
        p = Probe(["--kubeconfig", self.kubeconfig, "--kinds", "ingresses", "--limit", "2"]
                  + list(extra), self.dir, env=env)
        self.probes.append(p)
        return p

    def initial_list(self, p, start=0, names=("default/a", "default/b", "web/c")):
        return p.wait_lines(["LIST_BEGIN ingresses"]
                            + ["UPSERT ingresses %s %d" % (n, self.rv[n]) for n in names]
                            + ["LIST_END ingresses"], start)

    def test_list_in_pages_then_watch_events_and_bookmark(self):
        p = self.probe()
        at = self.initial_list(p)
        lists = self.list_requests()
        self.assertEqual(len(lists), 2, "three objects in pages of two: %r" % lists)
        self.assertNotIn("continue", lists[0])
        self.assertEqual(lists[0]["limit"], "2")
        self.assertIn("continue", lists[1])
        harness.poll(lambda: self.watch_requests(), what="a WATCH request")
        w = self.watch_requests()[0]
        self.assertEqual((w["resourceVersion"], w["allowWatchBookmarks"]),
                         (str(self.rv["web/c"]), "true"))

        d = self.add("default", "d")
        a = self.modify("default", "a")
        b = self.delete("default", "b")
        at = p.wait_lines(["UPSERT ingresses default/d %d" % d,
                           "UPSERT ingresses default/a %d" % a,
                           "DELETE ingresses default/b %d" % b], at)
        # A bookmark delivers nothing, but the next WATCH starts from it.
        self.bookmark()
        e = self.add("web", "e")
        at = p.wait_lines(["UPSERT ingresses web/e %d" % e], at)
        self.bookmark()
        rv = self.bookmark()
        self.api.control("drop-watches", clean=True)
        harness.poll(lambda: len(self.watch_requests()) >= 2, what="a second WATCH")
        self.assertEqual(self.watch_requests()[1]["resourceVersion"], str(rv))
        f = self.add("web", "f")
        p.wait_lines(["UPSERT ingresses web/f %d" % f], at)
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["relists"], stats["errors"]), (1, 0, 0))
        self.assertEqual(stats["watches"], 2)
        self.assertEqual(len(p.output()), 10 + 1, "10 events and the STATS line")
    def test_namespace_restricts_list_and_watch(self):
        p = self.probe("--namespace", "web")
        at = self.initial_list(p, names=("web/c",))
        harness.poll(lambda: self.watch_requests(), what="a WATCH request")
        self.add("default", "x")
        y = self.add("web", "y")
        p.wait_lines(["UPSERT ingresses web/y %d" % y], at)
        paths = {q["path"] for q in self.api.control("requests") if q["method"] == "GET"
                 and q["path"].endswith("/ingresses")}
        self.assertEqual(paths, {INGRESSES % "web"})
        p.stop()

    def test_410_gone_relists(self):
        p = self.probe()
        at = self.initial_list(p)
        harness.poll(lambda: self.watch_requests(), what="a WATCH request")
        # An ERROR event with code 410 on the open watch.
        c = self.delete("web", "c")
        at = p.wait_lines(["DELETE ingresses web/c %d" % c], at)
        self.api.control("gone", open=True)
        at = self.initial_list(p, at, names=("default/a", "default/b"))
        p.wait_log(r"watch ERROR event \(410 Gone\): listing again")
        # HTTP 410 on the next WATCH (the stream cut, its resourceVersion
        # compacted meanwhile).
        harness.poll(lambda: len(self.watch_requests()) >= 2, what="a WATCH after the relist")
        self.api.control("gone", http_watches=1)
        self.api.control("drop-watches")
        at = self.initial_list(p, at, names=("default/a", "default/b"))
        p.wait_log(r"watch \(410 Gone\): listing again")
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["relists"]), (3, 2))

    def test_server_gone_and_back_rewatches_without_relist(self):
        p = self.probe()
        at = self.initial_list(p)
        harness.poll(lambda: self.watch_requests(), what="a WATCH request")
        # Every connection cut, every new one reset, until it is back.
        self.api.control("unavailable", seconds=600)
        p.wait_log(r"ingresses: watch: (failed|ended).*; watching in \d+ ms")
        p.wait_log(r"watching in \d+ ms(.|\n)*watching in \d+ ms")
        self.api.control("unavailable", seconds=0)
        # Made while the client waits out its backoff: it sees the change
        # by watching from where it was, not by listing again.
        late = self.add("default", "late")
        p.wait_lines(["UPSERT ingresses default/late %d" % late], at)
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["relists"]), (1, 0))
        self.assertGreaterEqual(stats["errors"], 2)
        waits = [int(m) for m in re.findall(r"watching in (\d+) ms", p.log())]
        # The backoff doubles from 250 ms, +-20%.
        self.assertTrue(200 <= waits[0] <= 300 and 400 <= waits[1] <= 600, waits)

    def test_wrong_token_refused_then_rotated_token_file_read(self):
        """In-cluster: the service account's token file; a token the server
        refuses gives 401 and a retry, the rotated file is read again."""
        sa = os.path.join(self.dir, "sa")
        os.mkdir(sa)
        shutil.copy(self.api.ca, os.path.join(sa, "ca.crt"))
        with open(os.path.join(sa, "token"), "w") as f:
            f.write("expired-token\n")
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="localhost",
                   KUBERNETES_SERVICE_PORT=str(self.api.port))
        p = Probe(["--in-cluster", sa, "--kinds", "ingresses", "--limit", "2"], self.dir,
                  env=env)
        self.probes.append(p)
        p.wait_log(r"ingresses: list: HTTP 401: Unauthorized; listing in")
        self.assertEqual(p.output(), [])
        with open(os.path.join(sa, "token.new"), "w") as f:
            f.write(self.api.token + "\n")
        os.replace(os.path.join(sa, "token.new"), os.path.join(sa, "token"))
        self.initial_list(p)
        stats = p.stop()["ingresses"]
        self.assertGreaterEqual(stats["errors"], 1)

    def test_over_long_watch_event_leads_to_a_relist(self):
        """An event over the line bound is never half-delivered; watching
        again from the same resourceVersion would meet it again, so the
        client lists (a page has its own, larger bound) and goes on."""
        p = self.probe("--max-event", "600")
        at = self.initial_list(p)
        harness.poll(lambda: self.watch_requests(), what="a WATCH request")
        self.add("default", "big", {"note": "x" * 600})
        p.wait_log(r"ingresses: watch: watch event longer than 600 bytes; listing in \d+ ms")
        at = self.initial_list(p, at, names=("default/a", "default/b", "default/big", "web/c"))
        small = self.add("default", "small")
        p.wait_lines(["UPSERT ingresses default/small %d" % small], at)
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["errors"]), (2, 1))


if __name__ == "__main__":
    unittest.main()
