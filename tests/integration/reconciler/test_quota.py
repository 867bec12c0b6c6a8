"""A `limits.cpu` ResourceQuota refuses the raise: counted, announced, backed off."""

import json
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Scene, stays
from tests.integration.reconciler.manifests import container, pod


@pytest.fixture
def other_pods(control_plane: Cluster, namespace: str) -> Iterator[Pods]:
    """A second managed namespace, without a quota."""
    name = f"{namespace}-free"
    control_plane.kubectl("create", "namespace", name)
    control_plane.kubectl("label", "namespace", name, "kube-headroom.dev/mode=managed")
    yield Pods(control_plane, name)
    control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


def test_quota_denied_backs_off_and_the_node_keeps_converging(
    scene: Scene, other_pods: Pods
) -> None:
    control_plane, pods = scene.cluster, scene.pods
    ns = pods.namespace
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": ns},
        "spec": {"hard": {"limits.cpu": "4", "requests.cpu": "10"}},
    }
    control_plane.kubectl("create", "-f", "-", input=json.dumps(quota))
    # The quota controller must have filled the status before admission can charge it.
    control_plane.kubectl(
        "wait", "resourcequota/compute", "-n", ns,
        "--for=jsonpath={.status.hard.limits\\.cpu}=4", "--timeout=60s",
    )  # fmt: skip
    node = scene.enforcing_node()
    pods.create(
        pod("capped", namespace=ns, node=node, containers=[container(cpu="1", cpu_limit="1")])
    )
    other_pods.add("free", node=node)
    reconciler = scene.start_reconciler()

    eventually(lambda: reconciler.resizes("quota-denied") == 1, what="quota-denied")
    [event] = pods.events("capped", reason="ResizeForbidden")
    assert event["type"] == "Warning"
    assert "exceeded quota" in event["message"]
    # Slack 14 cores over 2 managed pods: the pod without a quota still gets its share.
    other_pods.wait_limit("free", "8")
    assert stays(lambda: reconciler.resizes("quota-denied") == 1, seconds=6)
    assert pods.cpu_limit("capped") == "1"
