"""Nodes that cannot resize in place are left alone with no configuration (design §3): a
KWOK node whose kubelet reports v1.34.2 keeps its pods' limits, while the same pod on a
1.35+ node beside it is resized by the same reconciler."""

import json

from tests.integration.reconciler.conftest import Scene, stays

OLD_KUBELET = "v1.34.2"


def test_a_node_whose_kubelet_is_older_than_1_35_is_left_alone(scene: Scene) -> None:
    control_plane, pods = scene.cluster, scene.pods
    old = scene.make_node(kubelet_version=OLD_KUBELET)
    current = scene.make_node()
    node_info = json.loads(control_plane.kubectl("get", "node", old, "-o", "json"))["status"]
    assert node_info["nodeInfo"]["kubeletVersion"] == OLD_KUBELET
    scene.configure(dryRun=False, debouncePeriod="100ms")
    for name, node in (("on-old", old), ("on-current", current)):
        pods.add(name, node=node)
        pods.wait_running(name)
    reconciler = scene.start_reconciler()

    pods.wait_limit("on-current", "10")
    assert stays(lambda: pods.cpu_limit("on-old") is None, seconds=3)
    assert pods.generation("on-old") == 1
    assert pods.status_annotation("on-old") is None
    assert pods.events("on-old", reason="CPULimitAdjusted") == []
    # The node the reconciler left alone still reports its kubelet as it was created.
    refreshed = json.loads(control_plane.kubectl("get", "node", old, "-o", "json"))["status"]
    assert refreshed["nodeInfo"]["kubeletVersion"] == OLD_KUBELET
    assert reconciler.resizes("ok") >= 1
