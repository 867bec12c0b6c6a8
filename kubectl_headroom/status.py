"""``kubectl headroom status``: mode, scope and recent outcomes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.config import Settings

# Events the reconciler emits, in the order operators care about them.
REASONS = ("CPULimitAdjusted", "ResizeInfeasible", "ResizeForbidden")


@dataclass(frozen=True)
class Status:
    configured: bool
    mode: str
    ready: str
    managed_namespaces: Sequence[str]
    managed_pods: int | None
    managed_nodes: int | None
    outcomes: Mapping[str, int]
    recent: Sequence[Mapping[str, str]] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "configured": self.configured,
            "mode": self.mode,
            "ready": self.ready,
            "managedNamespaces": list(self.managed_namespaces),
            "managedPods": self.managed_pods,
            "managedNodes": self.managed_nodes,
            "outcomes": dict(self.outcomes),
            "recent": [dict(r) for r in self.recent],
        }


def summarize(
    *,
    config: Mapping[str, Any] | None,
    settings: Settings,
    managed_namespaces: Sequence[str],
    events: Sequence[Mapping[str, Any]],
    recent: int = 5,
) -> Status:
    status = (config or {}).get("status") or {}
    ready = next(
        (c for c in status.get("conditions") or () if c.get("type") == "Ready"),
        None,
    )
    ours = [e for e in events if e.get("reason") in REASONS]
    ours.sort(key=event_time)
    counts = Counter(str(e["reason"]) for e in ours)
    return Status(
        configured=config is not None,
        mode="dry-run" if settings.dry_run else "enforcing",
        ready=str(ready.get("message", "")) if ready else "no status yet (is the reconciler up?)",
        managed_namespaces=managed_namespaces,
        managed_pods=status.get("managedPods"),
        managed_nodes=status.get("managedNodes"),
        outcomes={reason: counts.get(reason, 0) for reason in REASONS},
        recent=[
            {
                "time": event_time(e),
                "reason": str(e.get("reason", "")),
                "object": _involved(e),
                "message": str(e.get("message") or e.get("note") or ""),
            }
            for e in ours[-recent:]
        ],
    )


def event_time(event: Mapping[str, Any]) -> str:
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        if event.get(key):
            return str(event[key])
    return str(event.get("metadata", {}).get("creationTimestamp", ""))


def _involved(event: Mapping[str, Any]) -> str:
    ref = event.get("involvedObject") or event.get("regarding") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"
