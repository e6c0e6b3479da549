"""The k8s/ manifests render (`kubectl kustomize`) into what the pod and the
cluster need: two containers sharing the routes socket's volume, the
probes on the right ports and paths, a SIGQUIT drain shorter than the
grace period, read-only RBAC on exactly what ingressd reads, the
IngressClass with the controller's name. And scalwsd accepts the file the
ConfigMap carries."""

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

from certs import make_pair
from harness import ROOT, TIMEOUT, binary

sys.path.insert(0, os.path.join(ROOT, "test", "kube"))
from fakekube import KUBECTL  # noqa: E402

HAVE_KUBECTL = os.access(KUBECTL, os.X_OK)

READS = {("networking.k8s.io", "ingresses"), ("networking.k8s.io", "ingressclasses"),
         ("", "services"), ("", "secrets"), ("discovery.k8s.io", "endpointslices")}


def render(overlay):
    p = subprocess.run([KUBECTL, "kustomize", os.path.join(ROOT, "k8s", overlay)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode != 0:
        raise AssertionError("kubectl kustomize k8s/%s: %s" % (overlay, p.stderr))
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def duration_seconds(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h)?", str(text))
    return int(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]


def flag(args, name):
    return args[args.index(name) + 1]


class Rendered:
    """The objects of one overlay, by kind."""

    def __init__(self, overlay, workload_kind):
        self.objects = render(overlay)
        self.workload = self.one(workload_kind)
        self.pod = self.workload["spec"]["template"]["spec"]
        self.containers = {c["name"]: c for c in self.pod["containers"]}
        cm = self.one("ConfigMap")
        self.config_text = cm["data"]["scalws.yaml"]
        self.config = yaml.safe_load(self.config_text)

    def all(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind):
        found = self.all(kind)
        if len(found) != 1:
            raise AssertionError("%d objects of kind %s" % (len(found), kind))
        return found[0]


@functools.lru_cache(maxsize=None)
def rendered(overlay, kind):
    return Rendered(overlay, kind)


class Manifests:
    """The checks both variants pass (mixed into one TestCase per overlay)."""

    overlay = None
    kind = None

    def setUp(self):
        # run.py runs test by test, without class fixtures: a cache instead.
        self.r = rendered(self.overlay, self.kind)

    def test_everything_in_namespace_scalws(self):
        self.assertEqual(self.r.one("Namespace")["metadata"]["name"], "scalws")
        for o in self.r.objects:
            if o["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                                 "IngressClass"):
                self.assertEqual(o["metadata"].get("namespace"), "scalws", o["kind"])
        self.assertEqual(sorted(o["kind"] for o in self.r.objects),
                         sorted(["Namespace", "ServiceAccount", "ClusterRole",
                                 "ClusterRoleBinding", "IngressClass", "ConfigMap", "Service",
                                 self.kind]))

    def test_two_containers_share_the_routes_socket_directory(self):
        self.assertEqual(set(self.r.containers), {"scalwsd", "ingressd"})
        volumes = {v["name"]: v for v in self.r.pod["volumes"]}
        mounts = [{m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                  for c in self.r.containers.values()]
        self.assertEqual(mounts[0]["/run/scalws"], mounts[1]["/run/scalws"])
        self.assertIn("emptyDir", volumes[mounts[0]["/run/scalws"]])
        # ingressd publishes where scalwsd subscribes, inside that directory.
        publish = flag(self.r.containers["ingressd"]["command"], "--publish")
        self.assertEqual(publish, self.r.config["ingress"]["subscribe"])
        self.assertTrue(publish.startswith("ipc:///run/scalws/"), publish)
        self.assertEqual(flag(self.r.containers["ingressd"]["command"], "--ingress-class"),
                         "scalws")
        # The socket is mode 0600: one user for both.
        ctx = self.r.pod["securityContext"]
        self.assertTrue(ctx["runAsNonRoot"])
        for c in self.r.containers.values():
            self.assertNotIn("runAsUser", c.get("securityContext", {}))
        # scalwsd's file is the ConfigMap's.
        config_volume = next(v for v in self.r.pod["volumes"] if "configMap" in v)
        self.assertEqual(config_volume["configMap"]["name"],
                         self.r.one("ConfigMap")["metadata"]["name"])

    def test_probes_reach_the_health_endpoints(self):
        scalwsd = self.r.containers["scalwsd"]
        admin = self.r.config["server"]["admin"]["listen"]
        admin_url = "http://%s" % next(a for a in admin if not a.startswith("/"))
        for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
            cmd = scalwsd[probe]["exec"]["command"]
            self.assertEqual(cmd[0], "curl")
            self.assertIn(admin_url + path, cmd)
        ingressd = self.r.containers["ingressd"]
        port = int(flag(ingressd["command"], "--health").rsplit(":", 1)[1])
        ports = {p["name"]: p["containerPort"] for p in ingressd["ports"]}
        get = ingressd["livenessProbe"]["httpGet"]
        self.assertEqual((get["path"], ports[get["port"]]), ("/healthz", port))

    def test_prestop_drains_with_sigquit_within_the_grace_period(self):
        cmd = self.r.containers["scalwsd"]["lifecycle"]["preStop"]["exec"]["command"]
        script = cmd[-1]
        self.assertIn("kill -QUIT 1", script)
        # ... and waits for the drain: the kubelet's SIGTERM after the hook
        # would stop scalwsd at once.
        self.assertRegex(script.split("kill -QUIT 1", 1)[1], r"while kill -0 1\b")
        pause = sum(int(s) for s in re.findall(r"sleep (\d+);", script.split("kill -QUIT")[0]))
        drain = duration_seconds(self.r.config["server"]["shutdown_timeout"])
        self.assertGreater(self.r.pod["terminationGracePeriodSeconds"], pause + drain)

    def test_cluster_role_reads_exactly_what_ingressd_reads(self):
        role = self.r.one("ClusterRole")
        granted = set()
        for rule in role["rules"]:
            self.assertEqual(sorted(rule["verbs"]), ["get", "list", "watch"], rule)
            self.assertNotIn("resourceNames", rule)
            granted |= {(g, res) for g in rule["apiGroups"] for res in rule["resources"]}
        self.assertEqual(granted, READS)
        self.assertEqual(self.r.all("Role"), [])
        binding = self.r.one("ClusterRoleBinding")
        self.assertEqual(binding["roleRef"]["name"], role["metadata"]["name"])
        sa = self.r.one("ServiceAccount")["metadata"]
        self.assertEqual(binding["subjects"],
                         [{"kind": "ServiceAccount", "name": sa["name"],
                           "namespace": sa["namespace"]}])
        self.assertEqual(self.r.pod["serviceAccountName"], sa["name"])

    def test_ingress_class_names_the_controller(self):
        cls = self.r.one("IngressClass")
        self.assertEqual((cls["metadata"]["name"], cls["spec"]["controller"]),
                         ("scalws", "scalws.io/ingress-controller"))

    def test_service_sends_80_and_443_to_the_pods(self):
        svc = self.r.one("Service")
        labels = self.r.workload["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(svc["spec"]["selector"].items(), labels.items())
        self.assertEqual(self.r.workload["spec"]["selector"]["matchLabels"],
                         svc["spec"]["selector"])
        named = {p["name"]: p["containerPort"] for p in self.r.containers["scalwsd"]["ports"]}
        listen = " ".join(str(x) for x in self.r.config["server"]["listen"])
        for port in svc["spec"]["ports"]:
            self.assertIn(port["port"], (80, 443))
            self.assertIn(":%d" % named[port["targetPort"]], listen)

    def test_scalwsd_accepts_the_configmap_file(self):
        out = self.check(self.r.config_text)
        self.assertIn("test is successful", out)

    def check(self, text):
        """scalwsd -t on the ConfigMap's file, with the default
        certificate's paths pointed at one made here."""
        d = tempfile.mkdtemp(prefix="scalws-k8s-")
        self.addCleanup(shutil.rmtree, d, True)
        crt, key = make_pair(d, "default", "scalws-default-certificate", kind="ec")
        text = text.replace("/etc/scalws/tls/default.crt", crt)
        text = text.replace("/etc/scalws/tls/default.key", key)
        path = os.path.join(d, "scalws.yaml")
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.run([binary(), "-t", "-c", path], capture_output=True, text=True,
                           timeout=TIMEOUT, cwd=d)
        return p.stdout + p.stderr


@unittest.skipUnless(HAVE_KUBECTL, "kubectl is not installed")
class Deployment(Manifests, unittest.TestCase):
    overlay = "deployment"
    kind = "Deployment"

    def test_replicas_and_a_rolling_update_that_keeps_capacity(self):
        spec = self.r.workload["spec"]
        self.assertGreaterEqual(spec["replicas"], 2)
        self.assertEqual(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0)


@unittest.skipUnless(HAVE_KUBECTL, "kubectl is not installed")
class DaemonSet(Manifests, unittest.TestCase):
    overlay = "daemonset"
    kind = "DaemonSet"

    def test_no_deployment_fields_and_host_ports(self):
        spec = self.r.workload["spec"]
        self.assertNotIn("replicas", spec)
        self.assertNotIn("strategy", spec)
        self.assertEqual(spec["updateStrategy"]["type"], "RollingUpdate")
        ports = {p["name"]: p.get("hostPort") for p in self.r.containers["scalwsd"]["ports"]}
        self.assertEqual(ports, {"http": 80, "https": 443})
