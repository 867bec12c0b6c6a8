import pytest

from app.core.backoff import ExponentialBackoff
from tests.unit.reconciler.fakes import FixedRandom


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [
        pytest.param(0.0, [0.5, 1.0, 2.0, 4.0, 5.0, 5.0], id="lowest-jitter"),
        pytest.param(1.0, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0], id="highest-jitter"),
    ],
)
def test_delays_double_up_to_the_cap(fraction: float, expected: list[float]) -> None:
    backoff = ExponentialBackoff(initial=1.0, cap=10.0, rand=FixedRandom(fraction))
    assert [backoff.next_delay() for _ in expected] == expected


def test_reset_starts_over() -> None:
    backoff = ExponentialBackoff(initial=1.0, cap=10.0, rand=FixedRandom(1.0))
    backoff.next_delay()
    backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 1.0
