#!/usr/bin/python3
"""bench/fixedrate.py: an open-loop HTTP/1.1 load at a fixed request rate.

    fixedrate.py URL RATE SECONDS CONNECTIONS

Request i is due at start + i/RATE, whatever happened to the ones before
(open loop: a slow server does not slow the load down). It goes out on an
idle keep-alive connection of the CONNECTIONS opened at start; when none is
idle it waits for one, and its latency still counts from the moment it was
due (no coordinated omission). Prints one line in the format of wrk's
summary.lua, so run.sh reads both alike:

    BENCH requests=N duration_us=.. bytes=.. connect=0 read=0 write=0
          timeout=0 status=0 p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=..
          mean_us=..

Why Python and not wrk or h2load: wrk has no fixed rate, and h2load's rate
options pace new connections, not requests on kept-alive ones. At the low
rates this is for (a few thousand requests/s) one Python thread keeps the
schedule; it says how late it noticed a due request on stderr and exits 1
when that was more than 10 ms, so a run that measured the client is never
reported. The BENCH line ends, as openloop.c's, with late_p99_us,
late_max_us, late_1ms (how late the client noticed each request due) and
queued, queued_max_us (requests that found every connection busy and
waited for an answer: the server's slowness, in their latency).
Everything is bounded: the run, and at most 5 s more for answers in flight.
"""

import selectors
import socket
import statistics
import sys
import time
from collections import deque
from urllib.parse import urlsplit

from percentile import percentile

GRACE = 5.0
# The client is the bottleneck when it notices a due request this late.
LAG_LIMIT = 0.010
# late_1ms counts the requests noticed at least this late.
LATE = 0.001


class Conn:
    __slots__ = ("sock", "buf", "due")

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.due = None  # when the request in flight was due; None: idle


def parse(buf):
    """(status, length of the whole response) once buf holds one, else None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end].decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    length = 0
    for line in head[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    total = end + 4 + length
    return (status, total) if len(buf) >= total else None


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    url = urlsplit(argv[1])
    rate, seconds, nconn = float(argv[2]), float(argv[3]), int(argv[4])
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (url.path or "/", url.netloc)).encode()
    errors = dict(connect=0, read=0, write=0, timeout=0, status=0)

    sel = selectors.DefaultSelector()
    idle = deque()
    for _ in range(nconn):
        try:
            s = socket.create_connection((url.hostname, url.port or 80), timeout=5)
        except OSError:
            errors["connect"] += 1
            continue
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = Conn(s)
        sel.register(s, selectors.EVENT_READ, c)
        idle.append(c)
    if not idle:
        print("fixedrate: no connection", file=sys.stderr)
        return 1

    latencies = []
    nbytes = 0
    waiting = deque()  # due times of requests with no idle connection yet
    start = time.monotonic() + 0.05
    stop = start + seconds
    scheduled = int(seconds * rate)
    sent = 0
    # How late this loop noticed each request was due: the client's own lag,
    # not the server's (a request waiting for a connection is the server's).
    lags = []
    queued, queued_max = 0, 0.0

    def send(c, due):
        c.due = due
        try:
            c.sock.send(req)  # a few bytes into an empty send buffer
        except OSError:
            errors["write"] += 1
            sel.unregister(c.sock)
            c.sock.close()

    def busy():
        return sum(1 for k in sel.get_map().values() if k.data.due is not None)

    while True:
        now = time.monotonic()
        # Every request due by now goes out (or waits for a connection); at
        # the stop every one of the schedule is due.
        due_count = (scheduled if now >= stop else min(int((now - start) * rate) + 1, scheduled) if now >= start
                     else 0)
        while sent < due_count:
            lags.append(now - (start + sent / rate))
            waiting.append(start + sent / rate)
            sent += 1
        if now < stop:
            while waiting and idle:
                send(idle.popleft(), waiting.popleft())
            next_due = start + sent / rate
            timeout = max(0.0, min(next_due, stop) - time.monotonic())
        else:
            if not waiting and busy() == 0:
                break
            if now > stop + GRACE:
                errors["timeout"] += len(waiting) + busy()
                break
            while waiting and idle:
                send(idle.popleft(), waiting.popleft())
            timeout = 0.05
        for key, _ in sel.select(timeout):
            c = key.data
            try:
                data = c.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                errors["read"] += 1
                sel.unregister(c.sock)
                c.sock.close()
                continue
            c.buf += data
            got = parse(c.buf)
            if got is None or c.due is None:
                continue
            status, total = got
            done = time.monotonic()
            latencies.append(done - c.due)
            nbytes += total
            c.buf = c.buf[total:]
            c.due = None
            if not 200 <= status < 400:
                errors["status"] += 1
            if waiting and done < stop + GRACE:
                # It found every connection busy and waited for this answer.
                due = waiting.popleft()
                queued += 1
                queued_max = max(queued_max, done - due)
                send(c, due)
            else:
                idle.append(c)
    measured = time.monotonic() - start

    if not latencies:
        print("fixedrate: no answer", file=sys.stderr)
        return 1
    lat_us = sorted(x * 1e6 for x in latencies)

    def pct(p):
        return percentile(lat_us, p)

    # Requests, duration: what wrk reports too (completed, over the window).
    lags.sort()
    worst_lag = max(lags[-1], 0.0) if lags else 0.0
    late_1ms = sum(1 for x in lags if x >= LATE)
    late_p99 = max(percentile(lags, 99), 0.0)
    print("BENCH requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d timeout=%d status=%d "
          "p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.1f "
          "late_p99_us=%d late_max_us=%d late_1ms=%d queued=%d queued_max_us=%d"
          % (len(lat_us), measured * 1e6, nbytes, errors["connect"], errors["read"], errors["write"],
             errors["timeout"], errors["status"], pct(50), pct(90), pct(99), pct(99.9), lat_us[-1],
             statistics.fmean(lat_us), late_p99 * 1e6, worst_lag * 1e6, late_1ms, queued, queued_max * 1e6))
    print("fixedrate: %d requests due at %.0f/s over %.1f s, %d answered; the client noticed "
          "one at most %.2f ms late (%d at least 1 ms late); %d waited for a free connection"
          % (sent, rate, seconds, len(lat_us), worst_lag * 1e3, late_1ms, queued), file=sys.stderr)
    if worst_lag > LAG_LIMIT:
        print("fixedrate: FAIL: the client fell %.1f ms behind its schedule (%d of %d requests noticed "
              "at least 1 ms late; it, not the server, was measured): lower the rate"
              % (worst_lag * 1e3, late_1ms, scheduled), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
