"""Reconciling nodes in node pools, and pods that declare pod-level resources."""

from typing import Any

from app.core.nodefeatures import POD_LEVEL_RESIZE
from tests.unit.app import builders
from tests.unit.app.builders import bare_container, container, pod_resources
from tests.unit.reconciler.test_reconcile import World

WEB_POOL = {"name": "web", "nodeSelector": {"matchLabels": {"pool": "web"}}, "maxMultiplier": "3"}


def in_pool(world: World, **node: Any) -> None:
    labels = {"kubernetes.io/os": "linux", "pool": "web"}
    world.cache.apply_node("node-1", builders.node("node-1", labels=labels, **node))


def test_a_node_in_a_pool_gets_the_pools_settings_and_names_it() -> None:
    world = World(spec={"dryRun": False, "nodePools": [WEB_POOL]})
    in_pool(world)
    world.add("a", containers=[container(cpu_request="1")])
    world.reconcile()
    assert world.resizes() == {"a": "3"}
    assert world.annotations()["a"]["pool"] == "web"
    assert world.events() == [
        ("a", "CPULimitAdjusted", "unset -> 3000m (node factor 16.00, slack 15/16 cores, pool web)")
    ]
    assert world.gauge("headroom_pool_pods_managed", {"pool": "web"}) == 1


def test_a_node_in_no_pool_keeps_the_top_level_settings() -> None:
    world = World(spec={"dryRun": False, "nodePools": [WEB_POOL]})
    world.add("a", containers=[container(cpu_request="1")])
    world.reconcile()
    assert world.resizes() == {"a": "10"}
    assert "pool" not in world.annotations()["a"]
    assert world.gauge("headroom_pool_pods_managed", {"pool": "web"}) is None


def test_a_pools_dry_run_stops_its_resizes_while_the_cluster_enforces() -> None:
    stopped = {**WEB_POOL, "dryRun": True}
    world = World(spec={"dryRun": False, "nodePools": [stopped]})
    in_pool(world)
    world.add("a", containers=[container(cpu_request="1")])
    world.reconcile()
    assert world.resizes() == {}
    assert world.count("dry-run") == 1
    assert world.annotations()["a"]["dryRun"] is True


def test_the_pool_gauge_follows_the_node_out_of_the_pool() -> None:
    world = World(spec={"dryRun": False, "nodePools": [WEB_POOL]})
    in_pool(world)
    world.add("a", containers=[container(cpu_request="1")])
    world.reconcile()
    world.cache.apply_node("node-1", builders.node("node-1"))
    world.reconcile()
    assert world.gauge("headroom_pool_pods_managed", {"pool": "web"}) is None
    assert world.gauge("headroom_pods_managed") == 1


def pod_level(world: World, name: str, *, cpu_request: str, cpu_limit: str) -> None:
    world.add(
        name,
        resources=pod_resources(cpu_request=cpu_request, cpu_limit=cpu_limit),
        containers=[bare_container(), container("side", cpu_request="100m", cpu_limit="200m")],
    )


def test_a_pod_level_pod_gets_a_pod_level_limit_and_its_containers_are_not_named() -> None:
    world = World()
    in_pool(world, declared_features=[POD_LEVEL_RESIZE])
    world.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    pod_level(world, "p", cpu_request="1", cpu_limit="2")
    world.reconcile()
    (resize,) = world.api.writes(kind="resize")
    assert resize.body == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"resources": {"limits": {"cpu": "10"}}},
    }
    assert world.annotations()["p"]["targetLimit"] == "10000m"
    assert world.events() == [
        ("p", "CPULimitAdjusted", "2000m -> 10000m (node factor 16.00, slack 15/16 cores)")
    ]


def test_a_pod_level_pod_is_left_alone_where_its_node_cannot_resize_it() -> None:
    world = World()
    pod_level(world, "p", cpu_request="1", cpu_limit="2")
    world.add("q", containers=[container(cpu_request="1")])
    world.reconcile()
    assert [r.path.split("/")[-2] for r in world.api.writes(kind="resize")] == ["q"]
    assert "p" not in world.annotations()
    assert world.gauge("headroom_pods_managed") == 1
    # It still books its request: q shares 14 cores of slack, not 15.
    assert world.annotations()["q"]["slack"] == "14000m"
