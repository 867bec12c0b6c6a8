"""``kubectl headroom preflight`` as a real kubectl plugin against the real API server."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.kubectl_headroom.plugin import kubectl_headroom


def findings(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    document = json.loads(result.stdout)
    items: list[dict[str, Any]] = document["findings"]
    return items


@pytest.fixture
def windows_node(control_plane: Cluster) -> Iterator[str]:
    name = f"win-{uuid.uuid4().hex[:6]}"
    control_plane.create_node(name, os="windows")
    yield name
    control_plane.delete_node(name)


def test_clean_cluster_passes(control_plane: Cluster, third_party_crds: list[str]) -> None:
    result = kubectl_headroom(control_plane, "preflight", "-o", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["blockers"] == 0


def test_planted_problems_are_found(
    control_plane: Cluster, third_party_crds: list[str], namespace: str, windows_node: str
) -> None:
    control_plane.kubectl("label", "namespace", namespace, "kube-headroom.dev/mode=managed")
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "cpu-limits", "namespace": namespace},
            "spec": {"hard": {"limits.cpu": "8", "requests.cpu": "4"}},
        }
    )
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "caps", "namespace": namespace},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]},
        }
    )
    control_plane.apply(
        {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        }
    )
    result = kubectl_headroom(control_plane, "preflight", "-o", "json")
    assert result.returncode == 1, result.stderr
    found = {(f["check"], f["severity"], f["subject"]) for f in findings(result)}
    assert {
        ("limits-cpu-quota", "blocker", f"resourcequota/{namespace}/cpu-limits"),
        ("limitrange-max", "warning", f"limitrange/{namespace}/caps"),
        ("vpa-controls-limits", "warning", f"verticalpodautoscaler/{namespace}/web"),
        ("windows-node", "warning", f"node/{windows_node}"),
    } <= found

    table = kubectl_headroom(control_plane, "preflight")
    assert table.returncode == 1
    assert "replace limits.cpu with requests.cpu" in table.stdout
    assert "blocker(s)" in table.stdout


def test_planned_namespace_is_checked_before_enrolment(
    control_plane: Cluster, third_party_crds: list[str], namespace: str
) -> None:
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "cpu-limits", "namespace": namespace},
            "spec": {"hard": {"limits.cpu": "8"}},
        }
    )
    unplanned = kubectl_headroom(control_plane, "preflight", "-o", "json")
    assert ("limits-cpu-quota", "info") in {
        (f["check"], f["severity"])
        for f in findings(unplanned)
        if f["subject"] == f"resourcequota/{namespace}/cpu-limits"
    }
    planned = kubectl_headroom(control_plane, "preflight", "-n", namespace, "-o", "json")
    assert planned.returncode == 1
    assert ("limits-cpu-quota", "blocker") in {
        (f["check"], f["severity"])
        for f in findings(planned)
        if f["subject"] == f"resourcequota/{namespace}/cpu-limits"
    }
