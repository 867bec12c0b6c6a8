"""The reliability harness: a control plane of its own, 20 simulated nodes, waves of
managed pods, two leader-elected reconcilers under the chart's ServiceAccounts, RBAC and
pod-write admission policies, and an independent oracle that says which pods are off
target. Faults (`test_outages`) and stop buttons pressed mid-wave (`test_stops_mid_wave`)
run on it.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster import ControlPlane, locate_binaries
from devcluster.oracle import BackgroundOracle
from devcluster.ports import free_port
from tests.integration.conftest import ARTIFACTS, REPO, Cluster, eventually, run_helm
from tests.integration.rbac import RECONCILER, chart_rbac, service_account_kubeconfig
from tests.integration.reconciler.conftest import Reconciler
from tests.integration.reconciler.manifests import container, headroom_config, pod, reserved_node

NODES = 20
PODS_PER_NODE = 16
NAMESPACES = 4
CREATORS = 8
DEBOUNCE_SECONDS = 2.0
RECOVERY_BUDGET_SECONDS = DEBOUNCE_SECONDS + 10.0
# Three times the CPU weight of an ordinary process (the kernel's nice-to-weight table).
FAVOURED_NICE = -5
REQUESTS = ("100m", "250m", "500m")


class Api:
    """Plain JSON requests as the cluster admin (fast enough to poll and to create waves)."""

    def __init__(self, plane: ControlPlane) -> None:
        self._plane = plane
        self._ssl = ssl.create_default_context(cafile=str(plane.ca_file))

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = 40,
        content_type: str = "application/json",
    ) -> Any:
        request = urllib.request.Request(
            f"{self._plane.server}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self._plane.token}",
                "Content-Type": content_type,
            },
        )
        with urllib.request.urlopen(request, context=self._ssl, timeout=timeout) as response:
            return json.loads(response.read())


@dataclass
class Wave:
    """Creates the wave's pods from a few threads, retrying through any outage."""

    api: Api
    pods: list[dict[str, Any]]
    created: int = 0
    finished_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        return thread

    def _run(self) -> None:
        with ThreadPoolExecutor(CREATORS) as pool:
            list(pool.map(self._create, self.pods))
        self.finished_at = time.time()

    def _create(self, obj: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods"
        while True:
            try:
                self.api.call("POST", path, obj)
                break
            except urllib.error.HTTPError as err:
                if err.code == 409:
                    break
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            time.sleep(0.5)
        with self._lock:
            self.created += 1


@contextmanager
def favoured() -> Iterator[None]:
    """Run the block, and the processes and threads it starts, at a higher CPU priority
    than the tier's other test workers, which share the machine's cores: a recovery budget
    judges the control plane and the reconcilers, not the tests beside them. Linux sets a
    thread's priority, which its new threads and children inherit; without the privilege
    to raise it the block runs as it is."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, FAVOURED_NICE)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


@contextmanager
def reliability_plane(work_dir: Path, *, logs: str) -> Iterator[Cluster]:
    """A control plane of its own with the CRD and the chart's RBAC and policies; its logs
    are kept under ``_artifacts/<logs>`` when the block fails."""
    plane = ControlPlane(work_dir=work_dir, bin_dir=locate_binaries(build=True))
    plane.start()
    cluster = Cluster(plane)
    failed = False
    try:
        helm = plane.bin_dir / "helm"
        run_helm(
            cluster, helm, "upgrade", "--install", "kube-headroom-crds", "chart/kube-headroom-crds"
        )
        plane.kubectl(
            "wait", "crd/headroomconfigs.kube-headroom.dev", "--for=condition=Established"
        )
        with chart_rbac(cluster, helm):
            yield cluster
    except BaseException:
        failed = True
        raise
    finally:
        plane.stop()
        if failed:
            plane.keep_logs(ARTIFACTS / logs)


def spawn_reconciler(workdir: Path, kubeconfig: Path, index: int) -> Reconciler:
    metrics, probe = free_port(), free_port()
    log = workdir / f"reconciler-{index}.log"
    with log.open("wb") as handle:
        popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler.main",
                f"--kubeconfig={kubeconfig}",
                f"--metrics-bind-address=127.0.0.1:{metrics}",
                "--metrics-secure=false",
                f"--health-probe-bind-address=127.0.0.1:{probe}",
                "--leader-elect",
                "--leader-election-namespace=kube-headroom-system",
            ],
            cwd=REPO,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    return Reconciler(
        popen=popen,
        log=log,
        metrics_url=f"http://127.0.0.1:{metrics}/metrics",
        probe_url=f"http://127.0.0.1:{probe}/readyz",
    )


@dataclass
class Scenario:
    cluster: Cluster
    api: Api
    workdir: Path
    nodes: list[str]
    namespaces: list[str]
    reconcilers: list[Reconciler]
    oracle: BackgroundOracle

    def wave(self) -> Wave:
        pods = []
        for index in range(NODES * PODS_PER_NODE):
            namespace = self.namespaces[index % NAMESPACES]
            obj = pod(
                f"w{index:03d}",
                namespace=namespace,
                node=self.nodes[index % NODES],
                containers=[container(cpu=REQUESTS[index % len(REQUESTS)])],
            )
            pods.append(obj)
        return Wave(api=self.api, pods=pods)


@contextmanager
def scenario_on(
    cluster: Cluster, tmp_path: Path, *, config: dict[str, Any], node_cpu: str = "16"
) -> Iterator[Scenario]:
    """Fresh nodes and enrolled namespaces, ``config`` applied, two reconcilers running as
    the chart's ServiceAccount, and the oracle synced."""
    tag = uuid.uuid4().hex[:6]
    nodes = [f"o{tag}-{i:02d}" for i in range(NODES)]
    namespaces = [f"o{tag}-ns{i}" for i in range(NAMESPACES)]
    for name in nodes:
        cluster.kubectl("create", "-f", "-", input=json.dumps(reserved_node(name, cpu=node_cpu)))
    for name in namespaces:
        cluster.kubectl("create", "namespace", name)
        cluster.kubectl("label", "namespace", name, "kube-headroom.dev/mode=managed")
    cluster.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")
    cluster.apply(headroom_config(**config))
    cluster.kubectl("wait", "node", *nodes, "--for=condition=Ready", "--timeout=60s")
    kubeconfig = service_account_kubeconfig(cluster, RECONCILER)
    reconcilers = [spawn_reconciler(tmp_path, kubeconfig, i) for i in range(2)]
    try:
        with BackgroundOracle(kubeconfig=cluster.kubeconfig) as oracle:
            for reconciler in reconcilers:
                eventually(reconciler.ready, timeout=60, what="reconciler readiness")
            eventually(oracle.synced, timeout=60, what="the oracle's caches")
            yield Scenario(
                cluster=cluster,
                api=Api(cluster.plane),
                workdir=tmp_path,
                nodes=nodes,
                namespaces=namespaces,
                reconcilers=reconcilers,
                oracle=oracle,
            )
    finally:
        for reconciler in reconcilers:
            reconciler.terminate()
        for name in namespaces:
            cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")
        for name in nodes:
            cluster.delete_node(name)


def converges(scenario: Scenario, wave: Wave, thread: threading.Thread, healthy_at: float) -> float:
    """Seconds from the later of healthy-again and the wave's end to full convergence."""
    thread.join(timeout=600)
    assert wave.finished_at is not None
    since = max(healthy_at, wave.finished_at)
    converged = on_target_within(scenario, since=since)
    print(
        f"wave ended {wave.finished_at - healthy_at:+.1f} s from healthy; "
        f"converged {converged:.1f} s after both"
    )
    return converged


def off_target(scenario: Scenario) -> list[str]:
    """The scenario's managed pods the oracle finds off target."""
    ours = tuple(f"{namespace}/" for namespace in scenario.namespaces)
    return [key for key in scenario.oracle.off_target() if key.startswith(ours)]


def on_target_within(scenario: Scenario, *, since: float, limit: float = 120.0) -> float:
    """Seconds from ``since`` until every pod of the scenario is on target (at most
    ``limit``); no limit may have been removed meanwhile."""
    deadline = since + limit
    off: list[str] = []
    while time.time() < deadline:
        off = off_target(scenario)
        if not off:
            break
        time.sleep(0.1)
    assert not off, f"{len(off)} pods off target {limit:.0f} s after recovery: {off[:10]}"
    assert scenario.oracle.removed() == set()
    return time.time() - since


def mid_wave(wave: Wave) -> None:
    eventually(lambda: wave.created >= NODES * PODS_PER_NODE // 3, timeout=120, what="mid-wave")
