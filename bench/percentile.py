"""The one percentile of the benchmark drivers (h2bench.py, tlsresume.py,
fixedrate.py, ingressbench.py): the nearest rank, wrk's definition, so
that every BENCH line's p50_us..p999_us mean the same thing whoever
measured them."""

import math


def percentile(sorted_values, p):
    """The nearest-rank p-th percentile (0 < p <= 100) of an ascending
    list; 0 for an empty one. At p99.9 of fewer than 1000 values, the
    largest."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]
