"""bench/ingressbench.py (bench/run.sh ingress) in small: 100 Ingresses,
1,000 endpoints, 5 endpoint changes through the fake API server, ingressd
and scalwsd, so that CI sees the driver still works against the stack.
Its figures are checked for presence and coherence, never for speed."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BUILD_DIR, ROOT, scale

DRIVER = os.path.join(ROOT, "bench", "ingressbench.py")


class IngressBenchSmoke(unittest.TestCase):
    def setUp(self):
        self.out = tempfile.mkdtemp(prefix="scalws-ingressbench-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def run_driver(self, *extra):
        bound = scale(60)
        p = subprocess.run(
            ["/usr/bin/python3", DRIVER, "--ingresses", "100", "--endpoints", "1000",
             "--changes", "5", "--build", BUILD_DIR, "--out", self.out,
             "--timeout", str(bound)] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=4 * bound)
        with open(os.path.join(self.out, "figures.json")) as f:
            return p, json.load(f)

    def test_small_scenario_measures_every_change(self):
        p, fig = self.run_driver()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIsNone(fig["error"])
        self.assertEqual(fig["changes_done"], 5)
        self.assertEqual(fig["members"], 1000)
        with open(os.path.join(self.out, "changes.csv")) as f:
            rows = f.read().splitlines()
        self.assertEqual(len(rows), 1 + 5, rows)
        gens = [int(r.split(",")[1]) for r in rows[1:]]
        self.assertEqual(gens, sorted(set(gens)), "each change its own, newer generation")
        # Coherent, not fast: a change cannot reach the workers before its
        # call was sent, and every figure the summary names is there.
        self.assertGreater(fig["from_send_ms_p50"], 0)
        # The phases are this change's lines, not an earlier change's:
        # ingressd's and the supervisor's came after the call was sent.
        header = rows[0].split(",")
        for r in rows[1:]:
            row = dict(zip(header, (float(v) for v in r.split(","))))
            self.assertGreater(row["to_ingressd_ms"] + row["api_call_ms"], 0, row)
            self.assertGreater(row["to_supervisor_ms"] + row["api_call_ms"], 0, row)
        self.assertEqual(fig["first_change"]["from_return_ms"],
                         float(rows[1].split(",")[header.index("from_return_ms")]))
        for key in ("full_build_ms", "full_apply_ms", "full_translate_ms", "start_to_served_ms",
                    "ingressd_hwm_kib", "supervisor_hwm_kib", "worker0_hwm_kib",
                    "change_translate_ms_p50", "change_build_ms_p50"):
            self.assertIsNotNone(fig[key], key)
        self.assertIn("**Issue 10 targets** (ingress): p99 endpoint change", p.stdout)
        self.assertIn("full table build", p.stdout)

    def test_refused_routes_fail_the_run_with_the_reason(self):
        # A table too small for the set: scalwsd refuses the snapshot, and
        # the driver says so instead of waiting or reporting figures.
        p, fig = self.run_driver("--table-size", "64k")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("refused", fig["error"])
        self.assertEqual(fig["changes_done"], 0)
        self.assertIn("**Failed:** scalwsd refused", p.stdout)


if __name__ == "__main__":
    unittest.main()
