import copy
import logging
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from app.io.http import ApiUnavailable
from tests.unit.app.builders import (
    container,
    controlled,
    headroom_config,
    limit_range,
    namespace,
    owner_ref,
    pod_resources,
    vpa,
)
from tests.unit.webhook.builders import (
    NOW,
    BrokenCache,
    FakeKube,
    admission_review,
    cluster_cache,
    lease,
    managed_node,
    new_pod,
    seen,
)
from tests.unit.webhook.client import admit, patched, webhook_client
from webhook.cache import Resource

ENFORCING = {"dryRun": False}


def _cpu_limits(pod: dict[str, Any]) -> dict[str, str | None]:
    spec = pod["spec"]
    return {
        c["name"]: (c.get("resources") or {}).get("limits", {}).get("cpu")
        for c in [*spec["containers"], *spec.get("initContainers", [])]
    }


SCENARIOS = {
    "seeds-request-times-initial-multiplier": ({}, {}, {"app": "1"}),
    "unmanaged-namespace": (
        {"namespaces": [namespace("team-a", labels={})]},
        {},
        {"app": None},
    ),
    "namespace-mode-not-managed-fails-closed": (
        {"namespaces": [namespace("team-a", labels={"kube-headroom.dev/mode": "Managed"})]},
        {},
        {"app": None},
    ),
    "excluded-namespace": (
        {"namespaces": [namespace("kube-system")]},
        {"namespace": "kube-system"},
        {"app": None},
    ),
    "pod-opted-out": ({}, {"labels": {"kube-headroom.dev/mode": "unmanaged"}}, {"app": None}),
    "dry-run": ({"config": headroom_config(spec={})}, {}, {"app": None}),
    "webhook-disabled": (
        {"config": headroom_config(spec={"dryRun": False, "webhook": {"enabled": False}})},
        {},
        {"app": None},
    ),
    "existing-limit-untouched": (
        {},
        {"containers": [container(cpu_limit="700m")]},
        {"app": "700m"},
    ),
    "restart-container-resize-policy": (
        {},
        {"containers": [container(cpu_resize_policy="RestartContainer")]},
        {"app": None},
    ),
    "excluded-owner": (
        {
            "config": headroom_config(
                spec={"dryRun": False, "excludedOwners": [{"kind": "Job", "apiGroup": "batch"}]}
            )
        },
        {"owners": [owner_ref("Job", "nightly", api_version="batch/v1")]},
        {"app": None},
    ),
    "best-effort-pod": (
        {},
        {"containers": [container(cpu_request=None, memory_request=None)]},
        {"app": None},
    ),
    "vpa-sets-limits": ({"vpas": [vpa()]}, {}, {"app": None}),
    "vpa-in-auto-mode-for-this-container": (
        {"vpas": [vpa(container_policies=[{"containerName": "app", "mode": "Auto"}])]},
        {},
        {"app": None},
    ),
    "vpa-requests-only": (
        {
            "vpas": [
                vpa(container_policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}])
            ]
        },
        {},
        {"app": "1"},
    ),
    "vpa-requests-only-seeded-from-its-target": (
        {
            "vpas": [
                vpa(
                    container_policies=[{"containerName": "*", "controlledValues": "RequestsOnly"}],
                    cpu_targets={"app": "1500m"},
                )
            ]
        },
        {},
        {"app": "3"},
    ),
    "vpa-update-mode-off": ({"vpas": [vpa(update_mode="Off")]}, {}, {"app": "1"}),
    "vpa-targets-another-deployment": ({"vpas": [vpa(target_name="api")]}, {}, {"app": "1"}),
    "vpa-in-another-namespace": ({"vpas": [vpa(namespace="team-b")]}, {}, {"app": "1"}),
    "clamped-by-max-cpu-annotation": ({}, {"max_cpu": "700m"}, {"app": "700m"}),
    "clamped-by-limit-range-max": (
        {"limit_ranges": [limit_range(container_max_cpu="800m")]},
        {},
        {"app": "800m"},
    ),
    "clamped-by-max-multiplier": (
        {"config": headroom_config(spec={"dryRun": False, "maxMultiplier": "1.5"})},
        {},
        {"app": "750m"},
    ),
    "custom-initial-multiplier": (
        {"config": headroom_config(spec={"dryRun": False, "webhook": {"initialMultiplier": "4"}})},
        {},
        {"app": "2"},
    ),
    "quantized-without-exceeding-the-bound": (
        {},
        {"containers": [container(cpu_request="333m")]},
        {"app": "660m"},
    ),
    "limit-range-at-request-seeds-nothing": (
        {"limit_ranges": [limit_range(container_max_cpu="500m")]},
        {},
        {"app": None},
    ),
    "every-container-and-sidecar-without-a-limit": (
        {},
        {
            "containers": [
                container("app", cpu_request="500m"),
                container("helper", cpu_request="250m", cpu_limit="300m"),
                container("logger", cpu_request=None),
            ],
            "init_containers": [
                container("setup", cpu_request="1"),
                container("proxy", cpu_request="100m", restart_policy="Always"),
            ],
        },
        {"app": "1", "helper": "300m", "logger": None, "setup": None, "proxy": "200m"},
    ),
    # An excluded container keeps what it has, or nothing; max-cpu bounds the rest alone.
    "excluded-containers-left-as-they-are": (
        {
            "config": headroom_config(
                spec={"dryRun": False, "excludedContainers": ["istio-proxy", "envoy"]}
            )
        },
        {
            "containers": [container("app", cpu_request="500m"), container("envoy")],
            "init_containers": [
                container("istio-proxy", cpu_request="100m", restart_policy="Always")
            ],
            "max_cpu": "800m",
        },
        {"app": "800m", "envoy": None, "istio-proxy": None},
    ),
}


@pytest.mark.parametrize(
    ("cluster_args", "pod_args", "expected"),
    list(SCENARIOS.values()),
    ids=list(SCENARIOS),
)
def test_birth_limit_seeding(
    cluster_args: dict[str, Any], pod_args: dict[str, Any], expected: dict[str, str | None]
) -> None:
    cluster_args = {"config": headroom_config(spec=ENFORCING), **cluster_args}
    client = webhook_client(cluster_cache(**cluster_args))
    pod = new_pod(**pod_args)
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert response["allowed"] is True
    result = patched(pod, response)
    assert _cpu_limits(result) == expected
    if expected == _cpu_limits(pod):
        assert "patch" not in response, "no patch when nothing changes"


def test_patch_changes_nothing_but_cpu_limits() -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod(containers=[container(memory_limit="256Mi")])
    response = admit(client, "/mutate/pods", admission_review(pod))
    expected = copy.deepcopy(pod)
    expected["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1"
    assert patched(pod, response) == expected


def test_container_without_resources_block_gets_one() -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod()
    del pod["spec"]["containers"][0]["resources"]["limits"]
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": "1"}


def test_namespace_missing_from_the_object_comes_from_the_request() -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod()
    del pod["metadata"]["namespace"]
    response = admit(client, "/mutate/pods", admission_review(pod, namespace="team-a"))
    assert _cpu_limits(patched(pod, response)) == {"app": "1"}


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_only_create_is_mutated(operation: str) -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod()
    response = admit(client, "/mutate/pods", admission_review(pod, operation=operation, old=pod))
    assert response == {"uid": response["uid"], "allowed": True}


def test_invalid_max_cpu_annotation_is_ignored_with_a_warning() -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod(max_cpu="lots")
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": "1"}
    assert any("kube-headroom.dev/max-cpu" in warning for warning in response["warnings"])


def test_unknown_namespace_is_read_directly() -> None:
    api = FakeKube({"/api/v1/namespaces/team-b": namespace("team-b")})
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING), api=api))
    pod = new_pod(namespace="team-b")
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": "1"}
    assert api.requests == [("/api/v1/namespaces/team-b", {})]


def test_when_the_cache_cannot_answer_the_pod_is_admitted_unchanged_with_a_warning() -> None:
    api = FakeKube({"/api/v1/namespaces/team-b": ConnectionError("connection refused")})
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING), api=api))
    response = admit(client, "/mutate/pods", admission_review(new_pod(namespace="team-b")))
    assert response["allowed"] is True
    assert "patch" not in response
    [warning] = response["warnings"]
    assert warning.startswith("Headroom did not seed a CPU limit: cannot read namespace team-b")


def test_a_failing_handler_admits_the_pod_with_a_warning() -> None:
    client = webhook_client(BrokenCache())
    response = admit(client, "/mutate/pods", admission_review(new_pod()))
    assert response["allowed"] is True
    assert "patch" not in response
    assert response["warnings"] == [
        "Headroom did not seed a CPU limit: internal error, see the webhook logs"
    ]


def test_an_invalid_quantity_admits_the_pod_unseeded_saying_why() -> None:
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING)))
    pod = new_pod(containers=[container(cpu_request="not-a-quantity")])
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert response["allowed"] is True
    assert "patch" not in response
    assert response["warnings"] == [
        "Headroom did not seed a CPU limit: quantity 'not-a-quantity' does not start with a number"
    ]


VPA_LIST = "/apis/autoscaling.k8s.io/v1/namespaces/team-a/verticalpodautoscalers"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param({"items": [vpa()]}, None, id="a-vpa-that-sets-limits"),
        pytest.param({"items": []}, "1", id="no-vpa"),
        pytest.param(None, "1", id="no-vpa-api"),
    ],
)
def test_before_vpas_are_listed_the_namespace_is_read_directly(
    answer: dict[str, Any] | None, expected: str | None
) -> None:
    api = FakeKube({VPA_LIST: answer} if answer is not None else {})
    cache = cluster_cache(config=headroom_config(spec=ENFORCING), api=api, unsynced=[Resource.VPAS])
    pod = new_pod()
    response = admit(webhook_client(cache), "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": expected}
    assert (VPA_LIST, {}) in api.requests


RS_PATH = "/apis/apps/v1/namespaces/team-a/replicasets/web-5d8f7c9b4"
JOB = owner_ref("Job", "nightly-29416740", api_version="batch/v1")
CRONJOB = owner_ref("CronJob", "nightly", api_version="batch/v1")
ROLLOUT = owner_ref("Rollout", "web", api_version="argoproj.io/v1alpha1")


@pytest.mark.parametrize(
    ("target", "pod_owner", "replica_sets", "jobs", "api", "expected"),
    [
        # A VPA that sets limits, on the pod's controller's controller: left to VPA.
        pytest.param(
            vpa(target_kind="CronJob", target_name="nightly"),
            JOB,
            [],
            [controlled("nightly-29416740", owners=[CRONJOB])],
            {},
            None,
            id="cronjob",
        ),
        pytest.param(
            vpa(target_kind="Rollout", target_name="web"),
            owner_ref(),
            [controlled(owners=[ROLLOUT])],
            [],
            {},
            None,
            id="scalable-custom-resource",
        ),
        # A ReplicaSet created a moment ago, not in the cache yet: read directly.
        pytest.param(vpa(), owner_ref(), [], [], {RS_PATH: controlled()}, None, id="read-directly"),
        # Gone, or its controller unknown: the VPA does not target the pod.
        pytest.param(vpa(), owner_ref(), [], [], {}, "1", id="gone"),
        pytest.param(vpa(), owner_ref(), [controlled(owners=[])], [], {}, "1", id="bare"),
    ],
)
def test_which_vpa_targets_a_pod_follows_its_chain_of_controllers(
    target: dict[str, Any],
    pod_owner: dict[str, Any],
    replica_sets: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    api: dict[str, Any],
    expected: str | None,
) -> None:
    fake = FakeKube(api)
    cache = cluster_cache(
        config=headroom_config(spec=ENFORCING),
        vpas=[target],
        replica_sets=replica_sets,
        jobs=jobs,
        api=fake,
    )
    pod = new_pod(owners=[pod_owner])
    response = admit(webhook_client(cache), "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": expected}
    assert any(path == RS_PATH for path, _ in fake.requests) is (not replica_sets and not jobs)


def test_a_controller_that_cannot_be_read_leaves_the_pod_unseeded_saying_why() -> None:
    fake = FakeKube({RS_PATH: ApiUnavailable("connection refused")})
    cache = cluster_cache(
        config=headroom_config(spec=ENFORCING), vpas=[vpa()], replica_sets=[], api=fake
    )
    response = admit(webhook_client(cache), "/mutate/pods", admission_review(new_pod()))
    assert "patch" not in response
    assert response["warnings"] == [
        "Headroom did not seed a CPU limit: cannot read ReplicaSet team-a/web-5d8f7c9b4: "
        "connection refused"
    ]


POOLS = {
    "dryRun": False,
    "nodePools": [
        {"name": "web", "nodeSelector": {"matchLabels": {"pool": "web"}}, "initialMultiplier": "4"},
        {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "dryRun": True},
    ],
}


@pytest.mark.parametrize(
    ("node_selector", "expected"),
    [
        pytest.param({"pool": "web"}, {"app": "2"}, id="pools-initial-multiplier"),
        pytest.param({"pool": "batch"}, {"app": None}, id="pool-in-dry-run"),
        pytest.param({"zone": "a"}, {"app": "1"}, id="pool-unknown-uses-top-level"),
        pytest.param(None, {"app": None}, id="may-land-in-the-dry-run-pool"),
    ],
)
def test_birth_limits_follow_the_pool_the_pod_will_land_in(
    node_selector: dict[str, str] | None, expected: dict[str, str | None]
) -> None:
    nodes = [
        managed_node("web-1", labels={"pool": "web"}),
        managed_node("batch-1", labels={"pool": "batch"}),
        managed_node("plain-1", labels={"zone": "a"}),
    ]
    client = webhook_client(cluster_cache(config=headroom_config(spec=POOLS), nodes=nodes))
    pod = new_pod(node_selector=node_selector)
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == expected


def _pod_level_limit(pod: dict[str, Any]) -> str | None:
    limits: dict[str, str] = pod["spec"].get("resources", {}).get("limits", {})
    return limits.get("cpu")


SERVER_1_37 = {"/version": {"gitVersion": "v1.37.2"}}


@pytest.mark.parametrize(
    ("version", "resources", "expected"),
    [
        pytest.param("v1.37.2", pod_resources(), "2", id="seeded-at-pod-level"),
        pytest.param(
            "v1.37.2",
            pod_resources(memory_limit="512Mi"),
            "2",
            id="beside-a-pod-level-memory-limit",
        ),
        pytest.param("v1.36.0", pod_resources(), "2", id="on-by-default-from-1.36"),
        pytest.param("v1.35.4", pod_resources(), None, id="not-where-it-could-never-change"),
        pytest.param("v1.37.2", pod_resources(cpu_limit="3"), "3", id="own-limit-kept"),
        pytest.param(
            "v1.37.2",
            pod_resources(cpu_limit="1", memory_limit="256Mi"),
            "1",
            id="guaranteed-at-pod-level",
        ),
    ],
)
def test_pods_with_pod_level_resources_get_a_pod_level_birth_limit(
    version: str, resources: dict[str, dict[str, str]], expected: str | None
) -> None:
    api = FakeKube({"/version": {"gitVersion": version}})
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING), api=api))
    pod = new_pod(resources=resources, containers=[container(cpu_request="300m")])
    response = admit(client, "/mutate/pods", admission_review(pod))
    result = patched(pod, response)
    assert _pod_level_limit(result) == expected
    # The containers keep exactly what they had.
    assert result["spec"]["containers"] == pod["spec"]["containers"]


def test_the_server_version_is_read_once() -> None:
    api = FakeKube(SERVER_1_37)
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING), api=api))
    for _ in range(3):
        admit(client, "/mutate/pods", admission_review(new_pod(resources=pod_resources())))
    assert api.requests == [("/version", {})]


def test_an_unreadable_server_version_admits_the_pod_unchanged_with_a_warning() -> None:
    api = FakeKube({"/version": ConnectionError("connection refused")})
    client = webhook_client(cluster_cache(config=headroom_config(spec=ENFORCING), api=api))
    response = admit(client, "/mutate/pods", admission_review(new_pod(resources=pod_resources())))
    assert "patch" not in response
    [warning] = response["warnings"]
    assert warning.startswith("Headroom did not seed a CPU limit: cannot read the API server")


UNMANAGED_NODES = {
    "excluded-by-selector": managed_node("static-1", labels={"cpu-manager-policy": "static"}),
    "kubelet-1.34": managed_node("old-1", kubelet_version="v1.34.2"),
    "windows": managed_node(
        "win-1", labels={"kubernetes.io/os": "windows"}, operating_system="windows"
    ),
}
EXCLUDING = {
    "dryRun": False,
    "excludedNodeSelector": {"matchLabels": {"cpu-manager-policy": "static"}},
}


def _pinned(how: str, node_name: str) -> dict[str, Any]:
    """A pod spec's constraint that leaves it one node: by nodeSelector or node affinity."""
    if how == "node-selector":
        return {"nodeSelector": {"kubernetes.io/hostname": node_name}}
    expression = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
    term = {"matchExpressions": [expression]}
    required = {"nodeSelectorTerms": [term]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


def _unseeded(registry: CollectorRegistry, reason: str) -> float | None:
    return registry.get_sample_value("headroom_webhook_unseeded_total", {"reason": reason})


@pytest.mark.parametrize("how", ["node-selector", "node-affinity"])
@pytest.mark.parametrize("kind", list(UNMANAGED_NODES))
def test_a_pod_bound_for_a_node_headroom_leaves_alone_is_born_unseeded(kind: str, how: str) -> None:
    unmanaged = UNMANAGED_NODES[kind]
    nodes = [managed_node("node-1"), unmanaged]
    registry = CollectorRegistry()
    cache = cluster_cache(config=headroom_config(spec=EXCLUDING), nodes=nodes)
    client = webhook_client(cache, registry=registry)
    for target, expected in ((unmanaged["metadata"]["name"], None), ("node-1", "1")):
        pod = new_pod()
        pod["spec"].update(_pinned(how, target))
        response = admit(client, "/mutate/pods", admission_review(pod))
        assert _cpu_limits(patched(pod, response)) == {"app": expected}
        assert "warnings" not in response
    assert _unseeded(registry, "unmanaged-node") == 1


def test_a_pod_that_may_land_on_any_node_is_seeded_only_if_every_node_is_managed() -> None:
    registry = CollectorRegistry()
    cache = cluster_cache(config=headroom_config(spec=EXCLUDING), nodes=[managed_node("node-1")])
    client = webhook_client(cache, registry=registry)
    assert _cpu_limits(
        patched(new_pod(), admit(client, "/mutate/pods", admission_review(new_pod())))
    ) == {"app": "1"}
    seen(cache, Resource.NODES, UNMANAGED_NODES["windows"])
    response = admit(client, "/mutate/pods", admission_review(new_pod()))
    assert "patch" not in response
    # Unless it cannot go there: Windows nodes are commonly tainted, and the pod does not
    # tolerate it.
    seen(
        cache,
        Resource.NODES,
        managed_node(
            "win-1",
            labels={"kubernetes.io/os": "windows"},
            taints=[{"key": "os", "value": "windows", "effect": "NoSchedule"}],
        ),
    )
    response = admit(client, "/mutate/pods", admission_review(new_pod()))
    assert _cpu_limits(patched(new_pod(), response)) == {"app": "1"}
    assert _unseeded(registry, "unmanaged-node") == 1


LIVE_FOR = 15


@pytest.mark.parametrize(
    ("leases", "seen_for", "reason"),
    [
        pytest.param(None, 0.0, None, id="live"),
        pytest.param([], 0.0, "no-reconciler", id="no-lease"),
        pytest.param([lease(holder="")], 0.0, "no-reconciler", id="released"),
        pytest.param(
            [lease(renewed=NOW - timedelta(seconds=LIVE_FOR + 1))],
            0.0,
            "no-reconciler",
            id="expired",
        ),
        pytest.param(None, LIVE_FOR + 1.0, "no-reconciler", id="not-renewed-since-seen"),
        pytest.param(None, 0.0, None, id="renewed"),
    ],
)
def test_a_pod_created_while_no_reconciler_is_live_is_born_unseeded(
    leases: list[dict[str, Any]] | None, seen_for: float, reason: str | None
) -> None:
    now = [0.0]
    registry = CollectorRegistry()
    cache = cluster_cache(
        config=headroom_config(spec=ENFORCING), leases=leases, clock=lambda: now[0]
    )
    now[0] = seen_for
    client = webhook_client(cache, registry=registry)
    pod = new_pod()
    response = admit(client, "/mutate/pods", admission_review(pod))
    assert _cpu_limits(patched(pod, response)) == {"app": None if reason else "1"}
    if reason is not None:
        assert _unseeded(registry, reason) == 1


def test_a_renewal_seen_keeps_the_reconciler_live() -> None:
    now = [0.0]
    cache = cluster_cache(config=headroom_config(spec=ENFORCING), clock=lambda: now[0])
    client = webhook_client(cache)
    now[0] = LIVE_FOR - 1.0
    seen(cache, Resource.LEASE, lease(renewed=NOW + timedelta(seconds=1)))
    now[0] = LIVE_FOR + 1.0
    assert _cpu_limits(
        patched(new_pod(), admit(client, "/mutate/pods", admission_review(new_pod())))
    ) == {"app": "1"}


@pytest.mark.parametrize("resource", [Resource.NODES, Resource.LEASE])
def test_before_nodes_and_the_lease_are_listed_nothing_is_seeded_with_a_warning(
    resource: Resource,
) -> None:
    cache = cluster_cache(config=headroom_config(spec=ENFORCING), unsynced=[resource])
    response = admit(webhook_client(cache), "/mutate/pods", admission_review(new_pod()))
    assert "patch" not in response
    [warning] = response["warnings"]
    assert warning.startswith("Headroom did not seed a CPU limit: the ")
    assert "not listed yet" in warning


def test_why_a_pod_was_born_unseeded_is_logged_at_debug_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="webhook.app")
    nodes = [managed_node("node-1"), UNMANAGED_NODES["windows"]]
    cache = cluster_cache(config=headroom_config(spec=ENFORCING), nodes=nodes)
    admit(webhook_client(cache), "/mutate/pods", admission_review(new_pod()))
    assert [record.getMessage() for record in caplog.records] == [
        "no birth limit for Pod team-a/web-abcde: it may land on node win-1, which Headroom "
        "does not manage (windows-node)"
    ]
