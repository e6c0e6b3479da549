#!/usr/bin/python3
"""bench/proxy_kernel_counts.py: what the kernel does per proxied request,
ScalWS beside HAProxy, in counts that do not depend on the machine's load.

    /usr/bin/python3 bench/proxy_kernel_counts.py [--requests 60000]
        [--warmup 20000] [--scalwsd build/scalwsd] [--relay build/bench/relay]
        [--record] PROXY...

PROXY is scalws or haproxy (or scalws=PATH, to alternate two builds), nginx
(bench/conf/nginx-proxy.conf.in, its worker counted), or bench/uring's
experimental relay (no HTTP: bytes relayed as they come, one upstream
connection per client connection; make -C bench/uring): relay-epoll
(epoll + read/write), relay-uring (io_uring, multishot recv) or
relay-uring-single (io_uring, one recv re-armed per completion) or
relay-uring-wN (io_uring, woken for N completions or after 50 us).
Placed as bench/run.sh's proxy scenario places them: the scenario's nginx
backend (bench/conf/backend-nginx.conf.in, GET /small, 13 bytes) and the
load (h2load --h1 -c16 -t1) on CPU 1, the proxy on CPU 0 with the bench's
own configuration (bench/conf/scalws-proxy.yaml.in, one worker;
bench/conf/haproxy.cfg.in). After --warmup requests, it counts over
--requests more, divided by the requests, first with nothing attached (the
clean pass), then counted (the counted pass, over another --requests):

- clean pass: the CPU time of the proxy's process (every thread's
  /proc/PID/task/TID/schedstat, the scheduler's own sum, in us per
  request) and of the backend nginx's worker, and each CPU's busy time
  (/proc/stat: all but idle and iowait, 10 ms ticks) and steal; no perf,
  whose tracepoints (raw_syscalls:sys_enter) make every system call
  dearer and would weigh on a proxy in proportion to its system calls;

- TCP segments and the kernel's TCP events (/proc/net/snmp and
  /proc/net/netstat: nstat's counters). Everything runs in a private
  network namespace (the script re-runs itself under `unshare --net`), so
  these counters see only the proxy, its backend and its client, never
  another process of the machine;
- context switches, migrations, softirqs and wake-ups of the proxy's
  process (perf stat -p), and the same for all of CPU 0 (perf stat -C 0);
- with --record, perf record -g of the proxy's process over a third pass
  of --requests, with no perf stat attached (not -C 0: other processes of a shared machine run there too;
  the softirqs its own sends raise run in its context and are counted),
  then perf report --no-children --sort dso and --sort sym (top 40) into
  --out.

Needs root (unshare, perf). Prints CPU time per request, no latencies and
no requests/s (the clean pass's requests per second of CPU 0's busy time
are its CPU per request again).
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from accept_counts import free_port, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETNS_MARK = "PROXY_KERNEL_COUNTS_NETNS"
# nstat's names of the counters printed even when they did not move.
SHOWN = ["Tcp:OutSegs", "Tcp:InSegs", "TcpExt:TCPPureAcks", "TcpExt:TCPHPAcks",
         "TcpExt:TCPHPHits", "TcpExt:DelayedACKs", "TcpExt:TCPAutoCorking",
         "TcpExt:TCPOrigDataSent", "TcpExt:TCPDelivered"]
EVENTS = ["context-switches", "cpu-migrations", "irq:softirq_entry", "sched:sched_wakeup",
          "raw_syscalls:sys_enter", "irq_vectors:reschedule_entry",
          "irq_vectors:call_function_single_entry", "power:cpu_idle", "task-clock"]


def tcp_counters():
    """Tcp: and TcpExt: counters of this network namespace, as nstat names them."""
    v = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        with open(path) as f:
            lines = f.read().splitlines()
        for names, values in zip(lines[0::2], lines[1::2]):
            proto, _, names = names.partition(":")
            if proto not in ("Tcp", "TcpExt"):
                continue
            for n, x in zip(names.split(), values.split()[1:]):
                v[proto + ":" + n] = int(x)
    return v


def answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def schedstat_ns(pid):
    """CPU time of every thread of PID so far, in nanoseconds."""
    t = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                t += int(f.read().split()[0])
        except OSError:
            pass
    return t


def cpu_ticks():
    """Per CPU of /proc/stat: (busy, steal) clock ticks; busy is all but
    idle, iowait and steal."""
    v = {}
    with open("/proc/stat") as f:
        for line in f:
            fld = line.split()
            if fld[0].startswith("cpu") and fld[0] != "cpu":
                x = [int(y) for y in fld[1:]]
                v[fld[0]] = (x[0] + x[1] + x[2] + x[5] + x[6], x[7])
    return v


def render(template, out, subst, edits=()):
    """TEMPLATE with its @NAME@s replaced; EDITS: (old, new) lines changed."""
    with open(os.path.join(ROOT, "bench/conf", template)) as f:
        text = f.read()
    for k, val in subst.items():
        text = text.replace("@%s@" % k, str(val))
    for old, new in edits:
        if old not in text:
            sys.exit("proxy_kernel_counts: %s has no %r" % (template, old))
        text = text.replace(old, new)
    with open(out, "w") as f:
        f.write(text)


def load(port, n, close):
    """N requests (h2load); with close, a new connection for each request
    (wrk, "Connection: close", for N/5000 seconds: h2load does not reconnect).
    Returns the requests made."""
    url = "http://127.0.0.1:%d/small" % port
    if close:
        out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c16", "-d%ds" % max(1, n // 5000),
                              "-H", "Connection: close", url],
                             capture_output=True, text=True, timeout=300).stdout
        m = re.search(r"(\d+) requests in", out)
        if not m or "Non-2xx" in out or "Socket errors" in out:
            sys.exit("proxy_kernel_counts: wrk: %s" % out[-300:])
        return int(m.group(1))
    out = subprocess.run(["taskset", "-c", "1", "h2load", "--h1", "-n", str(n), "-c16", "-t1", url],
                         capture_output=True, text=True, timeout=300).stdout
    ok = [l for l in out.splitlines() if l.startswith("requests:")]
    if not ok or ("%d succeeded" % n) not in ok[0]:
        sys.exit("proxy_kernel_counts: h2load: %s" % (ok[0] if ok else out[-300:]))
    return n


def perf_stat(args, tag):
    """perf stat -x, over ARGS (a target), started now; stopped by stop()."""
    out = tempfile.NamedTemporaryFile("w+", prefix="perfstat-%s." % tag, delete=False)
    cmd = ["perf", "stat", "-x,", "-o", out.name] + args
    for e in EVENTS:
        cmd += ["-e", e]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out.name


def stop(proc, path):
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    counts = {}
    with open(path) as f:
        for line in f:
            fld = line.strip().split(",")
            if len(fld) > 3:
                try:
                    counts[fld[2]] = int(float(fld[0]))
                except ValueError:
                    pass
    os.unlink(path)
    return counts


def start_proxy(kind, path, port, backend_port, tmp, a):
    if kind.startswith("relay-"):
        if a.no_upstream_keepalive or a.close:
            sys.exit("proxy_kernel_counts: the relay keeps one upstream connection per client "
                     "connection: no --close, no --no-upstream-keepalive")
        io = {"relay-epoll": ["epoll"], "relay-uring": ["uring"],
              "relay-uring-single": ["uring", "--recv", "single"]}.get(kind)
        m = re.match(r"relay-uring-w(\d+)$", kind)
        if m:
            io = ["uring", "--wait", m.group(1), "--wait-us", "50"]
        if io is None:
            sys.exit("proxy_kernel_counts: unknown relay %r (relay-epoll, relay-uring, "
                     "relay-uring-single, relay-uring-wN)" % kind)
        p = subprocess.Popen(["taskset", "-c", "0", a.relay, "--port", str(port), "--backend-port",
                              str(backend_port), "--io"] + io,
                             stdout=subprocess.DEVNULL, stderr=open(tmp + "/relay.err", "w"))
        wait_for("the relay", lambda: answers(port))
        return p, p.pid
    if kind == "nginx":
        if a.no_upstream_keepalive:
            sys.exit("proxy_kernel_counts: nginx: no --no-upstream-keepalive")
        render("nginx-proxy.conf.in", tmp + "/nginx.conf",
               {"PORT": port, "BACKEND_PORT": backend_port, "TMP": tmp})
        p = subprocess.Popen(["taskset", "-c", "0", "nginx", "-p", tmp + "/", "-c", tmp + "/nginx.conf",
                              "-e", tmp + "/nginx-error.log"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("nginx", lambda: answers(port))
        kids = wait_for("nginx's worker", lambda: subprocess.run(
            ["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split())
        if len(kids) != 1:
            sys.exit("proxy_kernel_counts: nginx has %d workers, not 1" % len(kids))
        return p, int(kids[0])
    if kind == "haproxy":
        render("haproxy.cfg.in", tmp + "/haproxy.cfg", {"PORT": port, "BACKEND_PORT": backend_port},
               [("http-reuse always", "http-reuse never\n    option http-server-close")]
               if a.no_upstream_keepalive else [])
        p = subprocess.Popen(["taskset", "-c", "0", "haproxy", "-db", "-f", tmp + "/haproxy.cfg"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("haproxy", lambda: answers(port))
        return p, p.pid
    render("scalws-proxy.yaml.in", tmp + "/scalws.yaml",
           {"PORT": port, "BACKEND_PORT": backend_port, "WORKERS": 1, "POLICY": "shared"},
           [("keepalive: 32", "keepalive: 0")] if a.no_upstream_keepalive else [])
    p = subprocess.Popen(["taskset", "-c", "0", path, "-c", tmp + "/scalws.yaml"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for("scalwsd", lambda: answers(port))
    kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
    if len(kids) != 1:
        sys.exit("proxy_kernel_counts: scalwsd has %d workers, not 1" % len(kids))
    # The worker pins itself to a CPU of its own choosing: put it back on 0.
    subprocess.run(["taskset", "-apc", "0", kids[0]], check=True, capture_output=True)
    return p, int(kids[0])


def run(spec, a, tmp):
    kind, _, path = spec.partition("=")
    path = path or a.scalwsd
    backend_port, port = free_port(), free_port()
    render("backend-nginx.conf.in", tmp + "/backend.conf",
           {"BACKEND_PORT": backend_port, "DOCROOT": tmp, "TMP": tmp})
    backend = subprocess.Popen(["taskset", "-c", "1", "nginx", "-p", tmp + "/", "-c",
                                tmp + "/backend.conf"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = None
    try:
        wait_for("the backend", lambda: answers(backend_port))
        proxy, worker = start_proxy(kind, path, port, backend_port, tmp, a)
        load(port, a.warmup, a.close)
        # The clean pass: nothing attached.
        bworker = int(subprocess.run(["pgrep", "-P", str(backend.pid)], capture_output=True,
                                     text=True).stdout.split()[0])
        c0, p0, b0 = cpu_ticks(), schedstat_ns(worker), schedstat_ns(bworker)
        nc = load(port, a.requests, a.close)
        c1, p1, b1 = cpu_ticks(), schedstat_ns(worker), schedstat_ns(bworker)
        hz = os.sysconf("SC_CLK_TCK")
        clean = {"proxy": (p1 - p0) / 1000.0 / nc, "backend": (b1 - b0) / 1000.0 / nc}
        for cpu in ("cpu0", "cpu1"):
            clean[cpu] = (c1[cpu][0] - c0[cpu][0]) * 1e6 / hz / nc
            clean[cpu + "-steal"] = c1[cpu][1] - c0[cpu][1]
        before = tcp_counters()
        sp = perf_stat(["-p", str(worker)], "p")
        sc = perf_stat(["-a", "-C", "0"], "c")
        s1 = perf_stat(["-a", "-C", "1"], "c1")
        time.sleep(0.3)  # perf stat attaches asynchronously; a late attach only undercounts
        n = load(port, a.requests, a.close)
        after = tcp_counters()
        per_proc, cpu0, cpu1 = stop(*sp), stop(*sc), stop(*s1)
        # perf stat -p counts the threads there when it attached: say how
        # many the counted process has (io_uring's io-wq workers would be
        # threads of their own, created on demand).
        threads = len(os.listdir("/proc/%d/task" % worker))
        if a.record:
            # A pass of its own: perf stat's tracepoints would be in the profile.
            rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-p", str(worker), "-g",
                                    "-o", tmp + "/perf.data"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf record has no readiness signal; the counts are not timed
            nr = load(port, a.requests, a.close)
            rec.send_signal(signal.SIGINT)
            rec.wait(timeout=60)
            name = "%s.%s" % (a.out, kind if kind != "scalws" else os.path.basename(path))
            with open(name + ".perf.txt", "a") as f:
                f.write("# %d requests\n" % nr)
                for sort in ("dso", "sym"):
                    rep = subprocess.run(["perf", "report", "-i", tmp + "/perf.data",
                                          "--no-children", "--sort", sort, "--stdio", "-g",
                                          "none", "--percent-limit", "0.3"],
                                         capture_output=True, text=True).stdout
                    lines = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")]
                    if sort == "dso":
                        dsos = lines[:4]
                    f.write("\n".join(lines[:40]) + "\n\n")
            if a.keep_perf_data:
                shutil.copy(tmp + "/perf.data", name + ".perf.data")
    finally:
        for p in (proxy, backend):
            if p is not None:
                p.send_signal(signal.SIGTERM if p is proxy else signal.SIGQUIT)
                p.wait(timeout=10)
    relay_out = ""
    if kind.startswith("relay-"):
        with open(tmp + "/relay.err") as f:
            relay_out = f.read()
    print("== %s%s: %d requests%s%s" % (kind, " (%s)" % path if kind == "scalws" else "", n,
                                        ", a connection each" if a.close else "",
                                        ", a new upstream connection each"
                                        if a.no_upstream_keepalive else ""))
    print("   clean pass, us per request:        proxy %.2f   backend nginx %.2f   CPU 0 busy %.2f"
          "   CPU 1 busy %.2f   (steal ticks CPU 0 %d, CPU 1 %d)" % (
              clean["proxy"], clean["backend"], clean["cpu0"], clean["cpu1"],
              clean["cpu0-steal"], clean["cpu1-steal"]))
    print("   threads of the counted process:   %d" % threads)
    if a.record:
        print("   perf record (a pass of its own), samples by dso: " +
              ";  ".join(" ".join(l.split()) for l in dsos))
    for line in relay_out.splitlines():
        print("   " + line)
    names = SHOWN + sorted(k for k in after if k not in SHOWN and after[k] != before.get(k, 0))
    for k in names:
        print("   %-34s %8.3f" % (k, (after[k] - before.get(k, 0)) / n))
    for e in EVENTS:
        # perf stat gives task-clock in milliseconds: microseconds per request here.
        scale, label = (1000.0, e + " (us)") if e == "task-clock" else (1.0, e)
        print("   %-34s %8.3f   CPU 0: %8.3f   CPU 1: %8.3f" % (
            label, scale * per_proc.get(e, 0) / n, scale * cpu0.get(e, 0) / n,
            scale * cpu1.get(e, 0) / n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=60000)
    ap.add_argument("--warmup", type=int, default=20000)
    ap.add_argument("--scalwsd", default=os.path.join(ROOT, "build/scalwsd"))
    ap.add_argument("--relay", default=os.path.join(ROOT, "build/bench/relay"),
                    help="bench/uring's relay (make -C bench/uring)")
    ap.add_argument("--close", action="store_true",
                    help="a new client connection per request (wrk, Connection: close)")
    ap.add_argument("--no-upstream-keepalive", action="store_true",
                    help="a new upstream connection per request (ScalWS keepalive: 0, "
                    "HAProxy http-server-close)")
    ap.add_argument("--record", action="store_true",
                    help="perf record the proxy's process over a third pass of --requests")
    ap.add_argument("--keep-perf-data", action="store_true",
                    help="with --record, keep perf.data as OUT.KIND.perf.data")
    ap.add_argument("--out", default="/tmp/proxy_kernel_counts",
                    help="prefix of the perf report files (--record)")
    ap.add_argument("proxies", nargs="+")
    a = ap.parse_args()
    if os.environ.get(NETNS_MARK) is None:
        env = dict(os.environ, **{NETNS_MARK: "1"})
        os.execvpe("unshare", ["unshare", "--net", sys.executable] + sys.argv, env)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for spec in a.proxies:
        with tempfile.TemporaryDirectory(prefix="proxy_kernel_counts.") as tmp:
            run(spec, a, tmp)


if __name__ == "__main__":
    main()
