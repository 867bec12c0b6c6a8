from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.config_status import Summary, desired_status, ready_condition, status_differs

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = "2029-12-31T00:00:00Z"


def summary(**overrides: Any) -> Summary:
    fields: dict[str, Any] = {
        "generation": 3,
        "managed_pods": 42,
        "managed_nodes": 7,
        "dry_run": False,
    }
    fields.update(overrides)
    return Summary(**fields)


@pytest.mark.parametrize(
    ("overrides", "status", "reason", "message"),
    [
        pytest.param(
            {}, "True", "Enforcing", "enforcing; managing 42 pods on 7 nodes", id="enforcing"
        ),
        pytest.param(
            {"dry_run": True},
            "True",
            "DryRun",
            "dry-run; managing 42 pods on 7 nodes",
            id="dry-run",
        ),
        pytest.param(
            {"managed_pods": 1, "managed_nodes": 1},
            "True",
            "Enforcing",
            "enforcing; managing 1 pod on 1 node",
            id="singular",
        ),
        pytest.param(
            {"invalid": "spec.quantum: must be > 0"},
            "False",
            "InvalidConfig",
            "config rejected, limits frozen until it is fixed: spec.quantum: must be > 0",
            id="invalid",
        ),
    ],
)
def test_ready_condition(overrides: dict[str, Any], status: str, reason: str, message: str) -> None:
    condition = ready_condition(summary(**overrides))
    assert condition == {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": 3,
    }


def test_desired_status_for_a_fresh_config() -> None:
    assert desired_status(summary(), current=None, now=NOW) == {
        "observedGeneration": 3,
        "managedPods": 42,
        "managedNodes": 7,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Enforcing",
                "message": "enforcing; managing 42 pods on 7 nodes",
                "observedGeneration": 3,
                "lastTransitionTime": "2030-01-01T12:00:00Z",
            }
        ],
    }


def test_defaults_have_no_generation() -> None:
    status = desired_status(summary(generation=None), current=None, now=NOW)
    assert "observedGeneration" not in status
    assert "observedGeneration" not in status["conditions"][0]


@pytest.mark.parametrize(
    ("previous_status", "transition"),
    [
        pytest.param("True", EARLIER, id="same-status-keeps-time"),
        pytest.param("False", "2030-01-01T12:00:00Z", id="flip-restamps"),
    ],
)
def test_transition_time_moves_only_when_the_status_flips(
    previous_status: str, transition: str
) -> None:
    current = {
        "conditions": [
            {"type": "Ready", "status": previous_status, "lastTransitionTime": EARLIER},
        ]
    }
    status = desired_status(summary(), current=current, now=NOW)
    assert status["conditions"][0]["lastTransitionTime"] == transition


def test_status_differs_only_on_a_real_change() -> None:
    first = desired_status(summary(), current=None, now=NOW)
    again = desired_status(summary(), current=first, now=NOW.replace(hour=13))
    assert not status_differs(again, first)
    moved = desired_status(summary(managed_pods=43), current=first, now=NOW)
    assert status_differs(moved, first)
    assert status_differs(first, None)
