"""What the admission handlers read of the cluster, kept current so no request waits on the
API server.

The shared cluster cache (`app.core.cluster`) holds namespace labels, which ResourceQuotas
hold ``limits.cpu``, the CPU caps of each namespace's LimitRanges, the
VerticalPodAutoscalers (their target and the policies that say whether they set limits),
the controllers of ReplicaSets and Jobs (which VPA targets a pod), the nodes (their gate
facts, pools and taints: where a new pod may land) and the HeadroomConfig ``cluster``;
the shared reflectors (`app.io.reflector`) list and watch each of them into it on the
event loop, as they do for the reconciler. One more reflector
watches the reconciler's Lease, which says whether a live reconciler will take over the
limits this webhook seeds (`app.core.birth`). The cache answers for a resource once its
reflector has synced; readiness waits for all nine. Where the VPA API is not installed,
there are no VPAs: that counts as listed, and the API is looked for again from time to
time.

When the cache cannot answer
----------------------------
Before a resource's initial list, or for a namespace not seen yet (one created a moment
ago), an answer comes from a direct read of the API server bounded by a short timeout.
When that fails too — API server unreachable, the read forbidden, or the stored
HeadroomConfig invalid — the cache raises ``Unavailable``. Nodes and the Lease have no
direct read: listing every node for one admission costs more than the answer is worth, and
until they are listed the webhook cannot tell where a pod may land or whether a reconciler
is live, so it raises ``Unavailable`` for them too. The handlers then:

- ``/mutate/pods`` admits the pod unchanged, with a warning that no limit was seeded. This
  is what failurePolicy Ignore does when the webhook is down, and the reconciler sets the
  limit later: a blind webhook never blocks pod creation.
- ``/validate/resourcequotas`` and ``/validate/namespaces`` admit the change, with an
  admission warning saying the check could not run and why. A wrong "allow" costs at most
  resize denials that the reconciler backs off from, counts as
  ``headroom_resizes_total{result="quota-denied"}`` and alerts on; a wrong "deny" would
  block every tenant's quota and namespace changes while the API server is unreachable
  for Headroom — including in namespaces Headroom does not manage, since it could not
  tell — which is worse than not running Headroom at all (design §9). It also matches
  failurePolicy Ignore on those webhooks, so a stopped and a blind webhook behave alike.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final, Protocol

from app.core import apipaths
from app.core.birth import NO_LIVE_RECONCILER, Unreached, birth_reach
from app.core.cluster import ClusterCache, Quiet
from app.core.config import Settings
from app.core.feeds import object_feed
from app.core.labels import CONFIG_NAME, LEASE_NAME
from app.core.lease import LeaseRecord, lease_live, lease_record
from app.core.limitrange import LimitRangeCaps, limit_range_caps
from app.core.owners import LOOKED_UP, controller_of, owner_chain
from app.core.placement import Placement
from app.core.pods import OwnerRef
from app.core.views import (
    DEFAULT_CONFIG,
    config_state,
    has_limits_cpu,
    labels,
    metadata,
    vpa_view,
)
from app.io.http import ApiError
from app.io.reflector import Kind, ListWatcher, Reflector, cache_reflectors

logger = logging.getLogger(__name__)

_NOT_FOUND: Final = 404


class Unavailable(Exception):
    """Neither the cache nor a direct read could answer; the message says why."""


class _NotFound(Unavailable):
    pass


class KubeReader(ListWatcher, Protocol):
    """The reflectors' lists and watches, and single reads for the direct answers."""

    async def get(
        self, path: str, *, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...


class Resource(StrEnum):
    """What the webhook watches, by the names readiness reports."""

    NAMESPACES = "namespaces"
    RESOURCE_QUOTAS = "resourcequotas"
    LIMIT_RANGES = "limitranges"
    VPAS = "verticalpodautoscalers"
    # Their controllers, for which VPA targets a pod (app.core.owners).
    REPLICA_SETS = "replicasets"
    JOBS = "jobs"
    NODES = "nodes"
    CONFIG = "headroomconfig"
    # Not a cluster cache kind: the reconciler's Lease.
    LEASE = "lease"


# Distinct answers remembered between node changes: a rollout's pods share theirs.
_REACH_MEMORY: Final = 1024


class AdmissionCache:
    """The handlers' answers: from ``cluster`` once a resource has synced, else read
    directly within ``fallback_seconds``. ``lease_namespace`` is where the reconciler
    holds its Lease."""

    def __init__(
        self,
        *,
        api: KubeReader,
        lease_namespace: str,
        fallback_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._fallback_seconds = fallback_seconds
        self._clock = clock
        self._wall_clock = wall_clock
        self.cluster = ClusterCache(listener=Quiet())
        # Each resource but the Lease is fed by the reflector of the cache's Kind of the
        # same name.
        kinds = {
            resource: Kind[resource.name] for resource in Resource if resource is not Resource.LEASE
        }
        by_kind = cache_reflectors(api=api, cache=self.cluster, kinds=kinds.values())
        self.reflectors: dict[Resource, Reflector] = {
            resource: by_kind[kind] for resource, kind in kinds.items()
        }
        self.reflectors[Resource.LEASE] = Reflector(
            api=api,
            path=apipaths.LEASES.path(namespace=lease_namespace),
            handler=object_feed(self.apply_lease, self._lease_keys),
            field_selector=f"metadata.name={LEASE_NAME}",
        )
        self._lease: LeaseRecord | None = None
        self._lease_key: str | None = None
        self._lease_seen_at = 0.0
        self._reach: dict[tuple[Settings, Placement, bool], Unreached | None] = {}
        self._reach_generation = -1
        self._server_version: str | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def apply_lease(self, key: str, obj: Mapping[str, Any] | None) -> None:
        record = None if obj is None else lease_record(obj)
        self._lease_key = None if obj is None else key
        if record != self._lease:
            self._lease = record
            self._lease_seen_at = self._clock()

    def _lease_keys(self) -> list[str]:
        """What a relist forgets unless it lists it again: the Lease, under its feed key."""
        return [] if self._lease_key is None else [self._lease_key]

    # -- readiness and lifecycle -------------------------------------------------------

    def synced(self) -> bool:
        return not self.unsynced()

    def unsynced(self) -> list[str]:
        return [str(resource) for resource in Resource if not self._synced(resource)]

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(reflector.run(), name=f"watch-{resource}")
                for resource, reflector in self.reflectors.items()
            ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _synced(self, resource: Resource) -> bool:
        return self.reflectors[resource].synced.is_set()

    # -- answers -----------------------------------------------------------------------

    async def settings(self) -> Settings:
        config = self.cluster.config
        if not self._synced(Resource.CONFIG):
            try:
                read = await self._fallback(apipaths.CONFIG, what=f"HeadroomConfig {CONFIG_NAME}")
                config = config_state(read, previous=DEFAULT_CONFIG)
            except _NotFound:
                config = DEFAULT_CONFIG
        if config.invalid is not None:
            raise Unavailable(f"HeadroomConfig {CONFIG_NAME} is invalid: {config.invalid}")
        return config.settings

    async def namespace_labels(self, name: str) -> Mapping[str, str]:
        cached = self.cluster.namespace_labels(name)
        if cached is not None:
            return cached
        namespace = await self._fallback(
            apipaths.NAMESPACES.path(name=name), what=f"namespace {name}"
        )
        return labels(namespace)

    async def limit_quota_names(self, namespace: str) -> list[str]:
        """Names of the namespace's ResourceQuotas that hold ``limits.cpu``, sorted."""
        if self._synced(Resource.RESOURCE_QUOTAS):
            return self.cluster.limit_quota_names(namespace)
        quotas = await self._fallback(
            apipaths.RESOURCE_QUOTAS.path(namespace=namespace),
            what=f"ResourceQuotas of {namespace}",
        )
        return sorted(
            str(metadata(quota).get("name"))
            for quota in quotas.get("items") or ()
            if has_limits_cpu(quota)
        )

    async def limit_range_caps(self, namespace: str) -> LimitRangeCaps:
        if self._synced(Resource.LIMIT_RANGES):
            return self.cluster.limit_range_caps(namespace)
        ranges = await self._fallback(
            apipaths.LIMIT_RANGES.path(namespace=namespace), what=f"LimitRanges of {namespace}"
        )
        return limit_range_caps(ranges.get("items") or ())

    async def vpas(self, namespace: str) -> list[Mapping[str, Any]]:
        """The namespace's VerticalPodAutoscalers; none where the VPA API is not installed."""
        if self._synced(Resource.VPAS):
            return list(self.cluster.vpas(namespace))
        try:
            listed = await self._fallback(
                apipaths.VERTICAL_POD_AUTOSCALERS.path(namespace=namespace),
                what=f"VerticalPodAutoscalers of {namespace}",
            )
        except _NotFound:
            return []
        return [vpa_view(vpa) for vpa in listed.get("items") or ()]

    async def controllers(
        self, namespace: str, owners: tuple[OwnerRef, ...]
    ) -> dict[OwnerRef, OwnerRef | None]:
        """The controllers up the chain from a pod's ``owners`` (`app.core.owners`), for
        `NamespaceFacts`: from the cache, else read directly (a ReplicaSet created a moment
        ago may not have reached the cache yet)."""
        known: dict[OwnerRef, OwnerRef | None] = {}
        missing: list[OwnerRef] = []

        def parent(owner: OwnerRef) -> OwnerRef | None:
            if owner not in known:
                missing.append(owner)
            return known.get(owner)

        # Each walk stops at the first link not read yet; read it and walk again.
        while True:
            owner_chain(owners, parent)
            if not missing:
                return known
            owner = missing.pop()
            known[owner] = await self._controller_of(namespace, owner)

    async def _controller_of(self, namespace: str, owner: OwnerRef) -> OwnerRef | None:
        resource = LOOKED_UP[(owner.api_group, owner.kind)]
        if self._synced(Resource(resource.plural)):
            cached = self.cluster.known_controller(namespace, owner)
            if cached is not None:
                return cached[0] if cached else None
        try:
            obj = await self._fallback(
                resource.path(namespace=namespace, name=owner.name),
                what=f"{owner.kind} {namespace}/{owner.name}",
            )
        except _NotFound:
            return None
        return controller_of(obj)

    def reconciler_live(self) -> bool:
        """Whether a live reconciler holds its Lease (``app.core.lease``)."""
        if not self._synced(Resource.LEASE):
            raise Unavailable("the reconciler's Lease is not listed yet")
        return lease_live(
            self._lease, seen_for=self._clock() - self._lease_seen_at, wall_now=self._wall_clock()
        )

    def birth_reach(
        self, settings: Settings, placement: Placement, *, pod_level: bool
    ) -> Unreached | None:
        """Why a birth limit would outlive Headroom's reach, or None (``app.core.birth``).

        The answer is remembered per pod constraints until a node changes: the pods of
        one rollout ask the same question.
        """
        if not self.reconciler_live():
            return NO_LIVE_RECONCILER
        if not self._synced(Resource.NODES):
            raise Unavailable("the nodes are not listed yet")
        generation = self.cluster.node_generation
        if generation != self._reach_generation or len(self._reach) >= _REACH_MEMORY:
            self._reach, self._reach_generation = {}, generation
        key = (settings, placement, pod_level)
        if key not in self._reach:
            self._reach[key] = birth_reach(
                settings,
                placement,
                self.cluster.nodes.values(),
                reconciler_live=True,
                pod_level=pod_level,
            )
        return self._reach[key]

    async def server_version(self) -> str:
        """The API server's ``gitVersion``, read once and then remembered."""
        if self._server_version is None:
            version = await self._fallback(apipaths.VERSION_PATH, what="the API server version")
            self._server_version = str(version.get("gitVersion") or "")
        return self._server_version

    async def _fallback(self, path: str, *, what: str) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self._fallback_seconds):
                return await self._api.get(path)
        except ApiError as err:
            if err.status == _NOT_FOUND:
                raise _NotFound(f"{what} not found") from err
            raise Unavailable(f"cannot read {what}: {err}") from err
        except TimeoutError as err:
            raise Unavailable(
                f"cannot read {what}: no answer in {self._fallback_seconds}s"
            ) from err
        except Exception as err:
            logger.warning("direct read of %s failed", what, exc_info=True)
            raise Unavailable(f"cannot read {what}: {err}") from err
