"""What tests use to run the fake Kubernetes API server (fake_apiserver.py):
start it on a free 127.0.0.1 port as a process of its own, with a
certificate made at start and a random bearer token; a kubeconfig for it;
kubectl against it; raw requests, watches and the /_fake/ control calls;
stop it.

    kube = FakeKube().start()
    kube.kubectl("apply", "-f", "manifests/")      # --validate=false added
    st, body = kube.request("GET", "/apis/networking.k8s.io/v1/ingresses")
    with kube.watch("/api/v1/services?watch=1&resourceVersion=5") as w:
        ev = w.next_event()
    kube.control("unavailable", seconds=30)
    kube.stop()

Readiness is a connection that succeeds, never a sleep; every wait is
bounded. kill() is for a watchdog (run.py's LIVE_SERVERS accept it).
"""

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from certs import make_pair  # noqa: E402
from harness import free_port, poll  # noqa: E402

PYTHON = "/usr/bin/python3"
# Not a Debian package (bookworm has none): installed by hand where it is.
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def write_kubeconfig(path, server, ca_path, token, namespace="default"):
    """A kubeconfig (the block YAML kubectl writes) with one cluster, user
    and context: the server URL, the CA inline (certificate-authority-data)
    and the bearer token."""
    import base64
    with open(ca_path, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    text = """apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: "%s"
    certificate-authority-data: "%s"
users:
- name: fake
  user:
    token: "%s"
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
    namespace: "%s"
current-context: fake
preferences: {}
""" % (server, ca, token, namespace)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Reply %d %r>" % (self.status, self.body[:300])


class Watch:
    """One open watch: its events one by one (next_event), bounded in time."""

    def __init__(self, conn, resp):
        self.conn = conn
        self.resp = resp
        self.status = resp.status

    def next_event(self, timeout=10):
        """The next event as a dict, or None when the server ended the
        stream (cleanly or not). socket.timeout after `timeout` seconds."""
        self.conn.sock.settimeout(timeout)
        try:
            line = self.resp.readline()
        except (http.client.IncompleteRead, ConnectionError, ssl.SSLError):
            return None
        if not line:
            return None
        return json.loads(line)

    def events_until(self, predicate, timeout=10, limit=100000):
        """Events read until one satisfies predicate (included); bounded by
        timeout seconds in all and by limit events."""
        deadline = time.monotonic() + timeout
        out = []
        while len(out) < limit:
            ev = self.next_event(max(0.01, deadline - time.monotonic()))
            if ev is None:
                raise AssertionError("watch ended after %d events: %r" % (len(out), out[-3:]))
            out.append(ev)
            if predicate(ev):
                return out
        raise AssertionError("no matching event in %d events" % limit)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FakeKube:
    def __init__(self, directory=None, token=None, history=None, bookmark_interval=None,
                 verbose=True):
        self.dir = directory or tempfile.mkdtemp(prefix="fakekube-")
        self.own_dir = directory is None
        self.token = token or secrets.token_hex(16)
        self.history = history
        self.bookmark_interval = bookmark_interval
        self.verbose = verbose
        self.port = None
        self.proc = None
        self.log_path = os.path.join(self.dir, "apiserver.log")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.ca = None
        self.key = None

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.port

    def start(self, timeout=10, port=None):
        if self.ca is None:
            self.ca, self.key = make_pair(self.dir, "apiserver", "fake-apiserver",
                                          dns=["localhost"], kind="ec",
                                          ips=["127.0.0.1", "::1"])
        self.port = port or self.port or free_port()
        cmd = [PYTHON, os.path.join(HERE, "fake_apiserver.py"), "--port", str(self.port),
               "--token", self.token, "--cert", self.ca, "--key", self.key]
        if self.history is not None:
            cmd += ["--history", str(self.history)]
        if self.bookmark_interval is not None:
            cmd += ["--bookmark-interval", str(self.bookmark_interval)]
        if self.verbose:
            cmd.append("--verbose")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        write_kubeconfig(self.kubeconfig, self.url, self.ca, self.token)

        def accepts():
            if self.proc.poll() is not None:
                raise AssertionError("fake API server exited with %s:\n%s"
                                     % (self.proc.returncode, self.log_tail()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        poll(accepts, timeout=timeout, interval=0.02,
             what="the fake API server to accept on port %d" % self.port)
        return self

    def stop(self, timeout=10):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.proc.wait(timeout)
        self.proc = None
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def log_tail(self, n=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    # -- clients -------------------------------------------------------------

    def ssl_context(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        return ctx

    def connection(self, timeout=10):
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self.ssl_context())

    def request(self, method, path, body=None, content_type="application/json", headers=None,
                token=True, timeout=10):
        """One request on a connection of its own; a dict or list body is
        sent as JSON. Returns a Reply."""
        hdrs = {"Accept": "application/json"}
        if token:
            hdrs["Authorization"] = "Bearer " + self.token
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            hdrs["Content-Type"] = content_type
        hdrs.update(headers or {})
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return Reply(resp.status, dict(resp.getheaders()), resp.read())
        finally:
            conn.close()

    def control(self, name, **args):
        """A /_fake/ control call (GET for stats, POST otherwise); the
        answer as a dict."""
        method = "GET" if name in ("stats", "requests") else "POST"
        r = self.request(method, "/_fake/" + name, None if method == "GET" else args)
        if r.status != 200:
            raise AssertionError("control %s: %r" % (name, r))
        return r.json()

    def watch(self, path, timeout=10):
        """Open a watch (path carries ?watch=1 and the rest); the answer's
        head is read, the events are read through the returned Watch."""
        conn = self.connection(timeout)
        conn.request("GET", path, headers={"Authorization": "Bearer " + self.token,
                                           "Accept": "application/json"})
        return Watch(conn, conn.getresponse())

    def kubectl(self, *args, input=None, check=True, timeout=60):
        """Run kubectl with this server's kubeconfig (and --validate=false
        for the verbs that validate); returns the CompletedProcess (text)."""
        cmd = [KUBECTL, "--kubeconfig", self.kubeconfig] + list(args)
        if args and args[0] in ("apply", "create", "replace"):
            cmd.append("--validate=false")
        p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, env=dict(os.environ, HOME=self.dir))
        if check and p.returncode != 0:
            raise AssertionError("%s: exit %d\n%s%s" % (" ".join(cmd), p.returncode, p.stdout,
                                                         p.stderr))
        return p
