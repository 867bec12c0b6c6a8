"""Simulated nodes: Node objects that KWOK adopts and keeps Ready."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster.binaries import kubernetes_version
from devcluster.controlplane import KWOK_NODE_ANNOTATION

KUBELET_VERSION_ANNOTATION = "devcluster.kube-headroom.dev/kubelet-version"


def simulated_node(
    name: str,
    *,
    cpu: str = "16",
    memory: str = "64Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    os: str = "linux",
    kubelet_version: str | None = None,
) -> dict[str, Any]:
    """A Node manifest for KWOK. ``os`` sets kubernetes.io/os (the resize
    admission plugin requires linux on the node a pod is bound to); the kubelet
    version defaults to the control plane's."""
    annotations = {
        KWOK_NODE_ANNOTATION: "fake",
        # Read by the KWOK node stage into status.nodeInfo.kubeletVersion.
        KUBELET_VERSION_ANNOTATION: kubelet_version or kubernetes_version(),
    }
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": annotations,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": os,
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "spec": {},
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }
