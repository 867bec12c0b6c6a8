from dataclasses import replace
from fractions import Fraction

import pytest

from app.core.config import DEFAULT_SETTINGS, Settings
from app.core.eligibility import UNBOUNDED_M
from app.core.limitrange import LimitRangeCaps
from app.core.policy import Cap, ContainerLimit, NodeInput, Reason, compute_node
from tests.unit.app.builders import container, pod_info
from tests.unit.app.core.policy.inputs import managed_pod, node_input

NO_FLOOR = replace(DEFAULT_SETTINGS, min_burst_floor_m=0)


def worked_example() -> NodeInput:
    """Design section 2: 16 cores, managed pods requesting 0.5, 1.5 and 6 cores."""
    return node_input(
        [managed_pod("a", 500), managed_pod("b", 1500), managed_pod("c", 6000)],
        allocatable_m=16000,
    )


def targets(node: NodeInput, settings: Settings = DEFAULT_SETTINGS) -> list[int]:
    return [pod.target_m for pod in compute_node(node, settings).pods]


def test_worked_example_node_figures() -> None:
    result = compute_node(worked_example(), DEFAULT_SETTINGS)
    assert (result.name, result.allocatable_m, result.booked_m) == ("node-1", 16000, 8000)
    assert (result.slack_m, result.managed_m, result.pod_count) == (8000, 8000, 3)
    assert result.factor == Fraction(2)
    assert [(pod.request_m, pod.hi_m, pod.hi_cap) for pod in result.pods] == [
        (500, 5000, Cap.MAX_MULTIPLIER),
        (1500, 15000, Cap.MAX_MULTIPLIER),
        (6000, 16000, Cap.ALLOCATABLE),
    ]
    assert not any(pod.capped for pod in result.pods)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        pytest.param(NO_FLOOR, [1000, 3000, 12000], id="without-floor"),
        pytest.param(DEFAULT_SETTINGS, [1500, 3000, 12000], id="default-floor"),
    ],
)
def test_worked_example(settings: Settings, expected: list[int]) -> None:
    assert targets(worked_example(), settings) == expected


def test_ten_millicore_pod_on_an_empty_node_is_capped_by_the_multiplier() -> None:
    (pod,) = compute_node(node_input([managed_pod("tiny", 10)]), DEFAULT_SETTINGS).pods
    assert (pod.target_m, pod.hi_m, pod.hi_cap, pod.capped) == (100, 100, Cap.MAX_MULTIPLIER, True)


# Nodes that 8 cores of managed requests leave no slack on.
@pytest.mark.parametrize(
    "node",
    [
        pytest.param({"allocatable_m": 8000, "unmanaged_m": 0}, id="slack-zero"),
        pytest.param({"allocatable_m": 8000, "unmanaged_m": 2000}, id="slack-negative"),
        pytest.param({"allocatable_m": 0, "unmanaged_m": 0}, id="no-allocatable"),
    ],
)
def test_no_slack_pins_every_target_to_its_request(node: dict[str, int]) -> None:
    pods = [managed_pod("a", 500), managed_pod("b", 1500), managed_pod("c", 6000)]
    result = compute_node(node_input(pods, **node), DEFAULT_SETTINGS)
    assert result.factor == 1
    assert [pod.target_m for pod in result.pods] == [500, 1500, 6000]


def test_unmanaged_pods_consume_slack() -> None:
    node = node_input([managed_pod("a", 2000), managed_pod("b", 6000)], unmanaged_m=4000)
    result = compute_node(node, NO_FLOOR)
    assert (result.slack_m, result.managed_m) == (4000, 8000)
    assert result.factor == Fraction(3, 2)
    assert [pod.target_m for pod in result.pods] == [3000, 9000]


def test_a_node_without_managed_pods() -> None:
    result = compute_node(node_input([], unmanaged_m=3000), DEFAULT_SETTINGS)
    assert (result.slack_m, result.managed_m, result.pod_count) == (13000, 0, 0)
    assert result.factor == 1
    assert result.pods == ()


def test_floor_is_bounded_by_the_slack_share() -> None:
    # S/N = 200m is below the 1-core floor, so each pod gets at least 200m of burst.
    pods = [managed_pod(f"p{i}", 100) for i in range(5)]
    node = node_input(pods, allocatable_m=1500, unmanaged_m=0)
    assert targets(node, replace(DEFAULT_SETTINGS, max_multiplier=Fraction(0))) == [300] * 5


@pytest.mark.parametrize(
    ("requests", "max_cpu", "settings", "limit_ranges", "hi", "cap", "target"),
    [
        pytest.param(
            (1000,),
            None,
            replace(DEFAULT_SETTINGS, max_multiplier=Fraction(0)),
            {},
            16000,
            Cap.ALLOCATABLE,
            16000,
            id="allocatable",
        ),
        pytest.param(
            (1000,),
            None,
            replace(DEFAULT_SETTINGS, max_multiplier=Fraction(3, 2)),
            {},
            1500,
            Cap.MAX_MULTIPLIER,
            1500,
            id="fractional-multiplier",
        ),
        pytest.param(
            (1000,),
            "2500m",
            DEFAULT_SETTINGS,
            {},
            2500,
            Cap.MAX_CPU,
            2500,
            id="max-cpu-annotation",
        ),
        pytest.param(
            (1000,),
            "0",
            DEFAULT_SETTINGS,
            {},
            10000,
            Cap.MAX_MULTIPLIER,
            10000,
            id="invalid-max-cpu-ignored",
        ),
        pytest.param(
            (1000,),
            "500m",
            DEFAULT_SETTINGS,
            {},
            1000,
            Cap.REQUEST,
            1000,
            id="max-cpu-below-request",
        ),
        pytest.param(
            (1000, 1000),
            None,
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps(container_max_m=1500)},
            3000,
            Cap.LIMIT_RANGE,
            3000,
            id="limit-range-container-max",
        ),
        pytest.param(
            (1000, 1000),
            None,
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps(pod_max_m=2400)},
            2400,
            Cap.LIMIT_RANGE,
            2400,
            id="limit-range-pod-max",
        ),
        pytest.param(
            (1000,),
            None,
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps(container_ratio=Fraction(2))},
            2000,
            Cap.LIMIT_RANGE,
            2000,
            id="limit-range-ratio",
        ),
        pytest.param(
            (1000,),
            None,
            DEFAULT_SETTINGS,
            {"team-b": LimitRangeCaps(container_max_m=1200)},
            10000,
            Cap.MAX_MULTIPLIER,
            10000,
            id="other-namespace-limit-range",
        ),
        pytest.param(
            (1000,),
            None,
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps(pod_ratio=Fraction(4))},
            4000,
            Cap.LIMIT_RANGE,
            4000,
            id="limit-range-pod-ratio",
        ),
        pytest.param(
            (1000,),
            None,
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps()},
            10000,
            Cap.MAX_MULTIPLIER,
            10000,
            id="empty-limit-range",
        ),
        pytest.param(
            (1000,),
            "10",
            DEFAULT_SETTINGS,
            {},
            10000,
            Cap.MAX_CPU,
            10000,
            id="tie-names-the-specific-cap",
        ),
        pytest.param(
            (1000,),
            "3",
            DEFAULT_SETTINGS,
            {"team-a": LimitRangeCaps(container_max_m=2000)},
            2000,
            Cap.LIMIT_RANGE,
            2000,
            id="tightest-cap-wins",
        ),
        pytest.param(
            (20000,),
            None,
            DEFAULT_SETTINGS,
            {},
            20000,
            Cap.REQUEST,
            20000,
            id="request-above-allocatable",
        ),
    ],
)
def test_caps(
    requests: tuple[int, ...],
    max_cpu: str | None,
    settings: Settings,
    limit_ranges: dict[str, LimitRangeCaps],
    hi: int,
    cap: Cap,
    target: int,
) -> None:
    pod = managed_pod("p", *requests, max_cpu=max_cpu)
    node = node_input([pod], allocatable_m=16000, limit_ranges=limit_ranges)
    (result,) = compute_node(node, settings).pods
    assert (result.hi_m, result.hi_cap, result.target_m) == (hi, cap, target)


@pytest.mark.parametrize(
    ("request_m", "allocatable_m", "quantum", "target"),
    [
        # Alone on the node with the multiplier and floor off, raw = allocatable.
        pytest.param(1000, 3334, 10, 3330, id="rounds-down-to-quantum"),
        pytest.param(1000, 3335, 10, 3330, id="half-above-hi-steps-down"),
        pytest.param(1000, 3339, 10, 3330, id="nearest-above-hi-steps-down"),
        pytest.param(1000, 3340, 10, 3340, id="exact-multiple"),
        pytest.param(1005, 1008, 10, 1005, id="step-down-below-request-gives-request"),
        pytest.param(1005, 1005, 10, 1005, id="no-slack-keeps-odd-request"),
        pytest.param(1000, 3334, 1, 3334, id="unit-quantum"),
        pytest.param(1000, 16000, 1000, 16000, id="coarse-quantum"),
        pytest.param(1000, 2499, 1000, 2000, id="coarse-quantum-rounds-down"),
    ],
)
def test_quantization(request_m: int, allocatable_m: int, quantum: int, target: int) -> None:
    settings = replace(
        DEFAULT_SETTINGS, max_multiplier=Fraction(0), min_burst_floor_m=0, quantum_m=quantum
    )
    node = node_input([managed_pod("p", request_m)], allocatable_m=allocatable_m)
    assert targets(node, settings) == [target]


def test_burst_rounds_half_up() -> None:
    # S*r/M = 5 * 1 / 2 = 2.5 millicores: half-up gives 3, banker's rounding would give 2.
    settings = replace(
        DEFAULT_SETTINGS, max_multiplier=Fraction(0), min_burst_floor_m=0, quantum_m=1
    )
    node = node_input([managed_pod("a", 1), managed_pod("b", 1)], allocatable_m=7)
    assert targets(node, settings) == [4, 4]


@pytest.mark.parametrize(
    ("current", "target", "patch", "reason"),
    [
        pytest.param(None, 3000, True, Reason.NO_LIMIT, id="no-limit"),
        pytest.param(3000, 3000, False, Reason.AT_TARGET, id="at-target"),
        pytest.param(2800, 3000, False, Reason.IN_DEADBAND, id="grow-in-deadband"),
        pytest.param(2500, 3000, True, Reason.GROW, id="grow"),
        pytest.param(3100, 3000, False, Reason.IN_DEADBAND, id="shrink-in-deadband"),
        pytest.param(4000, 3000, True, Reason.SHRINK, id="shrink"),
    ],
)
def test_deadband_against_the_current_limit(
    current: int | None, target: int, patch: bool, reason: Reason
) -> None:
    pods = [
        managed_pod("a", 500),
        managed_pod("b", 1500, limits_m=[current]),
        managed_pod("c", 6000),
    ]
    result = compute_node(node_input(pods), DEFAULT_SETTINGS).pods[1]
    assert (result.current_m, result.target_m) == (current or 0, target)
    assert (result.patch, result.reason) == (patch, reason)


def test_current_limit_counts_as_unset_when_any_container_lacks_one() -> None:
    pod = managed_pod("p", 1000, 1000, limits_m=[4000, None])
    (result,) = compute_node(node_input([pod], allocatable_m=4000), DEFAULT_SETTINGS).pods
    assert (result.current_m, result.target_m, result.reason) == (0, 4000, Reason.NO_LIMIT)


@pytest.mark.parametrize(
    ("pinned_memory", "unmanaged_m", "max_cpu", "target", "reason"),
    [
        pytest.param(False, 15000, None, 1000, Reason.NO_LIMIT, id="not-at-risk"),
        pytest.param(True, 15000, None, 1010, Reason.NO_LIMIT, id="no-slack-one-quantum-above"),
        pytest.param(True, 0, "1005m", 0, Reason.QOS_GUARD, id="cap-too-tight-skips"),
        pytest.param(True, 0, "1", 0, Reason.QOS_GUARD, id="capped-at-request-skips"),
        pytest.param(True, 0, "1010m", 1010, Reason.NO_LIMIT, id="cap-exactly-one-quantum"),
        pytest.param(True, 0, None, 10000, Reason.NO_LIMIT, id="burst-already-above"),
    ],
)
def test_qos_guard(
    pinned_memory: bool, unmanaged_m: int, max_cpu: str | None, target: int, reason: Reason
) -> None:
    pod = managed_pod("p", 1000, pinned_memory=pinned_memory, max_cpu=max_cpu)
    node = node_input([pod], unmanaged_m=unmanaged_m)
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    assert (result.target_m, result.reason) == (target, reason)
    assert result.patch is (reason is not Reason.QOS_GUARD)


def test_qos_guard_skip_keeps_the_current_limit_and_patches_nothing() -> None:
    pod = managed_pod("p", 1000, limits_m=[1500], pinned_memory=True, max_cpu="1")
    (result,) = compute_node(node_input([pod]), DEFAULT_SETTINGS).pods
    assert (result.target_m, result.current_m, result.containers) == (1500, 1500, ())
    assert (result.patch, result.reason, result.capped) == (False, Reason.QOS_GUARD, True)


def test_split_over_containers_and_sidecars_leaves_request_less_containers_alone() -> None:
    pod = pod_info(
        "p",
        containers=[
            container("app", cpu_request="1"),
            container("log", cpu_request=None),
            container("worker", cpu_request="500m"),
        ],
        init_containers=[
            container("migrate", cpu_request="4"),
            container("proxy", cpu_request="500m", restart_policy="Always"),
        ],
    )
    settings = replace(DEFAULT_SETTINGS, max_multiplier=Fraction(0))
    (result,) = compute_node(node_input([pod], allocatable_m=6000), settings).pods
    assert result.request_m == 2000
    assert result.target_m == 6000
    assert result.containers == (
        ContainerLimit("app", False, 3000),
        ContainerLimit("worker", False, 1500),
        ContainerLimit("proxy", True, 1500),
    )


def test_split_respects_limit_range_container_caps() -> None:
    pod = managed_pod("p", 1000, 1000, sidecars_m=[1000])
    caps = {"team-a": LimitRangeCaps(container_max_m=2000)}
    settings = replace(DEFAULT_SETTINGS, max_multiplier=Fraction(0))
    (result,) = compute_node(node_input([pod], limit_ranges=caps), settings).pods
    assert (result.hi_m, result.target_m) == (6000, 6000)
    assert [c.limit_m for c in result.containers] == [2000, 2000, 2000]


def test_split_with_a_container_above_its_limit_range_max() -> None:
    # The LimitRange came after the pod: the big container cannot go below its request,
    # so only the small one bursts.
    pod = managed_pod("p", 3000, 500)
    caps = {"team-a": LimitRangeCaps(container_max_m=2000)}
    (result,) = compute_node(node_input([pod], limit_ranges=caps), DEFAULT_SETTINGS).pods
    assert (result.hi_m, result.target_m) == (5000, 5000)
    assert [c.limit_m for c in result.containers] == [3000, 2000]


def test_pod_order_does_not_change_any_target() -> None:
    pods = [managed_pod("a", 500), managed_pod("b", 1500), managed_pod("c", 6000)]
    forward = compute_node(node_input(pods), DEFAULT_SETTINGS)
    backward = compute_node(node_input(pods[::-1]), DEFAULT_SETTINGS)
    assert {p.pod.name: p.target_m for p in forward.pods} == {
        p.pod.name: p.target_m for p in backward.pods
    }


@pytest.mark.parametrize(
    ("requests", "unmanaged_m", "wanted", "limit_ranges", "expected"),
    [
        # A booked node gives 500m; VPA wants 1500m, so the ceiling lets it have that.
        pytest.param(
            [250],
            3500,
            {"c0": 1500},
            {},
            ([1500], 2500, Cap.MAX_MULTIPLIER, 1500),
            id="booked-node",
        ),
        # Slack gives more than VPA wants: VPA sets nothing.
        pytest.param(
            [250], 0, {"c0": 1500}, {}, ([2500], 2500, Cap.MAX_MULTIPLIER, 0), id="empty-node"
        ),
        pytest.param(
            [250],
            3500,
            {"c0": 200},
            {},
            ([500], 2500, Cap.MAX_MULTIPLIER, 0),
            id="target-below-request",
        ),
        pytest.param(
            [250],
            3500,
            {"other": 1500},
            {},
            ([500], 2500, Cap.MAX_MULTIPLIER, 0),
            id="another-container",
        ),
        # Above maxMultiplier: VPA's upper bound wins over Headroom's own cap.
        pytest.param(
            [100],
            3900,
            {"c0": 1500},
            {},
            ([1500], 1500, Cap.VPA_UPPER_BOUND, 1500),
            id="above-max-multiplier",
        ),
        # Never above the node's allocatable or a LimitRange.
        pytest.param(
            [100],
            3900,
            {"c0": 6000},
            {},
            ([4000], 4000, Cap.VPA_UPPER_BOUND, 4000),
            id="above-allocatable",
        ),
        # Actuated before VPA recommends anything: its upper bound is unbounded.
        pytest.param(
            [100],
            3900,
            {"c0": UNBOUNDED_M},
            {},
            ([4000], 4000, Cap.VPA_UPPER_BOUND, 4000),
            id="no-recommendation-yet",
        ),
        pytest.param(
            [100],
            3900,
            {"c0": 1500},
            {"team-a": LimitRangeCaps(pod_max_m=1200)},
            ([1200], 1200, Cap.VPA_UPPER_BOUND, 1200),
            id="above-limit-range",
        ),
        # Each container at least its own upper bound; the rest shared by the lifted floors.
        pytest.param(
            [100, 100],
            3700,
            {"c0": 900},
            {},
            ([900, 100], 2000, Cap.MAX_MULTIPLIER, 1000),
            id="two-containers",
        ),
        pytest.param(
            [100, 100],
            0,
            {"c0": 900},
            {},
            ([1800, 200], 2000, Cap.MAX_MULTIPLIER, 0),
            id="two-containers-slack",
        ),
        pytest.param(
            [100, 100],
            3700,
            {"c0": 900},
            {"team-a": LimitRangeCaps(container_max_m=2000)},
            ([900, 100], 2000, Cap.MAX_MULTIPLIER, 1000),
            id="two-containers-limit-range",
        ),
        # More than the node can give over two containers: shared by request.
        pytest.param(
            [100, 100],
            3800,
            {"c0": 3000, "c1": 3000},
            {},
            ([2000, 2000], 4000, Cap.VPA_UPPER_BOUND, 4000),
            id="two-containers-too-much",
        ),
    ],
)
def test_a_requests_only_vpa_upper_bound_is_a_floor(
    requests: list[int],
    unmanaged_m: int,
    wanted: dict[str, int],
    limit_ranges: dict[str, LimitRangeCaps],
    expected: tuple[list[int], int, Cap, int],
) -> None:
    pod = managed_pod("p", *requests)
    node = node_input(
        [pod],
        allocatable_m=4000,
        unmanaged_m=unmanaged_m,
        limit_ranges=limit_ranges,
        vpa_floors={"p": wanted},
    )
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    limits = [c.limit_m for c in result.containers]
    assert (limits, result.hi_m, result.hi_cap, result.vpa_m) == expected
    assert result.target_m == sum(limits)


def test_a_vpa_upper_bound_above_the_request_lifts_the_qos_guard() -> None:
    # No slack and memory pinned: without VPA the QoS guard leaves the pod alone.
    pod = managed_pod("p", 1000, pinned_memory=True)
    node = node_input([pod], allocatable_m=4000, unmanaged_m=3000, vpa_floors={"p": {"c0": 1500}})
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    assert (result.target_m, result.reason, result.vpa_m) == (1500, Reason.NO_LIMIT, 1500)


@pytest.mark.parametrize(
    ("limits", "wanted", "reason"),
    [
        # 1643m against a target of 1737m is within the 10% grow band, yet below VPA's
        # upper bound: the pod would be held below what VPA says it may use, so it is patched.
        pytest.param([1643], {"c0": 1737}, Reason.GROW, id="below-the-bound"),
        pytest.param([1737], {"c0": 1737}, Reason.AT_TARGET, id="at-the-bound"),
        # Together above the bound, one container below its own.
        pytest.param([900, 860], {"c0": 900, "c1": 900}, Reason.GROW, id="a-container-below"),
        pytest.param([1650], {"c0": 1600}, Reason.IN_DEADBAND, id="above-the-bound"),
    ],
)
def test_the_deadband_never_holds_a_limit_below_the_vpa_upper_bound(
    limits: list[int], wanted: dict[str, int], reason: Reason
) -> None:
    requests = [250] * len(limits)
    pod = managed_pod("p", *requests, limits_m=limits)
    # Booked full: the policy alone gives each pod its request.
    node = node_input([pod], allocatable_m=4000, unmanaged_m=4000, vpa_floors={"p": wanted})
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    assert result.reason == reason
