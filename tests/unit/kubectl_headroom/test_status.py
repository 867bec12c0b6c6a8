from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.config import parse_config
from app.core.nodes import major_minor, resize_capable
from kubectl_headroom.status import leader_status, summarize
from tests.unit.app import builders as b


def _event(reason: str, at: str, pod: str = "web-1", message: str = "m") -> dict[str, Any]:
    return {
        "reason": reason,
        "lastTimestamp": at,
        "involvedObject": {"kind": "Pod", "namespace": "team-a", "name": pod},
        "message": message,
    }


def test_status_counts_outcomes_and_keeps_the_latest() -> None:
    config = b.headroom_config(spec={"dryRun": False})
    config["status"] = {
        "managedPods": 3,
        "managedNodes": 1,
        "conditions": [
            {"type": "Ready", "status": "True", "message": "enforcing; managing 3 pods on 1 nodes"}
        ],
    }
    events = [
        _event("CPULimitAdjusted", "2026-01-01T00:00:02Z", message="1500m -> 3000m"),
        _event("ResizeForbidden", "2026-01-01T00:00:03Z"),
        _event("Scheduled", "2026-01-01T00:00:01Z"),
        _event("CPULimitAdjusted", "2026-01-01T00:00:01Z"),
    ]
    status = summarize(
        config=config,
        settings=parse_config(config),
        managed_namespaces=["team-a"],
        events=events,
        recent=2,
    )
    assert status.mode == "enforcing"
    assert status.ready == "enforcing; managing 3 pods on 1 nodes"
    assert (status.managed_pods, status.managed_nodes) == (3, 1)
    assert status.outcomes == {"CPULimitAdjusted": 2, "ResizeInfeasible": 0, "ResizeForbidden": 1}
    assert [r["reason"] for r in status.recent] == ["CPULimitAdjusted", "ResizeForbidden"]
    assert status.recent[0]["message"] == "1500m -> 3000m"
    assert status.as_dict()["managedNamespaces"] == ["team-a"]


def test_status_without_config_is_dry_run_and_says_so() -> None:
    status = summarize(config=None, settings=parse_config(None), managed_namespaces=[], events=[])
    assert status.mode == "dry-run"
    assert not status.configured
    assert "no status yet" in status.ready


def test_versions() -> None:
    assert major_minor("v1.35.4") == (1, 35)
    assert major_minor("1.36") == (1, 36)
    assert major_minor("v1.37.2-eks.3") == (1, 37)
    assert major_minor("simulated") is None
    assert resize_capable("v1.34.9") is False
    assert resize_capable("v1.35.0") is True
    assert resize_capable("") is None


def test_status_lists_the_pools_with_their_nodes_mode_and_overrides() -> None:
    pools = [
        {
            "name": "web",
            "nodeSelector": {"matchLabels": {"pool": "web"}},
            "maxMultiplier": "2.5",
            "deadband": {"growPercent": 20},
        },
        {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "dryRun": True},
        {
            "name": "gpu",
            "nodeSelector": {"matchLabels": {"pool": "gpu"}},
            "quantum": "1",
            "weights": [{"priorityClassName": "critical", "weight": 4}, {"weight": 0}],
        },
    ]
    config = b.headroom_config(spec={"dryRun": False, "nodePools": pools})
    status = summarize(
        config=config,
        settings=parse_config(config),
        managed_namespaces=[],
        events=[],
        node_labels=[{"pool": "web"}, {"pool": "web"}, {"pool": "batch"}, {}],
    )
    assert status.as_dict()["pools"] == [
        {
            "name": "web",
            "nodes": 2,
            "mode": "enforcing",
            "overrides": ["maxMultiplier=2.5", "deadband.growPercent=20"],
        },
        {"name": "batch", "nodes": 1, "mode": "dry-run", "overrides": ["dryRun=true"]},
        {
            "name": "gpu",
            "nodes": 0,
            "mode": "enforcing",
            "overrides": ["quantum=1", "weights=2 rules"],
        },
    ]
    assert status.nodes_without_pool == 1


NOW = datetime(2030, 1, 1, 12, 0, 10, tzinfo=UTC)


def _lease(holder: str | None, renewed: str = "2030-01-01T12:00:05.000000Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"leaseDurationSeconds": 15, "renewTime": renewed}
    if holder is not None:
        spec["holderIdentity"] = holder
    return {"kind": "Lease", "spec": spec}


@pytest.mark.parametrize(
    ("lease", "text", "expires_in"),
    [
        pytest.param(
            _lease("pod-a_1234"),
            "pod-a_1234 (lease expires in 10s unless renewed)",
            10.0,
            id="held",
        ),
        pytest.param(
            _lease("pod-a_1234", renewed="2030-01-01T11:59:40Z"),
            "none: pod-a_1234's lease expired 15s ago",
            -15.0,
            id="expired",
        ),
        pytest.param(_lease(None), "none (the lease is free)", 10.0, id="released"),
    ],
)
def test_the_leader_and_when_its_lease_expires(
    lease: dict[str, Any], text: str, expires_in: float
) -> None:
    leader = leader_status(lease, now=NOW)
    assert leader is not None
    assert leader.text() == text
    assert leader.as_dict()["expiresInSeconds"] == expires_in


def test_no_lease_means_no_leader_elected() -> None:
    assert leader_status(None, now=NOW) is None
