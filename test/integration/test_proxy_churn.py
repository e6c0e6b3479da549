"""Backends come and go under steady traffic, and no request fails (issue 7,
"What it must show" 3):

- churn: keep-alive clients send GETs at a steady rate for 30 s while,
  every 200 ms, a member is added, drained or removed through the admin
  API, and real backends are started and stopped (some while still in the
  pool);
- a backend process (nginx) killed with SIGKILL under GET load, with no
  admin call: retries and passive health absorb it.

A request fails when its answer is not a 200 from a backend, or when the
client's connection breaks. Every loop is bounded in time and count; the
verdict is the count of failures, never a duration."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from backend import Backend
from harness import TIMEOUT, Client, ServerTestCase, free_port, make_config, poll
from test_admin import admin_request

CHURN_SECONDS = 30
CHURN_STEP = 0.2
CLIENTS = 4
CLIENT_PAUSE = 0.01       # between a client's requests: about 400 requests/s in all


class Load:
    """CLIENTS threads, each on its own keep-alive connection (a new one only
    when the server closed it cleanly after a response), GET until stopped."""

    def __init__(self, port, path="/"):
        self.port = port
        self.path = path
        self.ok = 0
        self.failures = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(TIMEOUT)

    def run(self):
        c = None
        n = 0
        while not self.stop.is_set() and n < 100000:
            n += 1
            try:
                if c is None:
                    c = Client(self.port)
                r = c.get(self.path)
                good = r.status == 200 and r.body.startswith(b"b")
                with self.lock:
                    if good:
                        self.ok += 1
                    else:
                        self.failures.append("%d %r" % (r.status, r.body[:80]))
                if r.header("Connection") == "close":
                    c.close()
                    c = None
            except (OSError, AssertionError, ValueError) as e:
                with self.lock:
                    self.failures.append("client: %r" % e)
                if c is not None:
                    c.close()
                c = None
            time.sleep(CLIENT_PAUSE)
        if c is not None:
            c.close()


def proxy_config(members, admin_sock=None):
    hosts = '- name: "*"\n  routes:\n    - path: /\n      proxy: {pool: app}\n'
    server = "event_loops: 2"
    if admin_sock:
        server += '\nadmin: {listen: ["%s"]}' % admin_sock
    pools = "pools:\n  - name: app\n    members:\n"
    for m in members:
        pools += '      - "%s"\n' % m
    return make_config(hosts, server) + pools


class Churn(ServerTestCase):
    def test_members_and_backends_come_and_go_without_a_failed_request(self):
        stable = [Backend("b0"), Backend("b1")]
        for b in stable:
            self.addCleanup(b.stop)
        srv = self.server(proxy_config([b.address for b in stable], "@DIR@/admin.sock"),
                          start=False)
        admin = os.path.join(srv.dir, "admin.sock")
        srv.start()
        poll(lambda: os.path.exists(admin), what="the admin socket")
        load = Load(srv.port)
        load.start()
        churned = []      # backends added through the API
        dead = []         # a member stopped while still in the pool
        steps = {"added": 0, "drained": 0, "removed": 0, "stopped in the pool": 0,
                 "stopped": 0}
        admin_errors = []

        def put(b, state):
            code, _, body = admin_request(admin, "PUT", "/v1/pools/app/members/" + b.address,
                                          '{"weight": 1, "state": "%s"}' % state)
            if code not in (200, 201):
                admin_errors.append("PUT %s %s: %d %r" % (b.address, state, code, body))

        try:
            deadline = time.monotonic() + CHURN_SECONDS
            i = 0
            while time.monotonic() < deadline and i < CHURN_SECONDS / CHURN_STEP + 10:
                phase = i % 5
                if phase == 0:
                    b = Backend("b%d" % (i + 2))
                    self.addCleanup(b.stop)
                    churned.append(b)
                    put(b, "up")
                    steps["added"] += 1
                elif phase == 1 and churned:
                    put(churned[-1], "draining")
                    steps["drained"] += 1
                elif phase == 2 and churned:
                    code, _, body = admin_request(
                        admin, "DELETE", "/v1/pools/app/members/" + churned[-1].address)
                    if code != 200:
                        admin_errors.append("DELETE: %d %r" % (code, body))
                    steps["removed"] += 1
                elif phase == 3 and churned:
                    churned[-1].stop()
                    steps["stopped"] += 1
                elif phase == 4:
                    # A member that dies while still in the pool (removed
                    # only at the next step: one such at a time).
                    b = Backend("bx%d" % i)
                    self.addCleanup(b.stop)
                    put(b, "up")
                    time.sleep(CHURN_STEP / 2)
                    b.stop()
                    dead.append(b)
                    steps["stopped in the pool"] += 1
                if phase == 0 and dead:
                    admin_request(admin, "DELETE", "/v1/pools/app/members/" + dead.pop().address)
                i += 1
                time.sleep(CHURN_STEP)
        finally:
            load.finish()
        print("churn: %d requests answered, %d failed; steps %r" % (load.ok, len(load.failures),
                                                                   steps))
        self.assertEqual(admin_errors, [])
        self.assertEqual(load.failures, [], srv.log_tail())
        self.assertGreater(load.ok, 1000)
        self.assertGreater(sum(b.count() for b in churned), 0, "no request reached a churned "
                           "member: the test proved nothing")


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
error_log %(dir)s/error.log;
pid %(dir)s/nginx.pid;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path %(dir)s/tmp;
    proxy_temp_path %(dir)s/tmp;
    fastcgi_temp_path %(dir)s/tmp;
    uwsgi_temp_path %(dir)s/tmp;
    scgi_temp_path %(dir)s/tmp;
    server {
        listen 127.0.0.1:%(port)d;
        location / { return 200 "b%(name)s\\n"; }
    }
}
"""


class NginxBackend:
    """nginx, a single process, answering "bNAME" on a free port."""

    def __init__(self, root, name):
        self.dir = os.path.join(root, "nginx-" + name)
        os.makedirs(os.path.join(self.dir, "tmp"))
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF % {"dir": self.dir, "port": self.port, "name": name})
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                return False
        poll(up, what="nginx on port %d" % self.port)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(TIMEOUT)


class BackendKilled(ServerTestCase):
    def test_sigkill_of_a_backend_under_get_load_costs_no_request(self):
        if shutil.which("nginx") is None:
            self.skipTest("nginx is not installed (scripts/deps.sh test)")
        root = tempfile.mkdtemp(prefix="sws-nginx-")
        self.addCleanup(shutil.rmtree, root, True)
        backends = [NginxBackend(root, n) for n in ("0", "1")]
        for b in backends:
            self.addCleanup(b.kill)
        srv = self.server(proxy_config([b.address for b in backends]))
        load = Load(srv.port)
        load.start()
        try:
            poll(lambda: load.ok >= 200, what="200 answers before the kill")
            backends[0].kill()
            before = load.ok
            poll(lambda: load.ok >= before + 400, what="400 answers after the kill")
        finally:
            load.finish()
        print("SIGKILL of a backend: %d requests answered, %d failed" % (load.ok,
                                                                       len(load.failures)))
        self.assertEqual(load.failures, [], srv.log_tail())
