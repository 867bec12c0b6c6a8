import logging
from typing import Any

import pytest

from reconciler.requeue import CONFLICT_RETRY_SECONDS
from tests.unit.app import builders
from tests.unit.app.builders import condition, container
from tests.unit.reconciler.world import (
    PODS,
    World,
    reconciled_example,
    settle,
    worked_example,
)


def test_worked_example_converges_to_its_targets() -> None:
    world = World()
    worked_example(world)
    assert world.reconcile() is None
    assert world.resizes() == {"a": "1500m", "b": "3", "c": "12"}
    assert world.count("ok") == 3
    assert world.annotations()["a"] == {
        "factor": "2.00",
        "slack": "8000m",
        "managedRequests": "8000m",
        "nodePods": 3,
        "targetLimit": "1500m",
        "policy": "proportional-v1",
        "computedAt": "2030-01-01T12:00:00Z",
    }
    assert ("a", "CPULimitAdjusted", "unset -> 1500m (node factor 2.00, slack 8/16 cores)") in (
        world.events()
    )
    assert world.gauge("headroom_node_factor", {"node": "node-1"}) == 2.0
    assert world.gauge("headroom_node_slack_cores", {"node": "node-1"}) == 8.0
    assert world.gauge("headroom_pod_limit_cores", {"namespace": "team-a", "pod": "c"}) == 12.0
    assert world.gauge("headroom_pods_managed") == 3


def test_the_resize_is_a_forced_server_side_apply_of_cpu_limits_only() -> None:
    world = World()
    world.add(
        "p",
        containers=[container("app", cpu_request="1")],
        init_containers=[container("proxy", cpu_request="1", restart_policy="Always")],
    )
    world.reconcile()
    [resize] = world.api.writes(kind="resize")
    assert resize.method == "PATCH"
    assert resize.path == f"{PODS}/p/resize"
    assert resize.query == {"fieldManager": "headroom", "force": "true"}
    assert resize.content_type == "application/apply-patch+yaml"
    assert resize.body == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "containers": [{"name": "app", "resources": {"limits": {"cpu": "8"}}}],
            "initContainers": [{"name": "proxy", "resources": {"limits": {"cpu": "8"}}}],
        },
    }
    [annotation] = world.api.writes(kind="annotation")
    assert annotation.path == f"{PODS}/p"
    assert annotation.content_type == "application/merge-patch+json"
    assert annotation.body is not None
    assert list(annotation.body) == ["metadata"]


def test_a_converged_node_writes_nothing() -> None:
    world = reconciled_example()
    settle(world)
    assert world.reconcile() is None
    assert world.api.sent == []
    assert world.count("ok") == 3


def test_an_accepted_resize_is_not_repeated_before_the_watch_shows_it() -> None:
    world = reconciled_example()
    world.api.sent.clear()
    world.reconcile()
    assert world.api.sent == []


def test_dry_run_annotates_counts_and_announces_once_without_resizing() -> None:
    world = reconciled_example(spec={})
    assert world.api.writes(kind="resize") == []
    assert world.count("dry-run") == 3
    assert world.annotations()["b"]["dryRun"] is True
    assert (
        "b",
        "CPULimitAdjusted",
        "would set unset -> 3000m (node factor 2.00, slack 8/16 cores)",
    ) in (world.events())
    settle(world)
    world.reconcile()
    assert world.api.sent == []
    assert world.count("dry-run") == 3


def test_a_new_neighbour_changes_dry_run_targets_and_counts_again() -> None:
    world = reconciled_example(spec={})
    settle(world)
    world.add(
        "d",
        containers=[container(cpu_request="4")],
        labels={"kube-headroom.dev/mode": "unmanaged"},
    )
    world.reconcile()
    # Slack 4 of 16 cores: b and c shrink; a keeps 1.5 cores through the burst floor, so
    # its annotation, which explains that target, is not rewritten for the slack move.
    assert world.count("dry-run") == 5
    assert {name: a["targetLimit"] for name, a in world.annotations().items()} == {
        "b": "2500m",
        "c": "9000m",
    }


def test_quota_denied_backs_off_and_the_other_pods_still_converge() -> None:
    world = World()
    worked_example(world)
    world.api.answer(
        "PATCH",
        f"{PODS}/b/resize",
        code=403,
        body={
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": 'pods "b" is forbidden: exceeded quota: compute, requested: limits.cpu=3,'
            " used: limits.cpu=1, limited: limits.cpu=2",
            "reason": "Forbidden",
            "code": 403,
        },
    )
    assert world.reconcile() is None
    assert world.requeued == [("node-1", 300.0)]
    assert world.resizes() == {"a": "1500m", "b": "3", "c": "12"}
    assert world.count("quota-denied") == 1
    assert world.count("ok") == 2
    [(pod, _reason, message)] = [e for e in world.events() if e[1] == "ResizeForbidden"]
    assert pod == "b"
    assert "exceeded quota" in message
    assert "requests.cpu" in message
    world.api.sent.clear()
    world.clock.advance(10)
    assert world.reconcile() == pytest.approx(290.0)
    assert "b" not in world.resizes()


def test_after_the_back_off_a_quota_blocked_pod_is_tried_once_more() -> None:
    world = World()
    world.add("b", containers=[container(cpu_request="1500m")])
    world.api.answer("PATCH", f"{PODS}/b/resize", code=403, body={"message": "exceeded quota: q"})
    world.reconcile()
    world.clock.advance(300)
    world.reconcile()
    assert world.count("quota-denied") == 2
    assert len(world.api.writes(kind="resize")) == 2


@pytest.mark.parametrize(
    ("code", "result", "low", "high"),
    [
        pytest.param(
            409, "conflict", CONFLICT_RETRY_SECONDS, CONFLICT_RETRY_SECONDS, id="conflict"
        ),
        pytest.param(500, "error", 0.25, 0.5, id="server-error"),
        pytest.param(429, "error", 0.25, 0.5, id="too-many-requests"),
    ],
)
def test_failed_resizes_are_counted_and_retried_soon(
    code: int, result: str, low: float, high: float
) -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")])
    world.api.answer("PATCH", f"{PODS}/p/resize", code=code, body={"message": "nope"})
    assert world.reconcile() is None
    assert world.count(result) == 1
    [(node, delay)] = world.requeued
    assert node == "node-1"
    assert low <= delay <= high
    # A resize that did not happen is not claimed by the annotation.
    assert world.api.writes(kind="annotation") == []


def test_an_invalid_resize_is_an_error_logged_as_a_bug(caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")])
    world.api.answer(
        "PATCH",
        f"{PODS}/p/resize",
        code=422,
        body={"message": "Pod QOS Class may not change as a result of resizing", "code": 422},
    )
    with caplog.at_level(logging.ERROR):
        world.reconcile()
    assert world.count("error") == 1
    assert any("bug" in record.getMessage() for record in caplog.records)
    # Waiting will not fix it: the pod is left alone for the back-off period.
    assert world.requeued == [("node-1", 300.0)]
    world.api.sent.clear()
    assert world.reconcile() == 300.0
    assert world.api.writes(kind="resize") == []


def test_infeasible_backs_off_with_one_warning_and_no_patch() -> None:
    world = World()
    world.add(
        "p",
        containers=[container(cpu_request="1", cpu_limit="10")],
        generation=3,
        conditions=[
            condition("PodResizePending", reason="Infeasible", message="Node didn't have enough")
        ],
    )
    delay = world.reconcile()
    assert delay == 300.0
    assert world.count("Infeasible") == 1
    [(pod, reason, message)] = world.events()
    assert (pod, reason) == ("p", "ResizeInfeasible")
    assert "Node didn't have enough" in message
    assert world.api.writes(kind="resize") == []
    assert world.api.writes(kind="annotation") == []
    world.clock.advance(300)
    world.api.sent.clear()
    world.reconcile()
    # Same episode: not counted or announced again. The pod is managed again, and its
    # limit already is the target, so the resize is not retried.
    assert world.count("Infeasible") == 1
    assert world.events() == []
    assert world.api.writes(kind="resize") == []
    assert world.annotations()["p"]["targetLimit"] == "10000m"


def test_deferred_is_tracked_by_the_gauge_and_not_retried() -> None:
    world = World()
    world.add(
        "p",
        containers=[container(cpu_request="1", cpu_limit="10")],
        conditions=[condition("PodResizePending", reason="Deferred")],
    )
    world.reconcile()
    assert world.gauge("headroom_resizes_deferred") == 1
    assert world.count("Deferred") == 1
    assert world.api.writes(kind="resize") == []
    world.reconcile()
    assert world.count("Deferred") == 1
    world.add("p", containers=[container(cpu_request="1", cpu_limit="10")])
    world.reconcile()
    assert world.gauge("headroom_resizes_deferred") == 0


def test_a_pod_that_would_turn_guaranteed_is_not_pinned_to_its_request() -> None:
    world = World(cpu="2")
    world.add(
        "full",
        containers=[container(cpu_request="2", memory_request="1Gi", memory_limit="1Gi")],
    )
    world.reconcile()
    assert world.api.writes(kind="resize") == []
    assert world.count("error") == 0
    assert world.gauge("headroom_pod_limit_cores", {"namespace": "team-a", "pod": "full"}) is None
    assert world.gauge("headroom_pods_managed") == 1
    # It has no limit and can get none: no annotation claiming a "0m" ceiling either.
    assert world.api.writes(kind="annotation") == []


@pytest.mark.parametrize(
    ("setup"),
    [
        pytest.param({"leading": False}, id="not-leader"),
        pytest.param({"spec": {"quantum": "0", "dryRun": False}}, id="invalid-config"),
        pytest.param({"namespace_labels": {}}, id="namespace-not-enrolled"),
        pytest.param({"pod_labels": {"kube-headroom.dev/mode": "unmanaged"}}, id="opted-out"),
        pytest.param({"resize_policy": "RestartContainer"}, id="restart-policy"),
    ],
)
def test_frozen_cases_write_nothing(setup: dict[str, Any]) -> None:
    world = World()
    world.leading = setup.get("leading", True)
    if "spec" in setup:
        world.cache.apply_config(
            "cluster", builders.headroom_config(generation=2, spec=setup["spec"])
        )
    if "namespace_labels" in setup:
        world.cache.apply_namespace(
            "team-a", builders.namespace("team-a", labels=setup["namespace_labels"])
        )
    world.add(
        "p",
        labels=setup.get("pod_labels", {"app": "web"}),
        containers=[container(cpu_request="1", cpu_resize_policy=setup.get("resize_policy"))],
    )
    assert world.reconcile() is None
    assert world.api.sent == []


def test_a_limit_range_and_max_cpu_cap_the_target() -> None:
    world = World()
    world.cache.apply_limit_range("team-a/limits", builders.limit_range(container_max_cpu="3"))
    world.add("capped-by-range", containers=[container(cpu_request="1")])
    world.add("capped-by-annotation", containers=[container(cpu_request="1")], max_cpu="2")
    world.reconcile()
    assert world.resizes() == {"capped-by-range": "3", "capped-by-annotation": "2"}


def test_an_invalid_max_cpu_is_ignored_with_one_warning() -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")], max_cpu="lots")
    world.reconcile()
    world.reconcile()
    warnings = [e for e in world.events() if e[1] == "InvalidMaxCPU"]
    assert len(warnings) == 1
    assert world.resizes() == {"p": "10"}


def test_a_vpa_that_controls_limits_excludes_its_pods() -> None:
    world = World()
    world.cache.apply_vpa("team-a/web", builders.vpa())
    world.cache.apply_replica_set("team-a/web-5d8f7c9b4", builders.controlled())
    world.add("web-5d8f7c9b4-abcde", containers=[container(cpu_request="1")])
    world.reconcile()
    assert world.api.sent == []


def test_series_of_pods_that_left_are_removed() -> None:
    world = reconciled_example()
    world.cache.apply_pod("team-a/c", None)
    world.reconcile()
    assert world.gauge("headroom_pod_limit_cores", {"namespace": "team-a", "pod": "c"}) is None
    assert world.gauge("headroom_pods_managed") == 2
    assert world.reconciler.managed_pods == 2
    assert world.reconciler.managed_nodes == 1


def test_a_removed_node_is_forgotten() -> None:
    world = reconciled_example()
    world.cache.apply_node("node-1", None)
    world.reconcile()
    assert world.gauge("headroom_node_factor", {"node": "node-1"}) is None
    assert world.gauge("headroom_pods_managed") == 0


def booked_series(world: World) -> dict[tuple[str, str], float]:
    return {
        (sample.labels["namespace"], sample.labels["pod"]): sample.value
        for family in world.metrics.registry.collect()
        if family.name == "headroom_pod_booked_cores"
        for sample in family.samples
        if sample.labels["node"] == "node-1"
    }


def test_every_pod_s_booking_is_a_series_that_adds_up_to_the_slack() -> None:
    world = World()
    worked_example(world)
    obj = builders.init_heavy_pod("migrating", namespace="other")
    world.cache.apply_pod("other/migrating", builders.wire(obj))
    world.add("leaving", namespace="other", deletion_timestamp="2030-01-01T11:59:00Z")
    world.add("done", namespace="other", phase="Succeeded")
    world.add("best-effort", namespace="other", containers=[container(cpu_request=None)])
    world.reconcile()
    assert booked_series(world) == {
        ("team-a", "a"): 0.5,
        ("team-a", "b"): 1.5,
        ("team-a", "c"): 6.0,
        ("other", "migrating"): 2.25,
        ("other", "leaving"): 0.5,
    }
    allocatable = world.gauge("headroom_node_allocatable_cores", {"node": "node-1"})
    slack = world.gauge("headroom_node_slack_cores", {"node": "node-1"})
    assert allocatable == 16.0
    assert slack == allocatable - sum(booked_series(world).values())

    world.cache.apply_pod("other/leaving", None)
    world.reconcile()
    assert ("other", "leaving") not in booked_series(world)
    world.cache.apply_node("node-1", None)
    world.reconcile()
    assert booked_series(world) == {}
    assert world.gauge("headroom_node_allocatable_cores", {"node": "node-1"}) is None


def test_losing_the_lease_mid_reconcile_stops_writing_at_once() -> None:
    world = World()
    worked_example(world)

    def lose(_: object) -> None:
        world.leading = False

    world.api.after_send = lose
    world.reconcile()
    assert len(world.api.sent) == 1
    assert world.api.skipped


def test_a_kubelet_report_counts_once_per_generation_it_refers_to() -> None:
    world = World()
    deferred = [condition("PodResizePending", reason="Deferred")]
    for generation, observed in ((2, 2), (3, 2), (3, 3)):
        world.add(
            "p",
            containers=[container(cpu_request="1", cpu_limit="10")],
            generation=generation,
            observed_generation=observed,
            conditions=deferred,
        )
        world.reconcile()
    # Generation 3 reported stale (still about 2) is the same episode; then a new one.
    assert world.count("Deferred") == 2


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(builders.node("node-1", kubelet_version="v1.34.2"), id="kubelet-1.34"),
        pytest.param(builders.node("node-1", kubelet_version=None), id="kubelet-unreported"),
        pytest.param(
            builders.node("node-1", labels={}, operating_system="windows"), id="windows-status"
        ),
    ],
)
def test_pods_on_a_node_that_cannot_resize_are_left_alone(node: dict[str, Any]) -> None:
    world = World()
    world.cache.apply_node("node-1", node)
    worked_example(world)
    world.reconcile()
    assert world.api.sent == []
    assert world.gauge("headroom_pods_managed") == 0


def test_a_kubelet_upgrade_brings_the_node_under_management() -> None:
    world = World()
    world.cache.apply_node("node-1", builders.node("node-1", kubelet_version="v1.34.2"))
    worked_example(world)
    world.reconcile()
    world.cache.apply_node("node-1", builders.node("node-1", kubelet_version="v1.35.0"))
    world.reconcile()
    assert world.resizes() == {"a": "1500m", "b": "3", "c": "12"}


def test_an_overbooked_node_reports_zero_slack_and_says_by_how_much() -> None:
    world = World(cpu="2")
    world.add("a", containers=[container(cpu_request="1", cpu_limit="1500m")])
    world.add(
        "b", containers=[container(cpu_request="2")], labels={"kube-headroom.dev/mode": "unmanaged"}
    )
    world.reconcile()
    assert world.gauge("headroom_node_slack_cores", {"node": "node-1"}) == 0
    annotation = world.annotations()["a"]
    assert (annotation["slack"], annotation["overbooked"]) == ("0m", "1000m")
    [(_, _, message)] = world.events()
    assert message.endswith("(node factor 1.00, slack 0/2 cores, overbooked by 1 core)")


def _stopped_in_flight(world: World, name: str) -> None:
    world.api.answer(
        "PATCH",
        f"{PODS}/{name}/resize",
        code=422,
        body={
            "message": f'pods "{name}" is forbidden: ValidatingAdmissionPolicy '
            "'kube-headroom-reconciler-pod-resizes' with binding "
            "'kube-headroom-reconciler-pod-resizes' denied request: failed to configure "
            "binding: no params found for policy binding with `Deny` parameterNotFoundAction",
            "code": 422,
        },
    )


def test_a_resize_stopped_in_flight_is_not_backed_off(caplog: pytest.LogCaptureFixture) -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")])
    _stopped_in_flight(world, "p")
    with caplog.at_level(logging.INFO):
        assert world.reconcile() is None
    assert world.count("conflict") == 1
    assert world.count("error") == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # Looked at again soon; the stop undone, the very next reconcile resizes it.
    assert world.requeued == [("node-1", CONFLICT_RETRY_SECONDS)]
    world.api.answers.clear()
    world.api.sent.clear()
    assert world.reconcile() is None
    assert world.resizes() == {"p": "10"}


def test_a_refusal_no_rule_explains_ends_when_the_node_s_settings_change() -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")])
    world.api.answer("PATCH", f"{PODS}/p/resize", code=422, body={"message": "odd", "code": 422})
    world.reconcile()
    assert world.reconcile() == 300.0
    world.api.answers.clear()
    world.api.sent.clear()
    world.cache.apply_config(
        "cluster",
        builders.headroom_config(generation=2, spec={"dryRun": False, "maxMultiplier": "5"}),
    )
    assert world.reconcile() is None
    assert world.resizes() == {"p": "5"}


def test_a_quota_back_off_outlasts_a_settings_change() -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="1")])
    world.api.answer("PATCH", f"{PODS}/p/resize", code=403, body={"message": "exceeded quota: q"})
    world.reconcile()
    world.cache.apply_config(
        "cluster",
        builders.headroom_config(generation=2, spec={"dryRun": False, "maxMultiplier": "5"}),
    )
    world.api.sent.clear()
    assert world.reconcile() == pytest.approx(300.0)
    assert world.resizes() == {}


def proxied(world: World, name: str = "p", *, proxy_limit: str = "2") -> None:
    """A pod as a mesh's injector leaves it: its app, and a proxy with a limit of its own."""
    world.add(
        name,
        containers=[container("app", cpu_request="500m")],
        init_containers=[
            container(
                "istio-proxy", cpu_request="100m", cpu_limit=proxy_limit, restart_policy="Always"
            )
        ],
    )


@pytest.mark.parametrize(
    ("excluded", "proxy_limit", "managed_requests"),
    [
        # The proxy shares the pod's 6-core ceiling (10x its 600m) by its request ...
        pytest.param([], "1", "600m", id="shared"),
        # ... or, excluded, is named at the limit it has, so that no apply ever drops it,
        # and the app alone shares the slack (16 cores less the 600m booked).
        pytest.param(["istio-proxy"], "2", "500m", id="excluded"),
    ],
)
def test_an_excluded_container_keeps_its_limit(
    excluded: list[str], proxy_limit: str, managed_requests: str
) -> None:
    world = World(spec={"dryRun": False, "excludedContainers": excluded})
    proxied(world)
    world.reconcile()
    [resize] = world.api.writes(kind="resize")
    assert resize.body is not None
    assert resize.body["spec"] == {
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "5"}}}],
        "initContainers": [{"name": "istio-proxy", "resources": {"limits": {"cpu": proxy_limit}}}],
    }
    assert world.annotations()["p"]["managedRequests"] == managed_requests
    assert world.annotations()["p"]["slack"] == "15400m"


def test_a_pod_whose_only_cpu_request_is_excluded_is_not_managed() -> None:
    world = World(spec={"dryRun": False, "excludedContainers": ["istio-proxy"]})
    world.add(
        "p",
        containers=[container("app", cpu_request=None), container("istio-proxy", cpu_limit="2")],
    )
    world.reconcile()
    assert world.api.writes(kind="resize") == []
    assert world.gauge("headroom_pods_managed") == 0


def test_a_kept_limit_that_moves_before_the_write_calls_the_write_off() -> None:
    world = World(spec={"dryRun": False, "excludedContainers": ["istio-proxy"]})
    proxied(world)
    world.reconcile(before_sending=lambda: proxied(world, proxy_limit="3"))
    assert world.api.writes(kind="resize") == []
