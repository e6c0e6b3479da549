"""Where the accept policies put connections, read from the outside.

Helpers of test_accept_placement.py and test_accept_no_loss.py (not a test
module itself): a server with N workers under a policy, the worker slot of
each pid (its title "scalwsd: worker N"), which process holds each
server-side socket (`ss -tnp`), the accept queue of each worker's listening
socket (`ss -tln`), and clients that open many connections at once.

Contract with the eBPF side (issue 9): the policies are the values of
server.accept_policy; a policy the configuration still refuses ("not built
yet") makes its tests skip, naming the refusal, and nothing else does.
"""

import errno
import json
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import time

from harness import HELLO_BODY, HELLO_HOSTS, ROOT, TIMEOUT, binary, make_config, poll, request

# Who holds each connection is read the same way by bench/run.sh.
sys.path.insert(0, os.path.join(ROOT, "bench"))
from holders import holders, ss, users_pids, worker_slots  # noqa: E402,F401

BPFTOOL = shutil.which("bpftool") or "/usr/sbin/bpftool"

BPF_POLICIES = ("hash", "least-loaded", "fountain", "cpu")
KERNEL_POLICIES = ("shared", "reuseport")
WORKERS = 8

KEEP_ALIVE_REQUEST = request("GET", "/")
CLOSE_REQUEST = request("GET", "/", headers=(("Connection", "close"),))


def policy_config(policy, workers=WORKERS, extra=""):
    server = "event_loops: %d\naccept_policy: %s\nlogging: {access_log: off}\n" % (workers, policy)
    return make_config(HELLO_HOSTS, server + extra)


def check_config(path, prefix=()):
    """`scalwsd -t -c path` (under the command prefix, e.g. capsh):
    (exit status, everything it printed)."""
    p = subprocess.run(list(prefix) + [binary(), "-t", "-c", path], capture_output=True,
                       text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout + p.stderr


def refusal(srv, policy):
    """Why the configuration refuses the policy (its -t message), or None
    when it accepts it. Only "not built yet" counts: any other refusal of a
    config the tests wrote is a failure, not a reason to skip."""
    rc, out = check_config(srv.config_path)
    if rc == 0:
        return None
    if "not built yet" in out:
        return "accept_policy %s refused by the configuration: %s" % (policy, out.strip())
    raise AssertionError("scalwsd -t refuses accept_policy %s: %s" % (policy, out.strip()))


def cpus_allowed(pid):
    """Cpus_allowed_list of the process ("0", "0-1"), None if it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    return line.split()[1]
    except OSError:
        pass
    return None


def wait_workers_settled(srv, n=WORKERS):
    """{pid: slot} of n workers once each is titled and pinned to its CPU.
    A worker takes its title before it pins itself (worker_main), so the
    title alone (harness.wait_workers) leaves a window in which its CPU is
    still the supervisor's set."""
    pids = srv.wait_workers(n)

    def settled():
        slots = worker_slots(pids)
        pinned = all(re.match(r"^\d+$", cpus_allowed(p) or "") for p in pids)
        return slots if len(slots) == n and pinned else None
    return poll(settled, what=lambda: "workers titled and pinned: %s"
                % {p: cpus_allowed(p) for p in pids})


def accept_queues(port):
    """{pid of a worker: connections waiting in the accept queue of the
    listening socket(s) that worker holds} (Recv-Q of a LISTEN socket)."""
    queues = {}
    for line in ss("-tlnp", "( sport = :%d )" % port):
        f = line.split(None, 5)
        for pid in users_pids(f[5] if len(f) > 5 else ""):
            queues[pid] = queues.get(pid, 0) + int(f[1])
    return queues


def placement(port, slots, client_ports):
    """Connections per worker slot (a list), and how many of client_ports
    are still queued (no holder) or not seen at all."""
    held = holders(port)
    counts = [0] * (max(slots.values()) + 1 if slots else 0)
    queued = missing = 0
    for cp in client_ports:
        pid = held.get(cp, -1)
        if pid == -1:
            missing += 1
        elif pid is None or pid not in slots:
            queued += 1
        else:
            counts[slots[pid]] += 1
    return counts, queued, missing


def load_map(supervisor_pid):
    """The load map (ebpf/policy.h) the supervisor holds, as bpftool dumps
    it: the BPF_F_MMAPABLE array among its descriptors. None when it holds
    none (shared, reuseport, a fallback)."""
    fd_dir = "/proc/%d/fd" % supervisor_pid
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) != "anon_inode:bpf-map":
                continue
            with open("/proc/%d/fdinfo/%s" % (supervisor_pid, fd)) as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if info["map_type"].strip() != "2" or not int(info["map_flags"], 16) & 0x400:
            continue
        p = subprocess.run([BPFTOOL, "-j", "map", "dump", "id", info["map_id"].strip()],
                           capture_output=True, text=True, timeout=TIMEOUT)
        if p.returncode != 0:
            raise AssertionError("bpftool map dump: %s" % p.stderr.strip())
        return json.loads(p.stdout)[0]["formatted"]["value"]
    return None


def load_records(supervisor_pid):
    """The workers' own view under a BPF policy: their records in the load
    map (live, accepted, selected, settled, busy_pct, ...), a list by slot;
    None without a load map."""
    value = load_map(supervisor_pid)
    return None if value is None else value["w"][:value["config"]["nworkers"]]


class Conn:
    """One client connection of a Batch: the bytes received, and why it
    ended (None while it is open or answered and kept alive)."""

    __slots__ = ("sock", "port", "sent", "buf", "answered", "error", "closed")

    def __init__(self, sock):
        self.sock = sock
        self.port = None
        self.sent = False
        self.buf = b""
        self.answered = False
        self.error = None
        self.closed = False


def _complete(buf):
    """True once buf holds a whole 200 answer with the hello body; raises
    on any other answer."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = buf[:end].decode("latin-1")
    if not head.startswith("HTTP/1.1 200 "):
        raise AssertionError("answer %r" % head.split("\r\n")[0])
    m = re.search(r"(?im)^content-length:\s*(\d+)\s*$", head)
    if not m:
        raise AssertionError("answer without Content-Length: %r" % head)
    body = buf[end + 4:]
    if len(body) < int(m.group(1)):
        return False
    if body[:int(m.group(1))] != HELLO_BODY:
        raise AssertionError("body %r" % body[:100])
    return True


class Batch:
    """Many connections driven at once with non-blocking sockets: connect
    all (start), then each sends one request as soon as it is connected and
    reads one complete answer (pump). Keep-alive connections stay open
    after their answer until close(); with close_request each asks the
    server to close. Every wait is bounded by a deadline."""

    def __init__(self, port, close_request=False):
        self.port = port
        self.req = CLOSE_REQUEST if close_request else KEEP_ALIVE_REQUEST
        self.close_request = close_request
        self.conns = []
        self.sel = selectors.DefaultSelector()

    def connect(self, n, between=None, send_at_once=False):
        """Start n connects; between(i) runs after the i-th. With
        send_at_once the request goes out right after a connect that is
        already complete (on loopback most are), else on the first
        writable event."""
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            c = Conn(s)
            rc = s.connect_ex(("127.0.0.1", self.port))
            if rc not in (0, errno.EINPROGRESS):
                c.error = "connect: %s" % os.strerror(rc)
                s.close()
                c.closed = True
            else:
                c.port = s.getsockname()[1]
                if send_at_once and self._send(c):
                    self.sel.register(s, selectors.EVENT_READ, c)
                else:
                    self.sel.register(s, selectors.EVENT_WRITE, c)
            self.conns.append(c)
            if between:
                between(i)

    def _send(self, c):
        try:
            c.sock.send(self.req)  # a few bytes: an empty send buffer takes them at once
        except OSError:
            return False  # not connected yet
        c.sent = True
        return True

    def pending(self):
        return [c for c in self.conns if not c.answered and c.error is None]

    def step(self, timeout):
        for key, events in self.sel.select(timeout):
            c = key.data
            try:
                if events & selectors.EVENT_WRITE and not c.sent:
                    err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, "connect: %s" % os.strerror(err))
                    if not self._send(c):
                        raise OSError(0, "send failed on a connected socket")
                    self.sel.modify(c.sock, selectors.EVENT_READ, c)
                    continue
                data = c.sock.recv(65536)
                if not data:
                    raise OSError(0, "closed by the server after %d bytes" % len(c.buf))
                c.buf += data
                if _complete(c.buf):
                    c.answered = True
                    self.sel.unregister(c.sock)
                    if self.close_request:
                        c.sock.close()
                        c.closed = True
            except (OSError, AssertionError) as e:
                c.error = str(e)
                self.sel.unregister(c.sock)
                c.sock.close()
                c.closed = True

    def pump(self, timeout=TIMEOUT):
        """Drive until every connection is answered or failed, or timeout
        seconds pass; returns the connections still pending."""
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            self.step(min(0.1, max(0.0, deadline - time.monotonic())))
        return self.pending()

    def wait_connected(self, timeout=TIMEOUT):
        """Poll until every connect has completed (its socket has a peer);
        the requests are not sent yet."""
        deadline = time.monotonic() + timeout
        for c in self.conns:
            while c.error is None:
                try:
                    c.sock.getpeername()
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        raise AssertionError("connect still in progress after %.1fs" % timeout)
                    select_writable(c.sock, deadline - time.monotonic())

    def ports(self):
        return [c.port for c in self.conns if c.port is not None]

    def errors(self):
        return [(c.port, c.error) for c in self.conns if c.error is not None]

    def close(self):
        for c in self.conns:
            if not c.closed:
                try:
                    self.sel.unregister(c.sock)
                except (KeyError, ValueError):
                    pass
                c.sock.close()
                c.closed = True
        self.sel.close()


def select_writable(sock, timeout):
    sel = selectors.DefaultSelector()
    try:
        sel.register(sock, selectors.EVENT_WRITE)
        sel.select(max(0.0, timeout))
    finally:
        sel.close()


def open_one_at_a_time(port, n, batch=None):
    """n keep-alive connections opened one after the other, each answered
    (so accepted) before the next starts; returns the Batch holding them."""
    batch = batch or Batch(port)
    for _ in range(n):
        batch.connect(1)
        left = batch.pump()
        if left or batch.errors():
            raise AssertionError("connection %d: %s" % (len(batch.conns),
                                                         batch.errors() or "no answer"))
    return batch


def open_burst(port, n, batch=None):
    """n keep-alive connections connected all at once, then one request
    each; returns the Batch once every one is answered."""
    batch = batch or Batch(port)
    start = len(batch.conns)
    batch.connect(n)
    left = batch.pump()
    errs = batch.errors()
    if left or errs:
        raise AssertionError("burst of %d: %d unanswered, errors %s"
                             % (n, len(left), errs[:5]))
    return batch, batch.ports()[start:]


class pinned_to:
    """Run the block with this thread on one CPU (connect() on loopback
    processes the SYN on the caller's CPU)."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.saved = None

    def __enter__(self):
        self.saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {self.cpu})
        return self

    def __exit__(self, *exc):
        os.sched_setaffinity(0, self.saved)
