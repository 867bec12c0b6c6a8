"""Simulated nodes: Node objects that KWOK adopts and keeps Ready."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devcluster.binaries import kubernetes_version
from devcluster.controlplane import KWOK_NODE_ANNOTATION

KUBELET_VERSION_ANNOTATION = "devcluster.kube-headroom.dev/kubelet-version"
DECLARED_FEATURES_ANNOTATION = "devcluster.kube-headroom.dev/declared-features"
KUBELET_PORT_ANNOTATION = "devcluster.kube-headroom.dev/kubelet-port"
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"
# What a kubelet declares, with its default feature gates, that Headroom reads: in-place
# resize of pod-level resources is beta and on by default from 1.36.
POD_LEVEL_RESIZE_FEATURE = "InPlacePodLevelResourcesVerticalScaling"
POD_LEVEL_RESIZE_DEFAULT_FROM = (1, 36)


def default_declared_features(kubelet_version: str) -> tuple[str, ...]:
    """The features a kubelet of this version declares by default (of those Headroom reads)."""
    major, minor = (int(part) for part in kubelet_version.lstrip("v").split(".")[:2])
    return (POD_LEVEL_RESIZE_FEATURE,) if (major, minor) >= POD_LEVEL_RESIZE_DEFAULT_FROM else ()


def simulated_node(
    name: str,
    *,
    cpu: str = "16",
    memory: str = "64Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    os: str = "linux",
    kubelet_version: str | None = None,
    declared_features: tuple[str, ...] | None = None,
    kubelet_port: int | None = None,
) -> dict[str, Any]:
    """A Node manifest for KWOK. ``os`` sets kubernetes.io/os (the resize
    admission plugin requires linux on the node a pod is bound to); the kubelet
    version defaults to the control plane's, and the declared features to what a
    kubelet of that version declares by default. With ``kubelet_port`` (the control
    plane's ``kwok_port``) metrics-server scrapes the resource metrics KWOK serves for
    the node, as it would a kubelet's."""
    version = kubelet_version or kubernetes_version()
    features = (
        default_declared_features(version) if declared_features is None else declared_features
    )
    annotations = {
        KWOK_NODE_ANNOTATION: "fake",
        # Read by the KWOK node stage into status.nodeInfo.kubeletVersion.
        KUBELET_VERSION_ANNOTATION: version,
    }
    if features:
        # Read by the KWOK node stage into status.declaredFeatures.
        annotations[DECLARED_FEATURES_ANNOTATION] = ",".join(features)
    if kubelet_port is not None:
        # Read by the KWOK node stage into its address and kubelet port.
        annotations[KUBELET_PORT_ANNOTATION] = str(kubelet_port)
        # Where metrics-server finds the node's resource metrics on KWOK's server.
        annotations[METRICS_PATH_ANNOTATION] = f"/metrics/nodes/{name}/metrics/resource"
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
