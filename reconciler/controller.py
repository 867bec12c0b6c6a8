"""The reconciler's moving parts wired together: cache wake-ups, queue, worker, status.

One event loop runs everything: list/watch tasks feed the cache, the cache wakes nodes
in the queue, a worker reconciles nodes one at a time (a reconcile is pure computation
and planning), the actuator sends the planned writes as the rate limiters allow, and a
status task keeps the HeadroomConfig status current. The queue alone decides when a node
is looked at again: after a debounce, a back-off ending, or a failure (`retry`). Writes
happen only while `may_write` holds (this replica leads); whatever a closed write gate
cut short is resumed by the full resync that every start of leading does.
"""

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from app.core.cluster import ClusterCache, Unreadable
from app.core.config import DEFAULT_SETTINGS, Settings
from app.core.pods import PodInfo
from app.io.budget import WriteBudget
from app.io.clock import Clock, LoopClock, wait
from app.io.http import Skipped, failure_of
from reconciler.actuator import Actuator
from reconciler.config_status import Summary, desired_status, status_differs
from reconciler.gate import WriteGate
from reconciler.metrics import ReconcilerMetrics
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import NodeBuckets
from reconciler.reconcile import NodeReconciler
from reconciler.workqueue import NodeQueue
from reconciler.writer import Writer

log = logging.getLogger(__name__)

# The status is rewritten promptly after the managed counts change, and at least this
# often otherwise (which also prunes memory of pods that left).
STATUS_INTERVAL_SECONDS: Final = 5.0
# Changes landing together are reported in one write.
STATUS_COALESCE_SECONDS: Final = 0.25
# A reconcile that raised is retried after this long, doubling while it keeps raising.
CRASH_RETRY_SECONDS: Final = 5.0


class Controller:
    def __init__(
        self,
        *,
        queue: NodeQueue,
        writer: Writer,
        metrics: ReconcilerMetrics,
        budget: WriteBudget,
        explanation_budget: WriteBudget | None = None,
        may_write: Callable[[], bool],
        clock: Clock | None = None,
    ) -> None:
        clock = clock if clock is not None else LoopClock()
        self.queue = queue
        self._writer = writer
        self._budget = budget
        self._explanation_budget = explanation_budget
        self._may_write = may_write
        self._clock = clock
        self._memory = PodMemory(clock=clock)
        self._buckets = NodeBuckets(
            rate=float(DEFAULT_SETTINGS.per_node_patches_per_second), clock=clock
        )
        self._last_status: dict[str, object] | None = None
        self._status_due = asyncio.Event()
        self.cache = ClusterCache(listener=self, on_unreadable=_log_unreadable)
        self.actuator = Actuator(
            writer=writer,
            gate=WriteGate(cache=self.cache, may_write=may_write),
            memory=self._memory,
            buckets=self._buckets,
            metrics=metrics,
            nodes=queue,
            settling=self._settling,
            clock=clock,
        )
        self.reconciler = NodeReconciler(
            cache=self.cache,
            executor=self.actuator,
            metrics=metrics,
            memory=self._memory,
            clock=clock,
        )

    # The cache's Listener.

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        if prompt:
            self.queue.add_prompt(node)
        else:
            self.queue.add_debounced(node, period=self.cache.settings.debounce_seconds)

    def node_removed(self, node: str) -> None:
        """Free everything kept per node: its series, pace, failures."""
        self.reconciler.forget_node(node)
        self.queue.forget(node)
        self._status_due.set()

    def settings_changed(self, settings: Settings) -> None:
        self._buckets.reconfigure(rate=float(settings.per_node_patches_per_second))
        self._budget.reconfigure(rate=float(settings.client_qps), burst=settings.client_burst)
        if self._explanation_budget is not None:
            self._explanation_budget.reconfigure(
                rate=float(settings.explanation_qps), burst=settings.explanation_burst
            )
        self._status_due.set()
        config = self.cache.config
        if config.invalid is not None:
            log.error("HeadroomConfig is invalid; limits stay frozen: %s", config.invalid)
        log.info(
            "configuration applied",
            extra={
                "dryRun": settings.dry_run,
                "generation": settings.generation,
                "invalid": config.invalid is not None,
                "present": config.present,
            },
        )

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None:
        log.info(
            "namespace enrolment changed", extra={"namespace": namespace, "enrolled": enrolled}
        )

    def annotation_changed(self, pod: PodInfo) -> None:
        """Someone edited a pod's status annotation: recompute it (an edit of a managed pod
        is then corrected); Headroom's own write coming back is not an edit."""
        if not self._memory.annotation_seen(pod.uid, pod.status_annotation):
            self.queue.add_debounced(pod.node_name, period=self.cache.settings.debounce_seconds)

    # Leadership.

    def start_leading(self) -> None:
        """Look at every node soon, spread over the debounce period (a jittered resync)."""
        window = max(1.0, self.cache.settings.debounce_seconds)
        for node in self.cache.node_names():
            self.queue.add_spread(node, window=window)
        self._status_due.set()

    def stop_leading(self) -> None:
        """Call off unsent writes and drop the per-node series: only the leader's numbers
        describe the cluster."""
        self.actuator.clear()
        self.reconciler.forget_all()
        self.queue.forget_all()

    # Tasks.

    async def work(self) -> None:
        while (node := await self.queue.get()) is not None:
            delay: float | None = None
            managed = self.reconciler.managed_pods, self.reconciler.managed_nodes
            failed = False
            try:
                if self._may_write():
                    delay = self.reconciler.reconcile(node)
            except Exception:  # one node's bug must not stop the others
                log.exception("reconcile failed", extra={"node": node})
                failed = True
            finally:
                self.queue.done(node)
            if failed:
                self.queue.retry(
                    node, initial=CRASH_RETRY_SECONDS, cap=self.cache.settings.backoff_seconds
                )
            elif delay is not None:
                self.queue.add(node, delay=delay)
            if managed != (self.reconciler.managed_pods, self.reconciler.managed_nodes):
                self._status_due.set()
            # A reconcile is pure computation: let the watches and writers in between.
            await asyncio.sleep(0)

    async def report_status(self) -> None:
        while True:
            await wait(self._clock, self._status_due, STATUS_INTERVAL_SECONDS)
            await asyncio.sleep(STATUS_COALESCE_SECONDS)
            self._status_due.clear()
            self.retain_live_pods()
            await self.write_status()

    def retain_live_pods(self) -> None:
        """Forget what is remembered about pods that left the cluster."""
        self._memory.retain(pod.uid for pod in self.cache.pods.values())

    async def write_status(self) -> None:
        config = self.cache.config
        if not config.present or not self._may_write():
            return
        summary = Summary(
            generation=config.generation,
            managed_pods=self.reconciler.managed_pods,
            managed_nodes=self.reconciler.managed_nodes,
            dry_run=config.settings.dry_run,
            invalid=config.invalid,
        )
        current = dict(config.status or {})
        desired = desired_status(summary, current=current, now=datetime.now(UTC))
        # The watch may not have echoed our last write yet.
        if not status_differs(desired, current) or desired == self._last_status:
            return
        try:
            failure = await failure_of(
                self._writer.config_status(desired, precondition=self._may_write)
            )
        except Skipped:
            return
        if failure is None:
            self._last_status = desired
        else:
            log.warning("config status not written: %s", failure)

    def _settling(self, node: str) -> bool:
        """Whether the node is due for another look or still has resizes to send."""
        return node in self.queue or self.actuator.resizer.resizing(node)


def _log_unreadable(pod: Unreadable) -> None:
    log.error("ignoring pod %s with an invalid quantity: %s", pod.key, pod.reason)
