#!/usr/bin/python3
"""Summary of one bench/run.sh result directory.

Reads DIR/runs.csv (one row of raw figures per measured run) and DIR/meta.txt
(key=value), writes DIR/summary.json, DIR/summary.csv and DIR/summary.md, and
prints the Markdown (ready for docs/benchmarks/) on standard output.

Every figure is a median over the runs of one server; the ratios are
SERVER/BASELINE of those medians (meta's baseline: nginx against ScalWS, or
scalws:shared among accept policies). Per-run figures and per-round ratios
(each server's run against the baseline's of the same round) follow, so the
noise can be judged.

Usage: bench/report.py DIR     (run.sh calls it; it can be rerun at will)
"""
import csv
import json
import statistics
import sys
from pathlib import Path


def name(server):
    """scalws -> ScalWS, scalws:least-loaded -> ScalWS least-loaded."""
    kind, _, policy = server.partition(":")
    return {"scalws": "ScalWS", "nginx": "nginx"}.get(kind, kind) + (" " + policy if policy else "")


# key, label, digits, whether a ratio to the baseline means something; every
# one is computed per run by figures(). The last three describe the run:
# which side was the bottleneck (1.0: that CPU was saturated), and how much
# CPU something else on the machine took meanwhile. Server CPU use has a
# ratio all the same: at a fixed rate (LOAD=rate) it is the figure that
# compares the servers' CPU.
METRICS = [
    ("rps", "requests/s", 0, True),
    ("p50_ms", "p50 latency (ms)", 3, True),
    ("p99_ms", "p99 latency (ms)", 3, True),
    ("cpu_us_per_req", "server CPU per request (us)", 3, True),
    ("worker_rss_mib", "peak RSS, worker (MiB)", 1, True),
    ("total_rss_mib", "peak RSS, all processes (MiB)", 1, True),
    ("server_cores", "server CPU use (cores)", 3, True),
    ("wrk_cores", "wrk CPU use (cores)", 2, False),
    ("other_cores", "other load on the machine (cores)", 2, False),
]

# A run during which other processes took more than this many cores was
# disturbed (a build, a test suite): the summary says so.
OTHER_LOAD_LIMIT = 0.10


def figures(row):
    """The derived figures of one run from its raw CSV row."""
    requests = int(row["requests"])
    seconds = int(row["duration_us"]) / 1e6
    cpu_s = int(row["cpu_ticks"]) / int(row["clk_tck"])
    wrk_s = int(row["wrk_cpu_ticks"]) / int(row["clk_tck"])
    busy_s = int(row["busy_ticks"]) / int(row["clk_tck"])
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
        "cpu_us_per_req": cpu_s * 1e6 / requests,
        "worker_rss_mib": int(row["worker_hwm_kib"]) / 1024,
        "total_rss_mib": int(row["total_hwm_kib"]) / 1024,
        "server_cores": cpu_s / seconds,
        "wrk_cores": wrk_s / seconds,
        "other_cores": (busy_s - cpu_s - wrk_s) / seconds,
    }


def read_meta(path):
    meta = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            meta[key] = value
    return meta


def summarize(runs, servers, baseline):
    """{server: {metric: {median, min, max}}} and {server: {metric: ratio to
    the baseline's median}} for every other server."""
    stats = {}
    for s in servers:
        mine = [r for r in runs if r["server"] == s]
        stats[s] = {}
        for key, *_ in METRICS:
            values = [r[key] for r in mine]
            stats[s][key] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
    ratios = {}
    if baseline in stats:
        for s in servers:
            if s == baseline:
                continue
            ratios[s] = {}
            for key, _, _, meaningful in METRICS:
                base = stats[baseline][key]["median"]
                ratios[s][key] = stats[s][key]["median"] / base if meaningful and base else None
    return stats, ratios


def pair_ratios(runs, baseline):
    """SERVER/BASELINE per round, for the rounds that have both."""
    pairs = []
    for run in sorted({r["run"] for r in runs}):
        by = {r["server"]: r for r in runs if r["run"] == run}
        if baseline not in by:
            continue
        for s, r in by.items():
            if s != baseline:
                pairs.append({
                    "run": run,
                    "server": s,
                    "rps": r["rps"] / by[baseline]["rps"],
                    "cpu_us_per_req": r["cpu_us_per_req"] / by[baseline]["cpu_us_per_req"],
                    "server_cores": r["server_cores"] / by[baseline]["server_cores"],
                })
    return pairs


def fmt(value, digits):
    return f"{value:.{digits}f}"


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
    if meta.get("load") == "rate":
        load = (f"fixed rate {meta.get('rate')} requests/s (bench/fixedrate.py, open loop, latency from "
                f"the moment each request was due) over {meta.get('connections')} keep-alive connections")
    else:
        load = f"wrk -t1 -c{meta.get('connections')}"
    return (f"{placing}; {load} on CPU {meta.get('load_cpu')}; GET {meta.get('url_path')} "
            f"({meta.get('body_bytes')} bytes of body; whole response: {sizes} bytes); "
            f"{n} runs of {meta.get('duration_s')} s per server after {meta.get('warmup_s')} s of warm-up, "
            f"order rotated each round; all responses 2xx, no socket errors. "
            f"Medians, with min-max in brackets.")


def markdown(meta, servers, runs, stats, ratios, pairs, baseline):
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
    for s in ratios:
        head += f" {name(s)}/{name(baseline)} |"
        rule += "---:|"
    out += [head, rule]
    for key, label, digits, _ in METRICS:
        line = f"| {label} |"
        for s in servers:
            st = stats[s][key]
            line += f" {fmt(st['median'], digits)} ({fmt(st['min'], digits)}-{fmt(st['max'], digits)}) |"
        for s in ratios:
            r = ratios[s][key]
            line += f" {r:.3f} |" if r is not None else " - |"
        out.append(line)
    out.append("")
    out.append("Per run (in the order measured):")
    out.append("")
    out.append("| run | server | requests/s | p50 ms | p99 ms | CPU us/req | RSS worker MiB | RSS all MiB "
               "| server cores | load cores | other cores |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(runs, key=lambda r: r["slot"]):
        out.append(
            f"| {r['run']} | {name(r['server'])} | {r['rps']:.0f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} "
            f"| {r['cpu_us_per_req']:.3f} | {r['worker_rss_mib']:.1f} | {r['total_rss_mib']:.1f} "
            f"| {r['server_cores']:.2f} | {r['wrk_cores']:.2f} | {r['other_cores']:.2f} |")
    disturbed = [r for r in sorted(runs, key=lambda r: r["slot"]) if r["other_cores"] > OTHER_LOAD_LIMIT]
    if disturbed:
        out.append("")
        out.append(f"**Warning**: other processes took more than {OTHER_LOAD_LIMIT} cores during "
                   + ", ".join(f"run {r['run']} {name(r['server'])} ({r['other_cores']:.2f})" for r in disturbed)
                   + ": the machine was not quiet; do not use these figures for a decision.")
    for s in ratios:
        mine = [p for p in pairs if p["server"] == s]
        if mine:
            out.append("")
            out.append(f"{name(s)}/{name(baseline)} per round: requests/s "
                       + ", ".join(f"{p['rps']:.3f}" for p in mine)
                       + "; CPU per request "
                       + ", ".join(f"{p['cpu_us_per_req']:.3f}" for p in mine)
                       + "; server CPU use "
                       + ", ".join(f"{p['server_cores']:.3f}" for p in mine) + ".")
    return "\n".join(out) + "\n"


def runs_of(runs, server):
    return [r for r in runs if r["server"] == server]


def write_csv(path, servers, stats, ratios, baseline):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["metric", "server", "median", "min", "max"])
        for key, *_ in METRICS:
            for s in servers:
                st = stats[s][key]
                w.writerow([key, s, st["median"], st["min"], st["max"]])
            for s in ratios:
                if ratios[s][key] is not None:
                    w.writerow([key, f"{s}/{baseline}", ratios[s][key], "", ""])


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    d = Path(argv[1])
    meta = read_meta(d / "meta.txt")
    with (d / "runs.csv").open(newline="") as f:
        runs = [figures(row) for row in csv.DictReader(f)]
    if not runs:
        print(f"report.py: no runs in {d / 'runs.csv'}", file=sys.stderr)
        return 1
    servers = [s for s in meta.get("servers", "").split() if runs_of(runs, s)]
    # Result directories from before accept policies name no baseline.
    baseline = meta.get("baseline", "nginx")
    stats, ratios = summarize(runs, servers, baseline)
    pairs = pair_ratios(runs, baseline)
    md = markdown(meta, servers, runs, stats, ratios, pairs, baseline)
    (d / "summary.md").write_text(md)
    write_csv(d / "summary.csv", servers, stats, ratios, baseline)
    (d / "summary.json").write_text(json.dumps({
        "meta": meta,
        "summary": stats,
        "baseline": baseline,
        "ratios_over_baseline": ratios,
        "pair_ratios": pairs,
        "runs": sorted(runs, key=lambda r: r["slot"]),
    }, indent=2) + "\n")
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
