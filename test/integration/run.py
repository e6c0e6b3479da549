#!/usr/bin/python3
"""Run the integration tests against the real scalwsd.

    /usr/bin/python3 test/integration/run.py --build DIR --summary FILE [--filter SUBSTR]

DIR is build or build/sanitize (the binary is DIR/scalwsd). Prints one line
per test, then "integration: N passed, M failed"; writes "N M" into FILE;
exits 1 on any failure. A test that runs past its bound is reported, every
server still running is killed, and the run ends there (counted failed).
"""

import argparse
import os
import re
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
harness = None  # imported in main(), once SCALWS_BUILD is set: its bounds depend on it

# Per test: generous, only a guard against a hang (ASan is slower).
TEST_LIMIT = 120


def write_summary(path, passed, failed):
    if path:
        with open(path, "w") as f:
            f.write("%d %d\n" % (passed, failed))


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def short_name(test):
    # "test_http1.Http1.test_keepalive" -> "http1.Http1.keepalive"
    mod, cls, meth = test.id().rsplit(".", 2)
    return "%s.%s.%s" % (mod.replace("test_", "", 1), cls, meth.replace("test_", "", 1))


def reason(err):
    """The exception and its message (a few lines), and the test line that
    raised it."""
    lines = err.rstrip().splitlines()
    start = max((i for i, l in enumerate(lines) if l.startswith("Traceback")), default=-1)
    i = start + 1
    while i < len(lines) and lines[i].startswith(" "):
        i += 1
    where = ""
    for line in lines:
        m = re.match(r'\s*File "([^"]*/(test_\w+\.py))", line (\d+)', line)
        if m:
            where = " [%s:%s]" % (m.group(2), m.group(3))
    return (" | ".join(l.strip() for l in lines[i:i + 12]) or "?") + where


class Watchdog:
    """Ends the run if one test exceeds its bound: a hung test must not hang
    CI. Kills the servers still running, writes the summary, exits 1."""

    def __init__(self, summary):
        self.summary = summary
        self.timer = None
        self.passed = 0
        self.failed = 0

    def arm(self, name, limit):
        self.timer = threading.Timer(limit, self.fire, args=(name, limit))
        self.timer.daemon = True
        self.timer.start()

    def disarm(self):
        if self.timer:
            self.timer.cancel()

    def fire(self, name, limit):
        for srv in list(harness.LIVE_SERVERS):
            srv.kill()
        print("%s: FAIL still running after %ds; run aborted" % (name, limit), flush=True)
        print("integration: %d passed, %d failed" % (self.passed, self.failed + 1), flush=True)
        write_summary(self.summary, self.passed, self.failed + 1)
        os._exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--summary")
    ap.add_argument("--filter", action="append", default=[],
                    help="run only tests whose name contains SUBSTR (repeatable)")
    args = ap.parse_args()

    global harness
    os.environ["SCALWS_BUILD"] = args.build
    import harness
    if not os.access(harness.binary(), os.X_OK):
        print("integration: FAIL %s is missing" % harness.binary())
        print("integration: 0 passed, 1 failed")
        write_summary(args.summary, 0, 1)
        return 1

    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    tests = [t for t in flatten(suite)
             if not args.filter or any(f in t.id() or f in short_name(t) for f in args.filter)]
    # A module that fails to import shows up as a failing test too.
    dog = Watchdog(args.summary)
    limit = harness.scale(TEST_LIMIT)
    started = time.monotonic()
    for test in tests:
        name = short_name(test)
        result = unittest.TestResult()
        t0 = time.monotonic()
        dog.arm(name, limit)
        test.run(result)
        dog.disarm()
        took = time.monotonic() - t0
        problems = result.failures + result.errors + \
            [(t, "unexpected success") for t in result.unexpectedSuccesses]
        if problems:
            dog.failed += 1
            print("%s: FAIL (%.1fs) %s" % (name, took, reason(problems[0][1])), flush=True)
            if os.environ.get("SCALWS_IT_VERBOSE"):
                print(problems[0][1], flush=True)
        elif result.skipped:
            print("%s: skipped (%s)" % (name, result.skipped[0][1]), flush=True)
        else:
            dog.passed += 1
            print("%s: ok (%.1fs)" % (name, took), flush=True)
    print("integration: took %.0fs" % (time.monotonic() - started))
    print("integration: %d passed, %d failed" % (dog.passed, dog.failed), flush=True)
    write_summary(args.summary, dog.passed, dog.failed)
    return 1 if dog.failed else 0


if __name__ == "__main__":
    sys.exit(main())
