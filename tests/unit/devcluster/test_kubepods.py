"""Where a real kubelet (cgroup v2, cgroupfs driver) puts a pod's and a container's cgroups."""

from pathlib import PurePosixPath
from typing import Any

import pytest

from devcluster.kubepods import POD_CGROUPS, PodNotStartedError, container_cgroup, pod_cgroup

UID = "60a77400-8c3b-4721-b258-794cd7482d71"


def pod(qos: str | None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "uid": UID},
        "status": {**({"qosClass": qos} if qos else {}), **status},
    }


@pytest.mark.parametrize(
    ("qos", "parent"),
    [
        ("Guaranteed", "/sys/fs/cgroup/kubepods"),
        ("Burstable", "/sys/fs/cgroup/kubepods/burstable"),
        ("BestEffort", "/sys/fs/cgroup/kubepods/besteffort"),
    ],
)
def test_pods_nest_by_qos_class(qos: str, parent: str) -> None:
    assert pod_cgroup(pod(qos)) == f"{parent}/pod{UID}"


def test_containers_are_named_by_their_id_and_sidecars_count() -> None:
    started = pod(
        "Burstable",
        initContainerStatuses=[{"name": "proxy", "containerID": "containerd://aa11"}],
        containerStatuses=[{"name": "app", "containerID": "containerd://bb22"}],
    )
    base = f"/sys/fs/cgroup/kubepods/burstable/pod{UID}"
    assert container_cgroup(started, "app") == f"{base}/bb22"
    assert container_cgroup(started, "proxy") == f"{base}/aa11"


def test_a_pod_not_started_has_no_cgroup_yet() -> None:
    with pytest.raises(PodNotStartedError, match="QoS"):
        pod_cgroup(pod(None))
    with pytest.raises(PodNotStartedError, match="no ID yet"):
        container_cgroup(pod("Burstable", containerStatuses=[{"name": "app"}]), "app")


def _globbed(path: str) -> list[str]:
    """The globs of ``POD_CGROUPS`` that match ``path``, a ``*`` never crossing a ``/``
    (as in the guest agent's globbing)."""
    return [glob for glob in POD_CGROUPS if PurePosixPath(path).match(glob)]


@pytest.mark.parametrize("qos", ["Guaranteed", "Burstable", "BestEffort"])
def test_a_running_pod_of_any_qos_class_matches_one_pod_cgroup_glob(qos: str) -> None:
    running = pod(qos)
    assert len(_globbed(f"{pod_cgroup(running)}/cgroup.procs")) == 1
    # A container's cgroup inside the pod's is not a second pod.
    assert _globbed(f"{pod_cgroup(running)}/abc123/cgroup.procs") == []
