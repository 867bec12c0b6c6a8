"""The policy for pods that declare pod-level resources: the pod-level limit is the target."""

from dataclasses import replace

import pytest

from app.core.config import DEFAULT_SETTINGS
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy import Cap, Reason, compute_node
from tests.unit.app.builders import bare_container, container, pod_info, pod_resources
from tests.unit.app.core.policy.inputs import managed_pod, node_input


def pod_level_pod(
    name: str,
    request: str,
    *,
    limit: str | None = None,
    memory_limit: str | None = None,
    containers: list[dict[str, object]] | None = None,
    max_cpu: str | None = None,
) -> PodInfo:
    return pod_info(
        name,
        resources=pod_resources(cpu_request=request, cpu_limit=limit, memory_limit=memory_limit),
        containers=containers if containers is not None else [bare_container()],
        max_cpu=max_cpu,
    )


def test_the_pod_level_request_is_the_pods_share_and_no_container_is_touched() -> None:
    # The worked example with the 1.5-core pod declaring pod-level resources instead.
    pods = [
        managed_pod("a", 500),
        pod_level_pod("b", "1500m", containers=[container(cpu_request="200m")]),
        managed_pod("c", 6000),
    ]
    result = compute_node(node_input(pods), DEFAULT_SETTINGS)
    assert (result.slack_m, result.managed_m) == (8000, 8000)
    a, b, c = result.pods
    assert [a.target_m, b.target_m, c.target_m] == [1500, 3000, 12000]
    assert (b.request_m, b.current_m, b.containers) == (1500, 0, ())
    assert (b.patch, b.reason) == (True, Reason.NO_LIMIT)
    assert a.containers
    assert c.containers


def test_the_deadband_compares_against_the_pod_level_limit() -> None:
    pod = pod_level_pod("p", "1", limit="9500m")
    (result,) = compute_node(node_input([pod]), DEFAULT_SETTINGS).pods
    assert (result.current_m, result.target_m) == (9500, 10000)
    assert (result.patch, result.reason) == (False, Reason.IN_DEADBAND)


@pytest.mark.parametrize(
    ("max_cpu", "caps", "hi", "cap"),
    [
        pytest.param(None, None, 10000, Cap.MAX_MULTIPLIER, id="multiplier"),
        pytest.param("3", None, 3000, Cap.MAX_CPU, id="max-cpu"),
        pytest.param(None, LimitRangeCaps(pod_max_m=2500), 2500, Cap.LIMIT_RANGE, id="pod-max"),
        pytest.param(None, LimitRangeCaps(pod_ratio=4), 4000, Cap.LIMIT_RANGE, id="pod-ratio"),
        pytest.param(
            None,
            LimitRangeCaps(container_max_m=500),
            10000,
            Cap.MAX_MULTIPLIER,
            id="container-caps-bound-only-containers",
        ),
    ],
)
def test_caps_bound_the_pod_level_limit(
    max_cpu: str | None, caps: LimitRangeCaps | None, hi: int, cap: Cap
) -> None:
    pod = pod_level_pod("p", "1", max_cpu=max_cpu)
    node = node_input([pod], limit_ranges={} if caps is None else {"team-a": caps})
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    assert (result.hi_m, result.hi_cap, result.target_m) == (hi, cap, hi)


def test_the_pod_level_limit_never_goes_below_a_containers_limit() -> None:
    containers = [container(cpu_request="200m", cpu_limit="1500m"), bare_container("b")]
    pod = pod_level_pod("p", "1", limit="4", containers=containers)
    # A booked node: the formula alone would bring the limit down to the request.
    (result,) = compute_node(node_input([pod], unmanaged_m=15000), DEFAULT_SETTINGS).pods
    assert (result.target_m, result.reason) == (1500, Reason.SHRINK)


def test_a_container_limit_above_every_cap_becomes_the_ceiling() -> None:
    containers = [container(cpu_request="200m", cpu_limit="3")]
    pod = pod_level_pod("p", "1", max_cpu="2", containers=containers)
    (result,) = compute_node(node_input([pod]), DEFAULT_SETTINGS).pods
    assert (result.hi_m, result.hi_cap, result.target_m) == (3000, Cap.CONTAINER_LIMIT, 3000)


@pytest.mark.parametrize(
    ("memory_limit", "unmanaged_m", "max_cpu", "target", "reason"),
    [
        pytest.param(None, 15000, None, 1000, Reason.NO_LIMIT, id="not-at-risk"),
        pytest.param("256Mi", 15000, None, 1010, Reason.NO_LIMIT, id="kept-one-quantum-above"),
        pytest.param("256Mi", 0, "1", 0, Reason.QOS_GUARD, id="capped-at-request-skips"),
    ],
)
def test_the_qos_guard_reads_pod_level_memory(
    memory_limit: str | None, unmanaged_m: int, max_cpu: str | None, target: int, reason: Reason
) -> None:
    pod = pod_level_pod("p", "1", memory_limit=memory_limit, max_cpu=max_cpu)
    node = node_input([pod], unmanaged_m=unmanaged_m)
    (result,) = compute_node(node, DEFAULT_SETTINGS).pods
    assert (result.target_m, result.reason) == (target, reason)


def test_a_pod_level_pod_and_a_container_pod_of_one_request_get_one_target() -> None:
    settings = replace(DEFAULT_SETTINGS, quantum_m=250)
    pods = [pod_level_pod("p", "333m"), managed_pod("q", 333)]
    p, q = compute_node(node_input(pods, allocatable_m=2000), settings).pods
    # S = 1334 shared equally: 333 + 667 = 1000, already a multiple of the quantum.
    assert p.target_m == q.target_m == 1000
