"""Watch-fed cache of what the admission handlers read, so no request waits on the API server.

It keeps namespace labels, which ResourceQuotas hold ``limits.cpu``, the CPU caps of each
namespace's LimitRanges, the VerticalPodAutoscalers (their target and the policies that
say whether they set limits), and the HeadroomConfig ``cluster``. Each is listed (in
pages) then watched on the event loop: no threads, and the objects are decoded into
plain dicts and reduced to the few fields the handlers need. The cache answers for a
resource once its initial list is done; readiness waits for all five. Where the VPA API
is not installed, there are no VPAs: that counts as listed, and the API is looked for
again every ``_ABSENT_RETRY_SECONDS``.

When the cache cannot answer
----------------------------
Before a resource's initial list, or for a namespace not seen yet (one created a moment
ago), an answer comes from a direct read of the API server bounded by a short timeout.
When that fails too — API server unreachable, the read forbidden, or the stored
HeadroomConfig invalid — the cache raises ``Unavailable`` and the handlers:

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
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from app.core.config import DEFAULT_SETTINGS, ConfigError, Settings, parse_config
from app.core.labels import CONFIG_NAME, CONFIG_PLURAL, GROUP, VERSION
from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps, limit_range_caps
from app.io.http import ApiError

logger = logging.getLogger(__name__)

LIMITS_CPU: Final = "limits.cpu"
_PAGE_SIZE: Final = 500
_MIN_BACKOFF_SECONDS: Final = 1.0
_MAX_BACKOFF_SECONDS: Final = 30.0
_CONFIG_PATH: Final = f"/apis/{GROUP}/{VERSION}/{CONFIG_PLURAL}"
_VPA_GROUP_PATH: Final = "/apis/autoscaling.k8s.io/v1"
_ABSENT_RETRY_SECONDS: Final = 30.0
_NOT_FOUND: Final = 404


class Unavailable(Exception):
    """Neither the cache nor a direct read could answer; the message says why."""


class KubeReader(Protocol):
    async def get(
        self, path: str, *, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]: ...

    def watch(
        self, path: str, *, params: Mapping[str, str], timeout_seconds: int = ...
    ) -> AsyncIterator[dict[str, Any]]: ...


class Resource(StrEnum):
    NAMESPACES = "namespaces"
    RESOURCE_QUOTAS = "resourcequotas"
    LIMIT_RANGES = "limitranges"
    VPAS = "verticalpodautoscalers"
    CONFIG = "headroomconfig"


@dataclass(frozen=True, slots=True)
class _Collection:
    path: str
    params: Mapping[str, str]


_COLLECTIONS: Final = {
    Resource.NAMESPACES: _Collection("/api/v1/namespaces", {}),
    Resource.RESOURCE_QUOTAS: _Collection("/api/v1/resourcequotas", {}),
    Resource.LIMIT_RANGES: _Collection("/api/v1/limitranges", {}),
    Resource.VPAS: _Collection(f"{_VPA_GROUP_PATH}/verticalpodautoscalers", {}),
    Resource.CONFIG: _Collection(_CONFIG_PATH, {"fieldSelector": f"metadata.name={CONFIG_NAME}"}),
}


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def has_limits_cpu(quota: Mapping[str, Any]) -> bool:
    """Whether a ResourceQuota's ``spec.hard`` constrains ``limits.cpu``."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    return isinstance(hard, Mapping) and LIMITS_CPU in hard


def _settings_or_error(config: Mapping[str, Any] | None) -> Settings | ConfigError:
    try:
        return parse_config(config)
    except ConfigError as err:
        return err


class ClusterCache:
    def __init__(self, *, api: KubeReader, fallback_seconds: float = 1.0) -> None:
        self._api = api
        self._fallback_seconds = fallback_seconds
        self._synced: dict[Resource, bool] = dict.fromkeys(Resource, False)
        self._namespaces: dict[str, Mapping[str, str]] = {}
        # namespace -> names of its quotas that hold limits.cpu
        self._limit_quotas: dict[str, set[str]] = {}
        # namespace -> LimitRange name -> object, and the caps they add up to
        self._limit_ranges: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._caps: dict[str, LimitRangeCaps] = {}
        # namespace -> VPA name -> the fields the VPA gate reads
        self._vpas: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._settings: Settings | ConfigError = DEFAULT_SETTINGS
        self._server_version: str | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- readiness and lifecycle -------------------------------------------------------

    def synced(self) -> bool:
        return all(self._synced.values())

    def unsynced(self) -> list[str]:
        return [str(resource) for resource, done in self._synced.items() if not done]

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._run(resource), name=f"watch-{resource}")
                for resource in Resource
            ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    # -- answers -----------------------------------------------------------------------

    async def settings(self) -> Settings:
        if self._synced[Resource.CONFIG]:
            current = self._settings
        else:
            current = _settings_or_error(await self._read_config())
        if isinstance(current, ConfigError):
            raise Unavailable(f"HeadroomConfig {CONFIG_NAME} is invalid: {current}")
        return current

    async def namespace_labels(self, name: str) -> Mapping[str, str]:
        labels = self._namespaces.get(name)
        if labels is not None:
            return labels
        namespace = await self._fallback(f"/api/v1/namespaces/{name}", what=f"namespace {name}")
        return _labels(namespace)

    async def limit_quota_names(self, namespace: str) -> list[str]:
        """Names of the namespace's ResourceQuotas that hold ``limits.cpu``, sorted."""
        if self._synced[Resource.RESOURCE_QUOTAS]:
            return sorted(self._limit_quotas.get(namespace, ()))
        quotas = await self._fallback(
            f"/api/v1/namespaces/{namespace}/resourcequotas",
            what=f"ResourceQuotas of {namespace}",
        )
        return sorted(
            str(_metadata(quota).get("name"))
            for quota in quotas.get("items") or ()
            if has_limits_cpu(quota)
        )

    async def limit_range_caps(self, namespace: str) -> LimitRangeCaps:
        if self._synced[Resource.LIMIT_RANGES]:
            return self._caps.get(namespace, NO_LIMIT_RANGE_CAPS)
        ranges = await self._fallback(
            f"/api/v1/namespaces/{namespace}/limitranges", what=f"LimitRanges of {namespace}"
        )
        return limit_range_caps(ranges.get("items") or ())

    async def vpas(self, namespace: str) -> list[Mapping[str, Any]]:
        """The namespace's VerticalPodAutoscalers; none where the VPA API is not installed."""
        if self._synced[Resource.VPAS]:
            return list(self._vpas.get(namespace, {}).values())
        try:
            listed = await self._fallback(
                f"{_VPA_GROUP_PATH}/namespaces/{namespace}/verticalpodautoscalers",
                what=f"VerticalPodAutoscalers of {namespace}",
            )
        except _NotFound:
            return []
        return [_vpa_view(vpa) for vpa in listed.get("items") or ()]

    async def server_version(self) -> str:
        """The API server's ``gitVersion``, read once and then remembered."""
        if self._server_version is None:
            version = await self._fallback("/version", what="the API server version")
            self._server_version = str(version.get("gitVersion") or "")
        return self._server_version

    async def _read_config(self) -> Mapping[str, Any] | None:
        try:
            return await self._fallback(
                f"{_CONFIG_PATH}/{CONFIG_NAME}", what=f"HeadroomConfig {CONFIG_NAME}"
            )
        except _NotFound:
            return None

    async def _fallback(self, path: str, *, what: str) -> dict[str, Any]:
        try:
            async with asyncio.timeout(self._fallback_seconds):
                return await self._api.get(path)
        except ApiError as err:
            if err.status == 404:
                raise _NotFound(f"{what} not found") from err
            raise Unavailable(f"cannot read {what}: {err}") from err
        except TimeoutError as err:
            raise Unavailable(
                f"cannot read {what}: no answer in {self._fallback_seconds}s"
            ) from err
        except Exception as err:
            logger.warning("direct read of %s failed", what, exc_info=True)
            raise Unavailable(f"cannot read {what}: {err}") from err

    # -- feeding: the watchers call these, and tests seed the cache with them ----------

    def replace(self, resource: Resource, objects: Iterable[Mapping[str, Any]]) -> None:
        """Swap in the full contents of one resource (an initial list or relist)."""
        if resource is Resource.NAMESPACES:
            self._namespaces = {str(_metadata(o).get("name")): _labels(o) for o in objects}
        elif resource is Resource.RESOURCE_QUOTAS:
            self._limit_quotas = {}
            for quota in objects:
                self._upsert_quota(quota)
        elif resource is Resource.LIMIT_RANGES:
            self._limit_ranges = {}
            self._caps = {}
            for limit_range in objects:
                self._upsert_limit_range(limit_range)
        elif resource is Resource.VPAS:
            self._vpas = {}
            for vpa in objects:
                self._upsert_vpa(vpa)
        else:
            configs = [o for o in objects if _metadata(o).get("name") == CONFIG_NAME]
            self._settings = _settings_or_error(configs[0] if configs else None)
        self._synced[resource] = True

    def apply(self, resource: Resource, event_type: str, obj: Mapping[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED or DELETED)."""
        deleted = event_type == "DELETED"
        metadata = _metadata(obj)
        name = str(metadata.get("name"))
        namespace = str(metadata.get("namespace") or "")
        if resource is Resource.NAMESPACES:
            if deleted:
                self._namespaces.pop(name, None)
            else:
                self._namespaces[name] = _labels(obj)
        elif resource is Resource.RESOURCE_QUOTAS:
            if deleted:
                self._limit_quotas.get(namespace, set()).discard(name)
            else:
                self._upsert_quota(obj)
        elif resource is Resource.LIMIT_RANGES:
            if deleted:
                self._limit_ranges.get(namespace, {}).pop(name, None)
                self._caps[namespace] = limit_range_caps(
                    self._limit_ranges.get(namespace, {}).values()
                )
            else:
                self._upsert_limit_range(obj)
        elif resource is Resource.VPAS:
            if deleted:
                self._vpas.get(namespace, {}).pop(name, None)
            else:
                self._upsert_vpa(obj)
        elif name == CONFIG_NAME:
            self._settings = _settings_or_error(None if deleted else obj)

    def _upsert_quota(self, quota: Mapping[str, Any]) -> None:
        metadata = _metadata(quota)
        names = self._limit_quotas.setdefault(str(metadata.get("namespace") or ""), set())
        if has_limits_cpu(quota):
            names.add(str(metadata.get("name")))
        else:
            names.discard(str(metadata.get("name")))

    def _upsert_limit_range(self, limit_range: Mapping[str, Any]) -> None:
        metadata = _metadata(limit_range)
        namespace = str(metadata.get("namespace") or "")
        ranges = self._limit_ranges.setdefault(namespace, {})
        ranges[str(metadata.get("name"))] = {"spec": limit_range.get("spec") or {}}
        self._caps[namespace] = limit_range_caps(ranges.values())

    def _upsert_vpa(self, vpa: Mapping[str, Any]) -> None:
        metadata = _metadata(vpa)
        namespace = str(metadata.get("namespace") or "")
        self._vpas.setdefault(namespace, {})[str(metadata.get("name"))] = _vpa_view(vpa)

    # -- list and watch ----------------------------------------------------------------

    async def _run(self, resource: Resource) -> None:
        delay = _MIN_BACKOFF_SECONDS
        while True:
            try:
                version = await self._list(resource)
                delay = _MIN_BACKOFF_SECONDS
                while True:
                    version = await self._watch(resource, version)
            except ApiError as err:
                if err.status == 410:
                    logger.info("watch of %s expired; listing again", resource)
                    continue
                if err.status == _NOT_FOUND and resource is Resource.VPAS:
                    # No VPA API: no VPAs. Installing it later is noticed here.
                    self.replace(resource, [])
                    await asyncio.sleep(_ABSENT_RETRY_SECONDS)
                    continue
                logger.warning(
                    "list/watch of %s failed: %s; retrying in %.0fs", resource, err, delay
                )
            except Exception:
                logger.warning(
                    "list/watch of %s failed; retrying in %.0fs", resource, delay, exc_info=True
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_BACKOFF_SECONDS)

    async def _list(self, resource: Resource) -> str:
        collection = _COLLECTIONS[resource]
        items: list[Mapping[str, Any]] = []
        params = {**collection.params, "limit": str(_PAGE_SIZE)}
        while True:
            page = await self._api.get(collection.path, params=params)
            items.extend(page.get("items") or ())
            metadata = _metadata(page)
            token = metadata.get("continue")
            if not token:
                break
            params = {**params, "continue": str(token)}
        self.replace(resource, items)
        return str(metadata.get("resourceVersion") or "")

    async def _watch(self, resource: Resource, version: str) -> str:
        collection = _COLLECTIONS[resource]
        params = {**collection.params, "resourceVersion": version}
        async for event in self._api.watch(collection.path, params=params):
            obj = event.get("object")
            if not isinstance(obj, Mapping):
                continue
            version = str(_metadata(obj).get("resourceVersion") or version)
            event_type = str(event.get("type"))
            if event_type != "BOOKMARK":
                self.apply(resource, event_type, obj)
        return version


class _NotFound(Unavailable):
    pass


def _vpa_view(vpa: Mapping[str, Any]) -> Mapping[str, Any]:
    """What ``app.core.eligibility``'s VPA gate reads of a VerticalPodAutoscaler."""
    spec = vpa.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    metadata = _metadata(vpa)
    return {
        "metadata": {"namespace": metadata.get("namespace"), "name": metadata.get("name")},
        "spec": {
            field: spec[field]
            for field in ("targetRef", "updatePolicy", "resourcePolicy")
            if field in spec
        },
    }


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _metadata(obj).get("labels")
    return dict(labels) if isinstance(labels, Mapping) else {}
