"""Pods with pod-level resources on the real API server: their pod-level CPU limit is
resized where the node declares pod-level in-place resize, and they are left alone,
with a reason, where it does not (every node of a 1.35 cluster)."""

import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from devcluster.binaries import kubernetes_version
from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.plugin import kubectl_headroom_json
from tests.integration.reconciler.conftest import Pods, Scene, stays
from tests.integration.reconciler.manifests import bare_container, container, pod

# The API server turns pod-level in-place resize on by default from this minor.
_POD_LEVEL_RESIZE_FROM = (1, 36)
_SERVER = tuple(int(part) for part in kubernetes_version().lstrip("v").split(".")[:2])
needs_pod_level_resize = pytest.mark.skipif(
    _SERVER < _POD_LEVEL_RESIZE_FROM,
    reason=f"pod-level in-place resize is off (alpha) at {kubernetes_version()}",
)


def _pod_level(
    name: str,
    pods: Pods,
    *,
    node: str,
    cpu: str = "1",
    cpu_limit: str | None = None,
    memory_limit: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v is not None}
    pods.create(
        pod(
            name,
            namespace=pods.namespace,
            node=node,
            containers=containers or [bare_container()],
            resources={"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": limits},
            annotations=annotations,
        )
    )


def _pod_level_cpu_limit(pods: Pods, name: str) -> str | None:
    limits: dict[str, str] = pods.get(name)["spec"].get("resources", {}).get("limits", {})
    return limits.get("cpu")


def _wait_pod_level_limit(pods: Pods, name: str, cpu: str) -> None:
    eventually(lambda: _pod_level_cpu_limit(pods, name) == cpu, timeout=20, what=f"{name} at {cpu}")


@needs_pod_level_resize
def test_the_pod_level_limit_follows_the_node_and_the_containers_are_left_alone(
    scene: Scene,
) -> None:
    pods = scene.pods
    node = scene.enforcing_node()
    scene.start_reconciler()
    _pod_level("p", pods, node=node, containers=[bare_container(), container("side", cpu="100m")])
    _wait_pod_level_limit(pods, "p", "10")
    # The containers keep exactly what they were created with.
    assert pods.cpu_limits("p") == [None, None]
    # The explanations follow once the node has settled.
    eventually(
        lambda: (pods.status_annotation("p") or {}).get("targetLimit") == "10000m",
        what="the annotation",
    )
    [event] = eventually(
        lambda: pods.events("p", reason="CPULimitAdjusted"), what="the CPULimitAdjusted event"
    )
    assert event["message"] == "unset -> 10000m (node factor 16.00, slack 15/16 cores)"
    # A neighbour books 13 more cores: the pod-level limit comes down with the slack.
    pods.neighbour("big", node=node, cpu="13")
    _wait_pod_level_limit(pods, "p", "3")
    # The simulated kubelet reports the pod-level resources it applied.
    eventually(
        lambda: pods.get("p")["status"].get("resources", {}).get("limits", {}).get("cpu") == "3",
        what="the kubelet's pod-level status",
    )
    assert pods.get("p")["status"]["qosClass"] == "Burstable"


@needs_pod_level_resize
def test_max_cpu_the_qos_guard_and_container_limits_bound_the_pod_level_limit(
    scene: Scene,
) -> None:
    pods = scene.pods
    roomy = scene.enforcing_node()
    booked = scene.make_node(cpu="4")
    scene.start_reconciler()
    _pod_level("capped", pods, node=roomy, annotations={"kube-headroom.dev/max-cpu": "4"})
    # A full node: memory pinned at pod level, so CPU must stay a quantum above its request.
    _pod_level("guarded", pods, node=booked, memory_limit="256Mi")
    _pod_level("floored", pods, node=booked, containers=[container(cpu="200m", cpu_limit="1500m")])
    pods.neighbour("fill", node=booked, cpu="2")
    _wait_pod_level_limit(pods, "capped", "4")
    _wait_pod_level_limit(pods, "guarded", "1010m")
    _wait_pod_level_limit(pods, "floored", "1500m")
    assert pods.get("guarded")["status"]["qosClass"] == "Burstable"


@needs_pod_level_resize
def test_a_limit_range_pod_maximum_caps_the_pod_level_limit(scene: Scene) -> None:
    pods = scene.pods
    node = scene.enforcing_node()
    # A Pod maximum demands a limit on every pod of the namespace, so this one has one.
    scene.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "pods", "namespace": pods.namespace},
            "spec": {"limits": [{"type": "Pod", "max": {"cpu": "6"}}]},
        }
    )
    _pod_level("p", pods, node=node, cpu_limit="2")
    scene.start_reconciler()
    _wait_pod_level_limit(pods, "p", "6")


def test_pod_level_pods_are_left_alone_where_the_node_cannot_resize_them(scene: Scene) -> None:
    pods = scene.pods
    node = scene.enforcing_node(declared_features=())
    reconciler = scene.start_reconciler()
    _pod_level("p", pods, node=node)
    pods.add("c", node=node)
    # The container-level pod beside it is managed (and books the pod-level pod's request).
    pods.wait_limit("c", "10")
    assert pods.explanation("c").get("slack") == "14000m"
    assert stays(lambda: _pod_level_cpu_limit(pods, "p") is None, seconds=2)
    assert pods.status_annotation("p") is None
    assert pods.generation("p") == 1
    assert reconciler.resizes("error") == 0
    explained = kubectl_headroom_json(
        scene.cluster, "explain", "-n", pods.namespace, "p", timeout=60
    )
    assert explained["managed"] is False
    assert explained["ineligible"] == "pod-level-resize-unsupported"


def test_the_api_server_refuses_a_pod_level_resize_the_node_does_not_declare(
    control_plane: Cluster, make_node: Callable[..., str], pods: Pods
) -> None:
    node = make_node(declared_features=())
    _pod_level("p", pods, node=node)
    pods.wait_running("p")
    refused = subprocess.run(
        [
            str(control_plane.bin_dir / "kubectl"),
            f"--kubeconfig={control_plane.kubeconfig}",
            "patch", "pod", "p", "-n", pods.namespace, "--subresource", "resize",
            "--type", "merge", "-p", '{"spec":{"resources":{"limits":{"cpu":"2"}}}}',
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    # 1.36+: NodeDeclaredFeatureValidator names the feature the node does not declare;
    # 1.35: the feature gate itself is off.
    assert "InPlacePodLevelResourcesVerticalScaling" in refused.stderr, refused.stderr
    assert _pod_level_cpu_limit(pods, "p") is None
