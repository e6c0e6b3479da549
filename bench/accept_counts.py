#!/usr/bin/python3
"""bench/accept_counts.py: what a worker does per request under an accept
policy, in counts that do not depend on the machine's other load.

    /usr/bin/python3 bench/accept_counts.py [--rate 5000] [--seconds 6]
        [--connections 64] [--workers 4] [--sched 2] POLICY...

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
worker processes. Then, the load still running, SCHED seconds of every
CPU's sched_wakeup and sched_switch (perf record -a): per request, how
often a worker was woken on a CPU that was idle, running another worker,
the client or something else; how long each waited to run, as counts in
buckets (<50 us ... >=4 ms) by that holder; and how often a worker was
preempted and by whom: with 4 workers on 2 CPUs a request can wait for
another worker's timeslice, and these say how often. Timings are not printed: this is not a benchmark, and
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

from holders import held_per_worker, worker_slots

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
    # sched_switch: the worker leaves its CPU (sleeping or preempted);
    # sched_wakeup: a task the worker wakes (the client, another worker).
    events = ["context-switches", "cpu-migrations", "sched:sched_switch", "sched:sched_wakeup",
              "raw_syscalls:sys_enter"]
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


# Waits of a woken worker before it runs, in buckets (upper bounds in us).
WAIT_BUCKETS = [(50, "<50us"), (200, "50-200us"), (1000, "0.2-1ms"), (4000, "1-4ms"), (None, ">=4ms")]
# What held the CPU a worker was woken on, at the moment of the wake-up.
HOLDERS = ["idle", "another worker", "the client", "other"]
WAKE_RE = re.compile(r"\[(\d+)\]\s+([\d.]+): sched:sched_wakeup: .* pid=(\d+) prio=\d+ target_cpu=(\d+)")
SWITCH_RE = re.compile(r"\[(\d+)\]\s+([\d.]+): sched:sched_switch: .*prev_pid=(\d+) .*prev_state=(\S+) "
                       r"==> .*next_pid=(\d+) ")


def sched_waits(lines, workers, client):
    """From perf script's sched_wakeup and sched_switch lines of both CPUs:
    the workers' wake-ups by what held the CPU they were woken on, the wait
    of each from its wake-up to running in WAIT_BUCKETS (by holder), and
    the workers' preemptions (switched out while runnable) by who took the
    CPU. Counts, not times: a wait only falls into a bucket."""
    running = {}
    woken = {}
    holder_of = {}
    wakes = {h: 0 for h in HOLDERS}
    waits = {h: [0] * len(WAIT_BUCKETS) for h in HOLDERS}
    preempted = {h: 0 for h in HOLDERS}

    def kind(pid, me):
        if pid is None:
            return "other"
        if pid == 0:
            return "idle"
        if pid in workers and pid != me:
            return "another worker"
        return "the client" if pid == client else "other"
    for line in lines:
        m = WAKE_RE.search(line)
        if m:
            pid = int(m.group(3))
            if pid in workers and pid not in woken:
                h = kind(running.get(int(m.group(4))), pid)
                wakes[h] += 1
                woken[pid] = float(m.group(2))
                holder_of[pid] = h
            continue
        m = SWITCH_RE.search(line)
        if not m:
            continue
        cpu, t, prev, state, nxt = int(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4), int(m.group(5))
        running[cpu] = nxt
        if prev in workers and state.startswith("R"):
            preempted[kind(nxt, prev)] += 1
        if nxt in woken:
            us = (t - woken.pop(nxt)) * 1e6
            b = next(i for i, (top, _) in enumerate(WAIT_BUCKETS) if top is None or us < top)
            waits[holder_of.pop(nxt)][b] += 1
    return wakes, waits, preempted


def sched_record(pids, client, seconds, tmp):
    """sched_wakeup and sched_switch on every CPU for seconds (perf record
    -a), read back by sched_waits."""
    data = os.path.join(tmp, "sched.data")
    rec = subprocess.run(["perf", "record", "-q", "-a", "-e", "sched:sched_wakeup", "-e", "sched:sched_switch",
                          "-o", data, "--", "sleep", str(seconds)], capture_output=True, text=True)
    if rec.returncode != 0:
        sys.exit("accept_counts: perf record: %s" % rec.stderr.strip())
    out = subprocess.run(["perf", "script", "-i", data, "-F", "cpu,time,event,trace"],
                         capture_output=True, text=True).stdout
    return sched_waits(out.splitlines(), set(pids), client)


def print_sched(sched, reqs, seconds):
    wakes, waits, preempted = sched
    print("   scheduler, every CPU (perf record -a sched_wakeup/sched_switch, %d s), per request:" % seconds)
    print("     a worker woken, the CPU then %s" % ", ".join(
        "%s %.3f" % (h, wakes[h] / reqs) for h in HOLDERS))
    print("     %-24s %s" % ("wait to run, woken on", " ".join("%9s" % label for _, label in WAIT_BUCKETS)))
    for h in HOLDERS:
        print("       %-22s %s" % (h, " ".join("%9.4f" % (n / reqs) for n in waits[h])))
    # The tail a p99 sees: waits of 0.2 ms or more (the buckets from there).
    slow = {h: sum(waits[h][2:]) for h in HOLDERS}
    print("     waited 0.2 ms or more: %.4f, of them woken behind another worker %.4f"
          % (sum(slow.values()) / reqs, slow["another worker"] / reqs))
    print("     a worker preempted, by %s" % ", ".join("%s %.3f" % (h, preempted[h] / reqs)
                                                       for h in HOLDERS if h != "idle"))


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
        # Per-worker columns in slot order, as held_per_worker gives them.
        slots = worker_slots(pids)
        if len(slots) == len(pids):
            pids.sort(key=slots.get)
        for p in [srv.pid] + pids:
            subprocess.run(["taskset", "-apc", "0-1", str(p)], check=True, capture_output=True)
        idle = perf_stat([srv.pid] + pids, a.idle) if a.idle else {}
        before = {p: ctxt(p) for p in pids}
        load = subprocess.Popen(["taskset", "-c", "1", openloop, "http://127.0.0.1:%d/" % port,
                                 str(a.rate), str(a.seconds + a.sched), str(a.connections)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        held = wait_for("%d connections" % a.connections,
                        lambda: (lambda h: sum(h) >= a.connections and h)(held_per_worker(port, pids)))
        secs = a.seconds - 2
        counts = perf_stat(pids, secs)
        # After perf stat, not during: recording every switch costs.
        sched = sched_record(pids, load.pid, a.sched, tmp) if a.sched else None
        out = load.communicate(timeout=a.seconds + a.sched + 30)[0]
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
          % " ".join(str(n) for n in held))
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
        vals = [(after[p][k] - before[p][k]) / (a.rate * (a.seconds + a.sched)) / (1000 if k == "cpu_ns" else 1)
                for p in pids]
        print("   %-26s %s  %8.3f" % (name, " ".join("%8.3f" % v for v in vals), sum(vals)))
    if sched:
        print_sched(sched, a.rate * a.sched, a.sched)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--idle", type=int, default=2,
                    help="seconds counted with no load before the run (0: none)")
    ap.add_argument("--sched", type=int, default=2,
                    help="seconds of every CPU's scheduler events recorded after the counts, the "
                         "load running on (0: none)")
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
