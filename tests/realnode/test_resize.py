"""After every resize Headroom makes, the limit it wrote, the limit the kubelet reports in
``status.containerStatuses[].resources`` (and ``status.resources`` for the pod), the
container's ``cpu.max`` and the pod's ``cpu.max`` in the guest all agree: a raise, a
lower, a first limit, a sidecar's, and a pod-level one; and a Go program in the pod
sees its limit move.

All on the 3-CPU workload node, which each test finds empty: a managed pod alone there
climbs to the node's allocatable CPU (3 cores), and a neighbour's request pulls it down.
"""

from __future__ import annotations

from app.core.apipaths import NODES
from devcluster.realnodes import WORKLOAD
from reconciler.outcomes import Result
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Reconciler
from tests.integration.webhook.conftest import MODE_LABEL
from tests.realnode import builders
from tests.realnode.conftest import Scene, wait_agreed
from tests.realnode.kubelets import Limits

NODE = WORKLOAD.name


def headroom_limit(reconciler: Reconciler, namespace: str, pod: str) -> int:
    cores = reconciler.sample("headroom_pod_limit_cores", namespace=namespace, pod=pod)
    assert cores is not None, f"no headroom_pod_limit_cores for {namespace}/{pod}"
    return round(cores * 1000)


def gomaxprocs(cluster: Cluster, namespace: str, pod: str) -> list[int]:
    """Every GOMAXPROCS the probe printed (through the API server and the kubelet)."""
    lines = cluster.kubectl("logs", "-n", namespace, pod).split("\n")
    return [int(line.split()[1]) for line in lines if line.startswith("gomaxprocs ")]


def test_a_neighbour_lowers_the_limit_its_deletion_raises_it_and_go_follows(
    scene: Scene, managed_namespace: str, namespace: str
) -> None:
    """The managed container runs a Go program (built with this machine's Go, 1.25 or
    later) that prints GOMAXPROCS whenever it changes: Go sizes it from the container's
    CPU limit (rounded up, at least 2) and re-reads the cgroup about once a second, so it
    follows every resize."""
    cluster = scene.cluster
    reconciler = scene.start_reconciler()
    go = builders.container(cpu="1", args=["gomaxprocs", "100"])
    scene.place("go", go, namespace=managed_namespace, node=NODE)
    # Born with the webhook's limit (request x 2).
    born = scene.kubelets.pod(managed_namespace, "go")["spec"]["containers"][0]["resources"]
    assert born["limits"]["cpu"] in ("2", "2000m")

    def settles(limit_m: int, procs: int) -> None:
        seen = scene.settled(managed_namespace, "go", limit_m)
        assert seen.pod.cgroup == limit_m
        assert headroom_limit(reconciler, managed_namespace, "go") == limit_m
        # The outcome table's ok row: the annotation and a CPULimitAdjusted event record it.
        eventually(
            lambda: Pods(cluster, managed_namespace).explained("go"),
            what=f"the annotation and CPULimitAdjusted event for {limit_m}m",
        )
        eventually(
            lambda: gomaxprocs(cluster, managed_namespace, "go")[-1:] == [procs],
            timeout=45,
            what=f"GOMAXPROCS {procs} under a {limit_m}m limit",
        )

    # Alone on the 3-CPU node: raised to its allocatable, 3 cores.
    settles(3000, 3)
    scene.neighbour(namespace, node=NODE, cpu="1")
    # Slack 1 core over a managed request of 1 core: factor 2, a 2-core limit.
    settles(2000, 2)
    scene.delete(namespace, "neighbour")
    settles(3000, 3)
    assert gomaxprocs(cluster, managed_namespace, "go")[-3:] == [3, 2, 3]
    assert reconciler.resizes(Result.OK) >= 3


def test_first_limit_on_a_running_pod(scene: Scene, namespace: str) -> None:
    """A pod that ran without a CPU limit gets its first one when its namespace is
    enrolled: the kubelet turns ``cpu.max`` from ``max`` to a quota."""
    reconciler = scene.start_reconciler()
    scene.place("batch", namespace=namespace, node=NODE)
    unlimited = wait_agreed(scene.kubelets, namespace, "batch")
    assert unlimited.containers["app"] == Limits(spec=None, status=None, cgroup=None)
    assert unlimited.pod.cgroup is None
    scene.cluster.kubectl("label", "namespace", namespace, f"{MODE_LABEL}=managed")
    limited = scene.settled(namespace, "batch", 3000)
    assert limited.pod.cgroup == 3000
    assert headroom_limit(reconciler, namespace, "batch") == 3000


def test_a_sidecars_limit_and_the_pods_quota(scene: Scene, managed_namespace: str) -> None:
    """A restartable init container is resized like the others; the pod's quota is the
    sum of its containers' limits."""
    scene.start_reconciler()
    app = builders.container("app", cpu="400m")
    proxy = builders.container("proxy", cpu="200m", sidecar=True)
    scene.place("meshed", app, namespace=managed_namespace, node=NODE, sidecars=[proxy])
    # Slack 2400m shared by request (factor 5), each capped at the node's 3 cores.
    seen = wait_agreed(
        scene.kubelets,
        managed_namespace,
        "meshed",
        until=lambda seen: (
            seen.containers["app"].spec == 2000 and seen.containers["proxy"].spec == 1000
        ),
    )
    assert seen.pod.cgroup == 3000


def test_a_pod_level_limit(scene: Scene, managed_namespace: str) -> None:
    """Pod-level resources: Headroom sets the pod's own limit, which the kubelet writes
    into the pod's cgroup and into those of its containers that have none of their own."""
    reconciler = scene.start_reconciler()
    scene.place(
        "whole",
        builders.bare_container("app"),
        builders.bare_container("helper"),
        namespace=managed_namespace,
        node=NODE,
        resources={"requests": {"cpu": "500m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    )
    node = scene.real.api.get(NODES.path(name=NODE))
    assert node is not None
    if "InPlacePodLevelResourcesVerticalScaling" not in node["status"].get("declaredFeatures", []):
        # A kubelet without pod-level resize (1.35): Headroom leaves the pod alone.
        seen = wait_agreed(scene.kubelets, managed_namespace, "whole")
        assert reconciler.resizes(Result.OK) == 0
        assert seen.pod.spec is None
        return
    seen = wait_agreed(
        scene.kubelets, managed_namespace, "whole", until=lambda seen: seen.pod.spec == 3000
    )
    assert seen.containers["app"].cgroup == seen.containers["helper"].cgroup == 3000
    assert headroom_limit(reconciler, managed_namespace, "whole") == 3000
