"""``make demo``: Headroom's rollout on a real (local) control plane, narrated.

By default it starts an embedded cluster (etcd, kube-apiserver, controller-manager,
scheduler, KWOK nodes), runs the webhook and the reconciler against it and walks the
runbook: dry-run, enforce, a pod alone on a node climbing to its cap, neighbours
shrinking it, a ``limits.cpu`` ResourceQuota denied. ``--cluster=current`` uses the
current kubeconfig's cluster instead (``$KUBECONFIG``, else ``~/.kube/config``): it expects
Headroom installed there, changes no cluster-wide setting, and only touches the namespace
it creates (labelled with this run's id). A ``$KUBECONFIG`` alone never picks it: a real
cluster is only ever an explicit choice.

``--real-nodes`` walks the same runbook on a real kubelet instead: one qemu guest
(``devcluster.realnodes``' workload node, 3 CPUs) with containerd and runc, and after
each step prints the managed container's ``cpu.max`` before and after as the guest's
cgroup shows it. The guest's addresses exist only in a network namespace of its own, so
the demo re-runs itself through ``hack/realnode.sh``, which checks for root, qemu and the
Debian packages, builds what is missing and enters that namespace.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.labels import MODE_LABEL, MODE_MANAGED, STATUS_ANNOTATION
from app.core.quantity import parse_cpu_millis
from devcluster.binaries import locate_binaries
from devcluster.controlplane import ControlPlane
from devcluster.guests import PROBE_IMAGE
from devcluster.headroom import LocalHeadroom, install_crds
from devcluster.kubepods import PodNotStartedError, cpu_max_millis
from devcluster.nodes import simulated_node
from devcluster.realnet import NAMESPACE_ENV
from devcluster.realnodes import WORKLOAD, RealCluster

OWNER_LABEL = "demo.kube-headroom.dev/run"
REPO = Path(__file__).resolve().parent.parent
ENFORCE = """kubectl patch hcfg cluster --type merge -p '{"spec":{"dryRun":false}}'"""
DRY_RUN = """kubectl patch hcfg cluster --type merge -p '{"spec":{"dryRun":true}}'"""
NODE = "demo-node-1"
POOL_NODE = "demo-node-2"
NODES = (NODE, POOL_NODE, "demo-node-3")
POOL_LABEL = "pool"
BATCH_POOL = (
    '[{"name":"batch","nodeSelector":{"matchLabels":{"' + POOL_LABEL + '":"batch"}},'
    '"maxMultiplier":"20"}]'
)
# How long a container may take to start in the emulated guest, or a resize to reach its
# cgroup (measured: 0.7-3.2 s).
CGROUP_TIMEOUT = 60.0


@dataclass(frozen=True)
class Scenario:
    """The walk's pods and the limits the runbook's policy gives them on one kind of node:
    web (the managed pod watched throughout) alone on ``node``, then with three batch
    neighbours in the same namespace."""

    node: str
    web_cpu: str
    batch_cpu: str
    # web's limit alone on the node (its cap), and with the neighbours; why, in words.
    alone_m: int
    alone_why: str
    shrunk_m: int
    shrunk_why: str
    # The CPULimitAdjusted event of the shrink.
    adjusted: str
    # The app container's image and memory; the node pools step needs a second node.
    image: Mapping[str, Any]
    memory: tuple[str, str]
    pools: bool

    def container(self, cpu: str) -> dict[str, Any]:
        request, limit = self.memory
        return {
            "name": "app",
            **self.image,
            "resources": {
                "requests": {"cpu": cpu, "memory": request},
                "limits": {"memory": limit},
            },
        }


SIMULATED = Scenario(
    node=NODE,
    web_cpu="500m",
    batch_cpu="4",
    alone_m=5000,
    alone_why="10x cap",
    shrunk_m=1380,
    shrunk_why="S=3.5 cores, floor share 875m",
    adjusted="5000m -> 1380m (node factor 1.28, slack 3.5/16 cores)",
    image={"image": "registry.example/demo:1"},
    memory=("256Mi", "512Mi"),
    pools=True,
)
# The 3-CPU guest: a 250m pod's 10x cap is below the node's 3 cores; three 800m
# neighbours leave S=350m over four pods.
REAL = Scenario(
    node=WORKLOAD.name,
    web_cpu="250m",
    batch_cpu="800m",
    alone_m=2500,
    alone_why="10x cap, under the node's 3 cores",
    shrunk_m=340,
    shrunk_why="S=0.35 cores, floor share 88m",
    adjusted="2500m -> 340m (node factor 1.13, slack 0.35/3 cores)",
    # The probe image is on the guest's disk (hack/build-realnode.sh): nothing is pulled.
    image={"image": PROBE_IMAGE, "imagePullPolicy": "Never", "args": ["sleep"]},
    memory=("32Mi", "64Mi"),
    pools=False,
)


@dataclass
class Check:
    step: str
    expected: str
    observed: str = "not reached"
    passed: bool = False


@dataclass
class Narrator:
    """Progress for a person at a terminal, or plain lines for CI logs."""

    interactive: bool
    out: Any = sys.stdout
    started: float = field(default_factory=time.monotonic)

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[None]:
        begun = time.monotonic()
        stop = threading.Event()
        spinner: threading.Thread | None = None
        if self.interactive:

            def spin() -> None:
                for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
                    if stop.wait(0.1):
                        return
                    elapsed = time.monotonic() - begun
                    print(
                        f"\r  {frame} {title} ({elapsed:.0f}s)", end="", file=self.out, flush=True
                    )

            spinner = threading.Thread(target=spin, daemon=True)
            spinner.start()
        else:
            self.say(f"  … {title}")
        try:
            yield
        finally:
            stop.set()
            if spinner is not None:
                spinner.join()
                print("\r\033[K", end="", file=self.out)
        self.say(f"  ✓ {title} ({time.monotonic() - begun:.1f}s)")


class Cluster:
    """kubectl against the demo's cluster."""

    def __init__(self, kubectl: Path, kubeconfig: Path) -> None:
        self.kubectl_bin = kubectl
        self.kubeconfig = kubeconfig

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [str(self.kubectl_bin), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout if result.returncode == 0 else result.stderr

    def apply(self, obj: dict[str, Any]) -> None:
        self.run("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(obj))

    def get(self, *args: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.run("get", *args, "-o", "json"))
        return document

    def pods(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get("pods", "-n", namespace)["items"]
        return items


def deployment(
    name: str,
    namespace: str,
    *,
    cpu: str,
    replicas: int = 1,
    node: str | None = None,
    scenario: Scenario = SIMULATED,
) -> dict[str, Any]:
    # A short grace period: scaled-down neighbours leave their node promptly.
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 2,
        "containers": [scenario.container(cpu)],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def cpu_limit_m(pod: dict[str, Any]) -> int | None:
    total = 0
    for container in pod["spec"]["containers"]:
        limit = container.get("resources", {}).get("limits", {}).get("cpu")
        if limit is None:
            return None
        total += parse_cpu_millis(str(limit))
    return total


def explained(pod: dict[str, Any]) -> bool:
    """The pod's status annotation names the limit it has: its explanation has caught up
    (explanations follow the resizes once the node settles)."""
    target = status_of(pod).get("targetLimit")
    return target is not None and target == f"{cpu_limit_m(pod)}m"


def status_of(pod: dict[str, Any]) -> dict[str, Any]:
    text = pod["metadata"].get("annotations", {}).get(STATUS_ANNOTATION)
    return json.loads(text) if text else {}


def view(cluster: Cluster, namespace: str) -> str:
    """The live table: pods, requests, limits, and the node's factor and slack."""
    rows = [["POD", "NODE", "REQUEST", "LIMIT", "TARGET", "FACTOR", "SLACK"]]
    for pod in sorted(cluster.pods(namespace), key=lambda p: str(p["metadata"]["name"])):
        if pod["metadata"].get("deletionTimestamp"):
            continue
        request = sum(
            parse_cpu_millis(str(c.get("resources", {}).get("requests", {}).get("cpu", "0")))
            for c in pod["spec"]["containers"]
        )
        limit = cpu_limit_m(pod)
        status = status_of(pod)
        rows.append(
            [
                pod["metadata"]["name"],
                pod["spec"].get("nodeName", "-"),
                f"{request}m",
                "none" if limit is None else f"{limit}m",
                str(status.get("targetLimit", "-")),
                str(status.get("factor", "-")),
                str(status.get("slack", "-")),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        ("    " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
        for r in rows
    )


def cpu_max_text(text: str) -> str:
    """A ``cpu.max`` as the cgroup shows it, and what it means: ``250000 100000 (2500m)``,
    ``max 100000 (no limit)``."""
    millis = cpu_max_millis(text)
    return f"{text} ({'no limit' if millis is None else f'{millis}m'})"


def cpu_max_line(where: str, before: str, after: str) -> str:
    """The line printed after each step on real nodes."""
    moved = "unchanged" if before == after else "changed"
    return f"    cpu.max of {where}: {cpu_max_text(before)} -> {cpu_max_text(after)} ({moved})"


def wait_for(what: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(interval)
    return value


class Demo:
    def __init__(self, *, args: argparse.Namespace, narrator: Narrator) -> None:
        self.args = args
        self.say = narrator.say
        self.step = narrator.step
        self.checks: list[Check] = []
        self.run_id = uuid.uuid4().hex[:6]
        self.scenario = REAL if args.real_nodes else SIMULATED
        # The real nodes, whose cgroups the walk reads after each step.
        self.real: RealCluster | None = None
        # The runbook's own namespace on the embedded cluster; a fresh one elsewhere.
        self.namespace = "team-a" if args.cluster == "embedded" else f"headroom-demo-{self.run_id}"
        self.env: dict[str, str] = dict(os.environ)

    def use_tools(self, bin_dir: Path, kubeconfig: Path) -> None:
        """kubectl, helm and kubectl-headroom on PATH, aimed at the demo's cluster."""
        path = f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": path + os.environ["PATH"]}

    def check(self, step: str, expected: str, observed: str, passed: bool) -> None:
        self.checks.append(Check(step, expected, observed, passed))
        self.say(f"    {'✓' if passed else '✗'} {expected}: {observed}")

    def own_namespace(self, cluster: Cluster) -> None:
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": self.namespace, "labels": {OWNER_LABEL: self.run_id}},
            }
        )

    def cleanup(self, cluster: Cluster) -> None:
        if self.real is not None:
            # Deleted at once, the pods leave the real node with the walk.
            cluster.run(
                "delete", "pods", "--all", "-n", self.namespace, "--grace-period=0", "--force",
                check=False,
            )  # fmt: skip
        # Only namespaces this run created, found by the run's own label.
        cluster.run(
            "delete", "namespace", "-l", f"{OWNER_LABEL}={self.run_id}", "--wait=false",
            check=False,
        )  # fmt: skip

    def web_pod(self, cluster: Cluster) -> dict[str, Any] | None:
        return self.app_pod(cluster, "web")

    def app_pod(self, cluster: Cluster, app: str) -> dict[str, Any] | None:
        pods = [
            p
            for p in cluster.pods(self.namespace)
            if p["metadata"]["labels"].get("app") == app
            and not p["metadata"].get("deletionTimestamp")
            and p["spec"].get("nodeName")
        ]
        return pods[0] if pods else None

    def simulated(self, command: str, pod: str) -> dict[str, Any]:
        """One pod's row of ``kubectl headroom simulate … -o json``; {} if it is not listed."""
        result = self.sh(command, show=False)
        try:
            rows = json.loads(result.stdout)["pods"]
        except (ValueError, KeyError):
            return {}
        return next((row for row in rows if row["pod"] == pod), {})

    def summary(self) -> int:
        self.say("\nSummary")
        rows = [["STEP", "EXPECTED", "OBSERVED", ""]] + [
            [c.step, c.expected, c.observed, "✓" if c.passed else "✗"] for c in self.checks
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for row in rows:
            self.say(
                ("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))).rstrip()
            )
        failed = [c for c in self.checks if not c.passed]
        self.say(
            "\nAll steps behaved as the runbook says."
            if not failed
            else f"\n{len(failed)} step(s) did not behave as expected."
        )
        return 1 if failed else 0

    # -- the walk-through --------------------------------------------------------

    def embedded(self) -> int:
        with self.step("control-plane binaries (built once, then reused)"):
            bin_dir = locate_binaries(build=True)
        work = Path(tempfile.mkdtemp(prefix="headroom-demo-"))
        plane = ControlPlane(work_dir=work / "control-plane", bin_dir=bin_dir)
        try:
            with self.step("start etcd, kube-apiserver, controller-manager, scheduler, KWOK"):
                plane.start()
            cluster = Cluster(plane.tool("kubectl"), plane.kubeconfig)
            self.use_tools(bin_dir, plane.kubeconfig)
            with self.step(f"create {len(NODES)} simulated 16-core nodes"):
                for name in NODES:
                    cluster.run("create", "-f", "-", input=json.dumps(simulated_node(name)))
                for name in NODES:
                    cluster.run("wait", f"node/{name}", "--for=condition=Ready", "--timeout=60s")
            with self.headroom(plane, cluster, work):
                code = self.walk(cluster, embedded=True)
                if self.args.keep:
                    self.keep(plane, cluster)
            return code
        finally:
            plane.stop()
            self.say("Stopped the demo cluster.")

    def real_nodes(self) -> int:
        """The walk on a real kubelet: the control plane and one guest, booted here (in
        the network namespace hack/realnode.sh made)."""
        work = Path(tempfile.mkdtemp(prefix="headroom-demo-"))
        # qemu's agent sockets need a short path.
        run_dir = Path(tempfile.mkdtemp(prefix="hrq", dir="/tmp"))
        # One guest, the workload node: the walk needs no other, and booting an emulated
        # guest takes both of a small machine's cores for half a minute.
        real = RealCluster(work_dir=work, run_dir=run_dir, specs=(WORKLOAD,))
        try:
            with self.step(
                f"start the control plane and boot {WORKLOAD.name} (kubelet, containerd and "
                "runc in a qemu guest) until Ready"
            ):
                real.start()
            return self.on_real_nodes(real, work)
        finally:
            real.stop()
            shutil.rmtree(run_dir, ignore_errors=True)
            self.say("Stopped the real node and its control plane.")

    def on_real_nodes(self, real: RealCluster, work: Path) -> int:
        """The walk on ``real``'s workload node, which it leaves empty again."""
        plane = real.plane
        cluster = Cluster(plane.tool("kubectl"), plane.kubeconfig)
        self.use_tools(plane.bin_dir, plane.kubeconfig)
        self.real = real
        with self.headroom(plane, cluster, work):
            return self.walk(cluster, embedded=True)

    @contextlib.contextmanager
    def headroom(self, plane: ControlPlane, cluster: Cluster, work: Path) -> Iterator[None]:
        """The CRD chart, the webhook (registered) and the reconciler, for the walk; the
        webhook's registration is taken back after it."""
        with self.step("install the CRD chart with helm (make install)"):
            install_crds(plane)
        headroom = LocalHeadroom(
            kubeconfig=plane.kubeconfig,
            work_dir=work / "headroom",
            helm=plane.tool("helm"),
            kubectl=plane.tool("kubectl"),
        )
        registered: list[str] = []
        try:
            with self.step("start the webhook (TLS, local certificates) and register it"):
                headroom.start_webhook()
                registered = headroom.register_webhooks()
            with self.step("start the reconciler"):
                headroom.start_reconciler()
            yield
        finally:
            if registered:
                # Bounded: after a Ctrl-C the control plane's own processes (in the same
                # process group) may already be gone.
                cluster.run(
                    "delete", "--ignore-not-found", "--request-timeout=5s", *registered,
                    check=False,
                )  # fmt: skip
            headroom.stop()

    def keep(self, plane: ControlPlane, cluster: Cluster) -> None:
        self.say(
            "\nThe cluster keeps running (Ctrl-C stops it). Try the runbook by hand:\n"
            f"  export KUBECONFIG={plane.kubeconfig}\n"
            f"  export PATH={plane.bin_dir}:{Path(sys.executable).parent}:$PATH\n"
            f"  kubectl get pods -n {self.namespace} -o wide\n"
            f"  kubectl describe pod -n {self.namespace} <pod> | grep -A2 CPULimitAdjusted\n"
            f"  kubectl headroom explain -n {self.namespace} <pod>\n"
            "  kubectl headroom status\n"
        )
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()

    def sh(self, command: str, *, show: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a runbook command verbatim (bash, the demo cluster's KUBECONFIG and tools)."""
        self.say(f"    $ {command}")
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if show:
            for line in (result.stdout + result.stderr).rstrip().splitlines():
                self.say(f"      {line}")
        return result

    def unchanged_for(self, cluster: Cluster, limit: int | None, seconds: float) -> bool:
        """web's limit stays ``limit`` for ``seconds`` (several debounce periods)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            pod = self.web_pod(cluster)
            if pod is None or cpu_limit_m(pod) != limit:
                return False
            time.sleep(0.5)
        return True

    @contextlib.contextmanager
    def watched(self, cluster: Cluster, step: str) -> Iterator[None]:
        """On real nodes: web's cpu.max in its guest before the step, and after it once the
        kubelet has applied what the step did to web's limit."""
        if self.real is None:
            yield
            return
        before, _ = self.web_cpu_max(cluster, settled=False)
        yield
        after, limit = self.web_cpu_max(cluster, settled=True)
        self.say(cpu_max_line(f"web/app on {self.scenario.node}", before, after))
        self.check(
            step,
            "the guest's cpu.max is web's limit",
            f"limit {'none' if limit is None else f'{limit}m'}, cpu.max {after}",
            cpu_max_millis(after) == limit,
        )

    def web_cpu_max(self, cluster: Cluster, *, settled: bool) -> tuple[str, int | None]:
        """web's app container's cpu.max in its guest and the limit web's spec has, once
        the container runs (and, when ``settled``, once the two agree or the kubelet has
        had ``CGROUP_TIMEOUT``)."""
        real = self.real
        assert real is not None
        deadline = time.monotonic() + CGROUP_TIMEOUT
        while True:
            seen: tuple[str, int | None] | None = None
            pod = self.web_pod(cluster)
            with contextlib.suppress(PodNotStartedError):
                if pod is not None:
                    seen = real.cpu_max(pod, container="app"), cpu_limit_m(pod)
            if seen is not None and (not settled or cpu_max_millis(seen[0]) == seen[1]):
                return seen
            if time.monotonic() > deadline:
                if seen is None:
                    raise RuntimeError(f"web's container did not start on {self.scenario.node}")
                return seen
            time.sleep(0.5)

    def walk(self, cluster: Cluster, *, embedded: bool) -> int:
        ns = self.namespace
        scenario = self.scenario
        node = scenario.node
        self.say(f"\nPreflight for namespace {ns}")
        preflight = self.sh(f"kubectl headroom preflight -n {ns}")
        if shutil.which("jq"):
            self.sh(
                "kubectl get resourcequota -A -o json | jq -r '.items[] | "
                'select(.spec.hard["limits.cpu"]) | "\\(.metadata.namespace)/\\(.metadata.name)"\''
            )
        if embedded:
            self.say(
                "    (cert-manager is the one expected blocker here: the demo serves the "
                "webhook with locally generated certificates)"
            )
            self.check(
                "preflight",
                "only cert-manager blocks",
                f"exit {preflight.returncode}",
                preflight.returncode == 1 and "cert-manager" in preflight.stdout
                and "1 blocker(s)" in preflight.stdout,
            )  # fmt: skip
            self.say("\nThe config singleton, in dry-run")
            self.sh("kubectl apply -k config/samples")
            self.sh("kubectl get hcfg cluster")
        self.say(
            f"\nBefore enrolling: deploy a {scenario.web_cpu} pod alone on {node} in {ns}, "
            "and simulate"
        )
        self.own_namespace(cluster)
        cluster.apply(
            deployment(
                "web", ns, cpu=scenario.web_cpu, node=node if embedded else None,
                scenario=scenario,
            )
        )  # fmt: skip
        with self.step("wait for web to be scheduled"):
            before = wait_for(lambda: self.web_pod(cluster))
        self.sh(f"kubectl headroom simulate --enroll {ns}")
        row = (
            self.simulated(f"kubectl headroom simulate --enroll {ns} -n {ns} -o json",
                           before["metadata"]["name"])
            if before
            else {}
        )  # fmt: skip
        predicted = row.get("simulatedLimit")
        self.say(f"\nDry-run: enrol namespace {ns}")
        alone, shrunk = scenario.alone_m, scenario.shrunk_m
        with self.watched(cluster, "dry-run"):
            self.sh(f"kubectl label ns {ns} {MODE_LABEL}={MODE_MANAGED}")
            with self.step("wait for the dry-run status annotation"):
                pod = wait_for(lambda: (p := self.web_pod(cluster)) and status_of(p) and p)
            if pod is not None:
                name = pod["metadata"]["name"]
                jq = " | jq" if shutil.which("jq") else ""
                self.sh(
                    f"kubectl get pod -n {ns} {name} "
                    f"-o jsonpath='{{.metadata.annotations.kube-headroom\\.dev/status}}'{jq}"
                )
                self.say(view(cluster, ns))
                status = status_of(pod)
                self.check(
                    "simulate",
                    "simulate, run before enrolling, predicted the dry-run target",
                    f"predicted {predicted}, annotation {status.get('targetLimit')}",
                    predicted is not None and predicted == status.get("targetLimit"),
                )
                if embedded:
                    self.check(
                        "dry-run",
                        f"annotation says target {alone}m ({scenario.alone_why}), limit untouched",
                        f"target {status.get('targetLimit')}, limit {cpu_limit_m(pod) or 'none'}",
                        status.get("targetLimit") == f"{alone}m"
                        and status.get("dryRun") is True
                        and cpu_limit_m(pod) is None,
                    )
        if pod is None:
            self.check("dry-run", "the pod gets a status annotation", "none", False)
            return self.summary()
        if not embedded:
            self.check(
                "annotation", "the installed Headroom annotates the pod",
                json.dumps(status), bool(status),
            )  # fmt: skip
            return self.finish(cluster)
        self.say("\nEnforce")
        with self.watched(cluster, "enforce"):
            self.sh(ENFORCE)
            with self.step("wait for the pod alone on the node to climb to its cap"):
                pod = wait_for(
                    lambda: (p := self.web_pod(cluster)) and cpu_limit_m(p) == alone and p
                )
            self.say(view(cluster, ns))
            self.check(
                "enforce", f"web's limit climbs to {alone}m",
                f"{cpu_limit_m(pod) if pod else None}m",
                pod is not None and cpu_limit_m(pod) == alone,
            )  # fmt: skip
        self.say(f"\nNeighbours: 3 pods requesting {scenario.batch_cpu} CPU each land on {node}")
        with self.watched(cluster, "neighbours"):
            cluster.apply(
                deployment(
                    "batch", ns, cpu=scenario.batch_cpu, replicas=3, node=node,
                    scenario=scenario,
                )
            )  # fmt: skip
            with self.step(
                "wait for web's limit to shrink toward its request, then its explanation"
            ):
                pod = wait_for(
                    lambda: (
                        (p := self.web_pod(cluster))
                        and (cpu_limit_m(p) or 0) < alone
                        and explained(p)
                        and p
                    ),
                    timeout=90,
                )
            self.say(view(cluster, ns))
            limit = cpu_limit_m(pod) if pod else None
            self.check(
                "neighbours",
                f"web shrinks to {shrunk}m ({scenario.shrunk_why})",
                f"{limit}m",
                limit == shrunk,
            )
        self.say("\nDay 2: why is web throttled?")
        described = self.sh(f"kubectl describe pod -n {ns} {name} | grep -A2 CPULimitAdjusted")
        self.check(
            "describe",
            "a CPULimitAdjusted event explains the shrink",
            "found" if f"{alone}m -> {shrunk}m" in described.stdout else "missing",
            scenario.adjusted in described.stdout,
        )
        self.sh(f"kubectl headroom explain -n {ns} {name}")
        explanation = self.sh(f"kubectl headroom explain -n {ns} {name} -o json", show=False)
        numbers = json.loads(explanation.stdout).get("annotation") if explanation.stdout else None
        now = status_of(self.web_pod(cluster) or {"metadata": {}})
        matches = bool(numbers) and all(now.get(k) == v for k, v in (numbers or {}).items())
        self.check(
            "explain",
            "kubectl headroom explain matches the annotation",
            "same numbers" if matches else f"explain {numbers}, annotation {now}",
            matches,
        )
        if scenario.pools:
            self.pools(cluster)
        else:
            self.say(
                "\n(Node pools need a second node: `make demo` shows them on simulated nodes.)"
            )
        self.say("\nQuota: a limits.cpu ResourceQuota in a managed namespace")
        with self.watched(cluster, "quota"):
            denial = cluster.run(
                "create", "-n", ns, "-f", "-",
                input=json.dumps({
                    "apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": "cpu-limits"}, "spec": {"hard": {"limits.cpu": "8"}},
                }),
                check=False,
            )  # fmt: skip
            self.say(f"    {denial.strip()}")
            self.check(
                "quota",
                "limits.cpu quota denied, fix named",
                "denied" if "denied the request" in denial else "accepted",
                "denied the request" in denial and "requests.cpu" in denial,
            )
        self.sh("kubectl headroom status")
        self.say("\nRollback: each stop button freezes limits; none removes one")
        for command, stop, replicas in (
            (DRY_RUN, "dryRun: true", 1),
            (f"kubectl label ns {ns} {MODE_LABEL}-", "label removed", 2),
            ("kubectl delete hcfg cluster", "config deleted", 0),
        ):
            with self.watched(cluster, "rollback"):
                self.sh(command)
                self.say(f"    (batch scaled to {replicas}: the node's slack changes)")
                cluster.run("scale", "deployment", "batch", "-n", ns, f"--replicas={replicas}")
                frozen = self.unchanged_for(cluster, limit, seconds=6)
                self.check(
                    "rollback",
                    f"{stop}, neighbours change: web stays {limit}m",
                    f"{cpu_limit_m(self.web_pod(cluster) or {'spec': {'containers': []}})}m",
                    frozen,
                )
        return self.finish(cluster)

    def pools(self, cluster: Cluster) -> None:
        """A second node pool, batch, with a multiplier of its own."""
        ns = self.namespace
        self.say(f"\nNode pools: a 500m pod alone on {POOL_NODE}, then a batch pool there")
        cluster.apply(deployment("reports", ns, cpu="500m", node=POOL_NODE))
        with self.step("wait for reports to climb to the default 10x cap"):
            wait_for(lambda: (p := self.app_pod(cluster, "reports")) and cpu_limit_m(p) == 5000)
        self.sh(f"kubectl label node {POOL_NODE} {POOL_LABEL}=batch")
        set_pool = f"nodePools={BATCH_POOL}"
        self.sh(f"kubectl headroom simulate --set '{set_pool}'")
        reports = self.app_pod(cluster, "reports") or {"metadata": {"name": ""}}
        row = self.simulated(
            f"kubectl headroom simulate -n {ns} --set '{set_pool}' -o json",
            reports["metadata"]["name"],
        )
        self.sh(
            "kubectl patch hcfg cluster --type merge -p "
            f'\'{{"spec":{{"nodePools":{BATCH_POOL}}}}}\''
        )
        with self.step(
            "wait for reports to climb to the batch pool's 20x cap, then its explanation"
        ):
            pod = wait_for(
                lambda: (
                    (p := self.app_pod(cluster, "reports"))
                    and cpu_limit_m(p) == 10000
                    and explained(p)
                    and p
                )
            )
        self.say(view(cluster, ns))
        status = status_of(pod) if pod else {}
        self.check(
            "pools",
            "the batch pool lifts reports to 20x (10000m), as simulated",
            f"simulated {row.get('simulatedLimit')} ({row.get('pool')}), "
            f"limit {cpu_limit_m(pod) if pod else None}m, annotation pool {status.get('pool')}",
            pod is not None
            and row.get("simulatedLimit") == "10000m"
            and row.get("pool") == "batch"
            and status.get("pool") == "batch",
        )

    def finish(self, cluster: Cluster) -> int:
        if not self.args.keep:
            self.cleanup(cluster)
        return self.summary()

    def current(self) -> int:
        kubeconfig = current_kubeconfig(os.environ)
        if not kubeconfig.is_file():
            self.say(f"No kubeconfig at {kubeconfig}: set KUBECONFIG to the cluster's kubeconfig.")
            return 2
        bin_dir = locate_binaries(build=True)
        cluster = Cluster(bin_dir / "kubectl", kubeconfig)
        self.use_tools(bin_dir, kubeconfig)
        self.say(
            f"Using the current kubeconfig's cluster ({kubeconfig}); only {self.namespace} is "
            "touched."
        )
        crd = cluster.run("get", "crd", "headroomconfigs.kube-headroom.dev", check=False)
        if "NotFound" in crd or "error" in crd.lower():
            self.say(
                "Headroom is not installed here: run `make install` and `make deploy IMG=…` first."
            )
            return 2
        try:
            return self.walk(cluster, embedded=False)
        finally:
            if not self.args.keep:
                self.cleanup(cluster)


def current_kubeconfig(environ: Mapping[str, str]) -> Path:
    """The kubeconfig kubectl would read first: $KUBECONFIG's first file, else ~/.kube/config."""
    listed = [path for path in environ.get("KUBECONFIG", "").split(os.pathsep) if path]
    return Path(listed[0]).expanduser() if listed else Path.home() / ".kube" / "config"


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    parser.add_argument(
        "--non-interactive", action="store_true", help="plain progress lines, no spinner (CI)"
    )
    parser.add_argument(
        "--cluster",
        choices=("embedded", "current"),
        default="embedded",
        help="embedded local cluster (default, whatever $KUBECONFIG says), or the current "
        "kubeconfig's cluster",
    )
    parser.add_argument(
        "--real-nodes",
        action="store_true",
        help="a real kubelet in a qemu guest instead of simulated nodes, and the managed "
        "container's cpu.max before and after each step (root, qemu)",
    )
    return parser


def options(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed arguments; combinations that cannot work are refused with the reason."""
    choices = parser()
    args = choices.parse_args(argv)
    if args.real_nodes and args.cluster != "embedded":
        choices.error("--real-nodes boots a cluster of its own: drop --cluster=current")
    if args.real_nodes and args.keep:
        choices.error(
            "--real-nodes cannot --keep: its cluster lives in a network namespace of its own, "
            "out of this shell's reach"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    args = options(given)
    if args.real_nodes and not os.environ.get(NAMESPACE_ENV):
        # hack/realnode.sh checks for root, qemu and the packages, builds what is missing,
        # and runs this again in a network namespace of its own. It replaces this process,
        # so a Ctrl-C reaches the demo that owns the guest, and the guest's cleanup.
        script = str(REPO / "hack" / "realnode.sh")
        os.execvp("bash", ["bash", script, "--demo", *given])  # noqa: S606 (a fixed script)
    narrator = Narrator(interactive=not args.non_interactive and sys.stdout.isatty())
    demo = Demo(args=args, narrator=narrator)
    narrator.say("Headroom demo: CPU limits from node slack, via in-place pod resize\n")
    if args.real_nodes:
        return demo.real_nodes()
    return demo.embedded() if args.cluster == "embedded" else demo.current()


if __name__ == "__main__":
    sys.exit(main())
