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
        pytest.param(Outcome(Kind.RECONCILED), None, id="reconciled"),
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


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        pytest.param(
            [UNAVAILABLE] * 5,
            [0.5, 1.0, 2.0, 4.0, TRANSIENT_RETRY_CAP_SECONDS],
            id="write-failures-double-to-their-cap",
        ),
        pytest.param(
            [CRASHED, CRASHED, CRASHED], [5.0, 10.0, 20.0], id="crashes-double-to-the-back-off"
        ),
        pytest.param(
            [CRASHED, UNAVAILABLE, CRASHED, UNAVAILABLE],
            [5.0, 0.5, 10.0, 1.0],
            id="streams-count-apart",
        ),
        pytest.param(
            [UNAVAILABLE, UNAVAILABLE, Outcome(Kind.RECONCILED), UNAVAILABLE],
            [0.5, 1.0, None, 2.0],
            id="a-reconcile-does-not-reset-write-failures",
        ),
        pytest.param(
            [UNAVAILABLE, UNAVAILABLE, APPLIED, UNAVAILABLE],
            [0.5, 1.0, None, 0.5],
            id="an-applied-resize-resets-write-failures",
        ),
        pytest.param(
            [CRASHED, CRASHED, Outcome(Kind.RECONCILED), CRASHED],
            [5.0, 10.0, None, 5.0],
            id="a-reconcile-resets-crashes",
        ),
        pytest.param(
            [CRASHED, APPLIED, CRASHED], [5.0, None, 10.0], id="a-resize-does-not-reset-crashes"
        ),
    ],
)
def test_failures_back_off_per_stream(
    outcomes: list[Outcome], expected: list[float | None]
) -> None:
    assert delays(outcomes) == pytest.approx(expected)


def test_a_node_that_left_starts_over() -> None:
    nodes, clock = queue()
    requeue(nodes, "n1", UNAVAILABLE)
    requeue(nodes, "n1", CRASHED)
    nodes.forget("n1")
    nodes.discard("n1")
    requeue(nodes, "n1", UNAVAILABLE)
    assert nodes.next_due() == pytest.approx(clock.now + TRANSIENT_RETRY_SECONDS)
