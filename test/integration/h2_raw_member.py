"""A hostile HTTP/2 member of raw frames (h2c, prior knowledge) for the
tests and probes of pools with `protocol: h2` (test_audit_h2member.py,
test/tools/h2member_probe.py): header blocks are HPACK literals without
indexing and without Huffman, so any name, value or order goes out as
given, and frames are written as a script says, legal or not.

RawH2Member(scripts) answers each request HEADERS by its path's last
segment: scripts[NAME](stream_id) gives the steps, run on a thread of
their own: bytes to write, (SLEEP, seconds), CLOSE (shut the socket
down) or NOREAD (stop reading it). A name in `uploads` is never answered
and no WINDOW_UPDATE is sent on its connection from then on (a member
that never opens its window); any other name gets 200 "next". It acks
SETTINGS and PING, opens its windows for the DATA it gets, and records
`requests` ((connection number, stream id, fields, body bytes)), `resets`
((connection, stream id, code)) and `goaways`. Standard library and
python3-hpack (Debian's), under /usr/bin/python3.
"""

import socket
import struct
import threading
import time

from hpack import Decoder

from backend import Listener

DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINUP, CONT = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def hint(n, prefix):
    """An HPACK integer with a prefix of `prefix` bits (first byte's flags 0)."""
    limit = (1 << prefix) - 1
    if n < limit:
        return bytes([n])
    out, n = bytearray([limit]), n - limit
    while n >= 128:
        out.append((n & 127) | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def block(fields):
    """A header block of literals without indexing, new names, no Huffman:
    the names and their order exactly as given."""
    out = bytearray()
    for n, v in fields:
        n, v = n.encode() if isinstance(n, str) else n, v.encode() if isinstance(v, str) else v
        out += b"\x00" + hint(len(n), 7) + n + hint(len(v), 7) + v
    return bytes(out)


def headers(sid, fields, end=False, flags=END_HEADERS):
    return frame(HEADERS, flags | (END_STREAM if end else 0), sid, block(fields))


def data(sid, payload, end=False):
    return frame(DATA, END_STREAM if end else 0, sid, payload)


def rst(sid, code=2):
    return frame(RST, 0, sid, struct.pack(">I", code))


def goaway(last, code=0):
    return frame(GOAWAY, 0, 0, struct.pack(">II", last, code))


def settings(pairs=()):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def ok(sid, body=b"ok", extra=()):
    return headers(sid, [(":status", "200"), ("content-length", str(len(body)))] + list(extra)) + \
        data(sid, body, end=True)


S200 = (":status", "200")
SLEEP = "sleep"
CLOSE = "close"
NOREAD = "noread"  # stop reading the socket (so acks queue on the proxy)


class RawH2Member(Listener):
    """An h2c member of raw frames (the module's doc). Its SETTINGS
    (`initial` pairs) go first; each request HEADERS runs its script on a
    thread of its own (writes under a lock), which stops early once the
    connection closed."""

    def __init__(self, scripts, uploads=(), initial=()):
        self.scripts = scripts
        self.uploads = set(uploads)
        self.initial = list(initial)
        self.lock = threading.Lock()
        self.nconn = 0
        self.requests = []  # (conn number, stream id, fields, body bytes)
        self.resets = []
        self.goaways = []
        super().__init__()

    def one(self, c):
        with self.lock:
            self.nconn += 1
            num = self.nconn
        st = {"wlock": threading.Lock(), "noread": False, "zero": False, "closed": False}
        dec = Decoder()
        dec.max_allowed_table_size = 65536
        c.settimeout(20)
        buf = b""
        bodies = {}

        def send(b):
            with st["wlock"]:
                if not st["closed"]:
                    try:
                        c.sendall(b)
                    except OSError:
                        st["closed"] = True

        send(settings(self.initial))
        try:
            while len(buf) < len(PREFACE):
                more = c.recv(65536)
                if not more:
                    return
                buf += more
            if not buf.startswith(PREFACE):
                return
            buf = buf[len(PREFACE):]
            while not self.stop and not st["closed"]:
                if st["noread"]:
                    time.sleep(0.1)
                    continue
                while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                    more = c.recv(65536)
                    if not more:
                        return
                    buf += more
                n = int.from_bytes(buf[:3], "big")
                ftype, flags, sid = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff
                payload, buf = buf[9:9 + n], buf[9 + n:]
                if ftype == SETTINGS and not flags & ACK:
                    send(frame(SETTINGS, ACK, 0))
                elif ftype == PING and not flags & ACK:
                    send(frame(PING, ACK, 0, payload))
                elif ftype == RST:
                    with self.lock:
                        self.resets.append((num, sid, struct.unpack(">I", payload)[0]))
                elif ftype == GOAWAY:
                    with self.lock:
                        self.goaways.append((num, struct.unpack(">II", payload[:8])))
                elif ftype == DATA:
                    bodies[sid] = bodies.get(sid, 0) + len(payload)
                    if payload and not st["zero"]:
                        send(frame(WINUP, 0, 0, struct.pack(">I", len(payload))) +
                             frame(WINUP, 0, sid, struct.pack(">I", len(payload))))
                    if flags & END_STREAM:
                        with self.lock:
                            for i, r in enumerate(self.requests):
                                if r[0] == num and r[1] == sid:
                                    self.requests[i] = r[:3] + (bodies[sid],)
                elif ftype == HEADERS:
                    p = payload
                    if flags & 0x8:
                        p = p[1:len(p) - p[0]]
                    if flags & 0x20:
                        p = p[5:]
                    fields = [(k.decode() if isinstance(k, bytes) else k,
                               v.decode("latin-1") if isinstance(v, bytes) else v)
                              for k, v in dec.decode(p, raw=True)]
                    with self.lock:
                        self.requests.append((num, sid, fields, 0))
                    path = dict(fields).get(":path", "/")
                    name = path.rstrip("/").split("/")[-1]
                    if name in self.uploads:
                        st["zero"] = True
                        continue  # never answered: it waits for its window
                    threading.Thread(target=self.script, args=(name, sid, send, st, c),
                                     daemon=True).start()
        except (OSError, ValueError):
            pass
        finally:
            st["closed"] = True
            c.close()

    def script(self, name, sid, send, st, c):
        if name == "sibling":
            time.sleep(1.5)
            send(ok(sid, b"sibling"))
            return
        steps = self.scripts[name](sid) if name in self.scripts else [ok(sid, b"next")]
        for step in steps:
            if st["closed"]:
                return
            if step == CLOSE:
                with st["wlock"]:
                    st["closed"] = True
                    try:
                        c.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            if step == NOREAD:
                st["noread"] = True
            elif isinstance(step, tuple):
                time.sleep(step[1])
            else:
                send(step)
