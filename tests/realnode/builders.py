"""Builders for the real-node tier's pods: the probe image (tests/realnode/images/probe),
placed on a guest by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devcluster.guests import PROBE_IMAGE

Obj = dict[str, Any]


def container(
    name: str = "app",
    *,
    cpu: str = "500m",
    memory: str = "32Mi",
    limits: Mapping[str, str] | None = None,
    args: Sequence[str] = ("sleep",),
    sidecar: bool = False,
    pre_stop_sleep: int | None = None,
) -> Obj:
    """The probe running ``args``, requesting ``cpu`` and ``memory``, with ``limits`` as
    the container's own."""
    result = bare_container(name) | {
        "args": list(args),
        "resources": {"requests": {"memory": memory, "cpu": cpu}, "limits": dict(limits or {})},
    }
    if sidecar:
        result["restartPolicy"] = "Always"
    if pre_stop_sleep is not None:
        # Keeps the container running (and its requests allocated on the kubelet) for
        # this long after the pod is deleted.
        result["lifecycle"] = {"preStop": {"sleep": {"seconds": pre_stop_sleep}}}
    return result


def bare_container(name: str = "app") -> Obj:
    """A container without resources of its own, for pods with pod-level resources."""
    return {"name": name, "image": PROBE_IMAGE, "imagePullPolicy": "Never", "args": ["sleep"]}


def pod(
    name: str,
    *containers: Obj,
    namespace: str,
    node: str,
    sidecars: Sequence[Obj] = (),
    resources: Mapping[str, Mapping[str, str]] | None = None,
    grace_seconds: int = 2,
) -> Obj:
    """``containers`` (one :func:`container` if none) bound to ``node``."""
    spec: Obj = {
        "nodeName": node,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": list(containers) or [container()],
    }
    if sidecars:
        spec["initContainers"] = list(sidecars)
    if resources is not None:
        # Pod-level resources.
        spec["resources"] = {key: dict(value) for key, value in resources.items()}
    metadata = {"name": name, "namespace": namespace, "labels": {"app": name}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def neighbour(namespace: str, *, node: str, cpu: str, sidecars: Sequence[Obj] = ()) -> Obj:
    """The pod ``neighbour``, its one container of that name booking ``cpu`` on ``node``."""
    return pod(
        "neighbour",
        container("neighbour", cpu=cpu),
        namespace=namespace,
        node=node,
        sidecars=sidecars,
    )
