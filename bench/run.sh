#!/usr/bin/env bash
# bench/run.sh SCENARIO: ScalWS and nginx side by side on this machine, or
# ScalWS under several accept policies (SERVERS="scalws:least-loaded
# scalws:shared ...", WORKERS, PIN=none, LOAD=rate; see bench/README.md), or
# ScalWS, nginx and HAProxy as reverse proxies in front of one nginx backend
# (the proxy scenarios: the backend on LOAD_CPU beside the load).
#
# By default each server runs with one worker, every server process on CPU
# 0; wrk (one thread) and this script run on CPU 1. Runs alternate (scalws, nginx, nginx,
# scalws, ...) so that drift of the machine falls on both alike. Each run
# starts the server afresh, checks the answer, warms up, measures, reads the
# server's own CPU time and peak RSS, and stops it. Any error response,
# socket error, wrong body or restarted process fails the whole run loudly.
#
# Raw figures go to bench/results/<timestamp>-<scenario>/; bench/report.py
# turns them into medians, ratios and a Markdown table. See bench/README.md.
set -Eeuo pipefail
# Nothing fails quietly: a failed command names itself.
trap 'echo "run.sh: FAIL: line $LINENO: \"$BASH_COMMAND\" exited with $?" >&2' ERR

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)
PY=/usr/bin/python3

RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-50}
H2_STREAMS=${H2_STREAMS:-10}
# Defaults that depend on the scenario are set once it is known.
SERVERS=${SERVERS:-}
SYSCALL_SECS=${SYSCALL_SECS:-}
RATE_CLIENT=${RATE_CLIENT:-}
# fail: a fixed-rate client that fell behind stops the run; mark: its run
# is kept with latencies marked not valid (openloop.c only; accept-policies).
LATE_CLIENT_GIVEN=${LATE_CLIENT:-}
LATE_CLIENT=${LATE_CLIENT:-fail}
SYSCALL_CONNECTIONS=16
BASELINE=${BASELINE:-}
WORKERS=${WORKERS:-1}
PIN=${PIN:-cpu}
LOAD=${LOAD:-closed}
# proxy-latency with no RATE given measures it: half of the baseline's maximum.
RATE_GIVEN=${RATE:+1}
RATE=${RATE:-2000}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SCALWSD=${SCALWSD:-$ROOT/build/scalwsd}
RELAY=${RELAY:-$ROOT/build/bench/relay}
NGINX=${NGINX:-/usr/sbin/nginx}
HAPROXY=${HAPROXY:-/usr/sbin/haproxy}
PERF=${PERF:-perf}
WRK=${WRK:-wrk}
START_TIMEOUT=${START_TIMEOUT:-10}
STOP_TIMEOUT=${STOP_TIMEOUT:-5}

usage() {
    cat <<EOF
usage: bench/run.sh SCENARIO          scenarios: respond, static-small,
                                      proxy, proxy-100k, proxy-latency,
                                      accept-policies (issue 9's procedure:
                                      four respond calls, see bench/README.md;
                                      PARTS="rate low-rate" runs only those),
                                      tls-h1, tls-h2, tls-newconn (the respond
                                      answer behind TLS, RSA 2048: wrk on kept
                                      connections, h2load with H2_STREAMS
                                      streams per connection, wrk with a new
                                      connection and full handshake per request),
                                      tls-resume (a new connection per request,
                                      resumed: bench/tlsresume.py),
                                      ingress [FLAGS] (10,000 Ingresses and
                                      100,000 endpoints through the fake API
                                      server, ingressd and scalwsd: bench/ingressbench.py)

Environment (shown with the values in force):
  RUNS=$RUNS  measured runs per server
  DURATION=$DURATION  seconds per measured run     WARMUP=$WARMUP  seconds of warm-up per run
  CONNECTIONS=$CONNECTIONS  wrk connections (h2load's in tls-h2)
  H2_STREAMS=$H2_STREAMS  concurrent streams per connection in tls-h2
  SERVERS=${SERVERS:-(respond, static-small: "scalws nginx")}  which servers (spaces or commas), in the order of the
      first round: nginx, scalws, or scalws:POLICY (an accept_policy: shared
      reuseport hash least-loaded fountain cpu; plain scalws is
      scalws:shared), and haproxy in the proxy scenarios (their default:
      "scalws nginx haproxy"); there also relay-epoll and relay-uring,
      bench/uring's experimental relay (no HTTP; make -C bench/uring)
  BASELINE=${BASELINE:-(nginx, else scalws:shared, else the first)}  ratios are SERVER/BASELINE
  WORKERS=$WORKERS  ScalWS event_loops (nginx: 1 only)
  PIN=$PIN  cpu: each ScalWS worker on one CPU (its own pinning); none: every
      worker may run on all of SERVER_CPU (run.sh widens it after start)
  LOAD=$LOAD  closed: wrk, CONNECTIONS keep-alive connections as fast as it
      can; rate: bench/fixedrate.py, RATE=$RATE requests/s over CONNECTIONS
      (proxy-latency: always rate; without RATE, half of the baseline's
      maximum, measured first with wrk)
  RATE_CLIENT=${RATE_CLIENT:-(proxy-latency: c; others: python)}  the fixed-rate client: python
      (bench/fixedrate.py) or c (bench/openloop.c, compiled here; the same
      contract, for rates Python cannot keep)
  LATE_CLIENT=$LATE_CLIENT  fail: a run whose fixed-rate client fell more than 10 ms behind
      stops the call; mark (openloop.c; accept-policies' default): the run
      is kept, its latencies marked not valid (runs.csv latency_valid=0)
      and left out of the targets, its CPU and requests/s kept
  SYSCALL_SECS=${SYSCALL_SECS:-(proxy, proxy-100k: 3; others: 0)}  after each measured run,
      seconds of wrk -t1 -c$SYSCALL_CONNECTIONS under perf stat counting the
      system calls of the server's workers (0: none)
  SERVER_CPU=$SERVER_CPU  LOAD_CPU=$LOAD_CPU  CPUs for the servers (a list: 0,1 or 0-1) and for the load
  SCALWSD=$SCALWSD  RELAY=$RELAY
  NGINX=$NGINX  HAPROXY=$HAPROXY  WRK=$WRK  PERF=$PERF
  OUT=bench/results/<timestamp>-SCENARIO  where results go
EOF
}

die() {
    echo "run.sh: FAIL: $*" >&2
    exit 1
}

log() {
    echo "run.sh: $*" >&2
}

is_uint() {
    [[ $1 =~ ^[0-9]+$ ]]
}

# ---------------------------------------------------------------- arguments

case ${1:-} in
    -h|--help) usage; exit 0 ;;
    respond|static-small|proxy|proxy-100k|proxy-latency|accept-policies|tls-h1|tls-h2|tls-newconn|tls-resume) SCENARIO=$1 ;;
    # Issue 10's ingress controller at scale: no server beside it, its own
    # driver (bench/ingressbench.py --help for its flags).
    ingress) shift; exec "$PY" "$BENCH/ingressbench.py" "$@" ;;
    '') usage >&2; exit 2 ;;
    *) echo "run.sh: unknown scenario '$1'" >&2; usage >&2; exit 2 ;;
esac
# ---------------------------------------------------------------- accept-policies

# Issue 9's "What it must show" 3 in one call: four calls of this script
# (each its own results directory and summary under OUT), then the targets
# over all four (report.py --accept-policies). 4 workers unpinned on CPUs
# 0-1, the load on CPU 1 beside them; ratios against scalws:shared.
#   closed-64  wrk, 64 connections: least-loaded, shared, reuseport
#   closed-8   wrk, 8 connections (few long-lived ones): the same three
#   rate       RATE (5000) requests/s over 64 connections: the same three
#   low-rate   LOW_RATE (2000) requests/s for LOW_DURATION (30) s: fountain
#              and shared, for their CPU (bench/README.md says why so long)
# RUNS, DURATION, WARMUP apply to every part (LOW_DURATION replaces
# DURATION in low-rate); the fixed-rate parts use openloop.c. PARTS names
# the parts to run (all four by default), e.g. PARTS="rate low-rate".
if [[ $SCENARIO == accept-policies ]]; then
    ALL_PARTS="closed-64 closed-8 rate low-rate"
    PARTS=${PARTS:-$ALL_PARTS}
    PARTS=${PARTS//,/ }
    for p in $PARTS; do
        [[ " $ALL_PARTS " == *" $p "* ]] || die "PARTS: unknown part '$p' (the parts: $ALL_PARTS)"
    done
    [[ -n ${PARTS// /} ]] || die "PARTS names no part (the parts: $ALL_PARTS)"
    LOW_RATE=${LOW_RATE:-2000}
    LOW_DURATION=${LOW_DURATION:-30}
    AP_RATE=$RATE
    [[ -n $RATE_GIVEN ]] || AP_RATE=5000
    for v in RUNS DURATION WARMUP AP_RATE LOW_RATE LOW_DURATION; do
        is_uint "${!v}" || die "${v#AP_} must be a whole number, not '${!v}'"
    done
    ((RUNS >= 1 && DURATION >= 1 && AP_RATE >= 1 && LOW_RATE >= 1 && LOW_DURATION >= 1)) ||
        die "RUNS, DURATION, RATE, LOW_RATE and LOW_DURATION must be at least 1"
    [[ -x $SCALWSD ]] || die "no $SCALWSD: build it (make -j2) or set SCALWSD"
    OUT=${OUT:-$BENCH/results/$(date +%Y%m%d-%H%M%S)-accept-policies}
    mkdir -p "$OUT"
    THREE="scalws:least-loaded scalws:shared scalws:reuseport"
    ap_part() {  # ap_part NAME VAR=VALUE...: one call of this script, if PARTS names it
        local name=$1
        shift
        [[ " $PARTS " == *" $name "* ]] || return 0
        log "accept-policies: part $name ($*)"
        env WORKERS=4 PIN=none SERVER_CPU=0-1 LOAD_CPU=1 RUNS="$RUNS" WARMUP="$WARMUP" \
            BASELINE=scalws:shared RATE_CLIENT=c LATE_CLIENT="${LATE_CLIENT_GIVEN:-mark}" SYSCALL_SECS=0 SCALWSD="$SCALWSD" WRK="$WRK" \
            "$@" OUT="$OUT/$name" bash "${BASH_SOURCE[0]}" respond >"$OUT/$name.md" ||
            die "accept-policies: part $name failed; see $OUT/$name"
    }
    ap_part closed-64 SERVERS="$THREE" LOAD=closed CONNECTIONS=64 DURATION="$DURATION"
    ap_part closed-8 SERVERS="$THREE" LOAD=closed CONNECTIONS=8 DURATION="$DURATION"
    ap_part rate SERVERS="$THREE" LOAD=rate RATE="$AP_RATE" CONNECTIONS=64 DURATION="$DURATION"
    ap_part low-rate SERVERS="scalws:fountain scalws:shared" LOAD=rate RATE="$LOW_RATE" CONNECTIONS=64 \
        DURATION="$LOW_DURATION"
    exec "$PY" "$BENCH/report.py" --accept-policies "$OUT"
fi

# The proxy scenarios put a backend on LOAD_CPU and a proxy in front of it.
# The TLS scenarios put the respond answer behind a TLS listener; HAProxy
# answers it itself there (http-request return).
PROXY=0
TLS=0
SCHEME=http
CURL_OPTS=()
case $SCENARIO in
    proxy*)
        PROXY=1
        SERVERS=${SERVERS:-scalws nginx haproxy}
        ;;
    tls-*)
        TLS=1
        SCHEME=https
        # Self-signed: the answer is checked, not the chain.
        CURL_OPTS=(-k)
        # curl would take h2 by ALPN: wrk speaks HTTP/1.1.
        [[ $SCENARIO == tls-h2 ]] && CURL_OPTS+=(--http2) || CURL_OPTS+=(--http1.1)
        # Each answer carries "Connection: close" then: curl must see the
        # same head wrk does for the size check.
        [[ $SCENARIO != tls-newconn && $SCENARIO != tls-resume ]] || CURL_OPTS+=(-H "Connection: close")
        SERVERS=${SERVERS:-scalws nginx haproxy}
        ;;
    *) SERVERS=${SERVERS:-scalws nginx} ;;
esac
case $SCENARIO in
    proxy|proxy-100k) SYSCALL_SECS=${SYSCALL_SECS:-3} ;;
    *) SYSCALL_SECS=${SYSCALL_SECS:-0} ;;
esac
# Half of nginx's maximum as a proxy is beyond fixedrate.py (bench/README.md).
if [[ $SCENARIO == proxy-latency ]]; then
    RATE_CLIENT=${RATE_CLIENT:-c}
else
    RATE_CLIENT=${RATE_CLIENT:-python}
fi
# proxy-latency is p50, p99, p99.9 at a fixed rate.
[[ $SCENARIO != proxy-latency ]] || LOAD=rate

# A CPU list as taskset and /proc/PID/status write it (0,2 or 0-1), as the
# sorted CPU numbers separated by spaces.
expand_cpus() {
    local part lo hi parts cpus=()
    IFS=, read -r -a parts <<<"$1"
    for part in "${parts[@]}"; do
        [[ $part =~ ^([0-9]+)(-([0-9]+))?$ ]] || return 1
        lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
        for ((; lo <= hi; lo++)); do cpus+=("$lo"); done
    done
    printf '%s\n' "${cpus[@]}" | sort -nu | tr '\n' ' ' | sed 's/ $//'
}

[[ $LATE_CLIENT == fail || $LATE_CLIENT == mark ]] || die "LATE_CLIENT must be fail or mark, not '$LATE_CLIENT'"
for v in RUNS DURATION WARMUP CONNECTIONS WORKERS RATE LOAD_CPU START_TIMEOUT STOP_TIMEOUT SYSCALL_SECS; do
    is_uint "${!v}" || die "$v must be a whole number, not '${!v}'"
done
((RUNS >= 1 && DURATION >= 1 && CONNECTIONS >= 1 && WORKERS >= 1 && RATE >= 1)) ||
    die "RUNS, DURATION, CONNECTIONS, WORKERS and RATE must be at least 1"
SERVER_CPUS=$(expand_cpus "$SERVER_CPU") || die "SERVER_CPU must be a CPU list (0, 0,1 or 0-1), not '$SERVER_CPU'"
for c in $SERVER_CPUS; do
    [[ -d /sys/devices/system/cpu/cpu$c ]] || die "no CPU $c on this machine"
done
# One server CPU: the load must stay off it. Several (PIN=none on a 2-core
# machine): the load shares them, as it would on a busy host; said in meta.
if [[ $SERVER_CPUS != *" "* ]]; then
    [[ $SERVER_CPUS != "$LOAD_CPU" ]] || die "SERVER_CPU and LOAD_CPU must differ"
fi
case $PIN in cpu|none) ;; *) die "PIN is cpu or none, not '$PIN'" ;; esac
case $LOAD in closed|rate) ;; *) die "LOAD is closed or rate, not '$LOAD'" ;; esac
# Settings first, tools after: a wrong setting is named even on a machine
# without the peers installed.
((TLS == 0)) || [[ $LOAD == closed ]] || die "the TLS scenarios have no fixed-rate client: LOAD=closed"
case $RATE_CLIENT in python|c) ;; *) die "RATE_CLIENT is python or c, not '$RATE_CLIENT'" ;; esac
read -r -a SERVER_LIST <<<"${SERVERS//,/ }"
for s in "${SERVER_LIST[@]}"; do
    case $s in
        scalws|scalws:shared|scalws:reuseport|scalws:hash|scalws:least-loaded|scalws:fountain|scalws:cpu)
            [[ -x $SCALWSD ]] || die "no $SCALWSD: build it (make -j2) or set SCALWSD, or SERVERS=nginx" ;;
        nginx)
            [[ -x $NGINX ]] || die "no $NGINX: apt-get install nginx-light, or set NGINX"
            ((WORKERS == 1)) || die "nginx.conf.in has one worker: WORKERS=$WORKERS is for ScalWS policies only" ;;
        haproxy)
            ((PROXY || TLS)) || die "haproxy serves no files: it is in the proxy and TLS scenarios only"
            [[ -x $HAPROXY ]] || die "no $HAPROXY: scripts/deps.sh bench (Debian's haproxy), or set HAPROXY"
            ((WORKERS == 1)) || die "haproxy.cfg.in has one thread: WORKERS=$WORKERS is for ScalWS policies only" ;;
        relay-epoll|relay-uring)
            ((PROXY)) || die "$s relays to a backend: it is in the proxy scenarios only"
            [[ -x $RELAY ]] || die "no $RELAY: make -C bench/uring (scripts/deps.sh bench), or set RELAY"
            ((WORKERS == 1)) || die "$s is one thread: WORKERS=$WORKERS is for ScalWS policies only" ;;
        *) die "unknown server '$s' in SERVERS (known: nginx, scalws, scalws:POLICY, haproxy, relay-epoll, relay-uring)" ;;
    esac
done
# The backend of the proxy scenarios is nginx, whatever SERVERS says.
((PROXY == 0)) || [[ -x $NGINX ]] || die "no $NGINX for the backend: apt-get install nginx-light, or set NGINX"
((${#SERVER_LIST[@]} >= 1 && ${#SERVER_LIST[@]} <= 6)) || die "SERVERS names one to six servers"
if [[ -z $BASELINE ]]; then
    BASELINE=${SERVER_LIST[0]}
    for s in "${SERVER_LIST[@]}"; do [[ $s != scalws:shared ]] || BASELINE=$s; done
    for s in "${SERVER_LIST[@]}"; do [[ $s != nginx ]] || BASELINE=$s; done
fi
[[ " ${SERVER_LIST[*]} " == *" $BASELINE "* ]] || die "BASELINE $BASELINE is not in SERVERS"
if [[ $LOAD == closed ]] || ((SYSCALL_SECS > 0)) || [[ $SCENARIO == proxy-latency && -z $RATE_GIVEN ]]; then
    command -v "$WRK" >/dev/null || die "no wrk: apt-get install wrk"
fi
if ((SYSCALL_SECS > 0)); then
    # Counting a tracepoint needs perf and, as root, nothing else.
    "$PERF" stat -e raw_syscalls:sys_enter -x, -o /dev/null true >/dev/null 2>&1 ||
        die "'$PERF stat -e raw_syscalls:sys_enter true' fails: scripts/deps.sh bench (linux-perf), run as root, or SYSCALL_SECS=0"
fi
command -v curl >/dev/null || die "no curl: apt-get install curl"
if ((TLS)); then
    command -v openssl >/dev/null || die "no openssl: apt-get install openssl"
    [[ $SCENARIO != tls-h2 ]] || command -v h2load >/dev/null || die "no h2load: apt-get install nghttp2-client"
    is_uint "$H2_STREAMS" && ((H2_STREAMS >= 1)) || die "H2_STREAMS must be at least 1, not '$H2_STREAMS'"
fi
[[ -d /sys/devices/system/cpu/cpu$LOAD_CPU ]] || die "no CPU $LOAD_CPU on this machine"

CLK_TCK=$(getconf CLK_TCK)
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-$BENCH/results/$STAMP-$SCENARIO$([[ $LOAD == closed ]] || echo "-$LOAD")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# This script and everything it starts without saying otherwise (curl, wrk)
# stay off the servers' CPU.
taskset -pc "$LOAD_CPU" $$ >/dev/null || die "cannot pin myself to CPU $LOAD_CPU"

# ---------------------------------------------------------------- cleanup

TMP=$(mktemp -d /tmp/scalws-bench.XXXXXX)
# nginx's worker runs as nobody and must reach the document root.
chmod 755 "$TMP"
SERVER_PID=     # the running server's main process, while one runs
SERVER_PIDS=()  # it and its children, as last seen
WRK_PID=        # timeout(1) running wrk, while it runs
WATCH_PID=      # bench/holders.py beside a measured run, while it runs
BACKEND_PID=    # the proxy scenarios' backend nginx, while it runs
BACKEND_PIDS=() # it and its worker

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # timeout passes the TERM on to wrk.
    [[ -z $WRK_PID ]] || kill -TERM "$WRK_PID" 2>/dev/null || true
    [[ -z $WATCH_PID ]] || kill -TERM "$WATCH_PID" 2>/dev/null || true
    stop_server || true
    stop_backend || true
    cp -p "$TMP"/*.log "$OUT"/ 2>/dev/null || true
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The C fixed-rate client, built for this call only (not part of scalwsd).
OPENLOOP=$TMP/openloop
if [[ $LOAD == rate && $RATE_CLIENT == c ]]; then
    cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$OPENLOOP" "$BENCH/openloop.c" 2>"$TMP/openloop-cc.log" ||
        die "cannot compile bench/openloop.c: $(head -3 "$TMP/openloop-cc.log")"
fi

# ---------------------------------------------------------------- scenario

# Sets URL_PATH and writes the body every server must answer to $TMP/expected.
setup_scenario() {
    local docroot=$TMP/docroot
    mkdir -p "$docroot/static"
    # A 1 KiB HTML file, the same bytes every time.
    local page=$docroot/static/index.html i
    {
        printf '<!DOCTYPE html>\n<html><head><title>ScalWS bench</title></head><body>\n'
        for i in $(seq 1 40); do printf '<p>static-small line %02d</p>\n' "$i"; done
    } >"$page"
    truncate -s 1023 "$page"
    printf '\n' >>"$page"
    chmod -R a+rX "$docroot"
    DOCROOT=$docroot

    case $SCENARIO in
        respond)
            URL_PATH=/
            printf 'hello, world\n' >"$TMP/expected"
            ;;
        static-small)
            URL_PATH=/static/index.html
            cp "$docroot/static/index.html" "$TMP/expected"
            ;;
        proxy|proxy-latency)
            # The backend's "location = /small".
            URL_PATH=/small
            printf 'hello, world\n' >"$TMP/expected"
            ;;
        tls-*)
            URL_PATH=/
            printf 'hello, world\n' >"$TMP/expected"
            # One RSA 2048 certificate for every server (HAProxy wants
            # the chain and the key in one file).
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
                -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
                -keyout "$TMP/bench.key" -out "$TMP/bench.crt" >"$TMP/openssl.log" 2>&1 ||
                die "openssl could not make the certificate: $(tail -1 "$TMP/openssl.log")"
            cat "$TMP/bench.crt" "$TMP/bench.key" >"$TMP/bench.pem"
            chmod a+r "$TMP/bench.crt" "$TMP/bench.key" "$TMP/bench.pem"
            ;;
        proxy-100k)
            # 102400 bytes of numbered lines, the same every time.
            seq -f 'proxy-100k line %06g' 1 4500 >"$docroot/100k"
            truncate -s 102400 "$docroot/100k"
            chmod a+r "$docroot/100k"
            URL_PATH=/100k
            cp "$docroot/100k" "$TMP/expected"
            ;;
    esac
}

# ---------------------------------------------------------------- servers

free_port() {
    "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

render() {  # render TEMPLATE OUTPUT PORT [POLICY]
    sed -e "s|@PORT@|$3|g" -e "s|@DOCROOT@|$DOCROOT|g" -e "s|@TMP@|$TMP|g" \
        -e "s|@WORKERS@|$WORKERS|g" -e "s|@POLICY@|${4:-shared}|g" \
        -e "s|@BACKEND_PORT@|${BACKEND_PORT:-}|g" "$1" >"$2"
}

# The configuration template of server kind $1 (nginx, scalws, haproxy) in
# this scenario: in the proxy scenarios each one proxies to the backend.
template() {
    if ((PROXY)); then
        case $1 in
            nginx) echo "$BENCH/conf/nginx-proxy.conf.in" ;;
            scalws) echo "$BENCH/conf/scalws-proxy.yaml.in" ;;
            haproxy) echo "$BENCH/conf/haproxy.cfg.in" ;;
        esac
    elif ((TLS)); then
        case $1 in
            nginx) echo "$BENCH/conf/nginx-tls.conf.in" ;;
            scalws) echo "$BENCH/conf/scalws-tls.yaml.in" ;;
            haproxy) echo "$BENCH/conf/haproxy-tls.cfg.in" ;;
        esac
    else
        case $1 in
            nginx) echo "$BENCH/conf/nginx.conf.in" ;;
            scalws) echo "$BENCH/conf/scalws.yaml.in" ;;
        esac
    fi
}

# A server's name in file names: scalws:least-loaded -> scalws-least-loaded.
tag() {
    echo "${1//:/-}"
}

# The accept policy of a ScalWS server: scalws is scalws:shared.
policy_of() {
    [[ $1 == *:* ]] && echo "${1#*:}" || echo shared
}

declare -A PORT
for s in "${SERVER_LIST[@]}"; do
    PORT[$s]=$(free_port)
done
BACKEND_PORT=
((PROXY == 0)) || BACKEND_PORT=$(free_port)

# Starts server $1 on the CPUs $SERVER_CPU in the background; sets SERVER_PID.
start_server() {
    local s=$1 port=${PORT[$1]}
    case $s in
        nginx)
            render "$(template nginx)" "$TMP/nginx.conf" "$port"
            taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP/" -c "$TMP/nginx.conf" \
                -e "$TMP/nginx-error.log" >>"$TMP/nginx-stderr.log" 2>&1 &
            ;;
        scalws*)
            render "$(template scalws)" "$TMP/$(tag "$s").yaml" "$port" "$(policy_of "$s")"
            taskset -c "$SERVER_CPU" "$SCALWSD" -c "$TMP/$(tag "$s").yaml" \
                >>"$TMP/$(tag "$s").log" 2>&1 &
            ;;
        haproxy)
            # -db: in the foreground, one process (no master), which
            # SIGTERM stops.
            render "$(template haproxy)" "$TMP/haproxy.cfg" "$port"
            taskset -c "$SERVER_CPU" "$HAPROXY" -db -f "$TMP/haproxy.cfg" >>"$TMP/haproxy.log" 2>&1 &
            ;;
        relay-*)
            # bench/uring/relay.c: one process, bytes relayed as they come.
            taskset -c "$SERVER_CPU" "$RELAY" --port "$port" --backend-port "$BACKEND_PORT" \
                --io "${s#relay-}" >>"$TMP/$s.log" 2>&1 &
            ;;
    esac
    SERVER_PID=$!
    SERVER_PIDS=("$SERVER_PID")
}

# Prints PID and all its descendants, one per line, parent first.
proc_tree() {
    local pid=$1 child
    echo "$pid"
    for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
        proc_tree "$child"
    done
}

# Waits (bounded) until the server answers on its port with a worker behind
# it; sets SERVER_PIDS.
wait_ready() {
    local s=$1 url="$SCHEME://127.0.0.1:${PORT[$1]}$URL_PATH" deadline=$((SECONDS + START_TIMEOUT)) answered why
    local nprocs=2
    case $s in
        nginx) ;;
        haproxy|relay-*) nprocs=1 ;;
        *) nprocs=$((WORKERS + 1)) ;;
    esac
    while :; do
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            if ((PROXY)) && [[ $s == scalws* ]] &&
                why=$(grep -m1 -e 'pools: unknown key' -e 'not built yet' "$TMP/$(tag "$s").log"); then
                die_no_proxy_action "it refused the configuration: ${why#*]: }"
            fi
            die "$s exited at start; see $OUT/*.log"
        fi
        answered=0
        if curl -s "${CURL_OPTS[@]}" -o /dev/null --max-time 1 "$url"; then
            answered=1
            mapfile -t SERVER_PIDS < <(proc_tree "$SERVER_PID")
            if ((${#SERVER_PIDS[@]} >= nprocs)); then
                [[ $s != scalws* ]] || check_policy "$s"
                [[ $PIN == cpu ]] || unpin "$s"
                return 0
            fi
        fi
        ((SECONDS < deadline)) || die "$s not ready after ${START_TIMEOUT}s:" \
            "$( ((answered)) && echo "answers $url but has no worker process" || echo "no answer on $url")"
        sleep 0.05
    done
}

# stop_procs MAIN PID...: SIGTERM to MAIN, then SIGKILL to whichever of the
# PIDs is still there after STOP_TIMEOUT.
stop_procs() {
    local main=$1 p deadline=$((SECONDS + STOP_TIMEOUT))
    shift
    kill -TERM "$main" 2>/dev/null || true
    while kill -0 "$main" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.05
    done
    for p in "$main" "$@"; do
        kill -0 "$p" 2>/dev/null || continue
        log "pid $p still there after ${STOP_TIMEOUT}s: SIGKILL"
        kill -KILL "$p" 2>/dev/null || true
    done
    wait "$main" 2>/dev/null || true
}

# Stops the running server, if any.
stop_server() {
    [[ -n $SERVER_PID ]] || return 0
    stop_procs "$SERVER_PID" "${SERVER_PIDS[@]}"
    SERVER_PID=
    SERVER_PIDS=()
}

# ---------------------------------------------------------------- backend

# The proxy scenarios' backend: nginx, one worker, on LOAD_CPU (the proxies
# have SERVER_CPU to themselves), started once for the whole call and
# checked before anything else; sets BACKEND_PIDS.
start_backend() {
    local url="http://127.0.0.1:$BACKEND_PORT$URL_PATH" deadline=$((SECONDS + START_TIMEOUT)) code
    render "$BENCH/conf/backend-nginx.conf.in" "$TMP/backend.conf" ""
    taskset -c "$LOAD_CPU" "$NGINX" -p "$TMP/" -c "$TMP/backend.conf" \
        -e "$TMP/backend-error.log" >>"$TMP/backend-stderr.log" 2>&1 &
    BACKEND_PID=$!
    while :; do
        kill -0 "$BACKEND_PID" 2>/dev/null || die "the backend nginx exited at start; see $OUT/backend*.log"
        code=$(curl -s -o "$TMP/body-backend" -w '%{http_code}' --max-time 1 "$url") || true
        if [[ $code == 200 ]]; then
            mapfile -t BACKEND_PIDS < <(proc_tree "$BACKEND_PID")
            ((${#BACKEND_PIDS[@]} < 2)) || break
        fi
        ((SECONDS < deadline)) || die "the backend nginx does not answer 200 on $url after ${START_TIMEOUT}s"
        sleep 0.05
    done
    cmp -s "$TMP/body-backend" "$TMP/expected" || die "the backend's body of $url differs from the expected one"
}

stop_backend() {
    [[ -n $BACKEND_PID ]] || return 0
    stop_procs "$BACKEND_PID" "${BACKEND_PIDS[@]}"
    BACKEND_PID=
    BACKEND_PIDS=()
}

# The backend must be the same processes throughout: its CPU time is
# reported per run.
check_backend() {
    local now
    now=$(proc_tree "$BACKEND_PID" | tr '\n' ' ')
    [[ $now == "${BACKEND_PIDS[*]} " ]] || die "the backend's processes changed: ${BACKEND_PIDS[*]} -> $now"
}

# A ScalWS without the proxy action refuses the configuration's pools or
# proxy route at start, or answers a proxy route 501: there is nothing to
# measure, and the message says what to do.
die_no_proxy_action() {
    die "this scalwsd has no proxy action yet ($1); build one that has, or measure the peers alone:" \
        "SERVERS=nginx,haproxy bench/run.sh $SCENARIO"
}

# A BPF policy that could not load falls back to reuseport and says so:
# that run would measure reuseport under another name.
check_policy() {
    local s=$1 log
    log=$TMP/$(tag "$s").log
    if grep -q 'falling back to reuseport' "$log" 2>/dev/null; then
        die "$s: $(grep -m1 'falling back to reuseport' "$log")"
    fi
}

# PIN=none: a worker pins itself to one CPU at its start (no setting turns
# that off); once it has, every server process is let run on all of
# SERVER_CPU.
unpin() {
    local s=$1 p cpus deadline=$((SECONDS + START_TIMEOUT))
    for p in "${SERVER_PIDS[@]}"; do
        while :; do
            cpus=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/"$p"/status) || die "$s pid $p is gone"
            [[ $p == "$SERVER_PID" || $cpus =~ ^[0-9]+$ ]] && break
            ((SECONDS < deadline)) || die "$s pid $p has not pinned itself (CPUs $cpus)"
            sleep 0.01
        done
        taskset -apc "$SERVER_CPU" "$p" >/dev/null || die "cannot let $s pid $p run on CPUs $SERVER_CPU"
    done
}

# Every server process must run on SERVER_CPU only: PIN=cpu, on a part of
# it (a worker on one CPU); PIN=none, on all of it.
check_pinned() {
    local s=$1 p cpus c
    for p in "${SERVER_PIDS[@]}"; do
        cpus=$(expand_cpus "$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/"$p"/status)")
        if [[ $PIN == none ]]; then
            [[ $cpus == "$SERVER_CPUS" ]] || die "$s pid $p may run on CPUs $cpus, not on all of $SERVER_CPUS"
        else
            for c in $cpus; do
                [[ " $SERVER_CPUS " == *" $c "* ]] || die "$s pid $p may run on CPUs $cpus, not only $SERVER_CPUS"
            done
        fi
    done
}

# The processes must be the ones measured from the start: a restarted
# worker would hide CPU time and memory.
check_same_pids() {
    local s=$1 now
    now=$(proc_tree "$SERVER_PID" | tr '\n' ' ')
    [[ $now == "${SERVER_PIDS[*]} " ]] || die "$s processes changed during the run: ${SERVER_PIDS[*]} -> $now"
}

# CPU time of the load generator: cutime + cstime of this shell, which
# grow when it reaps timeout(1), which has reaped wrk.
wrk_ticks() {
    local f stat
    stat=$(<"/proc/$$/stat")
    read -r -a f <<<"${stat##*) }"
    echo $((f[13] + f[14]))
}

# Busy time of the whole machine (all CPUs, /proc/stat: user, nice, system,
# irq, softirq, steal), in clock ticks: what is neither the server nor wrk
# was someone else, and disturbed the run.
busy_ticks() {
    awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

# The hypervisor's share of that (/proc/stat's steal): time the VM's CPUs
# were taken away while the run wanted them. It is in the other load, and
# said apart, because a run under steal is slower for every server and
# nothing on the machine can stop it (docs/benchmarks/2026-12-02-session9.md).
steal_ticks() {
    awk '$1 == "cpu" {print $9}' /proc/stat
}

# cpu_ticks NAME PID...: utime + stime of the processes, in clock ticks.
cpu_ticks() {
    local s=$1 p stat t=0 f
    shift
    for p in "$@"; do
        stat=$(cat "/proc/$p/stat" 2>/dev/null) || die "$s pid $p is gone: a process died during the run"
        # Fields after "pid (comm) ": state is [0], utime (field 14) is [11].
        read -r -a f <<<"${stat##*) }"
        t=$((t + f[11] + f[12]))
    done
    echo "$t"
}

# cpu_ns NAME PID...: time on a CPU of every thread of the processes, in
# nanoseconds: the first field of /proc/PID/task/TID/schedstat, the
# scheduler's own sum of run time, which utime+stime only share out in
# 10 ms ticks (bench/README.md, "CPU time"). Empty where the kernel has no
# schedstat (CONFIG_SCHED_INFO): the report keeps the tick figure then.
cpu_ns() {
    local s=$1 p f t=0 ns rest
    shift
    [[ -r /proc/self/schedstat ]] || return 0
    for p in "$@"; do
        [[ -d /proc/$p/task ]] || die "$s pid $p is gone: a process died during the run"
        for f in /proc/"$p"/task/*/schedstat; do
            # A thread that ended since the glob counts for nothing more.
            read -r ns rest <"$f" 2>/dev/null || continue
            t=$((t + ns))
        done
    done
    echo "$t"
}

hwm_kib() {
    awk '/^VmHWM:/ {print $2}' /proc/"$1"/status
}

# ---------------------------------------------------------------- checks

# Fetches the scenario's URL from server $1: the body must be the expected
# one and the status 200. Sets RESP_BYTES (head + body) for the byte check
# of the wrk runs and keeps the response head in $OUT/headers-$1.txt.
check_answer() {
    local s=$1 url="$SCHEME://127.0.0.1:${PORT[$1]}$URL_PATH" w code hsize bsize
    w=$(curl -s "${CURL_OPTS[@]}" --max-time 5 -D "$TMP/head-$s" -o "$TMP/body-$s" \
        -w '%{http_code} %{size_header} %{size_download}' "$url") || die "$s: curl $url failed"
    read -r code hsize bsize <<<"$w"
    if ((PROXY)) && [[ $s == scalws* && $code == 501 ]]; then
        die_no_proxy_action "it answers 501 on $url"
    fi
    [[ $code == 200 ]] || die "$s answers $code on $url, not 200"
    if ! cmp -s "$TMP/body-$s" "$TMP/expected"; then
        cp "$TMP/body-$s" "$OUT/"
        die "$s: body of $url differs from the expected one (kept in $OUT/body-$s)"
    fi
    grep -qi '^date:' "$TMP/head-$s" || die "$s sends no Date header"
    grep -qi '^server:' "$TMP/head-$s" || die "$s sends no Server header"
    tr -d '\r' <"$TMP/head-$s" >"$OUT/headers-$s.txt"
    RESP_BYTES=$((hsize + bsize))
}

# ---------------------------------------------------------------- load

# Runs the load against server $1 for $2 seconds; the result lines go to $3.
# closed: wrk, whose Lua script only has done(), so wrk's hot path is
# unchanged. rate: bench/fixedrate.py, which prints the same BENCH line.
run_wrk() {  # run_wrk NAME SECONDS OUTPUT [LOAD]
    local s=$1 secs=$2 out=$3 url="$SCHEME://127.0.0.1:${PORT[$1]}$URL_PATH"
    if [[ $SCENARIO == tls-h2 ]]; then
        run_load "$s" "$secs" "$out" "$PY" "$BENCH/h2bench.py" "$url" "$CONNECTIONS" "$H2_STREAMS" "$secs"
    elif [[ $SCENARIO == tls-resume ]]; then
        run_load "$s" "$secs" "$out" "$PY" "$BENCH/tlsresume.py" "$url" "$CONNECTIONS" "$secs"
    elif [[ $SCENARIO == tls-newconn ]]; then
        # The server closes after each answer; wrk opens a new connection,
        # with a full handshake (wrk keeps no TLS session).
        run_load "$s" "$secs" "$out" "$WRK" -t1 -c"$CONNECTIONS" -d"${secs}s" -H "Connection: close" \
            -s "$BENCH/summary.lua" "$url"
    elif [[ ${4:-$LOAD} == rate && $RATE_CLIENT == c ]]; then
        run_load "$s" "$secs" "$out" "$OPENLOOP" "$url" "$RATE" "$secs" "$CONNECTIONS"
    elif [[ ${4:-$LOAD} == rate ]]; then
        run_load "$s" "$secs" "$out" "$PY" "$BENCH/fixedrate.py" "$url" "$RATE" "$secs" "$CONNECTIONS"
    else
        run_load "$s" "$secs" "$out" "$WRK" -t1 -c"$CONNECTIONS" -d"${secs}s" -s "$BENCH/summary.lua" "$url"
    fi
}

# run_load NAME SECONDS OUTPUT COMMAND...: one load command on LOAD_CPU,
# bounded in time; it must print a BENCH line.
run_load() {
    local s=$1 secs=$2 out=$3 rc=0
    shift 3
    # In the background so that a signal to this script is handled at once
    # (bash runs traps only between foreground commands).
    taskset -c "$LOAD_CPU" timeout -k 5 $((secs + 30)) "$@" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=
    # A fixed-rate client measures itself, not the server, when it falls
    # behind. openloop.c says so with status 3 after a complete run: with
    # LATE_CLIENT=mark its latencies are marked not valid (LATENCY_VALID=0,
    # the row's latency_valid) and the rest of the run stands (ADR 0031).
    if ((rc == 3)) && [[ $LATE_CLIENT == mark ]] && grep -q '^BENCH ' "$out"; then
        log "$s: the fixed-rate client fell $(wrk_field "$out" late_max_us) us behind its schedule" \
            "($(wrk_field "$out" late_1ms) requests noticed at least 1 ms late): latencies of this run marked" \
            "not valid, its CPU and requests kept"
        LATENCY_VALID=0
        rc=0
    fi
    if ((rc != 0)) && grep -q 'the client fell' "$out"; then
        die "$s: the fixed-rate client ($(basename "$1")) could not keep $RATE requests/s on CPU $LOAD_CPU" \
            "($(sed -n 's/.*fell \([0-9.]*\) ms behind its schedule (\([0-9]*\) of \([0-9]*\) requests.*/fell \1 ms behind; \2 of \3 requests noticed at least 1 ms late/p' "$out")):" \
            "give a lower RATE, on a quieter machine; output in $out"
    fi
    ((rc == 0)) || die "$s: the load ($(basename "$1")) exited with $rc; output in $out"
    grep -q '^BENCH ' "$out" || die "$s: no summary from the load ($(basename "$1")); output in $out"
}

# The processes of server $1 whose system calls are counted: its workers,
# or its one process when it has no master (HAProxy with -db).
worker_pids() {
    if ((${#SERVER_PIDS[@]} == 1)); then
        echo "$SERVER_PID"
    else
        printf '%s\n' "${SERVER_PIDS[@]:1}"
    fi
}

# count_syscalls NAME OUTPUT PERF_OUTPUT: wrk -t1 -c16 for SYSCALL_SECS
# under perf stat, which counts the system calls the workers enter while
# wrk runs (perf ends with wrk: -p counts the processes, not wrk). Sets
# SYSCALLS to the count; the requests are wrk's, in OUTPUT. Also sets POLLS
# (epoll_wait and epoll_pwait calls) and SWITCHES (context switches: mostly
# sleeps in the poll), the loop's rhythm: a proxy that wakes for few events
# pays the kernel's sleep and wake-up on each (docs/benchmarks/
# 2026-12-01-proxy-fastpath.md).
count_syscalls() {
    local s=$1 out=$2 perf_out=$3 url="$SCHEME://127.0.0.1:${PORT[$1]}$URL_PATH" pids n
    pids=$(worker_pids | paste -sd,)
    run_load "$s" "$SYSCALL_SECS" "$out" "$PERF" stat -e raw_syscalls:sys_enter \
        -e syscalls:sys_enter_epoll_wait -e syscalls:sys_enter_epoll_pwait -e context-switches \
        -x, -o "$perf_out" -p "$pids" -- \
        "$WRK" -t1 -c"$SYSCALL_CONNECTIONS" -d"${SYSCALL_SECS}s" -s "$BENCH/summary.lua" "$url"
    check_wrk "$s" "$out" "$SYSCALL_CONNECTIONS"
    n=$(awk -F, '$3 ~ /^raw_syscalls:sys_enter/ {print $1}' "$perf_out")
    is_uint "$n" || die "$s: perf counted no system calls ('$n'); output in $perf_out"
    SYSCALLS=$n
    n=$(awk -F, '$3 ~ /^syscalls:sys_enter_epoll_p?wait$/ {s += $1} END {print s + 0}' "$perf_out")
    is_uint "$n" || die "$s: perf counted no epoll_wait ('$n'); output in $perf_out"
    POLLS=$n
    n=$(awk -F, '$3 ~ /^context-switches/ {print $1}' "$perf_out")
    is_uint "$n" || die "$s: perf counted no context switches ('$n'); output in $perf_out"
    SWITCHES=$n
}

# Reads one field of the BENCH line of a wrk output.
wrk_field() {
    sed -n "s/^BENCH .*\b$2=\([0-9.]*\).*/\1/p" "$1"
}

# check_wrk NAME OUTPUT [CONNECTIONS]: fails unless every response of a
# load run was a good one.
check_wrk() {
    local s=$1 out=$2 conns=${3:-$CONNECTIONS} e n bytes
    for e in connect read write timeout; do
        n=$(wrk_field "$out" "$e")
        [[ $n == 0 ]] || die "$s: $n socket $e errors; output in $out"
    done
    n=$(wrk_field "$out" status)
    [[ $n == 0 ]] || die "$s: $n responses not 2xx or 3xx; output in $out"
    n=$(wrk_field "$out" requests)
    bytes=$(wrk_field "$out" bytes)
    ((n > 0)) || die "$s: no request completed; output in $out"
    # h2load's bytes are frames with compressed heads: no HTTP/1 size to
    # hold them to (bench/h2bench.py); curl checked the answer before.
    [[ $SCENARIO != tls-h2 ]] || return 0
    # Each response must be the one curl saw (a 3xx or another answer has
    # another size). Responses cut at the end add at most one per connection;
    # 1 % leaves room for a "Connection: close" on the last response.
    ((bytes * 100 >= n * RESP_BYTES * 99 && bytes * 100 <= (n + conns) * RESP_BYTES * 101)) ||
        die "$s: $bytes bytes for $n responses, expected $RESP_BYTES each; output in $out"
}

# ---------------------------------------------------------------- one run

# round_order RUN SERVER...: the servers in the order of round RUN (from 1):
# the list rotated by one each round (A B, B A, A B, ...; A B C, B C A,
# C A B, A B C, ...) so that no server always goes first or last, nor
# always follows the same one; with 5 rounds of 3 each is first, middle
# and last at least once. test_bench.py checks it.
round_order() {
    local run=$1 k
    shift
    k=$(((run - 1) % $#))
    echo "${@:k+1}" "${@:1:k}"
}

CSV=$OUT/runs.csv
echo "scenario,run,slot,server,requests,duration_us,bytes,resp_bytes,latency_p50_us,latency_p99_us,latency_max_us,cpu_ticks,wrk_cpu_ticks,busy_ticks,clk_tck,nprocs,worker_hwm_kib,total_hwm_kib,latency_p999_us,backend_cpu_ticks,syscalls,syscall_requests,cpu_ns,backend_cpu_ns,syscall_polls,syscall_switches,latency_valid,client_late_max_us,placement_open,placement_end,steal_ticks" >"$CSV"

# Where the connections of a measured run land, with several workers and a
# client that keeps its connections (not tls-newconn, tls-resume): the
# placement decides a run's latency and CPU under the accept policies
# (shared places them differently every run), so each row records it.
watch_placement() {
    ((WORKERS > 1)) && [[ $SCENARIO != tls-newconn && $SCENARIO != tls-resume ]]
}

# start_watch NAME OUTPUT: bench/holders.py in the background for the
# measured run: the connections each worker holds once the client has
# opened them, and again just before the run ends; sets WATCH_PID.
start_watch() {
    "$PY" "$BENCH/holders.py" "${PORT[$1]}" "$CONNECTIONS" "$DURATION" $(worker_pids) >"$2" 2>&1 &
    WATCH_PID=$!
}

# end_watch NAME OUTPUT: waits for the watch; sets PLACEMENT_OPEN and
# PLACEMENT_END (counts per worker joined by "/").
end_watch() {
    wait "$WATCH_PID" || die "$1: bench/holders.py failed; output in $2"
    WATCH_PID=
    PLACEMENT_OPEN=$(sed -n 's/^open=//p' "$2")
    PLACEMENT_END=$(sed -n 's/^end=//p' "$2")
    [[ -n $PLACEMENT_OPEN && -n $PLACEMENT_END ]] || die "$1: bench/holders.py printed no placement; output in $2"
}

# measure SERVER RUN SLOT: one fresh server, warm-up, measured run, a CSV row.
measure() {
    local s=$1 run=$2 slot=$3 warm=$OUT/warmup-$1-$2.txt out=$OUT/wrk-$1-$2.txt
    local t0 t1 w0 w1 b0 b1 k0= k1= n0 n1 kn0= kn1= p hwm worker_hwm=0 total_hwm=0 sc= scn= scp= scs= late
    local watch=$OUT/placement-$1-$2.txt
    PLACEMENT_OPEN= PLACEMENT_END=
    start_server "$s"
    wait_ready "$s"
    check_pinned "$s"
    check_answer "$s"
    if ((WARMUP > 0)); then
        run_wrk "$s" "$WARMUP" "$warm"
        check_wrk "$s" "$warm"
    fi
    check_same_pids "$s"
    b0=$(busy_ticks)
    st0=$(steal_ticks)
    t0=$(cpu_ticks "$s" "${SERVER_PIDS[@]}")
    n0=$(cpu_ns "$s" "${SERVER_PIDS[@]}")
    ((PROXY == 0)) || k0=$(cpu_ticks backend "${BACKEND_PIDS[@]}")
    ((PROXY == 0)) || kn0=$(cpu_ns backend "${BACKEND_PIDS[@]}")
    w0=$(wrk_ticks)
    # The warm-up's lag does not matter: only the measured run's is kept.
    LATENCY_VALID=1
    ! watch_placement || start_watch "$s" "$watch"
    run_wrk "$s" "$DURATION" "$out"
    w1=$(wrk_ticks)
    ((PROXY == 0)) || kn1=$(cpu_ns backend "${BACKEND_PIDS[@]}")
    ((PROXY == 0)) || k1=$(cpu_ticks backend "${BACKEND_PIDS[@]}")
    n1=$(cpu_ns "$s" "${SERVER_PIDS[@]}")
    t1=$(cpu_ticks "$s" "${SERVER_PIDS[@]}")
    b1=$(busy_ticks)
    st1=$(steal_ticks)
    check_same_pids "$s"
    check_wrk "$s" "$out"
    ! watch_placement || end_watch "$s" "$watch"
    late=$(wrk_field "$out" late_max_us)
    # After the measured run, not during it: perf's counting costs the
    # server CPU time.
    if ((SYSCALL_SECS > 0)); then
        count_syscalls "$s" "$OUT/syscalls-wrk-$1-$2.txt" "$OUT/syscalls-perf-$1-$2.txt"
        sc=$SYSCALLS
        scp=$POLLS
        scs=$SWITCHES
        scn=$(wrk_field "$OUT/syscalls-wrk-$1-$2.txt" requests)
        check_same_pids "$s"
    fi
    ((PROXY == 0)) || check_backend
    for p in "${SERVER_PIDS[@]}"; do
        hwm=$(hwm_kib "$p")
        total_hwm=$((total_hwm + hwm))
        # The worker: the largest child (master is [0]), or the one process.
        if [[ $p != "$SERVER_PID" || ${#SERVER_PIDS[@]} == 1 ]] && ((hwm > worker_hwm)); then worker_hwm=$hwm; fi
    done
    echo "$SCENARIO,$run,$slot,$s,$(wrk_field "$out" requests),$(wrk_field "$out" duration_us),$(wrk_field "$out" bytes),$RESP_BYTES,$(wrk_field "$out" p50_us),$(wrk_field "$out" p99_us),$(wrk_field "$out" max_us),$((t1 - t0)),$((w1 - w0)),$((b1 - b0)),$CLK_TCK,${#SERVER_PIDS[@]},$worker_hwm,$total_hwm,$(wrk_field "$out" p999_us),${k0:+$((k1 - k0))},$sc,$scn,${n0:+$((n1 - n0))},${kn0:+$((kn1 - kn0))},$scp,$scs,$LATENCY_VALID,$late,$PLACEMENT_OPEN,$PLACEMENT_END,$((st1 - st0))" >>"$CSV"
    stop_server
    awk -F, -v r="$run" 'END {
        s = $6 / 1e6
        # CPU per request from nanoseconds (schedstat), the ticks beside.
        printf "run.sh: run %d %-7s %9.0f req/s  p99 %6.3f ms  %6.3f us CPU/req", r, $4, $5 / s, $10 / 1000,
            $23 != "" ? $23 / 1000 / $5 : $12 / $15 * 1e6 / $5
        if ($23 != "") printf " (ticks %.3f)", $12 / $15 * 1e6 / $5
        printf "  RSS worker %.1f MiB, all %.1f MiB  other load %.2f cores",
            $17 / 1024, $18 / 1024, ($14 - $12 - $13 - $20) / $15 / s
        if ($24 != "") printf "  backend %.3f us CPU/req", $24 / 1000 / $5
        else if ($20 != "") printf "  backend %.3f us CPU/req", $20 / $15 * 1e6 / $5
        if ($21 != "") printf "  %.2f syscalls/req", $21 / $22
        if ($29 != "") printf "  held per worker %s, at the end %s", $29, $30
        if ($31 > 0) printf "  steal %.2f cores", $31 / $15 / s
        printf "\n" }' "$CSV" >&2
}

# ---------------------------------------------------------------- main

setup_scenario
if ((PROXY)); then
    start_backend
    log "backend nginx answers $URL_PATH on port $BACKEND_PORT, CPU $LOAD_CPU"
fi

# Every server must give the same body before anything is measured.
for s in "${SERVER_LIST[@]}"; do
    start_server "$s"
    wait_ready "$s"
    check_answer "$s"
    log "$s answers $URL_PATH with $RESP_BYTES bytes ($(stat -c %s "$TMP/expected") of body) on port ${PORT[$s]}"
    stop_server
done
for s in "${SERVER_LIST[@]:1}"; do
    cmp -s "$TMP/body-${SERVER_LIST[0]}" "$TMP/body-$s" || die "${SERVER_LIST[0]} and $s answer different bodies"
done
cp "$TMP"/nginx.conf "$TMP"/scalws*.yaml "$TMP"/haproxy.cfg "$TMP"/backend.conf "$OUT"/ 2>/dev/null || true

# proxy-latency's rate, unless RATE says it: about half of the baseline's
# maximum, measured here with wrk as the proxy scenario does.
RATE_FROM=given
if [[ $SCENARIO == proxy-latency && -z $RATE_GIVEN ]]; then
    start_server "$BASELINE"
    wait_ready "$BASELINE"
    check_answer "$BASELINE"
    run_wrk "$BASELINE" "$DURATION" "$OUT/calibrate-$(tag "$BASELINE").txt" closed
    check_wrk "$BASELINE" "$OUT/calibrate-$(tag "$BASELINE").txt"
    stop_server
    max_rps=$(awk '/^BENCH / {for (i = 2; i <= NF; i++) {split($i, kv, "="); f[kv[1]] = kv[2]}
        printf "%d", f["requests"] / (f["duration_us"] / 1e6)}' "$OUT/calibrate-$(tag "$BASELINE").txt")
    RATE=$((max_rps / 2))
    ((RATE >= 1)) || die "$BASELINE's maximum ($max_rps requests/s) gives no rate"
    RATE_FROM="half of $BASELINE's $max_rps requests/s, wrk -t1 -c$CONNECTIONS for ${DURATION} s"
    log "proxy-latency: $RATE requests/s, $RATE_FROM"
fi

# The ratios reported, SERVER/REFERENCE: every server over the baseline
# and, in the proxy and TLS scenarios, ScalWS over HAProxy too.
RATIOS=()
for s in "${SERVER_LIST[@]}"; do
    [[ $s == "$BASELINE" ]] || RATIOS+=("$s/$BASELINE")
done
if ((PROXY || TLS)) && [[ " ${SERVER_LIST[*]} " == *" haproxy "* && $BASELINE != haproxy ]]; then
    for s in "${SERVER_LIST[@]}"; do
        [[ $s != scalws* ]] || RATIOS+=("$s/haproxy")
    done
fi

{
    echo "scenario=$SCENARIO"
    echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "runs=$RUNS"
    echo "duration_s=$DURATION"
    echo "warmup_s=$WARMUP"
    echo "connections=$CONNECTIONS"
    echo "servers=${SERVER_LIST[*]}"
    echo "baseline=$BASELINE"
    echo "ratios=${RATIOS[*]}"
    echo "workers=$WORKERS"
    echo "pin=$PIN"
    echo "load=$LOAD"
    [[ $LOAD != rate ]] || echo "rate=$RATE"
    [[ $LOAD != rate ]] || echo "rate_from=$RATE_FROM"
    echo "syscall_s=$SYSCALL_SECS"
    echo "syscall_connections=$SYSCALL_CONNECTIONS"
    ((PROXY == 0)) || echo "backend=nginx $("$NGINX" -v 2>&1 | sed 's/^nginx version: nginx\///'), port $BACKEND_PORT, CPU $LOAD_CPU"
    echo "server_cpu=$SERVER_CPU"
    echo "load_cpu=$LOAD_CPU"
    echo "url_path=$URL_PATH"
    echo "body_bytes=$(stat -c %s "$TMP/expected")"
    # --no-optional-locks: reading the revision must not write git's index.
    echo "git=$(git --no-optional-locks -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "kernel=$(uname -r)"
    echo "cpu_model=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "ncpu=$(nproc --all)"
    # wrk -v prints its version and exits with 1.
    if [[ $SCENARIO == tls-resume ]]; then
        echo "wrk=bench/tlsresume.py ($("$PY" --version 2>&1), $("$PY" -c 'import ssl; print(ssl.OPENSSL_VERSION)'))"
    elif [[ $SCENARIO == tls-h2 ]]; then
        echo "wrk=$(h2load --version 2>&1 | awk 'NR == 1') -m$H2_STREAMS (bench/h2bench.py)"
    elif [[ $LOAD == rate && $RATE_CLIENT == c ]]; then
        echo "wrk=bench/openloop.c ($(cc --version | awk 'NR == 1'))"
    elif [[ $LOAD == rate ]]; then
        echo "wrk=bench/fixedrate.py ($("$PY" --version 2>&1))"
    else
        echo "wrk=$({ "$WRK" -v 2>&1 || true; } | awk 'NR == 1 {print $1, $2}')"
    fi
    for s in "${SERVER_LIST[@]}"; do
        case $s in
            nginx) echo "nginx=$("$NGINX" -v 2>&1 | sed 's/^nginx version: //')" ;;
            haproxy) echo "haproxy=$("$HAPROXY" -v 2>&1 | awk 'NR == 1 {print $3}')" ;;
            relay-*) echo "$s=bench/uring/relay.c --io ${s#relay-}" ;;
            scalws*) echo "$s=$({ "$SCALWSD" --version 2>&1 || true; } | awk 'NR == 1')" ;;
        esac
    done
} >"$OUT/meta.txt"

log "$SCENARIO: $RUNS runs of ${DURATION}s (+${WARMUP}s warm-up), $CONNECTIONS connections," \
    "load $LOAD$([[ $LOAD != rate ]] || echo " at $RATE/s"), $WORKERS worker(s), PIN=$PIN; results in $OUT"
slot=0
for ((run = 1; run <= RUNS; run++)); do
    read -r -a order <<<"$(round_order "$run" "${SERVER_LIST[@]}")"
    for s in "${order[@]}"; do
        slot=$((slot + 1))
        measure "$s" "$run" "$slot"
    done
done

"$PY" "$BENCH/report.py" "$OUT"
