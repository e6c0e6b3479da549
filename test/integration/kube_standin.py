"""A minimal stand-in for the Kubernetes API server, for the tests of
ingressd's Kubernetes client (test_kube_client.py) until they point at
test/kube/'s fake API server: HTTPS, a bearer token, one collection
(networking.k8s.io/v1 ingresses), paginated LIST (limit and continue), a
chunked WATCH from a resourceVersion with BOOKMARKs, and 410 Gone for a
resourceVersion older than what it keeps. The test drives it with
add/modify/delete/bookmark/expire and can stop it and start it again on the
same port. Only 127.0.0.1."""

import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# All namespaces, or one.
COLLECTION = re.compile(r"^/apis/networking\.k8s\.io/v1(?:/namespaces/([^/]+))?/ingresses$")


class StandIn:
    def __init__(self, crt, key, token, page=2):
        self.crt, self.key = crt, key
        self.token = token
        self.page = page
        self.port = None
        self.rv = 100
        self.floor = 0           # a resourceVersion below this is 410 Gone
        self.objects = {}        # "ns/name" -> object
        self.history = []        # (rv, type, object): what watches replay
        self.requests = []       # (path, query dict) per request, in order
        self.cond = threading.Condition()
        self.httpd = None
        self.conns = set()
        self.stopping = False

    # ---- the test's side ----

    def _event(self, kind, obj):
        self.history.append((self.rv, kind, obj))
        self.cond.notify_all()

    def _object(self, ns, name, extra=None):
        self.rv += 1
        obj = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
               "metadata": {"namespace": ns, "name": name, "resourceVersion": str(self.rv)},
               "spec": extra or {}}
        return obj

    def add(self, ns, name, spec=None):
        with self.cond:
            obj = self._object(ns, name, spec)
            kind = "MODIFIED" if "%s/%s" % (ns, name) in self.objects else "ADDED"
            self.objects["%s/%s" % (ns, name)] = obj
            self._event(kind, obj)
            return self.rv

    modify = add

    def delete(self, ns, name):
        with self.cond:
            obj = self.objects.pop("%s/%s" % (ns, name))
            self.rv += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._event("DELETED", obj)
            return self.rv

    def bookmark(self):
        """A BOOKMARK on every open watch, at a resourceVersion no event has
        (as when other namespaces changed); returns it."""
        with self.cond:
            self.rv += 1
            self._event("BOOKMARK", {"kind": "Ingress",
                                     "metadata": {"resourceVersion": str(self.rv)}})
            return self.rv

    def expire(self, error_event=True):
        """Compact: any resourceVersion before now is 410 Gone.
        Open watches get an ERROR 410 event, or (error_event False) are
        cut, so that the client's next WATCH gets HTTP 410."""
        with self.cond:
            self.rv += 1
            self.floor = self.rv
            if error_event:
                self._event("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "too old resource version", "reason": "Expired",
                                      "code": 410})
            else:
                self._event("CUT", None)

    def end_watches(self):
        """Open watches end cleanly, as at their timeoutSeconds."""
        with self.cond:
            self._event("END", None)

    def watch_requests(self):
        with self.cond:
            return [q for p, q in self.requests if q.get("watch")]

    def list_requests(self):
        with self.cond:
            return [q for p, q in self.requests if not q.get("watch")]

    # ---- the server ----

    def start(self, port=None):
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with stand_in.cond:
                    stand_in.conns.add(self.connection)

            def finish(self):
                with stand_in.cond:
                    stand_in.conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def do_GET(self):
                stand_in.handle(self)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that went away, or one cut by stop()

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.crt, self.key)
        self.httpd = Server(("127.0.0.1", port or self.port or 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.stopping = False
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self):
        """Go away at once: no new connection, open ones cut."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
            for c in list(self.conns):
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.httpd.shutdown()
        self.httpd.server_close()

    def send_json(self, h, status, body):
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def status(self, h, code, reason, message):
        self.send_json(h, code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "message": message, "reason": reason, "code": code})

    def handle(self, h):
        url = urllib.parse.urlsplit(h.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        with self.cond:
            self.requests.append((url.path, query))
        if h.headers.get("Authorization") != "Bearer " + self.token:
            return self.status(h, 401, "Unauthorized", "Unauthorized")
        m = COLLECTION.match(url.path)
        if m is None:
            return self.status(h, 404, "NotFound", "the server could not find the resource")
        if query.get("watch") in ("1", "true"):
            return self.watch(h, query, m.group(1))
        return self.list(h, query, m.group(1))

    @staticmethod
    def in_namespace(obj, ns):
        return ns is None or obj is None or obj["metadata"].get("namespace", ns) == ns

    def list(self, h, query, ns):
        limit = min(int(query.get("limit", "500")), self.page)
        with self.cond:
            if "continue" in query:
                rv, start = (int(x) for x in query["continue"].split(":"))
                if rv < self.floor:
                    return self.status(h, 410, "Expired", "the continue token has expired")
            else:
                rv, start = self.rv, 0
            names = sorted(n for n, o in self.objects.items() if self.in_namespace(o, ns))
            items = [self.objects[n] for n in names[start:start + limit]]
            meta = {"resourceVersion": str(rv)}
            if start + limit < len(names):
                meta["continue"] = "%d:%d" % (rv, start + limit)
        self.send_json(h, 200, {"kind": "IngressList", "apiVersion": "networking.k8s.io/v1",
                                "metadata": meta, "items": items})

    def watch(self, h, query, ns):
        since = int(query.get("resourceVersion") or 0)
        deadline = time.monotonic() + int(query.get("timeoutSeconds", "60"))
        with self.cond:
            if since < self.floor:
                return self.status(h, 410, "Expired", "too old resource version: %d (%d)"
                                   % (since, self.floor))
            pos = next((i for i, (rv, kind, _) in enumerate(self.history)
                        if rv > since and kind in ("ADDED", "MODIFIED", "DELETED")),
                       len(self.history))
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        h.wfile.flush()
        try:
            while True:
                with self.cond:
                    while pos >= len(self.history) and not self.stopping:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self.cond.wait(min(left, 1.0))
                    if self.stopping:
                        return
                    if pos >= len(self.history):
                        break  # timeoutSeconds
                    rv, kind, obj = self.history[pos]
                    pos += 1
                if kind == "END":
                    break
                if kind == "CUT":
                    h.connection.shutdown(socket.SHUT_RDWR)
                    return
                if not self.in_namespace(obj, ns):
                    continue
                line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                h.wfile.flush()
                if kind == "ERROR":
                    break
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            pass


def write_kubeconfig(path, port, ca, token):
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                "clusters:\n- name: test\n  cluster:\n    server: https://localhost:%d\n"
                "    certificate-authority: %s\n"
                "contexts:\n- name: test\n  context: {cluster: test, user: test}\n"
                "users:\n- name: test\n  user: {token: %s}\n" % (port, ca, token))
