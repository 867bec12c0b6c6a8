"""A birth limit never outlives Headroom's reach (design §6, §9): the real webhook and the
real reconciler, the real scheduler placing each pod by ``nodeSelector`` or by required
node affinity onto 4-CPU simulated nodes, managed or not, with an unmanaged namespace as
the control (the same pods without Headroom); and a reconciler that crashes and returns.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Reconciler, stays
from tests.integration.reconciler.manifests import RESERVED_TAINT, container
from tests.integration.webhook.conftest import SCOPE_LABEL, Webhook, in_scope, kubectl_result

MODE_LABEL = "kube-headroom.dev/mode"
STATIC = {"cpu-manager-policy": "static"}
# Every kind of node Headroom leaves alone, as make_node creates it.
UNMANAGED_NODES: dict[str, dict[str, Any]] = {
    "excluded-by-selector": {"labels": STATIC},
    "kubelet-1.34": {"kubelet_version": "v1.34.2"},
    "windows": {"labels": {"kubernetes.io/os": "windows"}},
}
PLACEMENTS = ("node-selector", "node-affinity")
# A 250m pod on its 4-CPU node: born with 2 x 250m.
BIRTH_LIMIT = "500m"


def placed(name: str, *, node: str, how: str) -> dict[str, Any]:
    """A 250m pod with no CPU limit, which the scheduler places on ``node`` by ``how``."""
    spec: dict[str, Any] = {
        "containers": [container(cpu="250m")],
        "tolerations": [{"key": RESERVED_TAINT["key"], "operator": "Exists"}],
    }
    if how == "node-selector":
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    else:
        expression = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
        required = {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def admitted_cpu_limit(
    cluster: Cluster, namespace: str, obj: dict[str, Any], *, dry_run: bool = False
) -> str | None:
    """Create ``obj``; its CPU limit as admission left it."""
    args = ["create", "-n", namespace, "-o", "json", *(["--dry-run=server"] if dry_run else [])]
    result = eventually(
        lambda: (done := kubectl_result(cluster, *args, obj=obj)).returncode == 0 and done,
        what=f"{obj['metadata']['name']} to be created",
    )
    limits = json.loads(result.stdout)["spec"]["containers"][0]["resources"].get("limits", {})
    return limits.get("cpu")


@pytest.fixture
def control_namespace(control_plane: Cluster, namespace: str, webhook: Webhook) -> str:
    """The same pods without Headroom: in the webhook's scope, not enrolled."""
    return in_scope(control_plane, namespace, webhook)


@pytest.fixture
def managed(
    control_plane: Cluster, webhook: Webhook, configure: Callable[..., None]
) -> Iterator[Pods]:
    """An enrolled namespace in the webhook's scope, enforcing, with the static pool excluded."""
    name = f"t-managed-{webhook.scope}"
    control_plane.kubectl("create", "namespace", name)
    control_plane.kubectl(
        "label", "namespace", name, f"{SCOPE_LABEL}={webhook.scope}", f"{MODE_LABEL}=managed"
    )
    configure(dryRun=False, debouncePeriod="100ms", excludedNodeSelector={"matchLabels": STATIC})
    try:
        yield Pods(control_plane, name)
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


def seeding(cluster: Cluster, namespace: str, node: str) -> str | None:
    """The birth limit a pod headed for ``node`` would get now (server-side dry-run)."""
    probe = placed(f"probe-{time.monotonic_ns()}", node=node, how="node-selector")
    return admitted_cpu_limit(cluster, namespace, probe, dry_run=True)


def test_a_pod_is_born_with_a_limit_only_where_the_reconciler_will_manage_it(
    control_plane: Cluster,
    make_node: Callable[..., str],
    managed: Pods,
    control_namespace: str,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    ordinary = make_node(cpu="4")
    unmanaged = {
        kind: make_node(cpu="4", **node_args) for kind, node_args in UNMANAGED_NODES.items()
    }
    start_reconciler()
    eventually(
        lambda: seeding(control_plane, managed.namespace, ordinary) == BIRTH_LIMIT, what="seeding"
    )

    born: dict[tuple[str, str, str], str | None] = {}
    for namespace in (managed.namespace, control_namespace):
        for kind, node in {"ordinary": ordinary, **unmanaged}.items():
            for how in PLACEMENTS:
                name = f"{kind}-{how}"
                born[namespace, kind, how] = admitted_cpu_limit(
                    control_plane, namespace, placed(name, node=node, how=how)
                )
    expected = {
        key: BIRTH_LIMIT if key[:2] == (managed.namespace, "ordinary") else None for key in born
    }
    assert born == expected

    control = Pods(control_plane, control_namespace)
    for kind, node in {"ordinary": ordinary, **unmanaged}.items():
        for how in PLACEMENTS:
            for pods in (managed, control):
                pods.wait_running(f"{kind}-{how}")
                assert pods.get(f"{kind}-{how}")["spec"]["nodeName"] == node
    # Four 250m pods book the ordinary node: slack 3 CPUs shared by the two managed ones.
    for how in PLACEMENTS:
        managed.wait_limit(f"ordinary-{how}", "1750m")
        eventually(
            lambda how=how: (
                (managed.status_annotation(f"ordinary-{how}") or {}).get("targetLimit") == "1750m"
            ),
            what="its explanation",
        )
    untouched = [
        (pods, f"{kind}-{how}")
        for pods in (managed, control)
        for kind in UNMANAGED_NODES
        for how in PLACEMENTS
    ] + [(control, f"ordinary-{how}") for how in PLACEMENTS]
    assert stays(lambda: all(pods.cpu_limit(name) is None for pods, name in untouched), seconds=3)
    for pods, name in untouched:
        assert pods.generation(name) == 1
        assert pods.status_annotation(name) is None


def test_a_pod_created_while_the_reconciler_is_down_is_born_as_its_owner_wrote_it(
    control_plane: Cluster,
    make_node: Callable[..., str],
    managed: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    node = make_node(cpu="4")
    short_lease = (
        "--leader-election-lease-duration=3s",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=500ms",
    )
    crashing = start_reconciler(*short_lease)
    eventually(
        lambda: seeding(control_plane, managed.namespace, node) == BIRTH_LIMIT, what="seeding"
    )

    crashing.terminate(signal.SIGKILL)
    crashed_at = time.monotonic()
    eventually(
        lambda: seeding(control_plane, managed.namespace, node) is None,
        timeout=15,
        what="seeding to stop",
    )
    stopped_after = time.monotonic() - crashed_at
    print(f"seeding stopped {stopped_after:.1f} s after the reconciler crashed (lease 3 s)")
    assert stopped_after <= 3 + 3

    assert (
        admitted_cpu_limit(
            control_plane, managed.namespace, placed("during", node=node, how="node-selector")
        )
        is None
    )
    managed.wait_running("during")
    assert stays(lambda: managed.cpu_limit("during") is None, seconds=2)

    returned_at = time.monotonic()
    start_reconciler()
    # Alone on its node, the pod climbs to its 10x cap like any managed pod.
    managed.wait_limit("during", "2500m")
    took = time.monotonic() - returned_at
    print(f"the pod created during the outage got its policy limit {took:.1f} s after the restart")
    # Its annotation and event follow the resize, once the node has settled.
    eventually(lambda: managed.explained("during"), what="its explanation")
    eventually(
        lambda: seeding(control_plane, managed.namespace, node) == BIRTH_LIMIT, what="seeding again"
    )
