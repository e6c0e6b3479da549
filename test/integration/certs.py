"""Test certificates, generated at test time with `openssl req` into a
directory of the test's (never committed): self-signed, for one subject and
its DNS names."""

import os
import subprocess


def make_pair(directory, name, cn, dns=None, kind="rsa", org=None, ips=()):
    """Write NAME.crt and NAME.key into directory: a self-signed
    certificate for subject CN=cn (O=org when given) with DNS names dns
    (default [cn]) and IP addresses ips, key RSA 2048 or ECDSA P-256 (kind
    "ec"). Returns the two paths."""
    crt = os.path.join(directory, name + ".crt")
    key = os.path.join(directory, name + ".key")
    newkey = (["-newkey", "rsa:2048"] if kind == "rsa"
              else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
    subject = "/CN=%s" % cn + ("/O=%s" % org if org else "")
    san = ",".join(["DNS:%s" % d for d in (dns or [cn])] + ["IP:%s" % a for a in ips])
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-days", "2", "-subj", subject,
                    "-addext", "subjectAltName=" + san, "-keyout", key, "-out", crt] + newkey,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
    return crt, key
