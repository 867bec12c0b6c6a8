"""Nodes that cannot resize in place are left alone with no configuration (design §3): a
KWOK node whose kubelet reports v1.34.2 keeps its pods' limits, while the same pod on a
1.35+ node beside it is resized by the same reconciler."""

import json
from collections.abc import Callable

from tests.integration.conftest import Cluster
from tests.integration.reconciler.conftest import Pods, Reconciler, stays
from tests.integration.reconciler.manifests import container, pod

OLD_KUBELET = "v1.34.2"


def test_a_node_whose_kubelet_is_older_than_1_35_is_left_alone(
    control_plane: Cluster,
    configure: Callable[..., None],
    make_node: Callable[..., str],
    pods: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    old = make_node(kubelet_version=OLD_KUBELET)
    current = make_node()
    node_info = json.loads(control_plane.kubectl("get", "node", old, "-o", "json"))["status"]
    assert node_info["nodeInfo"]["kubeletVersion"] == OLD_KUBELET
    configure(dryRun=False, debouncePeriod="100ms")
    for name, node in (("on-old", old), ("on-current", current)):
        pods.create(pod(name, namespace=pods.namespace, node=node, containers=[container(cpu="1")]))
        pods.wait_running(name)
    reconciler = start_reconciler()

    pods.wait_limit("on-current", "10")
    assert stays(lambda: pods.cpu_limit("on-old") is None, seconds=3)
    assert pods.generation("on-old") == 1
    assert pods.status_annotation("on-old") is None
    assert pods.events("on-old", reason="CPULimitAdjusted") == []
    # The node the reconciler left alone still reports its kubelet as it was created.
    refreshed = json.loads(control_plane.kubectl("get", "node", old, "-o", "json"))["status"]
    assert refreshed["nodeInfo"]["kubeletVersion"] == OLD_KUBELET
    assert reconciler.resizes("ok") >= 1
