#!/usr/bin/python3
"""The probes of the HTTP/2 member audit (docs/audit/2026-12-02-h2-member-audit.md),
run by hand against ScalWS and HAProxy 2.6 (`server ... proto h2`) side by side:

    /usr/bin/python3 test/tools/h2member_probe.py [--build build] [--only NAME] [--no-haproxy]
    /usr/bin/python3 test/tools/h2member_probe.py --client    # what reaches the member

A hostile HTTP/2 member of raw frames (RawH2Member: h2c prior knowledge,
HPACK literals without indexing, so any name or order can be sent) answers
each request by its path's last segment with the frames PROBES names. Each
probe sends `GET /NAME` (HTTP/1.1) on a new client connection while a
sibling request (`GET /sibling`, answered 1.5 s later) is in flight on the
same member connection; then `GET /next` on another client connection.
Printed per server: what the probe's client got (bytes until close or 5 s
idle, and how long), the sibling's status, /next's, the worker's open fds
before and after, and (ScalWS) the log lines the probe added.
Proxies are configured with read timeout 2 s, send 2 s: an `<idle>` after 5 s
is a hang. Not a test: test/integration/test_audit_h2member.py pins the
findings.
"""

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))

import audit3_probe  # noqa: E402
from audit3_probe import exchange as audit3_exchange, summary, wait_port  # noqa: E402
from h2_raw_member import (CLOSE, CONT, END_HEADERS, HEADERS, NOREAD, PING, PUSH,  # noqa: E402
                           S200, SLEEP, WINUP, RawH2Member, block, data, frame, goaway,
                           headers, ok, rst, settings)


# name -> function(sid) giving a list of bytes / (SLEEP, s) / CLOSE
PROBES = {
    # response framing
    "no_status": lambda s: [headers(s, [("content-length", "2")]) + data(s, b"ok", True)],
    "status_abc": lambda s: [headers(s, [(":status", "abc")]) + data(s, b"ok", True)],
    "status_99": lambda s: [headers(s, [(":status", "99")]) + data(s, b"ok", True)],
    "status_1000": lambda s: [headers(s, [(":status", "1000")]) + data(s, b"ok", True)],
    "status_600": lambda s: [headers(s, [(":status", "600")]) + data(s, b"ok", True)],
    "two_status": lambda s: [headers(s, [S200, (":status", "404")]) + data(s, b"ok", True)],
    "pseudo_after_regular": lambda s: [headers(s, [("x-a", "b"), S200]) + data(s, b"ok", True)],
    "unknown_pseudo": lambda s: [headers(s, [S200, (":path", "/x")]) + data(s, b"ok", True)],
    "uppercase_name": lambda s: [headers(s, [S200, ("X-Upper", "b")]) + data(s, b"ok", True)],
    "connection_field": lambda s: [headers(s, [S200, ("connection", "close")]) + data(s, b"ok", True)],
    "transfer_encoding": lambda s: [headers(s, [S200, ("transfer-encoding", "chunked")]) +
                                    data(s, b"2\r\nok\r\n0\r\n\r\n", True)],
    "keep_alive_field": lambda s: [headers(s, [S200, ("keep-alive", "5")]) + data(s, b"ok", True)],
    "te_field": lambda s: [headers(s, [S200, ("te", "trailers")]) + data(s, b"ok", True)],
    "cl_more_than_data": lambda s: [headers(s, [S200, ("content-length", "10")]) + data(s, b"ok", True)],
    "cl_less_than_data": lambda s: [headers(s, [S200, ("content-length", "2")]) + data(s, b"okSMUGGLED", True)],
    "cl_less_split": lambda s: [headers(s, [S200, ("content-length", "2")]) + data(s, b"ok"),
                                (SLEEP, 0.2), data(s, b"SMUGGLED", True)],
    "two_cl": lambda s: [headers(s, [S200, ("content-length", "2"), ("content-length", "10")]) +
                         data(s, b"ok", True)],
    "cl_not_digits": lambda s: [headers(s, [S200, ("content-length", "2x")]) + data(s, b"ok", True)],
    "100_then_200": lambda s: [headers(s, [(":status", "100")]) + ok(s)],
    "103_then_200": lambda s: [headers(s, [(":status", "103"), ("link", "</a>; rel=preload")]) + ok(s)],
    "several_1xx": lambda s: [headers(s, [(":status", "103"), ("link", "</a>")]) * 3 +
                              headers(s, [(":status", "100")]) + ok(s)],
    "1xx_flood": lambda s: [headers(s, [(":status", "103"), ("link", "</a>")]) * 20000 + ok(s)],
    "1xx_end_stream": lambda s: [headers(s, [(":status", "103")], end=True)],
    "101_unasked": lambda s: [headers(s, [(":status", "101")]) + ok(s)],
    "204_with_data": lambda s: [headers(s, [(":status", "204")]) + data(s, b"SMUGGLED", True)],
    "304_with_data": lambda s: [headers(s, [(":status", "304")]) + data(s, b"SMUGGLED", True)],
    "204_with_cl": lambda s: [headers(s, [(":status", "204"), ("content-length", "8")], end=True)],
    "trailers": lambda s: [headers(s, [S200]) + data(s, b"ok") + headers(s, [("x-t", "1")], end=True)],
    "trailers_pseudo": lambda s: [headers(s, [S200]) + data(s, b"ok") +
                                  headers(s, [(":status", "500"), ("x-t", "1")], end=True)],
    "trailers_no_end_stream": lambda s: [headers(s, [S200]) + data(s, b"ok") + headers(s, [("x-t", "1")]) +
                                         data(s, b"more", True)],
    "headers_after_trailers": lambda s: [headers(s, [S200]) + data(s, b"ok") +
                                         headers(s, [("x-t", "1")], end=True) + headers(s, [("x-u", "2")])],
    "data_before_headers": lambda s: [data(s, b"ok") + ok(s)],
    # stream and connection control
    "rst_before_head": lambda s: [rst(s, 2)],
    "rst_refused": lambda s: [rst(s, 7)],
    "rst_mid_body_cl": lambda s: [headers(s, [S200, ("content-length", "10")]) + data(s, b"okok"),
                                  (SLEEP, 0.2), rst(s, 2)],
    "rst_mid_body_nocl": lambda s: [headers(s, [S200]) + data(s, b"okok"), (SLEEP, 0.2), rst(s, 2)],
    "goaway_below": lambda s: [goaway(0), (SLEEP, 0.3), CLOSE],
    "goaway_above_then_close": lambda s: [goaway(s), (SLEEP, 0.3), CLOSE],
    "goaway_mid_body_close": lambda s: [headers(s, [S200, ("content-length", "10")]) + data(s, b"okok") +
                                        goaway(s), (SLEEP, 0.2), CLOSE],
    "close_mid_body_nocl": lambda s: [headers(s, [S200]) + data(s, b"okok"), (SLEEP, 0.2), CLOSE],
    "push_promise": lambda s: [frame(PUSH, END_HEADERS, s, struct.pack(">I", s + 1) +
                                     block([(":method", "GET"), (":scheme", "http"), (":path", "/p"),
                                            (":authority", "x")])) + ok(s)],
    "ping_flood": lambda s: [frame(PING, 0, 0, b"12345678") * 50000 + ok(s)],
    "ping_flood_noread": lambda s: [NOREAD, frame(PING, 0, 0, b"12345678") * 200000 + ok(s)],
    "settings_flood": lambda s: [settings([(4, 65535)]) * 20000 + ok(s)],
    "empty_data_flood": lambda s: [headers(s, [S200]) + data(s, b"") * 100000 + data(s, b"ok", True)],
    "winup_overflow_conn": lambda s: [frame(WINUP, 0, 0, struct.pack(">I", 0x7fffffff)) + ok(s)],
    "winup_overflow_stream": lambda s: [frame(WINUP, 0, s, struct.pack(">I", 0x7fffffff)) + ok(s)],
    "winup_zero": lambda s: [frame(WINUP, 0, s, struct.pack(">I", 0)) + ok(s)],
    "huge_head_cont": lambda s: [frame(HEADERS, 0, s, block([S200])) +
                                 b"".join(frame(CONT, 0, s, block([("x-big%d" % i, "a" * 16000)]))
                                          for i in range(5)) +
                                 frame(CONT, END_HEADERS, s, block([("x-e", "1")])) + data(s, b"ok", True)],
    "many_tiny_cont": lambda s: [frame(HEADERS, 0, s, block([S200])) +
                                 b"".join(frame(CONT, 0, s, b"") for i in range(2000)) +
                                 frame(CONT, END_HEADERS, s, b"") + data(s, b"ok", True)],
    "many_fields": lambda s: [headers(s, [S200] + [("x-a", "b")] * 1000) + data(s, b"ok", True)],
    "stall_before_head": lambda s: [(SLEEP, 8)],
    "stall_after_head": lambda s: [headers(s, [S200]) + data(s, b"ok"), (SLEEP, 8)],
    "stall_with_pings": lambda s: [headers(s, [S200]) + data(s, b"ok")] +
                                  [(SLEEP, 0.5), frame(PING, 0, 0, b"12345678")] * 16,
    "stall_head_with_pings": lambda s: [(SLEEP, 0.5), frame(PING, 0, 0, b"12345678")] * 16,
    "stall_with_empty_data": lambda s: [headers(s, [S200])] + [(SLEEP, 0.5), data(s, b"")] * 16,
    "max_streams_0_then_raised": lambda s: [settings([(3, 0)]), (SLEEP, 0.5), settings([(3, 100)]), ok(s)],
    "bad_frame_size": lambda s: [frame(PING, 0, 0, b"123")],
    "unknown_frame": lambda s: [frame(0x42, 0, s, b"xyz") + ok(s)],
}

# Probes whose request carries a body (the zero window one).
UPLOAD = {
    "zero_window_upload": 200000,
}


# ---- the proxies ----

def start_scalws(build, member, tmp):
    return audit3_probe.start_scalws(build, member, tmp, pool_extra=(
        "    protocol: h2\n    health: {max_fails: 0}\n    timeouts: {read: 2s, send: 2s}\n"))


def start_haproxy(member, tmp):
    return audit3_probe.start_haproxy(member, tmp, server_extra="proto h2", timeout_server="2s",
                                      log=os.path.join(tmp, "haproxy.log"))


def worker_pid(proc, label):
    if label != "scalws":
        return proc.pid
    out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else proc.pid


def nfds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    except (OSError, AttributeError):  # gone, or a zombie
        return -1


def exchange(port, raw, wait=5.0):
    """What a client sending raw gets (bytes until close or wait s idle), and
    after how long."""
    t0 = time.monotonic()
    try:
        got = audit3_exchange(port, raw, wait)
    except OSError as e:  # the proxy is gone
        return b"<connect: %s>" % e.__class__.__name__.encode(), 0.0
    return got, time.monotonic() - t0


def status_of(got):
    m = re.match(rb"HTTP/1\.1 (\d+)", got)
    return m.group(1).decode() if m else summary(got[:40])


def request_for(name):
    if name in UPLOAD:
        n = UPLOAD[name]
        return b"POST /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % (name.encode(), n) + b"u" * n
    return b"GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % name.encode()


def run_probe(name, label, proc, port, logpath):
    wpid = worker_pid(proc, label)
    fd0, rss0 = nfds(wpid), rss(wpid)
    logpos = os.path.getsize(logpath) if os.path.exists(logpath) else 0
    sib = {}
    t = threading.Thread(target=lambda: sib.update(r=exchange(
        port, b"GET /sibling HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")))
    t.start()
    time.sleep(0.3)  # an ordering aid for a by-hand probe: the sibling goes first
    first, took = exchange(port, request_for(name))
    t.join()
    nxt, _ = exchange(port, b"GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    time.sleep(0.3)
    fd1, rss1 = nfds(wpid), rss(wpid)
    with open(logpath, "rb") as f:
        f.seek(logpos)
        log = [line for line in f.read().decode("latin-1").splitlines()
               if "sibling" not in line and "/next" not in line]
    print("  %-8s %.1fs %s" % (label, took, summary(first)))
    print("  %-8s sibling %s, next %s, fds %d->%d, rss %d->%d KiB%s" % (
        label, status_of(sib["r"][0]), status_of(nxt), fd0, fd1, rss0, rss1,
        "" if proc.poll() is None else ", EXITED %s" % proc.returncode))
    for line in log[-4:]:
        print("  %-8s log: %s" % (label, line[-200:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", action="append")
    ap.add_argument("--from", dest="start", help="the probes from this one on")
    ap.add_argument("--no-haproxy", action="store_true")
    ap.add_argument("--client", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="h2audit-")
    if args.client:
        client_main(args, tmp)
        return
    names = [n for n in list(PROBES) + list(UPLOAD) if not args.only or n in args.only]
    if args.start:
        names = names[names.index(args.start):]
    servers = []
    try:
        for name in names:
            print("== %s" % name)
            # A member and proxies of their own per probe: a probe that breaks
            # the member's connection or state does not spill into the next.
            member = RawH2Member(PROBES, UPLOAD)
            servers = []
            starts = [("scalws", lambda: start_scalws(args.build, member.address, tmp), "scalws.log")]
            if not args.no_haproxy:
                starts.append(("haproxy", lambda: start_haproxy(member.address, tmp), "haproxy.log"))
            for label, start, log in starts:
                proc, port = start()
                wait_port(port)
                servers.append((label, proc, port, os.path.join(tmp, log)))
            # One request first, so the member connection is open and its
            # fds and memory counted with it.
            for label, proc, port, log in servers:
                exchange(port, b"GET /warm HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            for label, proc, port, log in servers:
                run_probe(name, label, proc, port, log)
            print("  member: %d conns, resets %s, goaways %s" % (
                member.nconn, [r[2] for r in member.resets], [g[1] for g in member.goaways]))
            sys.stdout.flush()
            for _, proc, _, _ in servers:
                if proc.poll() is None:
                    proc.terminate()
                proc.wait(10)
            servers = []
            member.close()
    finally:
        for _, proc, _, _ in servers:
            proc.terminate()
            proc.wait(10)
    print("logs in", tmp)


# ---- the client's side: what reaches an h2 member ----

def chunked_post(body, extra=b""):
    return (b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" + extra +
            b"\r\n" + body)


CLIENT_PROBES = {
    "chunked_with_trailers": chunked_post(b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
    "te_gzip": b"GET /c HTTP/1.1\r\nHost: x\r\nTE: gzip, trailers\r\n\r\n",
    "te_trailers": b"GET /c HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n",
    "connection_fields": b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
                         b"Keep-Alive: 5\r\nProxy-Connection: keep-alive\r\nUpgrade: h2c\r\n\r\n",
    "absolute_form_other_host": b"GET http://a.example/c HTTP/1.1\r\nHost: b.example\r\n\r\n",
    "host_empty_10": b"GET /c HTTP/1.0\r\n\r\n",
    "cl_and_body": b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    "expect_100": b"POST /c HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
    "uppercase_and_dup_fields": b"GET /c HTTP/1.1\r\nHost: x\r\nX-Dup: 1\r\nx-dup: 2\r\nCookie: a=1\r\n"
                                b"Cookie: b=2\r\n\r\n",
}


def client_main(args, tmp):
    member = RawH2Member(PROBES, UPLOAD)
    servers = []
    for label, start in (("scalws", lambda: start_scalws(args.build, member.address, tmp)),
                         ("haproxy", lambda: start_haproxy(member.address, tmp))):
        proc, port = start()
        wait_port(port)
        servers.append((label, proc, port))
    try:
        for name, raw in CLIENT_PROBES.items():
            if args.only and name not in args.only:
                continue
            print("== %s" % name)
            for label, proc, port in servers:
                before = len(member.requests)
                got, _ = exchange(port, raw, wait=1.0)
                time.sleep(0.3)
                print("  %-8s client: %s" % (label, summary(got.split(b"\r\n")[0])))
                for r in member.requests[before:]:
                    print("  %-8s member: %s body %d" % (label, r[2], r[3]))
            sys.stdout.flush()
    finally:
        for _, proc, _ in servers:
            proc.terminate()
            proc.wait(10)
        member.close()


if __name__ == "__main__":
    main()
