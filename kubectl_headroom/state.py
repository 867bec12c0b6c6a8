"""A read-only snapshot of what the plugin inspects, fetched as plain JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core import apipaths
from app.core.config import ConfigError, Settings, parse_config
from app.core.eligibility import namespace_enrolled
from app.core.labels import CONFIG_NAME
from app.io.http import ApiError, KubeHttp

Obj = Mapping[str, Any]
CERT_MANAGER_CRD = "certificates.cert-manager.io"


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

    def settings(self) -> tuple[Settings, str | None]:
        """The config's settings, or the defaults and the reason they were used."""
        if self.config is None:
            return parse_config(None), None
        try:
            return parse_config(self.config), None
        except ConfigError as err:
            return parse_config(None), f"HeadroomConfig/{CONFIG_NAME} is invalid: {err}"

    def managed_namespaces(self, settings: Settings) -> list[str]:
        return sorted(
            ns["metadata"]["name"]
            for ns in self.namespaces
            if namespace_enrolled(
                settings,
                name=ns["metadata"]["name"],
                labels=ns["metadata"].get("labels") or {},
            )
        )


async def _items(http: KubeHttp, path: str) -> list[Obj]:
    items: list[Obj] = []
    params: dict[str, str] = {"limit": "500"}
    while True:
        page = await http.get(path, params=params)
        items.extend(page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        params = {"limit": "500", "continue": token}


async def optional(http: KubeHttp, path: str) -> Obj | None:
    try:
        return await http.get(path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


async def _optional_items(http: KubeHttp, path: str) -> list[Obj] | None:
    try:
        return await _items(http, path)
    except ApiError as err:
        if err.status == 404:
            return None
        raise


async def fetch_state(http: KubeHttp) -> ClusterState:
    version = await http.get(apipaths.VERSION_PATH)
    crd = await optional(http, apipaths.CUSTOM_RESOURCE_DEFINITIONS.path(name=CERT_MANAGER_CRD))
    return ClusterState(
        server_version=str(version.get("gitVersion", "")),
        nodes=await _items(http, apipaths.NODES.path()),
        namespaces=await _items(http, apipaths.NAMESPACES.path()),
        quotas=await _items(http, apipaths.RESOURCE_QUOTAS.path()),
        limit_ranges=await _items(http, apipaths.LIMIT_RANGES.path()),
        vpas=await _optional_items(http, apipaths.VERTICAL_POD_AUTOSCALERS.path()),
        cert_manager=crd is not None,
        config=await optional(http, apipaths.CONFIG),
    )
