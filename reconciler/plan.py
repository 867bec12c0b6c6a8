"""What one reconcile of one node decides to write, as values: the reconcile builds a plan
and the executor (`reconciler.actuator`) carries it out. The reconcile sees the executor
only through `Executor`, so deciding never reaches into the lanes that write.
"""

from collections.abc import Hashable, Mapping, Set
from dataclasses import dataclass, field
from typing import Protocol

from app.core.config import Settings
from app.core.decision import Remembered
from app.core.explain import Explanation
from app.core.pods import PodInfo
from app.core.policy import ContainerLimit
from reconciler.metrics import ReconcilerMetrics


class Round:
    """One reconcile of one node, observed in the duration histogram once every resize it
    planned has been answered, called off or replaced."""

    __slots__ = ("_metrics", "_pending", "started")

    def __init__(self, *, metrics: ReconcilerMetrics, started: float) -> None:
        self._metrics = metrics
        self.started = started
        self._pending = 1

    def add(self) -> None:
        self._pending += 1

    def done(self, now: float) -> None:
        self._pending -= 1
        if self._pending == 0:
            self._metrics.reconcile_duration.observe(max(0.0, now - self.started))


@dataclass(slots=True, eq=False)
class ResizePlan:
    pod: PodInfo
    # The settings the target was computed with: a resize is sent only under the same ones.
    settings: Settings
    containers: tuple[ContainerLimit, ...]
    target_m: int
    explanation: Explanation
    # The status annotation to write once the resize is applied.
    annotation: str
    round: Round
    # The node's bookings count when the target was computed (`ClusterCache.bookings`).
    bookings: int = 0


@dataclass(slots=True)
class Explain:
    """An explanation to queue about one pod."""

    pod: PodInfo
    annotation: str | None = None
    adjusted: tuple[int, Explanation] | None = None
    warning: tuple[str, str] | None = None


@dataclass(slots=True)
class NodePlan:
    """What one reconcile of one node decided to write, and to remember."""

    resizes: list[ResizePlan] = field(default_factory=list)
    # Pods whose waiting resize, if any, is called off: the latest computation needs none.
    unplanned: list[str] = field(default_factory=list)
    explanations: list[Explain] = field(default_factory=list)
    # Pods to leave alone: (uid, seconds).
    backoffs: list[tuple[str, float]] = field(default_factory=list)
    # Reports acted on: (uid, topic, marker), each acted on once per marker.
    reports: list[tuple[str, str, Hashable]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Recall:
    """What the executor remembers and what it wrote that the cache does not show yet,
    read-only, for one reconcile."""

    # Back-offs and the reports acted on.
    remembered: Remembered
    # Accepted resizes the watch has not shown: uid -> (generation, target).
    resized: Mapping[str, tuple[int | None, int]]
    # Status annotations queued and not yet written, by pod key.
    queued: Mapping[str, str]
    # Status annotations written and not yet seen on the watch, by uid.
    annotated: Mapping[str, str]
    # Pods whose status annotation someone else edited since Headroom last wrote it.
    edited: Set[str]

    def annotation(self, pod: PodInfo) -> str | None:
        """The pod's status annotation: queued, written and not yet seen, or cached."""
        return self.queued.get(pod.key) or self.annotated.get(pod.uid, pod.status_annotation)


class Executor(Protocol):
    """What a reconcile needs of the lanes that write."""

    def recall(self) -> Recall:
        """What the lanes remember and have in flight, for one reconcile."""

    def submit(self, plan: NodePlan) -> None:
        """Carry out ``plan``, replacing what is still waiting for the same pods."""

    def forget_node(self, node: str) -> None:
        """Drop what is kept about a node that is gone."""


def resize_unseen(
    resized: Mapping[str, tuple[int | None, int]], pod: PodInfo, target_m: int
) -> bool:
    """Whether a resize of the pod to ``target_m`` was accepted and the watch has not shown
    it yet (`Recall.resized`): the pod's limit is the target now, and patching again would
    be a duplicate."""
    return resized.get(pod.uid) == (pod.generation, target_m)


def pod_context(pod: PodInfo) -> dict[str, str]:
    """A pod's fields for a log record."""
    return {"namespace": pod.namespace, "pod": pod.name, "node": pod.node_name}


def seconds_text(seconds: float) -> str:
    return f"{seconds:g}s"
