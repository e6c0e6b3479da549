#!/usr/bin/python3
"""Summary of one bench/run.sh result directory.

Reads DIR/runs.csv (one row of raw figures per measured run) and DIR/meta.txt
(key=value), writes DIR/summary.json, DIR/summary.csv and DIR/summary.md, and
prints the Markdown (ready for docs/benchmarks/) on standard output.

Every figure is a median over the runs of one server; the ratios are
SERVER/REFERENCE of those medians, for the pairs meta's `ratios` names
(run.sh: every server over the baseline, nginx against ScalWS or
scalws:shared among accept policies, and in the proxy scenarios ScalWS over
HAProxy too; older results: every server over the baseline). Per-run
figures and per-round ratios (each server's run against its reference's of
the same round) follow, so the noise can be judged. A figure that no run
has (p99.9, backend CPU, system calls before the proxy scenarios) is left
out.

Under a proxy scenario's summary, issue 7's targets in one line; with
--accept-policies, the summaries of run.sh accept-policies' four parts
(DIR/closed-64, ...) and issue 9's targets over them (bench/targets.py).

Usage: bench/report.py [--accept-policies] DIR     (run.sh calls it; rerun at will)
"""
import csv
import json
import statistics
import sys
from pathlib import Path

import targets


def name(server):
    """scalws -> ScalWS, scalws:least-loaded -> ScalWS least-loaded."""
    kind, _, policy = server.partition(":")
    return {"scalws": "ScalWS", "nginx": "nginx", "haproxy": "HAProxy"}.get(kind, kind) + (" " + policy if policy else "")


# key, label, digits, whether a ratio to the baseline means something; every
# one is computed per run by figures(). The last three describe the run:
# which side was the bottleneck (1.0: that CPU was saturated), and how much
# CPU something else on the machine took meanwhile. Server CPU use has a
# ratio all the same: at a fixed rate (LOAD=rate) it is the figure that
# compares the servers' CPU. The backend's CPU (proxy scenarios) is the
# backend's, not the proxy's: shown beside it, no ratio.
METRICS = [
    ("rps", "requests/s", 0, True),
    ("p50_ms", "p50 latency (ms)", 3, True),
    ("p99_ms", "p99 latency (ms)", 3, True),
    ("p999_ms", "p99.9 latency (ms)", 3, True),
    ("cpu_us_per_req", "server CPU per request (us)", 3, True),
    ("cpu_tick_us_per_req", "server CPU per request, from clock ticks (us)", 3, True),
    ("syscalls_per_req", "system calls per request (workers, wrk -c16)", 2, True),
    ("polls_per_req", "epoll_wait per request (workers, wrk -c16)", 3, True),
    ("switches_per_req", "context switches per request (workers, wrk -c16)", 4, True),
    ("backend_cpu_us_per_req", "backend CPU per request (us)", 3, False),
    ("worker_rss_mib", "peak RSS, worker (MiB)", 1, True),
    ("total_rss_mib", "peak RSS, all processes (MiB)", 1, True),
    ("server_cores", "server CPU use (cores)", 3, True),
    ("wrk_cores", "wrk CPU use (cores)", 2, False),
    ("other_cores", "other load on the machine (cores)", 2, False),
    ("steal_cores", "of which the hypervisor's steal (cores)", 2, False),
]

# A run during which other processes took more than this many cores was
# disturbed (a build, a test suite): the summary says so.
OTHER_LOAD_LIMIT = 0.10


def optional(row, key):
    """A column that older results lack, or that a scenario leaves empty."""
    value = row.get(key) or ""
    return int(value) if value else None


def per_syscall_request(row, key):
    """A count of the system call run (wrk -c16 under perf stat) per
    request of that run; None when the run did not count it."""
    count, requests = optional(row, key), optional(row, "syscall_requests")
    return count / requests if count is not None and requests else None


def figures(row):
    """The derived figures of one run from its raw CSV row; None for a
    figure the run does not have."""
    requests = int(row["requests"])
    seconds = int(row["duration_us"]) / 1e6
    tick_s = int(row["cpu_ticks"]) / int(row["clk_tck"])
    wrk_s = int(row["wrk_cpu_ticks"]) / int(row["clk_tck"])
    busy_s = int(row["busy_ticks"]) / int(row["clk_tck"])
    p999 = optional(row, "latency_p999_us")
    backend = optional(row, "backend_cpu_ticks")
    backend_tick_s = backend / int(row["clk_tck"]) if backend is not None else None
    # The server's and the backend's CPU in nanoseconds (schedstat) where
    # the run has them, the clock ticks otherwise; the machine's other load
    # stays in ticks, the unit of /proc/stat.
    cpu_ns, backend_ns = optional(row, "cpu_ns"), optional(row, "backend_cpu_ns")
    cpu_s = cpu_ns / 1e9 if cpu_ns is not None else tick_s
    backend_s = backend_ns / 1e9 if backend_ns is not None else backend_tick_s
    return {
        "run": int(row["run"]),
        "slot": int(row["slot"]),
        "server": row["server"],
        "requests": requests,
        "resp_bytes": int(row["resp_bytes"]),
        "nprocs": int(row["nprocs"]),
        "cpu_s": cpu_s,
        "rps": requests / seconds,
        "p50_ms": int(row["latency_p50_us"]) / 1000,
        "p99_ms": int(row["latency_p99_us"]) / 1000,
        "p999_ms": p999 / 1000 if p999 is not None else None,
        "cpu_us_per_req": cpu_s * 1e6 / requests,
        "cpu_tick_us_per_req": tick_s * 1e6 / requests if cpu_ns is not None else None,
        "syscalls_per_req": per_syscall_request(row, "syscalls"),
        "polls_per_req": per_syscall_request(row, "syscall_polls"),
        "switches_per_req": per_syscall_request(row, "syscall_switches"),
        "backend_cpu_us_per_req": backend_s * 1e6 / requests if backend_s is not None else None,
        "worker_rss_mib": int(row["worker_hwm_kib"]) / 1024,
        "total_rss_mib": int(row["total_hwm_kib"]) / 1024,
        "server_cores": cpu_s / seconds,
        "wrk_cores": wrk_s / seconds,
        "other_cores": (busy_s - tick_s - wrk_s - (backend_tick_s or 0)) / seconds,
        # Part of the other load: the CPU the hypervisor took (older
        # results: None).
        "steal_cores": steal / int(row["clk_tck"]) / seconds
        if (steal := optional(row, "steal_ticks")) is not None else None,
        # False when the fixed-rate client fell behind (run.sh LATE_CLIENT=
        # mark): its latencies hold the client's stall; the rest stands.
        "latency_valid": optional(row, "latency_valid") != 0,
        "client_late_ms": late / 1000 if (late := optional(row, "client_late_max_us")) is not None else None,
        # Connections each worker held once the client had opened them, and
        # just before the run ended (run.sh with several workers): lists in
        # worker-slot order, None in older results.
        "held_open": held(row, "placement_open"),
        "held_end": held(row, "placement_end"),
    }


def held(row, key):
    """A placement column ("16/48/0/0") as a list of counts, None when the
    run has none."""
    value = row.get(key) or ""
    return [int(n) for n in value.split("/")] if value else None


def busiest(counts):
    """The busiest worker's connections over the mean of all workers: 1.0
    when every worker holds as many, the number of workers when one holds
    them all; None without counts or connections."""
    return max(counts) * len(counts) / sum(counts) if counts and sum(counts) else None


def placement_cell(r):
    """Per-run table: the counts once the connections were open, and the
    end's counts only when they moved; the busiest worker's share."""
    opened, end = r["held_open"], r["held_end"]
    if opened is None:
        return " - | - |"
    text = "/".join(map(str, opened))
    if end is not None and end != opened:
        text += " → " + "/".join(map(str, end))
    return f" {text} | {fmt(busiest(opened), 2)} |"


def read_meta(path):
    meta = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            meta[key] = value
    return meta


def present_metrics(runs):
    """The METRICS that at least one run has."""
    return [m for m in METRICS if any(r[m[0]] is not None for r in runs)]


def ratio_pairs(meta, servers, baseline):
    """[(server, reference)]: meta's `ratios` (SERVER/REF ...), else every
    server over the baseline; pairs whose servers did not run are dropped."""
    named = meta.get("ratios")
    if named is None:
        pairs = [(s, baseline) for s in servers if s != baseline]
    else:
        pairs = [tuple(p.split("/", 1)) for p in named.split()]
    return [(s, ref) for s, ref in pairs if s in servers and ref in servers]


def summarize(runs, servers, pairs, metrics):
    """{server: {metric: {median, min, max}}} (None where the server has no
    value) and {"SERVER/REF": {metric: ratio of the medians}}."""
    stats = {}
    for s in servers:
        mine = [r for r in runs if r["server"] == s]
        stats[s] = {}
        for key, *_ in metrics:
            values = [r[key] for r in mine if r[key] is not None and targets.valid(r, key)]
            stats[s][key] = {
                "median": statistics.median(values) if values else None,
                "min": min(values) if values else None,
                "max": max(values) if values else None,
            }
    ratios = {}
    for s, ref in pairs:
        ratios[f"{s}/{ref}"] = {}
        for key, _, _, meaningful in metrics:
            mine, base = stats[s][key]["median"], stats[ref][key]["median"]
            ratios[f"{s}/{ref}"][key] = mine / base if meaningful and mine is not None and base else None
    return stats, ratios


def pair_ratios(runs, pairs):
    """SERVER/REF per round, for the rounds that have both."""
    out = []
    for run in sorted({r["run"] for r in runs}):
        by = {r["server"]: r for r in runs if r["run"] == run}
        for s, ref in pairs:
            if s in by and ref in by:
                out.append({"run": run, "server": s, "reference": ref} | {
                    key: by[s][key] / by[ref][key]
                    for key in ROUND_KEYS if by[s][key] is not None and by[ref][key]
                    and targets.valid(by[s], key) and targets.valid(by[ref], key)
                })
    return out


# The per-round ratios shown, with their median (targets.py decides on it).
ROUND_KEYS = ["rps", "cpu_us_per_req", "p50_ms", "p99_ms", "p999_ms", "server_cores"]
ROUND_LABELS = {"rps": "requests/s", "cpu_us_per_req": "CPU per request", "p50_ms": "p50",
                "p99_ms": "p99", "p999_ms": "p99.9", "server_cores": "server CPU use"}


def fmt(value, digits):
    return f"{value:.{digits}f}" if value is not None else "-"


def setup_line(meta, runs, servers):
    """How the runs were made, in one paragraph."""
    n = int(meta.get("runs", 0))
    sizes = ", ".join(f"{name(s)} {runs_of(runs, s)[0]['resp_bytes']}" for s in servers)
    workers = meta.get("workers", "1")
    if meta.get("pin", "cpu") == "none":
        placing = f"{workers} worker(s) per server, every server process free to run on CPUs {meta.get('server_cpu')}"
    elif workers == "1":
        placing = f"One worker per server, every server process on CPU {meta.get('server_cpu')}"
    else:
        placing = f"{workers} workers per server, each pinned to one of CPUs {meta.get('server_cpu')}"
    # The client as run.sh names it, without its version's details: the
    # TLS scenarios run h2load or bench/tlsresume.py, not wrk.
    if meta.get("load") == "rate":
        rate_from = meta.get("rate_from", "given")
        load = (f"fixed rate {meta.get('rate')} requests/s{'' if rate_from == 'given' else ' (' + rate_from + ')'} "
                f"({meta.get('wrk', 'bench/fixedrate.py').split(' (')[0]}, open loop, latency from "
                f"the moment each request was due) over {meta.get('connections')} keep-alive connections")
    else:
        client = meta.get("wrk", "wrk").split(" (")[0]
        load = (f"wrk -t1 -c{meta.get('connections')}" if client.startswith("wrk")
                else f"{client} over {meta.get('connections')} connections")
    backend = ""
    if meta.get("backend"):
        backend = (f"; every server proxies to one backend, {meta['backend']}, whose CPU is reported apart "
                   f"(not in the server's)")
    syscalls = ""
    if int(meta.get("syscall_s", "0") or 0) > 0:
        syscalls = (f"; system calls: perf stat -e raw_syscalls:sys_enter on the workers during "
                    f"{meta['syscall_s']} s of wrk -t1 -c{meta.get('syscall_connections')} after each "
                    f"measured run, over the requests of those seconds (with epoll_wait calls and "
                    f"context switches, the loop's rhythm, where the run counted them)")
    cpu = ""
    if any(r["cpu_tick_us_per_req"] is not None for r in runs):
        cpu = ("; CPU time: the scheduler's nanoseconds (/proc/PID/task/*/schedstat) of every server "
               "process, the clock-tick figure (utime+stime) beside it")
    return (f"{placing}; {load} on CPU {meta.get('load_cpu')}{backend}; GET {meta.get('url_path')} "
            f"({meta.get('body_bytes')} bytes of body; whole response: {sizes} bytes); "
            f"{n} runs of {meta.get('duration_s')} s per server after {meta.get('warmup_s')} s of warm-up, "
            f"order rotated each round; all responses 2xx, no socket errors{syscalls}{cpu}. "
            f"Medians, with min-max in brackets.")


def pair_name(pair):
    s, _, ref = pair.partition("/")
    return f"{name(s)}/{name(ref)}"


# The per-run table: key, column, format; optional columns only when a run
# has them.
RUN_COLUMNS = [
    ("rps", "requests/s", "{:.0f}"),
    ("p50_ms", "p50 ms", "{:.3f}"),
    ("p99_ms", "p99 ms", "{:.3f}"),
    ("p999_ms", "p99.9 ms", "{:.3f}"),
    ("cpu_us_per_req", "CPU us/req", "{:.3f}"),
    ("cpu_tick_us_per_req", "ticks us/req", "{:.3f}"),
    ("syscalls_per_req", "syscalls/req", "{:.2f}"),
    ("polls_per_req", "polls/req", "{:.3f}"),
    ("switches_per_req", "switches/req", "{:.4f}"),
    ("backend_cpu_us_per_req", "backend us/req", "{:.3f}"),
    ("worker_rss_mib", "RSS worker MiB", "{:.1f}"),
    ("total_rss_mib", "RSS all MiB", "{:.1f}"),
    ("server_cores", "server cores", "{:.2f}"),
    ("wrk_cores", "load cores", "{:.2f}"),
    ("other_cores", "other cores", "{:.2f}"),
    ("steal_cores", "steal cores", "{:.2f}"),
]


def markdown(meta, servers, runs, stats, ratios, rounds, metrics):
    out = []
    out.append(f"### {meta.get('scenario')}: {' vs '.join(name(s) for s in servers)}")
    out.append("")
    versions = ", ".join(f"{name(s)} {meta.get(s, '?')}" for s in servers)
    out.append(
        f"{meta.get('date')}, git {meta.get('git')}; {meta.get('cpu_model')}, {meta.get('ncpu')} CPUs, "
        f"kernel {meta.get('kernel')}; {versions}; {meta.get('wrk')}.  ")
    out.append(setup_line(meta, runs, servers))
    out.append("")
    head = "| metric |" + "".join(f" {name(s)} |" for s in servers)
    rule = "|---|" + "---:|" * len(servers)
    for pair in ratios:
        head += f" {pair_name(pair)} |"
        rule += "---:|"
    out += [head, rule]
    for key, label, digits, _ in metrics:
        line = f"| {label} |"
        for s in servers:
            st = stats[s][key]
            line += (f" {fmt(st['median'], digits)} ({fmt(st['min'], digits)}-{fmt(st['max'], digits)}) |"
                     if st["median"] is not None else " - |")
        for pair in ratios:
            r = ratios[pair][key]
            line += f" {r:.3f} |" if r is not None else " - |"
        out.append(line)
    out.append("")
    out.append("Per run (in the order measured):")
    out.append("")
    present = {key for key, *_ in metrics}
    columns = [c for c in RUN_COLUMNS
               if c[0] in present or (c[0].endswith("_cores") and c[0] != "steal_cores")]
    placed = any(r["held_open"] is not None for r in runs)
    out.append("| run | server |" + "".join(f" {label} |" for _, label, _ in columns)
               + (" connections per worker | busiest/mean |" if placed else ""))
    out.append("|---:|---|" + "---:|" * (len(columns) + 2 * placed))
    for r in sorted(runs, key=lambda r: r["slot"]):
        out.append(f"| {r['run']} | {name(r['server'])} |"
                   + "".join(f" {form.format(r[key])} |" if r[key] is not None else " - |"
                             for key, _, form in columns)
                   + (placement_cell(r) if placed else ""))
    if placed:
        out.append("")
        out.append("Connections per worker: those the client's connections each worker process held "
                   "(ss -tnp, in worker order) once they were open, \"→\" the counts just before the "
                   "run ended where they moved; busiest/mean: the busiest worker's over the mean "
                   "(1.00 even, the number of workers when one holds them all).")
    late = [r for r in sorted(runs, key=lambda r: r["slot"]) if not r["latency_valid"]]
    if late:
        out.append("")
        out.append("**Latencies not valid** (the fixed-rate client fell more than 10 ms behind its schedule, "
                   "so its stall is in them; CPU and requests/s stand): "
                   + ", ".join(f"run {r['run']} {name(r['server'])} ({fmt(r['client_late_ms'], 1)} ms behind)"
                               for r in late)
                   + "; the targets leave their rounds out of the latency ratios.")
    disturbed = [r for r in sorted(runs, key=lambda r: r["slot"]) if r["other_cores"] > OTHER_LOAD_LIMIT]
    if disturbed:
        out.append("")
        out.append(f"**Warning**: other processes took more than {OTHER_LOAD_LIMIT} cores during "
                   + ", ".join(f"run {r['run']} {name(r['server'])} ({r['other_cores']:.2f}"
                               + (f", of which steal {r['steal_cores']:.2f}" if r["steal_cores"] else "") + ")"
                               for r in disturbed)
                   + ": the machine was not quiet; do not use these figures for a decision.")
        stolen = [r for r in disturbed if r["steal_cores"] and r["steal_cores"] > OTHER_LOAD_LIMIT]
        if stolen:
            out.append("Steal is CPU the hypervisor gave to other machines while this one wanted it: "
                       "no process here caused it, and it slows every server it falls on.")
    for pair in ratios:
        s, _, ref = pair.partition("/")
        mine = [p for p in rounds if p["server"] == s and p["reference"] == ref]
        if mine:
            parts = []
            for key in ROUND_KEYS:
                values = [p[key] for p in mine if key in p]
                # A latency ratio is missing from a round whose run was not
                # valid (the client fell behind): "-" in its place.
                if values and (len(values) == len(mine) or key in targets.LATENCY_KEYS):
                    parts.append(f"{ROUND_LABELS[key]} "
                                 + ", ".join(f"{p[key]:.3f}" if key in p else "-" for p in mine)
                                 + f" (median {statistics.median(values):.3f})")
            out.append("")
            out.append(f"{pair_name(pair)} per round: " + "; ".join(parts) + ".")
    line = targets.targets_line(meta.get("scenario"), runs)
    if line:
        out += ["", line]
    return "\n".join(out) + "\n"


def runs_of(runs, server):
    return [r for r in runs if r["server"] == server]


def write_csv(path, servers, stats, ratios, metrics):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "server", "median", "min", "max"])
        for key, *_ in metrics:
            for s in servers:
                st = stats[s][key]
                w.writerow([key, s, st["median"], st["min"], st["max"]])
            for pair in ratios:
                if ratios[pair][key] is not None:
                    w.writerow([key, pair, ratios[pair][key], "", ""])


def read_runs(d):
    with (d / "runs.csv").open(newline="") as f:
        return [figures(row) for row in csv.DictReader(f)]


# run.sh accept-policies' parts, in the order it runs them.
ACCEPT_PARTS = ["closed-64", "closed-8", "rate", "low-rate"]


def accept_policies(d):
    """The four parts' summaries, then issue 9's targets over them; into
    DIR/summary.md and on standard output."""
    parts, out = {}, ["## accept-policies: issue 9's procedure", ""]
    for part in ACCEPT_PARTS:
        runs = read_runs(d / part) if (d / part / "runs.csv").exists() else []
        if runs:
            parts[part] = runs
            out.append(summary(d / part, runs))
    if not parts:
        print(f"report.py: no part of accept-policies in {d}", file=sys.stderr)
        return 1
    n = max(len({r["run"] for r in runs}) for runs in parts.values())
    out += [f"### Issue 9's targets (medians of per-round ratios, up to {n} rounds)", ""]
    out += targets.accept_policy_lines(parts)
    md = "\n".join(out) + "\n"
    (d / "summary.md").write_text(md)
    sys.stdout.write(md)
    return 0


def summary(d, runs):
    """Writes DIR's summary.md, .csv and .json from its runs; returns the
    Markdown."""
    meta = read_meta(d / "meta.txt")
    servers = [s for s in meta.get("servers", "").split() if runs_of(runs, s)]
    # Result directories from before accept policies name no baseline.
    baseline = meta.get("baseline", "nginx")
    metrics = present_metrics(runs)
    pairs = ratio_pairs(meta, servers, baseline)
    stats, ratios = summarize(runs, servers, pairs, metrics)
    rounds = pair_ratios(runs, pairs)
    md = markdown(meta, servers, runs, stats, ratios, rounds, metrics)
    (d / "summary.md").write_text(md)
    write_csv(d / "summary.csv", servers, stats, ratios, metrics)
    (d / "summary.json").write_text(json.dumps({
        "meta": meta,
        "summary": stats,
        "baseline": baseline,
        "ratios": ratios,
        "pair_ratios": rounds,
        "runs": sorted(runs, key=lambda r: r["slot"]),
    }, indent=2) + "\n")
    return md


def main(argv):
    if len(argv) == 3 and argv[1] == "--accept-policies":
        return accept_policies(Path(argv[2]))
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    d = Path(argv[1])
    runs = read_runs(d)
    if not runs:
        print(f"report.py: no runs in {d / 'runs.csv'}", file=sys.stderr)
        return 1
    sys.stdout.write(summary(d, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
