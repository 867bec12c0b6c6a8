"""Reconciling one node: re-read the cache, compute with the pure policy, act, explain.

Level-based: a reconcile receives only a node name and rebuilds everything from the
cache, so running it twice is harmless and a missed event is repaired by the next one.
It returns how long to wait before the node needs another look (a back-off ending, a
conflict or error to retry), or None.
"""

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from app.config import Settings, settings_for_node
from app.explain import Explanation, event_message, explain, status_annotation
from app.pods import PodInfo, booked_cpu_m
from app.policy import NodeInput, NodeResult, PodResult, Reason, compute_node
from app.quantity import format_cpu_millis
from app.selection import ineligibility
from reconciler.cache import ClusterCache, NodeRecord
from reconciler.kubeapi import ApiUnavailable
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Result, resize_result
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import NodeBuckets
from reconciler.retry import ExponentialBackoff
from reconciler.writer import (
    CPU_LIMIT_ADJUSTED,
    INVALID_MAX_CPU,
    RESIZE_FORBIDDEN,
    RESIZE_INFEASIBLE,
    Writer,
    WritesStopped,
)

log = logging.getLogger(__name__)

DEFERRED: Final = "Deferred"
INFEASIBLE: Final = "Infeasible"
_UNPROCESSABLE = 422
# A conflicting writer usually settles within a second; look again soon.
CONFLICT_RETRY_SECONDS: Final = 1.0


@dataclass(slots=True)
class _NodeTally:
    """What one node contributes to the cluster-wide gauges."""

    series: frozenset[tuple[str, str]]
    managed: int
    deferred: int
    pool: str | None = None


class NodeReconciler:
    def __init__(
        self,
        *,
        cache: ClusterCache,
        writer: Writer,
        metrics: ReconcilerMetrics,
        memory: PodMemory,
        buckets: NodeBuckets,
        may_write: Callable[[], bool],
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._cache = cache
        self._writer = writer
        self._metrics = metrics
        self._memory = memory
        self._buckets = buckets
        self._may_write = may_write
        self._wall_clock = wall_clock
        self._tallies: dict[str, _NodeTally] = {}
        self._managed_total = 0
        self._deferred_total = 0
        self._pool_managed: dict[str, int] = {}
        self._failures: dict[str, ExponentialBackoff] = {}

    @property
    def managed_pods(self) -> int:
        return self._managed_total

    @property
    def managed_nodes(self) -> int:
        return sum(1 for tally in self._tallies.values() if tally.managed)

    async def reconcile(self, node_name: str) -> float | None:
        if not self._may_write():
            # A follower keeps its cache warm but neither acts nor reports.
            return None
        started = time.perf_counter()
        try:
            return await self._reconcile(node_name)
        except WritesStopped:
            # Leadership ended mid-reconcile; the next leader starts over from the cache.
            return None
        finally:
            self._metrics.reconcile_duration.observe(time.perf_counter() - started)

    def forget_node(self, node_name: str) -> None:
        self._set_tally(node_name, None)
        self._metrics.forget_node(node_name)
        self._buckets.forget(node_name)
        self._failures.pop(node_name, None)

    def forget_all(self) -> None:
        for node_name in list(self._tallies):
            self.forget_node(node_name)

    async def _reconcile(self, node_name: str) -> float | None:
        config = self._cache.config
        node = self._cache.nodes.get(node_name)
        if node is None:
            self.forget_node(node_name)
            return None
        if config.invalid is not None:
            return None
        settings, pool = settings_for_node(config.settings, node.labels)
        pods = self._cache.pods_on(node_name)
        managed, deferred, retry = await self._select(pods, node=node, settings=settings)
        result = compute_node(
            NodeInput(
                name=node_name,
                allocatable_m=node.allocatable_m,
                booked_m=booked_cpu_m(pods),
                pods=managed,
                limit_ranges={
                    pod.namespace: self._cache.limit_range_caps(pod.namespace) for pod in managed
                },
            ),
            settings,
        )
        self._record(node_name, result, deferred=deferred, pool=pool)
        # Pods are independent: their writes go out together, paced by the rate limiters,
        # so a node's reconcile lasts about one round trip rather than one per pod.
        acted = await asyncio.gather(
            *(self._act(node_name, result, r, settings=settings, pool=pool) for r in result.pods),
            return_exceptions=True,
        )
        delays = [] if retry is None else [retry]
        failed = False
        for item in acted:
            if isinstance(item, BaseException):
                raise item
            outcome, delay = item
            failed = failed or outcome is Result.ERROR
            if delay is not None:
                delays.append(delay)
        if failed:
            backoff = self._failures.setdefault(
                node_name, ExponentialBackoff(initial=1.0, cap=settings.backoff_seconds)
            )
            delays.append(backoff.next_delay())
        else:
            self._failures.pop(node_name, None)
        return min(delays, default=None)

    async def _select(
        self, pods: list[PodInfo], *, node: NodeRecord, settings: Settings
    ) -> tuple[list[PodInfo], int, float | None]:
        """The managed pods, how many have a deferred resize, and the next back-off end."""
        managed: list[PodInfo] = []
        deferred = 0
        retry: float | None = None
        for pod in pods:
            if self._ineligible(pod, node=node, settings=settings):
                continue
            await self._note_kubelet_report(pod, settings=settings)
            await self._note_bad_cap(pod)
            if pod.resize_pending == DEFERRED:
                deferred += 1
            remaining = self._memory.backoff_remaining(pod.uid)
            if remaining > 0:
                retry = remaining if retry is None else min(retry, remaining)
                continue
            managed.append(pod)
        return managed, deferred, retry

    def _ineligible(self, pod: PodInfo, *, node: NodeRecord, settings: Settings) -> bool:
        """Every gate but back-off, which `_select` checks after reading the pod's status."""
        reason = ineligibility(
            settings,
            pod,
            namespace_labels=self._cache.namespaces.get(pod.namespace),
            node_labels=node.labels,
            vpas=self._cache.vpas(pod.namespace),
            node_resizes_pod_level=node.pod_level_resize,
        )
        return reason is not None

    async def _note_kubelet_report(self, pod: PodInfo, *, settings: Settings) -> None:
        """Count a Deferred or Infeasible resize once; Infeasible also backs the pod off.

        Infeasible is re-derived from the pod's status, so after a restart a pod still
        showing it backs off again without another patch.
        """
        report = pod.resize_pending
        if report not in (DEFERRED, INFEASIBLE):
            return
        # The report is about the generation the kubelet last saw, when it says which.
        seen = pod.observed_generation if pod.observed_generation is not None else pod.generation
        if not self._memory.first_report(pod.uid, report, marker=seen):
            return
        if report == DEFERRED:
            self._metrics.count(Result.DEFERRED)
            return
        self._metrics.count(Result.INFEASIBLE)
        self._memory.back_off(pod.uid, seconds=settings.backoff_seconds)
        log.warning(
            "kubelet reports the resize infeasible; backing off for %ss: %s",
            settings.backoff_seconds,
            pod.resize_pending_message,
            extra=_context(pod),
        )
        await self._writer.event(
            pod,
            reason=RESIZE_INFEASIBLE,
            message=(
                "kubelet cannot apply the CPU limit "
                f"({pod.resize_pending_message or 'no reason given'}); "
                f"not resizing for {_seconds(settings.backoff_seconds)}"
            ),
            warning=True,
        )

    async def _note_bad_cap(self, pod: PodInfo) -> None:
        warning = pod.max_cpu_warning
        if warning is None or not self._memory.first_report(
            pod.uid, INVALID_MAX_CPU, marker=warning
        ):
            return
        await self._writer.event(pod, reason=INVALID_MAX_CPU, message=warning, warning=True)

    def _record(
        self, node_name: str, result: NodeResult, *, deferred: int, pool: str | None
    ) -> None:
        self._metrics.node_factor.labels(node=node_name).set(float(result.factor))
        self._metrics.node_slack_cores.labels(node=node_name).set(result.slack_m / 1000)
        # A target of 0 is a pod left without a limit (the QoS guard): it has no ceiling
        # to chart.
        limited = [r for r in result.pods if r.target_m > 0]
        for pod_result in limited:
            pod = pod_result.pod
            self._metrics.pod_limit_cores.labels(namespace=pod.namespace, pod=pod.name).set(
                pod_result.target_m / 1000
            )
        self._set_tally(
            node_name,
            _NodeTally(
                series=frozenset((r.pod.namespace, r.pod.name) for r in limited),
                managed=len(result.pods),
                deferred=deferred,
                pool=pool,
            ),
        )

    def _set_tally(self, node_name: str, tally: _NodeTally | None) -> None:
        old = self._tallies.pop(node_name, None)
        if tally is not None:
            self._tallies[node_name] = tally
        kept = tally.series if tally is not None else frozenset()
        if old is not None:
            for namespace, pod in old.series - kept:
                self._metrics.forget_pod(namespace=namespace, pod=pod)
            self._managed_total -= old.managed
            self._deferred_total -= old.deferred
            self._count_pool(old.pool, -old.managed)
        if tally is not None:
            self._managed_total += tally.managed
            self._deferred_total += tally.deferred
            self._count_pool(tally.pool, tally.managed)
        self._metrics.pods_managed.set(self._managed_total)
        self._metrics.resizes_deferred.set(self._deferred_total)

    def _count_pool(self, pool: str | None, change: int) -> None:
        if pool is None or not change:
            return
        count = self._pool_managed.get(pool, 0) + change
        if count:
            self._pool_managed[pool] = count
        else:
            self._pool_managed.pop(pool, None)
        self._metrics.set_pool_managed(pool, count)

    async def _act(
        self,
        node_name: str,
        node: NodeResult,
        pod_result: PodResult,
        *,
        settings: Settings,
        pool: str | None,
    ) -> tuple[Result | None, float | None]:
        """Resize (in dry-run: count and announce), then annotate one pod.

        Returns the outcome and how soon the node wants another look. A failed annotation
        write reports `Result.ERROR` (not counted as a resize) so the node is retried.
        """
        pod = pod_result.pod
        if pod_result.reason is Reason.QOS_GUARD and not pod_result.current_m:
            # No limit can be set without making the pod Guaranteed, and it has none yet:
            # there is no ceiling to explain.
            return None, None
        explanation = explain(node, pod_result, dry_run=settings.dry_run, pool=pool)
        previous = self._memory.current_annotation(pod.uid, cached=pod.status_annotation)
        annotation = status_annotation(explanation, previous=previous, now=self._wall_clock())
        outcome: Result | None = None
        delay: float | None = None
        patch = pod_result.patch and not self._memory.resize_unseen(
            pod.uid, generation=pod.generation, target_m=pod_result.target_m
        )
        if patch:
            if settings.dry_run:
                # Counted and announced once per distinct target, not at every reconcile.
                if _target_of(annotation) != _target_of(previous):
                    outcome = Result.DRY_RUN
                    self._metrics.count(outcome)
                    await self._writer.event(
                        pod,
                        reason=CPU_LIMIT_ADJUSTED,
                        message=event_message(explanation),
                        warning=False,
                    )
            else:
                outcome, delay = await self._resize(
                    node_name, pod_result, explanation, settings=settings
                )
                if outcome in (None, Result.CONFLICT, Result.ERROR):
                    # Gone, or not applied: the annotation would claim what did not happen.
                    return outcome, delay
        if annotation != previous:
            await self._buckets.for_node(node_name).wait()
            if not await self._annotate(pod, annotation):
                return Result.ERROR, delay
            self._memory.note_annotation(pod.uid, annotation)
        return outcome, delay

    async def _resize(
        self,
        node_name: str,
        pod_result: PodResult,
        explanation: Explanation,
        *,
        settings: Settings,
    ) -> tuple[Result | None, float | None]:
        pod = pod_result.pod
        await self._buckets.for_node(node_name).wait()
        try:
            response = await self._writer.resize(
                pod, pod_result.containers, target_m=pod_result.target_m
            )
        except ApiUnavailable as exc:
            log.warning("resize not sent: %s", exc, extra=_context(pod))
            self._metrics.count(Result.ERROR)
            return Result.ERROR, None
        outcome = resize_result(code=response.code, body=response.json())
        if outcome is None:
            return None, None
        self._metrics.count(outcome)
        target = format_cpu_millis(pod_result.target_m)
        if outcome is Result.OK:
            self._memory.note_resize(
                pod.uid, generation=pod.generation, target_m=pod_result.target_m
            )
            log.info(
                "resized: %s", event_message(explanation), extra={**_context(pod), "target": target}
            )
            await self._writer.event(
                pod, reason=CPU_LIMIT_ADJUSTED, message=event_message(explanation), warning=False
            )
            return outcome, None
        if outcome is Result.QUOTA_DENIED:
            self._memory.back_off(pod.uid, seconds=settings.backoff_seconds)
            log.warning(
                "resize refused by ResourceQuota; backing off: %s",
                response.message,
                extra=_context(pod),
            )
            await self._writer.event(
                pod,
                reason=RESIZE_FORBIDDEN,
                message=(
                    f"resize to {target} refused ({response.message}); the namespace has a "
                    f"limits.cpu ResourceQuota: quota requests.cpu instead. "
                    f"Not resizing for {_seconds(settings.backoff_seconds)}"
                ),
                warning=True,
            )
            return outcome, settings.backoff_seconds
        if outcome is Result.CONFLICT:
            return outcome, CONFLICT_RETRY_SECONDS
        if response.code == _UNPROCESSABLE:
            # The QoS guard and eligibility gates exist so this never happens: a bug.
            log.error(
                "resize rejected as invalid (HTTP 422); this is a bug in Headroom: %s",
                response.message,
                extra={**_context(pod), "target": target},
            )
        else:
            log.warning(
                "resize failed (HTTP %s): %s", response.code, response.message, extra=_context(pod)
            )
        return outcome, None

    async def _annotate(self, pod: PodInfo, text: str) -> bool:
        try:
            response = await self._writer.annotate(pod, text)
        except ApiUnavailable as exc:
            log.warning("annotation not written: %s", exc, extra=_context(pod))
            return False
        if response.ok or response.code == 404:
            return True
        log.warning(
            "annotation not written (HTTP %s): %s",
            response.code,
            response.message,
            extra=_context(pod),
        )
        return False


def _target_of(annotation: str | None) -> object:
    if annotation is None:
        return None
    try:
        decoded = json.loads(annotation)
    except ValueError:
        return None
    return decoded.get("targetLimit") if isinstance(decoded, dict) else None


def _seconds(seconds: float) -> str:
    return f"{seconds:g}s"


def _context(pod: PodInfo) -> dict[str, str]:
    return {"namespace": pod.namespace, "pod": pod.name, "node": pod.node_name}
