"""What each answer to a resize leads to: the count, what is remembered, the explanation,
and the `Outcome` its node reports (`reconciler.requeue`).

The resize lane sends and hands every answer here, so it calls nothing of the explanation
lane or the queue itself.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.explain import event_message
from app.core.quantity import format_cpu_millis
from reconciler.bodies import EventReason
from reconciler.explanations import Explanations
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Answer, Result, classify, result_of
from reconciler.plan import ResizePlan, pod_context, resize_unseen, seconds_text
from reconciler.podmemory import PodMemory
from reconciler.requeue import APPLIED, CONFLICT, UNAVAILABLE, Kind, Outcome

log = logging.getLogger(__name__)


@dataclass(eq=False, kw_only=True, slots=True)
class ResizeAnswers:
    """Acts on each resize's answer: counts, remembers, explains it and reports the
    node's outcome."""

    memory: PodMemory
    explanations: Explanations
    metrics: ReconcilerMetrics
    report: Callable[[str, Outcome], None]

    def applied_unseen(self, plan: ResizePlan) -> bool:
        """Whether this resize was applied already and the watch has not shown it yet."""
        return resize_unseen(self.memory.resized, plan.pod, plan.target_m)

    def unsent(self, plan: ResizePlan, reason: str) -> None:
        """The API server could not be reached, or the lane failed: try again soon."""
        log.warning("resize not sent: %s", reason, extra=pod_context(plan.pod))
        self.metrics.count(Result.ERROR)
        self.report(plan.pod.node_name, UNAVAILABLE)

    def answered(self, plan: ResizePlan, *, code: int, body: dict[str, Any]) -> None:
        pod = plan.pod
        answer = classify(code=code, body=body)
        result = result_of(answer)
        if result is not None:
            self.metrics.count(result)
        target = format_cpu_millis(plan.target_m)
        backoff = plan.settings.backoff_seconds
        message = str(body.get("message") or "")
        context = pod_context(pod)
        outcome: Outcome | None = None
        if answer is Answer.OK:
            outcome = APPLIED
            self.memory.note_resize(pod.uid, generation=pod.generation, target_m=plan.target_m)
            log.info(
                "resized: %s", event_message(plan.explanation), extra={**context, "target": target}
            )
            self.explanations.add(
                pod, annotation=plan.annotation, adjusted=(pod.facts.limit_m, plan.explanation)
            )
        elif answer is Answer.QUOTA_DENIED:
            outcome = Outcome(Kind.BACKED_OFF, backoff)
            self.memory.back_off(pod.uid, seconds=backoff)
            log.warning("resize refused by ResourceQuota; backing off: %s", message, extra=context)
            self.explanations.add(
                pod,
                warning=(
                    EventReason.RESIZE_FORBIDDEN,
                    f"resize to {target} refused ({message}); the namespace has a "
                    f"limits.cpu ResourceQuota: quota requests.cpu instead. "
                    f"Not resizing for {seconds_text(backoff)}",
                ),
            )
        elif answer in (Answer.CONFLICT, Answer.STOPPED):
            outcome = CONFLICT
            if answer is Answer.STOPPED:
                # The gate's own check, made by admission while the write was in flight: the
                # change that stopped it wakes the node again when it is undone.
                log.info("resize stopped in flight: %s", message, extra=context)
        elif answer is Answer.TRANSIENT:
            outcome = UNAVAILABLE
            log.warning("resize failed (HTTP %s): %s", code, message, extra=context)
        elif answer is Answer.REJECTED:
            # A refusal that waiting will not fix: the eligibility gates and the QoS guard
            # exist so that this never happens. The pod is left alone for the back-off
            # period, or until its node's settings change.
            outcome = Outcome(Kind.BACKED_OFF, backoff)
            log.error(
                "resize rejected (HTTP %s), not retrying for %s; this is a bug in Headroom: %s",
                code,
                seconds_text(backoff),
                message,
                extra={**context, "target": target},
            )
            self.memory.back_off(pod.uid, seconds=backoff, settings=plan.settings)
        if outcome is not None:
            self.report(pod.node_name, outcome)
