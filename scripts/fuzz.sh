#!/bin/sh
# Run libFuzzer targets, one after the other, each for FUZZ_SECONDS:
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
# if any target failed; one summary line per target.
set -u
cd "$(dirname "$0")/.." || exit 1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}

[ $# -gt 0 ] || { echo "fuzz: no targets (no test/fuzz/fuzz_*.c?)" >&2; exit 1; }

failed=""
for bin in "$@"; do
    name=${bin##*/fuzz_}
    # Absolute: a target may change its working directory (into /tmp).
    seeds=$PWD/test/fuzz/corpus/$name
    work=$PWD/build/fuzz/corpus/$name
    artifacts=$PWD/build/fuzz/artifacts/$name
    log=build/fuzz/logs/$name.log
    mkdir -p "$work" "$artifacts" build/fuzz/logs
    if [ ! -d "$seeds" ]; then
        echo "fuzz $name: FAILED no seed corpus $seeds/"
        failed="$failed $name"
        continue
    fi
    # The first directory receives new inputs; the seeds are only read.
    # The outer timeout bounds a target that hangs outside an input.
    if timeout -k 10 $((FUZZ_SECONDS + 120)) "$bin" -max_total_time="$FUZZ_SECONDS" \
        -timeout="$FUZZ_TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$work" "$seeds" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "fuzz $name: ok, ${runs:-?} inputs in ${FUZZ_SECONDS}s, ${cov:-cov: ?}"
    else
        echo "fuzz $name: FAILED (log $log, inputs in $artifacts/)"
        grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$log" | head -n 20
        tail -n 30 "$log"
        failed="$failed $name"
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: $# targets ok"
