from typing import Any

import pytest

from app.core.birth import Unseeded, birth_reach
from app.core.config import DEFAULT_SETTINGS, Settings, parse_config
from app.core.nodefeatures import POD_LEVEL_RESIZE
from app.core.placement import placement
from app.core.views import node_record
from tests.unit.app.builders import headroom_config, node

Obj = dict[str, Any]
ENFORCING = parse_config(
    headroom_config(
        spec={
            "dryRun": False,
            "excludedNodeSelector": {"matchLabels": {"cpu-manager-policy": "static"}},
            "nodePools": [
                {
                    "name": "batch",
                    "nodeSelector": {"matchLabels": {"pool": "batch"}},
                    "dryRun": True,
                }
            ],
        }
    )
)
RESERVED = {"key": "reserved", "value": "true", "effect": "NoSchedule"}


def _node(name: str, labels: dict[str, str] | None = None, **kwargs: Any) -> Obj:
    kwargs.setdefault("declared_features", [POD_LEVEL_RESIZE])
    return node(
        name, labels={"kubernetes.io/os": "linux", "role": name, **(labels or {})}, **kwargs
    )


NODES = [
    _node("managed"),
    _node("excluded", {"cpu-manager-policy": "static"}),
    _node("old", kubelet_version="v1.34.2"),
    _node("silent", kubelet_version=None),
    _node("windows", {"kubernetes.io/os": "windows"}, operating_system="windows"),
    _node("batch", {"pool": "batch"}),
    _node("flat", declared_features=None),
    # Unmanaged, but no pod here tolerates its taint.
    _node("tainted", {"cpu-manager-policy": "static"}, taints=[RESERVED]),
]


def _on(role: str) -> Obj:
    return {"nodeSelector": {"role": role}}


CASES = {
    "a-managed-node": (_on("managed"), False, None, None),
    "excluded-by-selector": (
        _on("excluded"),
        False,
        Unseeded.UNMANAGED_NODE,
        "node excluded, which Headroom does not manage (node-excluded)",
    ),
    "kubelet-too-old": (
        _on("old"),
        False,
        Unseeded.UNMANAGED_NODE,
        "old, which Headroom does not manage (kubelet-too-old)",
    ),
    "kubelet-version-unknown": (
        _on("silent"),
        False,
        Unseeded.UNMANAGED_NODE,
        "(kubelet-version-unknown)",
    ),
    "windows": (_on("windows"), False, Unseeded.UNMANAGED_NODE, "(windows-node)"),
    "a-pool-in-dry-run": (
        _on("batch"),
        False,
        Unseeded.UNMANAGED_NODE,
        "in dry-run (node pool batch)",
    ),
    "no-node-selected": (_on("nowhere"), False, Unseeded.NO_NODE, "no node"),
    "pod-level-where-only-containers-resize": (
        _on("flat"),
        True,
        Unseeded.UNMANAGED_NODE,
        "pod-level",
    ),
    "pod-level-where-it-resizes": (_on("managed"), True, None, None),
    "container-level-where-only-containers-resize": (_on("flat"), False, None, None),
    "any-node-may-be-an-unmanaged-one": ({}, False, Unseeded.UNMANAGED_NODE, "node excluded"),
    "an-untolerated-taint-keeps-it-off": (_on("tainted"), False, Unseeded.NO_NODE, "no node"),
    "a-tolerated-taint-lets-it-on": (
        {**_on("tainted"), "tolerations": [{"key": "reserved", "operator": "Exists"}]},
        False,
        Unseeded.UNMANAGED_NODE,
        "tainted",
    ),
}


@pytest.mark.parametrize(
    ("spec", "pod_level", "reason", "detail"), list(CASES.values()), ids=list(CASES)
)
def test_a_birth_limit_is_seeded_only_where_the_reconciler_takes_it_over(
    spec: Obj, pod_level: bool, reason: Unseeded | None, detail: str | None
) -> None:
    nodes = [node_record(n) for n in NODES]
    found = birth_reach(
        ENFORCING, placement(spec), nodes, reconciler_live=True, pod_level=pod_level
    )
    assert (found and found.reason) == reason
    if detail is not None:
        assert found is not None
        assert detail in found.detail


@pytest.mark.parametrize("settings", [ENFORCING, DEFAULT_SETTINGS], ids=["enforcing", "defaults"])
def test_without_a_live_reconciler_nothing_is_seeded(settings: Settings) -> None:
    nodes = [node_record(_node("managed"))]
    found = birth_reach(
        settings, placement(_on("managed")), nodes, reconciler_live=False, pod_level=False
    )
    assert found is not None
    assert found.reason is Unseeded.NO_RECONCILER
