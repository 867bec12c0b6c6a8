"""The reconciler's moving parts wired together: cache wake-ups, queue, workers, status.

One event loop runs everything: list/watch tasks feed the cache, the cache wakes nodes
in the queue, a few workers reconcile nodes (never the same node twice at once), and a
status task keeps the HeadroomConfig status current. Writes happen only while
`may_write` holds (this replica leads).
"""

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from app.config import DEFAULT_SETTINGS, Settings
from reconciler.cache import ClusterCache
from reconciler.config_status import Summary, desired_status, status_differs
from reconciler.kubeapi import ApiUnavailable
from reconciler.metrics import ReconcilerMetrics
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import NodeBuckets, TokenBucket
from reconciler.reconcile import NodeReconciler
from reconciler.workqueue import NodeQueue
from reconciler.writer import Writer, WritesStopped

log = logging.getLogger(__name__)

# Reconciles wait on the API, not the CPU; a few in flight keep a burst of bindings moving
# while the rate limiters bound the load.
WORKERS: Final = 8
STATUS_INTERVAL_SECONDS: Final = 5.0
# A reconcile that raised is retried after this long.
CRASH_RETRY_SECONDS: Final = 5.0


class Controller:
    def __init__(
        self,
        *,
        queue: NodeQueue,
        writer: Writer,
        metrics: ReconcilerMetrics,
        client_limiter: TokenBucket,
        may_write: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue = queue
        self._writer = writer
        self._client_limiter = client_limiter
        self._may_write = may_write
        self._memory = PodMemory(clock=clock)
        self._buckets = NodeBuckets(
            rate=float(DEFAULT_SETTINGS.per_node_patches_per_second), clock=clock
        )
        self._last_status: dict[str, object] | None = None
        self.cache = ClusterCache(listener=self)
        self.reconciler = NodeReconciler(
            cache=self.cache,
            writer=writer,
            metrics=metrics,
            memory=self._memory,
            buckets=self._buckets,
            may_write=may_write,
        )

    # The cache's Listener.

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        if prompt:
            self.queue.add_prompt(node)
        else:
            self.queue.add_debounced(node, period=self.cache.settings.debounce_seconds)

    def node_removed(self, node: str) -> None:
        self.reconciler.forget_node(node)

    def settings_changed(self, settings: Settings) -> None:
        self._buckets.reconfigure(rate=float(settings.per_node_patches_per_second))
        self._client_limiter.reconfigure(
            rate=float(settings.client_qps), burst=settings.client_burst
        )
        log.info(
            "configuration applied",
            extra={"dryRun": settings.dry_run, "generation": settings.generation},
        )

    # Leadership.

    def start_leading(self) -> None:
        """Look at every node soon, spread over the debounce period (a jittered initial sync)."""
        window = max(1.0, self.cache.settings.debounce_seconds)
        for node in self.cache.node_names():
            self.queue.add_spread(node, window=window)

    def stop_leading(self) -> None:
        """Drop the per-node series: only the leader's numbers describe the cluster."""
        self.reconciler.forget_all()

    # Tasks.

    async def work(self) -> None:
        while (node := await self.queue.get()) is not None:
            try:
                delay = await self.reconciler.reconcile(node)
            except ApiUnavailable as exc:
                log.warning("reconcile interrupted: %s", exc, extra={"node": node})
                delay = CRASH_RETRY_SECONDS
            except Exception:  # one node's bug must not stop the others
                log.exception("reconcile failed", extra={"node": node})
                delay = CRASH_RETRY_SECONDS
            finally:
                self.queue.done(node)
            if delay is not None:
                self.queue.add(node, delay=delay)

    async def report_status(self) -> None:
        while True:
            await asyncio.sleep(STATUS_INTERVAL_SECONDS)
            self._memory.retain(pod.uid for pod in self.cache.pods.values())
            await self.write_status()

    async def write_status(self) -> None:
        config = self.cache.config
        if not config.present:
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
            response = await self._writer.config_status(desired)
        except WritesStopped:
            return
        except ApiUnavailable as exc:
            log.warning("config status not written: %s", exc)
            return
        if response.ok:
            self._last_status = desired
        else:
            log.warning("config status not written: %s", response.message)
