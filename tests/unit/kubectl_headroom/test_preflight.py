from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from app.core.config import parse_config
from kubectl_headroom.preflight import Severity, preflight
from kubectl_headroom.state import ClusterState
from tests.unit.app import builders as b

# What keeps ordinary pods off a node meant for some only.
DEDICATED = {"key": "dedicated", "value": "legacy", "effect": "NoSchedule"}


def _node(
    name: str = "node-1",
    *,
    kubelet: str = "v1.37.2",
    os: str = "linux",
    taints: Sequence[dict[str, Any]] = (),
    **labels: str,
) -> dict[str, Any]:
    return b.node(
        name,
        labels={"kubernetes.io/os": "linux", **labels},
        kubelet_version=kubelet,
        operating_system=os,
        taints=taints,
    )


def _guarded(name: str, **node: Any) -> dict[str, Any]:
    """A node that a NoSchedule taint guards, so that only its own findings show."""
    return _node(name, taints=[DEDICATED], **node)


def state(
    *,
    server: str = "v1.37.2",
    nodes: Sequence[dict[str, Any]] | None = None,
    namespaces: Sequence[dict[str, Any]] | None = None,
    quotas: Sequence[dict[str, Any]] = (),
    limit_ranges: Sequence[dict[str, Any]] = (),
    vpas: Sequence[dict[str, Any]] | None = (),
    cert_manager: bool = True,
    config: dict[str, Any] | None = None,
) -> ClusterState:
    return ClusterState(
        server_version=server,
        nodes=list(nodes if nodes is not None else [_node()]),
        namespaces=list(
            namespaces
            if namespaces is not None
            else [b.namespace("team-a"), b.namespace("other", labels={})]
        ),
        quotas=list(quotas),
        limit_ranges=list(limit_ranges),
        vpas=None if vpas is None else list(vpas),
        cert_manager=cert_manager,
        config=config,
    )


def checks(cluster: ClusterState, **kwargs: Any) -> list[tuple[str, Severity, str]]:
    settings, _ = cluster.settings()
    return [
        (f.check, f.severity, f.subject) for f in preflight(cluster, settings=settings, **kwargs)
    ]


def test_clean_cluster_has_no_findings() -> None:
    assert checks(state()) == []


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        pytest.param(
            state(server="v1.34.3"),
            ("server-version", Severity.BLOCKER, "kube-apiserver"),
            id="old-server",
        ),
        pytest.param(
            state(server="weird"),
            ("server-version", Severity.WARNING, "kube-apiserver"),
            id="unparseable-server",
        ),
        pytest.param(
            state(nodes=[_node("numa", **{"kubernetes.io/cpu-manager-policy": "static"})]),
            ("static-resource-manager", Severity.WARNING, "node/numa"),
            id="static-cpu-manager",
        ),
        pytest.param(
            state(quotas=[b.resource_quota("q", namespace="team-a", hard={"limits.cpu": "4"})]),
            ("limits-cpu-quota", Severity.BLOCKER, "resourcequota/team-a/q"),
            id="limits-quota-in-managed-namespace",
        ),
        pytest.param(
            state(quotas=[b.resource_quota("q", namespace="other", hard={"limits.cpu": "4"})]),
            ("limits-cpu-quota", Severity.INFO, "resourcequota/other/q"),
            id="limits-quota-elsewhere",
        ),
        pytest.param(
            state(limit_ranges=[b.limit_range("lr", namespace="team-a", container_max_cpu="2")]),
            ("limitrange-max", Severity.WARNING, "limitrange/team-a/lr"),
            id="limitrange-max",
        ),
        pytest.param(
            state(vpas=[b.vpa("web", namespace="team-a")]),
            ("vpa-controls-limits", Severity.WARNING, "verticalpodautoscaler/team-a/web"),
            id="vpa-requests-and-limits",
        ),
        pytest.param(
            state(cert_manager=False),
            ("cert-manager", Severity.BLOCKER, "certificates.cert-manager.io"),
            id="no-cert-manager",
        ),
    ],
)
def test_each_problem_is_found(cluster: ClusterState, expected: tuple[str, Severity, str]) -> None:
    assert checks(cluster) == [expected]


# The node is guarded, so its own problem is all there is to find.
@pytest.mark.parametrize(
    ("node", "check"),
    [
        pytest.param(_guarded("old", kubelet="v1.33.1"), "kubelet-version", id="old-kubelet"),
        pytest.param(_guarded("silent", kubelet=""), "kubelet-version", id="unknown-kubelet"),
        pytest.param(_guarded("win2", os="windows"), "windows-node", id="windows-by-node-info"),
        pytest.param(
            _guarded("win", **{"kubernetes.io/os": "windows"}), "windows-node", id="windows"
        ),
    ],
)
def test_each_problem_of_a_node_is_a_warning(node: dict[str, Any], check: str) -> None:
    name = node["metadata"]["name"]
    assert checks(state(nodes=[node])) == [(check, Severity.WARNING, f"node/{name}")]


def test_planned_namespaces_are_checked_like_managed_ones() -> None:
    cluster = state(quotas=[b.resource_quota("q", namespace="other", hard={"limits.cpu": "4"})])
    assert checks(cluster, planned=["other"]) == [
        ("limits-cpu-quota", Severity.BLOCKER, "resourcequota/other/q")
    ]


def test_a_requests_only_vpa_is_supported_and_unmanaged_limit_ranges_are_fine() -> None:
    requests_only = b.vpa(
        "web",
        namespace="team-a",
        container_policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}],
    )
    cluster = state(
        vpas=[requests_only],
        limit_ranges=[b.limit_range("lr", namespace="other", container_max_cpu="2")],
    )
    assert checks(cluster) == [
        ("vpa-requests-only", Severity.INFO, "verticalpodautoscaler/team-a/web")
    ]


def test_nodes_excluded_by_the_config_are_not_version_checked() -> None:
    config = b.headroom_config(spec={"excludedNodeSelector": {"matchLabels": {"pool": "legacy"}}})
    old = _guarded("old", kubelet="v1.30.0", pool="legacy")
    assert checks(state(nodes=[old], config=config)) == []


EXCLUDING = b.headroom_config(spec={"excludedNodeSelector": {"matchLabels": {"pool": "legacy"}}})


@pytest.mark.parametrize(
    ("node", "config", "expected"),
    [
        pytest.param(_node("legacy-1", pool="legacy"), EXCLUDING, [], id="excluded"),
        pytest.param(
            _node("win", os="windows"),
            None,
            [("windows-node", Severity.WARNING, "node/win")],
            id="windows",
        ),
        pytest.param(
            _node("soft", pool="legacy", taints=[{**DEDICATED, "effect": "PreferNoSchedule"}]),
            EXCLUDING,
            [],
            id="prefer-no-schedule-keeps-no-pod-off",
        ),
    ],
)
def test_a_node_headroom_leaves_alone_that_no_taint_guards_costs_birth_limits(
    node: dict[str, Any], config: dict[str, Any] | None, expected: list[tuple[str, Severity, str]]
) -> None:
    name = node["metadata"]["name"]
    found = checks(state(nodes=[node], config=config))
    assert found == [*expected, ("untainted-unmanaged-node", Severity.INFO, f"node/{name}")]


def test_blockers_sort_first() -> None:
    cluster = state(
        nodes=[_node("win", **{"kubernetes.io/os": "windows"})],
        cert_manager=False,
    )
    assert [c[1] for c in checks(cluster)] == [
        Severity.BLOCKER,
        Severity.WARNING,
        Severity.INFO,
    ]


def test_an_invalid_config_falls_back_to_defaults_with_a_reason() -> None:
    cluster = state(config=b.headroom_config(spec={"quantum": "0"}))
    settings, problem = cluster.settings()
    assert settings == parse_config(None)
    assert problem is not None
    assert "spec.quantum" in problem


def test_a_node_too_old_to_resize_says_its_pods_are_left_alone() -> None:
    settings = parse_config(b.headroom_config())
    old = _guarded("old", kubelet="v1.34.2")
    [finding] = preflight(state(nodes=[old]), settings=settings)
    assert finding.message == (
        "kubelet v1.34.2 cannot resize pods in place (needs 1.35 or newer): "
        "Headroom leaves its pods alone"
    )
    assert finding.fix == "upgrade the node to 1.35+; its pods are managed from then on"
