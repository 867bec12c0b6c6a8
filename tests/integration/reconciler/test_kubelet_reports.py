"""What the kubelet reports after a resize: Infeasible backs off, Deferred is only counted.

The simulated kubelet leaves these pods' status alone; the test writes it through
`pods/status`, as a real kubelet does.
"""

import json
from typing import Any

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Scene, stays
from tests.integration.reconciler.manifests import running_status


def _report(cluster: Cluster, pods: Pods, name: str, conditions: list[dict[str, Any]]) -> None:
    status = running_status(pods.get(name), conditions=conditions)
    cluster.kubectl(
        "patch", "pod", name, "-n", pods.namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip


@pytest.mark.parametrize("reason", ["Infeasible", "Deferred"])
def test_kubelet_reports(reason: str, scene: Scene) -> None:
    control_plane, pods = scene.cluster, scene.pods
    node = scene.enforcing_node()
    pods.add("p", node=node, custom_status=True)
    _report(control_plane, pods, "p", [])
    reconciler = scene.start_reconciler()
    pods.wait_limit("p", "10")
    generation = pods.generation("p")

    pending = {
        "type": "PodResizePending",
        "status": "True",
        "reason": reason,
        "message": "Node didn't have enough capacity: cpu, requested: 10000, capacity: 8000",
    }
    _report(control_plane, pods, "p", [pending])
    eventually(lambda: reconciler.resizes(reason) == 1, what=f"{reason} counted")
    if reason == "Deferred":
        assert reconciler.sample("headroom_resizes_deferred") == 1
    else:
        [event] = pods.events("p", reason="ResizeInfeasible")
        assert event["type"] == "Warning"
        assert "Node didn't have enough capacity" in event["message"]

    # A neighbour changes the target; a backed-off or deferred pod gets no new patch.
    pods.neighbour("neighbour", node=node, cpu="8")
    if reason == "Deferred":
        # Not backed off: the new target is applied; the report is not counted again.
        pods.wait_limit("p", "8")
    else:
        assert stays(lambda: pods.generation("p") == generation, seconds=6)
    assert reconciler.resizes(reason) == 1
