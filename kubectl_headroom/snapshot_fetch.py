"""Reading a snapshot from the live cluster: only GETs, in pages, stripped as they arrive."""

import functools
from collections.abc import Callable

from app.core import apipaths
from app.core.views import vpa_view
from app.io.http import KubeHttp
from kubectl_headroom.snapshot import (
    Snapshot,
    strip_controlled,
    strip_limit_range,
    strip_namespace,
    strip_node,
    strip_pod,
    strip_quota,
)
from kubectl_headroom.state import list_items, optional

Progress = Callable[[str, int], None]


async def fetch_snapshot(http: KubeHttp, *, progress: Progress | None = None) -> Snapshot:
    """List everything simulate reads, page by page; only GETs, never a write."""
    version = await http.get(apipaths.VERSION_PATH)
    # The progress line counts nodes, namespaces and pods; the rest are listed without it.
    with_progress = functools.partial(list_items, http, progress=progress)
    controllers = functools.partial(list_items, http, strip=strip_controlled, metadata_only=True)
    return Snapshot(
        server_version=str(version.get("gitVersion", "")),
        nodes=await with_progress(apipaths.NODES.path(), strip=strip_node),
        namespaces=await with_progress(apipaths.NAMESPACES.path(), strip=strip_namespace),
        pods=await with_progress(
            apipaths.PODS.path(), strip=strip_pod, field_selector="spec.nodeName!="
        ),
        limit_ranges=await list_items(http, apipaths.LIMIT_RANGES.path(), strip=strip_limit_range),
        quotas=await list_items(http, apipaths.RESOURCE_QUOTAS.path(), strip=strip_quota),
        vpas=await optional(
            list_items(http, apipaths.VERTICAL_POD_AUTOSCALERS.path(), strip=vpa_view)
        ),
        config=await optional(http.get(apipaths.CONFIG)),
        replica_sets=await controllers(apipaths.REPLICA_SETS.path()),
        jobs=await controllers(apipaths.JOBS.path()),
    )
