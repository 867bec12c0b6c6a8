"""The explanation lane: status annotations and events, coalesced per pod, on their own budget.

Explanations follow the resizes they explain and never delay one: they spend the
explanation budget (`rateLimits.explanationQPS`/`explanationBurst`), not the resizes'.
They are coalesced per pod: a pod's annotation is written once with its latest text, and
limit changes not yet announced are announced by one `CPULimitAdjusted` event that spans
them, so a pod changed twice in one wave gets one annotation and one event. Warnings
(`ResizeInfeasible`, `ResizeForbidden`, `InvalidMaxCPU`) are written once per reason.

An annotation waits while its node is still settling (a reconcile due within the debounce's
cap, resizes waiting): it would be out of date at once, and the node's next reconcile plans
the settled one. A retry after a back-off, minutes away, does not count.
Every write is checked by the write gate right before it is sent.
"""

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus

from app.core.explain import Explanation, event_message
from app.core.pods import PodInfo
from app.io.http import ApiUnavailable, Skipped
from reconciler.bodies import EventReason
from reconciler.gate import Outlet
from reconciler.plan import pod_context
from reconciler.podmemory import PodMemory
from reconciler.requeue import UNAVAILABLE, Outcome
from reconciler.workqueue import DelayQueue
from reconciler.writer import annotation_write

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Adjusted:
    """A CPULimitAdjusted event not yet written: from the limit before the first change it
    spans, explained by the latest change."""

    from_m: int
    explanation: Explanation

    def message(self) -> str:
        return event_message(dataclasses.replace(self.explanation, current_m=self.from_m))


@dataclass(slots=True)
class _Pending:
    pod: PodInfo
    annotation: str | None = None
    adjusted: Adjusted | None = None
    # Warning events by reason, one each.
    warnings: dict[str, str] = field(default_factory=dict)

    def empty(self) -> bool:
        return self.annotation is None and self.adjusted is None and not self.warnings


class _Queued(Mapping[str, str]):
    def __init__(self, pending: dict[str, _Pending]) -> None:
        self._pending = pending

    def __getitem__(self, key: str) -> str:
        annotation = self._pending[key].annotation
        if annotation is None:
            raise KeyError(key)
        return annotation

    def __iter__(self) -> Iterator[str]:
        return (key for key, pending in self._pending.items() if pending.annotation is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(eq=False, kw_only=True, slots=True)
class Explanations:
    """The explanation lane: each pod's pending annotation and events, written in turn."""

    outlet: Outlet
    memory: PodMemory
    settling: Callable[[str], bool]
    report: Callable[[str, Outcome], None]
    _pending: dict[str, _Pending] = field(default_factory=dict, init=False)
    # Pods in line, in order; a pod is written by one worker at a time, and one queued
    # again while being written goes back in line when that write is done.
    _line: DelayQueue = field(default_factory=DelayQueue, init=False)
    _writing: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.outlet.activity.watch(self.busy)

    def add(
        self,
        pod: PodInfo,
        *,
        annotation: str | None = None,
        adjusted: tuple[int, Explanation] | None = None,
        warning: tuple[str, str] | None = None,
    ) -> None:
        """Queue an annotation or an event about `pod`."""
        key = pod.key
        pending = self._pending.get(key)
        if pending is None or pending.pod.uid != pod.uid:
            pending = _Pending(pod=pod)
            self._line.add(key)
            self._pending[key] = pending
        pending.pod = pod
        if annotation is not None:
            pending.annotation = annotation
        if adjusted is not None:
            from_m, explanation = adjusted
            if pending.adjusted is not None:
                from_m = pending.adjusted.from_m
            pending.adjusted = Adjusted(from_m=from_m, explanation=explanation)
        if warning is not None:
            reason, message = warning
            pending.warnings[reason] = message
        self.outlet.activity.worked()

    @property
    def queued(self) -> Mapping[str, str]:
        """The annotations queued and not yet written, by pod key (a live view)."""
        return _Queued(self._pending)

    def drop_annotation(self, key: str) -> None:
        """A resize was planned: its own annotation will follow; one still waiting is
        obsolete."""
        pending = self._pending.get(key)
        if pending is not None:
            pending.annotation = None

    def clear(self) -> None:
        for key in self._pending:
            self._line.discard(key)
        self._pending.clear()

    def busy(self) -> bool:
        return bool(self._pending or self._writing)

    async def run(self, *, workers: int) -> None:
        await asyncio.gather(*(self._worker() for _ in range(workers)))

    async def _worker(self) -> None:
        while (key := await self._line.get()) is not None:
            if key not in self._pending:
                # Nothing left to write about it (called off, or failed).
                self._line.done(key)
                continue
            self._writing.add(key)
            try:
                await self._write_next(key)
            except Exception:  # one pod's bug must not stop the worker or leave it queued
                log.exception("explanation failed unexpectedly", extra={"pod": key})
                pending = self._pending.pop(key, None)
                if pending is not None:
                    self.report(pending.pod.node_name, UNAVAILABLE)
            finally:
                self._writing.discard(key)
                self._line.done(key)
            if key in self._pending:
                # More to write about this pod: back in line, after the others.
                self._line.add(key)
            self.outlet.activity.check()

    async def _write_next(self, key: str) -> None:
        """Write one of the pod's pending explanations."""
        pending = self._pending[key]
        if pending.empty():
            del self._pending[key]
            return
        pod = pending.pod
        blocked: str | None = None

        def precondition(pod: PodInfo = pod) -> bool:
            nonlocal blocked
            blocked = self.outlet.gate.explanation_blocked(pod)
            return blocked is None

        try:
            await self._write_one(pending, precondition=precondition)
        except Skipped:
            self._pending.pop(key, None)
            log.debug("explanations called off: %s", blocked, extra=pod_context(pod))
        except ApiUnavailable as exc:
            log.warning("explanation not written: %s", exc, extra=pod_context(pod))
            self.report(pod.node_name, UNAVAILABLE)
        if pending.empty() and self._pending.get(key) is pending:
            del self._pending[key]

    async def _write_one(self, pending: _Pending, *, precondition: Callable[[], bool]) -> None:
        pod = pending.pod
        if pending.annotation is not None:
            text, pending.annotation = pending.annotation, None
            if self.settling(pod.node_name):
                # The node is about to be recomputed or resized further: this annotation
                # would be out of date at once. The node's next reconcile plans the settled one.
                return
            # Noted before sending: the watch may deliver the change before the answer.
            self.memory.note_annotation(pod.uid, text)
            try:
                response = await self.outlet.writer.send(
                    annotation_write(pod, text), precondition=precondition
                )
            except (Skipped, ApiUnavailable):
                self.memory.forget_annotation(pod.uid, text)
                raise
            if not response.ok:
                self.memory.forget_annotation(pod.uid, text)
                if response.code != HTTPStatus.NOT_FOUND:
                    log.warning(
                        "annotation not written (HTTP %s): %s",
                        response.code,
                        response.message,
                        extra=pod_context(pod),
                    )
                    self.report(pod.node_name, UNAVAILABLE)
            return
        if pending.adjusted is not None:
            adjusted, pending.adjusted = pending.adjusted, None
            dry_run = adjusted.explanation.dry_run

            def still_wanted() -> bool:
                # A "would" event is stale once enforcing (the real change gets its own).
                return precondition() and (
                    not dry_run or self.outlet.gate.dry_run_now(pod.node_name)
                )

            await self.outlet.writer.event(
                pod,
                reason=EventReason.CPU_LIMIT_ADJUSTED,
                message=adjusted.message(),
                warning=False,
                precondition=still_wanted,
            )
            return
        reason, message = pending.warnings.popitem()
        await self.outlet.writer.event(
            pod, reason=reason, message=message, warning=True, precondition=precondition
        )
