from fractions import Fraction
from typing import Any

import pytest

from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps, limit_range_caps
from tests.unit.app.builders import limit_range


@pytest.mark.parametrize(
    ("limit_ranges", "expected"),
    [
        pytest.param([], NO_LIMIT_RANGE_CAPS, id="none"),
        pytest.param(
            [limit_range(container_default_cpu="500m")], NO_LIMIT_RANGE_CAPS, id="defaults-only"
        ),
        pytest.param(
            [limit_range(container_max_cpu="2", pod_max_cpu="4")],
            LimitRangeCaps(container_max_m=2000, pod_max_m=4000),
            id="maxima",
        ),
        pytest.param(
            [limit_range(container_ratio="3", pod_ratio="2.5")],
            LimitRangeCaps(container_ratio=Fraction(3), pod_ratio=Fraction(5, 2)),
            id="ratios",
        ),
        pytest.param(
            [
                limit_range("a", container_max_cpu="2", pod_max_cpu="8"),
                limit_range("b", container_max_cpu="3", pod_max_cpu="6"),
            ],
            LimitRangeCaps(container_max_m=2000, pod_max_m=6000),
            id="tightest-of-several",
        ),
        pytest.param(
            [limit_range(container_max_cpu="1500001u")],
            LimitRangeCaps(container_max_m=1500),
            id="sub-milli-max-rounds-down",
        ),
        pytest.param(
            [
                {
                    "spec": {
                        "limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]
                    }
                },
                {"spec": {"limits": [{"type": "Container", "max": {"memory": "1Gi"}}]}},
                {"spec": {"limits": [{"type": "Container", "max": {"cpu": "bad"}}]}},
                {"spec": {"limits": [{"type": "Container", "max": {"cpu": "0"}}]}},
                {"spec": None},
                {},
            ],
            NO_LIMIT_RANGE_CAPS,
            id="irrelevant-or-unusable-items",
        ),
    ],
)
def test_limit_range_caps(limit_ranges: list[dict[str, Any]], expected: LimitRangeCaps) -> None:
    assert limit_range_caps(limit_ranges) == expected


@pytest.mark.parametrize(
    ("caps", "request_m", "container_cap", "pod_cap"),
    [
        pytest.param(NO_LIMIT_RANGE_CAPS, 500, None, None, id="none"),
        pytest.param(
            LimitRangeCaps(container_max_m=2000, pod_max_m=3000), 500, 2000, 3000, id="max"
        ),
        pytest.param(
            LimitRangeCaps(container_ratio=Fraction(3), pod_ratio=Fraction(2)),
            500,
            1500,
            1000,
            id="ratio",
        ),
        pytest.param(
            LimitRangeCaps(container_max_m=1000, container_ratio=Fraction(3)),
            500,
            1000,
            None,
            id="max-tighter-than-ratio",
        ),
        pytest.param(
            LimitRangeCaps(container_ratio=Fraction(5, 2)), 333, 832, None, id="ratio-rounds-down"
        ),
    ],
)
def test_caps_for_a_request(
    caps: LimitRangeCaps, request_m: int, container_cap: int | None, pod_cap: int | None
) -> None:
    assert caps.container_cap_m(request_m) == container_cap
    assert caps.pod_cap_m(request_m) == pod_cap
