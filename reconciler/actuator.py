"""Carrying out what reconciles plan: the resize lane first, the explanation lane after.

A reconcile hands its node's plan over in one `submit`. The resize lane
(`reconciler.resizer`) sends resizes at each node's pace on the resize budget; the
explanation lane (`reconciler.explanations`) writes the annotations and events that
explain them, coalesced per pod, on a budget of its own; `reconciler.activity` says when
both are idle and when a wave is over.
"""

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from app.core.config import Settings
from reconciler.activity import Activity
from reconciler.explanations import Explanations
from reconciler.gate import Outlet
from reconciler.plan import NodePlan, Recall
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import Limiters
from reconciler.resizer import Resizer

# Workers per lane: enough to keep the default budgets busy while many wait for a slow
# API server's answers, not so many that they crowd out the lease renewals.
RESIZE_WORKERS: Final = 32
EXPLAIN_WORKERS: Final = 16


@dataclass(eq=False, kw_only=True, slots=True)
class Actuator:
    """Carries out what reconciles plan, through the two writing lanes, and owns what
    they remember about pods."""

    memory: PodMemory
    explanations: Explanations
    resizer: Resizer
    outlet: Outlet
    limiters: Limiters

    def retune(self, settings: Settings) -> None:
        """The config changed: pace the writes as it now says."""
        self.limiters.retune(settings)

    @property
    def activity(self) -> Activity:
        return self.outlet.activity

    def may_write(self) -> bool:
        return self.outlet.gate.may_write()

    def recall(self) -> Recall:
        return self.memory.recall(self.explanations.queued)

    def submit(self, plan: NodePlan) -> None:
        for uid, seconds in plan.backoffs:
            self.memory.back_off(uid, seconds=seconds)
        for uid, topic, marker in plan.reports:
            self.memory.note_report(uid, topic, marker=marker)
        for key in plan.unplanned:
            self.resizer.drop(key)
        for resize in plan.resizes:
            # The resize's own annotation follows it; one still waiting is obsolete.
            self.explanations.drop_annotation(resize.pod.key)
            self.resizer.plan(resize)
        for item in plan.explanations:
            self.explanations.add(
                item.pod, annotation=item.annotation, adjusted=item.adjusted, warning=item.warning
            )

    def annotation_seen(self, uid: str, text: str | None) -> bool:
        """The watch delivered a pod's status annotation: whether it is Headroom's own."""
        return self.memory.annotation_seen(uid, text)

    def retain(self, uids: Iterable[str]) -> None:
        """Forget what is remembered about pods not in ``uids``."""
        self.memory.retain(uids)

    def forget_node(self, node: str) -> None:
        self.resizer.forget_node(node)

    def clear(self) -> None:
        """Call off everything not yet sent (leadership ended)."""
        self.resizer.clear()
        self.explanations.clear()
        self.activity.check()

    async def run(self) -> None:
        """The workers of both lanes, until cancelled."""
        await asyncio.gather(
            self.resizer.run(workers=RESIZE_WORKERS),
            self.explanations.run(workers=EXPLAIN_WORKERS),
        )
