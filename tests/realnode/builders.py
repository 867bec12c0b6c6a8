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
    cpu: str | None = "500m",
    cpu_limit: str | None = None,
    memory: str = "32Mi",
    memory_limit: str | None = None,
    args: Sequence[str] = ("sleep",),
    sidecar: bool = False,
    pre_stop_sleep: int | None = None,
) -> Obj:
    requests = {"memory": memory} | ({"cpu": cpu} if cpu is not None else {})
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    result: Obj = {
        "name": name,
        "image": PROBE_IMAGE,
        "imagePullPolicy": "Never",
        "args": list(args),
        "resources": {"requests": requests, "limits": limits},
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
    *,
    namespace: str,
    node: str,
    containers: Sequence[Obj] | None = None,
    sidecars: Sequence[Obj] = (),
    resources: Mapping[str, Mapping[str, str]] | None = None,
    grace_seconds: int = 2,
) -> Obj:
    spec: Obj = {
        "nodeName": node,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": list(containers) if containers is not None else [container()],
    }
    if sidecars:
        spec["initContainers"] = list(sidecars)
    if resources is not None:
        spec["resources"] = {key: dict(value) for key, value in resources.items()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": spec,
    }
