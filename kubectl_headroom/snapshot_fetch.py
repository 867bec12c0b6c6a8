"""Reading a snapshot from the live cluster: only GETs, in pages, stripped as they arrive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from app.core import apipaths
from app.io.http import ApiError, KubeHttp
from kubectl_headroom.snapshot import (
    Obj,
    Snapshot,
    strip_limit_range,
    strip_namespace,
    strip_node,
    strip_pod,
    strip_quota,
    strip_vpa,
)

_PAGE: Final = "500"

Progress = Callable[[str, int], None]


async def fetch_snapshot(http: KubeHttp, *, progress: Progress | None = None) -> Snapshot:
    """List everything simulate reads, page by page; only GETs, never a write."""
    version = await http.get(apipaths.VERSION_PATH)
    return Snapshot(
        server_version=str(version.get("gitVersion", "")),
        nodes=await _collect(http, apipaths.NODES.path(), strip=strip_node, progress=progress),
        namespaces=await _collect(
            http, apipaths.NAMESPACES.path(), strip=strip_namespace, progress=progress
        ),
        pods=await _collect(
            http,
            apipaths.PODS.path(),
            strip=strip_pod,
            progress=progress,
            field_selector="spec.nodeName!=",
        ),
        limit_ranges=await _collect(
            http, apipaths.LIMIT_RANGES.path(), strip=strip_limit_range, progress=None
        ),
        quotas=await _collect(
            http, apipaths.RESOURCE_QUOTAS.path(), strip=strip_quota, progress=None
        ),
        vpas=await _optional_collect(http, apipaths.VERTICAL_POD_AUTOSCALERS.path()),
        config=await _optional_get(http, apipaths.CONFIG),
    )


async def _collect(
    http: KubeHttp,
    path: str,
    *,
    strip: Callable[[Obj], Obj],
    progress: Progress | None,
    field_selector: str | None = None,
) -> list[Obj]:
    items: list[Obj] = []
    params = {"limit": _PAGE}
    if field_selector:
        params["fieldSelector"] = field_selector
    what = path.rsplit("/", 1)[-1]
    while True:
        page = await http.get(path, params=params)
        items.extend(strip(item) for item in page.get("items") or ())
        if progress is not None:
            progress(what, len(items))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        params = {**params, "continue": str(token)}


async def _optional_collect(http: KubeHttp, path: str) -> list[Obj] | None:
    try:
        return await _collect(http, path, strip=strip_vpa, progress=None)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


async def _optional_get(http: KubeHttp, path: str) -> Obj | None:
    try:
        return await http.get(path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise
