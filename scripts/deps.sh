#!/bin/sh
# The Debian packages ScalWS needs, per use:
#
#   scripts/deps.sh [--check] [SET...]
#
#   run    build and run scalwsd and ingressd: compiler, pkg-config, libyaml,
#          protobuf-c,
#          llhttp, nghttp2, OpenSSL and the system's CA store (TLS to
#          upstreams), and for the eBPF accept policies libbpf, bpftool and
#          clang, for ingressd's Kubernetes client libcurl and jansson, and
#          libzmq for the routes ingressd publishes
#          (what `make` and `make run` need, nothing more)
#   test   run, plus what `make test` needs: cmocka, python3, curl, ps, capsh,
#          openssl (test certificates), nghttp, h2load and nghttpd, python3-h2
#          (the HTTP/2 tests), python3-yaml (the k8s/ manifests' test),
#          nginx (the backend the proxy tests start and kill)
#   fuzz   run, plus clang with libFuzzer (`make fuzz`)
#   bench  run, plus nginx, wrk, HAProxy, perf, openssl and h2load (bench/run.sh;
#          the proxy scenarios count system calls with perf, the TLS ones make
#          a certificate and run h2load), and liburing for bench/uring/'s
#          experimental relay (never the product's build)
#   all    every set (the default)
#
# Installs what is missing (as root; otherwise prints the apt-get line and
# fails). With --check it installs nothing: it names what is missing and
# the command that installs it, and fails; the Makefile runs this before
# building, so a fresh machine gets that instead of a pkg-config error.
# Quiet and idempotent when nothing is missing; only Debian's archive.
set -eu

RUN="build-essential pkg-config libyaml-dev libprotobuf-c-dev protobuf-c-compiler node-llhttp libbpf-dev bpftool clang libssl-dev openssl ca-certificates libnghttp2-dev libcurl4-openssl-dev libjansson-dev libzmq3-dev"
TEST="libcmocka-dev python3 curl procps libcap2-bin openssl nghttp2-client nghttp2-server python3-h2 python3-yaml nginx-light"
FUZZ="clang libclang-rt-dev"
BENCH="nginx-light wrk curl python3 procps util-linux haproxy linux-perf openssl nghttp2-client liburing-dev"

usage() {
    echo "usage: scripts/deps.sh [--check] [run|test|fuzz|bench|all]..." >&2
    exit 2
}

# Whether clang can link a libFuzzer target (clang alone links nothing:
# the runtime is in libclang-rt-dev, which clang only recommends).
fuzzer_links() {
    command -v clang >/dev/null 2>&1 || return 1
    dir=$(mktemp -d) || return 1
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ (void)d; (void)n; return 0; }\n' >"$dir/t.c"
    ok=0
    clang -fsanitize=fuzzer,address,undefined "$dir/t.c" -o "$dir/t" >/dev/null 2>&1 || ok=1
    rm -rf "$dir"
    return $ok
}

# Whether package $1 is usable: what the build uses of it is there. A check
# of the files, not of dpkg, so a tool installed another way counts too.
present() {
    case $1 in
    build-essential) command -v cc && command -v make && [ -f /usr/include/stdio.h ] ;;
    pkg-config) command -v pkg-config ;;
    libyaml-dev) [ -f /usr/include/yaml.h ] ;;
    libssl-dev) [ -f /usr/include/openssl/ssl.h ] ;;
    ca-certificates) [ -f /etc/ssl/certs/ca-certificates.crt ] ;;
    openssl) command -v openssl ;;
    libprotobuf-c-dev) [ -f /usr/include/protobuf-c/protobuf-c.h ] ;;
    protobuf-c-compiler) command -v protoc-c ;;
    node-llhttp) [ -f /usr/share/llhttp/api.c ] && [ -f /usr/share/include/llhttp/llhttp.h ] ;;
    libbpf-dev) [ -f /usr/include/bpf/libbpf.h ] ;;
    bpftool) command -v bpftool || [ -x /usr/sbin/bpftool ] ;;
    libnghttp2-dev) [ -f /usr/include/nghttp2/nghttp2.h ] ;;
    libcmocka-dev) [ -f /usr/include/cmocka.h ] ;;
    libcurl4-openssl-dev) pkg-config --exists libcurl ;;
    libjansson-dev) [ -f /usr/include/jansson.h ] ;;
    libzmq3-dev) pkg-config --exists libzmq ;;
    nghttp2-client) command -v nghttp && command -v h2load ;;
    nghttp2-server) command -v nghttpd || [ -x /usr/sbin/nghttpd ] ;;
    python3-h2) /usr/bin/python3 -c 'import h2' ;;
    python3-yaml) /usr/bin/python3 -c 'import yaml' ;;
    python3) [ -x /usr/bin/python3 ] ;;
    curl) command -v curl ;;
    procps) command -v ps ;;
    libcap2-bin) command -v capsh || [ -x /usr/sbin/capsh ] || [ -x /sbin/capsh ] ;;
    util-linux) command -v taskset ;;
    clang) command -v clang ;;
    libclang-rt-dev) fuzzer_links ;;
    nginx-light) command -v nginx || [ -x /usr/sbin/nginx ] ;;
    wrk) command -v wrk ;;
    haproxy) command -v haproxy || [ -x /usr/sbin/haproxy ] ;;
    linux-perf) command -v perf ;;
    liburing-dev) [ -f /usr/include/liburing.h ] ;;
    *) dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed" ;;
    esac
}

check=0
sets=""
for arg in "$@"; do
    case $arg in
    --check) check=1 ;;
    run | test | fuzz | bench) sets="$sets $arg" ;;
    all) sets="$sets run test fuzz bench" ;;
    *) usage ;;
    esac
done
[ -n "$sets" ] || sets="run test fuzz bench"

wanted=""
for s in $sets; do
    case $s in
    run) wanted="$wanted $RUN" ;;
    test) wanted="$wanted $RUN $TEST" ;;
    fuzz) wanted="$wanted $RUN $FUZZ" ;;
    bench) wanted="$wanted $RUN $BENCH" ;;
    esac
done

missing=""
for p in $wanted; do
    case " $missing " in *" $p "*) continue ;; esac
    present "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

sets=${sets# }
if [ "$check" -eq 1 ]; then
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: install them with: scripts/deps.sh $sets   (as root; or: sudo apt-get install$missing)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root, or: sudo apt-get install$missing" >&2
    exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
# nginx-light starts a system nginx on port 80 when installed, haproxy a
# system haproxy; ScalWS only uses the binaries (bench/ and tests run their
# own instances).
for pkg_service in nginx-light:nginx haproxy:haproxy; do
    case " $missing " in
    *" ${pkg_service%%:*} "*)
        service=${pkg_service#*:}
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$service" 2>/dev/null; then
            systemctl stop "$service" || true
            systemctl disable "$service" >/dev/null 2>&1 || true
        fi
        ;;
    esac
done
