#!/bin/bash
# The h2 proxy path, ScalWS beside HAProxy (issue 8), until bench/run.sh has
# a scenario for it: h2load (h2c) -> proxy -> nghttpd --no-tls serving 13
# bytes. The proxy (one worker / nbthread 1) on CPU 0, nghttpd and h2load
# on CPU 1; CPU per request from /proc/PID/stat clock ticks over N requests
# after a warm-up of 20,000. Usage: bench/h2proxy.sh [ROUNDS] (N=200000).
# Prints one line per server and round. Ports 18300-18302 on 127.0.0.1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-3}
N=${N:-200000}
DIR=$(mktemp -d)
NGHTTPD_PID=
cleanup() { [[ -n $NGHTTPD_PID ]] && kill "$NGHTTPD_PID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
for tool in h2load nghttpd haproxy; do
    command -v $tool >/dev/null || { echo "h2proxy.sh: $tool is not installed" >&2; exit 2; }
done
mkdir "$DIR/www" && printf 'hello, world\n' >"$DIR/www/small"
cat >"$DIR/scalws.yaml" <<YAML
server:
  listen: "127.0.0.1:18301"
  event_loops: 1
  keepalive_requests: 100000
  timeouts: {keepalive: 75s}
  logging: {level: warn, access_log: off}
pools:
  - name: backend
    protocol: h2
    keepalive: 32
    members: ["127.0.0.1:18300"]
hosts:
  - name: "*"
    routes:
      - path: /
        proxy: {pool: backend}
YAML
cat >"$DIR/haproxy.cfg" <<CFG
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 75s
    timeout http-keep-alive 75s
    timeout server 60s
frontend bench
    bind 127.0.0.1:18302 proto h2
    default_backend backend
backend backend
    server b1 127.0.0.1:18300 proto h2 pool-max-conn 32
CFG
taskset -c 1 nghttpd --no-tls --htdocs "$DIR/www" 18300 >"$DIR/nghttpd.log" 2>&1 &
NGHTTPD_PID=$!
TCK=$(getconf CLK_TCK)
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14+$15}' /proc/$p/stat))); done; echo $t; }
ready() { # $1 port: bounded wait for a 200
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null -w '%{http_code}' --http2-prior-knowledge "http://127.0.0.1:$1/small" 2>/dev/null | grep -q 200 && return 0
        sleep 0.1
    done
    echo "h2proxy.sh: nothing answers on port $1" >&2; return 1
}
round() { # $1 server
    local port pid
    case $1 in
    scalws) taskset -c 0 "$ROOT/build/scalwsd" -c "$DIR/scalws.yaml" >"$DIR/scalws.log" 2>&1 & pid=$!; port=18301 ;;
    haproxy) taskset -c 0 haproxy -db -f "$DIR/haproxy.cfg" >"$DIR/haproxy.log" 2>&1 & pid=$!; port=18302 ;;
    esac
    ready $port
    taskset -c 1 h2load -n 20000 -c 32 -m 10 "http://127.0.0.1:$port/small" >/dev/null
    local pids="$pid $(pgrep -P $pid | tr '\n' ' ')"
    local c0 c1 out
    c0=$(ticks $pids)
    out=$(taskset -c 1 h2load -n "$N" -c 32 -m 10 "http://127.0.0.1:$port/small")
    c1=$(ticks $pids)
    kill $pid; wait $pid 2>/dev/null || true
    echo "$out" | grep -q "requests: $N total, $N started, $N done, $N succeeded" ||
        { echo "h2proxy.sh: $1: not every request succeeded" >&2; echo "$out" >&2; return 1; }
    printf '%s req/s=%s cpu_us_per_req=%.2f\n' "$1" \
        "$(echo "$out" | awk '/^finished in/{print $4}')" \
        "$(echo "($c1 - $c0) * 1000000 / $TCK / $N" | bc -l)"
}
for r in $(seq "$ROUNDS"); do
    round scalws
    round haproxy
done
