"""What Headroom tells people about a pod: the status annotation and the event message.

Both are rendered from one ``Explanation`` built from one policy computation, so the
annotation can never disagree with the change that was applied.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final

from app.labels import POLICY_VERSION
from app.policy import NodeResult, PodResult, half_up_div
from app.quantity import format_cores

_COMPUTED_AT: Final = "computedAt"


@dataclass(frozen=True, slots=True)
class Explanation:
    factor: str
    slack_m: int
    allocatable_m: int
    managed_m: int
    node_pods: int
    current_m: int
    target_m: int
    dry_run: bool
    # The node pool whose overrides applied; None when the node is in no pool.
    pool: str | None = None


def factor_text(factor: Fraction) -> str:
    """The node factor with two decimals, rounded half-up: ``"2.00"``."""
    hundredths = half_up_div(factor.numerator * 100, factor.denominator)
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def explain(
    node: NodeResult, pod: PodResult, *, dry_run: bool, pool: str | None = None
) -> Explanation:
    return Explanation(
        factor=factor_text(node.factor),
        slack_m=node.slack_m,
        allocatable_m=node.allocatable_m,
        managed_m=node.managed_m,
        node_pods=node.pod_count,
        current_m=pod.current_m,
        target_m=pod.target_m,
        dry_run=dry_run,
        pool=pool,
    )


def status_annotation(explanation: Explanation, *, previous: str | None, now: datetime) -> str:
    """The annotation's JSON; ``previous`` comes back unchanged when only the time would.

    ``now`` must be timezone-aware; ``computedAt`` is RFC 3339 UTC to the second.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    fields: dict[str, Any] = {
        "factor": explanation.factor,
        "slack": _millis(explanation.slack_m),
        "managedRequests": _millis(explanation.managed_m),
        "nodePods": explanation.node_pods,
        "targetLimit": _millis(explanation.target_m),
        "policy": POLICY_VERSION,
    }
    if explanation.pool is not None:
        fields["pool"] = explanation.pool
    if explanation.dry_run:
        fields["dryRun"] = True
    if previous is not None and _same_apart_from_time(previous, fields):
        return previous
    fields[_COMPUTED_AT] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(fields, separators=(",", ":"))


def event_message(explanation: Explanation) -> str:
    """``1500m -> 3000m (node factor 2.00, slack 8/16 cores)``; dry-run says it would.

    A node in a pool adds it: ``(node factor 2.00, slack 8/16 cores, pool web)``.
    """
    current = _millis(explanation.current_m) if explanation.current_m else "unset"
    slack = format_cores(explanation.slack_m)
    allocatable = format_cores(explanation.allocatable_m)
    pool = "" if explanation.pool is None else f", pool {explanation.pool}"
    message = (
        f"{current} -> {_millis(explanation.target_m)} "
        f"(node factor {explanation.factor}, slack {slack}/{allocatable} cores{pool})"
    )
    return f"would set {message}" if explanation.dry_run else message


def _same_apart_from_time(previous: str, fields: dict[str, Any]) -> bool:
    try:
        old = json.loads(previous)
    except ValueError:
        return False
    if not isinstance(old, dict) or _COMPUTED_AT not in old:
        return False
    return {key: value for key, value in old.items() if key != _COMPUTED_AT} == fields


def _millis(millis: int) -> str:
    return f"{millis}m"
