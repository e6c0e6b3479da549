"""The issues' targets, checked against the runs of bench/run.sh.

Issue 7 (reverse proxy) sets ScalWS's figures against nginx's and
HAProxy's in `proxy`, `proxy-100k` and `proxy-latency`, issue 8 (TLS) in
`tls-h1`, `tls-h2`, `tls-newconn` and `tls-resume`; issue 9 (accept
policies) sets ScalWS's policies against each other. report.py prints the
verdict under each summary (targets_line) and, for `run.sh
accept-policies`, over its four parts (accept_policy_lines).

A ratio here is the median over the rounds of the round's ratio (each
server's run against the reference's run of the same round, measured
minutes apart), not the ratio of the medians: one disturbed round moves
it least, and the per-round figures show the spread. Each target is met,
NOT met, or n/a (a server it needs did not run).

Runs are report.figures() dicts: run, server, and the figures by key. A
run whose fixed-rate client fell behind (latency_valid False, ADR 0031)
has latencies that hold the client's stall: a round with such a run is
left out of the latency ratios, and the lines say which; its CPU and
requests/s still count.
"""
import statistics

# The figures a fixed-rate client's stall makes not valid.
LATENCY_KEYS = {"p50_ms", "p99_ms", "p999_ms"}


def valid(run, key):
    """Whether RUN's KEY is the server's (results from before the
    latency_valid column are)."""
    return key not in LATENCY_KEYS or run.get("latency_valid", True)


def by_round(runs):
    """{run: {server: figures}}."""
    out = {}
    for r in runs:
        out.setdefault(r["run"], {})[r["server"]] = r
    return out


def invalid_rounds(runs, server, refs, key):
    """The rounds that have SERVER and REFS but whose KEY is not valid in one
    of them, as (round, [(server, client lag in ms)])."""
    out = []
    for run, by in sorted(by_round(runs).items()):
        mine = [by[s] for s in [server] + list(refs) if s in by]
        if len(mine) == 1 + len(refs) and not all(valid(r, key) for r in mine):
            out.append((run, [(r["server"], r.get("client_late_ms")) for r in mine if not valid(r, key)]))
    return out


def round_ratios(runs, server, refs, key):
    """SERVER's KEY over the smallest KEY among REFS, per round that has them
    all, valid (the smallest: "the better peer" for CPU per request)."""
    out = []
    for run, by in sorted(by_round(runs).items()):
        if server in by and all(ref in by for ref in refs) and \
                all(valid(by[s], key) for s in [server] + list(refs)):
            mine = by[server][key]
            base = min(by[ref][key] for ref in refs) if refs else None
            if mine is not None and base:
                out.append(mine / base)
    return out


def median_ratio(runs, server, refs, key):
    ratios = round_ratios(runs, server, refs, key)
    return (statistics.median(ratios), len(ratios)) if ratios else (None, 0)


def verdict(value, op, limit):
    if value is None:
        return "n/a"
    return "met" if (value <= limit if op == "<=" else value >= limit if op == ">=" else value < limit) else "NOT met"


# Issue 7, "What it must show" 4: (label, key, peers, op, limit). Peers is
# the list whose smallest value is the reference; [] for an absolute figure.
PROXY_TARGETS = {
    "proxy": [
        ("CPU/req / nginx", "cpu_us_per_req", ["nginx"], "<=", 0.6),
        ("CPU/req / HAProxy", "cpu_us_per_req", ["haproxy"], "<=", 0.85),
        ("req/s / nginx", "rps", ["nginx"], ">=", 1.0),
        ("req/s / HAProxy", "rps", ["haproxy"], ">=", 1.0),
        ("syscalls/req", "syscalls_per_req", [], "<=", 4.4),
    ],
    "proxy-100k": [
        ("CPU/req / better peer", "cpu_us_per_req", ["nginx", "haproxy"], "<=", 0.8),
        ("req/s / nginx", "rps", ["nginx"], ">=", 1.0),
        ("req/s / HAProxy", "rps", ["haproxy"], ">=", 1.0),
    ],
    "proxy-latency": [
        ("p99 / nginx", "p99_ms", ["nginx"], "<=", 1.0),
        ("p99 / HAProxy", "p99_ms", ["haproxy"], "<=", 1.0),
    ],
}


# Issue 8, "What it must show" 3: CPU per request against the better of
# nginx and HAProxy (tls-newconn is the full handshake, tls-resume the
# resumed one), requests/s not below either.
TLS_TARGETS = {
    scenario: [
        ("CPU/req / better peer", "cpu_us_per_req", ["nginx", "haproxy"], "<=", limit),
        ("req/s / nginx", "rps", ["nginx"], ">=", 1.0),
        ("req/s / HAProxy", "rps", ["haproxy"], ">=", 1.0),
    ]
    for scenario, limit in (("tls-h1", 0.8), ("tls-h2", 0.8), ("tls-newconn", 0.9), ("tls-resume", 0.7))
}

# The issue each scenario's targets come from, for the line's title.
ISSUE_OF = {**{s: 7 for s in PROXY_TARGETS}, **{s: 8 for s in TLS_TARGETS}}


def check(runs, server, label, key, refs, op, limit, digits=3):
    """One target as text: 'LABEL VALUE (OP LIMIT: VERDICT)'."""
    servers = {r["server"] for r in runs}
    if server not in servers or any(ref not in servers for ref in refs):
        return f"{label} n/a", "n/a"
    if refs:
        value, _ = median_ratio(runs, server, refs, key)
    else:
        values = [r[key] for r in runs if r["server"] == server and r[key] is not None and valid(r, key)]
        value = statistics.median(values) if values else None
    v = verdict(value, op, limit)
    shown = f"{value:.{digits}f}" if value is not None else "-"
    return f"{label} {shown} ({op.replace('<=', '≤').replace('>=', '≥')} {limit}: {v})", v


def targets_line(scenario, runs):
    """The issue's targets in one line, for the proxy (issue 7) and TLS
    (issue 8) scenarios; None for the others or without a ScalWS run."""
    targets = PROXY_TARGETS.get(scenario) or TLS_TARGETS.get(scenario)
    scalws = next((s for s in sorted({r["server"] for r in runs}) if s.startswith("scalws")), None)
    if targets is None or scalws is None:
        return None
    parts = [check(runs, scalws, *t)[0] for t in targets]
    n = len(by_round(runs))
    return (f"**Issue {ISSUE_OF[scenario]} targets** ({scenario}, ScalWS, median of {n} per-round ratios): "
            + "; ".join(parts) + ".")


# Issue 9, "What it must show" 3: (part, label, server, reference, key, op,
# limit). The parts are run.sh accept-policies' subdirectories.
ACCEPT_TARGETS = [
    ("closed-64", "least-loaded p99 / shared, closed loop, 64 connections (information)",
     "scalws:least-loaded", "scalws:shared", "p99_ms", None, None),
    ("closed-64", "least-loaded req/s / shared (information)",
     "scalws:least-loaded", "scalws:shared", "rps", None, None),
    ("closed-64", "least-loaded p99 / reuseport (information)",
     "scalws:least-loaded", "scalws:reuseport", "p99_ms", None, None),
    ("closed-8", "least-loaded p99 / shared, few long-lived connections: better",
     "scalws:least-loaded", "scalws:shared", "p99_ms", "<", 1.0),
    ("rate", "least-loaded p99 / shared at equal throughput: no worse",
     "scalws:least-loaded", "scalws:shared", "p99_ms", "<=", 1.0),
    ("rate", "least-loaded p99 / reuseport at equal throughput (information)",
     "scalws:least-loaded", "scalws:reuseport", "p99_ms", None, None),
    ("rate", "least-loaded req/s / shared at the fixed rate (1.0: equal throughput)",
     "scalws:least-loaded", "scalws:shared", "rps", None, None),
    ("low-rate", "fountain CPU/req / shared at a low rate: less",
     "scalws:fountain", "scalws:shared", "cpu_us_per_req", "<", 1.0),
    ("low-rate", "fountain p99 / shared at a low rate: at most 1.2x",
     "scalws:fountain", "scalws:shared", "p99_ms", "<=", 1.2),
]


def accept_policy_lines(parts):
    """Issue 9's targets over {part: runs}, one line each."""
    out = []
    for part, label, server, ref, key, op, limit in ACCEPT_TARGETS:
        runs = parts.get(part)
        if runs is None:
            out.append(f"- {label}: n/a (no {part} results)")
            continue
        value, n = median_ratio(runs, server, [ref], key)
        spread = ", ".join(f"{x:.3f}" for x in round_ratios(runs, server, [ref], key))
        shown = f"{value:.3f}" if value is not None else "-"
        target = f" — target {op.replace('<=', '≤')} {limit}: {verdict(value, op, limit)}" if op else ""
        left = invalid_rounds(runs, server, [ref], key)
        if left:
            target += ("; left out, the fixed-rate client fell behind: "
                       + ", ".join(f"round {run} (" + ", ".join(
                           f"{s.partition(':')[2] or s} {late:.1f} ms" if late is not None else s
                           for s, late in who) + ")" for run, who in left))
        rounds = f"median of {n} rounds: {spread}" if n else "no round to judge"
        out.append(f"- {label}: {shown} ({rounds}){target}")
    return out


# Issue 10, "What it must show" 4: absolute figures of one run of
# bench/ingressbench.py (its figures.json keys), not ratios.
INGRESS_TARGETS = [
    ("p99 endpoint change → every worker", "from_return_ms_p99", "<=", 100.0),
    ("full table build", "full_build_ms", "<=", 50.0),
]


def ingress_line(fig):
    """Issue 10's targets over one ingressbench run, one line."""
    parts = []
    for label, key, op, limit in INGRESS_TARGETS:
        value = fig.get(key)
        shown = f"{value:.1f} ms" if value is not None else "-"
        parts.append(f"{label} {shown} ({op.replace('<=', '≤')} {limit:g} ms: {verdict(value, op, limit)})")
    return "**Issue 10 targets** (ingress): " + "; ".join(parts) + "."
