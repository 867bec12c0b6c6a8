"""Invariants of design section 2, checked over generated nodes."""

from dataclasses import replace
from fractions import Fraction
from random import Random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.core.config import DEFAULT_SETTINGS, Settings
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy import NodeInput, NodeResult, Reason, compute_node
from tests.unit.app.core.policy.inputs import managed_pod, node_input, weight_rule

# Building pods through the dict builders is slow under a loaded CI machine.
relaxed = settings(deadline=None)

SIMPLE = replace(DEFAULT_SETTINGS, min_burst_floor_m=0, max_multiplier=Fraction(0), quantum_m=1)


@st.composite
def policy_settings(draw: st.DrawFn) -> Settings:
    return replace(
        DEFAULT_SETTINGS,
        min_burst_floor_m=draw(st.integers(0, 2000)),
        max_multiplier=draw(
            st.one_of(
                st.just(Fraction(0)),
                st.fractions(min_value=Fraction(1, 2), max_value=100, max_denominator=10),
            )
        ),
        quantum_m=draw(st.integers(1, 500)),
    )


@st.composite
def a_pod(draw: st.DrawFn, name: str, *, simple: bool = False) -> PodInfo:
    requests = draw(st.lists(st.integers(1, 4000), min_size=1, max_size=1 if simple else 3))
    limits = [
        None if draw(st.booleans()) else request + draw(st.integers(0, 4000))
        for request in requests
    ]
    if simple:
        return managed_pod(name, *requests, limits_m=limits)
    max_cpu = draw(st.one_of(st.none(), st.integers(1, 20000)))
    return managed_pod(
        name,
        *requests,
        limits_m=limits,
        namespace=draw(st.sampled_from(["team-a", "team-b"])),
        max_cpu=None if max_cpu is None else f"{max_cpu}m",
        pinned_memory=draw(st.booleans()),
    )


@st.composite
def nodes(draw: st.DrawFn, *, simple: bool = False) -> NodeInput:
    count = draw(st.integers(1, 8))
    pods = [draw(a_pod(f"p{i}", simple=simple)) for i in range(count)]
    limit_ranges = {}
    if not simple and draw(st.booleans()):
        limit_ranges["team-a"] = LimitRangeCaps(
            container_max_m=draw(st.one_of(st.none(), st.integers(1, 8000))),
            pod_max_m=draw(st.one_of(st.none(), st.integers(1, 16000))),
        )
    # Some pods weighed by a rule (0 included); the others weigh 1.
    weights = {
        pod.name: draw(st.integers(0, 8)) for pod in pods if not simple and draw(st.booleans())
    }
    return node_input(
        pods,
        allocatable_m=draw(st.integers(0, 64000)),
        unmanaged_m=draw(st.integers(0, 32000)),
        limit_ranges=limit_ranges,
        weights=weights,
    )


@relaxed
@given(nodes(), policy_settings())
def test_targets_stay_between_request_and_caps(node: NodeInput, config: Settings) -> None:
    for result in compute_node(node, config).pods:
        pod = result.pod
        request = pod.facts.request_m
        ceilings = [node.allocatable_m]
        if config.max_multiplier:
            ceilings.append(int(request * config.max_multiplier + Fraction(1, 2)))
        if pod.max_cpu_m is not None:
            ceilings.append(pod.max_cpu_m)
        assert result.hi_m <= max(request, *ceilings)
        if result.reason is Reason.QOS_GUARD:
            assert result.hi_m < request + config.quantum_m
            assert not result.patch
            continue
        assert request <= result.target_m <= result.hi_m
        if pod.facts.guaranteed_if_pinned:
            assert result.target_m >= request + config.quantum_m


@relaxed
@given(nodes(), policy_settings())
def test_container_split_sums_to_the_target(node: NodeInput, config: Settings) -> None:
    for result in compute_node(node, config).pods:
        if result.reason is Reason.QOS_GUARD:
            assert result.containers == ()
            continue
        assert sum(c.limit_m for c in result.containers) == result.target_m
        caps = node.limit_ranges.get(result.pod.namespace)
        for limit, info in zip(result.containers, result.pod.facts.cpu_containers, strict=True):
            assert limit.name == info.name
            assert limit.limit_m >= info.cpu_request_m
            cap = None if caps is None else caps.container_cap_m(info.cpu_request_m)
            if cap is not None:
                assert limit.limit_m <= max(cap, info.cpu_request_m)


@relaxed
@given(nodes(), policy_settings(), st.data())
def test_adding_a_pod_never_raises_another_target(
    node: NodeInput, config: Settings, data: st.DataObject
) -> None:
    newcomer = data.draw(a_pod("newcomer"))
    before = compute_node(node, config)
    after = compute_node(
        replace(
            node, pods=[*node.pods, newcomer], booked_m=node.booked_m + newcomer.facts.request_m
        ),
        config,
    )
    for old, new in zip(before.pods, after.pods[:-1], strict=True):
        assert new.target_m <= old.target_m


@relaxed
@given(nodes(simple=True), st.data())
def test_splitting_a_pod_keeps_the_aggregate(node: NodeInput, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(node.pods) - 1))
    victim = node.pods[index]
    assume(victim.facts.request_m >= 2)
    parts = data.draw(st.integers(2, min(5, victim.facts.request_m)))
    cuts = sorted(
        data.draw(
            st.sets(
                st.integers(1, victim.facts.request_m - 1), min_size=parts - 1, max_size=parts - 1
            )
        )
    )
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, victim.facts.request_m], strict=True)]
    pieces = [managed_pod(f"{victim.name}-{i}", size) for i, size in enumerate(sizes)]
    split = replace(node, pods=[*node.pods[:index], *pieces, *node.pods[index + 1 :]])
    before = sum(pod.target_m for pod in compute_node(node, SIMPLE).pods)
    after = sum(pod.target_m for pod in compute_node(split, SIMPLE).pods)
    assert abs(after - before) <= parts


@relaxed
@given(nodes(), policy_settings())
def test_no_slack_means_requests(node: NodeInput, config: Settings) -> None:
    full = replace(node, booked_m=max(node.booked_m, node.allocatable_m))
    result = compute_node(full, config)
    assert result.factor == 1
    for pod in result.pods:
        if pod.reason is Reason.QOS_GUARD:
            continue
        expected = pod.request_m + (config.quantum_m if pod.pod.facts.guaranteed_if_pinned else 0)
        assert pod.target_m == expected


@relaxed
@given(nodes(), policy_settings(), st.randoms(use_true_random=False))
def test_deterministic_and_independent_of_pod_order(
    node: NodeInput, config: Settings, random: Random
) -> None:
    first = compute_node(node, config)
    assert compute_node(node, config) == first
    shuffled = list(node.pods)
    random.shuffle(shuffled)
    again = compute_node(replace(node, pods=shuffled), config)
    assert sorted(again.pods, key=lambda p: p.pod.name) == sorted(
        first.pods, key=lambda p: p.pod.name
    )


def _unweighted(result: NodeResult) -> NodeResult:
    return replace(result, pods=tuple(pod._replace(weight_rule=None) for pod in result.pods))


@relaxed
@given(nodes(), policy_settings())
def test_every_weight_1_is_the_unweighted_policy(node: NodeInput, config: Settings) -> None:
    unweighted = replace(node, weights={})
    ones = replace(node, weights={pod.uid: weight_rule(pod.name, 1) for pod in node.pods})
    assert _unweighted(compute_node(ones, config)) == compute_node(unweighted, config)


@relaxed
@given(nodes(simple=True), st.data())
def test_weighted_bursts_add_up_to_the_slack(node: NodeInput, data: st.DataObject) -> None:
    # Slack and a pod that weighs something are built in, not filtered for: filtering
    # discarded most inputs, and Hypothesis's health check failed the test on some runs.
    weights = {pod.name: data.draw(st.integers(0, 8)) for pod in node.pods}
    weights[data.draw(st.sampled_from(sorted(weights)))] = data.draw(st.integers(1, 8))
    weighted = replace(
        node,
        allocatable_m=node.booked_m + data.draw(st.integers(1, 64000)),
        weights={pod.uid: weight_rule(pod.name, weights[pod.name]) for pod in node.pods},
    )
    result = compute_node(weighted, SIMPLE)
    bursts = [pod.target_m - pod.request_m for pod in result.pods]
    # Each share is rounded on its own: at most half a millicore off each.
    assert abs(sum(bursts) - result.slack_m) * 2 <= len(bursts)
    for pod, burst in zip(result.pods, bursts, strict=True):
        if weights[pod.pod.name] == 0:
            assert burst == 0


@relaxed
@given(nodes(), policy_settings(), st.data())
def test_a_heavier_weight_never_lowers_the_pod_nor_raises_another(
    node: NodeInput, config: Settings, data: st.DataObject
) -> None:
    heavier = data.draw(st.sampled_from(list(node.pods)))
    rule = node.weights.get(heavier.uid)
    weight = 1 if rule is None else rule.weight
    raised = replace(
        node,
        weights={
            **node.weights,
            heavier.uid: weight_rule(heavier.name, weight + data.draw(st.integers(1, 8))),
        },
    )
    before = compute_node(node, config).pods
    after = compute_node(raised, config).pods
    for old, new in zip(before, after, strict=True):
        if old.reason is Reason.QOS_GUARD or new.reason is Reason.QOS_GUARD:
            continue
        if new.pod.uid == heavier.uid:
            assert new.target_m >= old.target_m
        else:
            assert new.target_m <= old.target_m
