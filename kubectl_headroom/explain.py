"""``kubectl headroom explain POD``: the arithmetic behind a pod's CPU limit.

Rebuilds the node's policy input from the API exactly as the reconciler does
(the same eligibility gates, the same LimitRange caps, the same pure policy) and
prints every term of the formula, so a throttled tenant can see who booked the node.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.config import Settings, settings_for_node
from app.core.eligibility import Ineligible, node_ineligibility, node_reason
from app.core.explain import explain, factor_text, shown_slack
from app.core.limitrange import limit_range_caps
from app.core.nodefeatures import resizes_pod_level
from app.core.nodes import node_facts
from app.core.pods import PodInfo, booked_cpu_m, pod_info_from_dict
from app.core.policy import NodeInput, NodeResult, PodResult, compute_node, half_up_div
from app.core.quantity import format_cpu_millis, parse_cpu_millis
from app.core.selection import ineligibility

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Booking:
    pod: str
    request_m: int
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

    @property
    def annotation_fields(self) -> dict[str, Any]:
        """The numbers the status annotation carries, formatted the same way."""
        if self.result is None:
            return {}
        ex = explain(self.node_result, self.result, dry_run=self.settings.dry_run, pool=self.pool)
        fields: dict[str, Any] = {
            "factor": ex.factor,
            "slack": f"{ex.slack_m}m",
            **({"overbooked": f"{ex.overbooked_m}m"} if ex.overbooked_m else {}),
            "managedRequests": f"{ex.managed_m}m",
            "nodePods": ex.node_pods,
            "targetLimit": f"{ex.target_m}m",
        }
        if ex.pool is not None:
            fields["pool"] = ex.pool
        return fields


def explain_pod(
    *,
    pod: Obj,
    node: Obj,
    node_pods: Sequence[Obj],
    namespace_labels: Mapping[str, Mapping[str, str]],
    limit_ranges: Mapping[str, Sequence[Obj]],
    vpas: Mapping[str, Sequence[Obj]],
    settings: Settings,
    what_if_request_m: int | None = None,
) -> PodExplanation:
    """The policy's view of ``pod`` on ``node``; ``what_if_request_m`` replaces its request."""
    target_uid = pod["metadata"].get("uid")
    raw_pods = [p for p in node_pods if p["metadata"].get("uid") != target_uid]
    raw_pods.append(_with_request(pod, what_if_request_m) if what_if_request_m else pod)
    infos = [pod_info_from_dict(p) for p in raw_pods]
    facts = node_facts(node)
    settings, pool = settings_for_node(settings, facts.labels)
    pod_level_resize = resizes_pod_level(node)
    managed: list[PodInfo] = []
    reasons: dict[str, Ineligible | None] = {}
    for info in infos:
        reason = ineligibility(
            settings,
            info,
            namespace_labels=namespace_labels.get(info.namespace),
            node=facts,
            vpas=vpas.get(info.namespace, ()),
            node_resizes_pod_level=pod_level_resize,
        )
        reasons[info.uid] = reason
        if reason is None:
            managed.append(info)
    allocatable = parse_cpu_millis(
        str(node.get("status", {}).get("allocatable", {}).get("cpu", "0"))
    )
    result = compute_node(
        NodeInput(
            name=node["metadata"]["name"],
            allocatable_m=allocatable,
            booked_m=booked_cpu_m(infos),
            pods=managed,
            limit_ranges={
                ns: limit_range_caps(limit_ranges.get(ns, ()))
                for ns in {p.namespace for p in managed}
            },
        ),
        settings,
    )
    target = next(i for i in infos if i.uid == target_uid)
    bookings = sorted(
        (
            Booking(pod=i.key, request_m=i.request_m, managed=reasons[i.uid] is None)
            for i in infos
            if not i.terminal
        ),
        key=lambda b: (-b.request_m, b.pod),
    )
    gate = node_ineligibility(settings, facts)
    return PodExplanation(
        pod=target.key,
        node=result.name,
        ineligible=reasons[target.uid],
        node_gate=None if gate is None else node_reason(gate, facts),
        node_result=result,
        result=next((r for r in result.pods if r.pod.uid == target_uid), None),
        bookings=bookings,
        settings=settings,
        pool=pool,
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
    assigned = 0
    for index, (container, millis) in enumerate(zip(containers, current, strict=True)):
        last = index == len(containers) - 1
        share = request_m - assigned if last else request_m * millis // total
        assigned += share
        container["resources"]["requests"]["cpu"] = format_cpu_millis(max(share, 1))
    return changed


def render(explanation: PodExplanation, *, last_event: str | None) -> str:
    """The human-readable explanation."""
    node = explanation.node_result
    settings = explanation.settings
    lines = [f"Pod {explanation.pod} on node {explanation.node}"]
    pool = explanation.pool
    lines.append(
        f"Node pool: {pool} (its overrides apply)"
        if pool
        else "Node pool: none (top-level settings)"
    )
    if explanation.ineligible is not None:
        lines.append(f"  not managed: {explanation.ineligible}")
    if explanation.node_gate is not None:
        lines.append(f"  node {explanation.node}: {explanation.node_gate}; its pods are left alone")
    lines += [
        "",
        f"Allocatable A = {_m(node.allocatable_m)}",
        "Booked by (CPU requests, largest first):",
    ]
    for booking in explanation.bookings:
        marker = "managed" if booking.managed else ""
        lines.append(f"  {booking.pod:<50} {_m(booking.request_m):>8}  {marker}")
    lines += [
        f"Booked R = {_m(node.booked_m)}",
        _slack_line(node.slack_m),
        f"Managed M = {_m(node.managed_m)} over N = {node.pod_count} pod(s)",
        f"Factor F = 1 + S/M = {factor_text(node.factor)}",
    ]
    result = explanation.result
    if result is not None:
        level = (
            " (pod-level resources: the limit is set at pod level)"
            if (result.pod.pod_resources is not None)
            else ""
        )
        lines += ["", f"This pod: request r = {_m(result.request_m)}{level}"]
        if node.slack_m > 0 and node.managed_m > 0:
            share = half_up_div(node.slack_m * result.request_m, node.managed_m)
            floor = min(settings.min_burst_floor_m, half_up_div(node.slack_m, node.pod_count))
            lines += [
                f"  proportional share S*r/M = {_m(share)}",
                f"  floor share min(minBurstFloor {_m(settings.min_burst_floor_m)}, S/N) "
                f"= {_m(floor)}",
                f"  raw = r + max(share, floor) = {_m(result.request_m + max(share, floor))}",
            ]
        else:
            lines.append("  no slack: raw = r")
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


def _m(millis: int) -> str:
    return f"{millis}m"


def _slack_line(slack_m: int) -> str:
    unbooked, overbooked = shown_slack(slack_m)
    if not overbooked:
        return f"Slack S = A - R = {_m(unbooked)}"
    return f"Slack S = 0m: overbooked, R exceeds A by {_m(overbooked)}"


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
        "nodePods": node.pod_count,
        "factor": factor_text(node.factor),
        "bookings": [
            {"pod": b.pod, "request": _m(b.request_m), "managed": b.managed}
            for b in explanation.bookings
        ],
        "annotation": explanation.annotation_fields,
    }
    if result is not None:
        document.update(
            podLevel=result.pod.pod_resources is not None,
            request=_m(result.request_m),
            currentLimit=_m(result.current_m),
            target=_m(result.target_m),
            ceiling=_m(result.hi_m),
            ceilingBoundBy=str(result.hi_cap),
            patch=result.patch,
            reason=str(result.reason),
        )
    return document
