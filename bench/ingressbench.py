"""bench/run.sh ingress: issue 10's benchmark, the ingress controller at
scale. The fake Kubernetes API server (test/kube/) bulk-loads INGRESSES
Ingresses, as many Services and ENDPOINTS endpoints spread evenly over
their EndpointSlices (/_fake/load); scalwsd (WORKERS workers, subscribed,
admin API on) and build/ingressd start; once every worker serves the
full set, CHANGES endpoint changes are made one at a time (an
EndpointSlice replaced with one address changed, PUT), each waited for
until every worker uses the generation that carries it.

Times come from the processes' own log lines, not from polling: the
supervisor says "generation G published (...) in U us" (the table build)
and "snapshot ... applied (...) in U us" (merge, check and build of the
full set); each worker says "using table generation G" (debug level) once
it adopted it. A log line's stamp is the wall clock truncated to the
millisecond, so a change's latency is taken from the API call's return
(this script's wall clock, the same machine) to the last worker's stamp
plus 1 ms: an upper bound, at most 1 ms above the truth. The time from
sending the call is beside it. ingressd says "translated in N us" per
publication. RSS: VmRSS and VmHWM of /proc/PID/status at the end.

Every wait is bounded (--timeout); nothing sleeps in place of a check.
Results go to OUT (changes.csv, figures.json, meta.txt, the logs) and a
Markdown summary to stdout; the targets are bench/targets.py's
INGRESS_TARGETS. Exit 1 when the stack fails (a refusal, a process gone,
a sanitizer report), with the figures measured until then."""

import argparse
import calendar
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(ROOT, "test", "integration"))
sys.path.insert(0, os.path.join(ROOT, "test", "kube"))

import targets  # noqa: E402
from percentile import percentile  # noqa: E402
from harness import Process, poll, status_kib  # noqa: E402

LINE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z \[(\w+)\] (.+?)\[(\d+)\]: (.*)$")
PUBLISHED = re.compile(r"^ingress: generation (\d+) published \((\d+) hosts, (\d+) routes\) in (\d+) us")
SNAPSHOT = re.compile(r"^ingress: snapshot (\d+) of publisher \S+ applied \((\d+) hosts, (\d+) pools\) in (\d+) us")
REFUSED = re.compile(r"^ingress: .* refused: (.*)$")
USING = re.compile(r"^using table generation (\d+)$")
TRANSLATED = re.compile(r"^routes: sequence (\d+): .*, (\d+) members, .*translated in (\d+) us")
SANITIZER = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


class Failed(Exception):
    pass


def stamp(m):
    """A log line's wall-clock stamp in seconds since the epoch."""
    y, mo, d, h, mi, s, ms = (int(x) for x in m.group(1, 2, 3, 4, 5, 6, 7))
    return calendar.timegm((y, mo, d, h, mi, s)) + ms / 1000.0


class Log:
    """A log file read as it grows: parsed lines (stamp, role, pid, text)
    from a remembered offset on."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        out = []
        for raw in lines:
            text = raw.decode("utf-8", "replace")
            if any(p in text for p in SANITIZER):
                raise Failed("sanitizer report in %s: %s" % (self.path, text))
            m = LINE.match(text)
            if m:
                out.append((stamp(m), m.group(9), int(m.group(10)), m.group(11)))
        return out


def bounded(what, timeout, step, interval=0.005):
    """harness.poll(step) (a true value returned), its timeout a Failed
    naming `what`: the run ends with the figures measured until then."""
    try:
        return poll(step, timeout=timeout, interval=interval, what=what)
    except AssertionError as e:
        raise Failed(str(e)) from None


def proc_mem(pid):
    """(VmRSS, VmHWM) in KiB from /proc/PID/status, or (None, None)."""
    return status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")


class Stack:
    """The fake API server, scalwsd and ingressd of one benchmark, and the
    supervisor's and ingressd's logs read as they grow."""

    def __init__(self, args):
        self.args = args
        self.kube = None
        self.srv = None
        self.ingressd = None
        self.generation = 0          # the newest generation every worker uses
        self.adopted = {}            # worker pid -> {generation: stamp}
        self.published = {}          # generation -> (stamp, hosts, build_us)
        self.snapshots = []          # (stamp, sequence, hosts, pools, us)
        self.translated = []         # (stamp, sequence, members, us)
        self.refusals = []

    def start_kube(self):
        from fakekube import FakeKube
        self.kube = FakeKube(verbose=False).start()
        t0 = time.monotonic()
        r = self.kube.request("POST", "/_fake/load", {
            "namespace": "bench", "ingresses": self.args.ingresses,
            "endpoints": self.args.endpoints, "ingress_class": "scalws"},
            timeout=self.args.timeout)
        if r.status != 200:
            raise Failed("/_fake/load: %r" % r)
        self.load = r.json()
        self.load["wall_s"] = round(time.monotonic() - t0, 3)
        if self.load["endpoints"] != self.args.endpoints:
            raise Failed("the fake made %d endpoints, not %d" % (self.load["endpoints"],
                                                                   self.args.endpoints))

    def start_scalwsd(self):
        import harness
        from harness import Server, free_port
        harness.BUILD_DIR = self.args.build
        self.admin_port = free_port()
        self.srv = Server(
            'server:\n  listen: "127.0.0.1:@PORT@"\n  event_loops: %d\n  table_size: %s\n'
            '  logging: {level: debug}\n  admin: {listen: ["127.0.0.1:%d"]}\n'
            'ingress: {subscribe: "ipc://@DIR@/routes.sock"}\n'
            % (self.args.workers, self.args.table_size, self.admin_port))
        self.srv.start()
        self.workers = self.srv.wait_workers(self.args.workers, timeout=self.args.timeout)
        self.sup_log = Log(self.srv.err_path)

    def start_ingressd(self):
        self.ingressd_log_path = os.path.join(self.srv.dir, "ingressd.log")
        self.ingressd_log = Log(self.ingressd_log_path)
        self.ingressd_started = time.time()
        self.ingressd = Process(self.ingressd_log_path).spawn(
            [os.path.abspath(os.path.join(self.args.build, "ingressd")),
             "--kubeconfig", self.kube.kubeconfig, "--namespace", "bench",
             "--publish", "ipc://%s/routes.sock" % self.srv.dir])

    def read_logs(self):
        """Take in what the logs said since the last call."""
        for t, role, pid, text in self.sup_log.new_lines():
            m = USING.match(text)
            if m and role.startswith("worker"):
                self.adopted.setdefault(pid, {}).setdefault(int(m.group(1)), t)
                continue
            m = PUBLISHED.match(text)
            if m:
                self.published[int(m.group(1))] = (t, int(m.group(2)), int(m.group(4)))
                continue
            m = SNAPSHOT.match(text)
            if m:
                self.snapshots.append((t, int(m.group(1)), int(m.group(2)), int(m.group(3)),
                                       int(m.group(4))))
                continue
            m = REFUSED.match(text)
            if m:
                self.refusals.append(m.group(1))
        for t, _, _, text in self.ingressd_log.new_lines():
            m = TRANSLATED.match(text)
            if m:
                self.translated.append((t, int(m.group(1)), int(m.group(2)), int(m.group(3))))
        if self.refusals:
            raise Failed("scalwsd refused ingressd's routes: " + self.refusals[0])
        if not self.ingressd.running():
            raise Failed("ingressd exited with %s" % self.ingressd.wait_exit(0))
        if not self.srv.running():
            raise Failed("scalwsd exited with %s" % self.srv.wait_exit(0))

    def all_adopted(self, gen):
        """The stamp at which the last worker took generation gen (or a
        later one), or None while one has not."""
        last = 0.0
        for pid in self.workers:
            seen = [t for g, t in self.adopted.get(pid, {}).items() if g >= gen]
            if not seen:
                return None
            last = max(last, min(seen))
        return last

    def wait_generation(self, after, what):
        """The first generation published after `after` that every worker
        uses: (generation, stamp of the last worker)."""
        def step():
            self.read_logs()
            newer = sorted(g for g in self.published if g > after)
            if not newer:
                return None
            t = self.all_adopted(newer[0])
            return None if t is None else (newer[0], t)
        return bounded(what, self.args.timeout, step)

    def stop(self):
        if self.ingressd is not None:
            self.ingressd.stop(timeout=30)
        if self.srv is not None:
            self.srv.stop()
        if self.kube is not None:
            self.kube.stop()


def change_endpoint(stack, i, rnd):
    """Change one endpoint's address (PUT of an EndpointSlice); the times
    the call was sent and returned (wall clock)."""
    k = rnd.randrange(stack.args.ingresses)
    path = "/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices/svc-%d-0" % k
    r = stack.kube.request("GET", path)
    if r.status != 200:
        raise Failed("GET %s: %r" % (path, r))
    obj = r.json()
    if not obj.get("endpoints"):
        raise Failed("%s has no endpoints: more endpoints than Ingresses are needed" % path)
    obj["endpoints"][0]["addresses"] = ["172.16.%d.%d" % (i >> 8 & 255, i & 255)]
    body = json.dumps(obj)
    sent = time.time()
    r = stack.kube.request("PUT", path, body)
    returned = time.time()
    if r.status != 200:
        raise Failed("PUT %s: %r" % (path, r))
    return sent, returned


def run(args, out):
    fig = {"ingresses": args.ingresses, "endpoints": args.endpoints, "workers": args.workers,
           "changes": args.changes}
    rows = []
    stack = Stack(args)
    error = None
    try:
        stack.start_kube()
        fig["fake_load_s"] = stack.load["wall_s"]
        stack.start_scalwsd()
        stack.start_ingressd()
        gen, t_all = stack.wait_generation(0, "every worker to use the first full set")
        hosts = stack.published[gen][1]
        if hosts < args.ingresses:
            raise Failed("generation %d has %d hosts, not %d" % (gen, hosts, args.ingresses))
        stack.generation = gen
        # The workers' lines can reach the log before the supervisor's
        # snapshot line and ingressd's translation line (their own writes,
        # in any order): wait for both, or the figures would be missing.
        def apply_lines():
            stack.read_logs()
            return bool(stack.snapshots and stack.translated)
        bounded("the snapshot's and the translation's log lines", args.timeout, apply_lines)
        fig["start_to_served_ms"] = round((t_all - stack.ingressd_started) * 1000, 1)
        fig["full_build_ms"] = stack.published[gen][2] / 1000.0
        snap = stack.snapshots[-1] if stack.snapshots else None
        fig["full_apply_ms"] = snap[4] / 1000.0 if snap else None
        first = stack.translated[0] if stack.translated else None
        fig["full_translate_ms"] = first[3] / 1000.0 if first else None
        fig["members"] = first[2] if first else None
        rnd = random.Random(args.seed)
        for i in range(args.changes):
            sent, returned = change_endpoint(stack, i, rnd)
            n_translated = len(stack.translated)
            gen, t_all = stack.wait_generation(stack.generation,
                                               "change %d in every worker" % (i + 1))
            stack.generation = gen
            # ingressd's line for this change may follow the workers' by a little.
            bounded("ingressd's line for change %d" % (i + 1), args.timeout,
                    lambda: (stack.read_logs(), len(stack.translated) > n_translated)[1] or None)
            # Where the time went, by the stamps of the lines on the way:
            # ingressd's (after it sent the delta), the supervisor's (after
            # the build), the last worker's; each + 1 ms, from the return.
            rows.append({"change": i + 1, "generation": gen,
                         "to_ingressd_ms": round((stack.translated[-1][0] + 0.001 - returned)
                                                 * 1000, 3),
                         "to_supervisor_ms": round((stack.published[gen][0] + 0.001 - returned)
                                                   * 1000, 3),
                         "from_return_ms": round((t_all + 0.001 - returned) * 1000, 3),
                         "from_send_ms": round((t_all + 0.001 - sent) * 1000, 3),
                         "api_call_ms": round((returned - sent) * 1000, 3),
                         "translate_us": stack.translated[-1][3],
                         "build_us": stack.published[gen][2]})
    except Failed as e:
        error = str(e)
    finally:
        pids = {"supervisor": stack.srv.pid if stack.srv else None,
                "ingressd": stack.ingressd.pid if stack.ingressd else None,
                "fake_apiserver": stack.kube.proc.pid if stack.kube and stack.kube.proc else None}
        for name, pid in pids.items():
            rss, hwm = proc_mem(pid) if pid else (None, None)
            fig[name + "_rss_kib"], fig[name + "_hwm_kib"] = rss, hwm
        for n, pid in enumerate(getattr(stack, "workers", []) or []):
            fig["worker%d_rss_kib" % n], fig["worker%d_hwm_kib" % n] = proc_mem(pid)
        if stack.translated:
            fig.setdefault("full_translate_ms", stack.translated[0][3] / 1000.0)
            fig.setdefault("members", stack.translated[0][2])
        if stack.srv is not None:
            for path in (stack.srv.err_path, getattr(stack, "ingressd_log_path", None)):
                if path and os.path.exists(path):
                    os.replace(path, os.path.join(out, os.path.basename(path)))
        stack.stop()
        if stack.srv is not None:
            import shutil
            shutil.rmtree(stack.srv.dir, ignore_errors=True)
    if rows:
        for key in ("from_return_ms", "from_send_ms", "api_call_ms"):
            v = sorted(r[key] for r in rows)
            fig[key + "_p50"], fig[key + "_p99"], fig[key + "_max"] = (percentile(v, 50),
                                                                     percentile(v, 99), v[-1])
        for key in ("to_ingressd_ms", "to_supervisor_ms"):
            fig[key + "_p50"] = statistics.median(r[key] for r in rows)
        # The first change after the full set, apart: it was the maximum
        # of every run until the arenas were read in (ADR 0050).
        fig["first_change"] = {k: rows[0][k] for k in ("to_ingressd_ms", "to_supervisor_ms",
                                                       "from_return_ms", "build_us")}
        fig["change_translate_ms_p50"] = statistics.median(r["translate_us"] for r in rows) / 1000
        fig["change_build_ms_p50"] = statistics.median(r["build_us"] for r in rows) / 1000
    fig["changes_done"] = len(rows)
    fig["error"] = error
    with open(os.path.join(out, "changes.csv"), "w") as f:
        keys = ["change", "generation", "to_ingressd_ms", "to_supervisor_ms", "from_return_ms",
                "from_send_ms", "api_call_ms", "translate_us", "build_us"]
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r[k]) for k in keys) + "\n")
    with open(os.path.join(out, "figures.json"), "w") as f:
        json.dump(fig, f, indent=1, sort_keys=True)
    return fig


def ms(v, digits=1):
    return "-" if v is None else "%.*f ms" % (digits, v)


def mib(kib):
    return "-" if kib is None else "%.1f MiB" % (kib / 1024.0)


def summary(fig, meta):
    lines = ["### ingress: %d Ingresses, %d endpoints, %d workers, %d of %d endpoint changes"
             % (fig["ingresses"], fig["endpoints"], fig["workers"], fig["changes_done"],
                fig["changes"]), "",
             "%s; load average before %s, after %s; %s" % (meta["date"], meta["loadavg_before"],
                                                          meta["loadavg_after"], meta["git"]), "",
             "| figure | value |", "|---|---|"]
    rows = [
        ("endpoint change → every worker, p50 / p99 / max (from the PUT's return, +1 ms stamp)",
         "%s / %s / %s" % (ms(fig.get("from_return_ms_p50")), ms(fig.get("from_return_ms_p99")),
                           ms(fig.get("from_return_ms_max")))),
        ("the same from sending the PUT, p50 / p99", "%s / %s" % (
            ms(fig.get("from_send_ms_p50")), ms(fig.get("from_send_ms_p99")))),
        ("the fake API server's PUT itself, p50 / p99", "%s / %s" % (
            ms(fig.get("api_call_ms_p50")), ms(fig.get("api_call_ms_p99")))),
        ("the same, by the stamps on the way, median: ingressd sent / supervisor built / "
         "last worker", "%s / %s / %s" % (ms(fig.get("to_ingressd_ms_p50")),
                                          ms(fig.get("to_supervisor_ms_p50")),
                                          ms(fig.get("from_return_ms_p50")))),
        ("the first change after the full set: ingressd sent / supervisor built / last worker",
         "%s / %s / %s" % tuple(ms(fig.get("first_change", {}).get(k)) for k in (
             "to_ingressd_ms", "to_supervisor_ms", "from_return_ms"))),
        ("ingressd translation per change, median", ms(fig.get("change_translate_ms_p50"))),
        ("table build per change (sws_shm_publish), median", ms(fig.get("change_build_ms_p50"))),
        ("full set: ingressd translation (%s members)" % fig.get("members"),
         ms(fig.get("full_translate_ms"))),
        ("full set: table build (sws_shm_publish)", ms(fig.get("full_build_ms"))),
        ("full set: snapshot applied (merge, check, build)", ms(fig.get("full_apply_ms"))),
        ("ingressd start → full set in every worker", ms(fig.get("start_to_served_ms"), 0)),
        ("ingressd RSS / peak", "%s / %s" % (mib(fig.get("ingressd_rss_kib")),
                                             mib(fig.get("ingressd_hwm_kib")))),
        ("supervisor RSS / peak", "%s / %s" % (mib(fig.get("supervisor_rss_kib")),
                                               mib(fig.get("supervisor_hwm_kib")))),
        ("worker 0 RSS / peak", "%s / %s" % (mib(fig.get("worker0_rss_kib")),
                                             mib(fig.get("worker0_hwm_kib")))),
        ("fake API server RSS (Python, not ours)", mib(fig.get("fake_apiserver_rss_kib"))),
    ]
    lines += ["| %s | %s |" % r for r in rows]
    lines += ["", targets.ingress_line(fig)]
    if fig["error"]:
        lines += ["", "**Failed:** " + fig["error"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ingresses", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=100000)
    ap.add_argument("--changes", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--table-size", default="64m", help="scalwsd's server.table_size")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", help="results directory (default bench/results/<time>-ingress)")
    ap.add_argument("--timeout", type=float, default=300, help="bound of each wait, seconds")
    ap.add_argument("--seed", type=int, default=1, help="which EndpointSlices change")
    args = ap.parse_args()
    if args.ingresses < 1 or args.endpoints < args.ingresses or args.changes < 0:
        ap.error("at least one Ingress, an endpoint per Ingress, no negative changes")
    for binary in ("scalwsd", "ingressd"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            ap.error("no %s/%s: build it (make -j2) or give --build" % (args.build, binary))
    out = args.out or os.path.join(BENCH, "results", time.strftime("%Y%m%d-%H%M%S") + "-ingress")
    os.makedirs(out, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg_before": open("/proc/loadavg").read().split()[0],
            "git": subprocess.run(["git", "--no-optional-locks", "-C", ROOT, "describe", "--always",
                                   "--dirty"], capture_output=True, text=True).stdout.strip(),
            "ncpu": os.cpu_count(), "args": vars(args)}
    fig = run(args, out)
    meta["loadavg_after"] = open("/proc/loadavg").read().split()[0]
    with open(os.path.join(out, "meta.txt"), "w") as f:
        f.write("".join("%s=%s\n" % kv for kv in meta.items()))
    text = summary(fig, meta)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    sys.stderr.write("ingressbench: results in %s\n" % out)
    return 1 if fig["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
