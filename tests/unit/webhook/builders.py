"""Builders for AdmissionReviews, new pods and a seeded cluster cache; a fake API reader."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from app.core.config import Settings
from app.core.labels import LEASE_NAME
from app.core.nodefeatures import POD_LEVEL_RESIZE
from app.core.views import object_key
from app.io.http import JSON, ApiError, ApiResponse, Request
from app.io.kubeconfig import DEFAULT_LEASE_NAMESPACE
from tests.unit.app.builders import controlled, headroom_config, namespace, node, pod
from webhook.cache import AdmissionCache, Resource

Obj = dict[str, Any]

# The wall clock the caches built here read; their monotonic clock stands still at 0.
NOW: Final = datetime(2030, 1, 1, tzinfo=UTC)

GVK = {
    "Pod": {"group": "", "version": "v1", "kind": "Pod"},
    "ResourceQuota": {"group": "", "version": "v1", "kind": "ResourceQuota"},
    "Namespace": {"group": "", "version": "v1", "kind": "Namespace"},
    "HeadroomConfig": {
        "group": "kube-headroom.dev",
        "version": "v1alpha1",
        "kind": "HeadroomConfig",
    },
}


def admission_review(
    obj: Mapping[str, Any] | None,
    *,
    kind: str | None = None,
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    namespace: str | None = None,
    name: str | None = None,
    uid: str | None = None,
    dry_run: bool = False,
) -> Obj:
    """An AdmissionReview v1 request as the API server sends it; fields default from ``obj``."""
    source = obj if obj is not None else old or {}
    metadata = source.get("metadata") or {}
    kind = kind or source.get("kind") or "Pod"
    request: Obj = {
        "uid": uid or str(uuid.uuid4()),
        "kind": GVK[kind],
        "resource": {
            "group": GVK[kind]["group"],
            "version": GVK[kind]["version"],
            "resource": kind.lower() + "s",
        },
        "requestKind": GVK[kind],
        "operation": operation,
        "userInfo": {"username": "tester", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": None,
    }
    ns = namespace if namespace is not None else metadata.get("namespace")
    if ns:
        request["namespace"] = ns
    if name is not None or metadata.get("name"):
        request["name"] = name if name is not None else metadata["name"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def new_pod(
    *,
    namespace: str = "team-a",
    containers: Sequence[Obj] | None = None,
    init_containers: Sequence[Obj] = (),
    labels: Mapping[str, str] | None = None,
    max_cpu: str | None = None,
    owners: Sequence[Obj] | None = None,
    resources: Mapping[str, Mapping[str, str]] | None = None,
    node_selector: Mapping[str, str] | None = None,
) -> Obj:
    """A pod as a CREATE admission carries it: unbound, no status, no uid yet."""
    obj = pod(
        "web-abcde",
        namespace=namespace,
        node=None,
        containers=containers,
        init_containers=init_containers,
        labels=labels,
        max_cpu=max_cpu,
        owners=owners,
        qos_class=None,
        generation=None,
        resources=resources,
        node_selector=node_selector,
    )
    del obj["metadata"]["uid"]
    obj["status"] = {}
    return obj


def lease(*, holder: str = "reconciler-0", renewed: datetime = NOW, seconds: int = 15) -> Obj:
    """The reconciler's Lease as its elector writes it."""
    spec: Obj = {
        "leaseDurationSeconds": seconds,
        "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    if holder:
        spec["holderIdentity"] = holder
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": DEFAULT_LEASE_NAMESPACE},
        "spec": spec,
    }


def managed_node(
    name: str = "node-1", *, labels: Mapping[str, str] | None = None, **kwargs: Any
) -> Obj:
    """A node Headroom manages unless ``kwargs`` say otherwise, able to resize pod-level
    resources too; ``labels`` add to the usual ones."""
    usual = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": name}
    return node(
        name, labels={**usual, **(labels or {})}, declared_features=[POD_LEVEL_RESIZE], **kwargs
    )


def cluster_cache(
    *,
    namespaces: Sequence[Obj] = (),
    quotas: Sequence[Obj] = (),
    limit_ranges: Sequence[Obj] = (),
    vpas: Sequence[Obj] = (),
    replica_sets: Sequence[Obj] | None = None,
    jobs: Sequence[Obj] = (),
    nodes: Sequence[Obj] | None = None,
    leases: Sequence[Obj] | None = None,
    config: Obj | None = None,
    api: "FakeKube | None" = None,
    unsynced: Sequence[Resource] = (),
    clock: Callable[[], float] = lambda: 0.0,
) -> AdmissionCache:
    """A cache holding exactly these objects (by default the managed ``team-a``, the
    default pod's ReplicaSet, one managed node and a live reconciler's Lease).

    Every resource counts as listed except those in ``unsynced``.
    """
    cache = AdmissionCache(
        api=api or FakeKube(),
        lease_namespace=DEFAULT_LEASE_NAMESPACE,
        clock=clock,
        wall_clock=lambda: NOW,
    )
    contents: dict[Resource, Sequence[Obj]] = {
        Resource.NAMESPACES: namespaces or [namespace("team-a")],
        Resource.RESOURCE_QUOTAS: quotas,
        Resource.LIMIT_RANGES: limit_ranges,
        Resource.VPAS: vpas,
        Resource.REPLICA_SETS: [controlled()] if replica_sets is None else replica_sets,
        Resource.JOBS: jobs,
        Resource.NODES: [managed_node()] if nodes is None else nodes,
        Resource.CONFIG: [config or headroom_config(spec={"dryRun": False})],
        Resource.LEASE: [lease()] if leases is None else leases,
    }
    for resource, objects in contents.items():
        if resource not in unsynced:
            listed(cache, resource, objects)
    return cache


def listed(cache: AdmissionCache, resource: Resource, objects: Sequence[Obj]) -> None:
    """Seed one resource as its reflector's initial list would, and count it as synced."""
    for obj in objects:
        seen(cache, resource, obj)
    cache.reflectors[resource].synced.set()


def seen(cache: AdmissionCache, resource: Resource, obj: Obj, *, deleted: bool = False) -> None:
    """Apply one watch event for ``obj``: added or changed, or ``deleted``."""
    apply = {
        Resource.NAMESPACES: cache.cluster.apply_namespace,
        Resource.RESOURCE_QUOTAS: cache.cluster.apply_quota,
        Resource.LIMIT_RANGES: cache.cluster.apply_limit_range,
        Resource.VPAS: cache.cluster.apply_vpa,
        Resource.REPLICA_SETS: cache.cluster.apply_replica_set,
        Resource.JOBS: cache.cluster.apply_job,
        Resource.NODES: cache.cluster.apply_node,
        Resource.CONFIG: cache.cluster.apply_config,
        Resource.LEASE: cache.apply_lease,
    }[resource]
    apply(object_key(obj), None if deleted else obj)


class BrokenCache(AdmissionCache):
    """A cache with a bug: every answer raises something the handlers do not expect.

    Nothing in the real cache does this on purpose; it stands for a defect, to prove the
    endpoints answer one in-band.
    """

    def __init__(self) -> None:
        super().__init__(api=FakeKube(), lease_namespace=DEFAULT_LEASE_NAMESPACE)

    async def settings(self) -> Settings:
        raise RuntimeError("a defect")


class FakeKube:
    """Answers GETs from a dict of path -> object and serves scripted watch streams.

    A path mapped to an exception raises it; one mapped to a function is called with the
    query parameters. ``watches`` holds, per path, a queue of streams; each stream is a
    list of events or an exception to raise. Every request is recorded with its query,
    a watch's with ``watch=true``.
    """

    def __init__(
        self,
        objects: Mapping[str, Obj | Exception | Callable[[Mapping[str, str]], Obj]] | None = None,
        watches: Mapping[str, list[list[Obj] | Exception]] | None = None,
    ) -> None:
        self.objects = dict(objects or {})
        self.watches = {path: list(streams) for path, streams in (watches or {}).items()}
        self.requests: list[tuple[str, Mapping[str, str]]] = []

    async def get(
        self, path: str, *, params: Mapping[str, str] | None = None, accept: str = JSON
    ) -> Obj:
        self.requests.append((path, dict(params or {})))
        return self._answer(path, params or {})

    async def request(self, request: Request) -> ApiResponse:
        assert request.method == "GET"
        path, params = request.path, dict(request.query)
        self.requests.append((path, params))
        try:
            return ApiResponse(code=200, body=orjson.dumps(self._answer(path, params)))
        except ApiError as err:
            return ApiResponse(code=err.status, body=orjson.dumps({"message": err.message}))

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        timeout_seconds: int,
        accept: str = JSON,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.requests.append((path, {**dict(query), "watch": "true"}))
        streams = self.watches.get(path)
        if not streams:
            # Nothing scripted: behave like a quiet watch the test cancels.
            await asyncio.Event().wait()
        stream = streams.pop(0) if streams else []
        if isinstance(stream, Exception):
            raise stream
        yield _lines(stream)

    def _answer(self, path: str, params: Mapping[str, str]) -> Obj:
        found = self.objects.get(path)
        if found is None:
            raise ApiError(status=404, reason="NotFound", message=f"{path} not found")
        if isinstance(found, Exception):
            raise found
        if callable(found):
            return found(params)
        return found


async def _lines(events: Sequence[Obj]) -> AsyncIterator[bytes]:
    for event in events:
        yield orjson.dumps(event) + b"\n"
