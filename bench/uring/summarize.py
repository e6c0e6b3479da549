#!/usr/bin/python3
"""bench/uring/summarize.py: the figures of bench/proxy_kernel_counts.py's
output (one or more files, each a set of rounds marked "#### round N"),
per run and per kind, and the per-round ratios of the relay's experiment
(docs/benchmarks/2026-12-02-io-uring-relay.md).

    /usr/bin/python3 bench/uring/summarize.py OUTPUT...

Per run: the clean pass's CPU per request of the proxy and of the backend
(us), system calls, context switches and softirqs per request of the
proxy's process (counted pass), and, with --record, the kernel's share of
its samples. Then per kind the median and range, and the medians of the
per-round ratios relay-uring/relay-epoll, relay-uring/scalws,
relay-uring/nginx, scalws/nginx (each a round's two runs, minutes apart at
most), and what a ScalWS would spend over nginx if its CPU per request fell
by what the relay's did (scalws - relay-epoll + relay-uring, per round).
"""
import re
import statistics
import sys

RATIOS = [("relay-uring", "relay-epoll"), ("relay-uring-single", "relay-epoll"),
          ("relay-uring", "scalws"), ("relay-epoll", "scalws"), ("relay-uring", "nginx"),
          ("relay-epoll", "nginx"), ("scalws", "nginx"), ("haproxy", "nginx")]


def parse(paths):
    runs = []
    for path in paths:
        rnd = None
        cur = None
        for line in open(path):
            m = re.match(r"#### round (\d+)", line)
            if m:
                rnd = "%s:%s" % (path.rsplit("/", 1)[-1].split(".")[0], m.group(1))
                continue
            m = re.match(r"== ([^\s:]+)", line)
            if m:
                cur = {"round": rnd, "kind": m.group(1)}
                runs.append(cur)
                continue
            if cur is None:
                continue
            m = re.search(r"clean pass, us per request:\s+proxy ([\d.]+)\s+backend nginx ([\d.]+)", line)
            if m:
                cur["cpu"], cur["backend"] = float(m.group(1)), float(m.group(2))
            m = re.search(r"samples by dso: ([\d.]+)% \[kernel", line)
            if m:
                cur["kernel"] = float(m.group(1))
            for key, name in (("syscalls", "raw_syscalls:sys_enter"), ("switches", "context-switches"),
                              ("softirqs", "irq:softirq_entry")):
                m = re.match(r"\s+%s\s+([\d.]+)" % re.escape(name), line)
                if m:
                    cur[key] = float(m.group(1))
    return runs


def main():
    runs = parse(sys.argv[1:])
    print("| round | kind | CPU us/req (clean) | backend us/req | syscalls/req | switches/req | kernel % |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in runs:
        print("| %s | %s | %.2f | %.2f | %.2f | %.3f | %s |" % (
            r["round"], r["kind"], r["cpu"], r["backend"], r.get("syscalls", 0), r.get("switches", 0),
            "%.1f" % r["kernel"] if "kernel" in r else "-"))
    print()
    kinds = []
    for r in runs:
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    print("| kind | runs | CPU us/req median (range) | syscalls/req | switches/req | kernel % | kernel us/req |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k in kinds:
        rs = [r for r in runs if r["kind"] == k]
        cpu = [r["cpu"] for r in rs]
        ker = [r["kernel"] for r in rs if "kernel" in r]
        kus = [r["kernel"] / 100 * r["cpu"] for r in rs if "kernel" in r]
        print("| %s | %d | %.2f (%.2f-%.2f) | %.2f | %.3f | %s | %s |" % (
            k, len(rs), statistics.median(cpu), min(cpu), max(cpu),
            statistics.median(r["syscalls"] for r in rs), statistics.median(r["switches"] for r in rs),
            "%.1f" % statistics.median(ker) if ker else "-",
            "%.2f" % statistics.median(kus) if kus else "-"))
    print()
    rounds = []
    for r in runs:
        if r["round"] not in rounds:
            rounds.append(r["round"])
    for a, b in RATIOS:
        per = []
        for rd in rounds:
            x = [r["cpu"] for r in runs if r["round"] == rd and r["kind"] == a]
            y = [r["cpu"] for r in runs if r["round"] == rd and r["kind"] == b]
            if x and y:
                per.append(x[0] / y[0])
        if per:
            print("%s / %s, CPU per request, per round: %s; median %.3f (%d rounds, %d below 0.6)" % (
                a, b, " ".join("%.3f" % v for v in per), statistics.median(per), len(per),
                sum(v < 0.6 for v in per)))
    # A ScalWS whose CPU per request fell by what the relay's did from epoll
    # to io_uring (the same microseconds: the system calls saved are the same
    # four per request), over nginx in the same round.
    per = []
    for rd in rounds:
        v = {r["kind"]: r["cpu"] for r in runs if r["round"] == rd}
        if all(k in v for k in ("scalws", "relay-epoll", "relay-uring", "nginx")):
            per.append((v["scalws"] - v["relay-epoll"] + v["relay-uring"]) / v["nginx"])
    if per:
        print("(scalws - relay-epoll + relay-uring) / nginx, per round: %s; median %.3f "
              "(%d rounds, %d below 0.6)" % (" ".join("%.3f" % x for x in per), statistics.median(per),
                                             len(per), sum(x < 0.6 for x in per)))


if __name__ == "__main__":
    main()
