"""Policy inputs built from the shared dict builders."""

from collections.abc import Mapping, Sequence

from app.core.config import WeightRule
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo
from app.core.policy import NodeInput
from tests.unit.app.builders import container, pod_info


def managed_pod(
    name: str,
    *requests_m: int,
    limits_m: Sequence[int | None] | None = None,
    namespace: str = "team-a",
    max_cpu: str | None = None,
    pinned_memory: bool = False,
    sidecars_m: Sequence[int] = (),
) -> PodInfo:
    """A managed pod with one app container per request (``c0``, ``c1``...).

    ``pinned_memory`` sets memory limits equal to requests, so pinning CPU limits to
    requests would make the pod Guaranteed.
    """
    limits = list(limits_m) if limits_m is not None else [None] * len(requests_m)
    memory_limit = "128Mi" if pinned_memory else None

    def build(index: int, request: int, limit: int | None, *, sidecar: bool) -> dict[str, object]:
        return container(
            f"s{index}" if sidecar else f"c{index}",
            cpu_request=f"{request}m",
            cpu_limit=None if limit is None else f"{limit}m",
            memory_limit=memory_limit,
            restart_policy="Always" if sidecar else None,
        )

    return pod_info(
        name,
        namespace=namespace,
        max_cpu=max_cpu,
        containers=[
            build(i, request, limit, sidecar=False)
            for i, (request, limit) in enumerate(zip(requests_m, limits, strict=True))
        ],
        init_containers=[
            build(i, request, None, sidecar=True) for i, request in enumerate(sidecars_m)
        ],
    )


def node_input(
    pods: Sequence[PodInfo],
    *,
    allocatable_m: int = 16000,
    unmanaged_m: int = 0,
    limit_ranges: Mapping[str, LimitRangeCaps] | None = None,
    vpa_floors: Mapping[str, Mapping[str, int]] | None = None,
    weights: Mapping[str, int] | None = None,
) -> NodeInput:
    """A node whose R is the managed pods' requests plus ``unmanaged_m``; ``vpa_floors``
    and ``weights`` (each pod's own rule) by pod name."""
    return NodeInput(
        name="node-1",
        allocatable_m=allocatable_m,
        booked_m=sum(pod.facts.request_m for pod in pods) + unmanaged_m,
        pods=list(pods),
        limit_ranges=dict(limit_ranges or {}),
        vpa_floors={
            pod.uid: (vpa_floors or {})[pod.name] for pod in pods if pod.name in (vpa_floors or {})
        },
        weights={
            pod.uid: weight_rule(pod.name, (weights or {})[pod.name])
            for pod in pods
            if pod.name in (weights or {})
        },
    )


def weight_rule(name: str, weight: int) -> WeightRule:
    """A rule, named for the pod it is meant for, with ``weight``."""
    return WeightRule(path=f"spec.weights[{name}]", weight=weight)
