#!/usr/bin/env bash
# Run every test: the cmocka unit tests (one binary per source file), then
# the integration tests that start the real scalwsd (test/integration/).
# Ends with one "N passed, N failed" line; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
passed=0
failed=0
failed_names=()

# cmocka prints its summary on stderr; keep a log per binary and show it
# only when the binary fails.
mkdir -p "$BUILD/test-logs"
ran=0
for t in "$BUILD"/test/test_*; do
    [ -x "$t" ] || continue
    ran=$((ran + 1))
    name=$(basename "$t")
    log="$BUILD/test-logs/$name.log"
    if timeout 300 "$t" >"$log" 2>&1; then
        # A binary may run several groups: add up every group's count.
        n=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s += $1} END {print s}')
        passed=$((passed + ${n:-1}))
        echo "unit $name: ${n:-1} passed"
    else
        n=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s += $1} END {print s}')
        failed=$((failed + ${n:-1}))
        failed_names+=("$name")
        echo "unit $name: FAILED"
        cat "$log"
    fi
done

# No binaries means the unit tests were not built: a failure, not a pass
# with nothing counted.
if [ "$ran" -eq 0 ]; then
    echo "unit: FAILED no test binaries in $BUILD/test (build them first: make -j2)"
    failed=$((failed + 1))
    failed_names+=("unit (not built)")
fi

# Integration tests: Debian's python3 (stdlib only), against the real binary.
summary="$BUILD/test-logs/integration.summary"
rm -f "$summary"
if /usr/bin/python3 test/integration/run.py --build "$BUILD" --summary "$summary"; then :; fi
if [ -f "$summary" ]; then
    read -r ip if_ <"$summary"
    passed=$((passed + ip))
    failed=$((failed + if_))
    [ "$if_" -gt 0 ] && failed_names+=("integration")
else
    failed=$((failed + 1))
    failed_names+=("integration (runner crashed)")
fi

[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
