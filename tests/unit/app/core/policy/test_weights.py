"""Weighted shares of the slack (``spec.weights``): the worked cases of the formula."""

from fractions import Fraction

import pytest

from app.core.config import DEFAULT_SETTINGS as DEFAULT
from app.core.policy import compute_node
from tests.unit.app.core.policy.inputs import managed_pod, node_input
from tests.unit.app.core.policy.test_node import NO_FLOOR, worked_example

# Two servers requesting 250m beside 200m of unmanaged bookings on 2400m: S = 1700m.
SERVERS = [managed_pod("critical", 250), managed_pod("batch", 250)]


@pytest.mark.parametrize(
    ("weights", "floor", "expected", "factor"),
    [
        # W = 4*250 + 250: the shares are 4/5 and 1/5 of the slack.
        pytest.param({"critical": 4}, False, [1610, 590], Fraction(1700 + 1250, 1250), id="4-to-1"),
        # The floor share (min(1000m, S/2) = 850m) lifts the light pod: not the heavy one.
        pytest.param({"critical": 4}, True, [1610, 1100], Fraction(1700 + 1250, 1250), id="floor"),
        pytest.param({"batch": 0}, False, [1950, 250], Fraction(1700 + 250, 250), id="weight-0"),
        pytest.param({"batch": 0}, True, [1950, 1100], Fraction(1700 + 250, 250), id="0-floor"),
        # Every weight 0: no pod has a share; the floor alone, and the factor is 1.
        pytest.param({"critical": 0, "batch": 0}, True, [1100, 1100], 1, id="all-0"),
        pytest.param({"critical": 0, "batch": 0}, False, [250, 250], 1, id="all-0-no-floor"),
    ],
)
def test_each_pod_shares_the_slack_by_weight_times_request(
    weights: dict[str, int], floor: bool, expected: list[int], factor: Fraction
) -> None:
    node = node_input(SERVERS, allocatable_m=2400, unmanaged_m=200, weights=weights)
    result = compute_node(node, DEFAULT if floor else NO_FLOOR)
    assert [pod.target_m for pod in result.pods] == expected
    assert result.factor == factor
    assert [pod.weight for pod in result.pods] == [weights.get(p.name, 1) for p in SERVERS]


def test_the_weighted_sum_is_reported_beside_the_managed_requests() -> None:
    node = node_input(worked_example().pods, allocatable_m=16000, weights={"a": 2, "c": 0})
    result = compute_node(node, NO_FLOOR)
    assert (result.managed_m, result.weighted_m) == (8000, 2 * 500 + 1500)
    # S*w*r/W: 8000*1000/2500 and 8000*1500/2500; the weight-0 pod keeps its request.
    assert [pod.target_m for pod in result.pods] == [500 + 3200, 1500 + 4800, 6000]


def test_a_weight_rule_of_1_names_its_rule_and_changes_nothing() -> None:
    plain = compute_node(worked_example(), NO_FLOOR)
    ruled = compute_node(node_input(worked_example().pods, weights={"b": 1}), NO_FLOOR)
    assert [p.target_m for p in ruled.pods] == [p.target_m for p in plain.pods]
    assert [p.weight_rule and p.weight_rule.path for p in ruled.pods] == [
        None,
        "spec.weights[b]",
        None,
    ]
