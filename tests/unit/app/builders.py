"""Builders for Kubernetes objects as the API server returns them (plain dicts).

Every builder takes keyword overrides; pass ``None`` to leave a field out. Shared by
the unit tests of every package.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from app.core.explain import Explanation
from app.core.labels import (
    API_VERSION,
    CONFIG_KIND,
    CONFIG_NAME,
    MAX_CPU_ANNOTATION,
    MODE_LABEL,
    MODE_MANAGED,
    STATUS_ANNOTATION,
)
from app.core.pods import PodInfo, PodWire, pod_info_from_dict

Obj = dict[str, Any]


def container(
    name: str = "app",
    *,
    cpu_request: str | None = "500m",
    cpu_limit: str | None = None,
    memory_request: str | None = "128Mi",
    memory_limit: str | None = None,
    restart_policy: str | None = None,
    cpu_resize_policy: str | None = None,
) -> Obj:
    """A container; ``restart_policy="Always"`` makes it a sidecar under initContainers."""
    requests = {"cpu": cpu_request, "memory": memory_request}
    limits = {"cpu": cpu_limit, "memory": memory_limit}
    result: Obj = {
        "name": name,
        "image": "registry.example/app:1",
        "resources": {
            "requests": {k: v for k, v in requests.items() if v is not None},
            "limits": {k: v for k, v in limits.items() if v is not None},
        },
    }
    if restart_policy is not None:
        result["restartPolicy"] = restart_policy
    if cpu_resize_policy is not None:
        result["resizePolicy"] = [
            {"resourceName": "cpu", "restartPolicy": cpu_resize_policy},
            {"resourceName": "memory", "restartPolicy": "NotRequired"},
        ]
    return result


def owner_ref(
    kind: str = "ReplicaSet",
    name: str = "web-5d8f7c9b4",
    *,
    api_version: str = "apps/v1",
    controller: bool = True,
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind.lower()}-{name}",
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def condition(type_: str, *, reason: str = "", message: str = "", status: str = "True") -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def pod(
    name: str = "web-5d8f7c9b4-abcde",
    *,
    namespace: str = "team-a",
    node: str | None = "node-1",
    containers: Sequence[Obj] | None = None,
    init_containers: Sequence[Obj] = (),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    max_cpu: str | None = None,
    status_annotation: str | None = None,
    owners: Sequence[Obj] | None = None,
    phase: str | None = "Running",
    qos_class: str | None = "Burstable",
    deletion_timestamp: str | None = None,
    conditions: Sequence[Obj] = (),
    generation: int | None = 1,
    observed_generation: int | None = None,
    uid: str | None = None,
    resources: Mapping[str, Mapping[str, str]] | None = None,
    node_selector: Mapping[str, str] | None = None,
    overhead_cpu: str | None = None,
    priority_class: str | None = None,
) -> Obj:
    """A pod; ``containers`` defaults to one Burstable app container requesting 500m.

    ``resources`` are pod-level resources (``{"requests": {...}, "limits": {...}}``). For
    a pod as admission sees it on CREATE, pass ``node=None, phase=None, qos_class=None``.
    """
    all_annotations = dict(annotations or {})
    if max_cpu is not None:
        all_annotations[MAX_CPU_ANNOTATION] = max_cpu
    if status_annotation is not None:
        all_annotations[STATUS_ANNOTATION] = status_annotation
    metadata: Obj = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "labels": dict(labels) if labels is not None else {"app": "web"},
        "annotations": all_annotations,
        "ownerReferences": list(owners) if owners is not None else [owner_ref()],
    }
    if generation is not None:
        metadata["generation"] = generation
    if deletion_timestamp is not None:
        metadata["deletionTimestamp"] = deletion_timestamp
    spec: Obj = {
        "containers": list(containers) if containers is not None else [container()],
        "restartPolicy": "Always",
    }
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if node is not None:
        spec["nodeName"] = node
    if resources is not None:
        spec["resources"] = {key: dict(value) for key, value in resources.items()}
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if overhead_cpu is not None:
        spec["overhead"] = {"cpu": overhead_cpu}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    status: Obj = {"conditions": list(conditions)}
    if phase is not None:
        status["phase"] = phase
    if qos_class is not None:
        status["qosClass"] = qos_class
    if observed_generation is not None:
        status["observedGeneration"] = observed_generation
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def init_heavy_pod(name: str, *, namespace: str, owners: Sequence[Obj] | None = None) -> Obj:
    """A 250m container after a 2-CPU init container, with 250m of RuntimeClass overhead:
    the scheduler books it at 2250m."""
    return pod(
        name,
        namespace=namespace,
        containers=[container(cpu_request="250m")],
        init_containers=[container("migrate", cpu_request="2")],
        overhead_cpu="250m",
        owners=owners,
    )


def pod_resources(
    *,
    cpu_request: str | None = "1",
    cpu_limit: str | None = None,
    memory_request: str | None = "256Mi",
    memory_limit: str | None = None,
) -> dict[str, dict[str, str]]:
    """Pod-level resources for ``pod(resources=...)``."""
    requests = {"cpu": cpu_request, "memory": memory_request}
    limits = {"cpu": cpu_limit, "memory": memory_limit}
    return {
        "requests": {k: v for k, v in requests.items() if v is not None},
        "limits": {k: v for k, v in limits.items() if v is not None},
    }


def bare_container(
    name: str = "app", *, cpu_request: str | None = None, cpu_limit: str | None = None
) -> Obj:
    """A container without memory resources, and without CPU ones unless given, as in pods
    that declare pod-level resources."""
    return container(name, cpu_request=cpu_request, cpu_limit=cpu_limit, memory_request=None)


def pod_info(name: str = "web-5d8f7c9b4-abcde", **overrides: Any) -> PodInfo:
    """``pod(...)`` stripped to the record the policy and eligibility work on."""
    return pod_info_from_dict(pod(name, **overrides))


def pod_wire(name: str = "web-5d8f7c9b4-abcde", **overrides: Any) -> PodWire:
    """``pod(...)`` decoded as the reconciler's watches decode it."""
    return wire(pod(name, **overrides))


def wire(obj: Obj) -> PodWire:
    return msgspec.convert(obj, PodWire)


def node(
    name: str = "node-1",
    *,
    cpu: str = "16",
    memory: str = "64Gi",
    labels: Mapping[str, str] | None = None,
    kubelet_version: str | None = "v1.37.2",
    operating_system: str = "linux",
    declared_features: Sequence[str] | None = None,
    taints: Sequence[Obj] = (),
) -> Obj:
    """A Ready node whose kubelet reports ``kubelet_version`` (None: reports nothing)."""
    node_info = {"operatingSystem": operating_system, "architecture": "amd64"}
    if kubelet_version is not None:
        node_info["kubeletVersion"] = kubelet_version
    status: Obj = {
        "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
        "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
        "nodeInfo": node_info,
    }
    if declared_features is not None:
        status["declaredFeatures"] = list(declared_features)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels)
            if labels is not None
            else {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name},
        },
        "spec": {"taints": list(taints)} if taints else {},
        "status": status,
    }


def namespace(name: str = "team-a", *, labels: Mapping[str, str] | None = None) -> Obj:
    """A namespace, enrolled (``mode=managed``) unless ``labels`` say otherwise."""
    all_labels = dict(labels) if labels is not None else {MODE_LABEL: MODE_MANAGED}
    all_labels["kubernetes.io/metadata.name"] = name
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": all_labels},
    }


def headroom_config(
    *, name: str = CONFIG_NAME, generation: int | None = 1, spec: Mapping[str, Any] | None = None
) -> Obj:
    """A HeadroomConfig; ``spec`` is used as given, so omitted fields take their defaults."""
    metadata: Obj = {"name": name}
    if generation is not None:
        metadata["generation"] = generation
    return {
        "apiVersion": API_VERSION,
        "kind": CONFIG_KIND,
        "metadata": metadata,
        "spec": dict(spec) if spec is not None else {},
    }


# A HeadroomConfig spec that sets every field, each away from its default.
FULL_SPEC: Obj = {
    "policy": "Proportional",
    "dryRun": False,
    "minBurstFloor": "500m",
    "maxMultiplier": "4.5",
    "quantum": "50m",
    "deadband": {"growPercent": 20, "shrinkPercent": 10},
    "debouncePeriod": "1m30s",
    "backoffPeriod": "10m",
    "rateLimits": {"perNodePatchesPerSecond": 5, "clientQPS": 20, "clientBurst": 40},
    "webhook": {"enabled": False, "initialMultiplier": "3"},
    "namespaceSelector": {"matchLabels": {"team": "a"}},
    "excludedNamespaces": ["kube-system", "monitoring"],
    "excludedOwners": [
        {"kind": "DaemonSet"},
        {"kind": "StatefulSet", "apiGroup": "apps", "name": "db"},
    ],
    "excludedNodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]},
    "weights": [
        {"priorityClassName": "critical", "weight": 4},
        {"namespaceSelector": {"matchLabels": {"team": "a"}}, "podSelector": {}, "weight": 0},
    ],
}


def limit_range(
    name: str = "limits",
    *,
    namespace: str = "team-a",
    container_max_cpu: str | None = None,
    container_ratio: str | None = None,
    pod_max_cpu: str | None = None,
    pod_ratio: str | None = None,
    container_default_cpu: str | None = None,
) -> Obj:
    container_cpu = {
        "max": container_max_cpu,
        "maxLimitRequestRatio": container_ratio,
        "default": container_default_cpu,
    }
    pod_cpu = {"max": pod_max_cpu, "maxLimitRequestRatio": pod_ratio}
    limits = [*_limit_item("Container", container_cpu), *_limit_item("Pod", pod_cpu)]
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": limits},
    }


def _limit_item(type_: str, cpu: Mapping[str, str | None]) -> list[Obj]:
    """The LimitRange item of one type with its CPU bounds, or none when it has none."""
    bounds = {key: {"cpu": value} for key, value in cpu.items() if value is not None}
    return [{"type": type_, **bounds}] if bounds else []


def resource_quota(
    name: str = "quota", *, namespace: str = "team-a", hard: Mapping[str, str] | None = None
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"hard": dict(hard) if hard is not None else {"requests.cpu": "10"}},
    }


def controlled(
    name: str = "web-5d8f7c9b4",
    *,
    namespace: str = "team-a",
    owners: Sequence[Obj] | None = None,
) -> Obj:
    """A ReplicaSet or Job as a metadata-only list returns it; by default the default pod's
    ReplicaSet, its Deployment's."""
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": list(owners)
            if owners is not None
            else [owner_ref("Deployment", "web")],
        },
    }


def vpa(
    name: str = "web",
    *,
    namespace: str = "team-a",
    target_kind: str = "Deployment",
    target_name: str = "web",
    target_api_version: str | None = "apps/v1",
    update_mode: str | None = None,
    container_policies: Sequence[Obj] | None = None,
    cpu_targets: Mapping[str, str] | None = None,
    cpu_upper_bounds: Mapping[str, str] | None = None,
) -> Obj:
    """A VerticalPodAutoscaler; no container policies means the default, limits included.
    ``cpu_targets`` and ``cpu_upper_bounds`` are its status's recommended CPU target and
    upper bound by container (an upper bound not given is the target)."""
    target: Obj = {"kind": target_kind, "name": target_name}
    if target_api_version is not None:
        target["apiVersion"] = target_api_version
    spec: Obj = {"targetRef": target}
    if update_mode is not None:
        spec["updatePolicy"] = {"updateMode": update_mode}
    if container_policies is not None:
        spec["resourcePolicy"] = {"containerPolicies": list(container_policies)}
    obj: Obj = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if cpu_targets is not None:
        bounds = dict(cpu_upper_bounds or {})
        obj["status"] = {
            "recommendation": {
                "containerRecommendations": [
                    {
                        "containerName": name,
                        "target": {"cpu": cpu, "memory": "128Mi"},
                        "upperBound": {"cpu": bounds.get(name, cpu), "memory": "256Mi"},
                    }
                    for name, cpu in cpu_targets.items()
                ]
            }
        }
    return obj


# Pod B of design section 2's worked example, currently limited to 1.5 cores.
POD_B_EXPLANATION = Explanation(
    factor="2.00",
    slack_m=8000,
    overbooked_m=0,
    allocatable_m=16000,
    managed_m=8000,
    node_pods=3,
    current_m=1500,
    target_m=3000,
    dry_run=False,
)
