"""The resize lane: sending planned resizes at their node's pace, and acting on the answers.

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

The answer is classified (`reconciler.outcomes`) and acted on: an applied resize is
explained on the explanation lane; a refusal backs the pod off or has its node looked at
again through the node queue, which alone decides when.
"""

import asyncio
import logging
from collections import Counter
from typing import Any, Final

from app.core.explain import event_message
from app.core.quantity import format_cpu_millis
from app.io.clock import Clock
from app.io.http import ApiResponse, ApiUnavailable, Skipped
from reconciler.activity import Activity
from reconciler.bodies import RESIZE_FORBIDDEN
from reconciler.explanations import Explanations
from reconciler.gate import AT_TARGET, WriteGate
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Answer, Result, classify, result_of
from reconciler.plan import ResizePlan, pod_context, seconds_text
from reconciler.podmemory import Cause, PodMemory
from reconciler.ratelimit import NodeBuckets
from reconciler.workqueue import MAX_DEBOUNCE_PERIODS, DelayQueue, NodeQueue
from reconciler.writer import Writer

log = logging.getLogger(__name__)

# A conflicting writer usually settles within a second; look again soon.
CONFLICT_RETRY_SECONDS: Final = 1.0
# Retries after the API server failed to answer (unreachable, 5xx, 429) back off from this
# up to the cap: short, so limits converge within seconds of the control plane recovering.
TRANSIENT_RETRY_SECONDS: Final = 0.5
TRANSIENT_RETRY_CAP_SECONDS: Final = 5.0
_SUPERSEDED: Final = "superseded"
# A held resize is looked at again this long after its node's reconcile is due.
_AFTER_RECONCILE_SECONDS: Final = 0.05


def retry_transient(queue: NodeQueue, node: str) -> None:
    queue.retry(node, initial=TRANSIENT_RETRY_SECONDS, cap=TRANSIENT_RETRY_CAP_SECONDS)


class Resizer:
    def __init__(
        self,
        *,
        writer: Writer,
        gate: WriteGate,
        memory: PodMemory,
        buckets: NodeBuckets,
        metrics: ReconcilerMetrics,
        explanations: Explanations,
        nodes: NodeQueue,
        activity: Activity,
        clock: Clock,
    ) -> None:
        self._writer = writer
        self._gate = gate
        self._memory = memory
        self._buckets = buckets
        self._metrics = metrics
        self._explanations = explanations
        self._nodes = nodes
        self._activity = activity
        self._clock = clock
        # The latest plan of each pod not sent yet, and the pods due at their node's pace.
        self._plans: dict[str, ResizePlan] = {}
        self._due = DelayQueue(clock=clock)
        self._per_node: Counter[str] = Counter()
        activity.watch(self.busy)

    def plan(self, plan: ResizePlan) -> None:
        """Send `plan` when the rate limiters allow, replacing one still waiting."""
        key = plan.pod.key
        previous = self._plans.get(key)
        self._plans[key] = plan
        plan.round.add()
        if previous is not None:
            previous.round.done(self._clock())
            self._per_node[previous.pod.node_name] -= 1
        elif not self._due.active(key):
            self._due.add(key, delay=self._buckets.for_node(plan.pod.node_name).reserve())
        self._per_node[plan.pod.node_name] += 1
        self._explanations.drop_annotation(key)
        self._activity.worked()

    def drop(self, key: str) -> None:
        """The latest computation needs no resize: call off one still waiting."""
        plan = self._plans.pop(key, None)
        if plan is not None:
            self._due.discard(key)
            plan.round.done(self._clock())
            self._per_node[plan.pod.node_name] -= 1
            self._activity.check()

    def resizing(self, node: str) -> bool:
        """Whether resizes planned for the node's pods are still waiting or in flight."""
        return self._per_node[node] > 0

    def forget_node(self, node: str) -> None:
        self._buckets.forget(node)
        self._per_node.pop(node, None)

    def clear(self) -> None:
        """Call off everything not yet sent (leadership ended)."""
        now = self._clock()
        for key, plan in self._plans.items():
            plan.round.done(now)
            self._due.discard(key)
        self._plans.clear()
        self._per_node.clear()
        self._activity.check()

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
        if plan is None or not self._gate.bookings_moved(plan.pod.node_name, plan.bookings):
            return None
        due = self._nodes.debouncing(plan.pod.node_name)
        cap = MAX_DEBOUNCE_PERIODS * plan.settings.debounce_seconds
        if due is None or self._clock() - plan.round.started + due > cap:
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
                    retry_transient(self._nodes, plan.pod.node_name)
            finally:
                self._due.done(key)
            if key in self._plans and key not in self._due:
                # Replaced while in flight: the newer plan goes next, at the node's pace.
                node = self._plans[key].pod.node_name
                self._due.add(key, delay=self._buckets.for_node(node).reserve())
            self._activity.check()

    async def _send(self, key: str) -> None:
        while (plan := self._plans.get(key)) is not None:
            pod = plan.pod
            if self._memory.resize_unseen(
                pod.uid, generation=pod.generation, target_m=plan.target_m
            ):
                # Already applied; the watch has not delivered it yet.
                self._finish(key, plan)
                return
            blocked: str | None = None

            def precondition(plan: ResizePlan = plan) -> bool:
                nonlocal blocked
                if self._plans.get(key) is not plan:
                    blocked = _SUPERSEDED
                else:
                    blocked = self._gate.resize_blocked(
                        plan.pod,
                        settings=plan.settings,
                        limits=plan.containers,
                        target_m=plan.target_m,
                    )
                return blocked is None

            response: ApiResponse | None = None
            try:
                response = await self._writer.resize(
                    pod, plan.containers, target_m=plan.target_m, precondition=precondition
                )
            except Skipped:
                if blocked == _SUPERSEDED:
                    continue
                if blocked != AT_TARGET:
                    # Nothing is lost: a stop lifted, a config or pod change, and every start
                    # of leading each reconcile the node again.
                    log.info(
                        "resize called off: %s",
                        blocked,
                        extra={**pod_context(pod), "target": format_cpu_millis(plan.target_m)},
                    )
            except ApiUnavailable as exc:
                log.warning("resize not sent: %s", exc, extra=pod_context(pod))
                self._metrics.count(Result.ERROR)
                retry_transient(self._nodes, pod.node_name)
            self._finish(key, plan)
            if response is not None:
                self._answered(plan, code=response.code, body=response.json())
            return

    def _answered(self, plan: ResizePlan, *, code: int, body: dict[str, Any]) -> None:
        pod = plan.pod
        answer = classify(code=code, body=body)
        result = result_of(answer)
        if result is not None:
            self._metrics.count(result)
        target = format_cpu_millis(plan.target_m)
        settings = plan.settings
        node = pod.node_name
        message = str(body.get("message") or "")
        context = pod_context(pod)
        if answer is Answer.OK:
            self._nodes.forget(node)
            self._memory.note_resize(pod.uid, generation=pod.generation, target_m=plan.target_m)
            log.info(
                "resized: %s", event_message(plan.explanation), extra={**context, "target": target}
            )
            self._explanations.add(
                pod, annotation=plan.annotation, adjusted=(pod.limit_m, plan.explanation)
            )
        elif answer is Answer.QUOTA_DENIED:
            self._memory.back_off(pod.uid, seconds=settings.backoff_seconds, cause=Cause.QUOTA)
            log.warning("resize refused by ResourceQuota; backing off: %s", message, extra=context)
            self._explanations.add(
                pod,
                warning=(
                    RESIZE_FORBIDDEN,
                    f"resize to {target} refused ({message}); the namespace has a "
                    f"limits.cpu ResourceQuota: quota requests.cpu instead. "
                    f"Not resizing for {seconds_text(settings.backoff_seconds)}",
                ),
            )
            self._nodes.add(node, delay=settings.backoff_seconds)
        elif answer in (Answer.CONFLICT, Answer.STOPPED):
            if answer is Answer.STOPPED:
                # The gate's own check, made by admission while the write was in flight: the
                # change that stopped it wakes the node again when it is undone.
                log.info("resize stopped in flight: %s", message, extra=context)
            self._nodes.add(node, delay=CONFLICT_RETRY_SECONDS)
        elif answer is Answer.TRANSIENT:
            log.warning("resize failed (HTTP %s): %s", code, message, extra=context)
            retry_transient(self._nodes, node)
        elif answer is Answer.REJECTED:
            # A refusal that waiting will not fix: the eligibility gates and the QoS guard
            # exist so that this never happens. The pod is left alone for the back-off
            # period, or until its node's settings change.
            log.error(
                "resize rejected (HTTP %s), not retrying for %s; this is a bug in Headroom: %s",
                code,
                seconds_text(settings.backoff_seconds),
                message,
                extra={**context, "target": target},
            )
            self._memory.back_off(
                pod.uid, seconds=settings.backoff_seconds, cause=Cause.REJECTED, settings=settings
            )
            self._nodes.add(node, delay=settings.backoff_seconds)

    def _finish(self, key: str, plan: ResizePlan) -> None:
        if self._plans.get(key) is plan:
            del self._plans[key]
            plan.round.done(self._clock())
            self._per_node[plan.pod.node_name] -= 1
