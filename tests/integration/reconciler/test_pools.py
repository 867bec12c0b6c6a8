"""Node pools on the real control plane: a pool's own multiplier, its name on every
explanation, and its dry-run as a stop button for its nodes only."""

import uuid
from collections.abc import Callable
from typing import Any

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.conftest import Pods, Reconciler, stays
from tests.integration.reconciler.manifests import container, pod

UNMANAGED = {"kube-headroom.dev/mode": "unmanaged"}


def _pool(label: str, **overrides: Any) -> dict[str, Any]:
    return {"name": "batch", "nodeSelector": {"matchLabels": {"pool": label}}, **overrides}


def _one_core_pod(pods: Pods, name: str, node: str) -> None:
    pods.create(pod(name, namespace=pods.namespace, node=node, containers=[container(cpu="1")]))


def test_a_pool_node_runs_on_its_own_multiplier_and_says_so(
    configure: Callable[..., None],
    make_node: Callable[..., str],
    pods: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    label = uuid.uuid4().hex[:8]
    pool_node = make_node(labels={"pool": label})
    plain_node = make_node()
    configure(dryRun=False, nodePools=[_pool(label, maxMultiplier="3")])
    reconciler = start_reconciler()
    _one_core_pod(pods, "in-pool", pool_node)
    _one_core_pod(pods, "outside", plain_node)
    pods.wait_limit("in-pool", "3")
    pods.wait_limit("outside", "10")
    assert pods.explanation("in-pool").get("pool") == "batch"
    assert "pool" not in pods.explanation("outside")
    [event] = eventually(
        lambda: pods.events("in-pool", reason="CPULimitAdjusted"), what="the pool's event"
    )
    assert event["message"] == "unset -> 3000m (node factor 16.00, slack 15/16 cores, pool batch)"
    eventually(
        lambda: reconciler.sample("headroom_pool_pods_managed", pool="batch") == 1,
        what="the pool gauge",
    )


def test_a_pools_dry_run_stops_its_resizes_at_once(
    control_plane: Cluster,
    configure: Callable[..., None],
    make_node: Callable[..., str],
    pods: Pods,
    start_reconciler: Callable[..., Reconciler],
) -> None:
    label = uuid.uuid4().hex[:8]
    pool_node = make_node(labels={"pool": label})
    plain_node = make_node()
    configure(dryRun=False, nodePools=[_pool(label, maxMultiplier="3")])
    start_reconciler()
    _one_core_pod(pods, "in-pool", pool_node)
    _one_core_pod(pods, "outside", plain_node)
    pods.wait_limit("in-pool", "3")
    pods.wait_limit("outside", "10")
    frozen = pods.generation("in-pool")
    # The runbook's per-pool stop button, verbatim.
    control_plane.kubectl(
        "patch", "hcfg", "cluster", "--type", "json",
        "-p", '[{"op":"add","path":"/spec/nodePools/0/dryRun","value":true}]',
    )  # fmt: skip
    # Both nodes fill up: 14 unmanaged cores next to each managed pod.
    for node, name in ((pool_node, "big-in-pool"), (plain_node, "big-outside")):
        pods.create(
            pod(
                name,
                namespace=pods.namespace,
                node=node,
                containers=[container(cpu="14")],
                labels=UNMANAGED,
            )
        )
    # Outside the pool the limit follows the node; inside it stays frozen, while its
    # annotation says what would be set.
    pods.wait_limit("outside", "2")
    eventually(
        lambda: (pods.status_annotation("in-pool") or {}).get("targetLimit") == "2000m",
        what="the pool's dry-run target",
    )
    assert (pods.status_annotation("in-pool") or {}).get("dryRun") is True
    assert stays(lambda: pods.cpu_limit("in-pool") == "3", seconds=3)
    assert pods.generation("in-pool") == frozen
