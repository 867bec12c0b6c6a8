import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from app.core.config import DEFAULT_SETTINGS
from app.core.explain import Explanation, event_message, explain, status_annotation
from app.core.policy import NodeResult, PodResult, compute_node
from tests.unit.app.builders import POD_B_EXPLANATION as POD_B
from tests.unit.app.core.policy.inputs import managed_pod, node_input

NOW = datetime(2026, 3, 1, 12, 30, 45, 999999, tzinfo=UTC)


def worked_example() -> tuple[NodeResult, PodResult]:
    pods = [managed_pod("a", 500), managed_pod("b", 1500, limits_m=[1500]), managed_pod("c", 6000)]
    node = compute_node(node_input(pods), DEFAULT_SETTINGS)
    return node, node.pods[1]


@pytest.mark.parametrize("dry_run", [True, False])
def test_explain_reads_one_computation(dry_run: bool) -> None:
    node, pod = worked_example()
    assert explain(node, pod, dry_run=dry_run) == replace(POD_B, dry_run=dry_run)


@pytest.mark.parametrize(
    ("factor", "text"),
    [
        pytest.param(Fraction(1), "1.00", id="one"),
        pytest.param(Fraction(2), "2.00", id="two"),
        pytest.param(Fraction(4, 3), "1.33", id="thirds-down"),
        pytest.param(Fraction(5, 3), "1.67", id="thirds-up"),
        pytest.param(Fraction(201, 200), "1.01", id="half-up"),
        pytest.param(Fraction(1234, 10), "123.40", id="large"),
    ],
)
def test_factor_has_two_decimals(factor: Fraction, text: str) -> None:
    node, pod = worked_example()
    assert explain(replace(node, factor=factor), pod, dry_run=False).factor == text


# Each case is pod B's explanation with its changes.
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({}, "1500m -> 3000m (node factor 2.00, slack 8/16 cores)", id="applied"),
        pytest.param(
            {"dry_run": True},
            "would set 1500m -> 3000m (node factor 2.00, slack 8/16 cores)",
            id="dry-run",
        ),
        pytest.param(
            {"slack_m": 8500, "allocatable_m": 16000},
            "1500m -> 3000m (node factor 2.00, slack 8.5/16 cores)",
            id="fractional-slack",
        ),
        pytest.param(
            {"slack_m": 250, "allocatable_m": 3750},
            "1500m -> 3000m (node factor 2.00, slack 0.25/3.75 cores)",
            id="two-decimals",
        ),
        pytest.param(
            {"current_m": 0},
            "unset -> 3000m (node factor 2.00, slack 8/16 cores)",
            id="no-limit-yet",
        ),
        pytest.param(
            {"pool": "web"},
            "1500m -> 3000m (node factor 2.00, slack 8/16 cores, pool web)",
            id="pool",
        ),
        pytest.param(
            {
                "factor": "1.00",
                "slack_m": 0,
                "overbooked_m": 500,
                "current_m": 3000,
                "target_m": 1500,
            },
            "3000m -> 1500m (node factor 1.00, slack 0/16 cores, overbooked by 0.5 cores)",
            id="overbooked-node",
        ),
        pytest.param(
            {"vpa_upper_bound_m": 3000},
            "1500m -> 3000m (node factor 2.00, slack 8/16 cores, VPA upper bound 3000m)",
            id="vpa-upper-bound",
        ),
        pytest.param(
            {"weight": 4, "weight_rule": "spec.weights[0]"},
            "1500m -> 3000m (node factor 2.00, slack 8/16 cores, weight 4 by spec.weights[0])",
            id="weighted",
        ),
        pytest.param(
            {"weight": 1, "weight_rule": "spec.weights[2]"},
            "1500m -> 3000m (node factor 2.00, slack 8/16 cores)",
            id="weight-1-by-a-rule",
        ),
    ],
)
def test_event_message(changes: dict[str, Any], message: str) -> None:
    assert event_message(replace(POD_B, **changes)) == message


def test_status_annotation_fields() -> None:
    text = status_annotation(POD_B, previous=None, now=NOW)
    assert json.loads(text) == {
        "factor": "2.00",
        "slack": "8000m",
        "managedRequests": "8000m",
        "nodePods": 3,
        "targetLimit": "3000m",
        "policy": "proportional-v1",
        "computedAt": "2026-03-01T12:30:45Z",
    }


def test_the_pool_is_named_only_for_nodes_in_one() -> None:
    assert "pool" not in json.loads(status_annotation(POD_B, previous=None, now=NOW))
    text = status_annotation(replace(POD_B, pool="batch"), previous=None, now=NOW)
    assert json.loads(text)["pool"] == "batch"


def test_the_vpa_target_is_named_only_when_it_set_the_target() -> None:
    assert "vpaUpperBound" not in json.loads(status_annotation(POD_B, previous=None, now=NOW))
    text = status_annotation(replace(POD_B, vpa_upper_bound_m=3000), previous=None, now=NOW)
    assert json.loads(text)["vpaUpperBound"] == "3000m"


def test_explain_carries_the_vpa_target_that_set_the_target() -> None:
    pod = managed_pod("p", 250)
    node = compute_node(
        node_input([pod], allocatable_m=4000, unmanaged_m=3500, vpa_floors={"p": {"c0": 1500}}),
        DEFAULT_SETTINGS,
    )
    assert explain(node, node.pods[0], dry_run=False).vpa_upper_bound_m == 1500


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        pytest.param(4, {"weight": 4, "weightRule": "spec.weights[0]"}, id="weighted"),
        pytest.param(0, {"weight": 0, "weightRule": "spec.weights[0]"}, id="weight-0"),
        # Everyone's weight by default: the annotation is byte for byte an unweighted one.
        pytest.param(1, {}, id="weight-1"),
    ],
)
def test_the_weight_is_named_only_when_a_rule_changed_it(
    weight: int, expected: dict[str, object]
) -> None:
    pod = managed_pod("p", 500)
    node = compute_node(node_input([pod], weights={"p": weight}), DEFAULT_SETTINGS)
    explanation = explain(node, node.pods[0], dry_run=False)
    assert (explanation.weight, explanation.weight_rule) == (weight, "spec.weights[p]")
    fields = json.loads(
        status_annotation(
            replace(explanation, weight_rule="spec.weights[0]"), previous=None, now=NOW
        )
    )
    assert {key: fields[key] for key in ("weight", "weightRule") if key in fields} == expected


def test_dry_run_is_marked_only_when_true() -> None:
    text = status_annotation(replace(POD_B, dry_run=True), previous=None, now=NOW)
    assert json.loads(text)["dryRun"] is True


def test_computed_at_is_utc() -> None:
    paris = timezone(timedelta(hours=1))
    text = status_annotation(POD_B, previous=None, now=datetime(2026, 3, 1, 13, 0, tzinfo=paris))
    assert json.loads(text)["computedAt"] == "2026-03-01T12:00:00Z"


def test_naive_time_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        status_annotation(POD_B, previous=None, now=datetime(2026, 3, 1))


def test_unchanged_status_keeps_its_timestamp() -> None:
    previous = status_annotation(POD_B, previous=None, now=NOW)
    later = NOW + timedelta(minutes=5)
    assert status_annotation(POD_B, previous=previous, now=later) is previous


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(replace(POD_B, target_m=3500), id="target"),
        pytest.param(replace(POD_B, factor="1.90"), id="factor"),
        pytest.param(replace(POD_B, slack_m=7000), id="slack"),
        pytest.param(replace(POD_B, managed_m=9000), id="managed"),
        pytest.param(replace(POD_B, node_pods=4), id="pods"),
        pytest.param(replace(POD_B, dry_run=True), id="dry-run-on"),
    ],
)
def test_a_change_restamps(changed: Explanation) -> None:
    previous = status_annotation(POD_B, previous=None, now=NOW)
    later = NOW + timedelta(minutes=5)
    text = status_annotation(changed, previous=previous, now=later)
    assert json.loads(text)["computedAt"] == "2026-03-01T12:35:45Z"


@pytest.mark.parametrize(
    "previous",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="not-an-object"),
        pytest.param('{"factor": "2.00"}', id="no-computed-at"),
    ],
)
def test_unreadable_previous_status_is_replaced(previous: str) -> None:
    text = status_annotation(POD_B, previous=previous, now=NOW)
    assert json.loads(text)["computedAt"] == "2026-03-01T12:30:45Z"


def test_annotation_and_event_agree_on_the_applied_target() -> None:
    node, pod = worked_example()
    explanation = explain(node, pod, dry_run=False)
    annotation = json.loads(status_annotation(explanation, previous=None, now=NOW))
    assert annotation["targetLimit"] == f"{pod.containers[0].limit_m}m"
    assert event_message(explanation).split(" -> ")[1].startswith(annotation["targetLimit"])


def test_an_overbooked_node_shows_no_negative_slack() -> None:
    """Bookings 2 cores beyond allocatable: slack reads 0 and the excess is overbooked."""
    pods = [managed_pod("a", 1000, limits_m=[3000])]
    node = compute_node(node_input(pods, unmanaged_m=17000), DEFAULT_SETTINGS)
    assert node.slack_m == -2000
    explanation = explain(node, node.pods[0], dry_run=False)
    assert (explanation.slack_m, explanation.overbooked_m) == (0, 2000)
    annotation = json.loads(status_annotation(explanation, previous=None, now=NOW))
    assert (annotation["slack"], annotation["overbooked"]) == ("0m", "2000m")
    assert event_message(explanation) == (
        "3000m -> 1000m (node factor 1.00, slack 0/16 cores, overbooked by 2 cores)"
    )


def test_overbooked_is_only_shown_when_there_is_some() -> None:
    assert "overbooked" not in json.loads(status_annotation(POD_B, previous=None, now=NOW))
