"""Beside the real VPA on a real kubelet: metrics-server scrapes the guests' kubelets, VPA's
recommender, updater and admission controller size a CPU-hungry Deployment's request
under the tenant guide's recipe (a ``RequestsOnly`` VPA in ``InPlaceOrRecreate`` mode),
with Headroom enforcing in one namespace and, as the control, the same Deployment without
a limit in a namespace Headroom leaves alone.

Both run side by side on the 3-CPU workload node, which an unmanaged neighbour books: the
kubelet cannot fit what VPA asks for, and defers both raises. Headroom's limit is already
at VPA's upper bound (the node's allocatable CPU while VPA learns), so only VPA's request
waits. Once the neighbour leaves, the kubelet applies both, and the request reaches what
the pod burns.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from app.core.config.settings import Settings
from devcluster.realnodes import WORKLOAD
from devcluster.vpa import resource_metrics
from tests.cluster_helpers import deployment
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.autoscaling import (
    allocatable_m,
    cpu,
    lag_behind_floor,
    live_pod,
    recommended_cpu,
    requests_only_vpa,
)
from tests.realnode import builders
from tests.realnode.conftest import Scene, wait_agreed

NODE = WORKLOAD.name
REQUEST_M = 250
# What each hungry pod burns (probe pace: one thread, at most one core).
DEMAND_M = 600
# Books the 3-CPU node to 2800m with both hungry pods: 200m of slack, less than either
# raise VPA asks for.
NEIGHBOUR_M = 2300
HEADROOM = "Headroom enforcing"
NO_LIMIT = "no limit (Headroom off)"
# VPA's updater evicts a pod whose in-place raise the kubelet deferred for 5 minutes
# (DeferredResizeUpdateTimeout): the booked phase must end sooner to show the deferral.
BOOKED_TIMEOUT_S = 240.0
SIZING_TIMEOUT_S = 240.0
DEBOUNCE_S = Settings().debounce_seconds
# A kubelet applies a resize, and reports it, within a few seconds; an emulated one
# within ten.
KUBELET_S = 10.0


@dataclass(frozen=True)
class Sample:
    at: float
    # What the spec asks (VPA's request, Headroom's limit), what the kubelet has applied,
    # the kubelet's answer to a pending resize, and VPA's target and upper bound.
    request_m: int
    limit_m: int | None
    applied_m: int | None
    pending: str | None
    target_m: int | None
    upper_m: int | None

    @classmethod
    def of(cls, pod: dict[str, Any], target_m: int | None, upper_m: int | None) -> Sample:
        """The pod's app container now, beside VPA's target and upper bound."""
        resources = pod["spec"]["containers"][0]["resources"]
        request = cpu(resources, "requests")
        assert request is not None
        status = pod.get("status", {})
        applied = next(
            (cpu(s.get("resources"), "requests") for s in status.get("containerStatuses", [])),
            None,
        )
        pending = next(
            (
                c.get("reason", "")
                for c in status.get("conditions", [])
                if c["type"] == "PodResizePending" and c["status"] == "True"
            ),
            None,
        )
        limit = cpu(resources, "limits")
        return cls(time.monotonic(), request, limit, applied, pending, target_m, upper_m)


@dataclass
class Hungry:
    """One Deployment of one pod burning ``DEMAND_M`` under its own RequestsOnly VPA."""

    cluster: Cluster
    namespace: str
    name: str = "hungry"
    started: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    def deploy(self) -> None:
        hungry = builders.container(cpu=f"{REQUEST_M}m", args=["pace", str(DEMAND_M)])
        pod = builders.pod(self.name, hungry, namespace=self.namespace, node=NODE)
        self.cluster.apply(deployment(pod))
        self.cluster.apply(requests_only_vpa(self.namespace, self.name, min_cpu=f"{REQUEST_M}m"))
        self.started = time.monotonic()

    def sample(self) -> Sample | None:
        pod = live_pod(self.cluster, self.namespace, self.name)
        if pod is None:
            return None
        taken = Sample.of(pod, *recommended_cpu(self.cluster, self.namespace, self.name))
        self.samples.append(taken)
        return taken

    def deferred(self) -> bool:
        """Whether the kubelet now defers a raise of the request VPA asked for."""
        last = self.samples[-1] if self.samples else None
        return (
            last is not None
            and last.pending == "Deferred"
            and last.applied_m is not None
            and last.request_m > last.applied_m
        )

    def sized_after(self, since: float) -> float:
        """Seconds from ``since`` until the kubelet applied a request of what the pod
        burns (infinite: never)."""
        sized = [
            s.at
            for s in self.samples
            if s.at >= since and s.applied_m is not None and s.applied_m >= DEMAND_M
        ]
        return sized[0] - since if sized else float("inf")

    def timeline(self) -> str:
        """Each change, from the deploy: request/limit/applied request/VPA target/upper bound [the
        kubelet's answer]."""
        steps, last = [], None
        for s in self.samples:
            now = (s.request_m, s.limit_m, s.applied_m, s.pending, s.target_m, s.upper_m)
            if now != last:
                values = "/".join(
                    "-" if v is None else f"{v}m"
                    for v in (s.request_m, s.limit_m, s.applied_m, s.target_m, s.upper_m)
                )
                pending = f" [{s.pending}]" if s.pending is not None else ""
                steps.append(f"{s.at - self.started:.0f}s {values}{pending}")
                last = now
        return ", ".join(steps)


def test_a_requests_only_vpa_on_a_booked_real_node_waits_for_room_with_headroom_as_without(
    scene: Scene, vpa: None, managed_namespace: str, namespace: str
) -> None:
    control_plane = scene.cluster
    scene.start_reconciler()
    scene.neighbour(namespace, node=NODE, cpu=f"{NEIGHBOUR_M}m")
    runs = {
        HEADROOM: Hungry(control_plane, managed_namespace),
        NO_LIMIT: Hungry(control_plane, namespace),
    }
    for run in runs.values():
        run.deploy()

    def sample_all() -> None:
        for run in runs.values():
            run.sample()

    def report() -> str:
        return "\n".join(f"{label}: {run.timeline()}" for label, run in runs.items())

    def both_deferred() -> bool:
        sample_all()
        return all(run.deferred() for run in runs.values())

    try:
        eventually(
            both_deferred,
            timeout=BOOKED_TIMEOUT_S,
            interval=1.0,
            what="the kubelet deferring both raises VPA asked for",
        )
    finally:
        print("\nbooked:\n" + report())
    scene.delete(namespace, "neighbour")
    room = time.monotonic()

    def both_sized() -> bool:
        sample_all()
        return all(run.sized_after(room) < float("inf") for run in runs.values())

    try:
        eventually(
            both_sized,
            timeout=SIZING_TIMEOUT_S,
            interval=1.0,
            what="the kubelet applying both requests once the neighbour left",
        )
    finally:
        print(f"\nneighbour deleted at {room - runs[HEADROOM].started:.0f}s:\n" + report())
    print(
        "seconds from the neighbour's deletion to a request of what the pod burns applied: "
        + ", ".join(f"{label} {run.sized_after(room):.1f}" for label, run in runs.items())
    )
    for label, run in runs.items():
        # What the recommender read: the resource metrics API, from the kubelet.
        print(f"{label}: CPU used (m)", resource_metrics(control_plane.kubectl, run.namespace))
    headroom, free = runs[HEADROOM], runs[NO_LIMIT]
    assert all(s.limit_m is None for s in free.samples)
    # VPA's upper bound (as far as the node allows) followed by Headroom's limit, booked or
    # not, and never a limit below the request.
    node = allocatable_m(control_plane, NODE)
    lag = lag_behind_floor(headroom.samples, node)
    assert lag <= DEBOUNCE_S + KUBELET_S, headroom.timeline()
    assert all(s.limit_m is not None and s.limit_m >= s.request_m for s in headroom.samples)
    # Once there is room, the kubelet applies the deferred raise as it does without a limit.
    assert headroom.sized_after(room) <= free.sized_after(room) + DEBOUNCE_S + KUBELET_S
    # And the limit reached the pod's cgroup.
    pod = live_pod(control_plane, managed_namespace, headroom.name)
    assert pod is not None
    seen = wait_agreed(scene.kubelets, managed_namespace, pod["metadata"]["name"])
    limit = seen.container("app")
    assert limit is not None
    assert limit >= headroom.samples[-1].request_m
