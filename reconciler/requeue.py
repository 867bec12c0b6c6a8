"""When a node is looked at again: the one switch from what happened to the node queue.

As controller-runtime's ``reconcileHandler`` maps a reconcile's result to ``Forget``,
``AddAfter`` or ``AddRateLimited`` in one switch, every part that learns something about a
node reports an `Outcome` (the worker after a reconcile, the resize and explanation lanes
after a write) and `requeue` alone turns it into the queue's calls and chooses the delay.

Consecutive failures are counted per `Stream`: a reconcile that raised and a write the API
server could not take back off separately, each reset by its own success (a reconcile
that ran to its end, a resize applied).
"""

from dataclasses import dataclass
from enum import Enum, auto
from typing import Final, assert_never

from reconciler.workqueue import NodeQueue

# A reconcile that raised is tried again after this long, doubling while it keeps raising,
# up to the back-off period.
CRASH_RETRY_SECONDS: Final = 5.0
# A conflicting writer usually settles within a second; look again soon.
CONFLICT_RETRY_SECONDS: Final = 1.0
# Retries after the API server failed to answer (unreachable, 5xx, 429) back off from this
# up to the cap: short, so limits converge within seconds of the control plane recovering.
TRANSIENT_RETRY_SECONDS: Final = 0.5
TRANSIENT_RETRY_CAP_SECONDS: Final = 5.0


class Stream(Enum):
    """A kind of failure, with its own count of consecutive failures per node."""

    RECONCILE = auto()
    WRITE = auto()


class Kind(Enum):
    # A reconcile ran to its end; `seconds`: until a back-off on the node ends, or None.
    RECONCILED = auto()
    # A reconcile raised; `seconds`: the longest retry delay (the back-off period).
    CRASHED = auto()
    # A resize was applied.
    APPLIED = auto()
    # Another writer, or a stop landing while the write was on its way, got in the way.
    CONFLICT = auto()
    # A pod on the node backs off for `seconds`.
    BACKED_OFF = auto()
    # The API server could not answer, or a lane failed unexpectedly: soon, again.
    UNAVAILABLE = auto()


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Kind
    seconds: float | None = None


APPLIED: Final = Outcome(Kind.APPLIED)
CONFLICT: Final = Outcome(Kind.CONFLICT)
UNAVAILABLE: Final = Outcome(Kind.UNAVAILABLE)


def requeue(queue: NodeQueue, node: str, outcome: Outcome) -> None:
    """What the queue does with ``node`` after ``outcome``."""
    seconds = outcome.seconds
    match outcome.kind:
        case Kind.RECONCILED:
            queue.reset(node, Stream.RECONCILE)
            if seconds is not None:
                queue.add(node, delay=seconds)
        case Kind.CRASHED:
            cap = CRASH_RETRY_SECONDS if seconds is None else seconds
            queue.retry(node, Stream.RECONCILE, initial=CRASH_RETRY_SECONDS, cap=cap)
        case Kind.APPLIED:
            queue.reset(node, Stream.WRITE)
        case Kind.CONFLICT:
            queue.add(node, delay=CONFLICT_RETRY_SECONDS)
        case Kind.BACKED_OFF:
            queue.add(node, delay=0.0 if seconds is None else seconds)
        case Kind.UNAVAILABLE:
            queue.retry(
                node,
                Stream.WRITE,
                initial=TRANSIENT_RETRY_SECONDS,
                cap=TRANSIENT_RETRY_CAP_SECONDS,
            )
        case _:
            assert_never(outcome.kind)
