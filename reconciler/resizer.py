"""The resize lane: sending planned resizes at their node's pace.

A reconcile plans; this lane sends. A pod never has two resizes in flight, and a newer
plan for the same pod replaces one still waiting, so a pod whose node changes twice while
its resize waits for the rate limiters is resized once, to the latest target. A resize
whose node already has another reconcile due (bindings still arriving) is held back until
that reconcile replaces it, for at most the debounce's cap, so a wave resizes each pod
once. Each pod waits in a `DelayQueue` for its slot of its node's pace
(`perNodePatchesPerSecond`): a pod's first plan reserves the slot, a plan replacing it
keeps it. Then it spends a token of the resize budget (`clientQPS`/`clientBurst`), and the
write gate checks it right before it goes out, so nothing planned before a stop button was
pressed goes out after the stop has been observed.

Every answer goes to `reconciler.answers`, which classifies it and acts on it.
"""

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from app.core.quantity import format_cpu_millis
from app.io.clock import Clock
from app.io.http import ApiResponse, ApiUnavailable, Skipped
from reconciler.answers import ResizeAnswers
from reconciler.gate import Blocked, Outlet
from reconciler.plan import ResizePlan, pod_context
from reconciler.ratelimit import NodeBuckets
from reconciler.workqueue import MAX_DEBOUNCE_PERIODS, DelayQueue, NodeQueue
from reconciler.writer import resize_write

log = logging.getLogger(__name__)

_SUPERSEDED: Final = "superseded"
# A held resize is looked at again this long after its node's reconcile is due.
_AFTER_RECONCILE_SECONDS: Final = 0.05


@dataclass(eq=False, kw_only=True, slots=True)
class Resizer:
    """The resize lane: each pod's latest plan, sent at its node's pace."""

    outlet: Outlet
    answers: ResizeAnswers
    buckets: NodeBuckets
    nodes: NodeQueue
    clock: Clock
    # The latest plan of each pod not sent yet, and the pods due at their node's pace.
    _plans: dict[str, ResizePlan] = field(default_factory=dict, init=False)
    _due: DelayQueue = field(init=False)
    _per_node: Counter[str] = field(default_factory=Counter, init=False)

    def __post_init__(self) -> None:
        self._due = DelayQueue(clock=self.clock)
        self.outlet.activity.watch(self.busy)

    def plan(self, plan: ResizePlan) -> None:
        """Send `plan` when the rate limiters allow, replacing one still waiting."""
        key = plan.pod.key
        previous = self._plans.get(key)
        self._plans[key] = plan
        plan.round.add()
        if previous is not None:
            previous.round.done(self.clock())
            self._per_node[previous.pod.node_name] -= 1
        elif not self._due.active(key):
            self._due.add(key, delay=self.buckets.for_node(plan.pod.node_name).reserve())
        self._per_node[plan.pod.node_name] += 1
        self.outlet.activity.worked()

    def drop(self, key: str) -> None:
        """The latest computation needs no resize: call off one still waiting."""
        plan = self._plans.pop(key, None)
        if plan is not None:
            self._due.discard(key)
            plan.round.done(self.clock())
            self._per_node[plan.pod.node_name] -= 1
            self.outlet.activity.check()

    def resizing(self, node: str) -> bool:
        """Whether resizes planned for the node's pods are still waiting or in flight."""
        return self._per_node[node] > 0

    def forget_node(self, node: str) -> None:
        self.buckets.forget(node)
        self._per_node.pop(node, None)

    def clear(self) -> None:
        """Call off everything not yet sent (leadership ended)."""
        now = self.clock()
        for key, plan in self._plans.items():
            plan.round.done(now)
            self._due.discard(key)
        self._plans.clear()
        self._per_node.clear()
        self.outlet.activity.check()

    def busy(self) -> bool:
        return bool(self._plans)

    async def run(self, *, workers: int) -> None:
        await asyncio.gather(*(self._worker() for _ in range(workers)))

    def _hold(self, key: str) -> float | None:
        """How long to hold a resize back: while the node's bookings have moved since its
        target was computed and the changes are still settling into another reconcile, whose
        newer plan would replace it (sending both would resize the pod twice in one wave),
        but no longer than the debounce's own cap since the plan was made."""
        plan = self._plans.get(key)
        if plan is None or not self.outlet.gate.bookings_moved(plan.pod.node_name, plan.bookings):
            return None
        due = self.nodes.debouncing(plan.pod.node_name)
        cap = MAX_DEBOUNCE_PERIODS * plan.settings.debounce_seconds
        if due is None or self.clock() - plan.round.started + due > cap:
            return None
        return due + _AFTER_RECONCILE_SECONDS

    async def _worker(self) -> None:
        while (key := await self._due.get()) is not None:
            if (hold := self._hold(key)) is not None:
                self._due.done(key)
                self._due.add(key, delay=hold)
                continue
            try:
                await self._send(key)
            except Exception:  # one pod's bug must not stop the worker or leave it planned
                log.exception("resize failed unexpectedly", extra={"pod": key})
                if (plan := self._plans.get(key)) is not None:
                    self._finish(key, plan)
                    self.answers.unsent(plan, "failed unexpectedly")
            finally:
                self._due.done(key)
            if key in self._plans and key not in self._due:
                # Replaced while in flight: the newer plan goes next, at the node's pace.
                node = self._plans[key].pod.node_name
                self._due.add(key, delay=self.buckets.for_node(node).reserve())
            self.outlet.activity.check()

    async def _send(self, key: str) -> None:
        while (plan := self._plans.get(key)) is not None:
            pod = plan.pod
            if self.answers.applied_unseen(plan):
                self._finish(key, plan)
                return
            blocked: str | None = None

            def precondition(plan: ResizePlan = plan) -> bool:
                nonlocal blocked
                if self._plans.get(key) is not plan:
                    blocked = _SUPERSEDED
                else:
                    blocked = self.outlet.gate.resize_blocked(
                        plan.pod,
                        settings=plan.settings,
                        limits=plan.containers,
                        target_m=plan.target_m,
                    )
                return blocked is None

            response: ApiResponse | None = None
            try:
                response = await self.outlet.writer.send(
                    resize_write(pod, plan.containers, target_m=plan.target_m),
                    precondition=precondition,
                )
            except Skipped:
                if blocked == _SUPERSEDED:
                    continue
                if blocked != Blocked.AT_TARGET:
                    # Nothing is lost: a stop lifted, a config or pod change, and every start
                    # of leading each reconcile the node again.
                    log.info(
                        "resize called off: %s",
                        blocked,
                        extra={**pod_context(pod), "target": format_cpu_millis(plan.target_m)},
                    )
            except ApiUnavailable as exc:
                self.answers.unsent(plan, str(exc))
            self._finish(key, plan)
            if response is not None:
                self.answers.answered(plan, code=response.code, body=response.json())
            return

    def _finish(self, key: str, plan: ResizePlan) -> None:
        if self._plans.get(key) is plan:
            del self._plans[key]
            plan.round.done(self.clock())
            self._per_node[plan.pod.node_name] -= 1
