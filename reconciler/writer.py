"""Every write the reconciler makes, in one place: resize, annotation, events, config status.

Each call names the exact subresource, content type and field manager; none of them can
touch requests, memory or any field other than `limits.cpu` and Headroom's annotation.
Every call first checks that this replica may write (it leads); when it may not, the call
raises `WritesStopped` instead of sending anything, so losing the lease stops writes at
once, even in the middle of a reconcile.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from app.labels import CONFIG_NAME, CONFIG_PLURAL, FIELD_MANAGER, GROUP, VERSION
from app.pods import PodInfo
from app.policy import ContainerLimit
from reconciler.bodies import (
    annotation_patch,
    config_status_patch,
    event_body,
    pod_level_resize_apply_body,
    resize_apply_body,
)
from reconciler.kubeapi import (
    APPLY_PATCH,
    JSON,
    MERGE_PATCH,
    ApiResponse,
    ApiUnavailable,
    Requester,
)

log = logging.getLogger(__name__)

CPU_LIMIT_ADJUSTED: Final = "CPULimitAdjusted"
RESIZE_INFEASIBLE: Final = "ResizeInfeasible"
RESIZE_FORBIDDEN: Final = "ResizeForbidden"
INVALID_MAX_CPU: Final = "InvalidMaxCPU"

_CONFIG_STATUS_PATH: Final = f"/apis/{GROUP}/{VERSION}/{CONFIG_PLURAL}/{CONFIG_NAME}/status"


class WritesStopped(Exception):
    """This replica no longer leads; nothing was sent."""


def _pod_path(pod: PodInfo) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"


class Writer:
    def __init__(
        self,
        *,
        api: Requester,
        instance: str,
        may_write: Callable[[], bool],
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._instance = instance
        self._may_write = may_write
        self._wall_clock = wall_clock

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any],
        content_type: str = JSON,
    ) -> ApiResponse:
        if not self._may_write():
            raise WritesStopped
        return await self._api.request(
            method, path, query=query, body=body, content_type=content_type
        )

    async def resize(
        self, pod: PodInfo, containers: tuple[ContainerLimit, ...], *, target_m: int
    ) -> ApiResponse:
        """Server-side apply of the CPU limits on `pods/resize`, forcing ownership.

        A pod with pod-level resources gets `target_m` as its pod-level limit; any other
        pod gets `containers`' limits.
        """
        if pod.pod_resources is not None:
            body = pod_level_resize_apply_body(
                namespace=pod.namespace, name=pod.name, cpu_m=target_m
            )
        else:
            body = resize_apply_body(
                namespace=pod.namespace,
                name=pod.name,
                containers={c.name: c.limit_m for c in containers if not c.sidecar},
                sidecars={c.name: c.limit_m for c in containers if c.sidecar},
            )
        return await self._send(
            "PATCH",
            f"{_pod_path(pod)}/resize",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=body,
            content_type=APPLY_PATCH,
        )

    async def annotate(self, pod: PodInfo, text: str) -> ApiResponse:
        return await self._send(
            "PATCH",
            _pod_path(pod),
            query=[("fieldManager", FIELD_MANAGER)],
            body=annotation_patch(text),
            content_type=MERGE_PATCH,
        )

    async def event(self, pod: PodInfo, *, reason: str, message: str, warning: bool) -> None:
        """Record an event; a failure is logged, never retried (events are best effort)."""
        body = event_body(
            namespace=pod.namespace,
            pod=pod.name,
            uid=pod.uid,
            reason=reason,
            message=message,
            warning=warning,
            now=self._wall_clock(),
            instance=self._instance,
        )
        try:
            response = await self._send(
                "POST", f"/api/v1/namespaces/{pod.namespace}/events", body=body
            )
        except ApiUnavailable as exc:
            log.warning("cannot record event %s: %s", reason, exc, extra=_pod_context(pod))
            return
        if not response.ok:
            log.warning(
                "cannot record event %s: %s", reason, response.message, extra=_pod_context(pod)
            )

    async def config_status(self, status: Mapping[str, Any]) -> ApiResponse:
        return await self._send(
            "PATCH",
            _CONFIG_STATUS_PATH,
            query=[("fieldManager", FIELD_MANAGER)],
            body=config_status_patch(status),
            content_type=MERGE_PATCH,
        )


def _pod_context(pod: PodInfo) -> dict[str, str]:
    return {"namespace": pod.namespace, "pod": pod.name, "node": pod.node_name}
