"""Fixtures of the chart's tests: a node for the release's pods, and a cluster left as the
session had it after each install."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.labels import CONFIG_NAME
from tests.integration.conftest import Cluster, eventually, run_helm
from tests.integration.rbac import RELEASE, RELEASE_NAMESPACE

CRD_RELEASE = "kube-headroom-crds"
RELEASE_PODS = f"app.kubernetes.io/instance={RELEASE}"


def release_pods(cluster: Cluster) -> str:
    return cluster.kubectl(
        "get",
        "pods",
        f"--namespace={RELEASE_NAMESPACE}",
        f"--selector={RELEASE_PODS}",
        "-o",
        "name",
    ).strip()


@pytest.fixture(scope="module")
def install_node(control_plane: Cluster) -> Iterator[str]:
    """A simulated node, so the Deployments' pods run and `--wait` completes."""
    with control_plane.fresh_node("install") as name:
        yield name


@pytest.fixture
def clean_install(
    control_plane: Cluster,
    helm: Path,
    headroom_crd: str,
    third_party_crds: list[str],
    install_node: str,
) -> Iterator[None]:
    """Leave the cluster as the session had it: no operator release (nor its webhook
    configurations), no HeadroomConfig, the CRD chart installed."""
    try:
        yield
    finally:
        run_helm(
            control_plane, helm, "uninstall", RELEASE, f"--namespace={RELEASE_NAMESPACE}",
            "--ignore-not-found", "--wait",
        )  # fmt: skip
        control_plane.kubectl("delete", "hcfg", CONFIG_NAME, "--ignore-not-found")
        run_helm(control_plane, helm, "upgrade", "--install", CRD_RELEASE, f"chart/{CRD_RELEASE}")
        eventually(lambda: not release_pods(control_plane), what="the release's pods to go")
