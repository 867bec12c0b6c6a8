"""The end-to-end tier: the operator's install path with every part real.

``make e2e`` (``hack/e2e.sh``) builds what is missing and the images, and runs this package
on the real-node fleet (``tests/fleet.py``) in a network and mount namespace of its own:
real kubelets in qemu guests, with containerd, runc and kube-proxy, pulling through a
local OCI registry that mirrors the published one. The package brings up, narrating as it
goes: both charts and the images in that registry, cert-manager's controller and
cainjector (processes beside the control plane) and the Prometheus Operator (a pod, from
its release's own manifests). The fixtures
then walk the runbook: install from OCI, upgrade with metrics TLS and Prometheus, enforce.
They are package-scoped: once the last test here ends, what they installed is uninstalled
and the nodes are left empty for the real-node tier, which shares the session's fleet.

Outside ``make e2e`` these tests are deselected (plain ``pytest`` lists them as such).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from app.core.apipaths import PODS
from devcluster import ControlPlane, crds_dir
from devcluster.addons import (
    AddonPaths,
    HostProcess,
    Registry,
    addon_paths,
    prometheus_operator_kustomization,
    start_cert_manager,
)
from devcluster.binaries import pinned_versions
from devcluster.containers import (
    HEADROOM_IMAGE,
    OPERATOR_IMAGE,
    PROMETHEUS_IMAGE,
    RELOADER_IMAGE,
    Engine,
    build_engine,
)
from devcluster.demo import Narrator
from devcluster.kubeapi import KubeAPI
from devcluster.realnodes import WORKLOAD, RealCluster
from tests.cluster_helpers import harness_tier
from tests.e2e import builders
from tests.fleet import OPERATOR_REGISTRY, PUBLISHED_REGISTRY
from tests.integration import conftest as integration
from tests.unit.docs.markdown import RUNBOOK, shell_commands

HARNESS_ENV = "HEADROOM_E2E"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "_artifacts" / "e2e"
RELEASE = "kube-headroom"
RELEASE_NAMESPACE = "kube-headroom-system"
MONITORING = "monitoring"
PROMETHEUS = "headroom"
CHART = yaml.safe_load((REPO / "chart/kube-headroom/Chart.yaml").read_text())
VALUES = yaml.safe_load((REPO / "chart/kube-headroom/values.yaml").read_text())
# The chart's image, as every pod spec names it; the nodes pull it through a mirror.
CHART_IMAGE = f"{VALUES['image']['repository']}:{CHART['appVersion']}"
# Where the chart's image goes in a registry: its repository without the registry host.
IMAGE_PATH = VALUES["image"]["repository"].split("/", 1)[1]
# The runbook's chart repository, below the registry host: oci://ghcr.io/<this>/<chart>.
CHART_REPOSITORY_PATH = "karlkfi/charts"
# What hack/e2e.sh builds into the build store.
BUILT_IMAGE = HEADROOM_IMAGE
# Where the runbook's workload runs: the fleet's node of the default CPU manager policy.
WORKLOAD_NODE = WORKLOAD.name
# Prometheus's ClusterRole and its binding (builders.prometheus_rbac).
PROMETHEUS_RBAC = f"{MONITORING}-prometheus"
# The operator's kustomization, in the package's work directory.
OPERATOR_DIR = "prometheus-operator"
# The operator's pods, and the one its Prometheus object becomes.
OPERATOR_SELECTOR = "app.kubernetes.io/name=prometheus-operator"
PROMETHEUS_SELECTOR = f"operator.prometheus.io/name={PROMETHEUS}"
# Namespaces this package makes, deleted when it ends.
NAMESPACES = ("team-a", "e2e-admission", MONITORING, "cert-manager", RELEASE_NAMESPACE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: the end-to-end install path (make e2e)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # They need root, qemu, podman and a network namespace of their own: make e2e.
    harness_tier(config, items, here=Path(__file__).parent, marker="e2e", env=HARNESS_ENV)


class _Terminal:
    """Narration straight to the terminal, past pytest's output capture."""

    def __init__(self, config: pytest.Config) -> None:
        self._capture = config.pluginmanager.getplugin("capturemanager")

    def write(self, text: str) -> int:
        with self._capture.global_and_fixture_disabled():
            sys.stdout.write(text)
            sys.stdout.flush()
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()


@dataclass(frozen=True)
class ChartPod:
    """A pod as the API server reports it once its kubelet has started it."""

    name: str
    uid: str
    ip: str
    node: str

    @classmethod
    def of(cls, pod: dict[str, Any]) -> ChartPod:
        metadata = pod["metadata"]
        return cls(
            metadata["name"], metadata["uid"], pod["status"]["podIP"], pod["spec"]["nodeName"]
        )


def is_ready(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod.get("status", {}).get("conditions", [])
    )


@dataclass
class Stack:
    cluster: RealCluster
    registry: Registry
    build: Engine
    paths: AddonPaths
    narrator: Narrator
    work: Path
    processes: list[HostProcess] = field(default_factory=list)
    prometheus_image: str = ""
    # The third-party CRDs this package applied (cert-manager's, the operator's, VPA's).
    crds: list[Path] = field(default_factory=list)

    @property
    def plane(self) -> ControlPlane:
        return self.cluster.plane

    @property
    def api(self) -> KubeAPI:
        return self.cluster.api

    @property
    def say(self) -> Callable[[str], None]:
        return self.narrator.say

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return self.plane.kubectl(*args, input=input, check=check)

    def apply(self, *objects: dict[str, Any]) -> None:
        self.kubectl(
            "apply", "--server-side", "-f", "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
        )  # fmt: skip

    def get(self, *args: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json"))
        return found

    def environ(self) -> dict[str, str]:
        """What an operator's shell has: the cluster, the tools, and trust in the registry."""
        helm_home = self.work / "helm"
        return {
            **self.plane.environ(),
            "PATH": f"{self.plane.bin_dir}{os.pathsep}{Path(sys.executable).parent}"
            f"{os.pathsep}{os.environ.get('PATH', '')}",
            "SSL_CERT_FILE": str(self.registry.ca_file),
            "HELM_CACHE_HOME": str(helm_home / "cache"),
            "HELM_CONFIG_HOME": str(helm_home / "config"),
            "HELM_DATA_HOME": str(helm_home / "data"),
        }

    def sh(
        self, command: str, *, timeout: float = 300, show: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a command as the docs show it (bash, the operator's environment)."""
        self.say(f"    $ {command}")
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            env=self.environ(),
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        output = (result.stdout if show else "") + result.stderr
        for line in output.rstrip().splitlines()[-12:]:
            self.say(f"      {line}")
        return result

    def runbook(self, *parts: str) -> str:
        """The one runbook command containing every one of ``parts``, with the local
        registry in place of the published one: the only change made to it."""
        found = [c for c in runbook_commands() if all(part in c for part in parts)]
        assert len(found) == 1, f"the runbook shows {len(found)} commands with {parts}"
        return found[0].replace(f"oci://{PUBLISHED_REGISTRY}/", f"oci://{self.registry.host}/")

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.api.items(PODS.path(namespace=namespace), labelSelector=selector)

    def wait_ready(
        self, namespace: str, selector: str, *, besides: frozenset[str] = frozenset()
    ) -> ChartPod:
        """The one pod matching ``selector`` (and not among the uids ``besides``) whose
        kubelet reports it Ready: pulled, started and past its readiness probe."""

        def ready() -> ChartPod | None:
            pods = [
                p for p in self.pods(namespace, selector) if p["metadata"]["uid"] not in besides
            ]
            return ChartPod.of(pods[0]) if len(pods) == 1 and is_ready(pods[0]) else None

        found: ChartPod = eventually(ready, timeout=420, what=f"a Ready pod {selector}")
        return found

    def webhook_routed(self) -> None:
        """Until the API server reaches the webhook through its Service (a server-side dry
        run of the sample HeadroomConfig, which the validating webhook must answer): a
        Ready pod is an endpoint each node's kube-proxy programs a moment later, seconds
        on an emulated node."""

        def answered() -> bool:
            try:
                self.kubectl("apply", "--dry-run=server", "-k", str(REPO / "config/samples"))
            except subprocess.CalledProcessError:
                return False
            return True

        eventually(answered, timeout=120, what="the API server to reach the webhook's Service")

    def component(self, component: str, *, besides: frozenset[str] = frozenset()) -> ChartPod:
        """The chart's pod of ``component`` (webhook or reconciler), Ready."""
        return self.wait_ready(
            RELEASE_NAMESPACE, f"app.kubernetes.io/component={component}", besides=besides
        )


def runbook_commands() -> list[str]:
    """Each command the runbook shows, once (Upgrading repeats the install's)."""
    return list(dict.fromkeys(shell_commands(RUNBOOK.read_text())))


def eventually(check: Callable[[], Any], *, timeout: float = 60, what: str = "") -> Any:
    """The integration tier's poll, at this tier's pace: pods here are pulled and started
    by kubelets in emulated guests, so a minute by default, every half second."""
    return integration.eventually(check, timeout=timeout, interval=0.5, what=what)


@pytest.fixture(scope="package")
def narrator(pytestconfig: pytest.Config) -> Narrator:
    return Narrator(interactive=False, out=_Terminal(pytestconfig))


def _push_images(stack: Stack, versions: dict[str, str]) -> dict[str, str]:
    """Build-store images into the registry, each under its published repository's path
    (the registry mirrors both registries); returns where each went."""
    host = stack.registry.host
    operator = versions["PROMETHEUS_OPERATOR_VERSION"]
    pushed = {
        BUILT_IMAGE: f"{host}/{IMAGE_PATH}:{CHART['appVersion']}",
        f"{PROMETHEUS_IMAGE}:{versions['PROMETHEUS_VERSION']}": (
            f"{host}/prometheus/prometheus:{versions['PROMETHEUS_VERSION']}"
        ),
        f"{OPERATOR_IMAGE}:{operator}": (
            f"{host}/prometheus-operator/prometheus-operator:{operator}"
        ),
        f"{RELOADER_IMAGE}:{operator}": (
            f"{host}/prometheus-operator/prometheus-config-reloader:{operator}"
        ),
    }
    for local, remote in pushed.items():
        stack.build.podman(
            "push", "--quiet", f"--cert-dir={stack.registry.cert_dir}", local, f"docker://{remote}"
        )
    return pushed


def _push_charts(stack: Stack) -> None:
    packages = stack.work / "charts"
    repository = f"oci://{stack.registry.host}/{CHART_REPOSITORY_PATH}"
    for chart in ("kube-headroom-crds", "kube-headroom"):
        helm = str(stack.plane.tool("helm"))
        subprocess.run(
            [helm, "package", str(REPO / "chart" / chart), "--destination", str(packages)],
            env=stack.environ(), check=True, capture_output=True,
        )  # fmt: skip
        result = subprocess.run(
            [helm, "push", str(packages / f"{chart}-{CHART['version']}.tgz"), repository],
            env=stack.environ(), check=False, capture_output=True, text=True,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr


def _uninstall(stack: Stack) -> None:
    """Everything this package installed, gone, so the fleet's next tests find empty
    nodes: the chart's release first, without waiting (its pods stop while the rest goes,
    and the namespace's deletion waits for them); Prometheus, while its operator runs (its
    pod's 600 s grace period would otherwise hold up its namespace's deletion), then the
    operator and what it made for itself (the kubelet Service of its
    ``--kubelet-service``), the CRDs' release (the CRD stays, as its chart promises), the
    config, the namespaces and their pods, the third-party CRDs (preflight, in the next
    tests, reports whether cert-manager's are there)."""
    for command, must in (
        (f"helm uninstall {RELEASE} -n {RELEASE_NAMESPACE} --ignore-not-found", True),
        (f"kubectl delete prometheus --all -n {MONITORING} --ignore-not-found --wait", False),
        (f"kubectl wait pod -l {PROMETHEUS_SELECTOR} -n {MONITORING} --for=delete --timeout=300s",
         False),
        *(
            ((f"kubectl delete -k {operator} --ignore-not-found --wait", True),)
            if (operator := stack.work / OPERATOR_DIR).exists()
            else ()
        ),
        ("kubectl delete service,endpoints kubelet -n kube-system --ignore-not-found", True),
        ("helm uninstall kube-headroom-crds -n default --ignore-not-found --wait", True),
        ("kubectl delete hcfg --all --ignore-not-found", True),
        (f"kubectl delete namespace {' '.join(NAMESPACES)} --ignore-not-found", True),
        (f"kubectl delete clusterrole,clusterrolebinding {PROMETHEUS_RBAC} --ignore-not-found",
         True),
    ):  # fmt: skip
        result = stack.sh(command, timeout=330, show=False)
        assert result.returncode == 0 or not must, result.stderr
    if stack.crds:
        stack.kubectl("delete", "--ignore-not-found", *(f"--filename={p}" for p in stack.crds))


@pytest.fixture(scope="package")
def stack(
    request: pytest.FixtureRequest, narrator: Narrator, real_cluster: RealCluster
) -> Iterator[Stack]:
    versions = pinned_versions()
    work = Path(tempfile.mkdtemp(prefix="headroom-e2e-"))
    say, step = narrator.say, narrator.step
    say("\nHeadroom's install path, end to end, on real kubelets: every part real\n")
    say(f"    the fleet: {real_cluster.startup()}")
    registry = real_cluster.registry
    assert registry is not None, "the fleet starts a registry when this tier is in the session"
    plane = real_cluster.plane
    with step("cached parts: cert-manager, prometheus-operator, Prometheus"):
        paths = addon_paths()
    stack = Stack(
        cluster=real_cluster, registry=registry, build=build_engine(), paths=paths,
        narrator=narrator, work=work,
        prometheus_image=f"{OPERATOR_REGISTRY}/prometheus/prometheus:{versions['PROMETHEUS_VERSION']}",
    )  # fmt: skip
    try:
        with step("CRDs: cert-manager and monitoring.coreos.com, from their Go modules"):
            stack.crds = [
                *sorted(crds_dir(plane.bin_dir).glob("*.yaml")),
                *sorted(paths.prometheus_operator_crds.glob("*.yaml")),
            ]
            for path in stack.crds:
                plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            plane.kubectl("wait", "crd", "--all", "--for=condition=Established", "--timeout=60s")
        with step(f"push both charts (helm package, helm push) and the images to {registry.host}"):
            _push_charts(stack)
            pushed = _push_images(stack, versions)
        for local, remote in pushed.items():
            say(f"    {local} -> {remote}")
        for name in ("cert-manager", MONITORING):
            stack.apply(builders.namespace(name))
        with step("cert-manager: controller and cainjector"):
            stack.processes.extend(
                start_cert_manager(paths, kubeconfig=plane.kubeconfig, log_dir=work / "logs")
            )
        # Its pod is pulled and started while the chart's are; the Prometheus fixture
        # waits for it.
        with step("prometheus-operator: the release's Deployment, ServiceAccount and RBAC"):
            operator = prometheus_operator_kustomization(paths, work / OPERATOR_DIR, MONITORING)
            plane.kubectl("apply", "-k", str(operator))
        yield stack
    finally:
        with step("uninstall: the nodes left empty for the tests that share them"):
            _uninstall(stack)
        for process in reversed(stack.processes):
            process.stop()
        if request.session.testsfailed or os.environ.get("HEADROOM_KEEP_LOGS"):
            kept = ARTIFACTS / time.strftime("%Y%m%dT%H%M%S")
            kept.mkdir(parents=True, exist_ok=True)
            for log in (work / "logs").glob("*.log"):
                shutil.copy2(log, kept / log.name)
            print(f"\ne2e logs kept in {kept} (the fleet's beside it in _artifacts/fleet)")
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Release:
    """The chart's two pods, Ready."""

    webhook: ChartPod
    reconciler: ChartPod


@pytest.fixture(scope="package")
def installed(stack: Stack) -> Release:
    """The runbook's install, from the registry, with the chart's defaults."""
    stack.say("\nInstall from the OCI registry with the runbook's commands (registry host swapped)")
    for command in (
        stack.runbook("helm upgrade --install kube-headroom-crds oci://"),
        stack.runbook("helm upgrade --install kube-headroom oci://", "--create-namespace"),
    ):
        result = stack.sh(command)
        assert result.returncode == 0, result.stderr
    with stack.narrator.step("cert-manager issues; the kubelets pull and start; probes pass"):
        release = Release(
            webhook=stack.component("webhook"), reconciler=stack.component("reconciler")
        )
        stack.webhook_routed()
    for pod in (release.webhook, release.reconciler):
        stack.say(f"    {pod.name} on {pod.node} at {pod.ip}: Ready")
    return release


@dataclass(frozen=True)
class Moment:
    """The webhook Deployment's pods at one instant of a rollout: uid -> (Running, Ready,
    being deleted)."""

    pods: dict[str, tuple[bool, bool, bool]]


@dataclass
class Upgrade:
    release: Release
    old: Release
    # The webhook's pods, every half second from the upgrade command until the old pod
    # was gone.
    rollout: list[Moment]


def _watch_rollout(stack: Stack, moments: list[Moment], stop: threading.Event) -> None:
    selector = "app.kubernetes.io/component=webhook"
    while not stop.is_set():
        pods = stack.pods(RELEASE_NAMESPACE, selector)
        moments.append(
            Moment(
                {
                    p["metadata"]["uid"]: (
                        p.get("status", {}).get("phase") == "Running",
                        is_ready(p),
                        bool(p["metadata"].get("deletionTimestamp")),
                    )
                    for p in pods
                }
            )
        )
        stop.wait(0.5)


@pytest.fixture(scope="package")
def upgrade(stack: Stack, installed: Release) -> Upgrade:
    """The runbook's upgrade: metrics served with cert-manager TLS, Prometheus objects."""
    stack.say("\nUpgrade: metrics.certManagerTLS and prometheus.enable (the runbook's command)")
    moments: list[Moment] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_rollout, args=(stack, moments, stop), daemon=True)
    watcher.start()
    try:
        command = stack.runbook("--set metrics.certManagerTLS=true", "--set prometheus.enable=true")
        result = stack.sh(command)
        assert result.returncode == 0, result.stderr
        old = frozenset({installed.webhook.uid, installed.reconciler.uid})
        with stack.narrator.step("the Deployments roll: new pods, metrics certificate mounted"):
            release = Release(
                webhook=stack.component("webhook", besides=old),
                reconciler=stack.component("reconciler", besides=old),
            )
            eventually(
                lambda: not [
                    p for p in stack.pods(RELEASE_NAMESPACE, "app.kubernetes.io/name=kube-headroom")
                    if p["metadata"]["uid"] in old
                ],
                timeout=300,
                what="the old pods to be gone",
            )  # fmt: skip
            stack.webhook_routed()
    finally:
        stop.set()
        watcher.join(timeout=30)
    return Upgrade(release=release, old=installed, rollout=moments)


@pytest.fixture(scope="package")
def upgraded(upgrade: Upgrade) -> Release:
    return upgrade.release


ENFORCED_NAMESPACE = "team-a"


@pytest.fixture(scope="package")
def enforcing(stack: Stack, upgraded: Release) -> str:
    """The runbook's rollout on team-a: the sample config, enrolment, enforce."""
    stack.say(f"\nRollout on {ENFORCED_NAMESPACE} (the runbook's commands)")
    stack.apply(builders.namespace(ENFORCED_NAMESPACE))
    for parts in (
        ("kubectl apply -k config/samples",),
        (f"kubectl label ns {ENFORCED_NAMESPACE} kube-headroom.dev/mode=managed",),
        ("kubectl patch hcfg cluster", '"dryRun":false'),
    ):
        result = stack.sh(stack.runbook(*parts))
        assert result.returncode == 0, result.stderr
    return ENFORCED_NAMESPACE


@dataclass
class PrometheusServer:
    pod: ChartPod

    @property
    def url(self) -> str:
        return f"http://{self.pod.ip}:9090"

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            document = json.loads(response.read())
        assert document["status"] == "success", document
        return document["data"]

    def query(self, expression: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("/api/v1/query", query=expression)["result"]
        return result

    def telemetry(self) -> list[Sample]:
        """The server's own metrics, from its /metrics endpoint."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        families = text_string_to_metric_families(text)
        return [sample for family in families for sample in family.samples]


@pytest.fixture(scope="package")
def prometheus(stack: Stack, upgraded: Release) -> PrometheusServer:
    """A Prometheus the operator runs, selecting the chart's ServiceMonitors and rules."""
    version = pinned_versions()["PROMETHEUS_VERSION"]
    stack.say(f"\nPrometheus {version} through prometheus-operator")
    select = {"app.kubernetes.io/name": CHART["name"]}
    stack.apply(*builders.prometheus_rbac(namespace=MONITORING, account="prometheus"))
    stack.apply(
        builders.prometheus(
            name=PROMETHEUS, namespace=MONITORING, account="prometheus",
            image=stack.prometheus_image, version=version, select=select,
        )
    )  # fmt: skip
    with stack.narrator.step("the operator's pod"):
        operator = stack.wait_ready(MONITORING, OPERATOR_SELECTOR)
    stack.say(f"    {operator.name} on {operator.node} at {operator.ip}: Ready")
    with stack.narrator.step("the operator's StatefulSet pod: config reloader, then Prometheus"):
        pod = stack.wait_ready(MONITORING, PROMETHEUS_SELECTOR)
    stack.say(f"    {pod.name} on {pod.node} at {pod.ip}: Ready")
    return PrometheusServer(pod)
