"""ingressd's command line: --help, a bad flag, and --from-dir DIR --print
on conf/ingressd/example.json (what an operator runs to look at a
translation without a cluster)."""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BUILD_DIR, ROOT, SANITIZER_PATTERNS, TIMEOUT

EXAMPLE_DIR = os.path.join(ROOT, "conf", "ingressd")


class IngressdCli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scalws-ingressd-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_ingressd(self, *args):
        p = subprocess.run([os.path.abspath(os.path.join(BUILD_DIR, "ingressd"))] + list(args),
                           capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                           cwd=self.dir)
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        for pat in SANITIZER_PATTERNS:
            self.assertNotIn(pat, out + err)
        return p.returncode, out, err

    def test_help_names_the_agreed_flags(self):
        code, out, _ = self.run_ingressd("--help")
        self.assertEqual(code, 0)
        for flag in ("--kubeconfig FILE", "--namespace NS", "--ingress-class NAME",
                     "--publish ENDPOINT", "--health HOST:PORT", "--from-dir DIR", "--print"):
            self.assertIn(flag, out)

    def test_bad_flag_is_one_line_and_exit_2(self):
        code, out, err = self.run_ingressd("--health", "no-port")
        self.assertEqual(code, 2)
        self.assertIn('ingressd: --health: expected HOST:PORT, got "no-port"', err)
        self.assertEqual(out, "")

    def test_example_translates_and_passes_the_check(self):
        code, out, err = self.run_ingressd("--from-dir", EXAMPLE_DIR, "--print")
        self.assertEqual(code, 0, out + err)
        self.assertIn("2 Ingresses of class scalws", out)
        # Prefix /api: a prefix /api/ and an exact /api (ADR 0038); the port by name.
        self.assertIn("prefix /api/ -> shop_api_80", out)
        self.assertIn("exact  /api -> shop_api_80", out)
        self.assertIn("prefix /api/admin/ -> shop_api_9000", out)
        self.assertIn("pool shop_web_80: 10.244.1.7:8080 up, 10.244.2.9:8080 draining", out)
        self.assertIn("check: ok", out)
        # The younger Ingress's /api/ is the older one's /api: left out, logged.
        self.assertIn("Ingress shop/legacy: spec.rules[0].http.paths[0] left out", err)

    def test_file_that_is_not_json_is_named(self):
        with open(os.path.join(self.dir, "objs.json"), "w") as f:
            f.write('{"kind": "Service",\n  "metadata": }\n')
        code, out, err = self.run_ingressd("--from-dir", self.dir, "--print")
        self.assertEqual(code, 1)
        self.assertIn(os.path.join(self.dir, "objs.json") + ":2:", err)
        self.assertNotIn("check: ok", out)


if __name__ == "__main__":
    unittest.main()
