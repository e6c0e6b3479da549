#!/usr/bin/python3
"""The probes of the proxy audit of session 9 (docs/audit/2026-12-02-proxy-audit3.md),
run by hand against ScalWS, nginx and HAProxy side by side on loopback:

    /usr/bin/python3 test/integration/audit3_probe.py [--build build] [--only NAME]

One hostile member (backend.RawMember's keep-alive sibling below) answers
each path with the bytes PROBES names, on connections it keeps open. Each
probe sends its request on a new client connection, then a plain GET
/next on another one: what each client got, how many connections the member
saw and whether /next came on the probe's member connection (a reused,
maybe poisoned connection) is printed as one table row per server.
Not a test: the tests that pin the findings are test_audit3_proxy.py.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from backend import Listener, recv_head  # noqa: E402

SMUG = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"
OK2 = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

# name -> (client request bytes, member answer bytes, member closes after it)
PROBES = {
    "cl_and_te": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"2\r\nok\r\n0\r\n\r\n" + SMUG, False),
    "te_and_cl": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n"
                  b"2\r\nok\r\n0\r\n\r\n" + SMUG, False),
    "two_cl_differ": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 10\r\n\r\nok" + SMUG, False),
    "two_cl_same": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", False),
    "cl_list": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", False),
    "cl_negative": (None, b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok", False),
    "cl_plus": (None, b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", False),
    "cl_leading_zeros": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 002\r\n\r\nok", False),
    "cl_huge": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nok", False),
    "chunk_overflow": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"10000000000000002\r\nok\r\n0\r\n\r\n", False),
    "te_chunked_identity": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n"
                            b"2\r\nok\r\n0\r\n\r\n", True),
    "te_gzip_cl": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nok" + SMUG, False),
    "extra_same_segment": (None, OK2 + SMUG, False),
    "extra_later": (None, [OK2, SMUG], False),
    "head_with_body": (b"HEAD /head_with_body HTTP/1.1\r\nHost: x\r\n\r\n",
                       b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED", False),
    "head_with_body_later": (b"HEAD /head_with_body_later HTTP/1.1\r\nHost: x\r\n\r\n",
                             [b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n", SMUG], False),
    "204_with_body": (None, b"HTTP/1.1 204 No Content\r\nContent-Length: 8\r\n\r\nSMUGGLED" + SMUG, False),
    "304_with_chunks": (None, b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"2\r\nok\r\n0\r\n\r\n", False),
    "1xx_flood": (None, b"HTTP/1.1 100 Continue\r\n\r\n" * 20000 + OK2, False),
    "103_flood": (None, b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n" * 5000 + OK2, False),
    "1xx_with_cl": (None, b"HTTP/1.1 100 Continue\r\nContent-Length: 8\r\n\r\n" + SMUG, False),
    "status_099": (None, b"HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok", False),
    "status_600": (None, b"HTTP/1.1 600 High\r\nContent-Length: 2\r\n\r\nok", False),
    "status_999": (None, b"HTTP/1.1 999 High\r\nContent-Length: 2\r\n\r\nok", False),
    "status_two_digits": (None, b"HTTP/1.1 20 X\r\nContent-Length: 2\r\n\r\nok", False),
    "http10_to_close": (None, b"HTTP/1.0 200 OK\r\n\r\nread until close", True),
    "http11_to_close": (None, b"HTTP/1.1 200 OK\r\n\r\nread until close", True),
    "http10_keepalive_cl": (None, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
    "http2_version": (None, b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False),
    "big_head": (None, b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\nContent-Length: 2\r\n\r\nok", False),
    "nul_in_value": (None, b"HTTP/1.1 200 OK\r\nX-A: a\0b\r\nContent-Length: 2\r\n\r\nok", False),
    "cr_in_value": (None, b"HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok", False),
    "bare_lf_head": (None, b"HTTP/1.1 200 OK\nX-A: a\nContent-Length: 2\n\nok", False),
    "space_before_colon": (None, b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok" + SMUG, False),
    "101_unasked": (None, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n" + SMUG, False),
    "early_413": (b"POST /early_413 HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n" + b"b" * 200000,
                  b"HTTP/1.1 413 Too Large\r\nContent-Length: 2\r\n\r\nno", False),
    "trailer_cl": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   b"2\r\nok\r\n0\r\nContent-Length: 5\r\nSet-Cookie: t=1\r\n\r\n", False),
    "304_te_only": (None, b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", False),
    "204_te_only": (None, b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", False),
    "304_cl_only": (None, b"HTTP/1.1 304 Not Modified\r\nContent-Length: 8\r\n\r\n", False),
    "100_cl_then_200": (None, b"HTTP/1.1 100 Continue\r\nContent-Length: 2\r\n\r\n" + OK2, False),
    "103_te_then_200": (None, b"HTTP/1.1 103 Early Hints\r\nTransfer-Encoding: chunked\r\n\r\n" + OK2, False),
    "te_gzip_only": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nnot really gzip", True),
    "te_chunked_twice": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"2\r\nok\r\n0\r\n\r\n", False),
    "extra_after_spliced_body": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000 + SMUG, False),
    "extra_after_spliced_body_later": (None, [b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000, SMUG], False),
    "too_many_fields": (None, b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 1000 + b"Content-Length: 2\r\n\r\nok", False),
    "reason_empty": (None, b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", False),
    "obs_text_value": (None, b"HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 2\r\n\r\nok", False),
    "chunk_ext_long": (None, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"2;" + b"e" * 70000 + b"\r\nok\r\n0\r\n\r\n", False),
}


class KeepAliveMember(Listener):
    """Reads requests (head, and a Content-Length body unless the answer
    is early_413's) on a kept-open connection; answers PROBES[name] by the
    last path segment, "ok" to any other path; records (conn number,
    request line) for each."""

    def __init__(self):
        self.log = []
        self.nconn = 0
        self.lock = threading.Lock()
        super().__init__()

    def one(self, conn):
        with self.lock:
            self.nconn += 1
            num = self.nconn
        conn.settimeout(5)
        rest = b""
        try:
            while True:
                data = rest
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, rest = data.split(b"\r\n\r\n", 1)
                line = head.split(b"\r\n")[0]
                with self.lock:
                    self.log.append((num, line))
                name = line.split(b" ")[1].decode().strip("/")
                req, answer, close = PROBES.get(name, (None, b"", False))
                if name not in PROBES:
                    body = ("next on conn %d" % num).encode()
                    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
                if name != "early_413":
                    for h in head.split(b"\r\n")[1:]:
                        if h.lower().startswith(b"content-length:"):
                            n = int(h.split(b":")[1])
                            while len(rest) < n:
                                rest += conn.recv(65536)
                            rest = rest[n:]
                if isinstance(answer, list):
                    for piece in answer:
                        conn.sendall(piece)
                        time.sleep(0.2)
                else:
                    conn.sendall(answer)
                if close:
                    return
                if name == "early_413":
                    # keep reading (and dropping) what the proxy sends on
                    conn.settimeout(1)
                    try:
                        while conn.recv(65536):
                            pass
                    except OSError:
                        pass
                    return
        except OSError:
            pass
        finally:
            conn.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_scalws(build, member, tmp, pool_extra=""):
    """pool_extra: more lines of the pool's mapping (the h2 member probe's
    protocol and timeouts)."""
    port = free_port()
    conf = os.path.join(tmp, "scalws.yaml")
    with open(conf, "w") as f:
        f.write("""server:
  listen: "127.0.0.1:%d"
  event_loops: 1
  admin: {listen: []}
  logging: {level: info}
hosts:
  - name: "*"
    routes:
      - path: /
        proxy: {pool: app}
pools:
  - name: app
    retries: 0
%s    members:
      - {address: "%s"}
""" % (port, pool_extra, member))
    err = open(os.path.join(tmp, "scalws.log"), "w")
    p = subprocess.Popen([os.path.join(build, "scalwsd"), "-c", conf], stderr=err, stdout=err)
    return p, port


def start_nginx(member, tmp):
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/nginx.err info;
events {}
http {
  access_log off;
  client_body_temp_path %s; proxy_temp_path %s;
  upstream app { server %s max_fails=0; keepalive 8; }
  server {
    listen 127.0.0.1:%d;
    location / { proxy_pass http://app; proxy_http_version 1.1;
                 proxy_set_header Connection ""; proxy_next_upstream off; }
  }
}
""" % (tmp, tmp, tmp, tmp, member, port))
    p = subprocess.Popen(["/usr/sbin/nginx", "-c", conf, "-p", tmp],
                         stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return p, port


def start_haproxy(member, tmp, server_extra="", timeout_server="10s", log=None):
    """server_extra: after the server's address (`proto h2`); log: a file
    for its stderr and its request log lines, else none."""
    port = free_port()
    conf = os.path.join(tmp, "haproxy.cfg")
    with open(conf, "w") as f:
        f.write("""global
  nbthread 1
%sdefaults
  mode http
%s  timeout connect 5s
  timeout client 10s
  timeout server %s
  http-reuse always
frontend f
  bind 127.0.0.1:%d
  default_backend b
backend b
  server m %s %s
""" % ("  log stderr format short local0 info\n" if log else "",
       "  log global\n  option httplog\n" if log else "", timeout_server, port, member,
       server_extra))
    out = open(log, "w") if log else subprocess.DEVNULL
    p = subprocess.Popen(["/usr/sbin/haproxy", "-db", "-f", conf], stderr=out, stdout=out)
    return p, port


def wait_port(port):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never accepted" % port)


def start_all(build, member, tmp):
    """[(label, process, port)] of the three servers in front of member."""
    servers = []
    for label, start in (("scalws", lambda: start_scalws(build, member, tmp)),
                         ("nginx", lambda: start_nginx(member, tmp)),
                         ("haproxy", lambda: start_haproxy(member, tmp))):
        proc, port = start()
        wait_port(port)
        servers.append((label, proc, port))
    return servers


def stop_all(servers):
    for _, proc, _ in servers:
        proc.terminate()
        proc.wait(10)


def exchange(port, raw, wait=1.5):
    """What a client sending raw gets: bytes until close or wait seconds idle."""
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(wait)
    got = b""
    try:
        s.sendall(raw)
        while True:
            d = s.recv(65536)
            if not d:
                got += b"<FIN>"
                break
            got += d
    except socket.timeout:
        got += b"<idle>"
    except OSError as e:
        got += b"<%s>" % e.__class__.__name__.encode()
    s.close()
    return got


def summary(got):
    if len(got) > 160:
        got = got[:70] + b"...(%d bytes)..." % len(got) + got[-50:]
    return got.decode("latin-1").replace("\r\n", "\\r\\n ").replace("\n", "\\n").replace("\0", "\\0")


def run_probe(name, port, member):
    req, _, _ = PROBES[name]
    if req is None:
        req = b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode()
    before = len(member.log)
    first = exchange(port, req)
    time.sleep(0.5)  # an ordering aid for a by-hand probe, not a test
    second = exchange(port, b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
    log = member.log[before:]
    conns = {n for n, _ in log}
    return first, second, log, conns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", action="append")
    ap.add_argument("--client", action="store_true", help="the hostile client's probes")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="audit3-")
    if args.client:
        client_main(args, tmp)
        return
    member = KeepAliveMember()
    servers = start_all(args.build, member.address, tmp)
    try:
        for name in PROBES:
            if args.only and name not in args.only:
                continue
            print("== %s" % name)
            for label, proc, port in servers:
                first, second, log, conns = run_probe(name, port, member)
                reused = len(log) == 2 and log[0][0] == log[1][0]
                print("  %-8s first: %s" % (label, summary(first)))
                print("  %-8s next:  %s | member saw %d req on %d conn%s%s" % (
                    label, summary(second), len(log), len(conns), "s" if len(conns) != 1 else "",
                    ", REUSED" if reused else ""))
                if proc.poll() is not None:
                    print("  %-8s EXITED %s" % (label, proc.returncode))
            sys.stdout.flush()
    finally:
        stop_all(servers)
        member.close()
    print("logs in", tmp)




# ---- a hostile client: what reaches the member ----

def chunked_post(body, extra=b""):
    return (b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + extra +
            b"\r\n" + body)


CLIENT_PROBES = {
    "connection_names_content_length": b"POST /c HTTP/1.1\r\nHost: x\r\nConnection: Content-Length\r\n"
                                       b"Content-Length: 35\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    "connection_names_te": chunked_post(b"26\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n",
                                        b"Connection: Transfer-Encoding\r\n"),
    "connection_names_host": b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: Host\r\n\r\n",
    "cl_leading_zeros": b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 005\r\n\r\nhello",
    "te_chunked_identity": chunked_post(b"5\r\nhello\r\n0\r\n\r\n").replace(b"chunked", b"chunked, identity"),
    "te_chunked_twice": chunked_post(b"5\r\nhello\r\n0\r\n\r\n", b"Transfer-Encoding: chunked\r\n"),
    "duplicate_host": b"GET /c HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
    "absolute_form_other_host": b"GET http://a.example/c HTTP/1.1\r\nHost: b.example\r\n\r\n",
    "absolute_form_https": b"GET https://a.example/c HTTP/1.1\r\nHost: a.example\r\n\r\n",
    "connect": b"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
    "options_star": b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
    "trace": b"TRACE /c HTTP/1.1\r\nHost: x\r\nCookie: secret\r\n\r\n",
    "lowercase_method": b"get /c HTTP/1.1\r\nHost: x\r\n\r\n",
    "host_with_userinfo": b"GET /c HTTP/1.1\r\nHost: evil@x\r\n\r\n",
    "host_with_space": b"GET /c HTTP/1.1\r\nHost: a b\r\n\r\n",
    "host_empty": b"GET /c HTTP/1.1\r\nHost:\r\n\r\n",
    "no_host_11": b"GET /c HTTP/1.1\r\n\r\n",
    "extra_after_spliced_body": (None, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000 + SMUG, False),
    "extra_after_spliced_body_later": (None, [b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000, SMUG], False),
    "too_many_fields": (None, b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 1000 + b"Content-Length: 2\r\n\r\nok", False),
    "reason_empty": (None, b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", False),
    "obs_text_value": (None, b"HTTP/1.1 200 OK\r\nX-A: caf\xc3\xa9\r\nContent-Length: 2\r\n\r\nok", False),
    "chunk_ext_long": chunked_post(b"5;" + b"e" * 20000 + b"\r\nhello\r\n0\r\n\r\n"),
    "many_tiny_chunks": chunked_post(b"1\r\na\r\n" * 20000 + b"0\r\n\r\n"),
    "trailer_forbidden": chunked_post(b"5\r\nhello\r\n0\r\nContent-Length: 50\r\nHost: evil\r\n"
                                      b"Transfer-Encoding: chunked\r\nX-T: ok\r\n\r\n"),
    "target_fragment": b"GET /c#frag HTTP/1.1\r\nHost: x\r\n\r\n",
    "target_dotdot": b"GET /a/../../c HTTP/1.1\r\nHost: x\r\n\r\n",
    "target_encoded_slash": b"GET /a%2f..%2fc HTTP/1.1\r\nHost: x\r\n\r\n",
    "http09_line": b"GET /c\r\n\r\n",
    "http_2_0_version": b"GET /c HTTP/2.0\r\nHost: x\r\n\r\n",
    "http_1_2_version": b"GET /c HTTP/1.2\r\nHost: x\r\n\r\n",
    "expect_unknown": b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\nhi",
    "get_with_body": b"GET /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    "max_forwards_te_trailers": b"GET /c HTTP/1.1\r\nHost: x\r\nTE: trailers, gzip\r\n\r\n",
    "proxy_connection": b"GET /c HTTP/1.1\r\nHost: x\r\nProxy-Connection: keep-alive\r\nKeep-Alive: 5\r\n\r\n",
    "x_forwarded_spoof": b"GET /c HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.2.3.4\r\nX-Real-IP: 1.2.3.4\r\n"
                         b"Forwarded: for=1.2.3.4\r\nX-Forwarded-Host: evil\r\n\r\n",
}


class RecordingMember(Listener):
    """Keeps every byte each connection brought (raw[conn]); answers each
    request head (its body read by Content-Length or chunked) with 200 ok."""

    def __init__(self):
        self.raw = {}
        self.n = 0
        self.lock = threading.Lock()
        super().__init__()

    def one(self, conn):
        from backend import _Reader, _Closed
        with self.lock:
            self.n += 1
            num = self.n
            self.raw[num] = b""
        member = self

        class Rec(_Reader):
            def _fill(self):
                data = self.sock.recv(65536)
                if not data:
                    raise _Closed()
                with member.lock:
                    member.raw[num] += data
                self.buf += data

        conn.settimeout(5)
        r = Rec(conn)
        try:
            while True:
                r.request()
                conn.sendall(OK2)
        except (_Closed, OSError, ValueError):
            pass
        finally:
            conn.close()


def client_main(args, tmp):
    member = RecordingMember()
    servers = start_all(args.build, member.address, tmp)
    try:
        for name, raw in CLIENT_PROBES.items():
            if args.only and name not in args.only:
                continue
            print("== %s" % name)
            for label, proc, port in servers:
                with member.lock:
                    before = dict(member.raw)
                got = exchange(port, raw, wait=1.0)
                time.sleep(0.3)
                with member.lock:
                    sent = b"".join(v[len(before.get(k, b"")):] for k, v in member.raw.items())
                print("  %-8s client: %s" % (label, summary(got.split(b"\r\n")[0] + b" ..." + got[-8:])))
                print("  %-8s member: %s" % (label, summary(sent) or "(nothing)"))
            sys.stdout.flush()
    finally:
        stop_all(servers)
        member.close()


if __name__ == "__main__":
    main()
