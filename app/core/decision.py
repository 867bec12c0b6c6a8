"""One node's decision: which of its pods Headroom manages, and every managed pod's target.

This is the one decision path. The reconciler, ``kubectl headroom simulate`` and
``explain``, the write gate and the convergence oracle all call ``decide_node`` (or, for one
pod, ``pod_gate``), so none of them re-implements selection, node pools or the gates:

1. the node's pool: the first of ``spec.nodePools`` whose selector matches it
   (``app.core.config.settings_for_node``), whose overrides apply;
2. each pod's gates (``app.core.eligibility``), with the VPA gate worked out from the
   namespace's VPAs whose target is on the pod's chain of controllers
   (``app.core.owners``), then back-off;
3. the pure policy over the managed pods (``app.core.policy.compute_node``), each pod's
   share of the slack weighted by the first of the node's weight rules that matches it
   (``weight_rule``), and its ceiling never below the CPU upper bounds of a RequestsOnly
   VPA that actuates it (``vpa_recommended``).

Back-off is what the reconciler remembers, handed in as a value (``Remembered``). The tools
remember nothing (``FROM_STATUS``): they decide as a freshly started reconciler would, which
re-derives a back-off from a pod whose kubelet reports its resize ``Infeasible``.
"""

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from app.core.cluster import Lookups, NodeView, Unreadable
from app.core.config import Settings, WeightRule, settings_for_node
from app.core.eligibility import (
    Ineligible,
    Recommended,
    node_ineligibility,
    pod_ineligibility,
    vpa_controls_limits,
    vpa_cpu_recommendation,
    vpa_targets_pod,
)
from app.core.owners import owner_chain
from app.core.pods import PodInfo, booked_cpu_m, excluding
from app.core.policy import NodeInput, NodeResult, compute_node
from app.core.views import NodeRecord

INFEASIBLE: Final = "Infeasible"
DEFERRED: Final = "Deferred"


@dataclass(frozen=True, slots=True)
class Backoff:
    """A pod left alone until ``until`` (on the clock of ``Remembered.now``)."""

    until: float
    # Held only while the pod's node is under these settings (a refusal no rule explains:
    # other settings may not be refused); None: under any.
    settings: Settings | None = None


_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})
_UNREPORTED: Final = object()


@dataclass(frozen=True, slots=True)
class Remembered:
    """What the reconciler remembers about pods, as read at ``now``."""

    now: float = 0.0
    backoffs: Mapping[str, Backoff] = field(default_factory=lambda: _NOTHING)
    # By topic (``INFEASIBLE``, ...), the marker of each pod's report acted on.
    reported: Mapping[str, Mapping[str, Hashable]] = field(default_factory=lambda: _NOTHING)

    def backoff_remaining(self, pod: PodInfo, settings: Settings) -> float:
        """Seconds left in the pod's back-off window under the node's ``settings``; 0 when
        it is not backed off."""
        entry = self.backoffs.get(pod.uid)
        if entry is None or entry.settings not in (None, settings):
            return 0.0
        return max(0.0, entry.until - self.now)

    def infeasible_acknowledged(self, pod: PodInfo) -> bool:
        """Whether the pod's current Infeasible report has been acted on already."""
        return not self.new_report(pod.uid, INFEASIBLE, pod.report_generation)

    def new_report(self, uid: str, topic: str, marker: Hashable) -> bool:
        """Whether ``topic`` with this ``marker`` has not been acted on for the pod yet."""
        acted: Hashable = self.reported.get(topic, _NOTHING).get(uid, _UNREPORTED)
        return acted != marker


# Nothing remembered: a pod reporting Infeasible is backed off from its status alone.
FROM_STATUS: Final = Remembered()


@dataclass(frozen=True, slots=True)
class NodeDecision:
    node: NodeRecord
    # The settings in force on the node: its pool's overrides applied.
    settings: Settings
    pool: str | None
    # Why no pod on the node is managed, or None.
    node_gate: Ineligible | None
    # The policy over the managed pods: slack, factor, and each managed pod's target.
    result: NodeResult
    # Pods not managed and why, in the node's pod order; BACKED_OFF ones included.
    unmanaged: tuple[tuple[PodInfo, Ineligible], ...]
    # Of the backed-off pods, those backed off by a kubelet's Infeasible report that has
    # not been acted on yet: the reconciler starts their window, counts and warns.
    fresh_infeasible: tuple[PodInfo, ...]
    # Pods whose quantities cannot be read: skipped, booking nothing.
    unreadable: tuple[Unreadable, ...]
    # Seconds until the earliest back-off on the node ends, or None.
    retry_after: float | None

    @property
    def pods(self) -> tuple[PodInfo, ...]:
        """Every readable pod bound to the node: the managed ones, then the rest."""
        return (*(r.pod for r in self.result.pods), *(pod for pod, _ in self.unmanaged))

    @property
    def backed_off(self) -> tuple[PodInfo, ...]:
        return tuple(pod for pod, reason in self.unmanaged if reason is Ineligible.BACKED_OFF)

    def reason(self, pod: PodInfo) -> Ineligible | None:
        """Why ``pod`` (one of the node's) is not managed; None when it is."""
        return next((reason for other, reason in self.unmanaged if other.uid == pod.uid), None)


def pod_gate(
    settings: Settings, pod: PodInfo, *, node: NodeRecord | None, lookups: Lookups
) -> Ineligible | None:
    """Every gate but back-off, for one pod: the first it fails, or None. ``pod`` is as
    ``excluding`` gives it under ``settings``: a pod whose only CPU requests are in
    excluded containers has none left to manage.

    ``node`` None is a pod not bound yet (the mutating webhook's): the node gates are
    skipped.
    """
    controlled = any(
        vpa_controls_limits(vpa, container_names=[c.name for c in pod.facts.containers])
        for vpa in targeting_vpas(pod, lookups)
    )
    return pod_ineligibility(
        settings,
        pod,
        namespace_labels=lookups.namespace_labels(pod.namespace),
        node=node,
        backed_off=False,
        vpa_controls_limits=controlled,
        node_resizes_pod_level=None if node is None else node.pod_level_resize,
    )


def vpa_recommended(pod: PodInfo, lookups: Lookups, recommended: Recommended) -> dict[str, int]:
    """The CPU amounts (millicores, by container) the RequestsOnly VPAs that actuate the
    pod recommend; where two name one container, the higher."""
    names = [c.name for c in pod.facts.containers]
    amounts: dict[str, int] = {}
    for vpa in targeting_vpas(pod, lookups):
        for name, amount_m in vpa_cpu_recommendation(vpa, names, recommended).items():
            amounts[name] = max(amount_m, amounts.get(name, 0))
    return amounts


def weight_rule(rules: Sequence[WeightRule], pod: PodInfo, lookups: Lookups) -> WeightRule | None:
    """The first rule that matches the pod, or None (weight 1)."""
    if not rules:
        return None
    namespace_labels = lookups.namespace_labels(pod.namespace) or {}
    return next(
        (
            rule
            for rule in rules
            if rule.matches(
                priority_class=pod.priority_class,
                labels=pod.labels,
                namespace_labels=namespace_labels,
            )
        ),
        None,
    )


def targeting_vpas(pod: PodInfo, lookups: Lookups) -> list[Mapping[str, Any]]:
    """The namespace's VPAs whose target is on the pod's chain of controllers."""
    vpas = list(lookups.vpas(pod.namespace))
    if not vpas:
        return []
    chain = owner_chain(pod.owners, lambda owner: lookups.controller_of(pod.namespace, owner))
    return [vpa for vpa in vpas if vpa_targets_pod(vpa, pod, chain)]


def decide_node(
    view: NodeView, settings: Settings, *, remembered: Remembered = FROM_STATUS
) -> NodeDecision:
    """The node's decision under ``settings`` (the top-level ones; the pool is resolved
    here)."""
    node = view.node
    node_settings, pool = settings_for_node(settings, node.labels)
    lookups = view.lookups
    managed: list[PodInfo] = []
    unmanaged: list[tuple[PodInfo, Ineligible]] = []
    fresh: list[PodInfo] = []
    retry: float | None = None
    for cached in view.pods:
        pod = excluding(cached, node_settings.excluded_containers)
        reason = pod_gate(node_settings, pod, node=node, lookups=lookups)
        if reason is None:
            remaining = remembered.backoff_remaining(pod, node_settings)
            if remaining > 0:
                retry = remaining if retry is None else min(retry, remaining)
                reason = Ineligible.BACKED_OFF
            elif pod.resize_pending == INFEASIBLE and not remembered.infeasible_acknowledged(pod):
                fresh.append(pod)
                reason = Ineligible.BACKED_OFF
        if reason is None:
            managed.append(pod)
        else:
            unmanaged.append((pod, reason))
    result = compute_node(
        NodeInput(
            name=node.name,
            allocatable_m=node.allocatable_m,
            booked_m=booked_cpu_m(view.pods),
            pods=managed,
            limit_ranges={
                ns: lookups.limit_range_caps(ns) for ns in {p.namespace for p in managed}
            },
            vpa_floors={
                pod.uid: wanted
                for pod in managed
                if (wanted := vpa_recommended(pod, lookups, Recommended.UPPER_BOUND))
            },
            weights={
                pod.uid: rule
                for pod in managed
                if (rule := weight_rule(node_settings.weights, pod, lookups)) is not None
            },
        ),
        node_settings,
    )
    return NodeDecision(
        node=node,
        settings=node_settings,
        pool=pool,
        node_gate=node_ineligibility(node_settings, node),
        result=result,
        unmanaged=tuple(unmanaged),
        fresh_infeasible=tuple(fresh),
        unreadable=view.unreadable,
        retry_after=retry,
    )
