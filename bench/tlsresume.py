#!/usr/bin/python3
"""A new TLS connection per request, resumed: bench/run.sh's tls-resume.

    tlsresume.py URL CONNECTIONS SECONDS

CONNECTIONS threads, each in a loop for SECONDS: open a TCP connection,
resume the TLS session its last connection got (a ticket, or a session id:
whatever the server gave), send one GET with "Connection: close", read the
answer to the server's close. Prints wrk's BENCH line (bench/summary.lua)
plus resumed=N, the handshakes that resumed. The first handshake of each
thread is a full one and is not counted; a run in which fewer than 99 % of
the counted handshakes resumed fails (exit 1): the server would be measured
on full handshakes under another name. Latency is from connect() to the
last byte of the answer.
"""
import socket
import ssl
import sys
import threading
import time
from urllib.parse import urlsplit

from percentile import percentile


class Worker(threading.Thread):
    def __init__(self, host, port, path, stop_at):
        super().__init__(daemon=True)
        self.addr = (host, port)
        self.request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                        "Connection: close\r\n\r\n").encode()
        self.stop_at = stop_at
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE
        self.ctx.set_alpn_protocols(["http/1.1"])
        self.latencies = []
        self.bytes = 0
        self.errors = 0
        self.bad_status = 0
        self.resumed = 0
        self.counted = 0

    def one(self, session):
        t0 = time.monotonic()
        raw = socket.create_connection(self.addr, timeout=10)
        with self.ctx.wrap_socket(raw, session=session) as s:
            s.sendall(self.request)
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
            answer = b"".join(chunks)
            took = time.monotonic() - t0
            return answer, took, s.session, s.session_reused

    def run(self):
        session = None
        first = True
        while time.monotonic() < self.stop_at:
            try:
                answer, took, new_session, reused = self.one(session)
            except (OSError, ssl.SSLError):
                self.errors += 1
                session = None
                continue
            if new_session is not None:
                session = new_session
            if first:  # the full handshake that got the session
                first = False
                continue
            self.counted += 1
            self.resumed += 1 if reused else 0
            self.bytes += len(answer)
            if not answer.startswith(b"HTTP/1.1 2"):
                self.bad_status += 1
            self.latencies.append(int(took * 1e6))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    url = urlsplit(sys.argv[1])
    conns, secs = int(sys.argv[2]), int(sys.argv[3])
    start = time.monotonic()
    workers = [Worker(url.hostname, url.port or 443, url.path or "/", start + secs) for _ in range(conns)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(secs + 30)
    duration_us = int((time.monotonic() - start) * 1e6)
    lat = sorted(x for w in workers for x in w.latencies)
    requests = len(lat)
    resumed = sum(w.resumed for w in workers)
    counted = sum(w.counted for w in workers)
    mean = sum(lat) / requests if requests else 0.0
    print(f"BENCH requests={requests} duration_us={duration_us} bytes={sum(w.bytes for w in workers)} "
          f"connect={sum(w.errors for w in workers)} read=0 write=0 timeout=0 "
          f"status={sum(w.bad_status for w in workers)} p50_us={percentile(lat, 50)} "
          f"p90_us={percentile(lat, 90)} p99_us={percentile(lat, 99)} p999_us={percentile(lat, 99.9)} "
          f"max_us={lat[-1] if lat else 0} mean_us={mean:.1f} resumed={resumed}")
    if counted == 0 or resumed * 100 < counted * 99:
        sys.exit(f"tlsresume: FAIL: {resumed} of {counted} handshakes resumed: the server does not resume")


if __name__ == "__main__":
    main()
