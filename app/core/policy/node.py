"""The proportional policy for one node (design section 2): pure, deterministic, no I/O."""

from collections.abc import Mapping
from fractions import Fraction

from app.core.config import Settings
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy.arithmetic import half_up_div, quantize
from app.core.policy.deadband import PATCH_REASONS, decide
from app.core.policy.model import (
    Cap,
    ContainerLimit,
    NodeInput,
    NodeResult,
    PodResult,
    Reason,
    rule_weight,
)
from app.core.policy.split import split_target


def compute_node(node: NodeInput, settings: Settings) -> NodeResult:
    """Slack, factor and every managed pod's target limit and patch decision.

    With slack ``S`` over ``N`` managed pods, a pod's request ``r`` and weight ``w`` (1
    unless a weight rule matched it), and ``W`` the sum of every managed pod's ``w*r``:
    ``raw = r + round(max(S*w*r/W, min(floor, S/N)))`` when ``S > 0``, else ``r`` (a share
    of 0 when every weight is 0); with every weight 1, ``W`` is the managed requests. Then
    clamped to ``[r, hi]``, quantized, guarded against a QoS change and run through
    the deadband. A container under a RequestsOnly VPA is never below VPA's upper bound
    (as far as the node's allocatable and LimitRanges allow): VPA sizes the request from
    the CPU the container used, which the limit caps, and never sets it above the limit,
    so a lower ceiling would hide from VPA what the container needs.
    """
    computation = _Computation(node, settings)
    bursting = computation.bursting
    return NodeResult(
        name=node.name,
        allocatable_m=node.allocatable_m,
        booked_m=node.booked_m,
        slack_m=computation.slack,
        managed_m=computation.managed,
        weighted_m=computation.weighted,
        pod_count=len(node.pods),
        factor=1 + Fraction(computation.slack, computation.weighted)
        if bursting and computation.weighted
        else Fraction(1),
        pods=tuple(computation.pod(pod) for pod in node.pods),
    )


class _Computation:
    """Per-node constants, hoisted out of the per-pod loop."""

    __slots__ = (
        "allocatable",
        "bursting",
        "floor_share",
        "grow_percent",
        "limit_ranges",
        "managed",
        "multiplier_den",
        "multiplier_num",
        "quantum",
        "shrink_percent",
        "slack",
        "vpa_floors",
        "weighted",
        "weights",
    )

    def __init__(self, node: NodeInput, settings: Settings) -> None:
        self.allocatable = node.allocatable_m
        self.limit_ranges = node.limit_ranges
        self.vpa_floors = node.vpa_floors
        self.slack = node.allocatable_m - node.booked_m
        self.managed = sum(pod.facts.request_m for pod in node.pods)
        self.weights = node.weights
        self.weighted = (
            sum(pod.facts.request_m * rule_weight(self.weights.get(pod.uid)) for pod in node.pods)
            if self.weights
            else self.managed
        )
        self.bursting = self.slack > 0 and self.managed > 0
        self.floor_share = (
            min(settings.min_burst_floor_m, half_up_div(self.slack, len(node.pods)))
            if self.bursting
            else 0
        )
        self.multiplier_num = settings.max_multiplier.numerator
        self.multiplier_den = settings.max_multiplier.denominator
        self.quantum = settings.quantum_m
        self.grow_percent = settings.grow_percent
        self.shrink_percent = settings.shrink_percent

    def pod(self, pod: PodInfo) -> PodResult:
        request = pod.facts.request_m
        rule = self.weights.get(pod.uid)
        raw = request
        if self.bursting:
            weighted = self.slack * rule_weight(rule) * request
            share = half_up_div(weighted, self.weighted) if self.weighted else 0
            raw += max(share, self.floor_share)
        caps = self.limit_ranges.get(pod.namespace)
        pod_level = pod.facts.pod_resources
        if pod_level is None:
            container_caps = None if caps is None else _container_caps(pod, caps)
            floor = request
        else:
            # Container-type LimitRange caps bound the containers, which Headroom leaves
            # alone; the pod-level limit may not go below any container's limit.
            container_caps = None
            floor = max(request, pod_level.container_limit_floor_m)
        hi, hi_cap, hard = self.ceiling(pod, caps=caps, container_caps=container_caps, floor=floor)
        bases = None
        vpa = 0
        lifted = 0
        wanted = self.vpa_floors.get(pod.uid)
        if wanted and pod_level is None:
            by_vpa, bases = _vpa_floor(pod, wanted, floor=floor, hard=hard)
            if by_vpa > floor:
                lifted = by_vpa
                vpa = lifted if lifted > min(max(raw, floor), hi) else 0
                if hi < lifted:
                    hi, hi_cap = lifted, Cap.VPA_UPPER_BOUND
                if bases is not None:
                    container_caps = _lifted(container_caps, bases)
                floor = lifted
        target = quantize(min(max(raw, floor), hi), request=floor, hi=hi, quantum=self.quantum)
        if pod.facts.guaranteed_if_pinned and floor == request:
            # Limits all equal to requests would make the pod Guaranteed, and a resize
            # may not change the QoS class.
            if hi < request + self.quantum:
                return PodResult(
                    pod=pod,
                    request_m=request,
                    current_m=pod.facts.limit_m,
                    target_m=pod.facts.limit_m,
                    hi_m=hi,
                    hi_cap=hi_cap,
                    capped=raw > hi,
                    containers=(),
                    patch=False,
                    reason=Reason.QOS_GUARD,
                    weight_rule=rule,
                )
            target = max(target, request + self.quantum)
        reason = decide(
            target_m=target,
            current_m=pod.facts.limit_m,
            grow_percent=self.grow_percent,
            shrink_percent=self.shrink_percent,
        )
        if lifted and reason is Reason.IN_DEADBAND and _below(pod, lifted, bases):
            # A limit below VPA's upper bound hides from VPA what the pod would use: the
            # deadband never holds one there.
            reason = Reason.GROW
        # Positional: keyword construction of a NamedTuple costs twice as much.
        return PodResult(
            pod,
            request,
            pod.facts.limit_m,
            target,
            hi,
            hi_cap,
            raw > hi,
            ()
            if pod_level is not None
            else _containers(pod, target=target, caps=container_caps, bases=bases),
            reason in PATCH_REASONS,
            reason,
            vpa,
            rule,
        )

    def ceiling(
        self,
        pod: PodInfo,
        *,
        caps: LimitRangeCaps | None,
        container_caps: list[int] | None,
        floor: int,
    ) -> tuple[int, Cap, int]:
        """``hi``, the cap that set it, and the part of ``hi`` set by the node and the
        namespace (allocatable and LimitRanges) alone; later caps win ties, being more
        specific.

        Never below ``floor``: the request, or for pod-level limits the largest container
        limit when that is higher.
        """
        request = pod.facts.request_m
        hi, cap = self.allocatable, Cap.ALLOCATABLE
        hard = hi
        if self.multiplier_num:
            by_multiplier = half_up_div(request * self.multiplier_num, self.multiplier_den)
            if by_multiplier <= hi:
                hi, cap = by_multiplier, Cap.MAX_MULTIPLIER
        if caps is not None:
            container_sum = None if container_caps is None else sum(container_caps)
            for limit in (caps.pod_cap_m(request), container_sum):
                if limit is not None:
                    hard = min(hard, limit)
                    if limit <= hi:
                        hi, cap = limit, Cap.LIMIT_RANGE
        if pod.max_cpu_m is not None and pod.max_cpu_m <= hi:
            hi, cap = pod.max_cpu_m, Cap.MAX_CPU
        if hi < floor:
            return floor, Cap.REQUEST if floor == request else Cap.CONTAINER_LIMIT, hard
        return hi, cap, hard


def _container_caps(pod: PodInfo, caps: LimitRangeCaps) -> list[int] | None:
    """Each request-bearing container's LimitRange cap (never below its request)."""
    if caps.container_max_m is None and caps.container_ratio is None:
        return None
    # A container max or ratio is set, so every container has a cap (never None).
    return [
        max(caps.container_cap_m(c.cpu_request_m) or 0, c.cpu_request_m)
        for c in pod.facts.cpu_containers
    ]


def _vpa_floor(
    pod: PodInfo, wanted: Mapping[str, int], *, floor: int, hard: int
) -> tuple[int, list[int] | None]:
    """The pod's floor lifted to its VPA's upper bounds, at most ``hard`` (allocatable and
    LimitRanges), and the per-container floors to split the target by; None where VPA
    allows more than ``hard`` does, so the split falls back to the requests."""
    bases = [max(c.cpu_request_m, wanted.get(c.name, 0)) for c in pod.facts.cpu_containers]
    wanted_m = sum(bases)
    lifted = min(wanted_m, max(hard, floor))
    if lifted <= floor:
        return floor, None
    return lifted, bases if lifted == wanted_m else None


def _below(pod: PodInfo, floor: int, bases: list[int] | None) -> bool:
    """Whether the pod's current limit, or a container's, is below its VPA-lifted floor."""
    if pod.facts.limit_m < floor:
        return True
    return bases is not None and any(
        c.cpu_limit_m is not None and c.cpu_limit_m < base
        for c, base in zip(pod.facts.cpu_containers, bases, strict=True)
    )


def _lifted(caps: list[int] | None, bases: list[int]) -> list[int] | None:
    """LimitRange container caps never below a container's VPA-lifted floor."""
    return None if caps is None else [max(cap, base) for cap, base in zip(caps, bases, strict=True)]


def _containers(
    pod: PodInfo, *, target: int, caps: list[int] | None, bases: list[int] | None
) -> tuple[ContainerLimit, ...]:
    """The target split over the request-bearing containers, pro-rata by request, or by
    ``bases`` (each container's request lifted to its VPA upper bound) where a VPA lifts
    them."""
    containers = pod.facts.cpu_containers
    if len(containers) == 1:
        only = containers[0]
        return (ContainerLimit(only.name, only.sidecar, target),)
    weights = [c.cpu_request_m for c in containers] if bases is None else bases
    limits = split_target(requests=weights, caps=caps, total=target)
    return tuple(
        ContainerLimit(c.name, c.sidecar, limit)
        for c, limit in zip(containers, limits, strict=True)
    )
