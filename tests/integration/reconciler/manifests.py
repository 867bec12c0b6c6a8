"""Builders for the objects the reconciler's integration tests create (plain dicts)."""

from collections.abc import Mapping, Sequence
from typing import Any

from devcluster.controlplane import KWOK_CUSTOM_STATUS_ANNOTATION
from devcluster.nodes import simulated_node

Obj = dict[str, Any]
# Test nodes repel the scheduler, so only pods a test binds itself land on them.
RESERVED_TAINT: Obj = {"key": "headroom.test/reserved", "value": "true", "effect": "NoSchedule"}
# A pod's opt-out: it books its requests on the node, and Headroom leaves it alone.
UNMANAGED = {"kube-headroom.dev/mode": "unmanaged"}


def reserved_node(
    name: str,
    *,
    cpu: str = "16",
    kubelet_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    declared_features: tuple[str, ...] | None = None,
    kubelet_port: int | None = None,
) -> Obj:
    node = simulated_node(
        name,
        cpu=cpu,
        kubelet_version=kubelet_version,
        labels=labels,
        declared_features=declared_features,
        kubelet_port=kubelet_port,
    )
    node["spec"]["taints"] = [RESERVED_TAINT]
    return node


def bare_container(name: str = "app") -> Obj:
    """A container without resources of its own, as pods with pod-level resources have."""
    return {"name": name, "image": "registry.example/app:1"}


def container(
    name: str = "app",
    *,
    cpu: str | None = "500m",
    cpu_limit: str | None = None,
    memory: str = "64Mi",
    memory_limit: str | None = None,
    cpu_resize_policy: str | None = None,
    sidecar: bool = False,
) -> Obj:
    requests = {"memory": memory} | ({"cpu": cpu} if cpu is not None else {})
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    result: Obj = {
        "name": name,
        "image": "registry.example/app:1",
        "resources": {"requests": requests, "limits": limits},
    }
    if cpu_resize_policy is not None:
        result["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": cpu_resize_policy}]
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def pod(
    name: str,
    *,
    namespace: str,
    node: str,
    containers: Sequence[Obj] | None = None,
    sidecars: Sequence[Obj] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    custom_status: bool = False,
    resources: Mapping[str, Mapping[str, str]] | None = None,
) -> Obj:
    """A pod bound straight to `node` (tests place pods; the scheduler is not involved).

    With `custom_status` the simulated kubelet leaves the pod's status to the test, which
    then writes kubelet conditions itself.
    """
    all_annotations = dict(annotations or {})
    if custom_status:
        all_annotations[KWOK_CUSTOM_STATUS_ANNOTATION] = "custom"
    spec: Obj = {
        "nodeName": node,
        "containers": list(containers) if containers is not None else [container()],
        "tolerations": [{"key": RESERVED_TAINT["key"], "operator": "Exists"}],
    }
    if sidecars:
        spec["initContainers"] = list(sidecars)
    if resources is not None:
        # Pod-level resources.
        spec["resources"] = {key: dict(value) for key, value in resources.items()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {"app": name}),
            "annotations": all_annotations,
        },
        "spec": spec,
    }


def headroom_config(**spec: Any) -> Obj:
    return {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": "cluster"},
        "spec": spec,
    }


def running_status(pod_obj: Obj, *, conditions: Sequence[Obj] = ()) -> Obj:
    """What a kubelet reports for a running pod, plus extra conditions (e.g. resize pending)."""
    return {
        "status": {
            "phase": "Running",
            "observedGeneration": pod_obj["metadata"].get("generation", 1),
            "conditions": [
                {"type": "Ready", "status": "True"},
                *conditions,
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2030-01-01T00:00:00Z"}},
                    "resources": c["resources"],
                }
                for c in pod_obj["spec"]["containers"]
            ],
        }
    }
