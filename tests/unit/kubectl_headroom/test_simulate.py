from __future__ import annotations

from typing import Any

import pytest

from app.core.config import parse_config, parse_label_selector
from app.core.eligibility import Ineligible
from app.core.nodefeatures import POD_LEVEL_RESIZE
from kubectl_headroom.simulate import (
    Action,
    SortKey,
    WhatIf,
    select,
    simulate,
    sort_pods,
    totals,
)
from kubectl_headroom.simulate_output import document
from kubectl_headroom.snapshot import Snapshot
from tests.unit.app import builders as b
from tests.unit.kubectl_headroom.snapshots import cpu_pod, snapshot
from tests.unit.reconciler.world import World


def run(snap: Snapshot, *, enroll: tuple[str, ...] = (), unenroll: tuple[str, ...] = ()) -> Any:
    settings = parse_config(snap.config)
    return simulate(
        snap, settings, what_if=WhatIf(enroll=frozenset(enroll), unenroll=frozenset(unenroll))
    )


def targets(simulation: Any) -> dict[str, int]:
    return {p.pod.name: p.result.target_m for p in simulation.pods}


WORKED = [cpu_pod("a", "500m"), cpu_pod("b", "1500m"), cpu_pod("c", "6")]


def test_the_worked_example() -> None:
    simulation = run(snapshot(pods=WORKED))
    assert targets(simulation) == {"a": 1500, "b": 3000, "c": 12000}
    (node,) = simulation.nodes
    assert (node.name, node.pool, node.dry_run) == ("node-1", None, False)
    assert (node.result.slack_m, node.result.pod_count) == (8000, 3)
    assert {p.action for p in simulation.pods} == {Action.SET}


def test_a_snapshot_books_init_containers_and_overhead_as_the_scheduler_does() -> None:
    neighbour = b.init_heavy_pod("n", namespace="team-b")
    (node,) = run(snapshot(pods=[*WORKED, neighbour])).nodes
    assert (node.result.booked_m, node.result.slack_m) == (8000 + 2250, 16000 - 10250)


def test_it_predicts_what_the_reconciler_sends() -> None:
    pods = [
        *WORKED,
        cpu_pod("d", "250m", limit="2"),
        cpu_pod("e", "2", limit="4", max_cpu="3"),
        cpu_pod("f", "1", namespace="team-b"),
    ]
    world = World()
    try:
        for obj in pods:
            world.cache.apply_pod(
                f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", b.wire(obj)
            )
        world.reconcile()
        sent = world.resizes()
    finally:
        World.open_worlds.remove(world)
        world.close()
    simulation = run(snapshot(pods=pods))
    predicted = {
        p.pod.name: f"{p.result.target_m // 1000}"
        if p.result.target_m % 1000 == 0
        else f"{p.result.target_m}m"
        for p in simulation.pods
        if p.result.patch
    }
    assert predicted == sent


def test_enrolment_can_be_simulated_both_ways() -> None:
    pods = [cpu_pod("a", "1"), cpu_pod("b", "1", namespace="team-b")]
    assert set(targets(run(snapshot(pods=pods)))) == {"a"}
    enrolled = run(snapshot(pods=pods), enroll=("team-b",))
    assert set(targets(enrolled)) == {"a", "b"}
    assert enrolled.enrolled == ["team-a", "team-b"]
    released = run(snapshot(pods=pods), unenroll=("team-a",), enroll=("team-b",))
    assert set(targets(released)) == {"b"}
    # a still books its request on the node: b shares 14 cores of slack.
    (node,) = released.nodes
    assert node.result.slack_m == 14000
    assert select(released).not_managed == {Ineligible.NAMESPACE_NOT_ENROLLED: 1}


def test_enrolling_what_cannot_be_enrolled_says_so() -> None:
    namespaces = [b.namespace("team-a"), b.namespace("kube-system", labels={})]
    simulation = run(snapshot(namespaces=namespaces), enroll=("kube-system", "ghost"))
    assert simulation.enrolled == ["team-a"]
    assert simulation.notes == [
        "--enroll ghost: no such namespace",
        "--enroll kube-system: spec.excludedNamespaces lists it, so it stays unmanaged",
    ]


def test_a_custom_namespace_selector_is_honoured() -> None:
    namespaces = [b.namespace("team-a", labels={"tier": "gold"}), b.namespace("team-b", labels={})]
    spec = {"dryRun": False, "namespaceSelector": {"matchLabels": {"tier": "gold"}}}
    pods = [cpu_pod("a", "1"), cpu_pod("b", "1", namespace="team-b")]
    assert set(targets(run(snapshot(pods=pods, namespaces=namespaces, spec=spec)))) == {"a"}


def test_a_weight_rule_reads_the_namespaces_labels() -> None:
    gold = {"kube-headroom.dev/mode": "managed", "tier": "gold"}
    namespaces = [b.namespace("team-a", labels=gold), b.namespace("team-b")]
    weights = [{"namespaceSelector": {"matchLabels": {"tier": "gold"}}, "weight": 3}]
    spec = {"dryRun": False, "minBurstFloor": "0", "maxMultiplier": "0", "weights": weights}
    pods = [cpu_pod("a", "1"), cpu_pod("b", "1", namespace="team-b")]
    simulation = run(snapshot(pods=pods, namespaces=namespaces, spec=spec))
    # S = 14 cores, W = 3*1 + 1: 3/4 and 1/4 of it.
    assert targets(simulation) == {"a": 11500, "b": 4500}


POOLS = {
    "dryRun": False,
    "nodePools": [
        {"name": "web", "nodeSelector": {"matchLabels": {"pool": "web"}}, "maxMultiplier": "3"},
        {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "dryRun": True},
    ],
}


def test_every_node_runs_under_its_pools_settings() -> None:
    nodes = [
        b.node("web-1", labels={"pool": "web"}),
        b.node("batch-1", labels={"pool": "batch"}),
        b.node("other-1"),
    ]
    pods = [cpu_pod(f"p-{n}", "1", node=n) for n in ("web-1", "batch-1", "other-1")]
    simulation = run(snapshot(pods=pods, nodes=nodes, spec=POOLS))
    assert [(n.name, n.pool, n.dry_run) for n in simulation.nodes] == [
        ("web-1", "web", False),
        ("batch-1", "batch", True),
        ("other-1", None, False),
    ]
    assert targets(simulation) == {"p-web-1": 3000, "p-batch-1": 10000, "p-other-1": 10000}
    assert totals(simulation.pods).on_dry_run_nodes == 1


def pod_level(name: str, *, node: str = "node-1") -> dict[str, Any]:
    return b.pod(
        name,
        node=node,
        resources=b.pod_resources(cpu_request="1"),
        containers=[b.bare_container()],
    )


def test_pod_level_pods_are_managed_only_where_the_node_declares_pod_level_resize() -> None:
    nodes = [b.node("node-1", declared_features=[POD_LEVEL_RESIZE]), b.node("old-1")]
    pods = [pod_level("p"), pod_level("q", node="old-1")]
    simulation = run(snapshot(pods=pods, nodes=nodes))
    assert targets(simulation) == {"p": 10000}
    assert select(simulation).not_managed == {Ineligible.POD_LEVEL_RESIZE_UNSUPPORTED: 1}
    assert document(simulation, select(simulation))["pods"][0]["podLevel"] is True


CRONJOB = b.owner_ref("CronJob", "nightly", api_version="batch/v1")
JOB = b.owner_ref("Job", "nightly-29416740", api_version="batch/v1")


def test_vpas_reach_their_pods_up_the_chain_of_controllers() -> None:
    requests_only = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
    pods = [
        cpu_pod("web-5d8f7c9b4-a", "250m", owners=[b.owner_ref()]),
        cpu_pod("nightly-29416740-b", "250m", owners=[JOB]),
        # Books the node: the slack alone would hold web near its request.
        cpu_pod("hog", "15", owners=[]),
    ]
    snap = snapshot(
        pods=pods,
        vpas=[
            b.vpa(container_policies=requests_only, cpu_targets={"app": "1500m"}),
            b.vpa("nightly", target_kind="CronJob", target_name="nightly"),
        ],
        replica_sets=[b.controlled()],
        jobs=[b.controlled("nightly-29416740", owners=[CRONJOB])],
    )
    simulation = run(snap)
    (web,) = [p for p in simulation.pods if p.pod.name == "web-5d8f7c9b4-a"]
    assert (web.result.vpa_m, web.result.target_m) == (1500, 1500)
    assert select(simulation).not_managed == {Ineligible.VPA_CONTROLS_LIMITS: 1}


def test_a_pod_the_kubelet_reports_infeasible_is_backed_off() -> None:
    pods = [cpu_pod("a", "1", conditions=[b.condition("PodResizePending", reason="Infeasible")])]
    simulation = run(snapshot(pods=pods))
    assert simulation.pods == []
    assert select(simulation).not_managed == {Ineligible.BACKED_OFF: 1}


def test_a_limits_cpu_quota_blocks_the_raises_that_do_not_fit() -> None:
    quota = b.resource_quota(hard={"limits.cpu": "20"})
    quota["status"] = {"hard": {"limits.cpu": "20"}, "used": {"limits.cpu": "6"}}
    # Four 1-core pods limited at 1.5 cores share 12 cores of slack: each rises by 2.5.
    pods = [cpu_pod(name, "1", limit="1500m") for name in ("a", "b", "c", "d")]
    simulation = run(snapshot(pods=pods, quotas=[quota]))
    assert {p.result.target_m for p in simulation.pods} == {4000}
    # 14 cores of room fit all four raises.
    assert totals(simulation.pods).blocked_by_quota == 0
    quota["status"]["used"] = {"limits.cpu": "14"}
    simulation = run(snapshot(pods=pods, quotas=[quota]))
    assert [p.pod.name for p in simulation.pods if p.blocked_by] == ["c", "d"]
    summary = totals(simulation.pods)
    # 6 cores of room: two raises fit, in listing order.
    assert (summary.raised, summary.unchanged, summary.blocked_by_quota) == (2, 2, 2)
    assert summary.limits_after_m == 2 * 4000 + 2 * 1500


def test_quotas_without_limits_cpu_block_nothing() -> None:
    simulation = run(snapshot(pods=WORKED, quotas=[b.resource_quota()]))
    assert totals(simulation.pods).blocked_by_quota == 0


def test_a_limit_range_below_the_request_blocks_the_resize() -> None:
    ranges = [b.limit_range(pod_max_cpu="800m")]
    pods = [cpu_pod("a", "1"), cpu_pod("b", "500m", namespace="team-a")]
    simulation = run(snapshot(pods=pods, limit_ranges=ranges))
    blocked = {p.pod.name: p.blocked_by for p in simulation.pods}
    assert blocked == {"a": "limitrange", "b": None}
    assert totals(simulation.pods).blocked_by_limit_range == 1


def test_totals() -> None:
    pods = [*WORKED, cpu_pod("d", "1", limit="3")]
    summary = totals(run(snapshot(pods=pods)).pods)
    # d: 1 + 7/9 of a core of slack, below its 3-core limit.
    assert (summary.pods, summary.first_limits, summary.lowered, summary.raised) == (4, 3, 1, 0)
    assert summary.limits_before_m == 3000
    assert (summary.unlimited_before, summary.unlimited_after) == (3, 0)


@pytest.mark.parametrize(
    ("key", "order"),
    [
        (SortKey.NODE, ["n1/a", "n1/z", "n2/b"]),
        (SortKey.POD, ["n1/a", "n2/b", "n1/z"]),
        (SortKey.TARGET, ["n1/z", "n2/b", "n1/a"]),
        (SortKey.CHANGE, ["n1/z", "n2/b", "n1/a"]),
    ],
)
def test_sorting(key: SortKey, order: list[str]) -> None:
    nodes = [b.node("n1"), b.node("n2")]
    pods = [
        cpu_pod("z", "1", node="n1"),
        cpu_pod("a", "100m", node="n1"),
        cpu_pod("b", "500m", node="n2"),
    ]
    simulation = run(snapshot(pods=pods, nodes=nodes))
    assert [f"{p.node.name}/{p.pod.name}" for p in sort_pods(simulation.pods, key)] == order


def test_filters_select_pods_without_changing_any_result() -> None:
    nodes = [b.node("n1"), b.node("n2")]
    pods = [
        cpu_pod("a", "1", node="n1", labels={"app": "web"}),
        cpu_pod("b", "1", node="n2", labels={"app": "db"}),
        cpu_pod("c", "1", node="n2", namespace="team-b", labels={"app": "web"}),
    ]
    simulation = run(snapshot(pods=pods, nodes=nodes), enroll=("team-b",))
    web = parse_label_selector({"matchLabels": {"app": "web"}})
    assert [p.pod.name for p in select(simulation, selector=web).pods] == ["a", "c"]
    by_node = select(simulation, nodes=["n2"])
    assert ([p.pod.name for p in by_node.pods], [n.name for n in by_node.nodes]) == (
        ["b", "c"],
        ["n2"],
    )
    team_b = select(simulation, namespaces=["team-b"])
    assert [n.name for n in team_b.nodes] == ["n2"]
    # c shares n2 with b either way.
    (c,) = team_b.pods
    assert c.node.result.pod_count == 2


def test_filters_narrow_the_unmanaged_counts_too() -> None:
    pods = [
        cpu_pod("a", "1", labels={"app": "web"}),
        cpu_pod("b", "1", namespace="team-b", labels={"app": "web"}),
        cpu_pod("c", "1", namespace="team-b", labels={"app": "db"}),
    ]
    simulation = run(snapshot(pods=pods))
    assert select(simulation).not_managed == {Ineligible.NAMESPACE_NOT_ENROLLED: 2}
    web = parse_label_selector({"matchLabels": {"app": "web"}})
    assert select(simulation, selector=web).not_managed == {Ineligible.NAMESPACE_NOT_ENROLLED: 1}
    assert select(simulation, namespaces=["team-a"]).not_managed == {}


def test_progress_is_reported_per_node() -> None:
    seen: list[tuple[int, int]] = []
    snap = snapshot(nodes=[b.node("n1"), b.node("n2")])
    simulate(
        snap, parse_config(snap.config), progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(1, 2), (2, 2)]


def test_unreadable_pods_are_skipped_and_named() -> None:
    pods = [cpu_pod("a", "1"), cpu_pod("bad", "lots")]
    simulation = run(snapshot(pods=pods))
    assert targets(simulation) == {"a": 10000}
    assert simulation.unreadable == ["team-a/bad"]
