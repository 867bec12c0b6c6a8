"""A local control plane whose nodes are real kubelets in qemu guests.

``RealCluster`` starts, in the harness's own network namespace (``devcluster.realnet``),
the guest network, the control plane with ``KubeletAccess`` (the Node authorizer,
NodeRestriction, the API server's kubelet client), and the guests in parallel, and waits
until every node is Ready. The real-node tier and its benchmark share it.

The standard fleet, sized for a 2-core machine whose guests are emulated:

- ``WORKLOAD``, 3 vCPUs, the default CPU manager policy: where the tier's managed pods and
  their neighbours run. Three CPUs because Go rounds a CPU limit below 2 up to 2 when it
  sizes GOMAXPROCS, so on a 2-CPU node a Go program could not show its limit moving.
- ``STATIC``, 2 vCPUs, the static CPU manager policy (half a CPU reserved for the kubelet,
  which leaves one CPU to pin) and LimitedSwap with a small swap file: the two kubelet
  policies under which a kubelet answers a resize ``Infeasible``. Labelled
  ``node.kubernetes.io/cpu-manager-policy=static``, a label a kubelet may set on itself
  under NodeRestriction and that preflight recognises.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.apipaths import NODES
from devcluster.addons import Registry
from devcluster.binaries import locate_binaries
from devcluster.controlplane import ControlPlane, KubeletAccess
from devcluster.guests import Guest, GuestError, GuestImage, NodeSpec, RegistryMirror
from devcluster.kubeapi import KubeAPI, KubeAPIError
from devcluster.kubepods import POD_CGROUPS, PodNotStartedError, container_cgroup, pod_cgroup
from devcluster.realnet import HOST_ADDRESS, GuestNetwork

logger = logging.getLogger(__name__)

STATIC_POLICY_LABEL = "node.kubernetes.io/cpu-manager-policy"
WORKLOAD = NodeSpec(name="realnode-1", index=1, cpus=3, memory_mib=2048)
STATIC = NodeSpec(
    name="realnode-2",
    index=2,
    cpus=2,
    memory_mib=1536,
    labels={STATIC_POLICY_LABEL: "static"},
    kubelet={"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}},
    swap_mib=256,
)
FLEET = (WORKLOAD, STATIC)


def node_ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


@dataclass
class RealCluster:
    """The control plane and its real nodes; ``start()`` returns once all are Ready."""

    work_dir: Path
    run_dir: Path
    specs: Sequence[NodeSpec] = FLEET
    bin_dir: Path = field(default_factory=locate_binaries)
    boot_timeout: float = 300.0
    # A local registry listening on the guest network (``HOST_ADDRESS``), started with the
    # cluster: the nodes pull from it, for its own host and each of ``mirrored``.
    registry: Registry | None = None
    mirrored: Sequence[str] = ()
    plane: ControlPlane = field(init=False)
    network: GuestNetwork = field(default_factory=GuestNetwork, init=False)
    guests: dict[str, Guest] = field(default_factory=dict, init=False)
    # Seconds from each guest's qemu start to its node's Ready condition, and from
    # start() to every node Ready.
    ready_after: dict[str, float] = field(default_factory=dict, init=False)
    up_after: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.plane = ControlPlane(
            work_dir=self.work_dir / "control-plane",
            bin_dir=self.bin_dir,
            kubelets=KubeletAccess(address=HOST_ADDRESS),
        )

    @property
    def api(self) -> KubeAPI:
        return self.plane.api

    def start(self) -> None:
        started = time.monotonic()
        image = GuestImage.locate()
        self.network.setup()
        try:
            mirrors = self._start_registry()
            self.plane.start()
            indices = [spec.index for spec in self.specs]
            for spec in self.specs:
                self.network.add_tap(spec.index)
                guest = Guest(
                    spec=spec,
                    image=image,
                    work_dir=self.work_dir / "guests" / spec.name,
                    run_dir=self.run_dir,
                )
                guest.write_config(self.plane, indices=indices, mirrors=mirrors)
                self.guests[spec.name] = guest
            for guest in self.guests.values():
                guest.start()
            self._wait_ready()
            for guest in self.guests.values():
                guest.wait_for_images(timeout=120)
            self.up_after = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def _start_registry(self) -> list[RegistryMirror]:
        if self.registry is None:
            return []
        if self.registry.address != HOST_ADDRESS:
            raise GuestError(f"the guests reach a registry only at {HOST_ADDRESS}")
        self.registry.start()
        endpoint, ca = f"https://{self.registry.host}", self.registry.ca_file.read_bytes()
        return [
            RegistryMirror(upstream=upstream, endpoint=endpoint, ca_pem=ca)
            for upstream in dict.fromkeys((self.registry.host, *self.mirrored))
        ]

    def _wait_ready(self) -> None:
        api = self.api
        deadline = time.monotonic() + self.boot_timeout
        waiting = dict(self.guests)
        while waiting:
            for name, guest in list(waiting.items()):
                if not guest.running():
                    raise GuestError(
                        f"guest {name} stopped while booting; console {guest.console}:\n"
                        f"{guest.console_tail()}"
                    )
                try:
                    node = api.get(NODES.path(name=name))
                except (OSError, KubeAPIError):
                    node = None
                if node is not None and node_ready(node):
                    self.ready_after[name] = time.monotonic() - guest.started
                    logger.info(
                        "node %s Ready %.1fs after qemu started", name, self.ready_after[name]
                    )
                    del waiting[name]
            if time.monotonic() > deadline:
                raise GuestError(
                    f"{', '.join(waiting)} not Ready within {self.boot_timeout}s; "
                    + "; ".join(
                        f"console {g.console}:\n{g.console_tail()}" for g in waiting.values()
                    )
                )
            time.sleep(0.5)

    def wait_quiet(self, *, timeout: float) -> None:
        """Until no guest has a pod's cgroup left: every container the kubelets were
        stopping is gone. A pod deleted with no grace period leaves the API at once, and
        an emulated kubelet can take a minute to stop its containers behind it."""
        deadline = time.monotonic() + timeout
        while True:
            left = {guest.name: sorted(guest.read(*POD_CGROUPS)) for guest in self}
            left = {name: paths for name, paths in left.items() if paths}
            if not left:
                return
            if time.monotonic() > deadline:
                raise GuestError(f"pods still running after {timeout}s: {left}")
            time.sleep(1)

    def startup(self) -> str:
        """How long the start took, for a benchmark's first line."""
        return f"control plane and guests up in {self.up_after:.1f}s; " + ", ".join(
            f"{name} Ready {seconds:.1f}s after qemu started"
            for name, seconds in self.ready_after.items()
        )

    def guest(self, name: str) -> Guest:
        return self.guests[name]

    def cpu_max(self, pod: Mapping[str, Any], *, container: str | None = None) -> str:
        """The ``cpu.max`` of the pod's cgroup (or of one container's) as its guest's
        cgroup filesystem shows it, read through the guest's agent."""
        cgroup = pod_cgroup(pod) if container is None else container_cgroup(pod, container)
        path = f"{cgroup}/cpu.max"
        guest = self.guest(pod["spec"]["nodeName"])
        files = guest.read(path)
        if path not in files:
            raise PodNotStartedError(f"{path} not (yet) in {guest.name}")
        return files[path].strip()

    def __iter__(self) -> Iterator[Guest]:
        return iter(self.guests.values())

    def keep_logs(self, destination: Path) -> Path:
        self.plane.keep_logs(destination / "control-plane")
        for guest in self.guests.values():
            guest.keep_logs(destination / "guests")
        return destination

    def stop(self) -> None:
        for guest in self.guests.values():
            guest.stop()
        self.plane.stop()
        if self.registry is not None:
            self.registry.stop()
        self.network.teardown()

    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def throwaway_cluster(
    specs: Sequence[NodeSpec], *, prefix: str, **options: Any
) -> Iterator[RealCluster]:
    """A started ``RealCluster`` of ``specs`` in directories of its own, stopped and
    removed afterwards: a benchmark's cluster."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    # qemu's agent sockets need a short path.
    run_dir = Path(tempfile.mkdtemp(prefix="hrq", dir="/tmp"))
    cluster = RealCluster(work_dir=work, run_dir=run_dir, specs=specs, **options)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
