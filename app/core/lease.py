"""Whether a live reconciler holds its Lease: the webhook seeds birth limits only then.

The reconciler that writes renews the Lease every retry period (``reconciler.leader``)
and gives it up when it stops. A Lease is live while it has a holder and neither clock
says its duration has run out: the renew time it carries against this process's wall
clock (a restarted webhook must not trust a Lease a dead reconciler left), and the moment
this process last saw the Lease change against its monotonic clock (a wall clock running
behind must not stretch it). Either clock being wrong can only make a live Lease look
expired, which costs birth limits the reconciler sets anyway, never the other way round.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    renewed: datetime | None
    duration_seconds: float


def lease_record(obj: Mapping[str, Any]) -> LeaseRecord:
    """What liveness reads of a coordination.k8s.io Lease as the API returns it."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        renewed=_micro_time(spec.get("renewTime")),
        duration_seconds=float(duration) if isinstance(duration, int) else 0.0,
    )


def lease_live(record: LeaseRecord | None, *, seen_for: float, wall_now: datetime) -> bool:
    """Whether ``record`` (None: no Lease) is held and unexpired; ``seen_for`` is how long
    ago, on a monotonic clock, this process saw it change."""
    if record is None or not record.holder or record.renewed is None:
        return False
    left = record.duration_seconds - max(seen_for, (wall_now - record.renewed).total_seconds())
    return left > 0


def _micro_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
