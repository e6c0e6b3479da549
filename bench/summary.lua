-- wrk script of bench/run.sh: only done(), so wrk's per-request path stays
-- the built-in one (no Lua per request). Prints one machine-readable line;
-- latencies in microseconds, errors.status counts non-2xx/3xx responses.
function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d timeout=%d status=%d " ..
      "p50_us=%d p90_us=%d p99_us=%d p999_us=%d max_us=%d mean_us=%.1f\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.timeout, e.status,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
      latency.max, latency.mean))
end
