"""After every resize Headroom makes, the limit it wrote, the limit the kubelet reports in
``status.containerStatuses[].resources`` (and ``status.resources`` for the pod), the
container's ``cpu.max`` and the pod's ``cpu.max`` in the guest all agree: a raise, a
lower, a first limit, a sidecar's, and a pod-level one; and a Go program in the pod
sees its limit move.

All on the 3-CPU workload node, which each test finds empty: a managed pod alone there
climbs to the node's allocatable CPU (3 cores), and a neighbour's request pulls it down.
"""

from __future__ import annotations

from collections.abc import Callable

from app.core.apipaths import NODES
from devcluster.realnodes import WORKLOAD, RealCluster
from reconciler.outcomes import Result
from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Reconciler
from tests.integration.webhook.conftest import MODE_LABEL
from tests.realnode import builders
from tests.realnode.conftest import wait_agreed
from tests.realnode.kubelets import Kubelets, Limits, Observation

NODE = WORKLOAD.name


def limit_is(container: str, millis: int) -> Callable[[Observation], bool]:
    return lambda seen: seen.containers[container].spec == millis


def headroom_limit(reconciler: Reconciler, namespace: str, pod: str) -> int:
    cores = reconciler.sample("headroom_pod_limit_cores", namespace=namespace, pod=pod)
    assert cores is not None, f"no headroom_pod_limit_cores for {namespace}/{pod}"
    return round(cores * 1000)


def gomaxprocs(cluster: Cluster, namespace: str, pod: str) -> list[int]:
    """Every GOMAXPROCS the probe printed (through the API server and the kubelet)."""
    lines = cluster.kubectl("logs", "-n", namespace, pod).split("\n")
    return [int(line.split()[1]) for line in lines if line.startswith("gomaxprocs ")]


def test_a_neighbour_lowers_the_limit_its_deletion_raises_it_and_go_follows(
    control_plane: Cluster,
    enforcing: Callable[..., None],
    managed_namespace: str,
    namespace: str,
    start_reconciler: Callable[..., Reconciler],
    kubelets: Kubelets,
) -> None:
    """The managed container runs a Go program (built with this machine's Go, 1.25 or
    later) that prints GOMAXPROCS whenever it changes: Go sizes it from the container's
    CPU limit (rounded up, at least 2) and re-reads the cgroup about once a second, so it
    follows every resize."""
    reconciler = start_reconciler()
    control_plane.apply(
        builders.pod(
            "go",
            namespace=managed_namespace,
            node=NODE,
            containers=[builders.container(cpu="1", args=["gomaxprocs", "100"])],
        )
    )
    # Born with the webhook's limit (request x 2).
    born = kubelets.pod(managed_namespace, "go")["spec"]["containers"][0]["resources"]
    assert born["limits"]["cpu"] in ("2", "2000m")

    def settles(limit_m: int, procs: int) -> None:
        seen = wait_agreed(kubelets, managed_namespace, "go", until=limit_is("app", limit_m))
        assert seen.pod.cgroup == limit_m
        assert headroom_limit(reconciler, managed_namespace, "go") == limit_m
        # The outcome table's ok row: the annotation and a CPULimitAdjusted event record it.
        eventually(
            lambda: Pods(control_plane, managed_namespace).explained("go"),
            what=f"the annotation and CPULimitAdjusted event for {limit_m}m",
        )
        eventually(
            lambda: gomaxprocs(control_plane, managed_namespace, "go")[-1:] == [procs],
            timeout=45,
            what=f"GOMAXPROCS {procs} under a {limit_m}m limit",
        )

    # Alone on the 3-CPU node: raised to its allocatable, 3 cores.
    settles(3000, 3)
    control_plane.apply(
        builders.pod(
            "neighbour",
            namespace=namespace,
            node=NODE,
            containers=[builders.container("neighbour", cpu="1")],
        )
    )
    # Slack 1 core over a managed request of 1 core: factor 2, a 2-core limit.
    settles(2000, 2)
    control_plane.kubectl("delete", "pod", "neighbour", "-n", namespace, "--wait=false")
    settles(3000, 3)
    assert gomaxprocs(control_plane, managed_namespace, "go")[-3:] == [3, 2, 3]
    assert reconciler.resizes(Result.OK) >= 3


def test_first_limit_on_a_running_pod(
    control_plane: Cluster,
    enforcing: Callable[..., None],
    namespace: str,
    start_reconciler: Callable[..., Reconciler],
    kubelets: Kubelets,
) -> None:
    """A pod that ran without a CPU limit gets its first one when its namespace is
    enrolled: the kubelet turns ``cpu.max`` from ``max`` to a quota."""
    reconciler = start_reconciler()
    control_plane.apply(builders.pod("batch", namespace=namespace, node=NODE))
    unlimited = wait_agreed(kubelets, namespace, "batch")
    assert unlimited.containers["app"] == Limits(spec=None, status=None, cgroup=None)
    assert unlimited.pod.cgroup is None
    control_plane.kubectl("label", "namespace", namespace, f"{MODE_LABEL}=managed")
    limited = wait_agreed(kubelets, namespace, "batch", until=limit_is("app", 3000))
    assert limited.pod.cgroup == 3000
    assert headroom_limit(reconciler, namespace, "batch") == 3000


def test_a_sidecars_limit_and_the_pods_quota(
    control_plane: Cluster,
    enforcing: Callable[..., None],
    managed_namespace: str,
    start_reconciler: Callable[..., Reconciler],
    kubelets: Kubelets,
) -> None:
    """A restartable init container is resized like the others; the pod's quota is the
    sum of its containers' limits."""
    start_reconciler()
    control_plane.apply(
        builders.pod(
            "meshed",
            namespace=managed_namespace,
            node=NODE,
            containers=[builders.container("app", cpu="400m")],
            sidecars=[builders.container("proxy", cpu="200m", sidecar=True)],
        )
    )
    # Slack 2400m shared by request (factor 5), each capped at the node's 3 cores.
    seen = wait_agreed(
        kubelets,
        managed_namespace,
        "meshed",
        until=lambda seen: (
            seen.containers["app"].spec == 2000 and seen.containers["proxy"].spec == 1000
        ),
    )
    assert seen.pod.cgroup == 3000


def test_a_pod_level_limit(
    control_plane: Cluster,
    real_cluster: RealCluster,
    enforcing: Callable[..., None],
    managed_namespace: str,
    start_reconciler: Callable[..., Reconciler],
    kubelets: Kubelets,
) -> None:
    """Pod-level resources: Headroom sets the pod's own limit, which the kubelet writes
    into the pod's cgroup and into those of its containers that have none of their own."""
    reconciler = start_reconciler()
    control_plane.apply(
        builders.pod(
            "whole",
            namespace=managed_namespace,
            node=NODE,
            containers=[builders.bare_container("app"), builders.bare_container("helper")],
            resources={
                "requests": {"cpu": "500m", "memory": "64Mi"},
                "limits": {"memory": "128Mi"},
            },
        )
    )
    node = real_cluster.api.get(NODES.path(name=NODE))
    assert node is not None
    if "InPlacePodLevelResourcesVerticalScaling" not in node["status"].get("declaredFeatures", []):
        # A kubelet without pod-level resize (1.35): Headroom leaves the pod alone.
        seen = wait_agreed(kubelets, managed_namespace, "whole")
        assert reconciler.resizes(Result.OK) == 0
        assert seen.pod.spec is None
        return
    seen = wait_agreed(
        kubelets, managed_namespace, "whole", until=lambda seen: seen.pod.spec == 3000
    )
    assert seen.containers["app"].cgroup == seen.containers["helper"].cgroup == 3000
    assert headroom_limit(reconciler, managed_namespace, "whole") == 3000
