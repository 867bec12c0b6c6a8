import asyncio

import pytest

from reconciler.workqueue import PROMPT_SPREAD_SECONDS, NodeQueue
from tests.unit.reconciler.fakes import FakeClock, FixedRandom


def make_queue(fraction: float = 0.5) -> tuple[NodeQueue, FakeClock]:
    clock = FakeClock()
    return NodeQueue(clock=clock, rand=FixedRandom(fraction)), clock


def drain(queue: NodeQueue) -> list[str]:
    keys = []
    while (key := queue.pop_ready()) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_a_key_is_not_ready_before_its_delay() -> None:
    queue, clock = make_queue()
    queue.add("n1", delay=2.0)
    assert queue.pop_ready() is None
    assert queue.next_due() == clock.now + 2.0
    clock.advance(2.0)
    assert queue.pop_ready() == "n1"


def test_many_adds_within_the_window_coalesce_into_one_reconcile() -> None:
    queue, clock = make_queue()
    for _ in range(50):
        queue.add_debounced("n1", period=2.0)
        clock.advance(0.01)
    assert len(queue) == 1
    clock.advance(2.0)
    assert drain(queue) == ["n1"]


def test_adding_again_never_postpones_but_can_bring_forward() -> None:
    queue, clock = make_queue()
    queue.add("n1", delay=5.0)
    queue.add("n1", delay=9.0)
    assert queue.next_due() == clock.now + 5.0
    queue.add("n1", delay=1.0)
    assert queue.next_due() == clock.now + 1.0
    clock.advance(1.0)
    assert drain(queue) == ["n1"]
    assert queue.next_due() is None


@pytest.mark.parametrize(
    ("fraction", "delay"),
    [
        pytest.param(0.0, 1.0, id="minus-half"),
        pytest.param(0.5, 2.0, id="centre"),
        pytest.param(1.0, 3.0, id="plus-half"),
    ],
)
def test_debounce_is_jittered_by_half_the_period(fraction: float, delay: float) -> None:
    queue, clock = make_queue(fraction)
    queue.add_debounced("n1", period=2.0)
    assert queue.next_due() == pytest.approx(clock.now + delay)


@pytest.mark.parametrize(
    ("fraction", "delay"),
    [
        pytest.param(0.0, 0.0, id="immediately"),
        pytest.param(1.0, PROMPT_SPREAD_SECONDS, id="end-of-spread"),
    ],
)
def test_prompt_reaction_overrides_a_pending_debounce(fraction: float, delay: float) -> None:
    queue, clock = make_queue(fraction)
    queue.add("n1", delay=2.0)
    queue.add_prompt("n1")
    assert queue.next_due() == pytest.approx(clock.now + delay)


def test_keys_come_out_in_due_order() -> None:
    queue, clock = make_queue()
    queue.add("late", delay=3.0)
    queue.add("early", delay=1.0)
    queue.add("middle", delay=2.0)
    clock.advance(5.0)
    assert drain(queue) == ["early", "middle", "late"]


def test_an_active_key_is_never_handed_out_twice_and_changes_are_not_lost() -> None:
    queue, clock = make_queue()
    queue.add("n1")
    assert queue.pop_ready() == "n1"
    queue.add("n1", delay=1.0)
    assert "n1" in queue
    clock.advance(5.0)
    assert queue.pop_ready() is None
    queue.done("n1")
    assert queue.pop_ready() == "n1"


def test_done_reschedules_a_held_key_at_its_original_time() -> None:
    queue, clock = make_queue()
    queue.add("n1")
    queue.pop_ready()
    queue.add("n1", delay=3.0)
    clock.advance(1.0)
    queue.done("n1")
    assert queue.next_due() == pytest.approx(clock.now + 2.0)


def test_get_waits_for_the_key_and_returns_none_after_shutdown() -> None:
    queue = NodeQueue()

    async def scenario() -> tuple[str | None, str | None]:
        queue.add("n1", delay=0.01)
        first = await queue.get()
        waiter = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)
        queue.shutdown()
        return first, await waiter

    assert asyncio.run(scenario()) == ("n1", None)


def test_get_wakes_when_a_key_is_added() -> None:
    queue = NodeQueue()

    async def scenario() -> str | None:
        waiter = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0.01)
        queue.add("n2")
        return await asyncio.wait_for(waiter, 1.0)

    assert asyncio.run(scenario()) == "n2"


def test_the_debounce_trails_the_last_change() -> None:
    queue, clock = make_queue()
    queue.add_debounced("n1", period=2.0)
    clock.advance(1.5)
    queue.add_debounced("n1", period=2.0)
    clock.advance(1.0)
    # Quiet for 1 s only: the second change pushed the reconcile to 2 s after it.
    assert queue.pop_ready() is None
    clock.advance(1.0)
    assert drain(queue) == ["n1"]


def test_steady_churn_waits_at_most_three_periods_after_the_first_change() -> None:
    queue, clock = make_queue()
    for _ in range(10):
        queue.add_debounced("n1", period=2.0)
        clock.advance(1.0)
        if queue.pop_ready() is not None:
            break
    assert clock.now == pytest.approx(1000.0 + 6.0)


def test_a_change_never_postpones_a_look_due_for_another_reason() -> None:
    queue, clock = make_queue()
    queue.add_prompt("n1")
    queue.add_debounced("n1", period=2.0)
    assert queue.next_due() == pytest.approx(clock.now + PROMPT_SPREAD_SECONDS * 0.5)


def test_a_change_brings_a_distant_retry_forward_to_the_debounce() -> None:
    queue, clock = make_queue()
    queue.add("n1", delay=300.0)
    queue.add_debounced("n1", period=2.0)
    assert queue.next_due() == pytest.approx(clock.now + 2.0)
