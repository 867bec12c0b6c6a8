"""Feeds: one resource's list/watch stream, decoded and applied to the cluster cache.

A reflector (`app.io.reflector`) hands each object's raw JSON to a feed; the feed decodes
only what the cache keeps (pods into their wire schema, the few other objects into
dicts) and applies it. A relist reports every object; whatever the cache held that the
relist did not report was deleted while the watch was down.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson

from app.core.cluster import ClusterCache, pod_key
from app.core.pods import PodShapeError, PodWire, decode_pod
from app.core.views import object_key

T = TypeVar("T")


@dataclass(eq=False, kw_only=True)
class CacheFeed(Generic[T]):
    decode: Callable[[memoryview], T]
    key: Callable[[T], str]
    apply: Callable[[str, T | None], None]
    keys: Callable[[], Iterable[str]]
    _seen: set[str] | None = field(default=None, init=False)

    def relist_started(self) -> None:
        self._seen = set()

    def listed(self, raw: memoryview) -> None:
        obj = self.decode(raw)
        key = self.key(obj)
        if self._seen is not None:
            self._seen.add(key)
        self.apply(key, obj)

    def relist_finished(self) -> None:
        seen = self._seen or set()
        for key in [key for key in self.keys() if key not in seen]:
            self.apply(key, None)
        self._seen = None

    def event(self, kind: str, raw: memoryview) -> None:
        obj = self.decode(raw)
        self.apply(self.key(obj), None if kind == "DELETED" else obj)


def decode_object(raw: memoryview) -> dict[str, Any]:
    decoded = orjson.loads(raw)
    if not isinstance(decoded, dict):
        raise PodShapeError("watched object is not a JSON object")
    return decoded


def pod_feed(cache: ClusterCache) -> CacheFeed[PodWire]:
    return CacheFeed(
        decode=decode_pod, key=pod_key, apply=cache.apply_pod, keys=lambda: cache.keys("pods")
    )


def object_feed(
    apply: Callable[[str, Mapping[str, Any] | None], None], keys: Callable[[], Iterable[str]]
) -> CacheFeed[dict[str, Any]]:
    return CacheFeed(decode=decode_object, key=object_key, apply=apply, keys=keys)
