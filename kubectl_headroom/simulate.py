"""``kubectl headroom simulate``: what Headroom would do to every pod, before anything changes.

It loads a snapshot into the shared cluster cache and runs the reconciler's own decision
for every node (``app.core.decision.decide_node``: the same pools, gates, booking and pure
policy) under a what-if HeadroomConfig and enrolment. It never writes. Pods whose kubelet
reports an ``Infeasible`` resize count as backed off, as the reconciler backs them off
from that report.
"""

import dataclasses
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple

from app.core.cluster import listed_cache
from app.core.config import LabelSelector, Settings
from app.core.decision import decide_node
from app.core.eligibility import Ineligible, namespace_enrolled
from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy import NodeResult, PodResult, Reason
from app.core.quantity import QuantityError, parse_cpu_millis
from app.core.views import LIMITS_CPU
from kubectl_headroom.snapshot import Obj, Snapshot

# Namespace-gate stand-ins: simulate decides enrolment itself (with --enroll/--unenroll),
# then hands the shared gates a selector every namespace passes.
_EVERY_NAMESPACE: Final = LabelSelector(())


class Action(StrEnum):
    """What the reconciler would do to a managed pod's limit."""

    RAISE = "raise"
    LOWER = "lower"
    # The pod has no limit yet (on some container): Headroom sets one.
    SET = "set"
    # At the target, or within the deadband.
    KEEP = "keep"
    # Any allowed limit would make the pod Guaranteed.
    SKIP = "skip"


@dataclass(frozen=True)
class WhatIf:
    enroll: frozenset[str] = frozenset()
    unenroll: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NodeOutcome:
    name: str
    pool: str | None
    dry_run: bool
    result: NodeResult


# A NamedTuple: one per managed pod, built three times faster than a frozen dataclass.
class PodOutcome(NamedTuple):
    pod: PodInfo
    node: NodeOutcome
    result: PodResult
    action: Action
    # "quota/<name>" or "limitrange": what would refuse the resize; None when nothing.
    blocked_by: str | None

    @property
    def after_m(self) -> int:
        """The limit once Headroom has acted (on an enforcing node, unblocked)."""
        if self.action in (Action.KEEP, Action.SKIP) or self.blocked_by is not None:
            return self.result.current_m
        return self.result.target_m


class Unmanaged(NamedTuple):
    """A pod Headroom would not manage, and the gate that excludes it."""

    pod: PodInfo
    reason: Ineligible


@dataclass(frozen=True)
class Simulation:
    nodes: Sequence[NodeOutcome]
    pods: Sequence[PodOutcome]
    unmanaged: Sequence[Unmanaged]
    enrolled: Sequence[str]
    # What --enroll could not do (no such namespace, excluded by the config).
    notes: Sequence[str] = ()
    # Pods the snapshot holds that cannot be read (a malformed quantity): skipped, as the
    # reconciler skips them.
    unreadable: Sequence[str] = ()


def enrolled_namespaces(
    namespaces: Iterable[Obj], settings: Settings, what_if: WhatIf = WhatIf()
) -> tuple[list[str], list[str]]:
    """The namespaces enrolled under the what-if (by default none: those the config
    enrols), and notes on --enroll/--unenroll."""
    names = {ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in namespaces}
    notes = [f"--enroll {name}: no such namespace" for name in sorted(what_if.enroll - set(names))]
    notes += [
        f"--enroll {name}: spec.excludedNamespaces lists it, so it stays unmanaged"
        for name in sorted(what_if.enroll & settings.excluded_namespaces)
    ]
    enrolled = sorted(
        name
        for name, labels in names.items()
        if name not in what_if.unenroll
        and name not in settings.excluded_namespaces
        and (name in what_if.enroll or namespace_enrolled(settings, name=name, labels=labels))
    )
    return enrolled, notes


def simulate(
    snapshot: Snapshot,
    settings: Settings,
    *,
    what_if: WhatIf = WhatIf(),
    progress: Callable[[int, int], None] | None = None,
) -> Simulation:
    enrolled, notes = enrolled_namespaces(snapshot.namespaces, settings, what_if)
    chosen = set(enrolled)
    cache = listed_cache(
        nodes=snapshot.nodes,
        # The what-if enrolment: an enrolled namespace answers the opened namespace gate,
        # any other is unknown to the cache (not enrolled). Labels stay, for weight rules.
        namespaces=(ns for ns in snapshot.namespaces if ns["metadata"]["name"] in chosen),
        limit_ranges=snapshot.limit_ranges,
        vpas=snapshot.vpas or (),
        pods=snapshot.pods,
        replica_sets=snapshot.replica_sets,
        jobs=snapshot.jobs,
    )
    # The namespace gate opened: enrolment is decided above.
    opened = dataclasses.replace(
        settings, namespace_selector=_EVERY_NAMESPACE, excluded_namespaces=frozenset()
    )
    nodes: list[NodeOutcome] = []
    outcomes: list[PodOutcome] = []
    unmanaged: list[Unmanaged] = []
    for index, node in enumerate(snapshot.nodes):
        view = cache.node_view(node["metadata"]["name"])
        assert view is not None  # loaded above
        decision = decide_node(view, opened)
        result = decision.result
        outcome = NodeOutcome(
            name=result.name, pool=decision.pool, dry_run=decision.settings.dry_run, result=result
        )
        nodes.append(outcome)
        unmanaged.extend(Unmanaged(pod, reason) for pod, reason in decision.unmanaged)
        outcomes.extend(
            PodOutcome(
                pod=r.pod,
                node=outcome,
                result=r,
                action=_action(r),
                blocked_by=_limit_range_block(r, cache.limit_range_caps(r.pod.namespace)),
            )
            for r in result.pods
        )
        if progress is not None:
            progress(index + 1, len(snapshot.nodes))
    return Simulation(
        nodes=nodes,
        pods=_quota_blocks(outcomes, snapshot.quotas),
        unmanaged=unmanaged,
        enrolled=enrolled,
        notes=notes,
        unreadable=[u.key for u in cache.unreadable()],
    )


def _action(result: PodResult) -> Action:
    if result.reason is Reason.QOS_GUARD:
        return Action.SKIP
    if not result.patch:
        return Action.KEEP
    if result.current_m == 0:
        return Action.SET
    return Action.RAISE if result.target_m > result.current_m else Action.LOWER


def _limit_range_block(result: PodResult, caps: LimitRangeCaps) -> str | None:
    """Whether LimitRanger would refuse the resize: targets stay under every cap, except
    when a cap is below the request itself (the limit can then go no lower than that)."""
    if caps == NO_LIMIT_RANGE_CAPS or not result.patch:
        return None
    pod_cap = caps.pod_cap_m(result.request_m)
    if pod_cap is not None and pod_cap < result.target_m:
        return "limitrange"
    requests = {(c.name, c.sidecar): c.cpu_request_m for c in result.pod.facts.cpu_containers}
    for limit in result.containers:
        cap = caps.container_cap_m(requests[(limit.name, limit.sidecar)])
        if cap is not None and cap < limit.limit_m:
            return "limitrange"
    return None


def _quota_blocks(outcomes: list[PodOutcome], quotas: Iterable[Obj]) -> list[PodOutcome]:
    """Mark the raises a ``limits.cpu`` ResourceQuota would refuse.

    Quota admission charges each raise's increase against the quota's remaining room
    (``hard - used``) and refuses a raise that does not fit. Raises are charged in the
    order of the listing (node, then pod), the same for every run; the reconciler's real
    order can differ, so which of a namespace's pods are refused is an estimate, the
    count of refusals is not.
    """
    room: dict[str, tuple[str, int]] = {}
    for quota in quotas:
        left = _quota_room(quota)
        if left is None:
            continue
        namespace = quota["metadata"]["namespace"]
        # The tightest quota of a namespace is the one that refuses first.
        if namespace not in room or left < room[namespace][1]:
            room[namespace] = (quota["metadata"]["name"], left)
    if not room:
        return outcomes
    for index, outcome in enumerate(outcomes):
        namespace = outcome.pod.namespace
        if (
            namespace in room
            and outcome.blocked_by is None
            and outcome.action in (Action.RAISE, Action.SET)
        ):
            name, left = room[namespace]
            increase = outcome.result.target_m - outcome.result.current_m
            if increase > left:
                outcomes[index] = outcome._replace(blocked_by=f"quota/{name}")
            else:
                room[namespace] = (name, left - increase)
    return outcomes


def _quota_room(quota: Obj) -> int | None:
    """``hard - used`` for ``limits.cpu`` in millicores, or None without such a limit."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    if LIMITS_CPU not in hard:
        return None
    status = quota.get("status") or {}
    try:
        limit = parse_cpu_millis(str((status.get("hard") or hard)[LIMITS_CPU]))
        used = parse_cpu_millis(str((status.get("used") or {}).get(LIMITS_CPU, "0")))
    except QuantityError:
        return 0
    return max(limit - used, 0)


class SortKey(StrEnum):
    NODE = "node"
    POD = "pod"
    CHANGE = "change"
    TARGET = "target"


@dataclass(frozen=True)
class View:
    """What to show of a simulation: selecting never changes a computed number."""

    nodes: Sequence[NodeOutcome]
    pods: Sequence[PodOutcome]
    unmanaged: Sequence[Unmanaged]

    @property
    def not_managed(self) -> dict[Ineligible, int]:
        """The unmanaged pods shown, counted by the gate that excludes them."""
        return dict(sorted(Counter(u.reason for u in self.unmanaged).items()))


def select(
    simulation: Simulation,
    *,
    namespaces: Collection[str] = (),
    nodes: Collection[str] = (),
    selector: LabelSelector | None = None,
    sort: SortKey = SortKey.NODE,
) -> View:
    """The pods in ``namespaces``, on ``nodes`` and matching ``selector`` (each when given),
    sorted, and the nodes: those named, or with pods shown when pods are selected."""

    def shown(pod: PodInfo) -> bool:
        return (
            (not namespaces or pod.namespace in namespaces)
            and (not nodes or pod.node_name in nodes)
            and (selector is None or selector.matches(pod.labels))
        )

    pods = sort_pods([p for p in simulation.pods if shown(p.pod)], sort)
    by_pods = bool(namespaces or selector)
    with_pods = {p.node.name for p in pods}
    return View(
        nodes=[
            n
            for n in simulation.nodes
            if (not nodes or n.name in nodes) and (not by_pods or n.name in with_pods)
        ],
        pods=pods,
        unmanaged=[u for u in simulation.unmanaged if shown(u.pod)],
    )


# Every order ends by namespace and name, so a listing is the same on every run.
_SORT_KEYS: Final[dict[SortKey, Callable[[PodOutcome], tuple[Any, ...]]]] = {
    SortKey.NODE: lambda p: (p.node.name, p.pod.namespace, p.pod.name),
    SortKey.POD: lambda p: (p.pod.namespace, p.pod.name),
    SortKey.CHANGE: lambda p: (-abs(p.after_m - p.result.current_m), p.pod.namespace, p.pod.name),
    SortKey.TARGET: lambda p: (-p.result.target_m, p.pod.namespace, p.pod.name),
}


def sort_pods(pods: Sequence[PodOutcome], key: SortKey) -> list[PodOutcome]:
    return sorted(pods, key=_SORT_KEYS[key])


@dataclass(frozen=True)
class Totals:
    pods: int
    raised: int
    lowered: int
    unchanged: int
    # Pods that have no limit yet and would get one.
    first_limits: int
    limits_before_m: int
    limits_after_m: int
    # Pods without a limit before, and after (those left unlimited).
    unlimited_before: int
    unlimited_after: int
    blocked_by_quota: int
    blocked_by_limit_range: int
    # Pods on dry-run nodes: computed and announced, never resized.
    on_dry_run_nodes: int


def totals(pods: Sequence[PodOutcome]) -> Totals:
    actions = Counter(Action.KEEP if p.blocked_by is not None else p.action for p in pods)
    blocked = Counter((p.blocked_by or "").split("/")[0] for p in pods)
    return Totals(
        pods=len(pods),
        raised=actions[Action.RAISE],
        lowered=actions[Action.LOWER],
        unchanged=actions[Action.KEEP] + actions[Action.SKIP],
        first_limits=actions[Action.SET],
        limits_before_m=sum(p.result.current_m for p in pods),
        limits_after_m=sum(p.after_m for p in pods),
        unlimited_before=sum(1 for p in pods if not p.result.current_m),
        unlimited_after=sum(1 for p in pods if not p.after_m),
        blocked_by_quota=blocked["quota"],
        blocked_by_limit_range=blocked["limitrange"],
        on_dry_run_nodes=sum(1 for p in pods if p.node.dry_run),
    )
