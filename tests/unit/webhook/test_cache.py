import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest

from app.core.birth import Unseeded
from app.core.config import DEFAULT_SETTINGS
from app.core.limitrange import NO_LIMIT_RANGE_CAPS
from app.core.placement import placement
from app.io.http import ApiError
from app.io.kubeconfig import DEFAULT_LEASE_NAMESPACE
from tests.unit.app.builders import headroom_config, limit_range, namespace, resource_quota, vpa
from tests.unit.webhook.builders import (
    NOW,
    FakeKube,
    cluster_cache,
    lease,
    listed,
    managed_node,
    seen,
)
from webhook.cache import AdmissionCache, Resource, Unavailable

CONFIG_PATH = "/apis/kube-headroom.dev/v1alpha1/headroomconfigs"
LEASES_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{DEFAULT_LEASE_NAMESPACE}/leases"


def _answer(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_namespace_events_update_labels() -> None:
    cache = cluster_cache(namespaces=[namespace("a", labels={"x": "1"})])
    seen(cache, Resource.NAMESPACES, namespace("a", labels={"x": "2"}))
    seen(cache, Resource.NAMESPACES, namespace("b", labels={}))
    assert _answer(cache.namespace_labels("a"))["x"] == "2"
    assert "x" not in _answer(cache.namespace_labels("b"))
    seen(cache, Resource.NAMESPACES, namespace("b"), deleted=True)
    with pytest.raises(Unavailable, match="namespace b not found"):
        _answer(cache.namespace_labels("b"))


def test_only_quotas_holding_limits_cpu_are_kept() -> None:
    cache = cluster_cache(
        quotas=[
            resource_quota("z", hard={"limits.cpu": "1"}),
            resource_quota("a", hard={"limits.cpu": "1", "requests.cpu": "1"}),
            resource_quota("r", hard={"requests.cpu": "1"}),
            resource_quota("other-ns", namespace="team-b", hard={"limits.cpu": "1"}),
        ]
    )
    assert _answer(cache.limit_quota_names("team-a")) == ["a", "z"]
    seen(cache, Resource.RESOURCE_QUOTAS, resource_quota("z", hard={"pods": "3"}))
    seen(cache, Resource.RESOURCE_QUOTAS, resource_quota("a"), deleted=True)
    seen(cache, Resource.RESOURCE_QUOTAS, resource_quota("r", hard={"limits.cpu": "2"}))
    assert _answer(cache.limit_quota_names("team-a")) == ["r"]
    assert _answer(cache.limit_quota_names("nowhere")) == []


def test_limit_range_caps_follow_events() -> None:
    cache = cluster_cache(limit_ranges=[limit_range("a", container_max_cpu="2")])
    assert _answer(cache.limit_range_caps("team-a")).container_max_m == 2000
    seen(cache, Resource.LIMIT_RANGES, limit_range("b", container_max_cpu="1500m"))
    assert _answer(cache.limit_range_caps("team-a")).container_max_m == 1500
    seen(cache, Resource.LIMIT_RANGES, limit_range("b"), deleted=True)
    assert _answer(cache.limit_range_caps("team-a")).container_max_m == 2000
    seen(cache, Resource.LIMIT_RANGES, limit_range("a"), deleted=True)
    assert _answer(cache.limit_range_caps("team-a")) == NO_LIMIT_RANGE_CAPS
    assert _answer(cache.limit_range_caps("team-b")) == NO_LIMIT_RANGE_CAPS


def test_vpa_events_keep_only_what_the_gate_reads() -> None:
    cache = cluster_cache(vpas=[vpa("a"), vpa("b", namespace="team-b")])
    first = vpa("a", update_mode="Off", cpu_targets={"app": "1500m"})
    first["status"]["recommendation"]["containerRecommendations"].append(
        {"containerName": "memory-only", "target": {"memory": "1Gi"}}
    )
    first["status"]["conditions"] = [{"type": "RecommendationProvided", "status": "True"}]
    seen(cache, Resource.VPAS, first)
    assert _answer(cache.vpas("team-a")) == [
        {
            "metadata": {"namespace": "team-a", "name": "a"},
            "spec": {
                "targetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "updatePolicy": {"updateMode": "Off"},
            },
            "status": {
                "recommendation": {
                    "containerRecommendations": [
                        {
                            "containerName": "app",
                            "target": {"cpu": "1500m"},
                            "upperBound": {"cpu": "1500m"},
                        },
                        {"containerName": "memory-only"},
                    ]
                }
            },
        }
    ]
    seen(cache, Resource.VPAS, vpa("a"), deleted=True)
    assert _answer(cache.vpas("team-a")) == []
    assert len(_answer(cache.vpas("team-b"))) == 1


def test_without_the_vpa_api_there_are_no_vpas_and_the_cache_is_ready() -> None:
    lists = {
        "/api/v1/namespaces": _empty_list(),
        "/api/v1/resourcequotas": _empty_list(),
        "/api/v1/limitranges": _empty_list(),
        "/api/v1/nodes": _empty_list(),
        CONFIG_PATH: _empty_list(),
        LEASES_PATH: _empty_list(),
    }
    api = FakeKube(lists)
    cache = AdmissionCache(api=api, lease_namespace=DEFAULT_LEASE_NAMESPACE)

    async def scenario() -> bool:
        await cache.start()
        try:
            for _ in range(1000):
                if cache.synced():
                    return True
                await asyncio.sleep(0.005)
            return False
        finally:
            await cache.stop()

    assert asyncio.run(scenario())
    assert _answer(cache.vpas("team-a")) == []
    assert ("/apis/autoscaling.k8s.io/v1/verticalpodautoscalers", {"limit": "500"}) in api.requests


def test_config_events_and_defaults() -> None:
    cache = cluster_cache(config=headroom_config(spec={"quantum": "50m"}))
    assert _answer(cache.settings()).quantum_m == 50
    seen(cache, Resource.CONFIG, headroom_config(), deleted=True)
    assert _answer(cache.settings()) == DEFAULT_SETTINGS
    seen(cache, Resource.CONFIG, headroom_config(spec={"maxMultiplier": "1000"}))
    with pytest.raises(
        Unavailable, match=r"HeadroomConfig cluster is invalid: spec\.maxMultiplier"
    ):
        _answer(cache.settings())


def test_an_empty_config_list_means_defaults() -> None:
    cache = AdmissionCache(api=FakeKube(), lease_namespace=DEFAULT_LEASE_NAMESPACE)
    listed(cache, Resource.CONFIG, [])
    assert _answer(cache.settings()) == DEFAULT_SETTINGS


FALLBACKS = {
    "config-read-directly": (
        Resource.CONFIG,
        {f"{CONFIG_PATH}/cluster": headroom_config(spec={"quantum": "20m"})},
        lambda cache: cache.settings(),
        lambda settings: settings.quantum_m == 20,
    ),
    "absent-config-means-defaults": (
        Resource.CONFIG,
        {},
        lambda cache: cache.settings(),
        lambda settings: settings == DEFAULT_SETTINGS,
    ),
    "limit-ranges-listed-directly": (
        Resource.LIMIT_RANGES,
        {"/api/v1/namespaces/team-a/limitranges": {"items": [limit_range(pod_max_cpu="3")]}},
        lambda cache: cache.limit_range_caps("team-a"),
        lambda caps: caps.pod_max_m == 3000,
    ),
    "quotas-listed-directly": (
        Resource.RESOURCE_QUOTAS,
        {
            "/api/v1/namespaces/team-a/resourcequotas": {
                "items": [resource_quota("q", hard={"limits.cpu": "1"})]
            }
        },
        lambda cache: cache.limit_quota_names("team-a"),
        lambda names: names == ["q"],
    ),
}


@pytest.mark.parametrize(
    ("resource", "objects", "ask", "check"), list(FALLBACKS.values()), ids=list(FALLBACKS)
)
def test_before_the_initial_list_answers_come_from_a_direct_read(
    resource: Resource, objects: Mapping[str, Any], ask: Any, check: Any
) -> None:
    api = FakeKube(objects)
    cache = cluster_cache(api=api, unsynced=[resource])
    assert not cache.synced()
    assert cache.unsynced() == [str(resource)]
    assert check(_answer(ask(cache)))
    assert len(api.requests) == 1


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        pytest.param(
            ApiError(status=403, reason="Forbidden", message="no"),
            "cannot read HeadroomConfig cluster: 403 Forbidden: no",
            id="forbidden",
        ),
        pytest.param(OSError("refused"), "cannot read HeadroomConfig cluster: refused", id="io"),
    ],
)
def test_a_failed_direct_read_is_unavailable(failure: Exception, message: str) -> None:
    api = FakeKube({f"{CONFIG_PATH}/cluster": failure})
    cache = cluster_cache(api=api, unsynced=[Resource.CONFIG])
    with pytest.raises(Unavailable) as raised:
        _answer(cache.settings())
    assert str(raised.value) == message


def test_a_slow_direct_read_is_cut_short() -> None:
    class Slow(FakeKube):
        async def get(self, path: str, *, params: Mapping[str, str] | None = None) -> Any:
            await asyncio.sleep(5)

    cache = AdmissionCache(
        api=Slow(), lease_namespace=DEFAULT_LEASE_NAMESPACE, fallback_seconds=0.05
    )
    with pytest.raises(Unavailable, match=r"no answer in 0.05s"):
        _answer(cache.namespace_labels("team-a"))


def _empty_list(version: str = "1") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "items": []}


def test_watchers_list_in_pages_follow_events_and_relist_when_expired() -> None:
    pages = {
        "": {"metadata": {"continue": "p2", "resourceVersion": "5"}, "items": [namespace("a")]},
        "p2": {"metadata": {"resourceVersion": "5"}, "items": [namespace("b")]},
    }
    added = namespace("c")
    added["metadata"]["resourceVersion"] = "6"
    api = FakeKube(
        {
            "/api/v1/namespaces": lambda params: pages[params.get("continue", "")],
            "/api/v1/resourcequotas": _empty_list(),
            "/api/v1/limitranges": _empty_list(),
            CONFIG_PATH: _empty_list(),
        },
        watches={
            "/api/v1/namespaces": [
                [
                    {"type": "ADDED", "object": added},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}},
                ],
                ApiError(status=410, reason="Expired", message="too old"),
            ]
        },
    )
    cache = AdmissionCache(api=api, lease_namespace=DEFAULT_LEASE_NAMESPACE)

    async def scenario() -> list[tuple[str, Mapping[str, str]]]:
        await cache.start()
        try:
            for _ in range(2000):
                namespace_requests = [r for r in api.requests if r[0] == "/api/v1/namespaces"]
                if len(namespace_requests) >= 7 and cache.synced():
                    break
                await asyncio.sleep(0.005)
        finally:
            await cache.stop()
        return namespace_requests

    requests = asyncio.run(scenario())
    assert [
        (params.get("watch"), params.get("resourceVersion"), params.get("continue"))
        for _, params in requests[:7]
    ] == [
        (None, None, None),
        (None, None, "p2"),
        ("true", "5", None),
        ("true", "7", None),
        (None, None, None),
        (None, None, "p2"),
        ("true", "5", None),
    ]
    assert requests[0][1]["limit"] == "500"
    assert cache.synced()
    # The relist replaced the store: "c" came from a watch the new list does not hold.
    assert _answer(cache.namespace_labels("a"))
    assert _answer(cache.namespace_labels("b"))
    with pytest.raises(Unavailable):
        _answer(cache.namespace_labels("c"))


def test_config_watch_is_limited_to_the_singleton() -> None:
    api = FakeKube(
        {
            "/api/v1/namespaces": _empty_list(),
            "/api/v1/resourcequotas": _empty_list(),
            "/api/v1/limitranges": _empty_list(),
            CONFIG_PATH: _empty_list(),
        }
    )
    cache = AdmissionCache(api=api, lease_namespace=DEFAULT_LEASE_NAMESPACE)

    async def scenario() -> None:
        await cache.start()
        for _ in range(2000):
            if cache.synced():
                break
            await asyncio.sleep(0.005)
        await cache.stop()

    asyncio.run(scenario())
    config_requests = [params for path, params in api.requests if path == CONFIG_PATH]
    assert all(params["fieldSelector"] == "metadata.name=cluster" for params in config_requests)


def test_the_birth_limits_reach_is_remembered_only_until_a_node_changes() -> None:
    config = headroom_config(
        spec={"dryRun": False, "excludedNodeSelector": {"matchLabels": {"pool": "legacy"}}}
    )
    cache = cluster_cache(config=config)
    settings = _answer(cache.settings())
    anywhere = placement({})
    assert cache.birth_reach(settings, anywhere, pod_level=False) is None
    seen(cache, Resource.NODES, managed_node("node-1", labels={"pool": "legacy"}))
    unreached = cache.birth_reach(settings, anywhere, pod_level=False)
    assert unreached is not None
    assert unreached.reason is Unseeded.UNMANAGED_NODE
    seen(cache, Resource.NODES, managed_node("node-1"))
    assert cache.birth_reach(settings, anywhere, pod_level=False) is None
    seen(cache, Resource.NODES, managed_node("node-1"), deleted=True)
    unreached = cache.birth_reach(settings, anywhere, pod_level=False)
    assert unreached is not None
    assert unreached.reason is Unseeded.NO_NODE


def test_a_listed_lease_is_kept_when_the_list_ends() -> None:
    """The Lease's reflector lists it and, at the end of the list, forgets only what the
    list did not report: a live reconciler is live from the first list on."""
    api = FakeKube({LEASES_PATH: {"metadata": {"resourceVersion": "1"}, "items": [lease()]}})
    cache = AdmissionCache(
        api=api, lease_namespace=DEFAULT_LEASE_NAMESPACE, clock=lambda: 0.0, wall_clock=lambda: NOW
    )

    async def scenario() -> bool:
        task = asyncio.create_task(cache.reflectors[Resource.LEASE].run())
        try:
            await asyncio.wait_for(cache.reflectors[Resource.LEASE].synced.wait(), 5)
            return cache.reconciler_live()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    assert asyncio.run(scenario())
