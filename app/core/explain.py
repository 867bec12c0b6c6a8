"""What Headroom tells people about a pod: the status annotation and the event message.

Both are rendered from one ``Explanation`` built from one policy computation, so the
annotation can never disagree with the change that was applied.

Slack is unbooked CPU and is never shown below zero: when the node's bookings exceed its
allocatable CPU (pods bound before allocatable shrank, static pods, a kubelet reserving
more), people read slack 0 and the excess as ``overbooked``, everywhere it is shown.
"""

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Final

from app.core.labels import POLICY_VERSION
from app.core.policy import NodeResult, PodResult, half_up_div
from app.core.quantity import format_cores

_COMPUTED_AT: Final = "computedAt"


@dataclass(frozen=True, slots=True)
class Explanation:
    factor: str
    # Never negative; bookings beyond allocatable are in overbooked_m.
    slack_m: int
    overbooked_m: int
    allocatable_m: int
    managed_m: int
    node_pods: int
    current_m: int
    target_m: int
    dry_run: bool
    # The node pool whose overrides applied; None when the node is in no pool.
    pool: str | None = None
    # The pod's RequestsOnly VPA upper bound (at most the node's and the namespace's caps)
    # when it set the target; 0 otherwise.
    vpa_upper_bound_m: int = 0
    # The weight the pod shared the slack with, and the rule that gave it (its path in the
    # config); None: no rule matched, weight 1.
    weight: int = 1
    weight_rule: str | None = None

    def applied(self, limit_m: int) -> "Explanation":
        """This explanation of the limit the pod already has (nothing to apply)."""
        return dataclasses.replace(self, target_m=limit_m)


def factor_text(factor: Fraction) -> str:
    """The node factor with two decimals, rounded half-up: ``"2.00"``."""
    hundredths = half_up_div(factor.numerator * 100, factor.denominator)
    return f"{hundredths // 100}.{hundredths % 100:02d}"


def shown_slack(slack_m: int) -> tuple[int, int]:
    """The policy's slack ``A - R`` as people read it: (unbooked, overbooked), both >= 0."""
    return max(slack_m, 0), max(-slack_m, 0)


def explain(
    node: NodeResult, pod: PodResult, *, dry_run: bool, pool: str | None = None
) -> Explanation:
    slack_m, overbooked_m = shown_slack(node.slack_m)
    return Explanation(
        factor=factor_text(node.factor),
        slack_m=slack_m,
        overbooked_m=overbooked_m,
        allocatable_m=node.allocatable_m,
        managed_m=node.managed_m,
        node_pods=node.pod_count,
        current_m=pod.current_m,
        target_m=pod.target_m,
        dry_run=dry_run,
        pool=pool,
        vpa_upper_bound_m=pod.vpa_m,
        weight=pod.weight,
        weight_rule=None if pod.weight_rule is None else pod.weight_rule.path,
    )


def annotation_fields(explanation: Explanation) -> dict[str, Any]:
    """The numbers the status annotation carries (without its bookkeeping: policy, dry-run,
    time), formatted as it carries them."""
    fields: dict[str, Any] = {
        "factor": explanation.factor,
        "slack": millis(explanation.slack_m),
        **({"overbooked": millis(explanation.overbooked_m)} if explanation.overbooked_m else {}),
        "managedRequests": millis(explanation.managed_m),
        "nodePods": explanation.node_pods,
        "targetLimit": millis(explanation.target_m),
    }
    if explanation.pool is not None:
        fields["pool"] = explanation.pool
    if explanation.vpa_upper_bound_m:
        fields["vpaUpperBound"] = millis(explanation.vpa_upper_bound_m)
    if explanation.weight != 1:
        # Weight 1 is everyone's by default: said only when a rule changed it.
        fields["weight"] = explanation.weight
        fields["weightRule"] = explanation.weight_rule
    return fields


def status_annotation(explanation: Explanation, *, previous: str | None, now: datetime) -> str:
    """The annotation's JSON; ``previous`` comes back unchanged when only the time would.

    ``now`` must be timezone-aware; ``computedAt`` is RFC 3339 UTC to the second.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    fields = {**annotation_fields(explanation), "policy": POLICY_VERSION}
    if explanation.dry_run:
        fields["dryRun"] = True
    if previous is not None and _same_apart_from_time(previous, fields):
        return previous
    fields[_COMPUTED_AT] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(fields, separators=(",", ":"))


def event_message(explanation: Explanation) -> str:
    """``1500m -> 3000m (node factor 2.00, slack 8/16 cores)``; dry-run says it would.

    An overbooked node reads ``slack 0/16 cores, overbooked by 2 cores``; a node in a pool
    adds it: ``(node factor 2.00, slack 8/16 cores, pool web)``; a target set by the pod's
    VPA says so: ``(..., VPA upper bound 1500m)``; a weight other than 1, with its rule:
    ``(..., weight 4 by spec.weights[0])``.
    """
    current = millis(explanation.current_m) if explanation.current_m else "unset"
    slack = format_cores(explanation.slack_m)
    allocatable = format_cores(explanation.allocatable_m)
    overbooked = ""
    if explanation.overbooked_m:
        noun = "core" if explanation.overbooked_m == 1000 else "cores"
        overbooked = f", overbooked by {format_cores(explanation.overbooked_m)} {noun}"
    pool = "" if explanation.pool is None else f", pool {explanation.pool}"
    vpa = (
        f", VPA upper bound {millis(explanation.vpa_upper_bound_m)}"
        if explanation.vpa_upper_bound_m
        else ""
    )
    weight = (
        f", weight {explanation.weight} by {explanation.weight_rule}"
        if explanation.weight != 1
        else ""
    )
    message = (
        f"{current} -> {millis(explanation.target_m)} (node factor {explanation.factor}, "
        f"slack {slack}/{allocatable} cores{overbooked}{pool}{vpa}{weight})"
    )
    return f"would set {message}" if explanation.dry_run else message


def annotated_target(text: str | None, *, dry_run: bool, pool: str | None) -> int | None:
    """The target (millicores) a status annotation explains when Headroom wrote it for this
    mode and pool; None when there is none, it was edited, or it is of another mode or pool.
    """
    fields = _fields(text)
    if fields is None or _COMPUTED_AT not in fields or fields.get("policy") != POLICY_VERSION:
        return None
    if fields.get("dryRun", False) is not dry_run or fields.get("pool") != pool:
        return None
    target = fields.get("targetLimit")
    if not isinstance(target, str) or not target.endswith("m") or not target[:-1].isdigit():
        return None
    return int(target[:-1])


def _fields(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) else None


def _same_apart_from_time(previous: str, fields: dict[str, Any]) -> bool:
    old = _fields(previous)
    if old is None or _COMPUTED_AT not in old:
        return False
    return {key: value for key, value in old.items() if key != _COMPUTED_AT} == fields


def millis(value: int) -> str:
    """Millicores as the annotation, the events and the plugin show them: ``"1500m"``."""
    return f"{value}m"
