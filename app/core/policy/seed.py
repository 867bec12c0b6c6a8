"""Birth limits the mutating webhook gives new pods' containers."""

from collections.abc import Iterable, Mapping

from app.core.config import Settings
from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy.arithmetic import half_up_div, quantize
from app.core.policy.model import ContainerLimit
from app.core.policy.split import split_target


def seed_limits(
    pod: PodInfo,
    settings: Settings,
    *,
    limit_range: LimitRangeCaps = NO_LIMIT_RANGE_CAPS,
    vpa_targets: Mapping[str, int] | None = None,
) -> tuple[ContainerLimit, ...]:
    """Limits for containers that have a CPU request but no CPU limit.

    Each gets ``request * initialMultiplier``, clamped by ``maxMultiplier`` and the
    LimitRange container cap, then quantized. The pod's ``max-cpu`` and LimitRange pod
    cap bound the sum of all its limits, existing ones included. Where a RequestsOnly
    VPA will set a container's request (``vpa_targets``, by container name), the limit
    is computed from what VPA will set, and never below it: VPA caps the request it sets
    at the limit the pod is born with. Only limits above the
    request are returned, so the pod stays Burstable; empty means nothing to seed.
    Whether seeding is enabled at all (``webhook.enabled``, ``dryRun``) is the caller's
    decision. A pod with pod-level resources gets its limit at pod level
    (``seed_pod_limit``), never on its containers.
    """
    if pod.facts.pod_resources is not None:
        return ()
    candidates = [c for c in pod.facts.cpu_containers if c.cpu_limit_m is None]
    if not candidates:
        return ()
    wanted = vpa_targets or {}
    requests = [max(c.cpu_request_m, wanted.get(c.name, 0)) for c in candidates]
    bounds = limits = [
        _birth_limit(r, settings, caps=(limit_range.container_cap_m(r),), floor=r) for r in requests
    ]
    pod_caps = [
        cap
        for cap in (pod.max_cpu_m, limit_range.pod_cap_m(pod.facts.request_m))
        if cap is not None
    ]
    if pod_caps:
        existing = sum(c.cpu_limit_m for c in pod.facts.cpu_containers if c.cpu_limit_m is not None)
        total = max(min(min(pod_caps) - existing, sum(bounds)), sum(requests))
        limits = split_target(requests=requests, caps=bounds, total=total)
    return tuple(
        ContainerLimit(name=c.name, sidecar=c.sidecar, limit_m=limit)
        for c, limit in zip(candidates, limits, strict=True)
        if limit > c.cpu_request_m
    )


def seed_pod_limit(
    pod: PodInfo, settings: Settings, *, limit_range: LimitRangeCaps = NO_LIMIT_RANGE_CAPS
) -> int | None:
    """The pod-level CPU limit for a pod with pod-level resources and no pod-level CPU
    limit, or None when there is nothing to seed.

    ``request * initialMultiplier`` at pod level, clamped by ``maxMultiplier``, the pod's
    ``max-cpu`` and the LimitRange pod cap, never below any container's own CPU limit,
    quantized; only a limit above the request is returned, so the pod stays Burstable.
    """
    pod_level = pod.facts.pod_resources
    if pod_level is None or pod_level.cpu_limit_m is not None or pod.facts.request_m <= 0:
        return None
    request = pod.facts.request_m
    limit = _birth_limit(
        request,
        settings,
        caps=(pod.max_cpu_m, limit_range.pod_cap_m(request)),
        floor=max(request, pod_level.container_limit_floor_m),
    )
    return limit if limit > request else None


def _birth_limit(
    request: int, settings: Settings, *, caps: Iterable[int | None], floor: int
) -> int:
    """``request`` times the birth multiplier (never above a non-zero ``maxMultiplier``),
    at most every cap that is set, never below ``floor``, then quantized."""
    multiplier = settings.webhook_initial_multiplier
    if 0 < settings.max_multiplier < multiplier:
        multiplier = settings.max_multiplier
    bound = half_up_div(request * multiplier.numerator, multiplier.denominator)
    bound = max(min([bound, *(cap for cap in caps if cap is not None)]), floor)
    return quantize(bound, request=floor, hi=bound, quantum=settings.quantum_m)
