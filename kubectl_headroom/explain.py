"""``kubectl headroom explain POD``: the arithmetic behind a pod's CPU limit.

Reads the pod's node, its pods and the namespaced objects about them into the shared
cluster cache and runs the reconciler's own decision for that node
(``app.core.decision.decide_node``: the same pools, gates, back-off from a kubelet's
Infeasible report, LimitRange caps and pure policy), then prints every term of the
formula, so a throttled tenant can see who booked the node. A neighbour whose quantities
cannot be read is skipped, with the reason, as the reconciler skips it.
"""

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.cluster import Unreadable, listed_cache
from app.core.config import Settings
from app.core.decision import decide_node
from app.core.eligibility import Ineligible, node_reason
from app.core.explain import annotation_fields, explain, factor_text, shown_slack
from app.core.explain import millis as _m
from app.core.policy import NodeResult, PodResult, half_up_div
from app.core.quantity import format_cpu_millis, parse_cpu_millis
from app.core.views import object_key

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Booking:
    pod: str
    # What the scheduler books for the pod: init containers, sidecars and overhead included.
    booked_m: int
    managed: bool


@dataclass(frozen=True)
class PodExplanation:
    pod: str
    node: str
    ineligible: Ineligible | None
    # Why the node's pods are not managed, in words, when a node gate says so.
    node_gate: str | None
    node_result: NodeResult
    result: PodResult | None
    bookings: Sequence[Booking]
    # The settings on the pod's node: its pool's overrides applied.
    settings: Settings
    pool: str | None = None
    # Neighbours whose quantities cannot be read: skipped, booking nothing.
    skipped: Sequence[Unreadable] = ()
    # Why the pod's own quantities cannot be read, when they cannot.
    unreadable: str | None = None

    @property
    def annotation_fields(self) -> dict[str, Any]:
        """The numbers the status annotation carries, formatted the same way."""
        if self.result is None:
            return {}
        return annotation_fields(
            explain(self.node_result, self.result, dry_run=self.settings.dry_run, pool=self.pool)
        )


def explain_pod(
    *,
    pod: Obj,
    node: Obj,
    node_pods: Sequence[Obj],
    namespaces: Sequence[Obj],
    limit_ranges: Sequence[Obj],
    vpas: Sequence[Obj],
    settings: Settings,
    replica_sets: Sequence[Obj] = (),
    jobs: Sequence[Obj] = (),
    what_if_request_m: int | None = None,
) -> PodExplanation:
    """The node's decision (``app.core.decision``) as it concerns ``pod``;
    ``what_if_request_m`` replaces its request."""
    target_uid = pod["metadata"].get("uid")
    raw_pods = [p for p in node_pods if p["metadata"].get("uid") != target_uid]
    raw_pods.append(_with_request(pod, what_if_request_m) if what_if_request_m else pod)
    cache = listed_cache(
        nodes=[node],
        namespaces=namespaces,
        limit_ranges=limit_ranges,
        vpas=vpas,
        pods=raw_pods,
        replica_sets=replica_sets,
        jobs=jobs,
    )
    view = cache.node_view(node["metadata"]["name"])
    assert view is not None  # applied just above
    decision = decide_node(view, settings)
    target_key = object_key(pod)
    target = cache.pods.get(target_key)
    unreadable = next((u for u in decision.unreadable if u.key == target_key), None)
    result = (
        None
        if target is None
        else next((r for r in decision.result.pods if r.pod.uid == target.uid), None)
    )
    bookings = sorted(
        (
            Booking(pod=i.key, booked_m=i.facts.booked_m, managed=decision.reason(i) is None)
            for i in view.pods
            if i.books_cpu
        ),
        key=lambda b: (-b.booked_m, b.pod),
    )
    gate = decision.node_gate
    return PodExplanation(
        pod=target_key,
        node=decision.result.name,
        ineligible=None if target is None else decision.reason(target),
        node_gate=None if gate is None else node_reason(gate, decision.node),
        node_result=decision.result,
        result=result,
        bookings=bookings,
        settings=decision.settings,
        pool=decision.pool,
        skipped=tuple(u for u in decision.unreadable if u.key != target_key),
        unreadable=None if unreadable is None else unreadable.reason,
    )


def _with_request(pod: Obj, request_m: int) -> dict[str, Any]:
    """A copy of ``pod`` whose CPU requests are scaled to total ``request_m``."""
    changed = copy.deepcopy(dict(pod))
    spec = changed.get("spec", {})
    containers = [
        c
        for c in [*spec.get("containers", []), *spec.get("initContainers", [])]
        if (c in spec.get("containers", []) or c.get("restartPolicy") == "Always")
        and c.get("resources", {}).get("requests", {}).get("cpu")
    ]
    current = [parse_cpu_millis(str(c["resources"]["requests"]["cpu"])) for c in containers]
    total = sum(current)
    if not containers or total == 0:
        return changed
    # Proportional shares, rounded down; the last container takes what rounding left.
    shares = [request_m * millis // total for millis in current[:-1]]
    shares.append(request_m - sum(shares))
    for container, share in zip(containers, shares, strict=True):
        container["resources"]["requests"]["cpu"] = format_cpu_millis(max(share, 1))
    return changed


def render(explanation: PodExplanation, *, last_event: str | None) -> str:
    """The human-readable explanation."""
    node = explanation.node_result
    settings = explanation.settings
    pool = explanation.pool
    lines = [
        f"Pod {explanation.pod} on node {explanation.node}",
        f"Node pool: {pool} (its overrides apply)"
        if pool
        else "Node pool: none (top-level settings)",
    ]
    if explanation.unreadable is not None:
        lines.append(f"  not managed: its quantities cannot be read ({explanation.unreadable})")
    if explanation.ineligible is not None:
        lines.append(f"  not managed: {explanation.ineligible}")
    if explanation.node_gate is not None:
        lines.append(f"  node {explanation.node}: {explanation.node_gate}; its pods are left alone")
    lines += [
        "",
        f"Allocatable A = {_m(node.allocatable_m)}",
        "Booked by (CPU the scheduler books, largest first):",
    ]
    for booking in explanation.bookings:
        marker = "managed" if booking.managed else ""
        lines.append(f"  {booking.pod:<50} {_m(booking.booked_m):>8}  {marker}")
    for skipped in explanation.skipped:
        lines.append(f"  {skipped.key:<50} skipped: quantities cannot be read ({skipped.reason})")
    unbooked, overbooked = shown_slack(node.slack_m)
    lines += [
        f"Booked R = {_m(node.booked_m)}",
        f"Slack S = 0m: overbooked, R exceeds A by {_m(overbooked)}"
        if overbooked
        else f"Slack S = A - R = {_m(unbooked)}",
        f"Managed M = {_m(node.managed_m)} over N = {node.pod_count} pod(s)",
    ]
    weighted = node.weighted_m != node.managed_m
    if weighted:
        lines.append(f"Weighted W = sum of weight*request = {_m(node.weighted_m)}")
    lines.append(f"Factor F = 1 + S/{'W' if weighted else 'M'} = {factor_text(node.factor)}")
    result = explanation.result
    if result is not None:
        pod_level = result.pod.facts.pod_resources is not None
        level = " (pod-level resources: the limit is set at pod level)" if pod_level else ""
        lines += [
            "",
            f"This pod: request r = {_m(result.request_m)}{level}",
            f"  weight w = {result.weight} ({_weight_reason(result, settings)})",
        ]
        for kept in result.pod.facts.excluded:
            limit = "unset" if kept.cpu_limit_m is None else _m(kept.cpu_limit_m)
            lines.append(
                f"  {kept.name}: left to its owner (spec.excludedContainers), "
                f"request {_m(kept.cpu_request_m)} not in r, limit {limit} kept"
            )
        if node.slack_m > 0 and node.managed_m > 0:
            share = (
                half_up_div(node.slack_m * result.weight * result.request_m, node.weighted_m)
                if node.weighted_m
                else 0
            )
            floor = min(settings.min_burst_floor_m, half_up_div(node.slack_m, node.pod_count))
            term = "S*w*r/W" if weighted else "S*r/M"
            lines += [
                f"  proportional share {term} = {_m(share)}",
                f"  floor share min(minBurstFloor {_m(settings.min_burst_floor_m)}, S/N) "
                f"= {_m(floor)}",
                f"  raw = r + max(share, floor) = {_m(result.request_m + max(share, floor))}",
            ]
        else:
            lines.append("  no slack: raw = r")
        if result.vpa_m:
            lines.append(
                f"  RequestsOnly VPA upper bound = {_m(result.vpa_m)}: the target is never below it"
            )
        lines += [
            f"  ceiling hi = {_m(result.hi_m)} (bound by {result.hi_cap})",
            f"  target = {_m(result.target_m)} (quantum {_m(settings.quantum_m)})",
            f"  current limit = {_m(result.current_m) if result.current_m else 'unset'}",
            f"  decision: {'patch' if result.patch else 'no patch'} ({result.reason})"
            + (" [dry-run: nothing is applied]" if settings.dry_run else ""),
        ]
    if last_event:
        lines += ["", f"Last CPULimitAdjusted: {last_event}"]
    return "\n".join(lines)


def _weight_reason(result: PodResult, settings: Settings) -> str:
    if result.weight_rule is not None:
        return f"by {result.weight_rule.path}"
    return "no weight rule matches" if settings.weights else "no weight rules"


def as_dict(explanation: PodExplanation) -> dict[str, Any]:
    """Machine-readable form; ``annotation`` holds the status annotation's fields."""
    node = explanation.node_result
    result = explanation.result
    document: dict[str, Any] = {
        "pod": explanation.pod,
        "node": explanation.node,
        "managed": explanation.ineligible is None,
        "ineligible": None if explanation.ineligible is None else str(explanation.ineligible),
        "nodeGate": explanation.node_gate,
        "pool": explanation.pool,
        "allocatable": _m(node.allocatable_m),
        "booked": _m(node.booked_m),
        "slack": _m(shown_slack(node.slack_m)[0]),
        "overbooked": _m(shown_slack(node.slack_m)[1]),
        "managedRequests": _m(node.managed_m),
        "weightedRequests": _m(node.weighted_m),
        "nodePods": node.pod_count,
        "factor": factor_text(node.factor),
        "bookings": [
            {"pod": b.pod, "booked": _m(b.booked_m), "managed": b.managed}
            for b in explanation.bookings
        ],
        "annotation": explanation.annotation_fields,
        "skipped": [{"pod": s.key, "reason": s.reason} for s in explanation.skipped],
        "unreadable": explanation.unreadable,
    }
    if result is not None:
        document.update(
            podLevel=result.pod.facts.pod_resources is not None,
            request=_m(result.request_m),
            currentLimit=_m(result.current_m),
            target=_m(result.target_m),
            ceiling=_m(result.hi_m),
            ceilingBoundBy=str(result.hi_cap),
            vpaUpperBound=_m(result.vpa_m) if result.vpa_m else None,
            weight=result.weight,
            weightRule=None if result.weight_rule is None else result.weight_rule.path,
            excludedContainers=[
                {
                    "name": kept.name,
                    "request": _m(kept.cpu_request_m),
                    "limit": None if kept.cpu_limit_m is None else _m(kept.cpu_limit_m),
                }
                for kept in result.pod.facts.excluded
            ],
            patch=result.patch,
            reason=str(result.reason),
        )
    return document
