"""Reconciling one node: re-read the cache, compute with the pure policy, plan the writes.

Level-based: a reconcile receives only a node name and rebuilds everything from the
cache, so running it twice is harmless and a missed event is repaired by the next one.
It does no I/O: resizes, annotations and events are handed to the actuator, which sends
them as the rate limiters allow and checks each against the current state right before
sending. A reconcile returns how long to wait before the node needs another look (a
back-off ending), or None.
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from app.core.config import Settings, settings_for_node
from app.core.explain import explain, status_annotation
from app.core.pods import PodInfo, booked_cpu_m
from app.core.policy import NodeInput, NodeResult, PodResult, Reason, compute_node
from app.core.selection import ineligibility
from reconciler.actuator import Actuator, ResizePlan, Round, seconds_text
from reconciler.cache import ClusterCache, NodeRecord
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Result
from reconciler.podmemory import PodMemory
from reconciler.writer import INVALID_MAX_CPU, RESIZE_INFEASIBLE, pod_context

log = logging.getLogger(__name__)

DEFERRED: Final = "Deferred"
INFEASIBLE: Final = "Infeasible"


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
        actuator: Actuator,
        metrics: ReconcilerMetrics,
        memory: PodMemory,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._cache = cache
        self._actuator = actuator
        self._metrics = metrics
        self._memory = memory
        self._clock = clock
        self._wall_clock = wall_clock
        self._tallies: dict[str, _NodeTally] = {}
        self._managed_total = 0
        self._deferred_total = 0
        self._pool_managed: dict[str, int] = {}

    @property
    def managed_pods(self) -> int:
        return self._managed_total

    @property
    def managed_nodes(self) -> int:
        return sum(1 for tally in self._tallies.values() if tally.managed)

    def reconcile(self, node_name: str) -> float | None:
        """Compute the node's targets and plan its writes; the delay until its next look."""
        round_ = Round(metrics=self._metrics, started=self._clock())
        try:
            return self._reconcile(node_name, round_)
        finally:
            round_.done(self._clock())

    def forget_node(self, node_name: str) -> None:
        self._set_tally(node_name, None)
        self._metrics.forget_node(node_name)
        self._actuator.forget_node(node_name)

    def forget_all(self) -> None:
        for node_name in list(self._tallies):
            self.forget_node(node_name)

    def _reconcile(self, node_name: str, round_: Round) -> float | None:
        config = self._cache.config
        node = self._cache.nodes.get(node_name)
        if node is None:
            self.forget_node(node_name)
            return None
        if config.invalid is not None:
            return None
        settings, pool = settings_for_node(config.settings, node.labels)
        pods = self._cache.pods_on(node_name)
        managed, deferred, retry = self._select(pods, node=node, settings=settings)
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
        now = self._wall_clock()
        for pod_result in result.pods:
            self._plan(result, pod_result, settings=settings, pool=pool, now=now, round_=round_)
        return retry

    def _select(
        self, pods: list[PodInfo], *, node: NodeRecord, settings: Settings
    ) -> tuple[list[PodInfo], int, float | None]:
        """The managed pods, how many have a deferred resize, and the next back-off end."""
        managed: list[PodInfo] = []
        deferred = 0
        retry: float | None = None
        for pod in pods:
            if self._ineligible(pod, node=node, settings=settings):
                self._actuator.drop_resize(pod.key)
                continue
            self._note_kubelet_report(pod, settings=settings)
            self._note_bad_cap(pod)
            if pod.resize_pending == DEFERRED:
                deferred += 1
            remaining = self._memory.backoff_remaining(pod.uid)
            if remaining > 0:
                retry = remaining if retry is None else min(retry, remaining)
                self._actuator.drop_resize(pod.key)
                continue
            managed.append(pod)
        return managed, deferred, retry

    def _ineligible(self, pod: PodInfo, *, node: NodeRecord, settings: Settings) -> bool:
        """Every gate but back-off, which `_select` checks after reading the pod's status."""
        reason = ineligibility(
            settings,
            pod,
            namespace_labels=self._cache.namespaces.get(pod.namespace),
            node=node,
            vpas=self._cache.vpas(pod.namespace),
            node_resizes_pod_level=node.pod_level_resize,
        )
        return reason is not None

    def _note_kubelet_report(self, pod: PodInfo, *, settings: Settings) -> None:
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
            extra=pod_context(pod),
        )
        self._actuator.explain(
            pod,
            warning=(
                RESIZE_INFEASIBLE,
                "kubelet cannot apply the CPU limit "
                f"({pod.resize_pending_message or 'no reason given'}); "
                f"not resizing for {seconds_text(settings.backoff_seconds)}",
            ),
        )

    def _note_bad_cap(self, pod: PodInfo) -> None:
        warning = pod.max_cpu_warning
        if warning is None or not self._memory.first_report(
            pod.uid, INVALID_MAX_CPU, marker=warning
        ):
            return
        self._actuator.explain(pod, warning=(INVALID_MAX_CPU, warning))

    def _record(
        self, node_name: str, result: NodeResult, *, deferred: int, pool: str | None
    ) -> None:
        self._metrics.node_factor.labels(node=node_name).set(float(result.factor))
        self._metrics.node_slack_cores.labels(node=node_name).set(max(result.slack_m, 0) / 1000)
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

    def _plan(
        self,
        node: NodeResult,
        pod_result: PodResult,
        *,
        settings: Settings,
        pool: str | None,
        now: datetime,
        round_: Round,
    ) -> None:
        """Plan one pod's resize (in dry-run: count and announce it) and annotation."""
        pod = pod_result.pod
        if pod_result.reason is Reason.QOS_GUARD and not pod_result.current_m:
            # No limit can be set without making the pod Guaranteed, and it has none yet:
            # there is no ceiling to explain.
            self._actuator.drop_resize(pod.key)
            return
        explanation = explain(node, pod_result, dry_run=settings.dry_run, pool=pool)
        previous = self._actuator.pending_annotation(pod.key) or self._memory.current_annotation(
            pod.uid, cached=pod.status_annotation
        )
        annotation = status_annotation(explanation, previous=previous, now=now)
        patch = pod_result.patch and not self._memory.resize_unseen(
            pod.uid, generation=pod.generation, target_m=pod_result.target_m
        )
        # A pod with pod-level resources has no container limits to set: its target is
        # the pod-level limit.
        resize = patch and bool(pod_result.containers or pod.pod_resources is not None)
        if resize and not settings.dry_run:
            self._actuator.resize(
                ResizePlan(
                    pod=pod,
                    settings=settings,
                    containers=pod_result.containers,
                    target_m=pod_result.target_m,
                    explanation=explanation,
                    annotation=annotation,
                    round=round_,
                )
            )
            # The annotation follows once the resize is applied.
            return
        self._actuator.drop_resize(pod.key)
        if resize and _target_of(annotation) != _target_of(previous):
            # Dry-run: counted and announced once per distinct target, not at every reconcile.
            self._metrics.count(Result.DRY_RUN)
            self._actuator.explain(pod, adjusted=(pod.limit_m, explanation))
        if annotation != previous:
            self._actuator.explain(pod, annotation=annotation)


def _target_of(annotation: str | None) -> object:
    if annotation is None:
        return None
    try:
        decoded = json.loads(annotation)
    except ValueError:
        return None
    return decoded.get("targetLimit") if isinstance(decoded, dict) else None
