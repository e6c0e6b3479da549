"""A test backend for the proxy tests: an HTTP/1.1 server on 127.0.0.1 that
answers, counts what it received, and misbehaves on command.

Standard library only. Each Backend runs in a thread of the test process
(one thread per connection, keep-alive honoured); `mode` says how the next
requests are answered, and `times` how many of them before it goes back to
"ok":

    ok                   200, body "NAME METHOD PATH" (Content-Length)
    status:NNN           NNN with a short body (status:503)
    reset                read the request, then reset the connection (RST)
    close_before_answer  read the request, then close (FIN) without a byte
    close_mid_body       send a head announcing 100 bytes, 10 of them, close
    stall                read the request, answer nothing until stopped
    hold                 read the request, answer nothing until the proxy
                         closes the connection; `closed_by_peer` counts them
    slow                 answer "ok" one byte at a time, `delay` apart
    chunked              200 with a chunked body and a trailer X-Sum
    websocket            a WebSocket echo server (RFC 6455): 101 with
                         Sec-WebSocket-Accept, then every message back as
                         it came; a close frame is answered and ends it
    echo                 the generic case, "Upgrade: echo": 101, then every
                         byte back; after the peer's FIN, "<eof>" and a FIN
                         of its own (a half-close passed on both ways); a
                         line "close" makes it close at once
    early_hints          103 Early Hints with a Link field, then "ok"
    expect_reject        417 to a request that expects 100-continue,
                         without reading its body
    raw                  the bytes in `raw` as they are (a hostile or
                         broken member's answer); the connection stays
                         open for the next request unless `raw_close`

A request with "Expect: 100-continue" gets "100 Continue" (with the field
X-Continue: NAME, to show whose it is) before its body is read, except in
mode expect_reject. `continues` counts them.

What it received: `requests` (a list of Request: method, target, headers as
a list of (name, value), body bytes and their SHA-256), `count(method)`,
`connections` (accepted so far).

Runnable by hand (prints its address): python3 backend.py --mode status:503
"""

import argparse
import hashlib
import socket
import struct
import threading
import time

IO_TIMEOUT = 30  # a bound on every blocking step, so no thread outlives a test for long


class Request:
    def __init__(self, method, target, version, headers, body):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.sha256 = hashlib.sha256(body).hexdigest()

    def header(self, name):
        for n, v in self.headers:
            if n.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]


class _Closed(Exception):
    pass


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise _Closed()
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 65536:
                raise _Closed()
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def request(self, on_head=None):
        """The next request; on_head(req), when given, runs between its
        head and its body and returns False to leave the body unread."""
        line = self.line()
        while line == b"":
            line = self.line()
        method, target, version = line.decode("latin-1").split(" ", 2)
        headers = []
        while True:
            h = self.line()
            if h == b"":
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers.append((name, value.strip()))
        req = Request(method, target, version, headers, b"")
        if on_head is not None and not on_head(req):
            return req
        te = (req.header("Transfer-Encoding") or "").lower()
        if te == "chunked":
            body = b""
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line() != b"":
                        pass
                    break
                body += self.exactly(size)
                self.exactly(2)
            req.body = body
        elif req.header("Content-Length"):
            req.body = self.exactly(int(req.header("Content-Length")))
        req.sha256 = hashlib.sha256(req.body).hexdigest()
        return req


class Listener:
    """A loopback listener that serves each connection with self.one(conn)
    on a thread of its own: the base of the tests' special-purpose
    backends. Subclasses set their own fields, then call
    Listener.__init__ last (the first connection may come at once)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.address = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self.serve, daemon=True).start()

    def close(self):
        self.stop = True
        self.sock.close()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn):
        raise NotImplementedError


def recv_head(conn):
    """Reads from CONN up to the end of a request's head: (head, rest),
    the head without its blank line and what came after it; None when the
    peer closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            return None
        data += more
    head, rest = data.split(b"\r\n\r\n", 1)
    return head, rest


class Backend:
    def __init__(self, name="backend", mode="ok", times=None, delay=0.05,
                 family=socket.AF_INET, port=0, host=None):
        self.name = name
        self.mode = mode
        self.times = times
        self.delay = delay
        self.raw = b""
        self.raw_close = False
        self.requests = []
        self.connections = 0
        self.continues = 0
        self.closed_by_peer = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        # host: another loopback address (127.0.0.2, ...), so that several
        # backends share one port as the endpoints of a Kubernetes Service do.
        addr = host or ("::1" if family == socket.AF_INET6 else "127.0.0.1")
        self.listener = socket.socket(family, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((addr, port))  # port 0: a free one
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.address = ("[%s]:%d" if family == socket.AF_INET6 else "%s:%d") % (addr, self.port)
        self.socks = set()
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    # ---- commands ----

    def set_mode(self, mode, times=None):
        with self.lock:
            self.mode = mode
            self.times = times

    def count(self, method=None):
        with self.lock:
            return sum(1 for r in self.requests if method is None or r.method == method)

    def stop(self):
        """Close the listener and every connection; the threads end."""
        self.stopping.set()
        self.listener.close()
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(IO_TIMEOUT)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ---- serving ----

    def _accept_loop(self):
        while not self.stopping.is_set():
            try:
                sock, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            sock.settimeout(IO_TIMEOUT)
            with self.lock:
                self.connections += 1
                self.socks.add(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _take_mode(self):
        with self.lock:
            mode = self.mode
            if self.times is not None:
                self.times -= 1
                if self.times <= 0:
                    self.mode, self.times = "ok", None
            return mode

    def _serve(self, sock):
        reader = _Reader(sock)
        try:
            while not self.stopping.is_set():
                box = {}

                def on_head(req):
                    box["mode"] = mode = self._take_mode()
                    if (req.header("Expect") or "").lower() != "100-continue":
                        return True
                    if mode == "expect_reject":
                        return False
                    sock.sendall(b"HTTP/1.1 100 Continue\r\nX-Continue: %s\r\n\r\n"
                                 % self.name.encode())
                    with self.lock:
                        self.continues += 1
                    return True

                req = reader.request(on_head)
                with self.lock:
                    self.requests.append(req)
                mode = box["mode"]
                if mode in ("websocket", "echo"):
                    if (req.header("Upgrade") or "").lower() == mode:
                        self._tunnel(sock, reader, req, mode)
                        return
                    # Any other request gets the ordinary answer on a
                    # connection kept alive, as a real server does (closing
                    # it unannounced raced the proxy's reuse of it).
                    mode = "ok"
                if not self._answer(sock, req, mode):
                    return
                if (req.header("Connection") or "").lower() == "close":
                    return
        except (_Closed, OSError, ValueError):
            pass
        finally:
            with self.lock:
                self.socks.discard(sock)
            try:
                sock.close()
            except OSError:
                pass

    def _answer(self, sock, req, mode):
        """Answer req as mode says; False when the connection must end."""
        body = ("%s %s %s" % (self.name, req.method, req.target)).encode()
        if mode == "ok" or mode.startswith("status:"):
            status = int(mode.split(":")[1]) if mode != "ok" else 200
            head = "HTTP/1.1 %d X\r\nContent-Length: %d\r\nX-Backend: %s\r\n\r\n" % (
                status, len(body), self.name)
            sock.sendall(head.encode() + (b"" if req.method == "HEAD" else body))
            return True
        if mode == "reset":
            # SO_LINGER with a zero timeout: close() sends RST.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if mode == "close_before_answer":
            return False
        if mode == "close_mid_body":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
            return False
        if mode == "stall":
            self.stopping.wait(IO_TIMEOUT)
            return False
        if mode == "hold":
            deadline = time.monotonic() + IO_TIMEOUT
            while not self.stopping.is_set() and time.monotonic() < deadline:
                try:
                    sock.settimeout(0.1)
                    if sock.recv(4096) == b"":
                        with self.lock:
                            self.closed_by_peer += 1
                        return False
                except socket.timeout:
                    continue
                except OSError:  # a reset is a close too
                    with self.lock:
                        self.closed_by_peer += 1
                    return False
            return False
        if mode == "slow":
            data = ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)).encode() + body
            for i in range(len(data)):
                if self.stopping.wait(self.delay):
                    return False
                sock.sendall(data[i:i + 1])
            return True
        if mode == "early_hints":
            sock.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
            return self._answer(sock, req, "ok")
        if mode == "expect_reject":
            sock.sendall(b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            return False
        if mode == "raw":
            sock.sendall(self.raw)
            return not self.raw_close
        if mode == "chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
                         + b"%x\r\n%s\r\n0\r\nX-Sum: %d\r\n\r\n" % (len(body), body, len(body)))
            return True
        raise ValueError("unknown mode %r" % mode)


    # ---- tunnels (after a 101) ----

    def _tunnel(self, sock, reader, req, mode):
        """Answer an upgrade request for mode with 101 and serve the
        protocol."""
        head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n" % mode
        if mode == "websocket":
            key = req.header("Sec-WebSocket-Key") or ""
            head += "Sec-WebSocket-Accept: %s\r\n" % websocket_accept(key)
        sock.sendall((head + "\r\n").encode())
        if mode == "websocket":
            self._websocket_echo(sock, reader)
        else:
            self._raw_echo(sock, reader)

    def _raw_echo(self, sock, reader):
        data, reader.buf = reader.buf, b""
        while not self.stopping.is_set():
            if data:
                sock.sendall(data)
                if b"close\n" in data:
                    return
            data = sock.recv(65536)
            if not data:
                sock.sendall(b"<eof>")
                sock.shutdown(socket.SHUT_WR)
                return

    def _websocket_echo(self, sock, reader):
        while not self.stopping.is_set():
            opcode, payload = ws_read_frame(reader)
            if opcode == 8:  # close: answer it, then end
                sock.sendall(ws_frame(8, payload[:2]))
                return
            sock.sendall(ws_frame(opcode, payload))


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def websocket_accept(key):
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455 4.2.2)."""
    import base64
    return base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()


def ws_frame(opcode, payload, mask=None):
    """One final frame; masked (as a client sends) when mask is 4 bytes."""
    head = bytes([0x80 | opcode])
    bit = 0x80 if mask else 0
    n = len(payload)
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        head += mask
    return head + payload


def ws_read_frame(reader):
    """(opcode, payload) of the next frame from a _Reader-like object with
    exactly(n), unmasked."""
    b0, b1 = reader.exactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", reader.exactly(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", reader.exactly(8))[0]
    mask = reader.exactly(4) if b1 & 0x80 else None
    payload = reader.exactly(n)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return b0 & 0x0F, payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default="backend")
    ap.add_argument("--mode", default="ok")
    args = ap.parse_args()
    b = Backend(args.name, args.mode)
    print("listening on %s, mode %s" % (b.address, b.mode), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        b.stop()


if __name__ == "__main__":
    main()
