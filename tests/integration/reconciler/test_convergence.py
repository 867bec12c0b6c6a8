"""Targets on real nodes: caps, neighbours, the design's worked example, steady state."""

import json
import time

from tests.integration.conftest import eventually
from tests.integration.reconciler.conftest import Pods, Reconciler, Scene, stays
from tests.integration.reconciler.manifests import container, pod

# Three managed pods on one 16-core node: 8 cores booked, slack 8, factor 2.
WORKED_EXAMPLE = (("a", "500m"), ("b", "1500m"), ("c", "6"))


def _worked_example(scene: Scene) -> tuple[str, Reconciler]:
    """The design's worked example, enforced, with the reconciler started after it."""
    node = scene.enforcing_node()
    for name, cpu in WORKED_EXAMPLE:
        scene.pods.add(name, node=node, cpu=cpu)
    return node, scene.start_reconciler()


def test_a_pod_alone_bursts_to_its_caps_and_neighbours_shrink_it(scene: Scene) -> None:
    pods = scene.pods
    small_node = scene.enforcing_node()
    large_node = scene.make_node()
    pods.add("small", node=small_node, cpu="500m")
    pods.add("large", node=large_node, cpu="2")
    scene.start_reconciler()
    # 500m alone on 16 cores: the 10x multiplier caps it. 2 cores alone: allocatable does.
    pods.wait_limit("small", "5")
    pods.wait_limit("large", "16")

    started = time.monotonic()
    pods.add("neighbour", node=large_node, cpu="6")
    # Slack 8 over 8 managed cores: factor 2.
    pods.wait_limit("large", "4", timeout=15)
    pods.wait_limit("neighbour", "12", timeout=15)
    # Debounce is 2s ±50%; the rest is the watch and the write.
    assert time.monotonic() - started < 3 + 5


def test_the_worked_example_converges_to_its_targets(scene: Scene) -> None:
    pods = scene.pods
    node, reconciler = _worked_example(scene)
    for name, limit in (("a", "1500m"), ("b", "3"), ("c", "12")):
        pods.wait_limit(name, limit)
    # The explanations follow the limits once the node has settled.
    annotation = eventually(lambda: pods.status_annotation("a"), what="a's annotation")
    assert {k: v for k, v in annotation.items() if k != "computedAt"} == {
        "factor": "2.00",
        "slack": "8000m",
        "managedRequests": "8000m",
        "nodePods": 3,
        "targetLimit": "1500m",
        "policy": "proportional-v1",
    }
    [event] = eventually(
        lambda: pods.events("b", reason="CPULimitAdjusted"), what="b's CPULimitAdjusted event"
    )
    assert event["message"] == "unset -> 3000m (node factor 2.00, slack 8/16 cores)"
    assert reconciler.sample("headroom_node_factor", node=node) == 2.0
    assert reconciler.sample("headroom_pod_limit_cores", namespace=pods.namespace, pod="c") == 12.0


def test_steady_state_writes_nothing(scene: Scene) -> None:
    pods = scene.pods
    _, reconciler = _worked_example(scene)
    pods.wait_limit("c", "12")
    eventually(lambda: pods.status_annotation("c") is not None, what="annotations")

    def versions() -> dict[str, str]:
        listed = json.loads(
            scene.cluster.kubectl("get", "pods", "-n", pods.namespace, "-o", "json")
        )
        return {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in listed["items"]}

    # Let the simulated kubelet finish reporting the resizes, then watch a quiet window.
    eventually(lambda: _settled(pods), what="the kubelet to report the resizes")
    time.sleep(2)
    before, counts = versions(), reconciler.resizes("ok")
    time.sleep(30)
    assert versions() == before
    assert reconciler.resizes("ok") == counts


def _settled(pods: Pods) -> bool:
    return all(
        pods.get(name)["status"].get("observedGeneration") == pods.generation(name)
        for name, _ in WORKED_EXAMPLE
    )


def test_limit_range_and_max_cpu_cap_and_restart_policy_is_respected(scene: Scene) -> None:
    pods = scene.pods
    scene.configure(dryRun=False)
    ns = pods.namespace
    scene.cluster.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "cpu", "namespace": ns},
                "spec": {
                    "limits": [{"type": "Container", "max": {"cpu": "3"}, "default": {"cpu": "2"}}]
                },
            }
        ),
    )
    node = scene.make_node()
    pods.add("ranged", node=node)
    capped = {"kube-headroom.dev/max-cpu": "2500m"}
    limited = container(cpu="1", cpu_limit="1")
    pods.create(pod("annotated", namespace=ns, node=node, containers=[limited], annotations=capped))
    pods.create(
        pod(
            "restarts",
            namespace=ns,
            node=node,
            containers=[container(cpu="1", cpu_limit="1", cpu_resize_policy="RestartContainer")],
        )
    )
    scene.start_reconciler()
    pods.wait_limit("ranged", "3")
    pods.wait_limit("annotated", "2500m")
    assert stays(lambda: pods.generation("restarts") == 1, seconds=3)
    assert pods.cpu_limit("restarts") == "1"
    assert pods.status_annotation("restarts") is None


def test_a_pod_that_would_turn_guaranteed_is_never_resized(scene: Scene) -> None:
    pods = scene.pods
    node = scene.enforcing_node(cpu="2")
    full = container(cpu="2", memory="64Mi", memory_limit="64Mi")
    pods.create(pod("full", namespace=pods.namespace, node=node, containers=[full]))
    reconciler = scene.start_reconciler()
    eventually(lambda: reconciler.sample("headroom_pods_managed") == 1, what="the pod managed")
    assert stays(lambda: pods.generation("full") == 1, seconds=3)
    assert pods.cpu_limit("full") is None
    assert reconciler.resizes("error") == 0
    # Nothing can be set, so nothing is claimed: no annotation with a made-up ceiling.
    assert pods.status_annotation("full") is None


def test_sidecars_are_resized_under_init_containers(scene: Scene) -> None:
    pods = scene.pods
    proxy = container("proxy", cpu="1", sidecar=True)
    pods.add("with-sidecar", node=scene.enforcing_node(), sidecars=[proxy])
    scene.start_reconciler()
    eventually(
        lambda: pods.cpu_limits("with-sidecar") == ["8", "8"], what="both containers at 8 cores"
    )
