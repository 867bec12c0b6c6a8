import asyncio

import pytest

from reconciler.ratelimit import NodeBuckets, TokenBucket
from tests.unit.reconciler.fakes import FakeClock


def test_burst_is_free_then_callers_wait_in_arrival_order() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=2.0, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 0.5, 1.0]


def test_tokens_refill_at_the_rate_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=1.0, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.advance(10.0)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 1.0]


def test_reconfigure_applies_the_new_rate_and_clips_the_balance() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=10.0, burst=10, clock=clock)
    bucket.reconfigure(rate=1.0, burst=1)
    assert (bucket.rate, bucket.burst) == (1.0, 1)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 1.0]


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


def test_wait_sleeps_only_when_the_bucket_is_empty() -> None:
    clock = FakeClock()
    bucket = TokenBucket(rate=1000.0, burst=1, clock=clock)

    async def take_two() -> None:
        await bucket.wait()
        await bucket.wait()

    asyncio.run(take_two())
    # Two tokens taken from a burst of one with no time passing: the next waits two slots.
    assert bucket.reserve() == pytest.approx(0.002)
