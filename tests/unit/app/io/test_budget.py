"""Token buckets, and the write budgets: a bucket each, waiters served in arrival order."""

import asyncio

import pytest

from app.io.budget import TokenBucket, WriteBudget
from tests.unit.reconciler.fakes import FakeClock


def test_the_burst_goes_out_at_once_then_the_rate_paces() -> None:
    async def scenario() -> list[float]:
        clock = FakeClock()
        budget = WriteBudget(rate=50.0, burst=5, clock=clock)
        granted: list[float] = []

        async def take() -> None:
            await budget.acquire()
            granted.append(clock.now - 1000.0)

        tasks = [asyncio.create_task(take()) for _ in range(10)]
        for _ in range(20):
            await asyncio.sleep(0)
            clock.advance(0.01)
        await asyncio.gather(*tasks)
        return granted

    granted = asyncio.run(scenario())
    # Five at once, then one every 20 ms at 50/s.
    assert granted[:5] == [0.0] * 5
    assert granted[5:] == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.10], abs=0.011)


def test_waiters_are_served_in_arrival_order() -> None:
    async def scenario() -> list[int]:
        clock = FakeClock()
        budget = WriteBudget(rate=100.0, burst=1, clock=clock)
        await budget.acquire()  # the bucket is now empty
        served: list[int] = []

        async def take(index: int) -> None:
            await budget.acquire()
            served.append(index)

        tasks = [asyncio.create_task(take(i)) for i in range(4)]
        await asyncio.sleep(0)
        for _ in range(10):
            clock.advance(0.01)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return served

    assert asyncio.run(scenario()) == [0, 1, 2, 3]


async def _queued_behind_the_only_token(budget: WriteBudget) -> asyncio.Task[None]:
    """Spends the budget's one token and queues a second acquire behind it."""
    await budget.acquire()
    waiter = asyncio.create_task(budget.acquire())
    await asyncio.sleep(0)
    return waiter


def test_a_refund_serves_the_next_waiter() -> None:
    async def scenario() -> bool:
        budget = WriteBudget(rate=0.001, burst=1)
        waiter = await _queued_behind_the_only_token(budget)
        budget.refund()
        await asyncio.wait_for(waiter, 1.0)
        return waiter.done()

    assert asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_place_up() -> None:
    async def scenario() -> int:
        budget = WriteBudget(rate=20.0, burst=1)
        gone = await _queued_behind_the_only_token(budget)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        await asyncio.wait_for(budget.acquire(), 1.0)
        return budget.waiting()

    assert asyncio.run(scenario()) == 0


@pytest.mark.parametrize(("rate", "burst"), [(1.0, 1), (200.0, 400)])
def test_reconfigure_changes_rate_and_burst(rate: float, burst: int) -> None:
    async def scenario() -> tuple[float, int]:
        budget = WriteBudget(rate=50.0, burst=100)
        budget.reconfigure(rate=rate, burst=burst)
        return budget.rate, budget.burst

    assert asyncio.run(scenario()) == (rate, burst)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_free_then_callers_wait_in_arrival_order() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, clock=Clock())
    assert [bucket.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 0.5, 1.0]


def test_tokens_refill_at_the_rate_up_to_the_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=1.0, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.now += 10.0
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 1.0]


def test_reconfigure_applies_the_new_rate_and_clips_the_balance() -> None:
    bucket = TokenBucket(rate=10.0, burst=10, clock=Clock())
    bucket.reconfigure(rate=1.0, burst=1)
    assert (bucket.rate, bucket.burst) == (1.0, 1)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 1.0]


def test_take_only_whole_tokens_and_say_when_the_next_is_due() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=4.0, burst=1, clock=clock)
    assert bucket.take()
    assert not bucket.take()
    assert bucket.seconds_to_next() == 0.25
    clock.now += 0.125
    assert not bucket.take()
    assert bucket.seconds_to_next() == 0.125
    bucket.give_back()
    assert bucket.take()
    bucket.give_back()
    bucket.give_back()
    # Given back tokens never exceed the burst.
    assert bucket.take()
    assert not bucket.take()
