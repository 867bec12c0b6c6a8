"""Node pools on the real control plane: a pool's own multiplier, its name on every
explanation, and its dry-run as a stop button for its nodes only."""

import uuid

from tests.integration.conftest import eventually
from tests.integration.reconciler.conftest import Reconciler, Scene, stays


def _pool_and_plain(scene: Scene) -> tuple[str, str, Reconciler]:
    """A node of the "batch" pool (multiplier 3) and a plain one, each with a 1-core pod
    at its cap: "in-pool" at 3 cores, "outside" at 10."""
    label = uuid.uuid4().hex[:8]
    pool_node = scene.make_node(labels={"pool": label})
    plain_node = scene.make_node()
    pool = {"name": "batch", "nodeSelector": {"matchLabels": {"pool": label}}, "maxMultiplier": "3"}
    scene.configure(dryRun=False, nodePools=[pool])
    reconciler = scene.start_reconciler()
    scene.pods.add("in-pool", node=pool_node)
    scene.pods.add("outside", node=plain_node)
    scene.pods.wait_limit("in-pool", "3")
    scene.pods.wait_limit("outside", "10")
    return pool_node, plain_node, reconciler


def test_a_pool_node_runs_on_its_own_multiplier_and_says_so(scene: Scene) -> None:
    pods = scene.pods
    _, _, reconciler = _pool_and_plain(scene)
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


def test_a_pools_dry_run_stops_its_resizes_at_once(scene: Scene) -> None:
    pods = scene.pods
    pool_node, plain_node, _ = _pool_and_plain(scene)
    frozen = pods.generation("in-pool")
    # The runbook's per-pool stop button, verbatim.
    scene.cluster.kubectl(
        "patch", "hcfg", "cluster", "--type", "json",
        "-p", '[{"op":"add","path":"/spec/nodePools/0/dryRun","value":true}]',
    )  # fmt: skip
    # Both nodes fill up: 14 unmanaged cores next to each managed pod.
    for node, name in ((pool_node, "big-in-pool"), (plain_node, "big-outside")):
        pods.neighbour(name, node=node, cpu="14")
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
