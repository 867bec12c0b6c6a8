"""The end-to-end tier: the operator's install path with every part real.

``make e2e`` (``hack/e2e.sh``) builds what is missing, builds the image, and runs this
package in a network and mount namespace of its own. The session brings up, narrating as
it goes: the control plane (its API server routing webhook calls to endpoints and
listening on the pod network), KWOK nodes, a local OCI registry holding both charts and
the images, cert-manager's controller and cainjector, the Prometheus Operator, and the
pod runner that gives KWOK's pods real containers. The fixtures below then walk the
runbook: install from OCI, upgrade with metrics TLS and Prometheus, enforce.

Outside ``make e2e`` these tests are deselected (plain ``pytest`` lists them as such).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from devcluster import ControlPlane, crds_dir, locate_binaries
from devcluster.addons import (
    AddonPaths,
    HostProcess,
    Registry,
    addon_paths,
    start_cert_manager,
    start_prometheus_operator,
)
from devcluster.binaries import pinned_versions
from devcluster.containers import (
    HEADROOM_IMAGE,
    PROMETHEUS_IMAGE,
    RELOADER_IMAGE,
    Engine,
    Mirror,
    build_engine,
)
from devcluster.demo import Narrator
from devcluster.kubeapi import KubeAPI
from devcluster.nodes import simulated_node
from devcluster.podnet import PodNetwork
from devcluster.podrunner import PodRunner, RunningPod
from tests.cluster_helpers import harness_tier
from tests.e2e import builders
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
# The chart's image, as every pod spec names it; the node pulls it through a mirror.
CHART_IMAGE = f"{VALUES['image']['repository']}:{CHART['appVersion']}"
PUBLISHED_REGISTRY = "ghcr.io"
# Where the chart's image goes in a registry: its repository without the registry host.
IMAGE_PATH = VALUES["image"]["repository"].split("/", 1)[1]
# The runbook's chart repository, below the registry host: oci://ghcr.io/<this>/<chart>.
CHART_REPOSITORY_PATH = "karlkfi/charts"
# What hack/e2e.sh builds into the build store.
BUILT_IMAGE = HEADROOM_IMAGE
WORKLOAD_NODE = "e2e-workload"
WORKLOAD_TAINT = ("e2e", "workload")
SYSTEM_NODES = ("e2e-node-1", "e2e-node-2")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: the end-to-end install path (make e2e)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # They need root, podman and a network namespace of their own: make e2e.
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


@dataclass
class Stack:
    plane: ControlPlane
    api: KubeAPI
    registry: Registry
    build: Engine
    node: Engine
    network: PodNetwork
    runner: PodRunner
    paths: AddonPaths
    narrator: Narrator
    work: Path
    processes: list[HostProcess]
    prometheus_image: str = ""

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

    def wait_ready(self, component: str, *, timeout: float = 240) -> RunningPod:
        """The chart's pod of ``component`` (webhook or reconciler) running and ready."""
        return self.runner.wait_ready(
            RELEASE_NAMESPACE,
            lambda pod: pod.labels.get("app.kubernetes.io/component") == component,
            timeout=timeout,
        )


def runbook_commands() -> list[str]:
    """Each command the runbook shows, once (Upgrading repeats the install's)."""
    return list(dict.fromkeys(shell_commands(RUNBOOK.read_text())))


def eventually(check: Callable[[], Any], *, timeout: float = 60, what: str = "") -> Any:
    """The integration tier's poll, at this tier's pace: pods here pull images and start
    containers, so a minute by default, every half second."""
    return integration.eventually(check, timeout=timeout, interval=0.5, what=what)


@pytest.fixture(scope="session")
def narrator(pytestconfig: pytest.Config) -> Narrator:
    return Narrator(interactive=False, out=_Terminal(pytestconfig))


def _start_control_plane(work: Path) -> ControlPlane:
    plane = ControlPlane(
        work_dir=work / "control-plane",
        bin_dir=locate_binaries(build=False),
        extra_apiserver_args=(
            # Webhook Services resolve to an endpoint (pod IP and target port) from their
            # EndpointSlices, not to the ClusterIP no kube-proxy routes.
            "--enable-aggregator-routing=true",
            # Pods reach the API server at the kubernetes Service's IP on this namespace.
            "--bind-address=0.0.0.0",
        ),
    )
    plane.start()
    return plane


def _push_images(stack: Stack, versions: dict[str, str]) -> dict[str, str]:
    """Build-store images into the registry; returns where each went."""
    host = stack.registry.host
    pushed = {
        BUILT_IMAGE: f"{host}/{IMAGE_PATH}:{CHART['appVersion']}",
        f"{PROMETHEUS_IMAGE}:{versions['PROMETHEUS_VERSION']}": (
            f"{host}/prometheus/prometheus:{versions['PROMETHEUS_VERSION']}"
        ),
        f"{RELOADER_IMAGE}:{versions['PROMETHEUS_OPERATOR_VERSION']}": (
            f"{host}/prometheus-operator/prometheus-config-reloader:"
            f"{versions['PROMETHEUS_OPERATOR_VERSION']}"
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


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest, narrator: Narrator) -> Iterator[Stack]:
    versions = pinned_versions()
    run_id = secrets.token_hex(3)
    work = Path(tempfile.mkdtemp(prefix=f"headroom-e2e-{run_id}-"))
    say, step = narrator.say, narrator.step
    say("\nHeadroom's install path, end to end: every part real\n")
    network = PodNetwork(prefix=f"hre2e-{run_id}")
    with step("pod network: node and Service addresses in this namespace of our own"):
        network.setup()
    with step("cached parts: cert-manager, prometheus-operator, Prometheus, the registry"):
        paths = addon_paths()
    build = build_engine()
    node: Engine | None = None
    processes: list[HostProcess] = []
    plane: ControlPlane | None = None
    registry = Registry(binary=paths.docker_registry, work_dir=work / "registry")
    runner: PodRunner | None = None
    try:
        with step("control plane: etcd, kube-apiserver, controller-manager, scheduler, KWOK"):
            plane = _start_control_plane(work)
        api = KubeAPI(server=plane.server, token=plane.token, ca_file=plane.ca_file)
        with step(f"KWOK nodes: {', '.join(SYSTEM_NODES)} and {WORKLOAD_NODE} (tainted)"):
            for name in SYSTEM_NODES:
                plane.kubectl("create", "-f", "-", input=json.dumps(simulated_node(name)))
            workload = simulated_node(WORKLOAD_NODE)
            key, value = WORKLOAD_TAINT
            workload["spec"]["taints"] = [{"key": key, "value": value, "effect": "NoSchedule"}]
            plane.kubectl("create", "-f", "-", input=json.dumps(workload))
            for name in (*SYSTEM_NODES, WORKLOAD_NODE):
                plane.kubectl("wait", f"node/{name}", "--for=condition=Ready", "--timeout=60s")
        with step("CRDs: cert-manager and monitoring.coreos.com, from their Go modules"):
            files = [
                *sorted(crds_dir(plane.bin_dir).glob("*.yaml")),
                *sorted(paths.prometheus_operator_crds.glob("*.yaml")),
            ]
            for path in files:
                plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
            plane.kubectl("wait", "crd", "--all", "--for=condition=Established", "--timeout=60s")
        with step("local OCI registry (distribution, over TLS)"):
            registry.start()
        node = Engine(
            root=work / "node",
            cgroup_parent=f"/headroom-e2e-{run_id}",
            mirrors=(
                Mirror(
                    prefix=VALUES["image"]["repository"],
                    location=f"{registry.host}/{IMAGE_PATH}",
                ),
            ),
        )
        node.write_config()
        runner = PodRunner(
            api=api,
            engine=node,
            network=network,
            namespaces=(RELEASE_NAMESPACE, MONITORING),
            work_dir=work / "pods",
            api_server_port=plane.apiserver_port,
            pull_cert_dir=registry.cert_dir,
            run_id=run_id,
        )
        stack = Stack(
            plane=plane, api=api, registry=registry, build=build, node=node, network=network,
            runner=runner, paths=paths, narrator=narrator, work=work, processes=processes,
            prometheus_image=f"{registry.host}/prometheus/prometheus:{versions['PROMETHEUS_VERSION']}",
        )  # fmt: skip
        with step("push both charts (helm package, helm push) and the images"):
            _push_charts(stack)
            pushed = _push_images(stack, versions)
        for local, remote in pushed.items():
            say(f"    {local} -> {remote}")
        for name in ("cert-manager", MONITORING):
            stack.apply(builders.namespace(name))
        with step("cert-manager: controller and cainjector"):
            processes.extend(
                start_cert_manager(paths, kubeconfig=plane.kubeconfig, log_dir=work / "logs")
            )
        with step("prometheus-operator"):
            processes.append(
                start_prometheus_operator(
                    paths,
                    kubeconfig=plane.kubeconfig,
                    log_dir=work / "logs",
                    reloader_image=pushed[
                        f"{RELOADER_IMAGE}:{versions['PROMETHEUS_OPERATOR_VERSION']}"
                    ],
                )
            )
        with step("pod runner: KWOK's pods in kube-headroom-system and monitoring as containers"):
            runner.start()
        assert stack.prometheus_image in pushed.values()
        yield stack
    finally:
        if runner is not None:
            runner.stop()
        for process in reversed(processes):
            process.stop()
        registry.stop()
        if plane is not None:
            plane.stop()
            if request.session.testsfailed or os.environ.get("HEADROOM_KEEP_LOGS"):
                kept = ARTIFACTS / run_id
                plane.keep_logs(kept / "control-plane")
                for log in (work / "logs").glob("*.log"):
                    shutil.copy2(log, kept / log.name)
                for log in (work / "pods" / "logs").glob("*.log"):
                    shutil.copy2(log, kept / log.name)
                print(f"\ne2e logs kept in {kept}")
        network.teardown()
        if node is not None:
            left = node.remove_cgroup_parent()
            if left:
                print(f"\ncgroups left behind: {left}")
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Release:
    """The chart's two pods as the runner runs them."""

    webhook: RunningPod
    reconciler: RunningPod


@pytest.fixture(scope="session")
def installed(stack: Stack) -> Release:
    """The runbook's install, from the registry, with the chart's defaults."""
    stack.say("\nInstall from the OCI registry with the runbook's commands (registry host swapped)")
    for command in (
        stack.runbook("helm upgrade --install kube-headroom-crds oci://"),
        stack.runbook("helm upgrade --install kube-headroom oci://", "--create-namespace"),
    ):
        result = stack.sh(command)
        assert result.returncode == 0, result.stderr
    with stack.narrator.step("cert-manager issues, the node pulls, the containers start"):
        release = Release(
            webhook=stack.wait_ready("webhook"), reconciler=stack.wait_ready("reconciler")
        )
    for running in (release.webhook, release.reconciler):
        stack.say(f"    {running.name} at {running.ip}: ready")
    return release


@pytest.fixture(scope="session")
def upgraded(stack: Stack, installed: Release) -> Release:
    """The runbook's upgrade: metrics served with cert-manager TLS, Prometheus objects."""
    stack.say("\nUpgrade: metrics.certManagerTLS and prometheus.enable (the runbook's command)")
    command = stack.runbook("--set metrics.certManagerTLS=true", "--set prometheus.enable=true")
    result = stack.sh(command)
    assert result.returncode == 0, result.stderr
    old = {installed.webhook.uid, installed.reconciler.uid}

    def fresh(component: str) -> RunningPod:
        return stack.runner.wait_ready(
            RELEASE_NAMESPACE,
            lambda pod: (
                pod.uid not in old and pod.labels.get("app.kubernetes.io/component") == component
            ),
            timeout=240,
        )

    with stack.narrator.step("the Deployments roll: new pods, metrics certificate mounted"):
        release = Release(webhook=fresh("webhook"), reconciler=fresh("reconciler"))
        eventually(
            lambda: not stack.runner.find(RELEASE_NAMESPACE, lambda pod: pod.uid in old),
            timeout=120,
            what="the old pods' containers to stop",
        )
    return release


ENFORCED_NAMESPACE = "team-a"


@pytest.fixture(scope="session")
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
    pod: RunningPod

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


@pytest.fixture(scope="session")
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
    with stack.narrator.step("the operator's StatefulSet pod: config reloader, then Prometheus"):
        pod = stack.runner.wait_ready(
            MONITORING,
            lambda p: p.labels.get("operator.prometheus.io/name") == PROMETHEUS,
            timeout=240,
        )
    stack.say(f"    {pod.name} at {pod.ip}: ready")
    return PrometheusServer(pod)
