"""``kubectl headroom status``: mode, scope, leader and recent outcomes."""

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from app.core.config import NodePool, Settings, settings_for_node
from app.core.quantity import format_cpu_millis

# Events the reconciler emits, in the order operators care about them.
REASONS = ("CPULimitAdjusted", "ResizeInfeasible", "ResizeForbidden")


@dataclass(frozen=True)
class PoolStatus:
    name: str
    nodes: int
    mode: str
    overrides: Sequence[str]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overrides": list(self.overrides)}


@dataclass(frozen=True)
class LeaderStatus:
    """Who holds the reconciler's Lease, and until when (by its holder's last renewal)."""

    holder: str
    renewed: str
    expires: str
    # Seconds until the lease expires unless renewed; negative once it has expired.
    expires_in: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "renewTime": self.renewed,
            "expires": self.expires,
            "expiresInSeconds": round(self.expires_in, 1),
        }

    def text(self) -> str:
        if not self.holder:
            return "none (the lease is free)"
        if self.expires_in < 0:
            return f"none: {self.holder}'s lease expired {-self.expires_in:.0f}s ago"
        return f"{self.holder} (lease expires in {self.expires_in:.0f}s unless renewed)"


def leader_status(lease: Mapping[str, Any] | None, *, now: datetime) -> LeaderStatus | None:
    """The Lease's holder and expiry; None when there is no Lease (no leader elected)."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    renewed = str(spec.get("renewTime") or "")
    duration = float(spec.get("leaseDurationSeconds") or 0)
    try:
        renewed_at = datetime.fromisoformat(renewed.replace("Z", "+00:00"))
    except ValueError:
        return LeaderStatus(holder=holder, renewed=renewed, expires="", expires_in=0.0)
    expires = renewed_at + timedelta(seconds=duration)
    return LeaderStatus(
        holder=holder,
        renewed=renewed,
        expires=expires.isoformat().replace("+00:00", "Z"),
        expires_in=(expires - now).total_seconds(),
    )


@dataclass(frozen=True)
class Status:
    configured: bool
    mode: str
    ready: str
    managed_namespaces: Sequence[str]
    managed_pods: int | None
    managed_nodes: int | None
    outcomes: Mapping[str, int]
    recent: Sequence[Mapping[str, str]] = ()
    pools: Sequence[PoolStatus] = ()
    # Nodes in no pool, which run on the top-level settings.
    nodes_without_pool: int = 0
    leader: LeaderStatus | None = None

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
            "pools": [pool.as_dict() for pool in self.pools],
            "nodesWithoutPool": self.nodes_without_pool,
            "leader": None if self.leader is None else self.leader.as_dict(),
        }


def summarize(
    *,
    config: Mapping[str, Any] | None,
    settings: Settings,
    managed_namespaces: Sequence[str],
    events: Sequence[Mapping[str, Any]],
    recent: int = 5,
    node_labels: Sequence[Mapping[str, str]] = (),
    leader: LeaderStatus | None = None,
) -> Status:
    status = (config or {}).get("status") or {}
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    ours = sorted((e for e in events if e.get("reason") in REASONS), key=event_time)
    counts = Counter(str(e["reason"]) for e in ours)
    members = Counter(settings_for_node(settings, labels)[1] for labels in node_labels)
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
        pools=[
            PoolStatus(
                name=pool.name,
                nodes=members[pool.name],
                mode="dry-run" if settings.dry_run or pool.overrides.dry_run else "enforcing",
                overrides=overrides_text(pool),
            )
            for pool in settings.node_pools
        ],
        nodes_without_pool=members[None],
        leader=leader,
    )


def overrides_text(pool: NodePool) -> list[str]:
    """The pool's overrides as ``field=value``, in the CRD's spelling."""
    o = pool.overrides
    # (field, override, how to print it); an override left None is not shown.
    fields: tuple[tuple[str, Any, Callable[[Any], str]], ...] = (
        ("maxMultiplier", o.max_multiplier, _number),
        ("minBurstFloor", o.min_burst_floor_m, format_cpu_millis),
        ("quantum", o.quantum_m, format_cpu_millis),
        ("deadband.growPercent", o.grow_percent, str),
        ("deadband.shrinkPercent", o.shrink_percent, str),
        ("dryRun", o.dry_run, lambda flag: str(flag).lower()),
        ("initialMultiplier", o.initial_multiplier, _number),
        ("weights", o.weights, lambda rules: f"{len(rules)} rule{'' if len(rules) == 1 else 's'}"),
    )
    return [f"{name}={show(value)}" for name, value, show in fields if value is not None]


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def event_time(event: Mapping[str, Any]) -> str:
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        if event.get(key):
            return str(event[key])
    return str(event.get("metadata", {}).get("creationTimestamp", ""))


def _involved(event: Mapping[str, Any]) -> str:
    ref = event.get("involvedObject") or event.get("regarding") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"
