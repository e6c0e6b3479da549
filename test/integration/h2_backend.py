"""A gRPC-style HTTP/2 backend (h2c, prior knowledge, or over TLS with
`tls=`, a server context from tls_context) for the tests of pools with
`protocol: h2` or `grpc`, and a small HTTP/2 client that shows
trailers and can reset a stream. python3-h2 (Debian's), run by
/usr/bin/python3.

H2Backend runs in threads of the test process (one per connection). Each
request is answered, once its stream ended, by `mode`:

    echo        200, content-type application/grpc, the request body back
                (a request without a body gets "NAME METHOD PATH"), then
                the trailers grpc-status: 0, grpc-message: ok; a request
                with `x-reflect: V` also gets the field `x-reflect: V`
                and the trailer `x-reflect-trailer: V` (what one response
                carried must not show in the next)
    status:N    the same with grpc-status N and grpc-message "failed N"
    gather:N    as echo, but nothing is answered until N requests are open
                at once (on any of its connections): they were concurrent
    goaway      GOAWAY with a last-stream-id below the request's, then the
                connection closes: the request was not processed
    hold        no answer (until the proxy resets the stream or leaves)
    reset       RST_STREAM INTERNAL_ERROR once the request ended (it was
                processed: not to be sent again unless idempotent)
    zero        (read when a connection opens) announces
                SETTINGS_MAX_CONCURRENT_STREAMS 0 and refuses, with
                RST_STREAM REFUSED_STREAM, a stream that came before the
                peer saw it, as nghttp2 and RFC 9113 5.1.2 do (python-h2
                would end the connection): a member that takes no request

What it saw: `connections`, `streams` (requests begun), `requests` (a list
of Request: headers as (name, value) str pairs, body, trailers),
`resets` (stream ids the peer reset), `goaways` (GOAWAYs it sent),
`received` (request body bytes, every stream), `refused` (streams
refused in mode zero); over TLS also
`handshakes`, `resumed` (of them), `failed_handshakes` and `alpn` (the
protocol each handshake chose, None for none).
"""

import socket
import ssl
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

from harness import TIMEOUT


# A SETTINGS frame of its own, SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 0,
# sent raw after python-h2's: announced through h2's settings, h2 would
# enforce it by ending the connection on the first stream.
ZERO_STREAMS = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0])


def field(pairs, name):
    """The first value of name among (name, value) pairs, or None."""
    for n, v in pairs:
        if n == name:
            return v
    return None


def send_window(conn, sid, body):
    """Send what the stream's window and the frame size allow of body; the
    rest, to send after the next WINDOW_UPDATE."""
    while body:
        n = min(len(body), conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        if n <= 0:
            break
        conn.send_data(sid, body[:n])
        body = body[n:]
    return body


def drain(s):
    """Read what the peer sent after our GOAWAY (RFC 9113 6.8: its sender
    goes on reading), so that the close is a FIN: closed with bytes unread
    it would be a reset, and the peer's kernel may drop the GOAWAY with
    it (over TLS, which reads a record at a time, that is the usual
    case). Bounded: until the peer pauses or closes, at most 64 reads."""
    s.settimeout(0.05)
    for _ in range(64):
        try:
            if not s.recv(65536):
                return
        except (socket.timeout, OSError):
            return


class Request:
    def __init__(self, stream_id):
        self.stream_id = stream_id
        self.headers = []
        self.body = bytearray()
        self.trailers = []
        self.ended = False

    def header(self, name):
        return field(self.headers, name)


def tls_context(certfile, keyfile, alpn=("h2",)):
    """A server context for H2Backend or another member: the pair, and
    ALPN offering alpn (a member without h2 gives ("http/1.1",))."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certfile, keyfile)
    ctx.set_alpn_protocols(list(alpn))
    return ctx


class H2Backend:
    def __init__(self, name="m", mode="echo", tls=None, max_streams=None):
        self.name = name
        self.mode = mode  # read at each request: a test may change it
        self.tls = tls
        self.max_streams = max_streams  # its SETTINGS_MAX_CONCURRENT_STREAMS; None: h2's
        self.handshakes = 0
        self.resumed = 0
        self.failed_handshakes = 0
        self.alpn = []
        self.lock = threading.Lock()
        self.connections = 0
        self.streams = 0
        self.requests = []
        self.resets = []
        self.goaways = 0
        self.refused = 0
        self.received = 0  # request body bytes, all streams
        self.waiting = []  # (conn_state, request) held by gather
        self.gathered = False  # ... until this many were open at once
        self.stopped = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass
        for t in self.threads:
            t.join(timeout=TIMEOUT)

    def _accept(self):
        self.sock.settimeout(0.05)
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                continue
            with self.lock:
                self.connections += 1
            t = threading.Thread(target=self._serve, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    # ---- one connection ----

    def _handshake(self, s):
        """s over TLS, or None when the handshake failed (s closed)."""
        try:
            s.settimeout(TIMEOUT)
            tls = self.tls.wrap_socket(s, server_side=True)
        except (ssl.SSLError, OSError):
            with self.lock:
                self.failed_handshakes += 1
            s.close()
            return None
        with self.lock:
            self.handshakes += 1
            self.resumed += 1 if tls.session_reused else 0
            self.alpn.append(tls.selected_alpn_protocol())
        return tls

    def _serve(self, s):
        if self.tls is not None and (s := self._handshake(s)) is None:
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8"))
        if self.max_streams is not None:
            conn.local_settings = h2.settings.Settings(client=False, initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        conn.initiate_connection()
        zero = self.mode == "zero"
        state = {"conn": conn, "sock": s, "reqs": {}, "out": {}, "close": False,
                 "answer": [], "zero": zero}
        s.settimeout(0.05)
        try:
            s.sendall(conn.data_to_send() + (ZERO_STREAMS if zero else b""))
            while not self.stopped and not state["close"]:
                try:
                    data = s.recv(65536)
                except socket.timeout:
                    data = None
                if data == b"":
                    break
                if data:
                    for ev in conn.receive_data(data):
                        self._event(state, ev)
                self._answer_ready(state)
                self._pump(state)
                s.sendall(conn.data_to_send())
            if state["close"]:
                drain(s)
        except (OSError, h2.exceptions.ProtocolError):
            pass
        finally:
            s.close()

    def _event(self, state, ev):
        conn = state["conn"]
        if state["close"]:
            return  # after our GOAWAY: nothing more is processed
        if isinstance(ev, h2.events.RequestReceived) and state["zero"]:
            conn.reset_stream(ev.stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
            with self.lock:
                self.refused += 1
        elif isinstance(ev, h2.events.RequestReceived):
            r = Request(ev.stream_id)
            r.headers = list(ev.headers)
            state["reqs"][ev.stream_id] = r
            with self.lock:
                self.streams += 1
            if self.mode == "goaway":
                conn.close_connection(last_stream_id=max(ev.stream_id - 2, 0))
                with self.lock:
                    self.goaways += 1
                state["close"] = True
                return
            if ev.stream_ended:
                self._ended(state, r)
        elif isinstance(ev, h2.events.DataReceived):
            r = state["reqs"].get(ev.stream_id)
            if r is not None:
                r.body += ev.data
            with self.lock:
                self.received += len(ev.data)
            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived):
            r = state["reqs"].get(ev.stream_id)
            if r is not None:
                r.trailers = list(ev.headers)
        elif isinstance(ev, h2.events.StreamEnded):
            r = state["reqs"].get(ev.stream_id)
            if r is not None and not r.ended:
                self._ended(state, r)
        elif isinstance(ev, h2.events.StreamReset):
            with self.lock:
                self.resets.append(ev.stream_id)
            state["out"].pop(ev.stream_id, None)

    def _ended(self, state, r):
        r.ended = True
        with self.lock:
            self.requests.append(r)
        mode = self.mode
        if mode == "hold":
            return
        if mode == "reset":
            state["conn"].reset_stream(r.stream_id, error_code=2)
            return
        if mode.startswith("gather:"):
            with self.lock:
                self.waiting.append((state, r))
            return
        state["answer"].append(r)

    def _answer_ready(self, state):
        """Answers due on this connection (gather: all once N are in)."""
        if self.mode.startswith("gather:"):
            with self.lock:
                if len(self.waiting) >= int(self.mode.split(":")[1]):
                    self.gathered = True
                if self.gathered:
                    state["answer"].extend(r for st, r in self.waiting if st is state)
                    self.waiting = [(st, r) for st, r in self.waiting if st is not state]
        while state["answer"]:
            self._respond(state, state["answer"].pop(0))

    def _respond(self, state, r):
        conn = state["conn"]
        grpc_status = "0"
        if self.mode.startswith("status:"):
            grpc_status = self.mode.split(":")[1]
        body = bytes(r.body) if r.body else (
            "%s %s %s" % (self.name, r.header(":method"), r.header(":path"))).encode()
        reflect = r.header("x-reflect")
        head = [(":status", "200"), ("content-type", "application/grpc")]
        trailers = [("grpc-status", grpc_status),
                    ("grpc-message", "ok" if grpc_status == "0" else "failed " + grpc_status)]
        if reflect is not None:
            head.append(("x-reflect", reflect))
            trailers.append(("x-reflect-trailer", reflect))
        conn.send_headers(r.stream_id, head)
        state["out"][r.stream_id] = [body, trailers]

    def _pump(self, state):
        """Send what the windows allow; trailers after the last byte."""
        conn = state["conn"]
        for sid in list(state["out"]):
            body, trailers = state["out"][sid]
            try:
                body = state["out"][sid][0] = send_window(conn, sid, body)
                if not body:
                    conn.send_headers(sid, trailers, end_stream=True)
                    del state["out"][sid]
            except h2.exceptions.StreamClosedError:
                del state["out"][sid]


class H2Response:
    def __init__(self):
        self.headers = []
        self.body = bytearray()
        self.trailers = []
        self.reset = None
        self.ended = False

    def header(self, name):
        return field(self.headers, name)

    @property
    def status(self):
        return int(self.header(":status"))

    def trailer(self, name):
        return field(self.trailers, name)


class H2Client:
    """One HTTP/2 connection with prior knowledge; streams in parallel."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        # Room for a whole 1 MiB answer without window updates mid-way.
        self.conn.increment_flow_control_window(1 << 24)
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 24})
        self.responses = {}
        self.pending = {}  # stream id -> [body left, trailers]
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()

    def start(self, path, method="POST", body=b"", trailers=None, headers=()):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", "http"), (":authority", "x"),
                (":path", path)] + list(headers)
        end = not body and not trailers
        self.conn.send_headers(sid, hdrs, end_stream=end)
        self.responses[sid] = H2Response()
        if not end:
            self.pending[sid] = [body, trailers]
        self._flush()
        return sid

    def reset(self, sid):
        self.conn.reset_stream(sid)
        self._flush()

    def _flush(self):
        for sid in list(self.pending):
            body, trailers = self.pending[sid]
            body = self.pending[sid][0] = send_window(self.conn, sid, body)
            if not body:
                if trailers:
                    self.conn.send_headers(sid, trailers, end_stream=True)
                else:
                    self.conn.end_stream(sid)
                del self.pending[sid]
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def wait(self, done, timeout=TIMEOUT):
        """Read until done() or the deadline."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("HTTP/2 client: timed out")
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError("HTTP/2 client: connection closed")
            for ev in self.conn.receive_data(data):
                r = self.responses.get(getattr(ev, "stream_id", None))
                if isinstance(ev, h2.events.ResponseReceived):
                    r.headers = list(ev.headers)
                elif isinstance(ev, h2.events.DataReceived):
                    r.body += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.TrailersReceived):
                    r.trailers = list(ev.headers)
                elif isinstance(ev, h2.events.StreamEnded):
                    r.ended = True
                elif isinstance(ev, h2.events.StreamReset):
                    r.reset = ev.error_code
            self._flush()

    def response(self, sid, timeout=TIMEOUT):
        r = self.responses[sid]
        self.wait(lambda: r.ended or r.reset is not None, timeout)
        return r
