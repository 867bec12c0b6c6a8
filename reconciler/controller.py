"""The reconciler's moving parts at work together: cache wake-ups, queue, worker, status.

One event loop runs everything: list/watch tasks feed the cache, the cache wakes nodes
in the queue, a worker reconciles nodes one at a time (a reconcile is pure computation
and planning), the actuator sends the planned writes as the rate limiters allow, and a
status task keeps the HeadroomConfig status current. A node is looked at again after a
debounce (a change in the cache), or as `reconciler.requeue` alone decides from what a
reconcile or a write reported: a back-off ending, a conflict, a failure. Writes
happen only while `may_write` holds (this replica leads); whatever a closed write gate
cut short is resumed by the full resync that every start of leading does.
"""

import asyncio
import logging
from dataclasses import dataclass

from app.core.cluster import ClusterCache
from app.core.config import Settings
from app.core.pods import PodInfo
from reconciler.actuator import Actuator
from reconciler.reconcile import NodeReconciler
from reconciler.requeue import Kind, Outcome, requeue
from reconciler.status import ConfigStatus
from reconciler.workqueue import NodeQueue

log = logging.getLogger(__name__)


@dataclass(eq=False, kw_only=True, slots=True)
class Controller:
    """Runs the reconciler: the cache's wake-ups, the worker over the node queue,
    leadership and the config's status."""

    queue: NodeQueue
    cache: ClusterCache
    reconciler: NodeReconciler
    actuator: Actuator
    status: ConfigStatus

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        if prompt:
            self.queue.add_prompt(node)
        else:
            self.queue.add_debounced(node, period=self.cache.settings.debounce_seconds)

    def node_removed(self, node: str) -> None:
        """Free everything kept per node: its series, pace, failures."""
        self.reconciler.forget_node(node)
        self.queue.forget(node)
        self.status.due()

    def settings_changed(self, settings: Settings) -> None:
        self.actuator.retune(settings)
        self.status.due()
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
        if not self.actuator.annotation_seen(pod.uid, pod.status_annotation):
            self.queue.add_debounced(pod.node_name, period=self.cache.settings.debounce_seconds)

    # Leadership.

    def start_leading(self) -> None:
        """Look at every node soon, spread over the debounce period (a jittered resync)."""
        window = max(1.0, self.cache.settings.debounce_seconds)
        for node in self.cache.node_names():
            self.queue.add_spread(node, window=window)
        self.status.due()

    def stop_leading(self) -> None:
        """Call off unsent writes and drop the per-node series: only the leader's numbers
        describe the cluster."""
        self.actuator.clear()
        self.reconciler.forget_all()
        self.queue.forget_all()

    # Tasks.

    async def work(self) -> None:
        while (node := await self.queue.get()) is not None:
            managed = self.reconciler.managed_pods, self.reconciler.managed_nodes
            try:
                after = self.reconciler.reconcile(node) if self.actuator.may_write() else None
                outcome = Outcome(Kind.RECONCILED, after)
            except Exception:  # one node's bug must not stop the others
                log.exception("reconcile failed", extra={"node": node})
                outcome = Outcome(Kind.CRASHED, self.cache.settings.backoff_seconds)
            finally:
                self.queue.done(node)
            requeue(self.queue, node, outcome)
            if managed != (self.reconciler.managed_pods, self.reconciler.managed_nodes):
                self.status.due()
            # A reconcile is pure computation: let the watches and writers in between.
            await asyncio.sleep(0)

    def retain_live_pods(self) -> None:
        """Forget what is remembered about pods that left the cluster."""
        self.actuator.retain(pod.uid for pod in self.cache.pods.values())
