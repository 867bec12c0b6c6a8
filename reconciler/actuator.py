"""Carrying out what reconciles plan: the resize lane first, the explanation lane after.

A reconcile hands its node's plan over in one `submit`. The resize lane
(`reconciler.resizer`) sends resizes at each node's pace on the resize budget; the
explanation lane (`reconciler.explanations`) writes the annotations and events that
explain them, coalesced per pod, on a budget of its own; `reconciler.activity` says when
both are idle and when a wave is over.
"""

import asyncio
from collections.abc import Callable
from typing import Final

from app.io.clock import Clock
from reconciler.activity import Activity
from reconciler.explanations import Explanations
from reconciler.gate import WriteGate
from reconciler.metrics import ReconcilerMetrics
from reconciler.plan import NodePlan
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import NodeBuckets
from reconciler.resizer import Resizer, retry_transient
from reconciler.workqueue import NodeQueue
from reconciler.writer import Writer

# Workers per lane: enough to keep the default budgets busy while many wait for a slow
# API server's answers, not so many that they crowd out the lease renewals.
RESIZE_WORKERS: Final = 32
EXPLAIN_WORKERS: Final = 16


class Actuator:
    def __init__(
        self,
        *,
        writer: Writer,
        gate: WriteGate,
        memory: PodMemory,
        buckets: NodeBuckets,
        metrics: ReconcilerMetrics,
        nodes: NodeQueue,
        settling: Callable[[str], bool],
        clock: Clock,
    ) -> None:
        self.activity = Activity(clock=clock)
        self.explanations = Explanations(
            writer=writer,
            gate=gate,
            memory=memory,
            activity=self.activity,
            settling=settling,
            retry=lambda node: retry_transient(nodes, node),
        )
        self.resizer = Resizer(
            writer=writer,
            gate=gate,
            memory=memory,
            buckets=buckets,
            metrics=metrics,
            explanations=self.explanations,
            nodes=nodes,
            activity=self.activity,
            clock=clock,
        )

    def submit(self, plan: NodePlan) -> None:
        for key in plan.unplanned:
            self.resizer.drop(key)
        for resize in plan.resizes:
            self.resizer.plan(resize)
        for item in plan.explanations:
            self.explanations.add(
                item.pod, annotation=item.annotation, adjusted=item.adjusted, warning=item.warning
            )

    def pending_annotation(self, key: str) -> str | None:
        return self.explanations.annotation(key)

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
