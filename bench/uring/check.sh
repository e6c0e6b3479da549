#!/bin/sh
# bench/uring/check.sh: that build/bench/relay relays correctly, in each I/O
# mode: through it to the bench's nginx backend, a 13-byte answer (curl), a
# 100 KiB and a 20 MB file compared byte for byte (one read at 20 MB/s: short
# writes and, in uring mode, the provided buffers running out; three at
# once), a 20 MB upload the backend refuses (its close passed on), and
# 20,000 keep-alive requests with h2load --h1 -c16 (0 failed); the modes:
# epoll, uring, uring with single-shot receives, uring woken for 4
# completions (--wait 4). Counts, no timings. Needs nginx, curl, h2load
# (scripts/deps.sh bench).
#
#     make -C bench/uring && bench/uring/check.sh
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RELAY=$ROOT/build/bench/relay
BPORT=${BPORT:-18181}
PORT=${PORT:-18190}
T=$(mktemp -d /tmp/relay-check.XXXXXX)
chmod 755 "$T"
sed -e "s#@BACKEND_PORT@#$BPORT#; s#@DOCROOT@#$T#; s#@TMP@#$T#" \
    "$ROOT/bench/conf/backend-nginx.conf.in" >"$T/backend.conf"
# the 20 MB file beside the scenario's 100k
sed -i "s#location = /100k {#location = /big { root $T; }\n        location = /100k {#" "$T/backend.conf"
head -c 102400 /dev/urandom >"$T/100k"
head -c 20000000 /dev/urandom >"$T/big"
chmod 644 "$T/100k" "$T/big"
nginx -p "$T/" -c "$T/backend.conf" &
NGINX=$!
RP=
cleanup() {
    [ -n "$RP" ] && kill "$RP" 2>/dev/null || true
    kill -QUIT "$NGINX" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$T"
}
trap cleanup EXIT
sleep 0.5
fail=0
check() { # what, command...
    what=$1
    shift
    if "$@"; then echo "  ok   $what"; else echo "  FAIL $what"; fail=1; fi
}
for mode in "epoll" "uring" "uring --recv single" "uring --wait 4"; do
    echo "== --io $mode"
    # shellcheck disable=SC2086
    "$RELAY" --port "$PORT" --backend-port "$BPORT" --io $mode 2>"$T/relay.err" &
    RP=$!
    sleep 0.3
    URL=http://127.0.0.1:$PORT
    check "13 bytes" sh -c "[ \"\$(curl -s $URL/small)\" = 'hello, world' ]"
    check "100 KiB" sh -c "curl -s $URL/100k | cmp -s - $T/100k"
    check "20 MB read at 20 MB/s" sh -c "curl -s --limit-rate 20M $URL/big | cmp -s - $T/big"
    check "20 MB three at once" sh -c "for i in 1 2 3; do curl -s $URL/big -o $T/got\$i & done; wait;
        cmp -s $T/got1 $T/big && cmp -s $T/got2 $T/big && cmp -s $T/got3 $T/big"
    check "20 MB upload refused (413)" sh -c "[ \"\$(curl -s -X POST --data-binary @$T/big -o /dev/null \
        -w '%{http_code}' $URL/small)\" = 413 ]"
    check "20000 keep-alive requests, h2load -c16" sh -c "h2load --h1 -n 20000 -c16 -t1 $URL/small |
        grep -q '20000 succeeded, 0 failed'"
    kill -TERM "$RP"
    wait "$RP" || fail=1
    RP=
    sed 's/^/  /' "$T/relay.err"
    check "every connection closed" sh -c "grep -q 'connections \([0-9]*\) accepted \1 closed' $T/relay.err"
done
[ "$fail" -eq 0 ] && echo "relay check: all passed" || echo "relay check: FAILED"
exit "$fail"
