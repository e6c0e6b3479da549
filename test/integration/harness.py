"""Fixtures shared by the integration tests.

Server runs the real scalwsd from the build directory (run.py sets it) in a
temp dir of its own, with its own config and logs; the tests drive it with
Client (raw HTTP/1.1 over a socket), http.client or curl.

Rules every test here follows: readiness is polled, never slept for; every
loop is bounded in count and in time (TIMEOUT, scaled up under ASan); only
127.0.0.1 and ::1 are used.
"""

import errno
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import textwrap
import threading
import time
import unittest

# The source tree (test/integration/../..).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Set by run.py (--build); the environment is a fallback for running one
# test file by hand.
BUILD_DIR = os.environ.get("SCALWS_BUILD", "build")

SANITIZER_PATTERNS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

# Servers started and not yet stopped: run.py's watchdog kills them if a test
# hangs past its bound.
LIVE_SERVERS = set()


def binary(name="scalwsd"):
    """A binary of the build; "scalwsd-alt" is scalwsd but for its build id
    (the Makefile), for tests that must tell two builds apart."""
    return os.path.abspath(os.path.join(BUILD_DIR, name))


def sanitized():
    return "sanitize" in os.path.basename(os.path.normpath(BUILD_DIR))


def scale(seconds):
    """A guard bound in seconds; ASan builds get more."""
    return seconds * (4 if sanitized() else 1)


TIMEOUT = scale(10)


def poll(predicate, timeout=TIMEOUT, interval=0.01, what="condition"):
    """Call predicate until it returns a true value (returned) or timeout
    seconds pass (AssertionError naming `what`, a string or a function
    giving one). Bounded in time and, through the interval, in count."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s"
                                 % (timeout, what() if callable(what) else what))
        time.sleep(interval)


def free_port(family=socket.AF_INET):
    addr = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def make_config(hosts, server=""):
    """A config file: the common server block (127.0.0.1:@PORT@, one event
    loop, no admin API) plus `server` (extra YAML lines for the server block, any
    indentation) and `hosts` (the YAML list under "hosts:"). Placeholders
    @PORT@ and @DIR@ (the server's temp dir) are replaced by Server."""
    server = textwrap.indent(textwrap.dedent(server).strip("\n"), "  ")
    hosts = textwrap.indent(textwrap.dedent(hosts).strip("\n"), "  ")
    text = 'server:\n  listen: "127.0.0.1:@PORT@"\n'
    if "event_loops" not in server:
        text += "  event_loops: 1\n"
    # The admin API's default socket is machine-wide (/run/scalws): a test
    # that wants the API gives its own address.
    if "admin" not in server:
        text += "  admin: {listen: []}\n"
    if server:
        text += server + "\n"
    return text + "hosts:\n" + hosts + "\n"


HELLO_HOSTS = """
- name: "*"
  routes:
    - path: /
      respond: {status: 200, headers: {Content-Type: text/plain}, body: "hello, world\\n"}
"""
HELLO_BODY = b"hello, world\n"


def static_hosts(root="www", extra=""):
    """The hosts list of one catch-all host serving `root` (relative to
    the server's dir, or "@DIR@/..."); `extra` is more of the static
    mapping, e.g. ", follow_symlinks: true"."""
    return """
- name: "*"
  routes:
    - path: /
      static: {root: %s%s}
""" % (root, extra)


class Process:
    """A process a test starts (scalwsd, ingressd, a publisher) in a session
    of its own, its stderr in err_path; between spawn() and stop() it is in
    LIVE_SERVERS, so the watchdog kills its group if a test hangs. stop()
    leaves no process of it behind, even one that ignores SIGTERM."""

    def __init__(self, err_path):
        self.err_path = err_path
        self.proc = None

    def spawn(self, argv, stdout=None, cwd=None):
        """Start argv; stdout goes to the log too unless given (a file or
        subprocess.PIPE)."""
        with open(self.err_path, "ab") as err:
            # Own session: the terminal's Ctrl-C does not reach it, and the
            # process group lets stop() kill the children it left.
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=err if stdout is None else stdout,
                stderr=err, cwd=cwd, start_new_session=True)
        LIVE_SERVERS.add(self)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        # Not Popen.poll(): it would reap the process, and only while its
        # zombie holds the pid may stop() kill the process group.
        return self.proc is not None and self.wait_exit(0) is None

    def signal(self, sig):
        os.kill(self.pid, sig)

    def wait_exit(self, timeout=TIMEOUT):
        """The process's exit status, or None if it still runs after
        timeout seconds. The zombie is left for stop() to reap, so that its
        pid (and process group) cannot be reused meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.returncode is not None:
                return self.proc.returncode
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                if info.si_code == os.CLD_EXITED:
                    return info.si_status
                return -info.si_status
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def stop(self, sig=None, timeout=TIMEOUT):
        """Signal the process and wait for it; SIGKILL the group if it
        does not exit in time (and the children it left). Returns the exit status as wait_exit()."""
        if self.proc is None:
            return None
        status = None
        if self.proc.returncode is None:
            if self.wait_exit(0) is None:
                try:
                    self.signal(sig or signal.SIGTERM)
                except ProcessLookupError:
                    pass
            status = self.wait_exit(timeout)
            # The zombie still holds the pid: the group id is ours to kill.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait(timeout=TIMEOUT)
        LIVE_SERVERS.discard(self)
        return status if status is not None else self.proc.returncode

    def kill(self):
        """Last resort (watchdog): kill the whole group, do not wait."""
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def log(self):
        try:
            with open(self.err_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=30):
        return "\n".join(self.log().splitlines()[-n:])

    def sanitizer_errors(self):
        return [line for line in self.log().splitlines()
                if any(p in line for p in SANITIZER_PATTERNS)]


def syscr(pid):
    """The read(2)-like system calls process pid made so far (/proc/PID/io)."""
    with open("/proc/%d/io" % pid) as f:
        return int(re.search(r"^syscr: (\d+)$", f.read(), re.M).group(1))


def socket_inodes(pid):
    """The inodes of the sockets process pid holds (from /proc/PID/fd), to
    match against /proc/net/tcp*; empty when pid is gone."""
    inodes = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    return inodes


class Server(Process):
    """One scalwsd with a temp dir holding its config (scalws.yaml), its
    stderr (error.log) and stdout (access.log). stop() leaves no process of
    it behind."""

    def __init__(self, config_text, port=None, prefix=()):
        self.dir = tempfile.mkdtemp(prefix="scalws-it-")
        # A command the binary runs under (e.g. capsh dropping capabilities);
        # it must exec the binary, so that self.pid stays the supervisor's.
        self.prefix = list(prefix)
        # The binary started; a test may set another before start():
        # binary("scalwsd-alt"), or a copy a binary upgrade test replaces.
        self.exe = binary()
        self.port = port or free_port()
        self.config_path = os.path.join(self.dir, "scalws.yaml")
        super().__init__(os.path.join(self.dir, "error.log"))
        self.out_path = os.path.join(self.dir, "access.log")
        self.write_config(config_text)

    def expand(self, text):
        return text.replace("@PORT@", str(self.port)).replace("@DIR@", self.dir)

    def write_config(self, text):
        """Replace the config file atomically, so a reload never reads half
        a file."""
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.expand(text))
        os.replace(tmp, self.config_path)

    def start(self, wait=True):
        with open(self.out_path, "ab") as out:
            self.spawn(self.prefix + [self.exe, "-c", self.config_path], stdout=out,
                       cwd=self.dir)
        if wait:
            self.wait_ready()
        return self

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def wait_ready(self, port=None, family=socket.AF_INET):
        addr = "::1" if family == socket.AF_INET6 else "127.0.0.1"

        def accepts():
            if not self.running():
                raise AssertionError("scalwsd exited with %s before accepting:\n%s"
                                     % (self.wait_exit(0), self.log_tail()))
            try:
                socket.create_connection((addr, port or self.port), timeout=1).close()
                return True
            except OSError:
                return False
        poll(accepts, what="scalwsd to accept on port %d" % (port or self.port))
        # The port opens before the supervisor has set up its signal
        # handling; a worker exists only after that. Tests send signals.
        def a_worker():
            if not self.running():
                raise AssertionError("scalwsd exited with %s before starting a worker:\n%s"
                                     % (self.wait_exit(0), self.log_tail()))
            return self.worker_pids()
        poll(a_worker, what=lambda: "a worker process; the log ends:\n" + self.log_tail())

    def worker_pids(self):
        """The supervisor's children, from /proc (a dead worker not yet reaped
        is left out)."""
        path = "/proc/%d/task/%d/children" % (self.pid, self.pid)
        try:
            with open(path) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return []
        return sorted(p for p in pids if process_state(p) not in (None, "Z"))

    def wait_workers(self, n, exclude=(), timeout=TIMEOUT):
        """Poll until exactly n live workers exist, none of them in exclude,
        each done with its start (worker_started); returns their pids."""
        def ready():
            pids = self.worker_pids()
            if len(pids) != n or set(pids) & set(exclude):
                return None
            return pids if all(worker_started(p) for p in pids) else None
        return poll(ready, timeout=timeout, what="%d workers (not %s)" % (n, list(exclude)))

    def access_log(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def answers(self, path="/", body=HELLO_BODY, timeout=2):
        """True if a GET of path on a fresh connection answers 200 with
        body; False on any connection error (a worker restarting)."""
        try:
            with Client(self.port, timeout=timeout) as c:
                r = c.get(path)
                return r.status == 200 and r.body == body
        except OSError:
            return False

    def wait_answer(self, path="/", body=HELLO_BODY, timeout=TIMEOUT):
        """Poll on fresh connections until path answers body (a reload
        published, a worker replaced)."""
        poll(lambda: self.answers(path, body), timeout=timeout, interval=0.005,
             what="%s to answer %r" % (path, body))

    def wait_log(self, pattern, timeout=TIMEOUT):
        """Poll the error log until the regex matches; returns the match."""
        rx = re.compile(pattern)
        return poll(lambda: rx.search(self.log()), timeout=timeout,
                    what=lambda: "log line /%s/; log tail:\n%s" % (pattern, self.log_tail()))

def segs_in(sock):
    """tcpi_segs_in of a TCP socket (struct tcp_info, linux/tcp.h): the
    segments it received, pure ACKs included."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 144)
    return struct.unpack_from("I", info, 140)[0]


def worker_started(pid):
    """True once a forked worker has done its start: it sets its title
    ("scalwsd: worker N") only after closing what it must not keep from the
    supervisor (the shm memfd, other workers' sockets). Until then a test
    would see the supervisor's fds and title in it."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().startswith(b"scalwsd: worker")
    except OSError:
        return False


def status_kib(pid, key="VmRSS"):
    """A size of /proc/PID/status in KiB (VmRSS, VmHWM, ...); None when
    pid is gone or has no such line (a zombie has no VmRSS)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == key:
                    return int(v.split()[0])
    except OSError:
        pass
    return None


def process_state(pid):
    """The state letter of /proc/PID/stat ('R', 'S', 'Z', ...), None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


class ServerTestCase(unittest.TestCase):
    """Base class: self.server(config) starts a server that tearDown stops;
    a sanitizer report in its log fails the test."""

    def setUp(self):
        self.servers = []
        self.helpers = []

    def helper(self, process):
        """A Process (ingressd, a publisher) that tearDown stops and whose
        log it scans as a server's; returned."""
        self.helpers.append(process)
        return process

    def server(self, config_text, start=True, port=None, prefix=()):
        srv = Server(config_text, port=port, prefix=prefix)
        self.servers.append(srv)
        if start:
            srv.start()
        return srv

    def tearDown(self):
        reports = []
        # Helpers first: they log into a server's dir, removed below.
        for proc in self.helpers + self.servers:
            try:
                proc.stop()
            except Exception as e:  # keep stopping the others; report it below
                proc.kill()
                reports.append("stopping %s: %r" % (proc.err_path, e))
            errors = proc.sanitizer_errors()
            if errors:
                reports.append("sanitizer report in %s:\n%s\n%s"
                               % (proc.err_path, "\n".join(errors[:5]), proc.log_tail(60)))
        for srv in self.servers:
            shutil.rmtree(srv.dir, ignore_errors=True)
        if reports:
            self.fail("\n".join(reports))

    def client(self, srv, **kw):
        """A Client to srv, closed when the test ends."""
        c = Client(srv.port, **kw)
        self.addCleanup(c.close)
        return c


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] as received
        self.body = body

    def header(self, name):
        """The first value of header `name` (case-insensitive), or None."""
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def __repr__(self):
        return "<Response %s %d %r headers=%r body=%r>" % (
            self.version, self.status, self.reason, self.headers, self.body[:200])


class ConnectionClosed(ConnectionError):
    pass


class Client:
    """A raw HTTP/1.1 client over one TCP connection: send bytes exactly as
    given, read responses strictly (a malformed response is an error)."""

    # The most read_until_close takes in: a server that streams without
    # end fails the test instead of filling memory.
    READ_LIMIT = 64 << 20

    def __init__(self, port, host="127.0.0.1", timeout=TIMEOUT, rcvbuf=None, wrap=None):
        """wrap, when given, takes the connected socket and returns the one
        to talk over (e.g. an ssl.SSLContext's wrap_socket)."""
        self.timeout = timeout
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if wrap is not None:
            self.sock = wrap(self.sock)
        self.buf = b""
        self.eof = False
        self.reset = False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def get(self, path="/", host="x", headers=(), method="GET"):
        """Send a simple request and read its response."""
        self.send(request(method, path, host=host, headers=headers))
        return self.read_response(method)

    def _fill(self):
        if self.eof:
            return False
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
            self.reset = True
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _read_until(self, marker, limit=1 << 20):
        while marker not in self.buf:
            if len(self.buf) > limit or not self._fill():
                raise ConnectionClosed("connection closed (or head too long) with %r unparsed"
                                       % self.buf[:200])
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise ConnectionClosed("connection closed %d bytes short of %d"
                                       % (n - len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self):
        """The next status line and headers (a 1xx too)."""
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        lines = head[:-4].split("\r\n")
        m = re.match(r"^(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise AssertionError("bad status line %r" % lines[0])
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise AssertionError("bad header line %r" % line)
            headers.append((name, value.strip(" \t")))
        return Response(m.group(1), int(m.group(2)), m.group(3), headers, b"")

    def read_response(self, method="GET", allow_1xx=False):
        """The next response with its body; 1xx heads are returned as they
        are when allow_1xx, else an error."""
        r = self.read_head()
        if 100 <= r.status < 200:
            if not allow_1xx:
                raise AssertionError("unexpected interim response %r" % r)
            return r
        te = r.header("Transfer-Encoding")
        cl = r.header("Content-Length")
        if method == "HEAD" or r.status in (204, 304):
            return r
        if te is not None:
            if te.lower() != "chunked":
                raise AssertionError("response Transfer-Encoding %r" % te)
            r.body = self._read_chunked()
        elif cl is not None:
            r.body = self._read_exact(int(cl))
        else:
            self._fill_until_eof()
            r.body, self.buf = self.buf, b""
        return r

    def _read_chunked(self):
        body = b""
        for _ in range(100000):
            size = int(self._read_until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                for _ in range(1000):
                    if self._read_until(b"\r\n") == b"\r\n":
                        return body
                raise AssertionError("too many trailer lines")
            body += self._read_exact(size)
            if self._read_exact(2) != b"\r\n":
                raise AssertionError("bad chunk end")
        raise AssertionError("too many chunks")

    def _fill_until_eof(self):
        """Read until EOF or reset. Each read is bounded by the socket
        timeout, the whole by the same time again and by READ_LIMIT, so a
        server that trickles bytes for ever fails the test."""
        deadline = time.monotonic() + self.timeout
        while self._fill():
            if len(self.buf) > self.READ_LIMIT or time.monotonic() > deadline:
                raise AssertionError("server still sending after %d bytes" % len(self.buf))

    def read_until_close(self):
        """Read until EOF or reset (bounded as _fill_until_eof); True if the
        connection closed, False if it stayed open for the socket timeout.
        Data read stays in self.buf."""
        try:
            self._fill_until_eof()
        except socket.timeout:
            return False
        return True

    def responses_until_close(self, method="GET"):
        """Everything the server sends until it closes: (responses, closed)."""
        closed = self.read_until_close()
        out = []
        while self.buf:
            out.append(self.read_response(method))
        return out, closed

    def wait_closed(self):
        """True if the server closes without sending anything more."""
        closed = self.read_until_close()
        if self.buf:
            raise AssertionError("data after the expected close: %r" % self.buf[:300])
        return closed


class KeepAliveLoop(threading.Thread):
    """Keep-alive GETs of / with Host: host on port, in a thread, until
    stop() (or `seconds`, the loop's bound). A status other than 200 or a
    connection closed without an answer is a failure; a Connection: close
    answer (keepalive_requests reached) is followed by a new connection, as
    clients do."""

    def __init__(self, port, host, seconds=scale(120)):
        super().__init__(daemon=True)
        self.port, self.host, self.seconds = port, host, seconds
        self.answered = 0
        self.failures = []
        self._stop_event = threading.Event()
        self.start()

    def run(self):
        deadline = time.monotonic() + self.seconds
        c = None
        while not self._stop_event.is_set() and time.monotonic() < deadline:
            try:
                if c is None:
                    c = Client(self.port)
                r = c.get("/", host=self.host)
                self.answered += 1
                if r.status != 200:
                    self.failures.append((r.status, r.body[:80]))
                if (r.header("Connection") or "").lower() == "close":
                    c.close()
                    c = None
            except OSError as e:
                self.failures.append(repr(e))
                c = None
        if c is not None:
            c.close()

    def stop(self):
        self._stop_event.set()
        self.join(TIMEOUT)
        if self.is_alive():
            raise AssertionError("the client loop did not stop within %.0f s" % TIMEOUT)


def request(method="GET", path="/", host="x", headers=(), body=b"", version="HTTP/1.1"):
    """The bytes of one request. host=None sends no Host header; headers is a
    sequence of (name, value) or of raw "Name: value" lines."""
    lines = ["%s %s %s" % (method, path, version)]
    if host is not None:
        lines.append("Host: " + host)
    for h in headers:
        lines.append(h if isinstance(h, str) else "%s: %s" % h)
    if isinstance(body, str):
        body = body.encode("latin-1")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def curl(*args, timeout=TIMEOUT):
    """Run curl (silent, errors shown); returns CompletedProcess with bytes."""
    return subprocess.run(["curl", "-sS", "--max-time", str(int(timeout))] + list(args),
                          capture_output=True, timeout=timeout + 5)


def connect_refused(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError as e:
        return e.errno == errno.ECONNREFUSED
