from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from app.core.config import DEFAULT_SETTINGS, Settings
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy import ContainerLimit, seed_limits, seed_pod_limit
from tests.unit.app.builders import container, pod_info, pod_resources
from tests.unit.app.core.policy.inputs import managed_pod


def _multipliers(initial: int, maximum: int) -> dict[str, Fraction]:
    return {"webhook_initial_multiplier": Fraction(initial), "max_multiplier": Fraction(maximum)}


# Each case's settings are the defaults with its changes.
@pytest.mark.parametrize(
    ("changes", "caps", "max_cpu", "expected"),
    [
        pytest.param({}, LimitRangeCaps(), None, [1000, 3000], id="initial-multiplier"),
        pytest.param(
            _multipliers(5, 3), LimitRangeCaps(), None, [1500, 4500], id="clamped-by-max-multiplier"
        ),
        pytest.param(
            _multipliers(5, 0), LimitRangeCaps(), None, [2500, 7500], id="uncapped-multiplier"
        ),
        pytest.param(
            {},
            LimitRangeCaps(container_max_m=2000),
            None,
            [1000, 2000],
            id="limit-range-container-max",
        ),
        pytest.param(
            {},
            LimitRangeCaps(container_max_m=1200),
            None,
            [1000],
            id="container-max-at-request-seeds-nothing-there",
        ),
        pytest.param(
            {}, LimitRangeCaps(pod_max_m=3000), None, [750, 2250], id="limit-range-pod-max-shared"
        ),
        pytest.param({}, LimitRangeCaps(), "3", [750, 2250], id="max-cpu-shared"),
        pytest.param({}, LimitRangeCaps(), "2", [], id="max-cpu-at-request"),
        pytest.param(
            {"quantum_m": 100}, LimitRangeCaps(), None, [1000, 3000], id="already-on-quantum"
        ),
        pytest.param(
            {"webhook_initial_multiplier": Fraction(13, 10), "quantum_m": 250},
            LimitRangeCaps(),
            None,
            [1750],
            id="quantized-down-to-stay-within-the-multiplier",
        ),
        pytest.param(
            {"max_multiplier": Fraction(1, 2)},
            LimitRangeCaps(),
            None,
            [],
            id="multiplier-below-one-seeds-nothing",
        ),
    ],
)
def test_seed_limits(
    changes: dict[str, Any], caps: LimitRangeCaps, max_cpu: str | None, expected: list[int]
) -> None:
    pod = managed_pod("p", 500, 1500, max_cpu=max_cpu)
    limits = seed_limits(pod, replace(DEFAULT_SETTINGS, **changes), limit_range=caps)
    assert [limit.limit_m for limit in limits] == expected
    assert all(limit.name.startswith("c") for limit in limits)


def test_only_containers_with_a_request_and_no_limit_are_seeded() -> None:
    pod = pod_info(
        containers=[
            container("app", cpu_request="1"),
            container("limited", cpu_request="1", cpu_limit="1500m"),
            container("no-request", cpu_request=None),
        ],
        init_containers=[
            container("migrate", cpu_request="1"),
            container("proxy", cpu_request="100m", restart_policy="Always"),
        ],
    )
    assert seed_limits(pod, DEFAULT_SETTINGS) == (
        ContainerLimit("app", False, 2000),
        ContainerLimit("proxy", True, 200),
    )


@pytest.mark.parametrize(
    ("max_cpu", "expected"),
    [
        pytest.param("4500m", (ContainerLimit("c1", False, 1500),), id="room-left"),
        pytest.param("4", (), id="no-room-left"),
    ],
)
def test_existing_limits_count_against_the_pod_cap(
    max_cpu: str, expected: tuple[ContainerLimit, ...]
) -> None:
    pod = managed_pod("p", 1000, 1000, limits_m=[3000, None], max_cpu=max_cpu)
    assert seed_limits(pod, DEFAULT_SETTINGS) == expected


def test_nothing_to_seed() -> None:
    pod = managed_pod("p", 1000, limits_m=[2000])
    assert seed_limits(pod, DEFAULT_SETTINGS) == ()


def pod_level(
    request: str | None = "1",
    *,
    limit: str | None = None,
    containers: list[dict[str, object]] | None = None,
    max_cpu: str | None = None,
) -> PodInfo:
    return pod_info(
        resources=pod_resources(cpu_request=request, cpu_limit=limit),
        containers=containers if containers is not None else [container(cpu_request="300m")],
        max_cpu=max_cpu,
        node=None,
        phase=None,
        qos_class=None,
    )


def test_pod_level_pods_get_no_container_limits() -> None:
    assert seed_limits(pod_level(), DEFAULT_SETTINGS) == ()


@pytest.mark.parametrize(
    ("pod", "settings", "caps", "expected"),
    [
        pytest.param(
            pod_level(), DEFAULT_SETTINGS, LimitRangeCaps(), 2000, id="initial-multiplier"
        ),
        pytest.param(
            pod_level(),
            replace(
                DEFAULT_SETTINGS, webhook_initial_multiplier=Fraction(5), max_multiplier=Fraction(3)
            ),
            LimitRangeCaps(),
            3000,
            id="clamped-by-max-multiplier",
        ),
        pytest.param(
            pod_level(max_cpu="1500m"), DEFAULT_SETTINGS, LimitRangeCaps(), 1500, id="max-cpu"
        ),
        pytest.param(
            pod_level(),
            DEFAULT_SETTINGS,
            LimitRangeCaps(pod_max_m=1200),
            1200,
            id="limit-range-pod-max",
        ),
        pytest.param(
            pod_level(),
            DEFAULT_SETTINGS,
            LimitRangeCaps(container_max_m=500),
            2000,
            id="container-caps-do-not-bound-the-pod",
        ),
        pytest.param(
            pod_level("333m"),
            replace(DEFAULT_SETTINGS, quantum_m=100),
            LimitRangeCaps(),
            600,
            id="quantized-never-above-the-bound",
        ),
        pytest.param(
            pod_level(containers=[container(cpu_request="300m", cpu_limit="2500m")]),
            DEFAULT_SETTINGS,
            LimitRangeCaps(),
            2500,
            id="not-below-a-container-limit",
        ),
        pytest.param(
            pod_level(limit="3"), DEFAULT_SETTINGS, LimitRangeCaps(), None, id="has-a-limit"
        ),
        pytest.param(
            pod_level(max_cpu="1"), DEFAULT_SETTINGS, LimitRangeCaps(), None, id="capped-at-request"
        ),
        pytest.param(
            pod_level(None, containers=[container(cpu_request=None)]),
            DEFAULT_SETTINGS,
            LimitRangeCaps(),
            None,
            id="no-cpu-request",
        ),
        pytest.param(
            managed_pod("p", 500), DEFAULT_SETTINGS, LimitRangeCaps(), None, id="container-pod"
        ),
    ],
)
def test_seed_pod_limit(
    pod: PodInfo, settings: Settings, caps: LimitRangeCaps, expected: int | None
) -> None:
    assert seed_pod_limit(pod, settings, limit_range=caps) == expected


@pytest.mark.parametrize(
    ("max_cpu", "wanted", "expected"),
    [
        # From what VPA's admission controller is about to set, not from the template.
        pytest.param(None, {"c0": 1500}, [3000], id="from-the-target"),
        pytest.param(None, {"c0": 200}, [500], id="target-below-request"),
        pytest.param(None, {"other": 1500}, [500], id="another-container"),
        # Never below the target, even under the pod's max-cpu.
        pytest.param("1", {"c0": 1500}, [1500], id="max-cpu-below-the-target"),
    ],
)
def test_a_requests_only_vpa_target_seeds_the_birth_limit(
    max_cpu: str | None, wanted: dict[str, int], expected: list[int]
) -> None:
    pod = managed_pod("p", 250, max_cpu=max_cpu)
    limits = seed_limits(pod, DEFAULT_SETTINGS, vpa_targets=wanted)
    assert [limit.limit_m for limit in limits] == expected
