"""``make demo``: Headroom's rollout on a real (local) control plane, narrated.

By default it starts an embedded cluster (etcd, kube-apiserver, controller-manager,
scheduler, KWOK nodes), runs the webhook and the reconciler against it and walks the
runbook: dry-run, enforce, a pod alone on a node climbing to its cap, neighbours
shrinking it, a ``limits.cpu`` ResourceQuota denied. ``--cluster=current`` uses the
current kubeconfig's cluster instead (``$KUBECONFIG``, else ``~/.kube/config``): it expects
Headroom installed there, changes no cluster-wide setting, and only touches the namespace
it creates (labelled with this run's id). A ``$KUBECONFIG`` alone never picks it: a real
cluster is only ever an explicit choice.
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
from devcluster.headroom import LocalHeadroom
from devcluster.nodes import simulated_node

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
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "registry.example/demo:1",
                "resources": {
                    "requests": {"cpu": cpu, "memory": "256Mi"},
                    "limits": {"memory": "512Mi"},
                },
            }
        ]
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
        headroom: LocalHeadroom | None = None
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
            with self.step("install the CRD chart with helm (make install)"):
                subprocess.run(
                    [str(plane.tool("helm")), "upgrade", "--install", "kube-headroom-crds",
                     str(Path(__file__).resolve().parent.parent / "chart" / "kube-headroom-crds")],
                    env=dict(plane.environ()), check=True, capture_output=True,
                )  # fmt: skip
                cluster.run(
                    "wait", "crd/headroomconfigs.kube-headroom.dev",
                    "--for=condition=Established", "--timeout=60s",
                )  # fmt: skip
            headroom = LocalHeadroom(
                kubeconfig=plane.kubeconfig,
                work_dir=work / "headroom",
                helm=plane.tool("helm"),
                kubectl=plane.tool("kubectl"),
            )
            with self.step("start the webhook (TLS, local certificates) and register it"):
                headroom.start_webhook()
                headroom.register_webhooks()
            with self.step("start the reconciler"):
                headroom.start_reconciler()
            code = self.walk(cluster, embedded=True)
            if self.args.keep:
                self.keep(plane, cluster)
            return code
        finally:
            if headroom is not None:
                headroom.stop()
            plane.stop()
            self.say("Stopped the demo cluster.")

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

    def walk(self, cluster: Cluster, *, embedded: bool) -> int:
        ns = self.namespace
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
        self.say(f"\nBefore enrolling: deploy a 500m pod alone on {NODE} in {ns}, and simulate")
        self.own_namespace(cluster)
        cluster.apply(deployment("web", ns, cpu="500m", node=NODE if embedded else None))
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
        self.sh(f"kubectl label ns {ns} {MODE_LABEL}={MODE_MANAGED}")
        with self.step("wait for the dry-run status annotation"):
            pod = wait_for(lambda: (p := self.web_pod(cluster)) and status_of(p) and p)
        if pod is None:
            self.check("dry-run", "the pod gets a status annotation", "none", False)
            return self.summary()
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
        if not embedded:
            self.check(
                "annotation", "the installed Headroom annotates the pod",
                json.dumps(status), bool(status),
            )  # fmt: skip
            return self.finish(cluster)
        self.check(
            "dry-run",
            "annotation says target 5000m (10x cap), limit untouched",
            f"target {status.get('targetLimit')}, limit {cpu_limit_m(pod) or 'none'}",
            status.get("targetLimit") == "5000m"
            and status.get("dryRun") is True
            and cpu_limit_m(pod) is None,
        )
        self.say("\nEnforce")
        self.sh(ENFORCE)
        with self.step("wait for the pod alone on the node to climb to its cap"):
            pod = wait_for(lambda: (p := self.web_pod(cluster)) and cpu_limit_m(p) == 5000 and p)
        self.say(view(cluster, ns))
        self.check(
            "enforce", "web's limit climbs to 5000m", f"{cpu_limit_m(pod) if pod else None}m",
            pod is not None and cpu_limit_m(pod) == 5000,
        )  # fmt: skip
        self.say(f"\nNeighbours: 3 pods requesting 4 cores each land on {NODE}")
        cluster.apply(deployment("batch", ns, cpu="4", replicas=3, node=NODE))
        with self.step("wait for web's limit to shrink toward its request, then its explanation"):
            pod = wait_for(
                lambda: (
                    (p := self.web_pod(cluster))
                    and (cpu_limit_m(p) or 0) < 2000
                    and explained(p)
                    and p
                ),
                timeout=90,
            )
        self.say(view(cluster, ns))
        limit = cpu_limit_m(pod) if pod else None
        self.check(
            "neighbours",
            "web shrinks to 1380m (S=3.5 cores, floor share 875m)",
            f"{limit}m",
            limit == 1380,
        )
        self.say("\nDay 2: why is web throttled?")
        described = self.sh(f"kubectl describe pod -n {ns} {name} | grep -A2 CPULimitAdjusted")
        self.check(
            "describe",
            "a CPULimitAdjusted event explains the shrink",
            "found" if "5000m -> 1380m" in described.stdout else "missing",
            "5000m -> 1380m (node factor 1.28, slack 3.5/16 cores)" in described.stdout,
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
        self.pools(cluster)
        self.say("\nQuota: a limits.cpu ResourceQuota in a managed namespace")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    narrator = Narrator(interactive=not args.non_interactive and sys.stdout.isatty())
    demo = Demo(args=args, narrator=narrator)
    narrator.say("Headroom demo: CPU limits from node slack, via in-place pod resize\n")
    return demo.embedded() if args.cluster == "embedded" else demo.current()


if __name__ == "__main__":
    sys.exit(main())
