from typing import Any

import orjson
import pytest

from app.core.cluster import ClusterCache, pod_change_nodes
from app.core.config import Settings
from app.core.feeds import object_feed, pod_feed
from app.core.pods import PodInfo, owner_ref
from app.core.views import node_record
from tests.unit.app import builders
from tests.unit.app.builders import condition, container, pod_info


class Wakeups:
    """Records what the cache asks for."""

    def __init__(self) -> None:
        self.dirty: list[tuple[str, bool]] = []
        self.removed: list[str] = []
        self.settings: list[Settings] = []
        self.enrolment: list[tuple[str, bool]] = []
        self.annotated: list[str] = []

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        self.dirty.append((node, prompt))

    def node_removed(self, node: str) -> None:
        self.removed.append(node)

    def settings_changed(self, settings: Settings) -> None:
        self.settings.append(settings)

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None:
        self.enrolment.append((namespace, enrolled))

    def annotation_changed(self, pod: PodInfo) -> None:
        self.annotated.append(pod.key)

    def nodes(self, *, prompt: bool) -> set[str]:
        return {node for node, was_prompt in self.dirty if was_prompt is prompt}

    def clear(self) -> None:
        self.dirty.clear()
        self.removed.clear()
        self.settings.clear()
        self.enrolment.clear()
        self.annotated.clear()


def make_cache() -> tuple[ClusterCache, Wakeups]:
    wakeups = Wakeups()
    return ClusterCache(listener=wakeups), wakeups


def pod_key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


BASE = pod_info("p")
INFEASIBLE = condition("PodResizePending", reason="Infeasible")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(None, BASE, {"node-1"}, id="binds"),
        pytest.param(BASE, None, {"node-1"}, id="leaves"),
        pytest.param(None, pod_info("p", node=None), set(), id="unbound-appears"),
        pytest.param(BASE, pod_info("p", phase="Succeeded"), {"node-1"}, id="turns-terminal"),
        pytest.param(
            BASE,
            pod_info("p", deletion_timestamp="2030-01-01T00:00:00Z"),
            {"node-1"},
            id="being-deleted",
        ),
        pytest.param(
            BASE,
            pod_info("p", containers=[container(cpu_request="750m")]),
            {"node-1"},
            id="cpu-request-changes",
        ),
        pytest.param(
            BASE,
            pod_info("p", containers=[container(cpu_limit="2")]),
            {"node-1"},
            id="cpu-limit-changes",
        ),
        pytest.param(
            BASE,
            pod_info("p", labels={"kube-headroom.dev/mode": "unmanaged"}),
            {"node-1"},
            id="opts-out",
        ),
        pytest.param(BASE, pod_info("p", max_cpu="2"), {"node-1"}, id="max-cpu-set"),
        pytest.param(
            BASE,
            pod_info("p", conditions=[condition("PodResizePending", reason="Deferred")]),
            {"node-1"},
            id="kubelet-defers",
        ),
        pytest.param(
            BASE, pod_info("p", status_annotation='{"factor":"2.00"}'), set(), id="own-annotation"
        ),
        pytest.param(
            BASE, pod_info("p", generation=2, observed_generation=2), set(), id="generation-only"
        ),
        pytest.param(
            pod_info("p", generation=1, observed_generation=1, conditions=[INFEASIBLE]),
            pod_info("p", generation=2, observed_generation=1, conditions=[INFEASIBLE]),
            set(),
            id="resized-kubelet-yet-to-answer",
        ),
        pytest.param(
            pod_info("p", generation=2, observed_generation=1, conditions=[INFEASIBLE]),
            pod_info("p", generation=2, observed_generation=2, conditions=[INFEASIBLE]),
            {"node-1"},
            id="kubelet-refuses-the-next-generation-too",
        ),
        pytest.param(
            pod_info("p", generation=1, conditions=[INFEASIBLE]),
            pod_info("p", generation=2, conditions=[INFEASIBLE]),
            {"node-1"},
            id="report-without-observed-generation",
        ),
        pytest.param(pod_info("p", phase="Pending"), BASE, set(), id="starts-running"),
        pytest.param(BASE, pod_info("p", node="node-2"), {"node-1", "node-2"}, id="moves"),
        pytest.param(BASE, pod_info("p", uid="other"), {"node-1"}, id="recreated-same-name"),
    ],
)
def test_pod_change_nodes(old: PodInfo | None, new: PodInfo | None, expected: set[str]) -> None:
    assert pod_change_nodes(old, new) == expected


def test_pods_are_indexed_by_node_and_wake_it_debounced() -> None:
    cache, wakeups = make_cache()
    for node in ("node-1", "node-2"):
        cache.apply_node(node, builders.node(node))
    wakeups.clear()
    for name, node in (("a", "node-1"), ("b", "node-1"), ("c", "node-2")):
        obj = builders.pod(name, node=node)
        cache.apply_pod(pod_key(obj), builders.wire(obj))
    view = cache.node_view("node-1")
    assert view is not None
    assert sorted(p.name for p in view.pods) == ["a", "b"]
    assert wakeups.nodes(prompt=False) == {"node-1", "node-2"}
    cache.apply_pod("team-a/c", None)
    emptied = cache.node_view("node-2")
    assert emptied is not None
    assert emptied.pods == ()
    assert cache.nodes_in_namespace("team-a") == {"node-1"}


def test_unbound_pods_are_not_kept() -> None:
    cache, wakeups = make_cache()
    obj = builders.pod("pending", node=None)
    cache.apply_pod(pod_key(obj), builders.wire(obj))
    assert cache.pods == {}
    assert wakeups.dirty == []


def test_a_pod_with_an_invalid_quantity_is_ignored() -> None:
    cache, wakeups = make_cache()
    obj = builders.pod("bad", containers=[container(cpu_request="lots")])
    cache.apply_pod(pod_key(obj), builders.wire(obj))
    assert cache.pods == {}
    assert wakeups.dirty == []


def test_node_changes() -> None:
    cache, wakeups = make_cache()
    cache.apply_node("node-1", builders.node("node-1", cpu="16"))
    assert cache.nodes["node-1"].allocatable_m == 16000
    assert wakeups.dirty == [("node-1", False)]
    wakeups.clear()
    cache.apply_node("node-1", builders.node("node-1", cpu="16"))
    assert wakeups.dirty == []
    cache.apply_node("node-1", builders.node("node-1", cpu="15500m"))
    assert wakeups.dirty == [("node-1", False)]
    cache.apply_node("node-1", None)
    assert wakeups.removed == ["node-1"]
    assert cache.node_names() == []


def test_node_record_without_allocatable_has_none() -> None:
    record = node_record({"metadata": {"name": "bare"}})
    assert (record.name, record.allocatable_m, record.labels) == ("bare", 0, {})


def populated() -> tuple[ClusterCache, Wakeups]:
    cache, wakeups = make_cache()
    for name in ("node-1", "node-2", "node-3"):
        cache.apply_node(name, builders.node(name))
    for name, node, namespace in (("a", "node-1", "team-a"), ("b", "node-2", "team-b")):
        obj = builders.pod(name, node=node, namespace=namespace)
        cache.apply_pod(pod_key(obj), builders.wire(obj))
    cache.apply_namespace("team-a", builders.namespace("team-a"))
    cache.apply_namespace("team-b", builders.namespace("team-b", labels={}))
    wakeups.clear()
    return cache, wakeups


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        pytest.param("team-a", {}, {"node-1"}, id="label-removed"),
        pytest.param("team-b", {"kube-headroom.dev/mode": "managed"}, {"node-2"}, id="enrolled"),
        pytest.param(
            "team-a",
            {"kube-headroom.dev/mode": "managed", "team": "x"},
            set(),
            id="other-label-changes",
        ),
        pytest.param(
            "team-b", {"kube-headroom.dev/mode": "Managed"}, set(), id="mode-is-a-keyword"
        ),
    ],
)
def test_namespace_enrolment_changes_wake_its_nodes_promptly(
    namespace: str, labels: dict[str, str], expected: set[str]
) -> None:
    cache, wakeups = populated()
    cache.apply_namespace(namespace, builders.namespace(namespace, labels=labels))
    assert wakeups.nodes(prompt=True) == expected
    assert wakeups.nodes(prompt=False) == set()
    assert wakeups.enrolment == ([(namespace, namespace == "team-b")] if expected else [])


def test_a_deleted_enrolled_namespace_wakes_its_nodes() -> None:
    cache, wakeups = populated()
    cache.apply_namespace("team-a", None)
    assert wakeups.nodes(prompt=True) == {"node-1"}
    assert "team-a" not in cache.namespaces


def test_config_changes_wake_every_node_promptly() -> None:
    cache, wakeups = populated()
    cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    assert not cache.settings.dry_run
    assert cache.config.present
    assert cache.config.generation == 1
    assert [s.dry_run for s in wakeups.settings] == [False]
    assert wakeups.nodes(prompt=True) == {"node-1", "node-2", "node-3"}


def test_a_status_only_update_of_the_config_wakes_nothing() -> None:
    cache, wakeups = populated()
    config = builders.headroom_config(spec={"dryRun": False})
    cache.apply_config("cluster", config)
    wakeups.clear()
    cache.apply_config("cluster", {**config, "status": {"managedPods": 3}})
    assert wakeups.dirty == []
    assert cache.config.status == {"managedPods": 3}


def test_an_invalid_config_freezes_with_the_previous_settings() -> None:
    cache, _wakeups = populated()
    cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    cache.apply_config(
        "cluster", builders.headroom_config(generation=2, spec={"quantum": "0", "dryRun": True})
    )
    assert cache.config.invalid is not None
    assert "spec.quantum" in cache.config.invalid
    assert not cache.settings.dry_run
    assert cache.config.generation == 2


def test_deleting_the_config_restores_the_defaults() -> None:
    cache, wakeups = populated()
    cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    wakeups.clear()
    cache.apply_config("cluster", None)
    assert cache.settings.dry_run
    assert not cache.config.present
    assert wakeups.nodes(prompt=True) == {"node-1", "node-2", "node-3"}


def test_configs_with_other_names_are_ignored() -> None:
    cache, wakeups = populated()
    cache.apply_config("other", builders.headroom_config(name="other", spec={"dryRun": False}))
    assert cache.settings.dry_run
    assert wakeups.dirty == []


def test_limit_range_changes_wake_the_namespace_nodes() -> None:
    cache, wakeups = populated()
    cache.apply_limit_range(
        "team-a/limits", builders.limit_range(namespace="team-a", container_max_cpu="2")
    )
    assert cache.limit_range_caps("team-a").container_max_m == 2000
    assert wakeups.dirty == [("node-1", False)]
    wakeups.clear()
    cache.apply_limit_range(
        "team-a/limits", builders.limit_range(namespace="team-a", container_max_cpu="2")
    )
    assert wakeups.dirty == []
    cache.apply_limit_range("team-a/limits", None)
    assert cache.limit_range_caps("team-a").container_max_m is None
    assert wakeups.dirty == [("node-1", False)]


def test_a_limit_range_without_cpu_caps_wakes_nothing() -> None:
    cache, wakeups = populated()
    cache.apply_limit_range(
        "team-a/defaults", builders.limit_range(namespace="team-a", container_default_cpu="1")
    )
    assert wakeups.dirty == []


def test_vpa_changes_wake_the_namespace_nodes() -> None:
    cache, wakeups = populated()
    cache.apply_vpa("team-b/web", builders.vpa(namespace="team-b"))
    assert wakeups.dirty == [("node-2", False)]
    assert [v["spec"]["targetRef"]["name"] for v in cache.vpas("team-b")] == ["web"]
    wakeups.clear()
    cache.apply_vpa("team-b/web", None)
    assert wakeups.dirty == [("node-2", False)]
    assert list(cache.vpas("team-b")) == []


ROLLOUT = builders.owner_ref("Rollout", "web", api_version="argoproj.io/v1alpha1")


def test_a_controller_change_wakes_the_namespace_nodes_only_where_there_are_vpas() -> None:
    cache, wakeups = populated()
    cache.apply_replica_set("team-a/web-1", builders.controlled("web-1"))
    assert wakeups.dirty == []
    cache.apply_vpa("team-b/web", builders.vpa(namespace="team-b"))
    wakeups.clear()
    rs = builders.controlled("web-1", namespace="team-b")
    cache.apply_replica_set("team-b/web-1", rs)
    assert wakeups.dirty == [("node-2", False)]
    wakeups.clear()
    # The same controller again: nothing changed.
    cache.apply_replica_set("team-b/web-1", rs)
    assert wakeups.dirty == []
    cache.apply_job("team-b/nightly-1", builders.controlled("nightly-1", owners=[]))
    wakeups.clear()
    # Known and without a controller, where an unknown one is None.
    rs_ref = owner_ref("apps/v1", "ReplicaSet", "web-1", True)
    job_ref = owner_ref("batch/v1", "Job", "nightly-1", True)
    assert cache.known_controller("team-b", job_ref) == ()
    assert cache.known_controller("team-b", owner_ref("batch/v1", "Job", "other", True)) is None
    assert cache.controller_of("team-b", job_ref) is None
    assert cache.controller_of("team-b", rs_ref) == owner_ref("apps/v1", "Deployment", "web", True)
    # Not a kind whose controller is looked up.
    assert cache.known_controller("team-b", owner_ref("apps/v1", "Deployment", "web", True)) is None
    cache.apply_replica_set(
        "team-b/web-1", builders.controlled("web-1", namespace="team-b", owners=[ROLLOUT])
    )
    assert wakeups.dirty == [("node-2", False)]
    wakeups.clear()
    cache.apply_replica_set("team-b/web-1", None)
    assert wakeups.dirty == [("node-2", False)]
    assert cache.controller_of("team-b", rs_ref) is None


def test_keys_per_kind() -> None:
    cache, _ = populated()
    cache.apply_limit_range("team-a/l", builders.limit_range(container_max_cpu="1"))
    cache.apply_vpa("team-b/v", builders.vpa(namespace="team-b"))
    cache.apply_replica_set("team-a/web-1", builders.controlled("web-1"))
    cache.apply_job("team-a/nightly-1", builders.controlled("nightly-1", owners=[]))
    assert sorted(cache.keys("pods")) == ["team-a/a", "team-b/b"]
    assert sorted(cache.keys("nodes")) == ["node-1", "node-2", "node-3"]
    assert sorted(cache.keys("namespaces")) == ["team-a", "team-b"]
    assert list(cache.keys("config")) == []
    assert list(cache.keys("limitranges")) == ["team-a/l"]
    assert list(cache.keys("vpas")) == ["team-b/v"]
    assert list(cache.keys("replicasets")) == ["team-a/web-1"]
    assert list(cache.keys("jobs")) == ["team-a/nightly-1"]
    with pytest.raises(ValueError, match="unknown kind"):
        cache.keys("secrets")


def raw(obj: dict[str, Any]) -> memoryview:
    return memoryview(orjson.dumps(obj))


def test_a_relist_deletes_what_it_no_longer_reports() -> None:
    cache, wakeups = populated()
    feed = pod_feed(cache)
    feed.relist_started()
    feed.listed(raw(builders.pod("a", node="node-1", namespace="team-a")))
    feed.relist_finished()
    assert list(cache.pods) == ["team-a/a"]
    assert wakeups.dirty == [("node-2", False)]


def test_watch_events_apply_and_delete() -> None:
    cache, _ = make_cache()
    feed = object_feed(cache.apply_namespace, lambda: cache.keys("namespaces"))
    feed.event("ADDED", raw(builders.namespace("team-c")))
    assert "team-c" in cache.namespaces
    feed.event("DELETED", raw(builders.namespace("team-c")))
    assert "team-c" not in cache.namespaces


def test_a_changed_status_annotation_is_reported_without_waking_the_node() -> None:
    cache, wakeups = make_cache()
    obj = builders.pod("p", status_annotation='{"targetLimit":"1000m"}')
    cache.apply_pod("team-a/p", builders.wire(obj))
    wakeups.clear()
    cache.apply_pod("team-a/p", builders.wire(builders.pod("p", status_annotation="edited")))
    assert wakeups.annotated == ["team-a/p"]
    assert wakeups.dirty == []
    cache.apply_pod("team-a/p", builders.wire(builders.pod("p", status_annotation="edited")))
    assert wakeups.annotated == ["team-a/p"]


@pytest.mark.parametrize(
    ("weights", "pools", "expected"),
    [
        pytest.param(
            [{"namespaceSelector": {"matchLabels": {"team": "x"}}}], [], {"node-1"}, id="top"
        ),
        pytest.param(
            [],
            [
                {
                    "name": "p",
                    "nodeSelector": {},
                    "weights": [{"namespaceSelector": {}, "weight": 2}],
                }
            ],
            {"node-1"},
            id="pool",
        ),
        # Rules by PriorityClass or pod labels do not read the namespace's labels.
        pytest.param(
            [{"priorityClassName": "critical", "weight": 2}], [], set(), id="not-by-namespace"
        ),
    ],
)
def test_a_namespace_label_change_wakes_its_nodes_when_a_weight_rule_reads_them(
    weights: list[dict[str, Any]], pools: list[dict[str, Any]], expected: set[str]
) -> None:
    cache, wakeups = populated()
    spec = {"weights": weights, "nodePools": pools}
    cache.apply_config("cluster", builders.headroom_config(spec=spec))
    wakeups.clear()
    labels = {"kube-headroom.dev/mode": "managed", "team": "x"}
    cache.apply_namespace("team-a", builders.namespace("team-a", labels=labels))
    assert wakeups.nodes(prompt=False) == expected
    assert wakeups.nodes(prompt=True) == set()
