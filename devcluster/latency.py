"""How long a managed container's CPU ceiling takes to follow its node's bookings, on a
real kubelet: from a neighbour pod's binding to the container's ``cpu.max`` shrinking,
and from the deleted neighbour's finishing to it rising again (a deleting pod books its
CPU until the kubelet reports it finished or it is gone, as the scheduler counts it).

Each trial binds a neighbour (a pod created for a scheduler that does not exist, then
bound through ``pods/binding`` here, at a known instant) to the managed pod's node,
waits for the container's ``cpu.max`` in the guest to change and for the neighbour to
run, deletes the neighbour, waits for it to finish and then for ``cpu.max`` to change
back, then for the neighbour to be gone, so every trial starts on a node running the
managed pod alone. Every instant is this machine's wall clock: the binding and deletion
as sent, the neighbour first seen finished, Headroom's resize as the API server's audit
log records it (received, and answered), and the cgroup change as first read through
the guest's agent, polled every ``POLL_SECONDS``. That splits each latency into
Headroom's share (the node's debounce and the reconcile, then the write) and the
kubelet's (from the accepted resize to the changed cgroup).

The real-node tier runs this (``tests/realnode/test_latency.py``) and so does
``make bench-realnode``.
"""

from __future__ import annotations

import math
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.apipaths import PODS
from app.core.quantity import parse_cpu_millis
from devcluster.controlplane import ControlPlane
from devcluster.guests import PROBE_IMAGE, Guest
from devcluster.kubeapi import KubeAPI
from devcluster.kubepods import container_cgroup, cpu_max_millis
from devcluster.timestamps import epoch_seconds

POLL_SECONDS = 0.05
# No scheduler has this name: the neighbour waits unbound until a trial binds it.
UNSCHEDULED = "headroom-test-unscheduled"


class TrialError(RuntimeError):
    """A trial's change never came; the message says which and what was seen."""


@dataclass(frozen=True)
class Step:
    """One change of the ceiling: the cause (a binding, or a deleted pod finished) to the
    new cgroup."""

    headroom: float  # cause to Headroom's resize answered by the API server
    write: float  # of which the resize request itself (received to answered)
    kubelet: float  # resize answered to the cgroup changed

    @property
    def total(self) -> float:
        return self.headroom + self.kubelet


@dataclass(frozen=True)
class Trial:
    shrink: Step
    rise: Step
    bound: float  # wall-clock instants of the neighbour's binding and deletion
    deleted: float
    # and of the neighbour first seen running, finished (a terminal phase, or gone), and
    # gone from the API
    running: float
    finished: float
    gone: float


def neighbour(
    name: str, *, namespace: str, cpu: str, args: Sequence[str] = ("sleep",), limited: bool = False
) -> dict[str, Any]:
    """A neighbour requesting ``cpu`` (and limited to it when ``limited``), running the
    probe with ``args``."""
    resources: dict[str, dict[str, str]] = {"requests": {"cpu": cpu, "memory": "16Mi"}}
    if limited:
        resources["limits"] = {"cpu": cpu}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": UNSCHEDULED,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "neighbour",
                    "image": PROBE_IMAGE,
                    "imagePullPolicy": "Never",
                    "args": list(args),
                    "resources": resources,
                }
            ],
        },
    }


def _resize_after(
    plane: ControlPlane, *, namespace: str, pod: str, since: float
) -> tuple[float, float]:
    """(received, answered) of the first accepted resize of ``pod`` at or after ``since``."""
    for event in plane.audit_events():
        ref = event.get("objectRef", {})
        if (
            ref.get("subresource") == "resize"
            and ref.get("namespace") == namespace
            and ref.get("name") == pod
            and event.get("responseStatus", {}).get("code") == 200
        ):
            received = epoch_seconds(event["requestReceivedTimestamp"])
            if received >= since:
                return received, epoch_seconds(event["stageTimestamp"])
    raise TrialError(f"no accepted resize of {namespace}/{pod} after {since}")


def _finished(pod: dict[str, Any] | None) -> bool:
    """Whether a pod no longer books its CPU: gone, or reported Succeeded or Failed."""
    return pod is None or pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def _wait_for(check: Callable[[], bool], *, timeout: float, what: str) -> float:
    """The wall-clock time ``check`` first held, polled every POLL_SECONDS."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.time()
        time.sleep(POLL_SECONDS)
    raise TrialError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class CeilingTrials:
    """Trials against one managed container on one guest."""

    plane: ControlPlane
    api: KubeAPI
    guest: Guest
    namespace: str  # the managed pod's
    pod: str
    container: str
    neighbour_namespace: str
    neighbour_cpu: str
    neighbour_args: Sequence[str] = ("sleep",)
    neighbour_limited: bool = False
    # How long the neighbour runs before it is deleted.
    hold: float = 0.0
    # Generous: on a slow machine an emulated kubelet took over a minute to stop a pod.
    timeout: float = 180.0

    def _pod(self) -> dict[str, Any]:
        pod = self.api.get(PODS.path(namespace=self.namespace, name=self.pod))
        if pod is None:
            raise TrialError(f"{self.namespace}/{self.pod} is gone")
        return pod

    def _settled(self, path: str) -> bool:
        """Whether the container's ``cpu.max`` holds its spec limit: no resize in flight."""
        spec = next(c for c in self._pod()["spec"]["containers"] if c["name"] == self.container)
        limit = spec.get("resources", {}).get("limits", {}).get("cpu")
        current = self.guest.read(path).get(path)
        return (
            limit is not None
            and current is not None
            and cpu_max_millis(current) == parse_cpu_millis(str(limit))
        )

    def _changed(self, path: str, before: str) -> Callable[[], bool]:
        return lambda: self.guest.read(path).get(path, before) != before

    def _step(self, cause: float, *, path: str, before: str, what: str) -> Step:
        changed = _wait_for(self._changed(path, before), timeout=self.timeout, what=what)
        received, answered = _resize_after(
            self.plane, namespace=self.namespace, pod=self.pod, since=cause
        )
        return Step(
            headroom=answered - cause, write=answered - received, kubelet=changed - answered
        )

    def trial(self) -> Trial:
        path = f"{container_cgroup(self._pod(), self.container)}/cpu.max"
        _wait_for(lambda: self._settled(path), timeout=self.timeout, what=f"{path} to settle")
        name = f"neighbour-{uuid.uuid4().hex[:6]}"
        namespace = self.neighbour_namespace
        self.api.post(
            PODS.path(namespace=namespace),
            neighbour(
                name,
                namespace=namespace,
                cpu=self.neighbour_cpu,
                args=self.neighbour_args,
                limited=self.neighbour_limited,
            ),
        )
        neighbour_path = PODS.path(namespace=namespace, name=name)
        before = self.guest.read(path)[path]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.guest.name},
        }
        bound = time.time()
        self.api.post(PODS.path(namespace=namespace, name=name, subresource="binding"), binding)
        shrink = self._step(bound, path=path, before=before, what=f"{path} to shrink")
        shrunk = self.guest.read(path)[path]
        # The neighbour deleted is a running one, as it would be in a cluster.
        running = _wait_for(
            lambda: (
                (self.api.get(neighbour_path) or {}).get("status", {}).get("phase") == "Running"
            ),
            timeout=self.timeout,
            what=f"{name} to run",
        )
        time.sleep(self.hold)
        deleted = time.time()
        self.api.request("DELETE", neighbour_path)
        # A deleting pod books its CPU until the kubelet reports it finished or it is
        # gone, as the scheduler counts it: the ceiling rises only after that.
        finished = _wait_for(
            lambda: _finished(self.api.get(neighbour_path)),
            timeout=self.timeout,
            what=f"{name} to finish",
        )
        rise = self._step(finished, path=path, before=shrunk, what=f"{path} to rise")
        gone = _wait_for(
            lambda: self.api.get(neighbour_path) is None,
            timeout=self.timeout,
            what=f"{name} to be gone",
        )
        return Trial(
            shrink=shrink,
            rise=rise,
            bound=bound,
            deleted=deleted,
            running=running,
            finished=finished,
            gone=gone,
        )

    def run(
        self, count: int, *, progress: Callable[[int, Trial], None] | None = None
    ) -> list[Trial]:
        trials = []
        for index in range(count):
            trial = self.trial()
            trials.append(trial)
            if progress is not None:
                progress(index + 1, trial)
        return trials


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def distribution(values: Sequence[float]) -> str:
    return (
        f"p50 {statistics.median(values):.2f}s  p90 {percentile(values, 0.9):.2f}s  "
        f"max {max(values):.2f}s"
    )


def report(trials: Sequence[Trial]) -> str:
    """The distributions over the trials: each latency and its shares, then how long the
    kubelet took to start and to stop the neighbour, which sets a trial's length."""
    lines = [f"{len(trials)} trials"]
    for label, steps in (
        ("neighbour bound -> cpu.max shrunk", [t.shrink for t in trials]),
        ("neighbour finished -> cpu.max risen", [t.rise for t in trials]),
    ):
        lines.append(f"{label}: {distribution([s.total for s in steps])}")
        lines.append(
            f"  Headroom (debounce, reconcile, write): {distribution([s.headroom for s in steps])}"
        )
        lines.append(f"    of which the resize request: {distribution([s.write for s in steps])}")
        lines.append(
            f"  kubelet (resize accepted -> cpu.max): {distribution([s.kubelet for s in steps])}"
        )
    # What else a trial waits for: the kubelet starting and stopping the neighbour.
    lines.append(
        "neighbour bound -> Running: " + distribution([t.running - t.bound for t in trials])
    )
    lines.append(
        "neighbour deleted -> finished: " + distribution([t.finished - t.deleted for t in trials])
    )
    lines.append(
        "neighbour deleted -> gone from the API: "
        + distribution([t.gone - t.deleted for t in trials])
    )
    return "\n".join(lines)
