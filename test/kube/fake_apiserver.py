#!/usr/bin/python3
"""A fake Kubernetes API server for tests and benchmarks: the real wire
protocol (HTTPS, bearer token, discovery, JSON objects, LIST with
resourceVersion/limit/continue and selectors, chunked WATCH streams with
BOOKMARKs, 410 Gone past its history, create/get/update/patch/delete) for
the kinds ingressd reads, enough for kubectl (--validate=false) and for a
real client. Python stdlib only; one thread per connection.

    /usr/bin/python3 test/kube/fake_apiserver.py --port PORT --token TOKEN \\
        --cert CRT --key KEY [--history N] [--bookmark-interval S] [--kubeconfig FILE]

Without --cert/--key it makes a self-signed certificate for 127.0.0.1 in a
temporary directory; --kubeconfig writes a kubeconfig for it. Tests start
it through fakekube.py. What is not the real protocol: no protobuf, no
server-side apply, no OpenAPI (kubectl needs --validate=false), no table
output, no authorization (any request with the token may do anything).

The control API for tests lives under /_fake/ (a path kubectl never uses),
JSON in and out, with the same token:
    GET  /_fake/stats                        counters (lists, watches open, ...)
    GET  /_fake/requests                     the last 1000 API requests, oldest first:
                                             [{method, path, query}] (what a client asked)
    POST /_fake/unavailable {seconds, mode}  close every connection, then for
                                             `seconds` answer 503 (mode "503")
                                             or close without an answer ("reset")
    POST /_fake/gone {watches, lists, open, http_watches}
                                             the next N watches / lists that give a
                                             resourceVersion get 410; open: every
                                             open watch gets an ERROR 410 now;
                                             http_watches: the next N such watches
                                             get HTTP 410 instead of an ERROR event
                                             (as a server without a watch cache)
    POST /_fake/compact {keep}               drop the history but the newest `keep`
    POST /_fake/bookmark                     a BOOKMARK on every open watch now
    POST /_fake/drop-watches {clean}         end every watch (cleanly, or cut)
    POST /_fake/config {history, bookmark_interval}
    POST /_fake/load {namespace, ingresses, endpoints, ingress_class}
                                             bulk-load Services, EndpointSlices
                                             and Ingresses (the benchmark's cluster)
"""

import argparse
import base64
import http.server
import json
import os
import secrets
import shutil
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fake_store  # noqa: E402
from fake_store import (BY_PLURAL, RESOURCES, ApiError, Selector, expired,  # noqa: E402
                        group_version)

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-scalws-fake",
           "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
           "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc",
           "platform": "linux/amd64"}

CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list.")

# A watch without timeoutSeconds ends after this (the real server picks
# 30-60 minutes at random); clients reconnect from their last resourceVersion.
DEFAULT_WATCH_SECONDS = 1800
IDLE_SECONDS = 120


# -- discovery ------------------------------------------------------------

def groups():
    """{group: version} of the named groups served, in a stable order."""
    out = {}
    for r in RESOURCES:
        if r.group:
            out.setdefault(r.group, r.version)
    return out


def api_group(name, version):
    gv = {"groupVersion": "%s/%s" % (name, version), "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}


def resource_list(group, version):
    resources = []
    for r in RESOURCES:
        if r.group != group or r.version != version:
            continue
        entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                 "kind": r.kind, "verbs": fake_store.VERBS}
        if r.short_names:
            entry["shortNames"] = r.short_names
        resources.append(entry)
        if r.status:
            resources.append({"name": r.plural + "/status", "singularName": "",
                              "namespaced": r.namespaced, "kind": r.kind,
                              "verbs": ["get", "patch", "update"]})
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "%s/%s" % (group, version) if group else version,
            "resources": resources}


def discovery(path, address):
    """The answer to a discovery path, or None."""
    if path == "/version":
        return VERSION
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                "serverAddress": address}]}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [api_group(g, v) for g, v in groups().items()]}
    parts = path.strip("/").split("/")
    if parts == ["api", "v1"]:
        return resource_list("", "v1")
    if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups():
        return dict(api_group(parts[1], groups()[parts[1]]), kind="APIGroup", apiVersion="v1")
    if len(parts) == 3 and parts[0] == "apis":
        return resource_list(parts[1], parts[2])
    return None


def parse_resource_path(path):
    """(resource, namespace, name, subresource) for an API path, or None.
    /api/v1/namespaces/NS is the Namespace NS; /api/v1/namespaces/NS/services
    the Services in NS."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    res = BY_PLURAL.get(rest[0])
    if res is None or res.group != group or res.version != version:
        return None
    if namespace and not res.namespaced:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and (sub != "status" or not res.status):
        return None
    return res, namespace, name, sub


# -- continue tokens ----------------------------------------------------

def encode_continue(rv, key):
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": "%s/%s\x00" % key})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token):
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        ns, name = raw["start"].rstrip("\x00").split("/", 1)
        return int(raw["rv"]), (ns, name)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ApiError(400, "BadRequest", "continue key is not valid")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, ctx, token, store, bookmark_interval=5.0, verbose=False):
        self.ctx = ctx
        self.token = token
        self.store = store
        self.verbose = verbose
        # Control state, under store.lock (watch threads wait on it).
        self.bookmark_interval = bookmark_interval
        self.bookmark_seq = 0        # bumped by /_fake/bookmark
        self.epoch = 0               # bumped to end every open watch
        self.epoch_action = "cut"    # how they end: "clean", "cut" or "gone"
        self.unavailable_until = 0.0
        self.unavailable_mode = "reset"
        self.forced_gone = {"watch": 0, "list": 0, "http_watch": 0}
        self.requests = deque(maxlen=1000)   # {method, path, query} per API request
        self.stats = {"requests": 0, "lists": {}, "watches_served": 0, "watches_open": 0,
                      "gone_watch": 0, "gone_list": 0, "refused": 0}
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(address, Handler)

    def get_request(self):
        # The handshake happens in the connection's thread (Handler.setup),
        # so a slow client cannot stall the accept loop.
        sock, addr = self.socket.accept()
        # Without it a head and a body written apart wait for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        # A client that goes away (a readiness probe, a cut watch) is no
        # error of the server's.
        if not isinstance(sys.exc_info()[1], (OSError, ssl.SSLError)):
            super().handle_error(request, client_address)

    def count(self, name, key=None):
        with self.store.lock:
            if key is None:
                self.stats[name] += 1
            else:
                self.stats[name][key] = self.stats[name].get(key, 0) + 1

    def take_forced_gone(self, what):
        with self.store.lock:
            if self.forced_gone[what] > 0:
                self.forced_gone[what] -= 1
                return True
            return False

    def end_watches(self, action):
        with self.store.lock:
            self.epoch += 1
            self.epoch_action = action
            self.store.lock.notify_all()

    def cut_connections(self, keep):
        with self.conns_lock:
            conns = [c for c in self.conns if c is not keep]
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def unavailable(self):
        return time.monotonic() < self.unavailable_until


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_SECONDS

    def setup(self):
        super().setup()
        self.request.do_handshake()
        with self.server.conns_lock:
            self.server.conns.add(self.request)

    def finish(self):
        with self.server.conns_lock:
            self.server.conns.discard(self.request)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, fmt, *args):
        if self.server.verbose:
            sys.stderr.write("fake-apiserver: %s\n" % (fmt % args))

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- plumbing --------------------------------------------------------

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, code, payload, headers=()):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def send_status(self, err):
        self.send_json(err.code, err.status())

    def cut(self):
        """Close without an answer, with a reset (SO_LINGER 0)."""
        self.close_connection = True
        try:
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.request.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def dispatch(self, method):
        srv = self.server
        srv.count("requests")
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        control = url.path.startswith("/_fake/")
        if not control:
            with srv.store.lock:
                srv.requests.append({"method": method, "path": url.path, "query": query})
        if srv.unavailable() and not control:
            srv.count("refused")
            if srv.unavailable_mode == "503":
                self.close_connection = True
                self.send_status(ApiError(503, "ServiceUnavailable",
                                          "the server is currently unable to handle the request"))
            else:
                self.cut()
            return
        if self.headers.get("Authorization", "") != "Bearer " + srv.token:
            self.send_status(ApiError(401, "Unauthorized", "Unauthorized"))
            return
        try:
            body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            if control:
                self.send_json(200, self.control(method, url.path[len("/_fake/"):], body))
                return
            answer = discovery(url.path, "%s:%d" % srv.server_address[:2]) \
                if method == "GET" else None
            if answer is not None:
                self.send_json(200, answer)
                return
            target = parse_resource_path(url.path)
            if target is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            self.resource(method, target, query, body)
        except ApiError as e:
            self.send_status(e)
        except (ValueError, KeyError, TypeError) as e:
            self.send_status(ApiError(400, "BadRequest", "bad request: %s" % e))

    # -- resources ---------------------------------------------------------

    def resource(self, method, target, q, body):
        res, ns, name, sub = target
        store = self.server.store
        dry = q.get("dryRun") == "All"
        if "protobuf" in self.headers.get("Content-Type", ""):
            raise ApiError(415, "UnsupportedMediaType", "this fake API server reads JSON only")
        if res.namespaced and not ns and (name or method != "GET"):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not name:
            if method == "GET":
                if q.get("watch") in ("1", "true"):
                    return self.watch(res, ns, q)
                return self.list(res, ns, q)
            if method == "POST":
                stored = store.create(res, ns, self.parse_body(body), dry)
                return self.send_json(201, stored.full_json())
            if method == "DELETE":
                return self.delete_collection(res, ns, q, dry)
            raise ApiError(405, "MethodNotAllowed", "method %s not allowed" % method)
        status_only = sub == "status"
        if method == "GET":
            return self.send_json(200, store.get(res, ns, name).full_json())
        if method == "PUT":
            stored = store.update(res, ns, name, self.parse_body(body), status_only, dry)
            return self.send_json(200, stored.full_json())
        if method == "PATCH":
            stored = store.patch(res, ns, name, self.headers.get("Content-Type"), body,
                                 status_only, dry)
            return self.send_json(200, stored.full_json())
        if method == "DELETE" and not sub:
            old = store.delete(res, ns, name, dry)
            return self.send_json(200, {
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": res.group, "kind": res.plural,
                            "uid": old.obj["metadata"]["uid"]}})
        raise ApiError(405, "MethodNotAllowed", "method %s not allowed" % method)

    @staticmethod
    def parse_body(body):
        try:
            return json.loads(body)
        except ValueError as e:
            raise ApiError(400, "BadRequest", "invalid JSON: %s" % e)

    def delete_collection(self, res, ns, q, dry):
        store = self.server.store
        with store.lock:
            items, rv = store.snapshot(Selector(res, ns, q.get("labelSelector"),
                                                q.get("fieldSelector")))
            for s in items:
                store.delete(res, s.namespace, s.name, dry)
        self.send_list(res, items, rv)

    def send_list(self, res, items, rv, cont=None, remaining=None):
        meta = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        head = json.dumps({"kind": res.kind + "List", "apiVersion": group_version(res),
                           "metadata": meta})
        body = b"".join([head[:-1].encode(), b',"items":[',
                         b",".join(s.item_json() for s in items), b"]}"])
        self.send_json(200, body)

    def list(self, res, ns, q):
        srv, store = self.server, self.server.store
        srv.count("lists", res.plural)
        sel = Selector(res, ns, q.get("labelSelector"), q.get("fieldSelector"))
        limit = int(q.get("limit") or 0)
        rv_param = q.get("resourceVersion", "")
        match = q.get("resourceVersionMatch", "")
        start = None
        if q.get("continue"):
            if rv_param:
                raise ApiError(400, "BadRequest",
                               "specifying resource version is not allowed when using continue")
            at, start = decode_continue(q["continue"])
            with store.lock:
                if srv.take_forced_gone("list") or at < store.compacted_rv:
                    srv.stats["gone_list"] += 1
                    raise ApiError(410, "Expired", CONTINUE_EXPIRED,
                                   cont=encode_continue(store.rv, start))
        else:
            rv = int(rv_param) if rv_param not in ("", "0") else None
            # The API's rules: an exact read for resourceVersionMatch=Exact,
            # and (legacy) for a paginated list from a given resourceVersion.
            exact = rv is not None and (match == "Exact" or (match == "" and limit > 0))
            with store.lock:
                if rv is not None and rv > store.rv:
                    raise ApiError(504, "Timeout", "Too large resource version: %d, current: %d"
                                   % (rv, store.rv))
                if exact and (srv.take_forced_gone("list") or rv < store.compacted_rv):
                    srv.stats["gone_list"] += 1
                    raise expired("The resourceVersion for the provided list is too old.")
            at = rv if exact else None
        items, at, after, remaining = store.page(sel, at, start, limit)
        self.send_list(res, items, at, after and encode_continue(at, after), remaining)

    # -- watch -------------------------------------------------------------

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def bookmark(self, res, rv, annotations=None):
        meta = {"resourceVersion": str(rv)}
        if annotations:
            meta["annotations"] = annotations
        return (json.dumps({"type": "BOOKMARK", "object": {
            "kind": res.kind, "apiVersion": group_version(res), "metadata": meta}},
            separators=(",", ":")) + "\n").encode()

    @staticmethod
    def gone_line(err):
        return (json.dumps({"type": "ERROR", "object": err.status()}) + "\n").encode()

    @staticmethod
    def event_line(sel, ev):
        """The line a watch with selector sel sends for ev, or None: an
        object entering the selection is ADDED, one leaving it DELETED."""
        now = sel.matches(ev.obj)
        if ev.type == "ADDED":
            return ev.line() if now else None
        before = sel.matches(ev.old)
        if ev.type == "DELETED":
            return ev.line() if before else None
        if now and before:
            return ev.line()
        return ev.line("ADDED") if now else ev.line("DELETED") if before else None

    def watch(self, res, ns, q):
        srv, store = self.server, self.server.store
        sel = Selector(res, ns, q.get("labelSelector"), q.get("fieldSelector"))
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        initial_end = q.get("sendInitialEvents") == "true"
        rv_param = q.get("resourceVersion", "")
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
        cursor = int(rv_param) if rv_param not in ("", "0") and not initial_end else None
        initial, gone = [], None
        if cursor is not None and srv.take_forced_gone("http_watch"):
            srv.count("gone_watch")
            raise expired("too old resource version: %d (%d)" % (cursor, store.rv))
        with store.lock:
            epoch, seq = srv.epoch, srv.bookmark_seq
            if cursor is not None and srv.take_forced_gone("watch"):
                gone = expired("too old resource version: %d (%d)" % (cursor, store.rv))
            elif cursor is not None:
                try:
                    store.check_not_compacted(cursor)
                except ApiError as e:
                    gone = e
            else:
                # Unset or "0": the current state as synthetic ADDED events.
                initial, cursor = store.snapshot(sel)
            srv.stats["watches_served"] += 1
            if gone:
                srv.stats["gone_watch"] += 1
            else:
                srv.stats["watches_open"] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if gone:
            self.chunk(self.gone_line(gone))
            self.chunk(b"")
            return
        try:
            self.stream(res, sel, initial, initial_end and bookmarks, cursor, bookmarks,
                        epoch, seq, deadline)
        except OSError:
            self.close_connection = True
        finally:
            with store.lock:
                srv.stats["watches_open"] -= 1

    def stream(self, res, sel, initial, initial_end, cursor, bookmarks, epoch, seq, deadline):
        srv, store = self.server, self.server.store
        batch = []
        for s in initial:
            batch.append(b'{"type":"ADDED","object":%s}\n' % s.full_json())
            if len(batch) >= 256:
                self.chunk(b"".join(batch))
                batch = []
        if initial_end:
            batch.append(self.bookmark(res, cursor, {"k8s.io/initial-events-end": "true"}))
        if batch:
            self.chunk(b"".join(batch))
        last_bookmark = time.monotonic()
        while True:
            lines, end = [], None
            with store.lock:
                while True:
                    now = time.monotonic()
                    # A bookmark asked for before the end goes out first,
                    # as a real stream keeps its order.
                    if srv.epoch != epoch and not (bookmarks and srv.bookmark_seq != seq):
                        end = srv.epoch_action
                        break
                    if cursor < store.compacted_rv:
                        end = "gone"
                        break
                    events = store.events_after(cursor)
                    if events:
                        cursor = events[-1].rv
                        lines = [x for x in (self.event_line(sel, ev) for ev in events) if x]
                        break
                    if now >= deadline:
                        end = "clean"
                        break
                    # Recomputed on every wake: the interval is settable.
                    next_bookmark = last_bookmark + srv.bookmark_interval
                    if bookmarks and (now >= next_bookmark or srv.bookmark_seq != seq):
                        seq = srv.bookmark_seq
                        last_bookmark = now
                        cursor = store.rv
                        lines = [self.bookmark(res, cursor)]
                        break
                    wake = min(deadline, next_bookmark) if bookmarks else deadline
                    store.lock.wait(max(0.001, wake - now))
                rv_now = store.rv
            if lines:
                self.chunk(b"".join(lines))
            if end == "gone":
                self.chunk(self.gone_line(expired("too old resource version: %d (%d)"
                                                  % (cursor, rv_now))))
                end = "clean"
            if end == "clean":
                self.chunk(b"")
                return
            if end == "cut":
                self.cut()
                return

    # -- control -------------------------------------------------------------

    def control(self, method, name, body):
        srv, store = self.server, self.server.store
        args = json.loads(body) if body.strip() else {}
        if method == "GET" and name == "stats":
            with store.lock:
                return dict(srv.stats, lists=dict(srv.stats["lists"]), resourceVersion=store.rv,
                            compactedResourceVersion=store.compacted_rv,
                            history=len(store.history), objects=store.counts(),
                            unavailable=srv.unavailable())
        if method == "GET" and name == "requests":
            with store.lock:
                return list(srv.requests)
        if method != "POST":
            raise ApiError(405, "MethodNotAllowed", "control calls are POST, but stats and requests")
        if name == "unavailable":
            mode = args.get("mode", "reset")
            if mode not in ("reset", "503"):
                raise ApiError(400, "BadRequest", "mode is reset or 503")
            with store.lock:
                srv.unavailable_mode = mode
                srv.unavailable_until = time.monotonic() + float(args.get("seconds", 0))
            if args.get("seconds", 0) > 0:
                srv.end_watches("cut")
                srv.cut_connections(keep=self.request)
            return {"unavailable": srv.unavailable()}
        if name == "gone":
            with store.lock:
                srv.forced_gone["watch"] += int(args.get("watches", 0))
                srv.forced_gone["list"] += int(args.get("lists", 0))
                srv.forced_gone["http_watch"] += int(args.get("http_watches", 0))
            if args.get("open"):
                srv.end_watches("gone")
            return dict(srv.forced_gone)
        if name == "compact":
            return {"compactedResourceVersion": store.compact(int(args.get("keep", 0)))}
        if name == "bookmark":
            with store.lock:
                srv.bookmark_seq += 1
                store.lock.notify_all()
            return {"resourceVersion": store.rv}
        if name == "drop-watches":
            srv.end_watches("clean" if args.get("clean") else "cut")
            return {}
        if name == "config":
            with store.lock:
                if "history" in args:
                    store.set_history_limit(args["history"])
                if "bookmark_interval" in args:
                    srv.bookmark_interval = float(args["bookmark_interval"])
                store.lock.notify_all()
            return {"history": store.history_limit, "bookmark_interval": srv.bookmark_interval}
        if name == "load":
            return bulk_load(store, **args)
        raise ApiError(404, "NotFound", "no control call %r" % name)


def bulk_load(store, namespace="bench", ingresses=10000, endpoints=100000,
              ingress_class="scalws", port=8080, slice_size=100):
    """Services svc-N, their EndpointSlices (endpoints spread evenly, at
    most slice_size per slice, as the EndpointSlice controller does) and
    Ingresses ing-N routing host ing-N.NAMESPACE.test to svc-N: the cluster
    of the benchmark, made in one step, under the lock."""
    started = time.monotonic()
    ns_res, svc_res = BY_PLURAL["namespaces"], BY_PLURAL["services"]
    eps_res, ing_res = BY_PLURAL["endpointslices"], BY_PLURAL["ingresses"]
    cls_res = BY_PLURAL["ingressclasses"]
    # One conditions object shared by every endpoint: stored objects are
    # never edited in place, and 100,000 copies would only cost memory.
    ready = {"ready": True, "serving": True, "terminating": False}
    made = 0
    with store.lock:
        if ("", namespace) not in store.objects["namespaces"]:
            store.create(ns_res, "", {"metadata": {"name": namespace}})
        if ("", ingress_class) not in store.objects["ingressclasses"]:
            store.create(cls_res, "", {"metadata": {"name": ingress_class}, "spec": {
                "controller": "scalws.io/ingress-controller"}})
        for i in range(ingresses):
            svc = "svc-%d" % i
            store.create(svc_res, namespace, {"metadata": {"name": svc}, "spec": {
                "ports": [{"name": "http", "port": 80, "targetPort": port}]}})
            count = endpoints // ingresses + (1 if i < endpoints % ingresses else 0)
            for j in range(0, count, slice_size):
                eps = []
                for k in range(j, min(count, j + slice_size)):
                    n = made + k
                    eps.append({"addresses": ["10.%d.%d.%d" % (n >> 16 & 255, n >> 8 & 255,
                                                               n & 255)],
                                "conditions": ready})
                store.create(eps_res, namespace, {
                    "metadata": {"name": "%s-%d" % (svc, j // slice_size),
                                 "labels": {"kubernetes.io/service-name": svc}},
                    "addressType": "IPv4", "endpoints": eps,
                    "ports": [{"name": "http", "port": port, "protocol": "TCP"}]})
            made += count
            store.create(ing_res, namespace, {"metadata": {"name": "ing-%d" % i}, "spec": {
                "ingressClassName": ingress_class,
                "rules": [{"host": "ing-%d.%s.test" % (i, namespace), "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {
                        "service": {"name": svc, "port": {"number": 80}}}}]}}]}})
    return {"resourceVersion": store.rv, "objects": store.counts(), "endpoints": made,
            "seconds": round(time.monotonic() - started, 3)}


def make_certificate(directory):
    """A self-signed certificate for 127.0.0.1, ::1 and localhost (the
    kubeconfig's CA)."""
    from fakekube import make_pair
    return make_pair(directory, "apiserver", "fake-apiserver", dns=["localhost"], kind="ec",
                     ips=["127.0.0.1", "::1"])


def serve(port, token, cert, key, host="127.0.0.1", history=10000, bookmark_interval=5.0,
          verbose=False):
    """A Server listening (not yet serving: call serve_forever)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return Server((host, port), ctx, token, fake_store.Store(history), bookmark_interval, verbose)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    ap.add_argument("--token", help="the bearer token (default: random, printed)")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--history", type=int, default=10000,
                    help="events kept for watches and consistent lists (older: 410 Gone)")
    ap.add_argument("--bookmark-interval", type=float, default=5.0, help="seconds")
    ap.add_argument("--kubeconfig", help="write a kubeconfig for this server there")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = ap.parse_args()
    token = args.token or secrets.token_hex(16)
    cert, key = args.cert, args.key
    made = None
    if not cert:
        made = tempfile.mkdtemp(prefix="fake-apiserver-")
        cert, key = make_certificate(made)
    srv = serve(args.port, token, cert, key, args.host, args.history, args.bookmark_interval,
                args.verbose)
    port = srv.server_address[1]
    if args.kubeconfig:
        import fakekube
        fakekube.write_kubeconfig(args.kubeconfig, "https://%s:%d" % (args.host, port), cert,
                                  token)
    print("fake-apiserver: listening on https://%s:%d%s" % (
        args.host, port, "" if args.token else " token " + token), flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
