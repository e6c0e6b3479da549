#!/bin/bash
# Run Debian's testssl (package testssl.sh) against a TLS listener of
# scalwsd started here with the defaults of server.tls and generated
# certificates (RSA 2048 and ECDSA P-256 for "localhost", nothing kept),
# write the summary to docs/tls-testssl.md (OUT=... to write elsewhere) and
# exit 1 when a finding about the server is rated HIGH or CRITICAL. Findings
# about the certificate itself (ids cert_*: self-signed, no CRL or OCSP
# URI) are listed apart: they are the test certificate's, not the server's.
#
#   scripts/testssl.sh              (after `make`; BIN=build/scalwsd)
#
# Only 127.0.0.1 is contacted. Takes a few minutes.
set -euo pipefail

BIN=${BIN:-build/scalwsd}
OUT=${OUT:-docs/tls-testssl.md}
command -v testssl >/dev/null || { echo "testssl: not found (apt-get install testssl.sh)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "$BIN: not built (make)" >&2; exit 2; }

dir=$(mktemp -d /tmp/scalws-testssl-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for kind in rsa ec; do
    if [ "$kind" = rsa ]; then newkey=(-newkey rsa:2048); else newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256); fi
    openssl req -x509 -nodes -days 365 "${newkey[@]}" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost -keyout "$dir/$kind.key" -out "$dir/$kind.crt" 2>/dev/null
done
cat > "$dir/scalws.yaml" <<YAML
server:
  listen: [{address: "127.0.0.1:$port", tls: true}]
  event_loops: 1
  admin: {listen: []}
  tls:
    default_certificate: {cert: rsa.crt, key: rsa.key}
hosts:
  - names: [localhost]
    certificates: [{cert: rsa.crt, key: rsa.key}, {cert: ec.crt, key: ec.key}]
    routes:
      - path: /
        respond: {body: "hello\n"}
YAML
"$BIN" -c "$dir/scalws.yaml" >"$dir/access.log" 2>"$dir/error.log" &
pid=$!
listening=0
for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then listening=1; break; fi
    kill -0 "$pid" 2>/dev/null || { cat "$dir/error.log" >&2; exit 2; }
    sleep 0.1
done
if [ "$listening" != 1 ]; then
    echo "testssl.sh: scalwsd did not listen on 127.0.0.1:$port within 10 s" >&2
    cat "$dir/error.log" >&2
    exit 2
fi

# --ip: "localhost" (the SNI name) is tested on 127.0.0.1 only.
testssl --quiet --color 0 --warnings batch --ip 127.0.0.1 --jsonfile "$dir/testssl.json" \
    "localhost:$port" >"$dir/testssl.txt" 2>&1 || true

python3 - "$dir/testssl.json" "$OUT" "$(testssl --version 2>/dev/null | grep -o 'testssl *[0-9.]*' | tr -s ' ' | head -1)" \
    "$(openssl version)" <<'PY'
import collections, json, sys
findings = json.load(open(sys.argv[1]))
order = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "WARN", "INFO", "OK"]
by = collections.defaultdict(list)
cert = collections.defaultdict(list)  # about the test certificate, not the server
for f in findings:
    (cert if f["id"].startswith("cert_") else by)[f.get("severity", "INFO")].append(f)
with open(sys.argv[2], "w") as out:
    out.write("# testssl against a ScalWS TLS listener\n\n")
    out.write("Made by `scripts/testssl.sh` (%s, client %s): the defaults of `server.tls`, "
              "an RSA 2048 and an ECDSA P-256 certificate for `localhost` (self-signed, so the "
              "findings about the certificate itself are listed apart). The script fails on "
              "a HIGH or CRITICAL finding about the server.\n\n" % (sys.argv[3], sys.argv[4]))
    out.write("| severity | about the server | about the test certificate |\n|---|---|---|\n")
    for s in order:
        out.write("| %s | %d | %d |\n" % (s, len(by.get(s, [])), len(cert.get(s, []))))
    for title, group in (("the server", by), ("the test certificate", cert)):
        for s in order[:5]:
            if group.get(s):
                out.write("\n## %s, about %s\n\n" % (s, title))
                for f in group[s]:
                    out.write("- `%s`: %s\n" % (f["id"], f.get("finding", "").replace("\n", " ")))
    out.write("\n## Protocols and ciphers offered\n\n")
    for f in findings:
        if f["id"].startswith(("SSLv", "TLS1", "cipherorder_", "cipher_order", "supported_groups",
                               "FS_ECDHE_curves", "ALPN")):
            out.write("- `%s`: %s\n" % (f["id"], f.get("finding", "")))
bad = len(by.get("CRITICAL", [])) + len(by.get("HIGH", []))
print("%s: %d HIGH or CRITICAL finding(s)" % (sys.argv[2], bad))
sys.exit(1 if bad else 0)
PY
