"""Token buckets, and the write budget: one bucket, the primary lane served before the secondary."""

import asyncio

import pytest

from app.io.budget import Lane, TokenBucket, WriteBudget


def test_the_burst_goes_out_at_once_then_the_rate_paces() -> None:
    async def scenario() -> float:
        budget = WriteBudget(rate=50.0, burst=5)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(10):
            await budget.acquire(Lane.PRIMARY)
        return loop.time() - started

    # Five at once, five more at 50/s: about 0.1 s.
    assert 0.08 <= asyncio.run(scenario()) < 0.5


def test_primary_waiters_are_served_before_secondary_ones_that_came_first() -> None:
    async def scenario() -> list[str]:
        budget = WriteBudget(rate=100.0, burst=1)
        await budget.acquire(Lane.PRIMARY)  # the bucket is now empty
        served: list[str] = []

        async def take(lane: Lane, name: str) -> None:
            await budget.acquire(lane)
            served.append(name)

        tasks = [asyncio.create_task(take(Lane.SECONDARY, f"explain-{i}")) for i in range(3)]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(take(Lane.PRIMARY, f"resize-{i}")) for i in range(3)]
        await asyncio.gather(*tasks)
        return served

    assert asyncio.run(scenario()) == [
        "resize-0",
        "resize-1",
        "resize-2",
        "explain-0",
        "explain-1",
        "explain-2",
    ]


def test_a_new_secondary_write_does_not_jump_the_primary_queue() -> None:
    async def scenario() -> tuple[bool, int]:
        budget = WriteBudget(rate=10.0, burst=1)
        await budget.acquire(Lane.PRIMARY)
        waiting = asyncio.create_task(budget.acquire(Lane.PRIMARY))
        await asyncio.sleep(0)
        # A token refills only after 0.1 s; the secondary write must not take it first.
        later = asyncio.create_task(budget.acquire(Lane.SECONDARY))
        await asyncio.wait_for(asyncio.shield(waiting), 1.0)
        done_first = not later.done()
        await later
        return done_first, budget.waiting(Lane.SECONDARY)

    assert asyncio.run(scenario()) == (True, 0)


def test_a_refund_serves_the_next_waiter() -> None:
    async def scenario() -> bool:
        budget = WriteBudget(rate=0.001, burst=1)
        await budget.acquire(Lane.PRIMARY)
        waiter = asyncio.create_task(budget.acquire(Lane.SECONDARY))
        await asyncio.sleep(0)
        budget.refund()
        await asyncio.wait_for(waiter, 1.0)
        return waiter.done()

    assert asyncio.run(scenario())


def test_a_cancelled_waiter_gives_its_place_up() -> None:
    async def scenario() -> int:
        budget = WriteBudget(rate=20.0, burst=1)
        await budget.acquire(Lane.PRIMARY)
        gone = asyncio.create_task(budget.acquire(Lane.PRIMARY))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        await asyncio.wait_for(budget.acquire(Lane.PRIMARY), 1.0)
        return budget.waiting(Lane.PRIMARY)

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
