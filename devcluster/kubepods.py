"""Where a real kubelet puts a pod's cgroups: cgroup v2, the cgroupfs driver.

The kubelet nests pods under ``/kubepods`` by QoS class (Guaranteed pods directly,
``burstable`` and ``besteffort`` in their own cgroups), each pod in ``pod<uid>``, and
containerd puts each container in a cgroup named by its container ID inside its pod's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CGROUP_ROOT = "/sys/fs/cgroup/kubepods"
_QOS_DIRECTORIES = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}


# Every pod's cgroup, whatever its QoS class: a node runs no pod when none matches.
POD_CGROUPS = tuple(
    "/".join(filter(None, (CGROUP_ROOT, directory, "pod*", "cgroup.procs")))
    for directory in _QOS_DIRECTORIES.values()
)


class PodNotStartedError(LookupError):
    """The pod (or container) has no cgroup yet: it is not bound, or not started."""


def pod_cgroup(pod: Mapping[str, Any]) -> str:
    qos = pod.get("status", {}).get("qosClass")
    if qos not in _QOS_DIRECTORIES:
        raise PodNotStartedError(f"pod {pod['metadata']['name']} has no QoS class yet")
    parent = "/".join(filter(None, (CGROUP_ROOT, _QOS_DIRECTORIES[qos])))
    return f"{parent}/pod{pod['metadata']['uid']}"


def container_id(pod: Mapping[str, Any], container: str) -> str:
    status = pod.get("status", {})
    for entry in [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]:
        if entry["name"] == container and entry.get("containerID"):
            return str(entry["containerID"]).split("://", 1)[-1]
    raise PodNotStartedError(f"container {container} of {pod['metadata']['name']} has no ID yet")


def container_cgroup(pod: Mapping[str, Any], container: str) -> str:
    return f"{pod_cgroup(pod)}/{container_id(pod, container)}"


def cpu_max_millis(text: str) -> int | None:
    """A cgroup's ``cpu.max`` ("<quota> <period>", or "max <period>") as millicores; None
    for no limit."""
    quota, period = text.split()
    return None if quota == "max" else int(quota) * 1000 // int(period)
