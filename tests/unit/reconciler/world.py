"""A node's cache wired to the real reconciler and actuator over a recording transport."""

import asyncio
import json
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from app.core.cluster import ClusterCache, Quiet
from app.io.budget import WriteBudget
from app.io.clock import Clock
from reconciler.gate import WriteGate
from reconciler.main import build_actuator
from reconciler.metrics import ReconcilerMetrics
from reconciler.ratelimit import Limiters, NodeBuckets
from reconciler.reconcile import NodeReconciler
from reconciler.workqueue import NodeQueue
from reconciler.writer import Writer
from tests.unit.app import builders
from tests.unit.app.builders import container
from tests.unit.reconciler.fakes import FakeApi, FakeClock

NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
PODS = "/api/v1/namespaces/team-a/pods"
T = TypeVar("T")


class RecordingQueue(NodeQueue):
    """The real node queue, recording every (node, delay) it is asked to schedule."""

    def __init__(self, *, clock: Clock, requeued: list[tuple[str, float]]) -> None:
        super().__init__(clock=clock)
        self._requeued = requeued

    def add(self, key: str, *, delay: float = 0.0) -> None:
        self._requeued.append((key, delay))
        super().add(key, delay=delay)


class World:
    """A node's cache, the real reconciler and actuator, and a recording transport.

    `reconcile()` plans and then lets the actuator send everything it will send.
    """

    # Worlds of the running test; closed after it (tests/unit/reconciler/conftest.py).
    open_worlds: ClassVar[list["World"]] = []

    def __init__(self, *, spec: dict[str, Any] | None = None, cpu: str = "16") -> None:
        # One event loop for the world's life: the actuator's queues belong to it.
        self.runner = asyncio.Runner()
        World.open_worlds.append(self)
        self.api = FakeApi()
        self.clock = FakeClock()
        self.cache = ClusterCache(listener=Quiet())
        self.metrics = ReconcilerMetrics()
        self.leading = True
        self.requeued: list[tuple[str, float]] = []
        self.actuator = build_actuator(
            writer=Writer(http=self.api, instance="test", wall_clock=lambda: NOW),
            gate=WriteGate(cache=self.cache, may_write=lambda: self.leading),
            limiters=Limiters(
                pace=NodeBuckets(rate=1000.0, clock=self.clock),
                resizes=WriteBudget(rate=1000.0, burst=1000, clock=self.clock),
                explanations=WriteBudget(rate=1000.0, burst=1000, clock=self.clock),
            ),
            metrics=self.metrics,
            queue=RecordingQueue(clock=self.clock, requeued=self.requeued),
            clock=self.clock,
        )
        self.reconciler = NodeReconciler(
            cache=self.cache,
            executor=self.actuator,
            metrics=self.metrics,
            clock=self.clock,
            wall_clock=lambda: NOW,
        )
        self.cache.apply_node("node-1", builders.node("node-1", cpu=cpu))
        self.cache.apply_namespace("team-a", builders.namespace("team-a"))
        self.cache.apply_config(
            "cluster",
            builders.headroom_config(spec=spec if spec is not None else {"dryRun": False}),
        )

    def add(self, name: str, **overrides: Any) -> None:
        obj = builders.pod(name, **overrides)
        self.cache.apply_pod(f"{obj['metadata']['namespace']}/{name}", builders.wire(obj))

    def reconcile(self, *, before_sending: Callable[[], None] | None = None) -> float | None:
        """Plan, then let the actuator send all it will; `before_sending` acts in between."""

        async def plan() -> float | None:
            delay = self.reconciler.reconcile("node-1")
            if before_sending is not None:
                before_sending()
            return delay

        return self.run(plan())

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` with the actuator's workers going, then let them finish."""

        async def with_workers() -> T:
            workers = asyncio.create_task(self.actuator.run())
            try:
                result = await coroutine
                await self.actuator.activity.settle()
                return result
            finally:
                workers.cancel()
                await asyncio.gather(workers, return_exceptions=True)

        return self.runner.run(with_workers())

    def close(self) -> None:
        self.runner.close()

    def resizes(self) -> dict[str, str]:
        return {
            request.path.split("/")[-2]: request.body["spec"]["containers"][0]["resources"][
                "limits"
            ]["cpu"]
            for request in self.api.writes(kind="resize")
            if request.body is not None
        }

    def annotations(self) -> dict[str, dict[str, Any]]:
        result = {}
        for request in self.api.writes(kind="annotation"):
            assert request.body is not None
            text = request.body["metadata"]["annotations"]["kube-headroom.dev/status"]
            result[request.path.split("/")[-1]] = json.loads(text)
        return result

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (r.body["involvedObject"]["name"], r.body["reason"], r.body["message"])
            for r in self.api.writes(kind="event")
            if r.body is not None
        ]

    def count(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value("headroom_resizes_total", {"result": result})
        assert value is not None
        return value

    def gauge(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels or {})


def worked_example(world: World) -> None:
    """Design §2: 16 cores, three managed pods requesting 0.5, 1.5 and 6 cores."""
    for name, cpu in (("a", "500m"), ("b", "1500m"), ("c", "6")):
        world.add(name, containers=[container(cpu_request=cpu)])


def reconciled_example(*, spec: dict[str, Any] | None = None) -> World:
    """A world holding the worked example, reconciled once."""
    world = World(spec=spec)
    worked_example(world)
    world.reconcile()
    return world


def settle(world: World) -> None:
    """Feed the cache what the API server now holds: applied limits and annotations."""
    limits = world.resizes()
    annotations = {
        request.path.split("/")[-1]: request.body["metadata"]["annotations"][
            "kube-headroom.dev/status"
        ]
        for request in world.api.writes(kind="annotation")
        if request.body is not None
    }
    for key, pod in list(world.cache.pods.items()):
        obj = builders.pod(
            pod.name,
            containers=[
                container(
                    cpu_request=f"{pod.facts.request_m}m",
                    cpu_limit=limits.get(pod.name)
                    or (f"{pod.facts.limit_m}m" if pod.facts.limit_m else None),
                )
            ],
            status_annotation=annotations.get(pod.name, pod.status_annotation),
            generation=(pod.generation or 1) + (pod.name in limits),
        )
        world.cache.apply_pod(key, builders.wire(obj))
    world.api.sent.clear()
