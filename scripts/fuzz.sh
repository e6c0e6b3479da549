#!/bin/bash
# Run libFuzzer targets, FUZZ_JOBS at a time (default: the CPUs, at most
# 2), each for FUZZ_SECONDS:
#
#   FUZZ_SECONDS=60 scripts/fuzz.sh build/fuzz/fuzz_NAME...
#
# Target fuzz_NAME starts from its committed seed corpus test/fuzz/corpus/NAME/
# (read only: the repository is never modified); what it finds goes to
# build/fuzz/corpus/NAME/, kept between runs so a later run starts further.
# A crash, a leak, a sanitizer report or an input that takes longer than
# FUZZ_TIMEOUT seconds fails the run: the input is saved as
# build/fuzz/artifacts/NAME/crash-* (or leak-*, timeout-*) and the log's
# tail printed. Replay one with: build/fuzz/fuzz_NAME /abs/FILE. Exits non-zero
# if any target failed; one summary line per target, in the order given.
#
# Why in parallel: each target is one single-threaded process, and CI runs
# every target (13 and growing) for a full minute: one at a time left a core
# idle and took as long as the two test suites together.
set -u
cd "$(dirname "$0")/.." || exit 1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
cpus=$(nproc 2>/dev/null || echo 1)
FUZZ_JOBS=${FUZZ_JOBS:-$((cpus < 2 ? cpus : 2))}

[ $# -gt 0 ] || { echo "fuzz: no targets (no test/fuzz/fuzz_*.c?)" >&2; exit 1; }

# One target; its summary goes to build/fuzz/logs/NAME.result (printed in
# order once all are done), its status is the exit code.
run_one() {
    local bin=$1 name=${1##*/fuzz_}
    # Absolute: a target may change its working directory (into /tmp).
    local seeds=$PWD/test/fuzz/corpus/$name
    local work=$PWD/build/fuzz/corpus/$name
    local artifacts=$PWD/build/fuzz/artifacts/$name
    local log=build/fuzz/logs/$name.log result=build/fuzz/logs/$name.result
    mkdir -p "$work" "$artifacts" build/fuzz/logs
    if [ ! -d "$seeds" ]; then
        echo "fuzz $name: FAILED no seed corpus $seeds/" >"$result"
        return 1
    fi
    # The first directory receives new inputs; the seeds are only read.
    # The outer timeout bounds a target that hangs outside an input.
    if timeout -k 10 $((FUZZ_SECONDS + 120)) "$bin" -max_total_time="$FUZZ_SECONDS" \
        -timeout="$FUZZ_TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$work" "$seeds" >"$log" 2>&1; then
        local runs cov
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "fuzz $name: ok, ${runs:-?} inputs in ${FUZZ_SECONDS}s, ${cov:-cov: ?}" >"$result"
        return 0
    fi
    {
        echo "fuzz $name: FAILED (log $log, inputs in $artifacts/)"
        grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$log" | head -n 20
        tail -n 30 "$log"
    } >"$result"
    return 1
}

declare -A pid_of
for bin in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do
        wait -n
    done
    run_one "$bin" &
    pid_of[$bin]=$!
done
failed=""
for bin in "$@"; do
    wait "${pid_of[$bin]}" || failed="$failed ${bin##*/fuzz_}"
    cat "build/fuzz/logs/${bin##*/fuzz_}.result"
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: $# targets ok"
