"""The real-node fleet: one boot of the qemu guests per pytest session, shared by every
tier that asks for it (the end-to-end tier's chart pods, the real-node tier's tests).

``make test`` runs both tiers in one session (``hack/tiers.sh``), so the fleet
boots once; the end-to-end tier leaves the nodes empty behind it (its fixtures
are package-scoped and uninstall what they installed), as each real-node test does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devcluster.addons import Registry, addon_paths
from devcluster.realnet import HOST_ADDRESS
from devcluster.realnodes import RealCluster

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "_artifacts" / "fleet"
# The registry the chart's image is published to: the nodes pull it from the local one.
PUBLISHED_REGISTRY = str(
    yaml.safe_load((REPO / "chart/kube-headroom/values.yaml").read_text())["image"]["repository"]
).split("/", 1)[0]
# The one the Prometheus Operator's release manifests and defaults name (the operator, its
# config reloader, Prometheus): mirrored by the local one too.
OPERATOR_REGISTRY = "quay.io"


def say(config: pytest.Config, text: str) -> None:
    """Straight to the terminal, past pytest's output capture."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(text, flush=True)


@pytest.fixture(scope="session")
def real_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealCluster]:
    work = tmp_path_factory.mktemp("fleet")
    # The end-to-end tier pulls the chart's images and the operator's: a local registry,
    # mirroring the registries they are published to, starts with the fleet when that tier
    # is in the session.
    pulls = any(item.get_closest_marker("e2e") for item in request.session.items)
    registry = (
        Registry(binary=addon_paths().docker_registry, work_dir=work / "registry",
                 address=HOST_ADDRESS)
        if pulls
        else None
    )  # fmt: skip
    # qemu's agent sockets need a short path.
    run_dir = Path(tempfile.mkdtemp(prefix="hrq", dir="/tmp"))
    cluster = RealCluster(
        work_dir=work,
        run_dir=run_dir,
        registry=registry,
        mirrored=(PUBLISHED_REGISTRY, OPERATOR_REGISTRY) if pulls else (),
    )
    started = time.monotonic()
    cluster.start()
    say(
        request.config,
        f"\nreal nodes Ready {time.monotonic() - started:.1f}s after the session began: "
        + ", ".join(
            f"{name} {s:.1f}s after qemu started" for name, s in cluster.ready_after.items()
        ),
    )
    try:
        yield cluster
    finally:
        if request.session.testsfailed or os.environ.get("HEADROOM_KEEP_LOGS"):
            kept = cluster.keep_logs(ARTIFACTS / uuid.uuid4().hex[:6])
            print(f"\nreal-node logs kept in {kept}")
        cluster.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
