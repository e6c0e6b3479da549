#!/usr/bin/python3
"""h2load for bench/run.sh's tls-h2 scenario, with wrk's BENCH line.

    h2bench.py URL CONNECTIONS STREAMS SECONDS

Runs `h2load -c CONNECTIONS -m STREAMS -D SECONDS` (one thread, TLS with
ALPN h2) with a per-request log, and prints the one line run.sh reads from
every load client:

    BENCH requests=N duration_us=N bytes=N connect=N read=N write=N
          timeout=N status=N p50_us=N p90_us=N p99_us=N p999_us=N max_us=N
          mean_us=N

requests are h2load's succeeded ones; connect, read and write are its
failed and errored requests (h2load does not tell them apart: both go in
connect and read, so run.sh fails on either); status counts 4xx and 5xx
answers; bytes is h2load's total traffic (HPACK-compressed heads: not
comparable with an HTTP/1 size, so run.sh does not check it for tls-h2).
Latencies come from h2load's --log-file (a request's duration in
microseconds, from its HEADERS out to its last byte in). Exits non-zero
when h2load fails or prints nothing to read.
"""
import os
import re
import subprocess
import sys
import tempfile

from percentile import percentile


def field(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if m is None:
        sys.exit(f"h2bench: no {what} in h2load's output:\n{text}")
    return m


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    url, conns, streams, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with tempfile.TemporaryDirectory(prefix="h2bench.") as tmp:
        log = os.path.join(tmp, "requests.log")
        proc = subprocess.run(["h2load", "-t", "1", "-c", str(conns), "-m", str(streams),
                               "-D", str(secs), "--log-file", log, url],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=secs + 60)
        out = proc.stdout
        sys.stdout.write(out)
        if proc.returncode != 0:
            sys.exit(f"h2bench: h2load exited with {proc.returncode}")
        durations = []
        with open(log) as f:
            for line in f:
                parts = line.split("\t")
                if len(parts) >= 3:
                    durations.append(int(parts[2]))
    durations.sort()
    fin = field(r"^finished in ([0-9.]+)(m?s)", out, "duration")
    duration_us = int(float(fin.group(1)) * (1e3 if fin.group(2) == "ms" else 1e6))
    req = field(r"^requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", out,
                "request counts")
    succeeded, failed, errored, timeout = (int(req.group(i)) for i in range(1, 5))
    codes = field(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out, "status codes")
    bad_status = int(codes.group(3)) + int(codes.group(4))
    traffic = field(r"^traffic: .*?\((\d+)\) total", out, "traffic")
    mean = sum(durations) / len(durations) if durations else 0.0
    print(f"BENCH requests={succeeded} duration_us={duration_us} bytes={traffic.group(1)} "
          f"connect={failed} read={errored} write=0 timeout={timeout} status={bad_status} "
          f"p50_us={percentile(durations, 50)} p90_us={percentile(durations, 90)} "
          f"p99_us={percentile(durations, 99)} p999_us={percentile(durations, 99.9)} "
          f"max_us={durations[-1] if durations else 0} mean_us={mean:.1f}")


if __name__ == "__main__":
    main()
