"""Fixtures for the reconciler on the real control plane: the CRD, the config, reserved
simulated nodes, and the real reconciler process (as a subprocess, as in production)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.core.apipaths import EVENTS, PODS
from app.core.quantity import parse_cpu_millis
from devcluster.ports import free_port
from tests.integration.conftest import REPO, Cluster, eventually
from tests.integration.rbac import RECONCILER, WEBHOOK, chart_rbac, service_account_kubeconfig
from tests.integration.reconciler import manifests

if TYPE_CHECKING:
    # The webhook's fixtures import this module's reconciler helpers.
    from tests.integration.webhook.conftest import Webhook


@pytest.fixture(scope="session")
def crd(headroom_crd: str) -> None:
    """The HeadroomConfig CRD, installed and established."""


@pytest.fixture
def configure(control_plane: Cluster, crd: None) -> Iterator[Callable[..., None]]:
    """Set the HeadroomConfig spec (`configure(dryRun=False)`); deleted after the test."""

    def apply(**spec: Any) -> None:
        control_plane.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=json.dumps(manifests.headroom_config(**spec)),
        )

    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")
    yield apply
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")


@pytest.fixture
def managed_namespace(control_plane: Cluster, namespace: str) -> str:
    control_plane.kubectl("label", "namespace", namespace, "kube-headroom.dev/mode=managed")
    return namespace


@pytest.fixture
def make_node(control_plane: Cluster) -> Iterator[Callable[..., str]]:
    """Create a Ready simulated node only the test's own pods use; deleted afterwards."""
    created: list[str] = []

    def make(cpu: str = "16", **node_fields: Any) -> str:
        """``node_fields`` as ``manifests.reserved_node`` takes them."""
        name = f"hr-{uuid.uuid4().hex[:8]}"
        node = manifests.reserved_node(name, cpu=cpu, **node_fields)
        control_plane.kubectl("create", "-f", "-", input=json.dumps(node))
        created.append(name)
        control_plane.kubectl("wait", f"node/{name}", "--for=condition=Ready", "--timeout=60s")
        return name

    yield make
    for name in created:
        control_plane.delete_node(name)


@dataclass
class Reconciler:
    """A running `headroom-reconciler` process."""

    popen: subprocess.Popen[bytes]
    log: Path
    metrics_url: str
    probe_url: str
    args: list[str] = field(default_factory=list)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    def resizes(self, result: str) -> float:
        return self.sample("headroom_resizes_total", result=result) or 0.0

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.probe_url, timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self) -> None:
        """Until its caches have synced and, unless it elects a leader, it holds its Lease
        (from then on the webhook seeds birth limits); fails if the process exits first."""
        eventually(
            lambda: self.ready() or self.popen.poll() is not None,
            timeout=60,
            what="reconciler readiness",
        )
        assert self.popen.poll() is None, self.log.read_text()
        if "--leader-elect" not in self.args:
            eventually(
                lambda: any(line.get("msg") == "holding the lease" for line in self.log_lines()),
                what="the reconciler to hold its Lease",
            )

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
        return lines

    def terminate(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        return self.popen.wait(timeout=30)


@pytest.fixture(scope="module")
def reconciler_kubeconfig(control_plane: Cluster, helm: Path) -> Iterator[Path]:
    """Credentials of the chart's reconciler ServiceAccount, under the chart's RBAC and
    pod-write policy: every scenario runs with exactly the production permissions, so a
    write the chart does not allow fails the scenario that needs it."""
    with chart_rbac(control_plane, helm):
        yield service_account_kubeconfig(control_plane, RECONCILER)


def launch_reconciler(
    kubeconfig: Path, log: Path, *extra: str, secure_metrics: bool = False
) -> Reconciler:
    """Start the real reconciler process with ``kubeconfig``'s credentials, logging to
    ``log``."""
    metrics_port, probe_port = free_port(), free_port()
    args = [
        sys.executable,
        "-m",
        "reconciler.main",
        f"--kubeconfig={kubeconfig}",
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--metrics-secure={'true' if secure_metrics else 'false'}",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
        "--log-format=json",
        *extra,
    ]
    with log.open("wb") as handle:
        popen = subprocess.Popen(
            args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
    scheme = "https" if secure_metrics else "http"
    return Reconciler(
        popen=popen,
        log=log,
        metrics_url=f"{scheme}://127.0.0.1:{metrics_port}/metrics",
        probe_url=f"http://127.0.0.1:{probe_port}/readyz",
        args=args,
    )


@pytest.fixture
def start_reconciler(
    control_plane: Cluster, crd: None, tmp_path: Path, reconciler_kubeconfig: Path
) -> Iterator[Callable[..., Reconciler]]:
    """Start the real reconciler process (as the chart's ServiceAccount); each is stopped
    with SIGTERM after the test."""
    running: list[Reconciler] = []

    def start(*extra: str, wait_ready: bool = True, secure_metrics: bool = False) -> Reconciler:
        log = tmp_path / f"reconciler-{len(running)}.log"
        process = launch_reconciler(
            reconciler_kubeconfig, log, *extra, secure_metrics=secure_metrics
        )
        running.append(process)
        if wait_ready:
            process.wait_ready()
        return process

    yield start
    for process in running:
        code = process.terminate()
        assert code in (0, -signal.SIGKILL), process.log.read_text()[-4000:]


@pytest.fixture
def webhook(
    control_plane: Cluster, reconciler_kubeconfig: Path, tmp_path: Path
) -> Iterator[Webhook]:
    """The real webhook as the chart's ServiceAccount (the chart's RBAC is held by
    ``reconciler_kubeconfig``), registered for namespaces carrying its scope."""
    from tests.integration.webhook.conftest import start_webhook

    (tmp_path / "webhook").mkdir()
    started = start_webhook(
        control_plane,
        tmp_path / "webhook",
        kubeconfig=service_account_kubeconfig(control_plane, WEBHOOK),
    )
    try:
        started.register()
        yield started
    finally:
        started.unregister()
        started.stop()


@pytest.fixture
def enforced_namespace(control_plane: Cluster, webhook: Webhook) -> Iterator[str]:
    """A fresh managed namespace in the real webhook's scope, deleted afterwards."""
    from tests.integration.webhook.conftest import SCOPE_LABEL

    name = f"t-managed-{uuid.uuid4().hex[:10]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        control_plane.kubectl(
            "label", "namespace", name, f"{SCOPE_LABEL}={webhook.scope}",
            "kube-headroom.dev/mode=managed",
        )  # fmt: skip
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


class Pods:
    """Create and read pods of one namespace through the real API."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def create(self, obj: dict[str, Any]) -> None:
        self.cluster.kubectl("create", "-f", "-", input=json.dumps(obj))

    def add(self, name: str, *, node: str, cpu: str = "1", **fields: Any) -> None:
        """A pod of one container requesting ``cpu``, bound to ``node``; ``fields`` as
        ``manifests.pod`` takes them."""
        containers = [manifests.container(cpu=cpu)]
        self.create(
            manifests.pod(
                name, namespace=self.namespace, node=node, containers=containers, **fields
            )
        )

    def neighbour(self, name: str, *, node: str, cpu: str) -> None:
        """An opted-out pod booking ``cpu`` on ``node``: it moves the slack, not itself."""
        self.add(name, node=node, cpu=cpu, labels=manifests.UNMANAGED)

    def get(self, name: str) -> dict[str, Any]:
        found = self.cluster.api.get(PODS.path(namespace=self.namespace, name=name))
        assert found is not None, f"no pod {self.namespace}/{name}"
        return found

    def cpu_limits(self, name: str) -> list[str | None]:
        spec = self.get(name)["spec"]
        containers = [*spec.get("initContainers", []), *spec["containers"]]
        return [c.get("resources", {}).get("limits", {}).get("cpu") for c in containers]

    def cpu_limit(self, name: str) -> str | None:
        return self.cpu_limits(name)[-1]

    def status_annotation(self, name: str) -> dict[str, Any] | None:
        text = self.get(name)["metadata"].get("annotations", {}).get("kube-headroom.dev/status")
        return None if text is None else dict(json.loads(text))

    def explained(self, name: str) -> bool:
        """The pod's limit, annotation and latest CPULimitAdjusted event all say the same."""
        limit = self.cpu_limit(name)
        annotation = self.status_annotation(name)
        if limit is None or annotation is None:
            return False
        if parse_cpu_millis(annotation["targetLimit"]) != parse_cpu_millis(limit):
            return False
        # Timestamps have one-second resolution; within a second, the later of two events
        # was created at the later etcd revision (this control plane has one etcd).
        events = sorted(
            self.events(name, reason="CPULimitAdjusted"),
            key=lambda event: (
                event["lastTimestamp"],
                event["metadata"]["creationTimestamp"],
                int(event["metadata"]["resourceVersion"]),
            ),
        )
        if not events:
            return False
        announced = events[-1]["message"].split(" -> ")[1].split(" ")[0]
        return parse_cpu_millis(announced) == parse_cpu_millis(limit)

    def explanation(self, name: str, *, timeout: float = 20.0) -> dict[str, Any]:
        """The pod's status annotation, once written: explanations follow the limits."""
        found: dict[str, Any] = eventually(
            lambda: self.status_annotation(name), timeout=timeout, what=f"{name}'s annotation"
        )
        return found

    def generation(self, name: str) -> int:
        return int(self.get(name)["metadata"]["generation"])

    def events(self, name: str, *, reason: str) -> list[dict[str, Any]]:
        return self.cluster.api.items(
            EVENTS.path(namespace=self.namespace),
            fieldSelector=f"involvedObject.name={name},reason={reason}",
        )

    def wait_running(self, name: str) -> None:
        self.cluster.kubectl(
            "wait", f"pod/{name}", "-n", self.namespace, "--for=jsonpath={.status.phase}=Running",
            "--timeout=60s",
        )  # fmt: skip

    def wait_limit(self, name: str, cpu: str, *, timeout: float = 20.0) -> None:
        eventually(lambda: self.cpu_limit(name) == cpu, timeout=timeout, what=f"{name} at {cpu}")


@pytest.fixture
def pods(control_plane: Cluster, managed_namespace: str) -> Pods:
    return Pods(control_plane, managed_namespace)


@dataclass
class Scene:
    """What most reconciler tests set up: the config, nodes of their own, pods in a
    managed namespace, and reconciler processes."""

    cluster: Cluster
    configure: Callable[..., None]
    make_node: Callable[..., str]
    pods: Pods
    start_reconciler: Callable[..., Reconciler]

    def enforcing_node(self, cpu: str = "16", **node_fields: Any) -> str:
        """Enforce (``dryRun: false``), then make a node."""
        self.configure(dryRun=False)
        return self.make_node(cpu, **node_fields)


@pytest.fixture
def scene(
    control_plane: Cluster,
    configure: Callable[..., None],
    make_node: Callable[..., str],
    pods: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> Scene:
    return Scene(control_plane, configure, make_node, pods, start_reconciler)


def stays(check: Callable[[], bool], *, seconds: float, interval: float = 0.5) -> bool:
    """Whether `check` holds throughout the next `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        time.sleep(interval)
    return check()
