from dataclasses import replace
from fractions import Fraction

import pytest

from app.config import DEFAULT_SETTINGS, Settings
from app.limitrange import LimitRangeCaps
from app.policy import ContainerLimit, seed_limits
from tests.unit.app.builders import container, pod_info
from tests.unit.app.policy.inputs import managed_pod


@pytest.mark.parametrize(
    ("settings", "caps", "max_cpu", "expected"),
    [
        pytest.param(
            DEFAULT_SETTINGS, LimitRangeCaps(), None, [1000, 3000], id="initial-multiplier"
        ),
        pytest.param(
            replace(
                DEFAULT_SETTINGS, webhook_initial_multiplier=Fraction(5), max_multiplier=Fraction(3)
            ),
            LimitRangeCaps(),
            None,
            [1500, 4500],
            id="clamped-by-max-multiplier",
        ),
        pytest.param(
            replace(
                DEFAULT_SETTINGS, webhook_initial_multiplier=Fraction(5), max_multiplier=Fraction(0)
            ),
            LimitRangeCaps(),
            None,
            [2500, 7500],
            id="uncapped-multiplier",
        ),
        pytest.param(
            DEFAULT_SETTINGS,
            LimitRangeCaps(container_max_m=2000),
            None,
            [1000, 2000],
            id="limit-range-container-max",
        ),
        pytest.param(
            DEFAULT_SETTINGS,
            LimitRangeCaps(container_max_m=1200),
            None,
            [1000],
            id="container-max-at-request-seeds-nothing-there",
        ),
        pytest.param(
            DEFAULT_SETTINGS,
            LimitRangeCaps(pod_max_m=3000),
            None,
            [750, 2250],
            id="limit-range-pod-max-shared",
        ),
        pytest.param(DEFAULT_SETTINGS, LimitRangeCaps(), "3", [750, 2250], id="max-cpu-shared"),
        pytest.param(DEFAULT_SETTINGS, LimitRangeCaps(), "2", [], id="max-cpu-at-request"),
        pytest.param(
            replace(DEFAULT_SETTINGS, quantum_m=100),
            LimitRangeCaps(),
            None,
            [1000, 3000],
            id="already-on-quantum",
        ),
        pytest.param(
            replace(DEFAULT_SETTINGS, webhook_initial_multiplier=Fraction(13, 10), quantum_m=250),
            LimitRangeCaps(),
            None,
            [1750],
            id="quantized-down-to-stay-within-the-multiplier",
        ),
        pytest.param(
            replace(DEFAULT_SETTINGS, max_multiplier=Fraction(1, 2)),
            LimitRangeCaps(),
            None,
            [],
            id="multiplier-below-one-seeds-nothing",
        ),
    ],
)
def test_seed_limits(
    settings: Settings, caps: LimitRangeCaps, max_cpu: str | None, expected: list[int]
) -> None:
    pod = managed_pod("p", 500, 1500, max_cpu=max_cpu)
    limits = seed_limits(pod, settings, limit_range=caps)
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
