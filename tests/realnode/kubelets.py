"""What the real kubelets did with a pod's CPU limits: the spec Headroom wrote, the
status the kubelet reports, and the cgroups in the guest (through its agent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.apipaths import PODS
from app.core.quantity import parse_cpu_millis
from devcluster.kubepods import cpu_max_millis
from devcluster.realnodes import RealCluster


def _limit(resources: dict[str, Any] | None) -> int | None:
    cpu = (resources or {}).get("limits", {}).get("cpu")
    return None if cpu is None else parse_cpu_millis(str(cpu))


@dataclass(frozen=True)
class Limits:
    """One container's (or the pod's) CPU limit as each party sees it, in millicores:
    ``spec`` (what Headroom wrote), ``status`` (what the kubelet reports applied) and
    ``cgroup`` (``cpu.max`` in the guest). ``inherited`` is the pod-level limit a
    container without a limit of its own is held to (the kubelet writes it into the
    container's cgroup too)."""

    spec: int | None
    status: int | None
    cgroup: int | None
    inherited: int | None = None

    @property
    def agree(self) -> bool:
        expected = self.inherited if self.spec is None else self.spec
        return self.spec == self.status and self.cgroup == expected


@dataclass(frozen=True)
class Observation:
    containers: dict[str, Limits]
    pod: Limits
    generation: int
    observed_generation: int | None

    @property
    def agree(self) -> bool:
        return (
            self.observed_generation == self.generation
            and self.pod.agree
            and all(limits.agree for limits in self.containers.values())
        )

    def container(self, name: str) -> int | None:
        """The container's limit, once spec, status and cgroup agree."""
        limits = self.containers[name]
        assert limits.agree, limits
        return limits.spec


class Kubelets:
    def __init__(self, cluster: RealCluster) -> None:
        self.cluster = cluster

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.cluster.api.get(PODS.path(namespace=namespace, name=name))
        assert found is not None, f"{namespace}/{name} is gone"
        return found

    def cgroup_limits(self, pod: dict[str, Any], *, container: str | None = None) -> int | None:
        """The ``cpu.max`` of the pod's cgroup (or of one container's) in its guest."""
        return cpu_max_millis(self.cluster.cpu_max(pod, container=container))

    def observe(self, namespace: str, name: str) -> Observation:
        pod = self.pod(namespace, name)
        spec, status = pod["spec"], pod["status"]
        spec_containers = [*spec.get("initContainers", []), *spec["containers"]]
        statuses = {
            s["name"]: s
            for s in [
                *status.get("initContainerStatuses", []),
                *status.get("containerStatuses", []),
            ]
        }
        pod_level = _limit(spec["resources"]) if "resources" in spec else None
        containers = {
            c["name"]: Limits(
                spec=_limit(c.get("resources")),
                status=_limit(statuses.get(c["name"], {}).get("resources")),
                cgroup=self.cgroup_limits(pod, container=c["name"]),
                inherited=pod_level,
            )
            for c in spec_containers
        }
        if "resources" in spec:
            pod_spec = pod_level
        else:
            # Without pod-level resources, the pod's quota is the sum of its containers'
            # limits when every one of them has a limit, and none otherwise.
            own = [limits.spec for limits in containers.values()]
            pod_spec = None if None in own else sum(x for x in own if x is not None)
        # Kubelets that report pod-level status (1.36 and later) report it for every pod.
        reported = status.get("resources")
        if reported is not None:
            pod_status = _limit(reported)
        else:
            pod_status = None if "resources" in spec else pod_spec
        return Observation(
            containers=containers,
            pod=Limits(spec=pod_spec, status=pod_status, cgroup=self.cgroup_limits(pod)),
            generation=int(pod["metadata"]["generation"]),
            observed_generation=status.get("observedGeneration"),
        )
