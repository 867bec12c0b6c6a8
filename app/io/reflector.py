"""List-then-watch for one resource, feeding a handler with each object's raw JSON.

The official client's `kubernetes.informer.SharedInformer` was not used: it runs a thread
per resource and hands out the client's typed models, whose cost (~1 ms and ~98 KB per
pod, perf-facts.md) rules out a cluster-wide pod cache. `kubernetes.aio.watch` likewise
deserializes into models. This reflector lists in pages of `page_size` so freed page
buffers stay small, splits pages and watch events into per-object JSON without decoding
the objects, and hands each object to the handler, which decodes only what it keeps.
Cyclic garbage collection is paused while a page is handled (collection dominates bulk
decoding on Python 3.11). It watches from the list's resourceVersion with bookmarks,
relists on `410 Gone`, re-watches when a stream goes silent (a dead connection), and
backs off on errors.

`cache_reflectors` builds the reflectors that feed the cluster cache (`app.core.cluster`):
the reconciler's, the webhook's and the convergence oracle's are the same ones.
"""

import asyncio
import gc
import logging
import random
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from enum import StrEnum
from typing import Any, Final, Protocol

import msgspec

from app.core import apipaths
from app.core.backoff import ExponentialBackoff
from app.core.cluster import ClusterCache
from app.core.feeds import object_feed, pod_feed
from app.core.labels import CONFIG_NAME
from app.io.http import (
    JSON,
    METADATA,
    METADATA_LIST,
    ApiError,
    ApiResponse,
    ApiUnavailable,
    Request,
    Transport,
)

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 500
_GONE = 410
_NOT_FOUND = 404
# Server-side watch timeouts are spread so that watches of many replicas do not all
# reconnect together.
_WATCH_TIMEOUT_RANGE = (240, 480)
# Objects handed over between yields to the event loop while a page is stripped.
_YIELD_EVERY = 100
# An absent API (no VPA CRD, no HeadroomConfig CRD yet) is polled at this pace.
_ABSENT_RETRY_SECONDS = 30.0


class Handler(Protocol):
    """Receives a resource's objects as raw JSON; every method runs on the event loop and
    must not block."""

    def relist_started(self) -> None: ...

    def listed(self, raw: memoryview) -> None: ...

    def relist_finished(self) -> None: ...

    def event(self, kind: str, raw: memoryview) -> None: ...


class ListWatcher(Transport, Protocol):
    """What a reflector needs of the transport: plain requests for lists, and watches."""

    def stream(
        self,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        timeout_seconds: int,
        accept: str = JSON,
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


# Envelopes: the list and event around each object, whose own JSON stays undecoded.
class _ListMeta(msgspec.Struct, gc=False):
    resourceVersion: str = ""
    token: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct, gc=False):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    # An empty list of metadata alone comes as null.
    items: list[msgspec.Raw] | None = None


class _Event(msgspec.Struct, gc=False):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"{}")


class _ObjectMeta(msgspec.Struct, gc=False):
    resourceVersion: str = ""


class _Versioned(msgspec.Struct, gc=False):
    metadata: _ObjectMeta = msgspec.field(default_factory=_ObjectMeta)


class _Status(msgspec.Struct, gc=False):
    code: int = 500
    reason: str = ""
    message: str = ""


_PAGE: Final = msgspec.json.Decoder(_Page)
_EVENT: Final = msgspec.json.Decoder(_Event)
_VERSIONED: Final = msgspec.json.Decoder(_Versioned)
_STATUS: Final = msgspec.json.Decoder(_Status)
_DECODE_ERRORS: Final = (msgspec.DecodeError, msgspec.ValidationError)


class Reflector:
    def __init__(
        self,
        *,
        api: ListWatcher,
        path: str,
        handler: Handler,
        field_selector: str | None = None,
        metadata_only: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
        rand: random.Random | None = None,
    ) -> None:
        self._api = api
        # Lists and watches of the objects' metadata alone: no spec or status (a pod template
        # of every ReplicaSet) on the wire.
        self._accept = (METADATA_LIST, METADATA) if metadata_only else (JSON, JSON)
        self.path = path
        self._log_extra = {"resource": path}
        self._handler = handler
        self._field_selector = field_selector
        self._page_size = page_size
        self._rand = rand if rand is not None else random.Random()  # noqa: S311 - jitter, not crypto
        self._backoff = ExponentialBackoff(initial=0.5, cap=30.0, rand=self._rand)
        self.synced = asyncio.Event()

    async def run(self) -> None:
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    resource_version = await self._list()
                    self.synced.set()
                    if resource_version is None:
                        await asyncio.sleep(_ABSENT_RETRY_SECONDS)
                        continue
                resource_version = await self._watch(resource_version)
            except (ApiUnavailable, ApiError, *_DECODE_ERRORS) as exc:
                if isinstance(exc, ApiError) and exc.status == _GONE:
                    # The resourceVersion held is too old (from a list or a watch): relist.
                    log.info("watch expired; relisting", extra=self._log_extra)
                    resource_version = None
                    continue
                delay = self._backoff.next_delay()
                log.warning(
                    "list/watch failed; retrying in %.1fs: %s", delay, exc, extra=self._log_extra
                )
                await asyncio.sleep(delay)
            except Exception:
                # A bug in handling one object must not leave the cache silently stale:
                # start over from a fresh list.
                log.exception("list/watch handler failed; relisting", extra=self._log_extra)
                resource_version = None
                await asyncio.sleep(self._backoff.next_delay())

    def _selector_query(self) -> list[tuple[str, str]]:
        return [("fieldSelector", self._field_selector)] if self._field_selector else []

    async def _list(self) -> str | None:
        """List every object; return the list's resourceVersion, None if the API is absent.

        The next page is requested before this one is handed over, so the API server
        encodes it while this process strips the current one; stripping yields to the
        event loop every `_YIELD_EVERY` objects so probes and lease renewals stay timely.
        """
        self._handler.relist_started()
        pending = asyncio.ensure_future(self._page(""))
        try:
            while True:
                response = await pending
                if response.code == _NOT_FOUND:
                    log.debug("API absent", extra=self._log_extra)
                    self._handler.relist_finished()
                    return None
                response.raise_for_status()
                page = _PAGE.decode(response.body)
                metadata, items = page.metadata, page.items or []
                del page, response
                if metadata.token:
                    pending = asyncio.ensure_future(self._page(metadata.token))
                for start in range(0, len(items), _YIELD_EVERY):
                    with _collection_paused():
                        for item in items[start : start + _YIELD_EVERY]:
                            self._handler.listed(memoryview(item))
                    await asyncio.sleep(0)
                # The items are views into the page's buffer: let it go before the next one.
                del items
                if not metadata.token:
                    self._handler.relist_finished()
                    self._backoff.reset()
                    return metadata.resourceVersion
        finally:
            pending.cancel()

    async def _page(self, token: str) -> ApiResponse:
        query = [*self._selector_query(), ("limit", str(self._page_size))]
        if token:
            query.append(("continue", token))
        return await self._api.request(
            Request("GET", self.path, query=tuple(query), accept=self._accept[0])
        )

    async def _watch(self, resource_version: str) -> str:
        query = [
            *self._selector_query(),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
        ]
        async with self._api.stream(
            self.path,
            query=query,
            timeout_seconds=self._rand.randint(*_WATCH_TIMEOUT_RANGE),
            accept=self._accept[1],
        ) as stream:
            async for line in stream:
                resource_version = self._dispatch(line, resource_version)
                self._backoff.reset()
        return resource_version

    def _dispatch(self, line: bytes, resource_version: str) -> str:
        event = _EVENT.decode(line)
        raw = memoryview(event.object)
        if event.type == "ERROR":
            status = _STATUS.decode(raw)
            raise ApiError(status=status.code, reason=status.reason, message=status.message)
        new_version = _VERSIONED.decode(raw).metadata.resourceVersion or resource_version
        if event.type in ("ADDED", "MODIFIED", "DELETED"):
            self._handler.event(event.type, raw)
        return new_version


@contextmanager
def _collection_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Kind(StrEnum):
    """The resources the cluster cache can be fed, one reflector each."""

    CONFIG = "config"
    NAMESPACES = "namespaces"
    NODES = "nodes"
    LIMIT_RANGES = "limitranges"
    VPAS = "vpas"
    RESOURCE_QUOTAS = "resourcequotas"
    PODS = "pods"
    # Their controllers alone (app.core.owners), from their metadata.
    REPLICA_SETS = "replicasets"
    JOBS = "jobs"


# The pod watch skips unbound and finished pods: they book no CPU on any node.
POD_FIELD_SELECTOR: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
# Everything a node's decision reads: the reconciler's watches, and any judge of its work.
# That is every kind but resource quotas, which only the webhook checks.
DECISION_KINDS: Final = tuple(kind for kind in Kind if kind is not Kind.RESOURCE_QUOTAS)


def cache_reflectors(
    *, api: ListWatcher, cache: ClusterCache, kinds: Iterable[Kind] = DECISION_KINDS
) -> dict[Kind, Reflector]:
    """One reflector per kind, feeding ``cache``."""
    objects: dict[Kind, tuple[apipaths.Resource, Callable[[str, Any], None]]] = {
        Kind.CONFIG: (apipaths.HEADROOM_CONFIGS, cache.apply_config),
        Kind.NAMESPACES: (apipaths.NAMESPACES, cache.apply_namespace),
        Kind.NODES: (apipaths.NODES, cache.apply_node),
        Kind.LIMIT_RANGES: (apipaths.LIMIT_RANGES, cache.apply_limit_range),
        Kind.VPAS: (apipaths.VERTICAL_POD_AUTOSCALERS, cache.apply_vpa),
        Kind.RESOURCE_QUOTAS: (apipaths.RESOURCE_QUOTAS, cache.apply_quota),
        Kind.REPLICA_SETS: (apipaths.REPLICA_SETS, cache.apply_replica_set),
        Kind.JOBS: (apipaths.JOBS, cache.apply_job),
    }

    def reflector(kind: Kind) -> Reflector:
        handler: Handler
        selector: str | None
        if kind is Kind.PODS:
            resource, handler, selector = apipaths.PODS, pod_feed(cache), POD_FIELD_SELECTOR
        else:
            resource, apply = objects[kind]
            handler = object_feed(apply, lambda: cache.keys(kind))
            selector = f"metadata.name={CONFIG_NAME}" if kind is Kind.CONFIG else None
        return Reflector(
            api=api,
            path=resource.path(),
            handler=handler,
            field_selector=selector,
            metadata_only=kind in (Kind.REPLICA_SETS, Kind.JOBS),
        )

    return {kind: reflector(kind) for kind in kinds}
