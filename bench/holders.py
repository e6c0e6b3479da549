#!/usr/bin/python3
"""bench/holders.py: which server process holds each connection to a port,
read from the outside (`ss -tnp`), and how many each worker holds.

A module of bench/run.sh, bench/accept_counts.py and the integration tests'
placement.py (it needs nothing but ss and /proc), and a command run.sh
starts beside each measured run of several workers:

    bench/holders.py PORT CONNECTIONS SECONDS PID...

It waits (polling, at most SECONDS) until CONNECTIONS established
connections to PORT are held by the PIDs, prints `open=` and the count of
each worker, in worker-slot order ("scalwsd: worker N"; the PIDs' order for
a server whose processes carry no such title), then looks once more
LAST_LOOK seconds before SECONDS have passed since its start and prints
`end=` the same way. Counts are joined with "/", e.g. `open=16/16/16/16`.
If the connections never all opened, `open=` holds the last look it took.
"""
import re
import subprocess
import sys
import time

SS_TIMEOUT = 10
# The end look comes this long before the load is due to end, so the
# client's connections are still open (capped at half the run).
LAST_LOOK = 0.5
# Between looks while the client opens its connections: a few ss calls on
# the load's CPU, then none until the end.
POLL = 0.02


def ss(*args):
    p = subprocess.run(["ss", "-H"] + list(args), capture_output=True, text=True,
                       timeout=SS_TIMEOUT)
    if p.returncode != 0:
        raise AssertionError("ss %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout.splitlines()


def addr_port(addr):
    return int(addr.rsplit(":", 1)[1])


def users_pids(users):
    """The pids of ss -p's users:((...)) column."""
    return [int(p) for p in re.findall(r"pid=(\d+)", users)]


def holders(port):
    """{client port: pid holding the server side, or None while it waits in
    an accept queue} for the established connections to port."""
    out = {}
    for line in ss("-tnp", "state", "established", "( sport = :%d )" % port):
        f = line.split(None, 4)
        pids = users_pids(f[4]) if len(f) > 4 else []
        out[addr_port(f[3])] = pids[0] if pids else None
    return out


def worker_slots(pids):
    """{pid: slot} from the workers' titles ("scalwsd: worker N")."""
    slots = {}
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                m = re.match(rb"scalwsd: worker (\d+)", f.read())
        except OSError:
            continue
        if m:
            slots[pid] = int(m.group(1))
    return slots


def held_per_worker(port, pids):
    """[connections to port held by each of pids], in slot order when every
    pid is a titled worker, else in the order given."""
    slots = worker_slots(pids)
    order = sorted(pids, key=slots.get) if len(slots) == len(pids) else list(pids)
    held = {p: 0 for p in pids}
    for pid in holders(port).values():
        if pid in held:
            held[pid] += 1
    return [held[p] for p in order]


def joined(counts):
    return "/".join(str(n) for n in counts)


def watch(port, connections, seconds, pids, out=sys.stdout):
    start = time.monotonic()
    end_at = start + max(seconds - LAST_LOOK, seconds / 2)
    counts = held_per_worker(port, pids)
    while sum(counts) < connections and time.monotonic() + POLL < end_at:
        time.sleep(POLL)
        counts = held_per_worker(port, pids)
    print("open=" + joined(counts), file=out, flush=True)
    time.sleep(max(0.0, end_at - time.monotonic()))
    print("end=" + joined(held_per_worker(port, pids)), file=out, flush=True)


def main(argv):
    if len(argv) < 5:
        print(__doc__.split("\n\n")[2].strip(), file=sys.stderr)
        return 2
    port, connections, seconds = int(argv[1]), int(argv[2]), float(argv[3])
    watch(port, connections, seconds, [int(p) for p in argv[4:]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
