#!/bin/sh
# Install the Debian packages ScalWS needs to build, test and benchmark.
# Idempotent and quiet when nothing is missing; only Debian's archive.
set -eu

PACKAGES="
build-essential
pkg-config
libyaml-dev
libprotobuf-c-dev
protobuf-c-compiler
node-llhttp
libcmocka-dev
curl
python3
nginx-light
wrk
procps
util-linux
"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

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
# nginx-light starts a system nginx on port 80 when installed; ScalWS only
# uses the binary (bench/ and tests run their own instances).
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
    systemctl stop nginx || true
    systemctl disable nginx >/dev/null 2>&1 || true
fi
