"""make bench-tenant's weighted case: the ceiling the weighted formula predicts from a
node's bookings, the bookings read from pods, the weight rules matched, and the table and
criteria over the two servers' runs."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pytest

from bench.tenant_figures import CpuStat, Request, Run, parse_phases
from bench.tenant_weights import (
    ManagedPod,
    Policy,
    ServerRun,
    WeightedResults,
    WeightRule,
    predict_ceilings,
    weight_of,
    weighted_cases_table,
    weighted_criteria,
    weighted_markdown_table,
    weighted_runs_table,
)

IDLE = CpuStat(usage_usec=0, nr_periods=0, nr_throttled=0, throttled_usec=0)
PHASES = parse_phases("80@1,5@3")
TWO = (ManagedPod("a", 250), ManagedPod("b", 250))


def weighted_two(weight: int) -> tuple[ManagedPod, ...]:
    return (ManagedPod("a", 250, weight), ManagedPod("b", 250))


def test_with_every_weight_1_the_prediction_is_todays_formula() -> None:
    # S = 1800m: each pod's share S*r/M = 900m is also min(floor, S/N) = 900m.
    for floor in (0, 1000):
        ceilings = predict_ceilings(
            allocatable=2400, booked=600, pods=TWO, policy=Policy(floor=floor)
        )
        assert ceilings == {"a": 1150, "b": 1150}


def test_at_floor_0_the_weight_splits_the_slack() -> None:
    ceilings = predict_ceilings(
        allocatable=2400, booked=600, pods=weighted_two(4), policy=Policy(floor=0)
    )
    # W = 4*250 + 250 = 1250: A 1800*1000/1250 = 1440m, B 1800*250/1250 = 360m.
    assert ceilings == {"a": 1690, "b": 610}
    assert sum(ceilings.values()) == 1800 + 500


def test_at_the_default_floor_the_other_pod_keeps_its_floor_share() -> None:
    ceilings = predict_ceilings(
        allocatable=2400, booked=600, pods=weighted_two(4), policy=Policy(floor=1000)
    )
    assert ceilings == {"a": 1690, "b": 1150}


def test_the_ceiling_is_capped_by_the_multiplier_and_the_allocatable() -> None:
    alone = [ManagedPod("a", 250)]
    assert predict_ceilings(allocatable=16000, booked=350, pods=alone, policy=Policy()) == {
        "a": 2500
    }
    # Only a pod that books less than it requests (none does) could pass the allocatable.
    uncapped = Policy(max_multiplier=Fraction(0))
    assert predict_ceilings(allocatable=2400, booked=0, pods=alone, policy=uncapped) == {"a": 2400}


def test_rounding_is_half_up_then_to_the_nearest_quantum() -> None:
    # S = 1005m over 250m and 500m: shares 335m and 670m exactly, so 585m and 1170m.
    pods = [ManagedPod("a", 250), ManagedPod("b", 500)]
    assert predict_ceilings(allocatable=1755, booked=750, pods=pods, policy=Policy(floor=0)) == {
        "a": 590,
        "b": 1170,
    }
    # A share of 0.5m rounds up: S = 1m over two equal pods.
    assert predict_ceilings(
        allocatable=501, booked=500, pods=TWO, policy=Policy(floor=0, quantum=1)
    ) == {"a": 251, "b": 251}


def test_no_slack_leaves_every_pod_at_its_request() -> None:
    assert predict_ceilings(allocatable=2400, booked=2600, pods=TWO, policy=Policy()) == {
        "a": 250,
        "b": 250,
    }


def test_with_every_weight_0_only_the_floor_share_is_given() -> None:
    pods = [ManagedPod("a", 250, 0), ManagedPod("b", 250, 0)]
    assert predict_ceilings(allocatable=2400, booked=600, pods=pods, policy=Policy()) == {
        "a": 1150,
        "b": 1150,
    }
    assert predict_ceilings(allocatable=2400, booked=600, pods=pods, policy=Policy(floor=0)) == {
        "a": 250,
        "b": 250,
    }


def pod(
    cpu: str | None = "250m",
    *,
    phase: str = "Running",
    priority_class: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    resources = {} if cpu is None else {"requests": {"cpu": cpu}}
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": resources}], **spec}
    if priority_class is not None:
        body["priorityClassName"] = priority_class
    return {"metadata": {"name": "p"}, "spec": body, "status": {"phase": phase}}


def test_the_first_matching_rule_gives_the_weight() -> None:
    rules = [WeightRule(4, "bench-critical"), WeightRule(2, "bench-critical"), WeightRule(0)]
    assert weight_of(pod(priority_class="bench-critical"), rules) == (4, "spec.weights[0]")
    assert weight_of(pod(), rules) == (0, "spec.weights[2]")
    assert weight_of(pod(), rules[:1]) == (1, None)
    assert rules[0].spec() == {"weight": 4, "priorityClassName": "bench-critical"}
    assert rules[2].spec() == {"weight": 0}


def usage(peak: float, rest: float, seconds: float = 20.0) -> list[tuple[float, int]]:
    """usage_usec every 0.25 s: ``peak`` cores in the first second of every four."""
    samples, used, at = [], 0.0, 0.0
    while at <= seconds:
        samples.append((at, round(used)))
        used += (peak if at % 4 < 1 else rest) * 0.25 * 1e6
        at += 0.25
    return samples


def server_run(
    server: str,
    mode: str,
    *,
    latency_ms: float = 10.0,
    settled: int | None = None,
    predicted: int | None = None,
    weight: int | None = None,
    rule: str | None = None,
    peak: float = 0.5,
    round: int = 1,
    throttled: int = 0,
) -> ServerRun:
    return ServerRun(
        server=server,
        run=Run(
            booking="two-servers",
            mode=mode,
            round=round,
            seconds=20.0,
            requests=[Request(i / 10, latency_ms / 1000, True) for i in range(100)],
            server=CpuStat(
                usage_usec=10_000_000, nr_periods=100, nr_throttled=throttled, throttled_usec=0
            ),
            measured=20.0,
            outside_pods=IDLE,
            server_request=250,
            usage=usage(peak, 0.1),
            phases=PHASES,
        ),
        settled=settled,
        predicted=predicted,
        weight=weight,
        weight_rule=rule,
        slack=1800,
    )


def results(
    *,
    a_weighted: Sequence[tuple[int, float]] = ((1690, 20.0),),
    b_peak: float = 0.6,
    a_rule: tuple[int | None, str | None] = (4, "spec.weights[0]"),
    demand: float = 1.5,
) -> WeightedResults:
    """Each mode's two servers; A under the weight settled at each (cpu.max, p99 ms)."""
    runs = []
    for index, (settled, latency) in enumerate(a_weighted, start=1):
        runs += [
            server_run(
                "A",
                "headroom",
                latency_ms=60.0,
                settled=1150,
                predicted=1150,
                weight=1,
                round=index,
            ),
            server_run(
                "A",
                "headroom-weighted",
                latency_ms=latency,
                settled=settled,
                predicted=1690,
                weight=a_rule[0],
                rule=a_rule[1],
                round=index,
            ),
            server_run(
                "B",
                "headroom",
                latency_ms=60.0,
                settled=1150,
                predicted=1150,
                weight=1,
                round=index,
            ),
            server_run(
                "B",
                "headroom-weighted",
                latency_ms=200.0,
                settled=610,
                predicted=610,
                weight=1,
                peak=b_peak,
                throttled=40,
                round=index,
            ),
            server_run("A", "static", latency_ms=400.0, settled=500, round=index),
            server_run("B", "static", latency_ms=400.0, settled=500, round=index),
            server_run("A", "no-limit", latency_ms=10.0, peak=demand, round=index),
            server_run("B", "no-limit", latency_ms=10.0, peak=demand, round=index),
        ]
    return WeightedResults(runs)


def test_the_criteria_hold_when_the_weight_gives_a_the_predicted_ceiling_and_b_its_request() -> (
    None
):
    found = weighted_criteria(
        results(), favoured="A", other="B", weight=4, rule="spec.weights[0]", quantum=10
    )
    assert [c.met for c in found] == [True] * 7
    assert "cpu.max 1690m against 1690m predicted, worst round off by +0m" in found[0].text
    assert (
        "A's p99 with the weight 20.0 ms, without 60.0 ms: ratio 0.33 (below 1.00; lower in 1 of "
        "1 rounds)" in found[3].text
    )
    assert "worst round's CPU at its peaks: 2.40x its request" in found[4].text
    assert "with no limit it used 6.00x" in found[4].text


def test_the_criteria_fail_on_a_ceiling_off_the_prediction_a_missing_weight_or_a_starved_b() -> (
    None
):
    found = weighted_criteria(
        results(
            a_weighted=((1690, 20.0), (1710, 90.0), (1700, 70.0)),
            b_peak=0.2,
            a_rule=(None, None),
            demand=0.9,
        ),
        favoured="A",
        other="B",
        weight=4,
        rule="spec.weights[0]",
        quantum=10,
    )
    assert [c.met for c in found] == [False, False, True, False, False, False, False]
    assert "worst round off by +20m (at most 10m)" in found[0].text
    # The median p99 (70 ms) is above 60 ms; two rounds of three were too.
    assert "ratio 1.17 (below 1.00; lower in 1 of 3 rounds)" in found[3].text
    assert "- (no rule), - (no rule), - (no rule)" in found[1].text
    assert "worst round's CPU at its peaks: 0.80x its request" in found[4].text


def test_b_needs_its_request_only_when_it_asked_for_more() -> None:
    found = weighted_criteria(
        results(b_peak=0.2, demand=0.2),
        favoured="A",
        other="B",
        weight=4,
        rule="spec.weights[0]",
        quantum=10,
    )
    assert found[4].met


def test_the_tables_show_the_prediction_beside_the_settled_ceiling() -> None:
    measured = results()
    runs = weighted_runs_table(measured).splitlines()
    assert runs[0].split()[:6] == ["round", "mode", "server", "weight", "predicted", "cpu.max"]
    assert runs[2].split()[:7] == [
        "1",
        "headroom-weighted",
        "A",
        "4",
        "(spec.weights[0])",
        "1690m",
        "1690m",
    ]
    cases = weighted_cases_table(measured).splitlines()
    assert cases[1].split()[:4] == ["headroom", "A", "1150m", "1150m"]
    assert cases[5].split()[:4] == ["static", "A", "-", "500m"]
    assert cases[7].split()[:4] == ["no-limit", "A", "-", "none"]
    rows = weighted_markdown_table(measured, labels={"A": "A (`bench-critical`)"}).splitlines()
    assert rows[0].startswith("| limit | server | ceiling predicted | `cpu.max` settled |")
    assert rows[5] == (
        "| `headroom-weighted` | B | 610m | 610m | 40.0% | 2.40x its request | 20.00x | 20.00x |"
    )
    assert rows[4].startswith("| `headroom-weighted` | A (`bench-critical`) | 1690m | 1690m |")
    assert rows[4].endswith("| 2.00x | 2.00x |")


def test_a_case_takes_medians_over_rounds() -> None:
    measured = results(a_weighted=((1690, 20.0), (1700, 90.0), (1680, 30.0)))
    case = measured.case("headroom-weighted", "A")
    assert case.settled == 1690
    assert case.p99 == pytest.approx(0.030)
    assert case.weight == 4
    with pytest.raises(KeyError):
        measured.case("headroom", "C")
