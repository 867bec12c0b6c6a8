"""A read-only snapshot of what the plugin inspects, fetched as plain JSON."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from app.core import apipaths
from app.core.config import ConfigError, Settings, parse_config
from app.core.labels import CONFIG_NAME
from app.io.http import JSON, METADATA_LIST, ApiError, KubeHttp
from kubectl_headroom.simulate import enrolled_namespaces

Obj = Mapping[str, Any]
T = TypeVar("T")
CERT_MANAGER_CRD = "certificates.cert-manager.io"
_PAGE: Final = "500"
_NOT_FOUND: Final = 404


@dataclass(frozen=True)
class ClusterState:
    server_version: str
    nodes: Sequence[Obj]
    namespaces: Sequence[Obj]
    quotas: Sequence[Obj]
    limit_ranges: Sequence[Obj]
    # None when the VerticalPodAutoscaler API is not served.
    vpas: Sequence[Obj] | None
    cert_manager: bool
    config: Obj | None
    # Their metadata: which VPA targets a pod follows its controllers (app.core.owners).
    replica_sets: Sequence[Obj] = ()
    jobs: Sequence[Obj] = ()

    def settings(self) -> tuple[Settings, str | None]:
        """The config's settings, or the defaults and the reason they were used."""
        try:
            return parse_config(self.config), None
        except ConfigError as err:
            return parse_config(None), f"HeadroomConfig/{CONFIG_NAME} is invalid: {err}"

    def managed_namespaces(self, settings: Settings) -> list[str]:
        return enrolled_namespaces(self.namespaces, settings)[0]


async def list_items(
    http: KubeHttp,
    path: str,
    *,
    strip: Callable[[Obj], Obj] | None = None,
    field_selector: str | None = None,
    metadata_only: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> list[Obj]:
    """Every object of a collection (``metadata_only``: their metadata alone), in pages,
    each through ``strip`` when given; only GETs."""
    items: list[Obj] = []
    params = {"limit": _PAGE}
    if field_selector:
        params["fieldSelector"] = field_selector
    what = path.rsplit("/", 1)[-1]
    while True:
        page = await http.get(path, params=params, accept=METADATA_LIST if metadata_only else JSON)
        listed = page.get("items") or []
        items.extend(listed if strip is None else (strip(item) for item in listed))
        if progress is not None:
            progress(what, len(items))
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        params = {**params, "continue": str(token)}


async def optional(read: Awaitable[T]) -> T | None:
    """What ``read`` returns, or None when the object or the API is not there (404)."""
    try:
        return await read
    except ApiError as err:
        if err.status == _NOT_FOUND:
            return None
        raise


async def fetch_state(http: KubeHttp) -> ClusterState:
    version = await http.get(apipaths.VERSION_PATH)
    crd = await optional(http.get(apipaths.CUSTOM_RESOURCE_DEFINITIONS.path(name=CERT_MANAGER_CRD)))
    return ClusterState(
        server_version=str(version.get("gitVersion", "")),
        nodes=await list_items(http, apipaths.NODES.path()),
        namespaces=await list_items(http, apipaths.NAMESPACES.path()),
        quotas=await list_items(http, apipaths.RESOURCE_QUOTAS.path()),
        limit_ranges=await list_items(http, apipaths.LIMIT_RANGES.path()),
        vpas=await optional(list_items(http, apipaths.VERTICAL_POD_AUTOSCALERS.path())),
        replica_sets=await list_items(http, apipaths.REPLICA_SETS.path(), metadata_only=True),
        jobs=await list_items(http, apipaths.JOBS.path(), metadata_only=True),
        cert_manager=crd is not None,
        config=await optional(http.get(apipaths.CONFIG)),
    )
