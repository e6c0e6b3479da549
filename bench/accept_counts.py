#!/usr/bin/python3
"""bench/accept_counts.py: what a worker does per request under an accept
policy, in counts that do not depend on the machine's other load.

    /usr/bin/python3 bench/accept_counts.py [--rate 5000] [--seconds 6]
        [--connections 64] [--workers 4] POLICY...

For each POLICY (shared, reuseport, least-loaded, fountain, ...) it starts
build/scalwsd with bench/conf/scalws.yaml.in as run.sh's accept-policies
parts do (WORKERS workers, each let run on CPUs 0-1 once it pinned itself),
sends bench/openloop.c's fixed-rate load from CPU 1 over CONNECTIONS
keep-alive connections, and prints per worker: the connections it holds
(ss -tnp, after the client opened them), and over the middle of the run,
per request served by the whole server: context switches (voluntary:
sleeps in epoll_wait; involuntary: preempted), CPU migrations, system calls
(all, and by name), epoll_waits that slept and came back empty (a timer).
The counts come from perf stat's software events and tracepoints on the
worker processes. Timings are not printed: this is not a benchmark, and
may run on a busy machine.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSCALLS = ["epoll_wait", "read", "write", "writev", "recvfrom", "sendto", "accept4",
            "getsockopt", "setsockopt", "close", "clock_gettime", "epoll_ctl"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, cond, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    sys.exit("%s: timed out waiting for %s" % (os.path.basename(sys.argv[0]), what))


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return sorted(int(p) for p in out.split())


def connected(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def placement(port, pids):
    """Established connections to port held by each worker, from ss -tnp."""
    out = subprocess.run(["ss", "-tnpH", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True).stdout
    held = {p: 0 for p in pids}
    for m in re.finditer(r"pid=(\d+)", out):
        p = int(m.group(1))
        if p in held:
            held[p] += 1
    return held


def ctxt(pid):
    v = {}
    with open("/proc/%d/schedstat" % pid) as f:
        v["cpu_ns"] = int(f.read().split()[0])
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, val = line.partition(":")
            if k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                v[k] = int(val)
    return v


def perf_stat(pids, seconds):
    events = ["context-switches", "cpu-migrations", "raw_syscalls:sys_enter"]
    events += ["syscalls:sys_enter_" + s for s in SYSCALLS if os.path.exists(
        "/sys/kernel/tracing/events/syscalls/sys_enter_" + s)]
    args = ["perf", "stat", "-x,", "--per-thread", "-p", ",".join(map(str, pids))]
    for e in events:
        args += ["-e", e]
    # epoll_waits that slept (a timeout other than 0) and returned nothing.
    args += ["-e", "syscalls:sys_enter_epoll_wait", "--filter", "timeout != 0"]
    args += ["--", "sleep", str(seconds)]
    out = subprocess.run(args, capture_output=True, text=True).stderr
    counts = {}
    seen = {}
    for line in out.splitlines():
        f = line.split(",")
        if len(f) < 4:
            continue
        m = re.match(r".*-(\d+)$", f[0])
        try:
            n = int(float(f[1]))
        except ValueError:
            continue
        if not m:
            continue
        pid, ev = int(m.group(1)), f[3]
        k = (pid, ev)
        seen[k] = seen.get(k, 0) + 1
        if ev == "syscalls:sys_enter_epoll_wait" and seen[k] == 2:
            ev = "epoll_wait (sleeping)"
        counts.setdefault(pid, {})[ev.replace("syscalls:sys_enter_", "")] = n
    return counts


def run(policy, a, openloop, tmp):
    port = free_port()
    conf = os.path.join(tmp, "scalws-%s.yaml" % policy)
    with open(os.path.join(ROOT, "bench/conf/scalws.yaml.in")) as f:
        text = f.read()
    text = (text.replace("@PORT@", str(port)).replace("@DOCROOT@", tmp)
            .replace("@WORKERS@", str(a.workers)).replace("@POLICY@", policy))
    with open(conf, "w") as f:
        f.write(text)
    log = open(os.path.join(tmp, "scalws-%s.log" % policy), "w")
    srv = subprocess.Popen(["taskset", "-c", "0-1", os.path.join(ROOT, "build/scalwsd"), "-c", conf],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        pids = wait_for("%d workers" % a.workers,
                        lambda: len(children(srv.pid)) == a.workers and children(srv.pid))
        wait_for("the listener", lambda: connected(port))
        for p in [srv.pid] + pids:
            subprocess.run(["taskset", "-apc", "0-1", str(p)], check=True, capture_output=True)
        idle = perf_stat([srv.pid] + pids, a.idle) if a.idle else {}
        before = {p: ctxt(p) for p in pids}
        load = subprocess.Popen(["taskset", "-c", "1", openloop, "http://127.0.0.1:%d/" % port,
                                 str(a.rate), str(a.seconds), str(a.connections)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        held = wait_for("%d connections" % a.connections,
                        lambda: (lambda h: sum(h.values()) >= a.connections and h)(placement(port, pids)))
        secs = a.seconds - 2
        counts = perf_stat(pids, secs)
        out = load.communicate(timeout=a.seconds + 30)[0]
        after = {p: ctxt(p) for p in pids}
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=10)
        log.close()
    srv_pid = srv.pid
    bench = next((l for l in out.splitlines() if l.startswith("BENCH")), out.strip()[-200:])
    reqs = a.rate * secs
    print("== %s: %d requests/s over %d connections, %d s counted (%d requests)"
          % (policy, a.rate, a.connections, secs, reqs))
    print("   client: %s" % bench)
    print("   connections held per worker (ss -tnp): %s"
          % " ".join(str(held[p]) for p in pids))
    if a.idle:
        print("   idle, wake-ups (context switches) per second: supervisor %s, workers %s" % (
            " ".join("%.1f" % (idle.get(p, {}).get("context-switches", 0) / a.idle)
                     for p in [srv_pid]),
            " ".join("%.1f" % (idle.get(p, {}).get("context-switches", 0) / a.idle)
                     for p in pids)))
    names = []
    for p in pids:
        for k in counts.get(p, {}):
            if k not in names:
                names.append(k)
    print("   %-26s %s  %s" % ("per request", " ".join("%8s" % ("w%d" % i) for i in range(len(pids))),
                               "   total"))
    for k in names:
        vals = [counts.get(p, {}).get(k, 0) / reqs for p in pids]
        print("   %-26s %s  %8.3f" % (k, " ".join("%8.3f" % v for v in vals), sum(vals)))
    for k, name in (("voluntary_ctxt_switches", "whole run: voluntary cs"),
                    ("nonvoluntary_ctxt_switches", "whole run: involuntary cs"),
                    ("cpu_ns", "whole run: CPU us (timing)")):
        vals = [(after[p][k] - before[p][k]) / (a.rate * a.seconds) / (1000 if k == "cpu_ns" else 1)
                for p in pids]
        print("   %-26s %s  %8.3f" % (name, " ".join("%8.3f" % v for v in vals), sum(vals)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--idle", type=int, default=2,
                    help="seconds counted with no load before the run (0: none)")
    ap.add_argument("policies", nargs="+")
    a = ap.parse_args()
    if a.seconds < 3:
        sys.exit("accept_counts: --seconds must be at least 3")
    with tempfile.TemporaryDirectory(prefix="accept_counts.") as tmp:
        openloop = os.path.join(tmp, "openloop")
        subprocess.run(["cc", "-std=gnu11", "-O2", "-o", openloop,
                        os.path.join(ROOT, "bench/openloop.c")], check=True)
        for p in a.policies:
            run(p, a, openloop, tmp)


if __name__ == "__main__":
    main()
