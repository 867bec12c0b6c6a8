"""Every write the reconciler makes, in one place: resize, annotation, events, config status.

Each write is built as a value (`app.io.http.Request`) with no I/O: the method, the
exact subresource, the field manager, the content type and the lane. None of them can
touch requests, memory or any field other than `limits.cpu` and Headroom's annotation.
`Writer.send` only sends one: it spends a token of the write's lane's budget (resizes
and the config status: the resize budget; annotations and events: the explanation
budget), then checks its precondition right before the request goes out: when it no
longer holds (a stop button was pressed, leadership lapsed, the pod changed) nothing is
sent and `Skipped` is raised.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core import apipaths
from app.core.labels import FIELD_MANAGER
from app.core.pods import PodInfo
from app.core.policy import ContainerLimit
from app.io.budget import Lane
from app.io.http import APPLY_PATCH, MERGE_PATCH, ApiResponse, Request, Transport, failure_of
from reconciler.bodies import (
    annotation_patch,
    config_status_patch,
    event_body,
    pod_level_resize_apply_body,
    resize_apply_body,
)
from reconciler.plan import pod_context

log = logging.getLogger(__name__)

Precondition = Callable[[], bool]


_APPLY_QUERY = (("fieldManager", FIELD_MANAGER), ("force", "true"))
_PATCH_QUERY = (("fieldManager", FIELD_MANAGER),)


def resize_write(pod: PodInfo, containers: tuple[ContainerLimit, ...], *, target_m: int) -> Request:
    """Server-side apply of the CPU limits on `pods/resize`, forcing ownership.

    A pod with pod-level resources gets `target_m` as its pod-level limit; any other pod
    gets `containers`' limits, and its excluded containers are named at the limits they
    have: an apply that stopped naming a limit Headroom set before they were excluded
    would remove it, which a resize may not do.
    """
    if pod.facts.pod_resources is not None:
        body = pod_level_resize_apply_body(namespace=pod.namespace, name=pod.name, cpu_m=target_m)
    else:
        kept = [
            (c.name, c.sidecar, c.cpu_limit_m)
            for c in pod.facts.excluded
            if c.cpu_limit_m is not None
        ]
        limits = [*((c.name, c.sidecar, c.limit_m) for c in containers), *kept]
        body = resize_apply_body(
            namespace=pod.namespace,
            name=pod.name,
            containers={name: limit for name, sidecar, limit in limits if not sidecar},
            sidecars={name: limit for name, sidecar, limit in limits if sidecar},
        )
    return Request(
        "PATCH",
        apipaths.PODS.path(namespace=pod.namespace, name=pod.name, subresource="resize"),
        body,
        Lane.PRIMARY,
        content_type=APPLY_PATCH,
        query=_APPLY_QUERY,
    )


def annotation_write(pod: PodInfo, text: str) -> Request:
    return Request(
        "PATCH",
        apipaths.PODS.path(namespace=pod.namespace, name=pod.name),
        annotation_patch(text),
        Lane.SECONDARY,
        content_type=MERGE_PATCH,
        query=_PATCH_QUERY,
    )


def event_write(
    pod: PodInfo, *, reason: str, message: str, warning: bool, now: datetime, instance: str
) -> Request:
    body = event_body(
        namespace=pod.namespace,
        pod=pod.name,
        uid=pod.uid,
        reason=reason,
        message=message,
        warning=warning,
        now=now,
        instance=instance,
    )
    return Request("POST", apipaths.EVENTS.path(namespace=pod.namespace), body, Lane.SECONDARY)


def config_status_write(status: Mapping[str, Any]) -> Request:
    # The primary lane: one small write at most every few seconds, which operators read
    # (`kubectl get hcfg`) and which must not wait behind a wave of explanations.
    return Request(
        "PATCH",
        apipaths.CONFIG_STATUS,
        config_status_patch(status),
        Lane.PRIMARY,
        content_type=MERGE_PATCH,
        query=_PATCH_QUERY,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Writer:
    http: Transport
    instance: str
    wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    async def send(self, write: Request, *, precondition: Precondition) -> ApiResponse:
        return await self.http.request(write, precondition=precondition)

    async def event(
        self,
        pod: PodInfo,
        *,
        reason: str,
        message: str,
        warning: bool,
        precondition: Precondition,
    ) -> None:
        """Record an event; a failure is logged, never retried (events are best effort)."""
        write = event_write(
            pod,
            reason=reason,
            message=message,
            warning=warning,
            now=self.wall_clock(),
            instance=self.instance,
        )
        failure = await failure_of(self.send(write, precondition=precondition))
        if failure is not None:
            log.warning("cannot record event %s: %s", reason, failure, extra=pod_context(pod))
