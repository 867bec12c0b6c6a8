"""How ``kubectl headroom simulate`` prints: tables for people, JSON or YAML for tools."""

import sys
from typing import Any, TextIO

from app.core.explain import factor_text
from app.core.explain import millis as _m
from app.core.policy import Cap
from kubectl_headroom.simulate import Simulation, View, totals
from kubectl_headroom.table import render

NODE_HEADERS = ("NODE", "POOL", "MODE", "ALLOCATABLE", "SLACK", "FACTOR", "MANAGED")
POD_HEADERS = (
    "POD", "NODE", "REQUEST", "CURRENT", "SIMULATED", "BOUND BY", "ACTION", "BLOCKED",
)  # fmt: skip


def table(simulation: Simulation, view: View) -> str:
    node_rows = [
        [
            n.name,
            n.pool or "-",
            "dry-run" if n.dry_run else "enforcing",
            _m(n.result.allocatable_m),
            _m(n.result.slack_m),
            factor_text(n.result.factor),
            str(n.result.pod_count),
        ]
        for n in view.nodes
    ]
    pod_rows = [
        [
            p.pod.key + (" (pod-level)" if p.pod.facts.pod_resources is not None else ""),
            p.node.name,
            _m(p.result.request_m),
            _m(p.result.current_m) if p.result.current_m else "unset",
            _m(p.result.target_m) if p.result.target_m else "unset",
            # A cap bounds the limit only when the formula asked for more; a RequestsOnly
            # VPA's upper bound bounds it from below when it lifted it.
            str(p.result.hi_cap)
            if p.result.capped
            else str(Cap.VPA_UPPER_BOUND)
            if p.result.vpa_m
            else "-",
            str(p.action),
            p.blocked_by or "",
        ]
        for p in view.pods
    ]
    pod_headers: tuple[str, ...] = POD_HEADERS
    if any(p.result.weight_rule is not None for p in view.pods):
        # Weights are shown where some rule weighs a pod shown.
        pod_headers = (*POD_HEADERS[:3], "WEIGHT", *POD_HEADERS[3:])
        for p, row in zip(view.pods, pod_rows, strict=True):
            row.insert(3, str(p.result.weight))
    enrolled = ", ".join(simulation.enrolled) or "none"
    sections = [
        f"Enrolled namespaces: {enrolled}",
        render(NODE_HEADERS, node_rows) if node_rows else "No nodes match.",
        render(pod_headers, pod_rows) if pod_rows else "No managed pods match.",
        summary(simulation, view),
    ]
    return "\n\n".join(sections)


def summary(simulation: Simulation, view: View) -> str:
    t = totals(view.pods)
    lines = [
        f"Managed pods: {t.pods}: {t.raised} raised, {t.lowered} lowered, {t.first_limits} given a "
        f"first limit, {t.unchanged} unchanged (deadband, at target or QoS guard)",
        f"Sum of limits: {_m(t.limits_before_m)} -> {_m(t.limits_after_m)} "
        f"(pods without a limit: {t.unlimited_before} -> {t.unlimited_after})",
        f"Blocked: {t.blocked_by_quota} by a limits.cpu ResourceQuota, "
        f"{t.blocked_by_limit_range} by a LimitRange",
    ]
    if t.on_dry_run_nodes:
        lines.append(
            f"On dry-run nodes: {t.on_dry_run_nodes} of these pods (computed and announced, "
            "not resized)"
        )
    not_managed = view.not_managed
    if not_managed:
        reasons = ", ".join(f"{reason} {count}" for reason, count in not_managed.items())
        lines.append(f"Not managed: {sum(not_managed.values())} pods ({reasons})")
    if simulation.unreadable:
        lines.append(f"Skipped (invalid quantity): {', '.join(simulation.unreadable)}")
    return "\n".join(lines)


def document(simulation: Simulation, view: View) -> dict[str, Any]:
    """The machine-readable result (``-o json``/``-o yaml``)."""
    summary = totals(view.pods)
    return {
        "enrolledNamespaces": list(simulation.enrolled),
        "nodes": [
            {
                "node": n.name,
                "pool": n.pool,
                "mode": "dry-run" if n.dry_run else "enforcing",
                "allocatable": _m(n.result.allocatable_m),
                "booked": _m(n.result.booked_m),
                "slack": _m(n.result.slack_m),
                "factor": factor_text(n.result.factor),
                "managedPods": n.result.pod_count,
                "managedRequests": _m(n.result.managed_m),
                "weightedRequests": _m(n.result.weighted_m),
            }
            for n in view.nodes
        ],
        "pods": [
            {
                "namespace": p.pod.namespace,
                "pod": p.pod.name,
                "node": p.node.name,
                "pool": p.node.pool,
                "podLevel": p.pod.facts.pod_resources is not None,
                "request": _m(p.result.request_m),
                "weight": p.result.weight,
                "weightRule": None if p.result.weight_rule is None else p.result.weight_rule.path,
                "currentLimit": _m(p.result.current_m) if p.result.current_m else None,
                "simulatedLimit": _m(p.result.target_m) if p.result.target_m else None,
                # How the simulated limit splits over the containers (none at pod level).
                "simulatedContainerLimits": {
                    ("init:" if c.sidecar else "") + c.name: _m(c.limit_m)
                    for c in p.result.containers
                },
                "ceiling": _m(p.result.hi_m),
                "ceilingBoundBy": str(p.result.hi_cap),
                "capped": p.result.capped,
                "vpaUpperBound": _m(p.result.vpa_m) if p.result.vpa_m else None,
                "action": str(p.action),
                "reason": str(p.result.reason),
                "patch": p.result.patch,
                "blockedBy": p.blocked_by,
                "limitAfter": _m(p.after_m) if p.after_m else None,
            }
            for p in view.pods
        ],
        "totals": {
            "pods": summary.pods,
            "raised": summary.raised,
            "lowered": summary.lowered,
            "firstLimits": summary.first_limits,
            "unchanged": summary.unchanged,
            "limitsBefore": _m(summary.limits_before_m),
            "limitsAfter": _m(summary.limits_after_m),
            "withoutLimitBefore": summary.unlimited_before,
            "withoutLimitAfter": summary.unlimited_after,
            "blockedByQuota": summary.blocked_by_quota,
            "blockedByLimitRange": summary.blocked_by_limit_range,
            "onDryRunNodes": summary.on_dry_run_nodes,
        },
        "notManaged": {str(reason): count for reason, count in view.not_managed.items()},
        "notManagedPods": [
            {"namespace": u.pod.namespace, "pod": u.pod.name, "reason": str(u.reason)}
            for u in view.unmanaged
        ],
        "unreadablePods": list(simulation.unreadable),
    }


class Progress:
    """Progress on a terminal's stderr (listing, then computing); silent otherwise."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._enabled = stream.isatty()
        self._shown = False

    def listed(self, what: str, count: int) -> None:
        self._show(f"listing {what}: {count:,}")

    def computed(self, done: int, total: int) -> None:
        # Every node would flood a slow terminal; every 1% is enough to see it move.
        if done == total or done % max(total // 100, 1) == 0:
            self._show(f"simulating nodes: {done:,}/{total:,}")

    def done(self) -> None:
        if self._shown:
            self._show("")  # clears the line
            self._shown = False

    def _show(self, text: str) -> None:
        if self._enabled:
            self._stream.write(f"\r\033[K{text}")
            self._stream.flush()
            self._shown = True
