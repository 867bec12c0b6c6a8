import pytest

from reconciler.ratelimit import NodeBuckets
from tests.unit.reconciler.fakes import FakeClock


@pytest.mark.parametrize(
    ("rate", "burst"),
    [
        pytest.param(10.0, 10, id="ten-per-second"),
        pytest.param(0.5, 1, id="below-one-per-second-still-allows-one"),
    ],
)
def test_node_buckets_allow_one_seconds_worth_at_once(rate: float, burst: int) -> None:
    buckets = NodeBuckets(rate=rate, clock=FakeClock())
    bucket = buckets.for_node("n1")
    assert bucket.burst == burst
    assert buckets.for_node("n1") is bucket
    assert buckets.for_node("n2") is not bucket


def test_node_buckets_reconfigure_every_node_and_forget() -> None:
    buckets = NodeBuckets(rate=10.0, clock=FakeClock())
    first = buckets.for_node("n1")
    buckets.reconfigure(rate=2.0)
    assert (first.rate, first.burst) == (2.0, 2)
    buckets.forget("n1")
    assert buckets.for_node("n1") is not first
