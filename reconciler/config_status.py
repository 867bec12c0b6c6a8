"""The HeadroomConfig status the reconciler reports: counts and a Ready condition."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Summary:
    generation: int | None
    managed_pods: int
    managed_nodes: int
    dry_run: bool
    # Why the config could not be used, or None. An invalid config freezes every limit:
    # falling back to the defaults could enrol namespaces the operator's selector left out.
    invalid: str | None = None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def ready_condition(summary: Summary) -> dict[str, Any]:
    scope = (
        f"managing {_plural(summary.managed_pods, 'pod')} "
        f"on {_plural(summary.managed_nodes, 'node')}"
    )
    if summary.invalid is not None:
        status, reason = "False", "InvalidConfig"
        message = f"config rejected, limits frozen until it is fixed: {summary.invalid}"
    elif summary.dry_run:
        status, reason, message = "True", "DryRun", f"dry-run; {scope}"
    else:
        status, reason, message = "True", "Enforcing", f"enforcing; {scope}"
    condition: dict[str, Any] = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
    }
    if summary.generation is not None:
        condition["observedGeneration"] = summary.generation
    return condition


def desired_status(
    summary: Summary, *, current: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The status to write; `lastTransitionTime` moves only when the condition's status does."""
    condition = ready_condition(summary)
    previous = _ready(current)
    if previous is not None and previous.get("status") == condition["status"]:
        condition["lastTransitionTime"] = previous.get("lastTransitionTime")
    if not condition.get("lastTransitionTime"):
        condition["lastTransitionTime"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {
        "managedPods": summary.managed_pods,
        "managedNodes": summary.managed_nodes,
        "conditions": [condition],
    }
    if summary.generation is not None:
        status["observedGeneration"] = summary.generation
    return status


def _ready(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    for condition in (status or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition
    return None


def status_differs(desired: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    current = current or {}
    return any(current.get(key) != value for key, value in desired.items())
