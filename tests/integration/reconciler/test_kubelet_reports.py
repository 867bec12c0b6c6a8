"""What the kubelet reports after a resize: Infeasible backs off, Deferred is only counted.

The simulated kubelet leaves these pods' status alone; the test writes it through
`pods/status`, as a real kubelet does.
"""

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Reconciler, stays
from tests.integration.reconciler.manifests import container, pod, running_status


def _report(cluster: Cluster, pods: Pods, name: str, conditions: list[dict[str, Any]]) -> None:
    status = running_status(pods.get(name), conditions=conditions)
    cluster.kubectl(
        "patch", "pod", name, "-n", pods.namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(status),
    )  # fmt: skip


@pytest.mark.parametrize("reason", ["Infeasible", "Deferred"])
def test_kubelet_reports(
    reason: str,
    control_plane: Cluster,
    configure: Callable[..., None],
    make_node: Callable[..., str],
    pods: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    configure(dryRun=False)
    node = make_node()
    pods.create(
        pod(
            "p",
            namespace=pods.namespace,
            node=node,
            containers=[container(cpu="1")],
            custom_status=True,
        )
    )
    _report(control_plane, pods, "p", [])
    reconciler = start_reconciler()
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
    pods.create(
        pod(
            "neighbour",
            namespace=pods.namespace,
            node=node,
            containers=[container(cpu="8")],
            labels={"kube-headroom.dev/mode": "unmanaged"},
        )
    )
    if reason == "Deferred":
        # Not backed off: the new target is applied; the report is not counted again.
        pods.wait_limit("p", "8")
    else:
        assert stays(lambda: pods.generation("p") == generation, seconds=6)
    assert reconciler.resizes(reason) == 1
