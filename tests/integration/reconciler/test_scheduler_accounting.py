"""Headroom books a node's CPU as kube-scheduler does: a pod's init containers (with the
sidecars started before them), its pod-level request and its RuntimeClass overhead count
for as long as it is bound. Checked pod by pod and node by node against the real
scheduler's own account (``/metrics/resources``) and ``kubectl describe node``, through
the reconciler's slack and per-pod bookings, ``kubectl headroom simulate`` and
``explain``."""

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.core.quantity import parse_quantity
from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.plugin import kubectl_headroom_json
from tests.integration.reconciler.conftest import Pods, Scene
from tests.integration.reconciler.manifests import UNMANAGED, bare_container, container, pod

NODE_CPU_M = 16_000


@pytest.fixture
def runtime_class(control_plane: Cluster) -> Iterator[str]:
    """A RuntimeClass with a fixed overhead, as sandboxed runtimes declare one."""
    name = f"sandboxed-{uuid.uuid4().hex[:6]}"
    control_plane.apply(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": name},
            "handler": "sandboxed",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
        }
    )
    yield name
    control_plane.kubectl("delete", "runtimeclass", name, "--ignore-not-found")


def _mix(pods: Pods, node: str, runtime_class: str) -> dict[str, int]:
    """Pods the scheduler places on ``node``, each with what the scheduler books for it."""
    init = container("migrate", cpu="2")
    cases: list[tuple[dict[str, Any], int]] = [
        # The init container's 2 CPUs outweigh the 250m app; the overhead adds to both.
        (
            pod("init-and-overhead", namespace=pods.namespace, node=node,
                containers=[container(cpu="250m")], sidecars=[init]),
            2250,
        ),
        # An init container runs beside the sidecars started before it ...
        (
            pod("sidecar-then-init", namespace=pods.namespace, node=node,
                containers=[container(cpu="300m")],
                sidecars=[container("proxy", cpu="100m", sidecar=True),
                          container("warm", cpu="550m")]),
            650,
        ),
        # ... and not beside those started after it.
        (
            pod("init-then-sidecar", namespace=pods.namespace, node=node,
                containers=[container(cpu="300m")],
                sidecars=[container("warm", cpu="550m"),
                          container("proxy", cpu="100m", sidecar=True)]),
            550,
        ),
        (
            pod("pod-level", namespace=pods.namespace, node=node,
                containers=[bare_container()], sidecars=[container("copy", cpu="300m")],
                resources={"requests": {"cpu": "700m", "memory": "256Mi"}}),
            700,
        ),
        (
            pod("neighbour", namespace=pods.namespace, node=node, labels=UNMANAGED,
                containers=[container(cpu="1")], sidecars=[container("fetch", cpu="1500m")]),
            1500,
        ),
    ]  # fmt: skip
    booked = {}
    for manifest, booked_m in cases:
        spec = manifest["spec"]
        # The scheduler places them, rather than the test binding them.
        del spec["nodeName"]
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        name = manifest["metadata"]["name"]
        if name == "init-and-overhead":
            spec["runtimeClassName"] = runtime_class
        pods.create(manifest)
        booked[name] = booked_m
    for name in booked:
        pods.wait_running(name)
    return booked


def _scheduler_bookings(cluster: Cluster, namespace: str) -> dict[str, int]:
    """What kube-scheduler books for each pod of ``namespace``, in millicores."""
    text = cluster.plane.scheduler_resource_metrics()
    return {
        sample.labels["pod"]: round(sample.value * 1000)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kube_pod_resource_request"
        and sample.labels["resource"] == "cpu"
        and sample.labels["namespace"] == namespace
    }


def _described_requests_m(cluster: Cluster, node: str) -> int:
    """The CPU requests ``kubectl describe node`` allocates on ``node``."""
    text = cluster.kubectl("describe", "node", node)
    allocated = text.split("Allocated resources:", 1)[1]
    match = re.search(r"^\s+cpu\s+(\S+)\s", allocated, flags=re.MULTILINE)
    assert match, allocated
    return round(parse_quantity(match.group(1)) * 1000)


def test_headroom_books_each_node_as_the_scheduler_does(scene: Scene, runtime_class: str) -> None:
    control_plane, pods = scene.cluster, scene.pods
    node = scene.enforcing_node(cpu="16")
    expected = _mix(pods, node, runtime_class)
    booked_m = sum(expected.values())

    # The real scheduler and kubectl agree with the cases' arithmetic ...
    assert _scheduler_bookings(control_plane, pods.namespace) == expected
    assert _described_requests_m(control_plane, node) == booked_m

    # ... and so do the reconciler, simulate and explain.
    reconciler = scene.start_reconciler()
    eventually(
        lambda: (
            reconciler.sample("headroom_node_slack_cores", node=node)
            == (NODE_CPU_M - booked_m) / 1000
        ),
        what=f"the reconciler's slack on {node}",
    )
    # Its per-pod series (the dashboard's "Booked by pod") are the scheduler's figures.
    metrics = reconciler.metrics()
    assert {
        dict(labels)["pod"]: round(value * 1000)
        for (name, labels), value in metrics.items()
        if name == "headroom_pod_booked_cores"
        and dict(labels)["node"] == node
        and dict(labels)["namespace"] == pods.namespace
    } == expected
    assert metrics[("headroom_node_allocatable_cores", (("node", node),))] == NODE_CPU_M / 1000
    simulated = kubectl_headroom_json(control_plane, "simulate")
    (row,) = [n for n in simulated["nodes"] if n["node"] == node]
    assert (row["booked"], row["slack"]) == (f"{booked_m}m", f"{NODE_CPU_M - booked_m}m")
    explained = kubectl_headroom_json(
        control_plane, "explain", "init-and-overhead", "-n", pods.namespace
    )
    assert {b["pod"]: b["booked"] for b in explained["bookings"]} == {
        f"{pods.namespace}/{name}": f"{m}m" for name, m in expected.items()
    }
    # The managed pods' ceilings share that slack; the neighbour's init container is not
    # slack, as it would be if only running containers counted.
    assert explained["slack"] == f"{NODE_CPU_M - booked_m}m"
