"""Fixtures for the integration tier: one real control plane per test session
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK) and a
fresh namespace per test."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from devcluster import ControlPlane, crds_dir, locate_binaries
from devcluster.kubeapi import KubeAPI
from devcluster.nodes import simulated_node

logger = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "_artifacts"
CRD = "headroomconfigs.kube-headroom.dev"


# The files that take minutes (each runs whole on one worker), longest first: handed out
# first, so that no worker is left with one at the end while the others idle.
LONG_FILES: Final = (
    "reconciler/test_workload_autoscalers.py",
    "reconciler/test_node_autoscaler.py",
    "test_demo.py",
    "reconciler/test_differential.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    rank = {here / name: place for place, name in enumerate(LONG_FILES)}
    # A stable sort: every other test keeps its place.
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)), len(rank)))


@dataclass
class Cluster:
    """What integration tests get: the running control plane and helpers."""

    plane: ControlPlane

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def server(self) -> str:
        return self.plane.server

    @property
    def bin_dir(self) -> Path:
        return self.plane.bin_dir

    @property
    def ca_file(self) -> Path:
        return self.plane.ca_file

    @property
    def token(self) -> str:
        return self.plane.token

    @property
    def api(self) -> KubeAPI:
        return self.plane.api

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return self.plane.kubectl(*args, input=input, check=check)

    def apply(self, obj: dict[str, Any]) -> str:
        return self.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(obj))

    def create_node(self, name: str, **kwargs: Any) -> str:
        """Create a KWOK-simulated node and wait until it is Ready."""
        self.kubectl("create", "-f", "-", input=json.dumps(simulated_node(name, **kwargs)))
        self.kubectl("wait", f"node/{name}", "--for=condition=Ready", "--timeout=60s")
        return name

    def delete_node(self, name: str) -> None:
        self.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false")

    @contextmanager
    def fresh_node(self, prefix: str) -> Iterator[str]:
        """A Ready simulated node named ``<prefix>-<random>``, deleted after the block."""
        name = self.create_node(f"{prefix}-{uuid.uuid4().hex[:8]}")
        try:
            yield name
        finally:
            self.delete_node(name)

    def environ(self) -> dict[str, str]:
        return dict(self.plane.environ())


def eventually(
    check: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.25, what: str = ""
) -> Any:
    """Poll ``check`` until it returns a truthy value; fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what or check}; last value: {last!r}")


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    bin_dir = locate_binaries(build=True)
    plane = ControlPlane(work_dir=tmp_path_factory.mktemp("control-plane"), bin_dir=bin_dir)
    started = time.monotonic()
    plane.start()
    logger.info("control plane started in %.1fs", time.monotonic() - started)
    try:
        yield Cluster(plane)
    finally:
        plane.stop()
        if request.session.testsfailed or os.environ.get("HEADROOM_KEEP_LOGS"):
            kept = plane.keep_logs(ARTIFACTS / "control-plane-logs")
            print(f"\ncontrol-plane logs kept in {kept}")


@pytest.fixture
def namespace(control_plane: Cluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


@pytest.fixture(scope="session")
def helm(control_plane: Cluster) -> Path:
    path = control_plane.bin_dir / "helm"
    assert shutil.which(str(path)), f"helm missing in {control_plane.bin_dir}"
    return path


def run_helm(cluster: Cluster, helm_bin: Path, *args: str) -> str:
    """Run the real helm against the control plane from the repository root."""
    result = subprocess.run(
        [str(helm_bin), *args],
        env=cluster.environ(),
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def install_crd_chart(cluster: Cluster, helm_bin: Path) -> None:
    """Install (or upgrade) the CRD chart, as the install guide does."""
    run_helm(
        cluster, helm_bin, "upgrade", "--install", "kube-headroom-crds", "chart/kube-headroom-crds"
    )


@pytest.fixture(scope="session")
def headroom_crd(control_plane: Cluster, helm: Path) -> str:
    """The HeadroomConfig CRD, installed from its chart; returns its name."""
    install_crd_chart(control_plane, helm)
    control_plane.kubectl("wait", f"crd/{CRD}", "--for=condition=Established", "--timeout=60s")
    return CRD


@pytest.fixture(scope="session")
def third_party_crds(control_plane: Cluster) -> list[str]:
    """cert-manager, prometheus-operator and VPA CRDs, from their own Go modules."""
    directory = crds_dir(control_plane.bin_dir)
    files = sorted(directory.glob("*.yaml"))
    assert files, f"no third-party CRDs in {directory}; run hack/build-control-plane.sh"
    for path in files:
        control_plane.kubectl("apply", "--server-side", "-f", str(path))
    names = [
        line.split("/", 1)[1]
        for path in files
        for line in control_plane.kubectl("get", "-f", str(path), "-o", "name").split()
    ]
    for name in names:
        control_plane.kubectl("wait", f"crd/{name}", "--for=condition=Established", "--timeout=60s")
    return names
