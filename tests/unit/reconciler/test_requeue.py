import pytest

from reconciler.requeue import (
    APPLIED,
    CONFLICT,
    CONFLICT_RETRY_SECONDS,
    CRASH_RETRY_SECONDS,
    TRANSIENT_RETRY_CAP_SECONDS,
    TRANSIENT_RETRY_SECONDS,
    UNAVAILABLE,
    Kind,
    Outcome,
    requeue,
)
from reconciler.workqueue import NodeQueue
from tests.unit.reconciler.fakes import FakeClock, FixedRandom

CRASHED = Outcome(Kind.CRASHED, 300.0)
RECONCILED = Outcome(Kind.RECONCILED)


def queue() -> tuple[NodeQueue, FakeClock]:
    clock = FakeClock()
    # The top of the jitter: each retry waits its whole ceiling.
    return NodeQueue(clock=clock, rand=FixedRandom(1.0)), clock


def delays(outcomes: list[Outcome]) -> list[float | None]:
    """The node's delay after each outcome, the node handed out in between."""
    nodes, clock = queue()
    seen: list[float | None] = []
    for outcome in outcomes:
        requeue(nodes, "n1", outcome)
        due = nodes.next_due()
        seen.append(None if due is None else due - clock.now)
        if due is not None:
            clock.now = due
            nodes.done(nodes.pop_ready() or "")
    return seen


@pytest.mark.parametrize(
    ("outcome", "delay"),
    [
        pytest.param(RECONCILED, None, id="reconciled"),
        pytest.param(Outcome(Kind.RECONCILED, 42.0), 42.0, id="reconciled-back-off-ends"),
        pytest.param(CRASHED, CRASH_RETRY_SECONDS, id="crashed"),
        pytest.param(APPLIED, None, id="applied"),
        pytest.param(CONFLICT, CONFLICT_RETRY_SECONDS, id="conflict"),
        pytest.param(Outcome(Kind.BACKED_OFF, 300.0), 300.0, id="backed-off"),
        pytest.param(UNAVAILABLE, TRANSIENT_RETRY_SECONDS, id="unavailable"),
    ],
)
def test_each_outcome_chooses_its_delay(outcome: Outcome, delay: float | None) -> None:
    assert delays([outcome]) == [delay]


# Each outcome beside the delay it leads to.
@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [
                (UNAVAILABLE, 0.5),
                (UNAVAILABLE, 1.0),
                (UNAVAILABLE, 2.0),
                (UNAVAILABLE, 4.0),
                (UNAVAILABLE, TRANSIENT_RETRY_CAP_SECONDS),
            ],
            id="write-failures-double-to-their-cap",
        ),
        pytest.param(
            [(CRASHED, 5.0), (CRASHED, 10.0), (CRASHED, 20.0)], id="crashes-double-to-the-back-off"
        ),
        pytest.param(
            [(CRASHED, 5.0), (UNAVAILABLE, 0.5), (CRASHED, 10.0), (UNAVAILABLE, 1.0)],
            id="streams-count-apart",
        ),
        pytest.param(
            [(UNAVAILABLE, 0.5), (UNAVAILABLE, 1.0), (RECONCILED, None), (UNAVAILABLE, 2.0)],
            id="a-reconcile-does-not-reset-write-failures",
        ),
        pytest.param(
            [(UNAVAILABLE, 0.5), (UNAVAILABLE, 1.0), (APPLIED, None), (UNAVAILABLE, 0.5)],
            id="an-applied-resize-resets-write-failures",
        ),
        pytest.param(
            [(CRASHED, 5.0), (CRASHED, 10.0), (RECONCILED, None), (CRASHED, 5.0)],
            id="a-reconcile-resets-crashes",
        ),
        pytest.param(
            [(CRASHED, 5.0), (APPLIED, None), (CRASHED, 10.0)], id="a-resize-does-not-reset-crashes"
        ),
    ],
)
def test_failures_back_off_per_stream(steps: list[tuple[Outcome, float | None]]) -> None:
    outcomes = [outcome for outcome, _ in steps]
    assert delays(outcomes) == pytest.approx([delay for _, delay in steps])


def test_a_node_that_left_starts_over() -> None:
    nodes, clock = queue()
    requeue(nodes, "n1", UNAVAILABLE)
    requeue(nodes, "n1", CRASHED)
    nodes.forget("n1")
    nodes.discard("n1")
    requeue(nodes, "n1", UNAVAILABLE)
    assert nodes.next_due() == pytest.approx(clock.now + TRANSIENT_RETRY_SECONDS)
