"""Reconciling one node: decide, note what the kubelet reported, plan the writes.

Level-based: a reconcile receives only a node name and rebuilds everything from the
cache, so running it twice is harmless and a missed event is repaired by the next one.
It does no I/O. In order:

1. **decide** (`app.core.decision.decide_node`, pure): the node's pool, which pods are
   managed and why not, and every managed pod's target;
2. **note** what needs acting on once: a kubelet's Deferred or Infeasible report (counted;
   Infeasible also starts the pod's back-off, with a warning), a bad ``max-cpu`` annotation;
3. **plan** (`plan_node`): each managed pod's resize (dry-run: its count and "would"
   event), and the annotations that no longer explain what they should;
4. hand the plan to the executor (`reconciler.actuator`), which sends it as the budgets
   allow and checks each write against the current state right before it goes out.

It returns how long to wait before the node needs another look (a back-off ending), or
None.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.core.cluster import ClusterCache
from app.core.config import Settings
from app.core.decision import DEFERRED, INFEASIBLE, NodeDecision, decide_node
from app.core.explain import annotated_target, explain, status_annotation
from app.core.policy import PATCH_REASONS, PodResult, Reason, decide
from reconciler.bodies import EventReason
from reconciler.metrics import ReconcilerMetrics
from reconciler.outcomes import Result
from reconciler.plan import (
    Executor,
    Explain,
    NodePlan,
    Recall,
    ResizePlan,
    Round,
    pod_context,
    resize_unseen,
    seconds_text,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _NodeTally:
    """What one node contributes to the cluster-wide gauges."""

    series: frozenset[tuple[str, str]]
    managed: int
    deferred: int
    pool: str | None = None
    # Managed pods by the weight rule that matched them: (rule's path, weight) -> count.
    weighted: Mapping[tuple[str, int], int] = field(default_factory=dict)


# A node without a tally (never reconciled, or forgotten) contributes nothing.
_NO_TALLY = _NodeTally(series=frozenset(), managed=0, deferred=0)


# Not slotted: tests replace `reconcile` on an instance.
@dataclass(eq=False, kw_only=True)
class NodeReconciler:
    """Reconciles one node at a time: decides, records the node's gauges, and hands the
    plan to the executor."""

    cache: ClusterCache
    executor: Executor
    metrics: ReconcilerMetrics
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    _tallies: dict[str, _NodeTally] = field(default_factory=dict, init=False)
    # Managed pods across all nodes: the sum of the tallies.
    managed_pods: int = field(default=0, init=False)
    _deferred_total: int = field(default=0, init=False)
    _pool_managed: dict[str, int] = field(default_factory=dict, init=False)
    _rule_managed: Counter[tuple[str, int]] = field(default_factory=Counter, init=False)

    @property
    def managed_nodes(self) -> int:
        return sum(1 for tally in self._tallies.values() if tally.managed)

    def reconcile(self, node_name: str) -> float | None:
        """Compute the node's targets and plan its writes; the delay until its next look."""
        round_ = Round(metrics=self.metrics, started=self.clock())
        try:
            view = self.cache.node_view(node_name)
            if view is None:
                self.forget_node(node_name)
                return None
            if self.cache.config.invalid is not None:
                return None
            recall = self.executor.recall()
            decision = decide_node(view, self.cache.settings, remembered=recall.remembered)
            plan = NodePlan(unplanned=[pod.key for pod, _ in decision.unmanaged])
            retry = self._note(decision, plan, recall)
            self._record(decision)
            plan_node(
                decision,
                plan,
                bookings=self.cache.bookings(node_name),
                recall=recall,
                metrics=self.metrics,
                now=self.wall_clock(),
                round_=round_,
            )
            self.executor.submit(plan)
            return retry
        finally:
            round_.done(self.clock())

    def forget_node(self, node_name: str) -> None:
        self._set_tally(node_name, None)
        self.metrics.forget_node(node_name)
        self.executor.forget_node(node_name)

    def forget_all(self) -> None:
        for node_name in list(self._tallies):
            self.forget_node(node_name)

    def _note(self, decision: NodeDecision, plan: NodePlan, recall: Recall) -> float | None:
        """Act once on what the kubelet reported and on bad caps; the next back-off end."""
        backoff = decision.settings.backoff_seconds
        retry = decision.retry_after
        for pod in decision.fresh_infeasible:
            plan.reports.append((pod.uid, INFEASIBLE, pod.report_generation))
            self.metrics.count(Result.INFEASIBLE)
            plan.backoffs.append((pod.uid, backoff))
            retry = backoff if retry is None else min(retry, backoff)
            log.warning(
                "kubelet reports the resize infeasible; backing off for %ss: %s",
                backoff,
                pod.resize_pending_message,
                extra=pod_context(pod),
            )
            plan.explanations.append(
                Explain(
                    pod,
                    warning=(
                        EventReason.RESIZE_INFEASIBLE,
                        "kubelet cannot apply the CPU limit "
                        f"({pod.resize_pending_message or 'no reason given'}); "
                        f"not resizing for {seconds_text(backoff)}",
                    ),
                )
            )
        for pod in (*(r.pod for r in decision.result.pods), *decision.backed_off):
            if pod.resize_pending == DEFERRED and recall.remembered.new_report(
                pod.uid, DEFERRED, pod.report_generation
            ):
                plan.reports.append((pod.uid, DEFERRED, pod.report_generation))
                self.metrics.count(Result.DEFERRED)
            warning, invalid = pod.max_cpu_warning, EventReason.INVALID_MAX_CPU
            if warning is not None and recall.remembered.new_report(pod.uid, invalid, warning):
                plan.reports.append((pod.uid, invalid, warning))
                plan.explanations.append(Explain(pod, warning=(invalid, warning)))
        return retry

    def _record(self, decision: NodeDecision) -> None:
        result = decision.result
        name = result.name
        self.metrics.node_factor.labels(node=name).set(float(result.factor))
        self.metrics.node_slack_cores.labels(node=name).set(max(result.slack_m, 0) / 1000)
        self.metrics.node_allocatable_cores.labels(node=name).set(result.allocatable_m / 1000)
        self.metrics.pod_booked_cores.set_node(
            name, (pod for pod in decision.pods if pod.books_cpu)
        )
        # A target of 0 is a pod left without a limit (the QoS guard): it has no ceiling
        # to chart.
        limited = [r for r in result.pods if r.target_m > 0]
        for pod_result in limited:
            pod = pod_result.pod
            self.metrics.pod_limit_cores.labels(namespace=pod.namespace, pod=pod.name).set(
                pod_result.target_m / 1000
            )
        pods = (*(r.pod for r in result.pods), *decision.backed_off)
        self._set_tally(
            name,
            _NodeTally(
                series=frozenset((r.pod.namespace, r.pod.name) for r in limited),
                managed=len(result.pods),
                deferred=sum(1 for pod in pods if pod.resize_pending == DEFERRED),
                pool=decision.pool,
                weighted=Counter(
                    (r.weight_rule.path, r.weight_rule.weight)
                    for r in result.pods
                    if r.weight_rule is not None
                ),
            ),
        )

    def _set_tally(self, node_name: str, tally: _NodeTally | None) -> None:
        old = self._tallies.pop(node_name, _NO_TALLY)
        new = _NO_TALLY if tally is None else tally
        if tally is not None:
            self._tallies[node_name] = tally
        for namespace, pod in old.series - new.series:
            self.metrics.forget_pod(namespace=namespace, pod=pod)
        self.managed_pods += new.managed - old.managed
        self._deferred_total += new.deferred - old.deferred
        self._count_pool(old.pool, -old.managed)
        self._count_pool(new.pool, new.managed)
        if old.weighted or new.weighted:
            self._count_rules(old.weighted, new.weighted)
        self.metrics.pods_managed.set(self.managed_pods)
        self.metrics.resizes_deferred.set(self._deferred_total)

    def _count_pool(self, pool: str | None, change: int) -> None:
        if pool is None or not change:
            return
        count = self._pool_managed.get(pool, 0) + change
        if count:
            self._pool_managed[pool] = count
        else:
            self._pool_managed.pop(pool, None)
        self.metrics.set_pool_managed(pool, count)

    def _count_rules(
        self, old: Mapping[tuple[str, int], int], new: Mapping[tuple[str, int], int]
    ) -> None:
        for key in old.keys() | new.keys():
            count = self._rule_managed[key] + new.get(key, 0) - old.get(key, 0)
            if count:
                self._rule_managed[key] = count
            else:
                del self._rule_managed[key]
            self.metrics.set_rule_managed(*key, count)


def plan_node(
    decision: NodeDecision,
    plan: NodePlan,
    *,
    bookings: int,
    recall: Recall,
    metrics: ReconcilerMetrics,
    now: datetime,
    round_: Round,
) -> None:
    """Plan each managed pod's resize (in dry-run: count and announce it) and annotation.

    The annotation explains the applied limit. Enforcing, it is written once a resize is
    applied; dry-run, when the target the pod would get moves past the deadband. Either
    way it is (re)written when it is missing, was edited by someone else, or was written
    for another mode or pool. A slack move that leaves the limit inside the deadband
    writes nothing: ``kubectl headroom explain`` computes the current numbers at any time.
    """
    settings = decision.settings
    for pod_result in decision.result.pods:
        pod = pod_result.pod
        if pod_result.reason is Reason.QOS_GUARD and not pod_result.current_m:
            # No limit can be set without making the pod Guaranteed, and it has none yet:
            # there is no ceiling to explain.
            plan.unplanned.append(pod.key)
            continue
        explanation = explain(
            decision.result, pod_result, dry_run=settings.dry_run, pool=decision.pool
        )
        # Accepted, and the watch has not shown it yet: the pod's limit is the target now.
        unseen = resize_unseen(recall.resized, pod, pod_result.target_m)
        patch = pod_result.patch and not unseen
        # A pod with pod-level resources has no container limits to set: its target is
        # the pod-level limit.
        resize = patch and bool(pod_result.containers or pod.facts.pod_resources is not None)
        previous = recall.annotation(pod)
        if resize and not settings.dry_run:
            plan.resizes.append(
                ResizePlan(
                    pod=pod,
                    settings=settings,
                    containers=pod_result.containers,
                    target_m=pod_result.target_m,
                    explanation=explanation,
                    annotation=status_annotation(explanation, previous=previous, now=now),
                    round=round_,
                    bookings=bookings,
                )
            )
            # The annotation follows once the resize is applied.
            continue
        plan.unplanned.append(pod.key)
        annotated = annotated_target(previous, dry_run=settings.dry_run, pool=decision.pool)
        stale = annotated is None or pod.uid in recall.edited
        if settings.dry_run:
            moved = resize and (annotated is None or _moved(pod_result, annotated, settings))
            if moved:
                # Counted and announced once per target that moves past the deadband.
                metrics.count(Result.DRY_RUN)
                plan.explanations.append(Explain(pod, adjusted=(pod.facts.limit_m, explanation)))
            stale = stale or moved
        else:
            # Enforcing with nothing to apply: the annotation explains the limit the pod has
            # (one written for an earlier limit, or called off while the node settled, does
            # not).
            applied_m = pod_result.target_m if unseen else pod_result.current_m
            stale = stale or annotated != applied_m
            explanation = explanation.applied(applied_m)
        if stale:
            annotation = status_annotation(explanation, previous=previous, now=now)
            if annotation != previous:
                plan.explanations.append(Explain(pod, annotation=annotation))


def _moved(result: PodResult, annotated_m: int, settings: Settings) -> bool:
    """Whether the target moved past the deadband from the one last announced."""
    reason = decide(
        target_m=result.target_m,
        current_m=annotated_m,
        grow_percent=settings.grow_percent,
        shrink_percent=settings.shrink_percent,
    )
    return reason in PATCH_REASONS
