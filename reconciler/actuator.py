"""Carrying out what reconciles decide: resizes first, their explanations after.

A reconcile only plans. A fixed pool of workers per lane sends what is planned; a pod
never has two requests in flight, and a newer plan for the same pod replaces one still
waiting, so a pod whose node changes twice while its resize waits for the rate limiters
is resized once, to the latest target. Resizes are paced per node
(`perNodePatchesPerSecond`) and spend tokens of the primary lane of the client's write
budget; the annotation and the CPULimitAdjusted event that explain an applied resize
follow on the secondary lane, which never delays a pending resize. Explanations are
coalesced per pod: a pod's annotation is written once with its latest text, and limit
changes not yet announced are announced by one event that spans them.

Every request is checked by the write gate right before it is sent, so nothing planned
before a stop button was pressed goes out after the stop has been observed.
"""

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final

from app.core.backoff import ExponentialBackoff
from app.core.config import Settings
from app.core.explain import Explanation, event_message
from app.core.pods import PodInfo
from app.core.policy import ContainerLimit
from app.core.quantity import format_cpu_millis
from app.io.http import ApiUnavailable, Skipped
from reconciler.gate import AT_TARGET, WriteGate
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Result, resize_result
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import NodeBuckets
from reconciler.writer import CPU_LIMIT_ADJUSTED, RESIZE_FORBIDDEN, Writer, pod_context

log = logging.getLogger(__name__)

# A conflicting writer usually settles within a second; look again soon.
CONFLICT_RETRY_SECONDS: Final = 1.0
# Retries after the API server failed to answer (unreachable, 5xx, 429) back off up to
# this: short, so limits converge within seconds of the control plane recovering.
TRANSIENT_RETRY_CAP_SECONDS: Final = 5.0
_SUPERSEDED: Final = "superseded"
# Workers per lane: enough to keep the default write budget busy while many wait for a slow
# API server's answers, not so many that they crowd out the lease renewals.
RESIZE_WORKERS: Final = 32
EXPLAIN_WORKERS: Final = 8


class Round:
    """One reconcile of one node, observed in the duration histogram once every resize it
    planned has been answered, called off or replaced."""

    __slots__ = ("_metrics", "_pending", "_started")

    def __init__(self, *, metrics: ReconcilerMetrics, started: float) -> None:
        self._metrics = metrics
        self._started = started
        self._pending = 1

    def add(self) -> None:
        self._pending += 1

    def done(self, now: float) -> None:
        self._pending -= 1
        if self._pending == 0:
            self._metrics.reconcile_duration.observe(max(0.0, now - self._started))


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


@dataclass(slots=True)
class _Adjusted:
    """A CPULimitAdjusted event not yet written: from the limit before the first change it
    spans, explained by the latest change."""

    from_m: int
    explanation: Explanation

    def message(self) -> str:
        return event_message(dataclasses.replace(self.explanation, current_m=self.from_m))


@dataclass(slots=True)
class _Explanations:
    pod: PodInfo
    annotation: str | None = None
    adjusted: _Adjusted | None = None
    # Warning events by reason, one each.
    warnings: dict[str, str] = field(default_factory=dict)

    def empty(self) -> bool:
        return self.annotation is None and self.adjusted is None and not self.warnings


class Actuator:
    def __init__(
        self,
        *,
        writer: Writer,
        gate: WriteGate,
        memory: PodMemory,
        buckets: NodeBuckets,
        metrics: ReconcilerMetrics,
        requeue: Callable[[str, float], None],
        settling: Callable[[str], bool],
        clock: Callable[[], float],
    ) -> None:
        self._writer = writer
        self._gate = gate
        self._memory = memory
        self._buckets = buckets
        self._metrics = metrics
        self._requeue = requeue
        self._settling = settling
        self._clock = clock
        # The latest resize plan of each pod not sent yet, and when each may go: a pod's
        # first plan reserves its slot of the node's pace, a plan replacing it keeps it.
        self._resizes: dict[str, ResizePlan] = {}
        self._resizing: Counter[str] = Counter()
        self._due: list[tuple[float, int, str]] = []
        self._order = itertools.count()
        self._resizes_ready = asyncio.Event()
        # Explanations waiting, and the pods in line for the secondary lane.
        self._explanations: dict[str, _Explanations] = {}
        self._explain_line: deque[str] = deque()
        self._explanations_ready = asyncio.Event()
        self._in_flight: set[str] = set()
        self._explaining: set[str] = set()
        self._idle = asyncio.Event()
        self._worked = asyncio.Event()
        self._failures: dict[str, ExponentialBackoff] = {}

    # What reconciles call.

    def resize(self, plan: ResizePlan) -> None:
        """Send `plan` when the rate limiters allow, replacing one still waiting."""
        key = plan.pod.key
        previous = self._resizes.get(key)
        self._resizes[key] = plan
        plan.round.add()
        if previous is not None:
            previous.round.done(self._clock())
            self._resizing[previous.pod.node_name] -= 1
        elif key not in self._in_flight:
            self._line_up(key, delay=self._buckets.for_node(plan.pod.node_name).reserve())
        self._resizing[plan.pod.node_name] += 1
        # Its annotation follows the resize; an older one still waiting is obsolete.
        pending = self._explanations.get(key)
        if pending is not None:
            pending.annotation = None

    def drop_resize(self, key: str) -> None:
        """The latest computation needs no resize: call off one still waiting."""
        plan = self._resizes.pop(key, None)
        if plan is not None:
            plan.round.done(self._clock())
            self._resizing[plan.pod.node_name] -= 1
            self._check_idle()

    def resizing(self, node: str) -> bool:
        """Whether resizes planned for the node's pods are still waiting or in flight."""
        return self._resizing[node] > 0

    def explain(
        self,
        pod: PodInfo,
        *,
        annotation: str | None = None,
        adjusted: tuple[int, Explanation] | None = None,
        warning: tuple[str, str] | None = None,
    ) -> None:
        """Queue an annotation or an event about `pod` on the secondary lane."""
        key = pod.key
        pending = self._explanations.get(key)
        if pending is None or pending.pod.uid != pod.uid:
            pending = _Explanations(pod=pod)
            if key not in self._explanations and key not in self._explaining:
                self._explain_line.append(key)
                self._explanations_ready.set()
            self._explanations[key] = pending
        pending.pod = pod
        if annotation is not None:
            pending.annotation = annotation
        if adjusted is not None:
            from_m, explanation = adjusted
            if pending.adjusted is not None:
                from_m = pending.adjusted.from_m
            pending.adjusted = _Adjusted(from_m=from_m, explanation=explanation)
        if warning is not None:
            reason, message = warning
            pending.warnings[reason] = message
        self._mark_busy()

    def pending_annotation(self, key: str) -> str | None:
        """The annotation queued for this pod and not yet written, if any."""
        pending = self._explanations.get(key)
        return None if pending is None else pending.annotation

    def clear(self) -> None:
        """Call off everything not yet sent (leadership ended)."""
        now = self._clock()
        for plan in self._resizes.values():
            plan.round.done(now)
        self._resizes.clear()
        self._resizing.clear()
        self._due.clear()
        self._explanations.clear()
        self._explain_line.clear()
        self._failures.clear()
        self._check_idle()

    def forget_node(self, node: str) -> None:
        self._failures.pop(node, None)

    # Running.

    async def run(self) -> None:
        """The workers of both lanes, until cancelled."""
        await asyncio.gather(
            *(self._resize_worker() for _ in range(RESIZE_WORKERS)),
            *(self._explain_worker() for _ in range(EXPLAIN_WORKERS)),
        )

    async def settle(self) -> None:
        """Wait until every planned write has been sent or called off."""
        self._check_idle()
        await self._idle.wait()

    async def wave_settled(self, *, quiet: float) -> None:
        """Return once writes have been planned, then none has been for `quiet` seconds."""
        await self._worked.wait()
        while True:
            self._worked.clear()
            await self.settle()
            try:
                await asyncio.wait_for(self._worked.wait(), timeout=quiet)
            except TimeoutError:
                return

    def _busy(self) -> bool:
        return bool(self._resizes or self._in_flight or self._explanations or self._explaining)

    def _check_idle(self) -> None:
        if self._busy():
            self._mark_busy()
        else:
            self._idle.set()

    def _mark_busy(self) -> None:
        self._idle.clear()
        self._worked.set()

    # Resizes.

    def _line_up(self, key: str, *, delay: float) -> None:
        heapq.heappush(self._due, (self._clock() + delay, next(self._order), key))
        self._resizes_ready.set()
        self._mark_busy()

    async def _next_resize(self) -> str:
        """The next pod whose resize may go (its node's pace allows), waiting for one."""
        while True:
            while self._due and (
                self._due[0][2] not in self._resizes or self._due[0][2] in self._in_flight
            ):
                # Called off, or in flight (lined up again once answered).
                heapq.heappop(self._due)
            if self._due:
                due, _, key = self._due[0]
                wait = due - self._clock()
                if wait <= 0:
                    heapq.heappop(self._due)
                    return key
            else:
                wait = None
            self._resizes_ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._resizes_ready.wait(), wait)

    async def _resize_worker(self) -> None:
        while True:
            key = await self._next_resize()
            self._in_flight.add(key)
            try:
                await self._send_resize(key)
            except Exception:  # one pod's bug must not stop the worker or leave it planned
                log.exception("resize failed unexpectedly", extra={"pod": key})
                plan = self._resizes.get(key)
                if plan is not None:
                    self._finish(key, plan)
                    self._retry_transient(plan.pod.node_name)
            finally:
                self._in_flight.discard(key)
            if key in self._resizes:
                # Replaced while in flight: the newer plan goes next, at the node's pace.
                node = self._resizes[key].pod.node_name
                self._line_up(key, delay=self._buckets.for_node(node).reserve())
            self._check_idle()

    async def _send_resize(self, key: str) -> None:
        while (plan := self._resizes.get(key)) is not None:
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
                if self._resizes.get(key) is not plan:
                    blocked = _SUPERSEDED
                else:
                    blocked = self._gate.resize_blocked(
                        plan.pod,
                        settings=plan.settings,
                        limits=plan.containers,
                        target_m=plan.target_m,
                    )
                return blocked is None

            try:
                response = await self._writer.resize(
                    pod, plan.containers, target_m=plan.target_m, precondition=precondition
                )
            except Skipped:
                if blocked == _SUPERSEDED:
                    continue
                if blocked != AT_TARGET:
                    self._called_off(plan, blocked)
                self._finish(key, plan)
                return
            except ApiUnavailable as exc:
                log.warning("resize not sent: %s", exc, extra=pod_context(pod))
                self._metrics.count(Result.ERROR)
                self._retry_transient(pod.node_name)
                self._finish(key, plan)
                return
            self._finish(key, plan)
            self._resize_answered(plan, code=response.code, body=response.json())
            return

    def _resize_answered(self, plan: ResizePlan, *, code: int, body: dict[str, Any]) -> None:
        pod = plan.pod
        outcome = resize_result(code=code, body=body)
        if outcome is None:
            return
        self._metrics.count(outcome)
        target = format_cpu_millis(plan.target_m)
        settings = plan.settings
        if outcome is Result.OK:
            self._failures.pop(pod.node_name, None)
            self._memory.note_resize(pod.uid, generation=pod.generation, target_m=plan.target_m)
            message = event_message(plan.explanation)
            log.info("resized: %s", message, extra={**pod_context(pod), "target": target})
            self.explain(pod, annotation=plan.annotation, adjusted=(pod.limit_m, plan.explanation))
            return
        message = str(body.get("message") or "")
        if outcome is Result.QUOTA_DENIED:
            self._memory.back_off(pod.uid, seconds=settings.backoff_seconds)
            log.warning(
                "resize refused by ResourceQuota; backing off: %s", message, extra=pod_context(pod)
            )
            self.explain(
                pod,
                warning=(
                    RESIZE_FORBIDDEN,
                    f"resize to {target} refused ({message}); the namespace has a "
                    f"limits.cpu ResourceQuota: quota requests.cpu instead. "
                    f"Not resizing for {seconds_text(settings.backoff_seconds)}",
                ),
            )
            self._requeue(pod.node_name, settings.backoff_seconds)
            return
        if outcome is Result.CONFLICT:
            self._requeue(pod.node_name, CONFLICT_RETRY_SECONDS)
            return
        if _transient(code):
            log.warning("resize failed (HTTP %s): %s", code, message, extra=pod_context(pod))
            self._retry_transient(pod.node_name)
            return
        # A refusal that waiting will not fix: the eligibility gates and the QoS guard exist
        # so that this never happens. The pod is left alone for the back-off period.
        log.error(
            "resize rejected (HTTP %s), not retrying for %s; this is a bug in Headroom: %s",
            code,
            seconds_text(settings.backoff_seconds),
            message,
            extra={**pod_context(pod), "target": target},
        )
        self._memory.back_off(pod.uid, seconds=settings.backoff_seconds)
        self._requeue(pod.node_name, settings.backoff_seconds)

    def _finish(self, key: str, plan: ResizePlan) -> None:
        if self._resizes.get(key) is plan:
            del self._resizes[key]
            plan.round.done(self._clock())
            self._resizing[plan.pod.node_name] -= 1

    # Explanations.

    async def _next_explanation(self) -> str:
        while True:
            while self._explain_line:
                key = self._explain_line.popleft()
                if key in self._explanations and key not in self._explaining:
                    return key
            self._explanations_ready.clear()
            await self._explanations_ready.wait()

    async def _explain_worker(self) -> None:
        while True:
            key = await self._next_explanation()
            self._explaining.add(key)
            try:
                await self._explain_one(key)
            except Exception:  # one pod's bug must not stop the worker or leave it queued
                log.exception("explanation failed unexpectedly", extra={"pod": key})
                pending = self._explanations.pop(key, None)
                if pending is not None:
                    self._retry_transient(pending.pod.node_name)
            finally:
                self._explaining.discard(key)
            if key in self._explanations:
                # More to write about this pod: back in line, after the others.
                self._explain_line.append(key)
                self._explanations_ready.set()
            self._check_idle()

    async def _explain_one(self, key: str) -> None:
        """Write one of the pod's pending explanations."""
        pending = self._explanations[key]
        if pending.empty():
            del self._explanations[key]
            return
        pod = pending.pod
        blocked: str | None = None

        def precondition(pod: PodInfo = pod) -> bool:
            nonlocal blocked
            blocked = self._gate.explanation_blocked(pod)
            return blocked is None

        try:
            await self._write_one(pending, precondition=precondition)
        except Skipped:
            self._called_off_explanations(key, pod, blocked)
        except ApiUnavailable as exc:
            log.warning("explanation not written: %s", exc, extra=pod_context(pod))
            self._retry_transient(pod.node_name)
        if pending.empty() and self._explanations.get(key) is pending:
            del self._explanations[key]

    async def _write_one(self, pending: _Explanations, *, precondition: Callable[[], bool]) -> None:
        pod = pending.pod
        if pending.annotation is not None and self._settling(pod.node_name):
            # The node is about to be recomputed or resized further: this annotation would
            # be out of date at once. The node's next reconcile plans the settled one.
            pending.annotation = None
            return
        if pending.annotation is not None:
            text, pending.annotation = pending.annotation, None
            # Noted before sending: the watch may deliver the change before the answer.
            self._memory.note_annotation(pod.uid, text)
            try:
                response = await self._writer.annotate(pod, text, precondition=precondition)
            except (Skipped, ApiUnavailable):
                self._memory.forget_annotation(pod.uid, text)
                raise
            if not response.ok:
                self._memory.forget_annotation(pod.uid, text)
            if not response.ok and response.code != HTTPStatus.NOT_FOUND:
                log.warning(
                    "annotation not written (HTTP %s): %s",
                    response.code,
                    response.message,
                    extra=pod_context(pod),
                )
                self._retry_transient(pod.node_name)
            return
        if pending.adjusted is not None:
            adjusted, pending.adjusted = pending.adjusted, None
            dry_run = adjusted.explanation.dry_run

            def still_wanted() -> bool:
                # A "would" event is stale once enforcing (the real change gets its own).
                return precondition() and (not dry_run or self._gate.dry_run_now(pod.node_name))

            await self._writer.event(
                pod,
                reason=CPU_LIMIT_ADJUSTED,
                message=adjusted.message(),
                warning=False,
                precondition=still_wanted,
            )
            return
        reason, message = pending.warnings.popitem()
        await self._writer.event(
            pod, reason=reason, message=message, warning=True, precondition=precondition
        )

    # Shared.

    def _called_off(self, plan: ResizePlan, blocked: str | None) -> None:
        # Nothing is lost: a stop lifted, a config or pod change, and every start of
        # leading each reconcile the node again.
        log.info(
            "resize called off: %s",
            blocked,
            extra={**pod_context(plan.pod), "target": format_cpu_millis(plan.target_m)},
        )

    def _called_off_explanations(self, key: str, pod: PodInfo, blocked: str | None) -> None:
        self._explanations.pop(key, None)
        log.debug("explanations called off: %s", blocked, extra=pod_context(pod))

    def _retry_transient(self, node: str) -> None:
        backoff = self._failures.setdefault(
            node, ExponentialBackoff(initial=0.5, cap=TRANSIENT_RETRY_CAP_SECONDS)
        )
        self._requeue(node, backoff.next_delay())


def _transient(code: int) -> bool:
    return code == HTTPStatus.TOO_MANY_REQUESTS or code >= HTTPStatus.INTERNAL_SERVER_ERROR


def seconds_text(seconds: float) -> str:
    return f"{seconds:g}s"
