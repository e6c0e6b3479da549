"""ingressd's Kubernetes client (ingressd/kube.c) against an HTTPS stand-in
for the API server (kube_standin.py), through build/test/kube_probe, which
prints the events the client delivers to the object store, one per line:
paginated LIST, WATCH events, BOOKMARK, 410 Gone -> relist, the server gone
and back (reconnect with backoff, no relist), the bearer token and its
rotation. To be pointed at test/kube/'s fake API server when it lands."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import unittest

import certs
import harness
from kube_standin import StandIn, write_kubeconfig

TOKEN = "s3cr3t-token"


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
        self.crt, self.key = certs.make_pair(self.dir, "apiserver", "localhost", kind="ec")
        self.api = StandIn(self.crt, self.key, TOKEN, page=2)
        self.api.add("default", "a")
        self.api.add("default", "b")
        self.api.add("web", "c")
        self.api.start()
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        write_kubeconfig(self.kubeconfig, self.api.port, self.crt, TOKEN)
        self.probes = []

    def tearDown(self):
        for p in self.probes:
            p.kill()
        self.api.stop()
        for p in self.probes:
            bad = [l for l in p.log().splitlines()
                   if any(s in l for s in harness.SANITIZER_PATTERNS)]
            self.assertEqual(bad, [], "sanitizer reports in kube_probe's log")
        shutil.rmtree(self.dir, ignore_errors=True)

    def probe(self, *extra, env=None):
        p = Probe(["--kubeconfig", self.kubeconfig, "--kinds", "ingresses"] + list(extra),
                  self.dir, env=env)
        self.probes.append(p)
        return p

    def initial_list(self, p, start=0):
        return p.wait_lines(["LIST_BEGIN ingresses",
                             "UPSERT ingresses default/a 101",
                             "UPSERT ingresses default/b 102",
                             "UPSERT ingresses web/c 103",
                             "LIST_END ingresses"], start)

    def test_list_in_pages_then_watch_events_and_bookmark(self):
        p = self.probe()
        at = self.initial_list(p)
        lists = self.api.list_requests()
        self.assertEqual(len(lists), 2, "three objects in pages of two: %r" % lists)
        self.assertNotIn("continue", lists[0])
        self.assertEqual(lists[1]["continue"], "103:2")
        harness.poll(lambda: self.api.watch_requests(), what="a WATCH request")
        w = self.api.watch_requests()[0]
        self.assertEqual((w["resourceVersion"], w["allowWatchBookmarks"]), ("103", "true"))

        self.api.add("default", "d")
        self.api.modify("default", "a")
        self.api.delete("default", "b")
        at = p.wait_lines(["UPSERT ingresses default/d 104",
                           "UPSERT ingresses default/a 105",
                           "DELETE ingresses default/b 106"], at)
        # A bookmark delivers nothing, but the next WATCH starts from it.
        rv = self.api.bookmark()
        self.api.add("web", "e")
        at = p.wait_lines(["UPSERT ingresses web/e %d" % (rv + 1)], at)
        self.api.bookmark()
        rv = self.api.bookmark()
        self.api.end_watches()
        harness.poll(lambda: len(self.api.watch_requests()) >= 2, what="a second WATCH")
        self.assertEqual(self.api.watch_requests()[1]["resourceVersion"], str(rv))
        self.api.add("web", "f")
        p.wait_lines(["UPSERT ingresses web/f %d" % (rv + 1)], at)
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["relists"], stats["errors"]), (1, 0, 0))
        self.assertEqual(stats["watches"], 2)
        self.assertEqual(len(p.output()), 10 + 1, "10 events and the STATS line")

    def test_namespace_restricts_list_and_watch(self):
        p = self.probe("--namespace", "web")
        at = p.wait_lines(["LIST_BEGIN ingresses", "UPSERT ingresses web/c 103",
                           "LIST_END ingresses"])
        harness.poll(lambda: self.api.watch_requests(), what="a WATCH request")
        self.api.add("default", "x")
        self.api.add("web", "y")
        p.wait_lines(["UPSERT ingresses web/y 105"], at)
        paths = {path for path, _ in self.api.requests}
        self.assertEqual(paths, {"/apis/networking.k8s.io/v1/namespaces/web/ingresses"})
        p.stop()

    def test_410_gone_relists(self):
        p = self.probe()
        at = self.initial_list(p)
        harness.poll(lambda: self.api.watch_requests(), what="a WATCH request")
        # An ERROR event with code 410 on the open watch.
        self.api.delete("web", "c")
        at = p.wait_lines(["DELETE ingresses web/c 104"], at)
        self.api.expire()
        at = p.wait_lines(["LIST_BEGIN ingresses", "UPSERT ingresses default/a 101",
                           "UPSERT ingresses default/b 102", "LIST_END ingresses"], at)
        p.wait_log(r"watch ERROR event \(410 Gone\): listing again")
        # HTTP 410 on the next WATCH (the stream cut, its resourceVersion
        # compacted meanwhile).
        harness.poll(lambda: len(self.api.watch_requests()) >= 2, what="a WATCH after the relist")
        self.api.expire(error_event=False)
        at = p.wait_lines(["LIST_BEGIN ingresses", "UPSERT ingresses default/a 101",
                           "UPSERT ingresses default/b 102", "LIST_END ingresses"], at)
        p.wait_log(r"watch \(410 Gone\): listing again")
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["relists"]), (3, 2))

    def test_server_gone_and_back_rewatches_without_relist(self):
        p = self.probe()
        at = self.initial_list(p)
        harness.poll(lambda: self.api.watch_requests(), what="a WATCH request")
        self.api.stop()
        # Changes while the client cannot see them reach it after.
        self.api.add("default", "late")
        p.wait_log(r"ingresses: watch: (failed|ended).*; watching in \d+ ms")
        p.wait_log(r"watching in \d+ ms(.|\n)*watching in \d+ ms")
        self.api.start(self.api.port)
        p.wait_lines(["UPSERT ingresses default/late 104"], at)
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
        shutil.copy(self.crt, os.path.join(sa, "ca.crt"))
        with open(os.path.join(sa, "token"), "w") as f:
            f.write("expired-token\n")
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="localhost",
                   KUBERNETES_SERVICE_PORT=str(self.api.port))
        p = Probe(["--in-cluster", sa, "--kinds", "ingresses"], self.dir, env=env)
        self.probes.append(p)
        p.wait_log(r"ingresses: list: HTTP 401: Unauthorized; listing in")
        self.assertEqual(p.output(), [])
        with open(os.path.join(sa, "token.new"), "w") as f:
            f.write(TOKEN + "\n")
        os.replace(os.path.join(sa, "token.new"), os.path.join(sa, "token"))
        self.initial_list(p)
        stats = p.stop()["ingresses"]
        self.assertGreaterEqual(stats["errors"], 1)

    def test_over_long_watch_event_leads_to_a_relist(self):
        """An event over the line bound is never half-delivered; watching
        again from the same resourceVersion would meet it again, so the
        client lists (a page has its own, larger bound) and goes on."""
        p = self.probe("--max-event", "400")
        at = self.initial_list(p)
        harness.poll(lambda: self.api.watch_requests(), what="a WATCH request")
        self.api.add("default", "big", {"rules": [{"host": "x" * 500}]})
        p.wait_log(r"ingresses: watch: watch event longer than 400 bytes; listing in \d+ ms")
        at = p.wait_lines(["LIST_BEGIN ingresses", "UPSERT ingresses default/a 101",
                           "UPSERT ingresses default/b 102", "UPSERT ingresses default/big 104",
                           "UPSERT ingresses web/c 103", "LIST_END ingresses"], at)
        self.api.add("default", "small")
        p.wait_lines(["UPSERT ingresses default/small 105"], at)
        stats = p.stop()["ingresses"]
        self.assertEqual((stats["lists"], stats["errors"]), (2, 1))

if __name__ == "__main__":
    unittest.main()
