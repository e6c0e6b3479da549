"""A fixed-rate load for the integration tests (issue 11, "What it must
show" 1): N requests a second, bounded in time and in count, spread over
three kinds of client at once, every request recorded with its outcome and
the Server header it got.

    h1      HTTP/1.1 keep-alive, a few persistent connections
    h1-new  HTTP/1.1, a new connection per request (Connection: close)
    h2      HTTP/2 over TLS (ALPN h2, python3-h2), a few connections with
            several streams each

Request i is due at start + i/rate, of kind KINDS[i % 3] and for URL
urls[(i // 3) % len(urls)]; a kind that falls behind queues its requests
(none is dropped), and each record keeps its due time as `start`.

What is a failure is what a correct client would not hide:
- ok: the expected status; "status": another one.
- reset (ECONNRESET, EPIPE, an RST_STREAM other than REFUSED_STREAM),
  refused (ECONNREFUSED), timeout, protocol (a malformed answer, a GOAWAY
  with an error), closed (the request was sent and the connection ended
  without its answer).
- Not failures: a keep-alive connection the server closed while idle
  (seen before a request is written on it: a client checks before reuse)
  or after an answer with Connection: close; an HTTP/2 GOAWAY (the client
  opens a new connection). A stream the server refused unprocessed
  (REFUSED_STREAM, or above a GOAWAY's last stream id, RFC 9113 6.8) is
  sent again, on a new connection when needed, and counted as retried;
  its record says how many times.

Also here: the kernel's listen-queue counters (TcpExt ListenOverflows and
ListenDrops, what `nstat` shows) and a way to run a function in a network
namespace of its own, where only its traffic moves them.

Standard library plus python3-h2; run by /usr/bin/python3.
"""

import collections
import ctypes
import errno
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import threading
import time
import traceback

from harness import Client, ConnectionClosed, request, scale

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

KINDS = ("h1", "h1-new", "h2")
OUTCOMES = ("ok", "status", "reset", "refused", "timeout", "protocol", "closed")

# One request's bound, from when it is written until its answer ends.
REQUEST_TIMEOUT = scale(10)
# How many times a refused HTTP/2 stream is sent again before it counts as
# failed: a server that refuses every stream must not loop the client.
MAX_RETRIES = 5


class Record:
    """One request: kind, url, start (its due time, time.monotonic()), end,
    outcome (OUTCOMES), status, server (the Server header, or None), body
    (the first bytes), retries, detail (why, for a failure)."""

    __slots__ = ("kind", "url", "start", "end", "outcome", "status", "server", "body",
                 "retries", "detail")

    def __init__(self, kind, url, start):
        self.kind, self.url, self.start = kind, url, start
        self.end = None
        self.outcome = None
        self.status = None
        self.server = None
        self.body = b""
        self.retries = 0
        self.detail = ""

    def as_dict(self):
        d = {k: getattr(self, k) for k in self.__slots__}
        d["body"] = self.body.decode("latin-1")
        return d


class _Queue:
    """A kind's due requests: the scheduler appends, a retry goes first."""

    def __init__(self):
        self.items = collections.deque()
        self.cond = threading.Condition()

    def put(self, rec, first=False):
        with self.cond:
            (self.items.appendleft if first else self.items.append)(rec)
            self.cond.notify()

    def get(self, timeout):
        """The next record, or None after timeout seconds without one."""
        with self.cond:
            if not self.items:
                self.cond.wait(timeout)
            return self.items.popleft() if self.items else None

    def __len__(self):
        return len(self.items)


def _classify(exc):
    """(outcome, detail) of an exception raised by a request."""
    if isinstance(exc, ConnectionRefusedError):
        return "refused", repr(exc)
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "reset", repr(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout", repr(exc)
    if isinstance(exc, ConnectionClosed):
        return "closed", str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ECONNREFUSED:
        return "refused", repr(exc)
    if isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE):
        return "reset", repr(exc)
    return "protocol", repr(exc)


def _peer_closed(sock):
    """True if the peer ended the connection (FIN or RST pending) while we
    sent nothing: what a client checks before reusing an idle connection."""
    ready, _, _ = select.select([sock], [], [], 0)
    if not ready:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _GoawayTolerantH2(h2.connection.H2Connection):
    """python3-h2 (4.1) moves the whole connection to CLOSED on a GOAWAY
    and then refuses the frames of streams the server is still finishing;
    RFC 9113 6.8 says streams up to the last stream id complete. Keep the
    connection open for them; the client opens no stream after a GOAWAY."""

    def _receive_goaway_frame(self, frame):
        state = self.state_machine.state
        events = super()._receive_goaway_frame(frame)
        self.state_machine.state = state
        return events


class LoadGen:
    """The load, started by start(), ended by stop() (or by its bounds:
    `seconds`, `max_requests`). Then summary(), failures(), records.

    urls: paths on the server ("/", "/proxy/x"), each asked of every kind.
    port: the plain listener (h1, h1-new); tls_port and tls_context (ALPN
    h2 set here) for h2, with server_name for SNI; host: the Host header
    (:authority). expect_status: what counts as ok.
    """

    def __init__(self, port, urls, rate=90, seconds=60, max_requests=20000, tls_port=None,
                 tls_context=None, server_name="localhost", host="load.test",
                 keepalive_conns=3, newconn_threads=2, h2_conns=2, h2_streams=4,
                 expect_status=200, kinds=KINDS):
        if "h2" in kinds and (tls_port is None or tls_context is None):
            raise ValueError("h2 needs tls_port and tls_context")
        self.port, self.urls, self.rate = port, list(urls), rate
        self.seconds, self.max_requests = seconds, max_requests
        self.tls_port, self.server_name, self.host = tls_port, server_name, host
        self.tls_context = tls_context
        if tls_context is not None:
            tls_context.set_alpn_protocols(["h2"])
        self.h2_streams = h2_streams
        self.expect_status = expect_status
        self.kinds = tuple(kinds)
        self.records = []  # every request, in the order they were due
        self.retried = collections.Counter()  # per kind: streams sent again
        self.connects = collections.Counter()  # per kind: connections opened
        self.queues = {k: _Queue() for k in self.kinds}
        self._lock = threading.Lock()
        self._ended = 0
        self._stopping = threading.Event()  # no more requests become due
        self._done = threading.Event()      # and the clients may leave
        self._threads = []
        counts = {"h1": keepalive_conns, "h1-new": newconn_threads, "h2": h2_conns}
        runs = {"h1": self._run_h1, "h1-new": self._run_h1_new, "h2": self._run_h2}
        for kind in self.kinds:
            for _ in range(counts[kind]):
                self._threads.append(threading.Thread(target=runs[kind], daemon=True))
        self._threads.append(threading.Thread(target=self._schedule, daemon=True))
        self.t0 = None

    # -- driving ---------------------------------------------------------

    def start(self):
        self.t0 = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout=None):
        """No more requests become due; those due are sent and answered
        (or time out); returns once every client thread ended. An
        AssertionError if one is still running after timeout."""
        timeout = timeout if timeout is not None else REQUEST_TIMEOUT * 3
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self._threads if t.is_alive()]
        if alive:
            raise AssertionError("%d load threads still running %.0fs after stop"
                                 % (len(alive), timeout))

    def close(self):
        """stop() for a cleanup path: an error there is not the test's
        verdict (the records say what happened)."""
        try:
            self.stop()
        except AssertionError:
            pass

    def wait_requests(self, n, timeout):
        """Block until at least n requests have ended (bounded)."""
        deadline = time.monotonic() + timeout
        while self.ended() < n:
            if time.monotonic() > deadline:
                raise AssertionError("only %d of %d requests ended in %.0fs"
                                     % (self.ended(), n, timeout))
            time.sleep(0.01)

    def ended(self):
        """How many requests have ended (any outcome)."""
        return self._ended

    def _schedule(self):
        """Make requests due at the fixed rate until a bound or stop()."""
        i = 0
        deadline = self.t0 + self.seconds
        while not self._stopping.is_set() and i < self.max_requests:
            due = self.t0 + i / self.rate
            if due >= deadline:
                break
            wait = due - time.monotonic()
            if wait > 0:
                self._stopping.wait(wait)
                continue
            kind = self.kinds[i % len(self.kinds)]
            rec = Record(kind, self.urls[(i // len(self.kinds)) % len(self.urls)], due)
            with self._lock:
                self.records.append(rec)
            self.queues[kind].put(rec)
            i += 1
        self._stopping.set()
        self._done.set()

    def _next(self, kind, timeout=0.05):
        """The next due request of kind, or None: none now (then the
        caller asks again unless _finished(kind))."""
        return self.queues[kind].get(timeout)

    def _finished(self, kind):
        return self._done.is_set() and len(self.queues[kind]) == 0

    def _end(self, rec, outcome, detail="", status=None, server=None, body=b""):
        rec.end = time.monotonic()
        rec.status, rec.server, rec.body, rec.detail = status, server, body[:64], detail
        if outcome == "ok" and status != self.expect_status:
            outcome = "status"
        with self._lock:
            rec.outcome = outcome
            self._ended += 1

    # -- HTTP/1.1 ----------------------------------------------------------

    def _h1_request(self, c, rec, close):
        headers = [("Connection", "close")] if close else []
        c.send(request("GET", rec.url, host=self.host, headers=headers))
        r = c.read_response()
        self._end(rec, "ok", status=r.status, server=r.header("Server"), body=r.body)
        return (r.header("Connection") or "").lower() == "close"

    def _h1_failed(self, c, rec, exc):
        outcome, detail = _classify(exc)
        if outcome == "closed" and c is not None and c.reset:
            outcome = "reset"  # harness.Client reads an RST as the end of the stream
        self._end(rec, outcome, detail)

    def _run_h1(self):
        c = None
        while not self._finished("h1"):
            rec = self._next("h1")
            if rec is None:
                continue
            try:
                if c is not None and _peer_closed(c.sock):
                    c.close()  # closed while idle: not this request's failure
                    c = None
                if c is None:
                    self.connects["h1"] += 1
                    c = Client(self.port, timeout=REQUEST_TIMEOUT)
                if self._h1_request(c, rec, close=False):
                    c.close()
                    c = None
            except (OSError, AssertionError, ValueError) as e:
                self._h1_failed(c, rec, e)
                if c is not None:
                    c.close()
                c = None
        if c is not None:
            c.close()

    def _run_h1_new(self):
        while not self._finished("h1-new"):
            rec = self._next("h1-new")
            if rec is None:
                continue
            c = None
            try:
                self.connects["h1-new"] += 1
                c = Client(self.port, timeout=REQUEST_TIMEOUT)
                self._h1_request(c, rec, close=True)
            except (OSError, AssertionError, ValueError) as e:
                self._h1_failed(c, rec, e)
            finally:
                if c is not None:
                    c.close()

    # -- HTTP/2 over TLS ---------------------------------------------------

    def _run_h2(self):
        h = _H2Client(self)
        try:
            h.run()
        finally:
            h.close()

    def _retry(self, kind, rec, detail):
        """Send rec again (first in line); a failure after MAX_RETRIES."""
        if rec.retries >= MAX_RETRIES:
            self._end(rec, "reset", "refused %d times; last: %s" % (rec.retries + 1, detail))
            return
        rec.retries += 1
        with self._lock:
            self.retried[kind] += 1
        self.queues[kind].put(rec, first=True)

    # -- results -----------------------------------------------------------

    def failures(self):
        """The records that ended other than ok (or never ended)."""
        with self._lock:
            return [r for r in self.records if r.outcome != "ok"]

    def summary(self):
        """A JSON-able dict: counts[kind][outcome] (plus "unended"),
        retried[kind], servers {value: [first, last]} (start times of the
        first and last request answered with it, seconds since start()),
        requests, failures (the first 20 failed records)."""
        with self._lock:
            records = list(self.records)
            retried = dict(self.retried)
        counts = {k: dict.fromkeys(OUTCOMES + ("unended",), 0) for k in self.kinds}
        servers = {}
        for r in records:
            counts[r.kind][r.outcome or "unended"] += 1
            if r.outcome == "ok":
                span = servers.setdefault(r.server or "", [r.start, r.start])
                span[0], span[1] = min(span[0], r.start), max(span[1], r.start)
        return {"requests": len(records), "counts": counts,
                "retried": {k: retried.get(k, 0) for k in self.kinds},
                "servers": {s: [round(a - self.t0, 3), round(b - self.t0, 3)]
                            for s, (a, b) in servers.items()},
                "failures": [r.as_dict() for r in records if r.outcome != "ok"][:20],
                "failed": sum(1 for r in records if r.outcome != "ok")}



def format_summary(s):
    """The summary as a few lines for a test's output."""
    lines = ["load: %d requests, %d failed" % (s["requests"], s["failed"])]
    for kind, c in s["counts"].items():
        lines.append("  %-6s %s retried=%d" % (kind, " ".join("%s=%d" % kv for kv in c.items() if kv[1]),
                                               s["retried"][kind]))
    for server, (first, last) in sorted(s["servers"].items(), key=lambda kv: kv[1][0]):
        lines.append("  Server %r: first %.2fs, last %.2fs" % (server, first, last))
    for f in s["failures"][:5]:
        lines.append("  failed: %s %s at %.2f: %s %s" % (f["kind"], f["url"], f["start"],
                                                        f["outcome"], f["detail"]))
    return "\n".join(lines)


class _H2Client:
    """One HTTP/2-over-TLS client thread: one connection at a time, up to
    h2_streams requests in flight on it; a new connection after a GOAWAY
    once the streams it lets finish are done, or after an idle close."""

    def __init__(self, gen):
        self.gen = gen
        self.sock = None
        self.conn = None
        self.streams = {}     # stream id -> [Record, status, server, body, sent at]
        self.last_id = None   # the GOAWAY's last stream id, once one came

    def close(self):
        if self.sock is not None:
            self.sock.close()
        self.sock = None
        self.conn = None
        self.last_id = None

    def _connect(self):
        self.gen.connects["h2"] += 1
        raw = socket.create_connection(("127.0.0.1", self.gen.tls_port), timeout=REQUEST_TIMEOUT)
        try:
            sock = self.gen.tls_context.wrap_socket(raw, server_hostname=self.gen.server_name)
        except BaseException:
            raw.close()
            raise
        if sock.selected_alpn_protocol() != "h2":
            sock.close()
            raise ValueError("ALPN chose %r, not h2" % sock.selected_alpn_protocol())
        self.sock = sock
        self.conn = _GoawayTolerantH2(config=h2.config.H2Configuration(
            client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self.last_id = None

    def _flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def _fail_all(self, outcome, detail):
        """The connection is gone: what it had in flight ends (or goes
        again, for streams a GOAWAY said were not processed)."""
        for sid, st in sorted(self.streams.items()):
            if self.last_id is not None and sid > self.last_id:
                self.gen._retry("h2", st[0], "above GOAWAY last stream id %d" % self.last_id)
            else:
                self.gen._end(st[0], outcome, detail)
        self.streams = {}
        self.close()

    def run(self):
        gen = self.gen
        while not (gen._finished("h2") and not self.streams):
            if self.sock is not None and self.last_id is not None and not self.streams:
                self.close()  # a GOAWAY, and its streams are done: next one on a new connection
            if not self._open_streams():
                continue
            self._read()
            self._expire()

    def _open_streams(self):
        """Start due requests while streams are free; False if there was
        nothing to do (after waiting a little for a due request)."""
        gen = self.gen
        while len(self.streams) < gen.h2_streams and self.last_id is None:
            rec = gen._next("h2", timeout=0 if self.streams else 0.05)
            if rec is None:
                break
            if self.sock is not None and not self.streams:
                # What an idle connection got (a GOAWAY, its close) is read
                # before it is reused, as an HTTP/1 client checks.
                self._read(wait=0)
                if self.last_id is not None:
                    self.close()
            try:
                if self.sock is None:
                    self._connect()
                sid = self.conn.get_next_available_stream_id()
                self.conn.send_headers(sid, [
                    (b":method", b"GET"), (b":scheme", b"https"),
                    (b":authority", gen.host.encode()), (b":path", rec.url.encode())],
                    end_stream=True)
                self.streams[sid] = [rec, None, None, b"", time.monotonic()]
                self._flush()
            except (OSError, ssl.SSLError, ValueError, h2.exceptions.ProtocolError) as e:
                if rec.outcome is None and not any(st[0] is rec for st in self.streams.values()):
                    gen._end(rec, *_classify(e))
                self._fail_all(*_classify(e))
                return True
        return bool(self.streams)

    def _read(self, wait=0.02):
        sock = self.sock
        if sock is None:
            return
        if not sock.pending():
            ready, _, _ = select.select([sock], [], [], wait)
            if not ready:
                return
        try:
            data = sock.recv(65536)
        except (OSError, ssl.SSLError) as e:
            self._fail_all(*_classify(e))
            return
        if not data:
            # An idle close is not a failure; a stream in flight is.
            self._fail_all("closed", "connection closed with the stream in flight")
            return
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError as e:
            self._fail_all("protocol", repr(e))
            return
        for ev in events:
            self._event(ev)
        if self.sock is not None:
            try:
                self._flush()
            except OSError as e:
                self._fail_all(*_classify(e))

    def _event(self, ev):
        gen = self.gen
        st = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived) and st:
            hdrs = dict(ev.headers)
            st[1] = int(hdrs.get(b":status", b"0"))
            server = hdrs.get(b"server")
            st[2] = server.decode("latin-1") if server is not None else None
        elif isinstance(ev, h2.events.DataReceived):
            self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if st:
                st[3] += ev.data[:64 - len(st[3])]
        elif isinstance(ev, h2.events.StreamEnded) and st:
            del self.streams[ev.stream_id]
            gen._end(st[0], "ok", status=st[1], server=st[2], body=st[3])
        elif isinstance(ev, h2.events.StreamReset) and st:
            del self.streams[ev.stream_id]
            if ev.error_code == h2.errors.ErrorCodes.REFUSED_STREAM:
                gen._retry("h2", st[0], "REFUSED_STREAM")
            else:
                gen._end(st[0], "reset", "RST_STREAM %r" % ev.error_code)
        elif isinstance(ev, h2.events.ConnectionTerminated):
            if ev.error_code != h2.errors.ErrorCodes.NO_ERROR:
                self.last_id = ev.last_stream_id
                self._fail_all("protocol", "GOAWAY %r" % ev.error_code)
                return
            # A graceful GOAWAY: streams above last_stream_id were not
            # processed, go again; the others finish on this connection.
            last = ev.last_stream_id if self.last_id is None else min(self.last_id,
                                                                      ev.last_stream_id)
            self.last_id = last
            for sid in sorted(s for s in self.streams if s > last):
                gen._retry("h2", self.streams.pop(sid)[0], "above GOAWAY last stream id %d" % last)

    def _expire(self):
        now = time.monotonic()
        for sid, st in list(self.streams.items()):
            if now - st[4] > REQUEST_TIMEOUT:
                del self.streams[sid]
                self.gen._end(st[0], "timeout", "no answer in %.0fs" % REQUEST_TIMEOUT)
                try:
                    self.conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                    self._flush()
                except (OSError, h2.exceptions.ProtocolError):
                    pass


# -- the kernel's listen-queue counters, in a namespace of one's own --------

CLONE_NEWNET = 0x40000000


def listen_counters():
    """(ListenOverflows, ListenDrops) of this network namespace, from
    /proc/net/netstat (what `nstat` shows as TcpExtListenOverflows,
    TcpExtListenDrops). Any process of the namespace moves them: compare
    them only where the namespace is the test's own."""
    with open("/proc/net/netstat") as f:
        lines = [line.split() for line in f if line.startswith("TcpExt:")]
    values = dict(zip(lines[0][1:], (int(v) for v in lines[1][1:])))
    return values["ListenOverflows"], values["ListenDrops"]


def enter_own_netns():
    """Move this process into a new network namespace with loopback up;
    OSError (or SubprocessError) if that is not permitted."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET): %s"
                      % os.strerror(ctypes.get_errno()))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)


def in_own_netns(fn, *args, limit):
    """fn(*args) in a forked child inside a new network namespace, bounded
    by `limit` seconds (SIGALRM in the child); its result (a JSON-able
    value), {"skip": why} when no namespace can be had, or an
    AssertionError with the child's traceback. Call it before starting
    threads: only the calling thread lives on in the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        status = 0
        try:
            def expire(*_):
                raise TimeoutError("run still going after %ds" % limit)
            signal.signal(signal.SIGALRM, expire)
            signal.alarm(limit)
            try:
                enter_own_netns()
            except (OSError, subprocess.SubprocessError) as e:
                out = {"skip": "no network namespace of its own: %s" % e}
            else:
                out = fn(*args)
        except BaseException:
            out = {"error": traceback.format_exc()}
            status = 1
        try:
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(status)
    os.close(w)
    data = b""
    deadline = time.monotonic() + limit + scale(15)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        if not data:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not data:
        raise AssertionError("the run in its own namespace gave no result in time")
    out = json.loads(data)
    if isinstance(out, dict) and "error" in out:
        raise AssertionError("the run failed:\n%s" % out["error"])
    return out
