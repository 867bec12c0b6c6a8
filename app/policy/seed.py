"""Birth limits the mutating webhook gives new pods' containers."""

from app.config import Settings
from app.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps
from app.pods import PodInfo
from app.policy.arithmetic import half_up_div, quantize
from app.policy.model import ContainerLimit
from app.policy.split import split_target


def seed_limits(
    pod: PodInfo, settings: Settings, *, limit_range: LimitRangeCaps = NO_LIMIT_RANGE_CAPS
) -> tuple[ContainerLimit, ...]:
    """Limits for containers that have a CPU request but no CPU limit.

    Each gets ``request * initialMultiplier``, clamped by ``maxMultiplier`` and the
    LimitRange container cap, then quantized. The pod's ``max-cpu`` and LimitRange pod
    cap bound the sum of all its limits, existing ones included. Only limits above the
    request are returned, so the pod stays Burstable; empty means nothing to seed.
    Whether seeding is enabled at all (``webhook.enabled``, ``dryRun``) is the caller's
    decision.
    """
    candidates = [c for c in pod.cpu_containers if c.cpu_limit_m is None]
    if not candidates:
        return ()
    multiplier = settings.webhook_initial_multiplier
    if 0 < settings.max_multiplier < multiplier:
        multiplier = settings.max_multiplier
    requests = [c.cpu_request_m for c in candidates]
    bounds = []
    for request in requests:
        bound = half_up_div(request * multiplier.numerator, multiplier.denominator)
        container_cap = limit_range.container_cap_m(request)
        if container_cap is not None:
            bound = min(bound, container_cap)
        bound = max(bound, request)
        bounds.append(quantize(bound, request=request, hi=bound, quantum=settings.quantum_m))
    limits = bounds
    pod_caps = [
        cap for cap in (pod.max_cpu_m, limit_range.pod_cap_m(pod.request_m)) if cap is not None
    ]
    if pod_caps:
        existing = sum(c.cpu_limit_m for c in pod.cpu_containers if c.cpu_limit_m is not None)
        total = max(min(min(pod_caps) - existing, sum(bounds)), sum(requests))
        limits = split_target(requests=requests, caps=bounds, total=total)
    return tuple(
        ContainerLimit(name=c.name, sidecar=c.sidecar, limit_m=limit)
        for c, limit in zip(candidates, limits, strict=True)
        if limit > c.cpu_request_m
    )
