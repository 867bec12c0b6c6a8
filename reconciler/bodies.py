"""Request bodies the reconciler sends, as pure functions of what it decided.

Everything here is plain data so the exact JSON is testable without an API server.
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from app.core.labels import API_VERSION, CONFIG_KIND, CONFIG_NAME, STATUS_ANNOTATION
from app.core.quantity import format_cpu_millis


class EventReason(StrEnum):
    """The reasons of the events the reconciler records (the runbook lists each)."""

    CPU_LIMIT_ADJUSTED = "CPULimitAdjusted"
    RESIZE_INFEASIBLE = "ResizeInfeasible"
    RESIZE_FORBIDDEN = "ResizeForbidden"
    INVALID_MAX_CPU = "InvalidMaxCPU"


EVENT_SOURCE: Final = "headroom-reconciler"
REPORTING_CONTROLLER: Final = "kube-headroom.dev/reconciler"


def resize_apply_body(
    *,
    namespace: str,
    name: str,
    containers: Mapping[str, int],
    sidecars: Mapping[str, int],
) -> dict[str, Any]:
    """Server-side apply body for `pods/resize` naming only the CPU limits Headroom sets.

    With server-side apply, a field the manager owned and no longer names is removed. The
    caller therefore always names every container whose limit Headroom sets (every
    request-bearing container, and an excluded one at the limit it has), never a subset,
    so a later apply cannot drop a limit.
    Sidecars (restartable init containers) live under `spec.initContainers`.
    """
    spec: dict[str, Any] = {"containers": _limits(containers)}
    if sidecars:
        spec["initContainers"] = _limits(sidecars)
    return _pod_apply(namespace=namespace, name=name, spec=spec)


def pod_level_resize_apply_body(*, namespace: str, name: str, cpu_m: int) -> dict[str, Any]:
    """Server-side apply body for `pods/resize` setting only the pod-level CPU limit.

    Pods with pod-level resources get their limit there; their containers' limits are
    never named, so Headroom never owns or changes them.
    """
    spec = {"resources": {"limits": {"cpu": format_cpu_millis(cpu_m)}}}
    return _pod_apply(namespace=namespace, name=name, spec=spec)


def _pod_apply(*, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _limits(limits: Mapping[str, int]) -> list[dict[str, Any]]:
    return [
        {"name": container, "resources": {"limits": {"cpu": format_cpu_millis(millis)}}}
        for container, millis in limits.items()
    ]


def annotation_patch(text: str) -> dict[str, Any]:
    """Merge patch that sets only the status annotation on a pod's metadata."""
    return {"metadata": {"annotations": {STATUS_ANNOTATION: text}}}


def event_body(
    *,
    namespace: str,
    pod: str,
    uid: str,
    reason: str,
    message: str,
    warning: bool,
    now: datetime,
    instance: str,
) -> dict[str, Any]:
    """A core/v1 Event about a pod, shown by `kubectl describe pod`."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": namespace,
            "name": pod,
            "uid": uid,
        },
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": EVENT_SOURCE},
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def config_status_patch(status: Mapping[str, Any]) -> dict[str, Any]:
    """Merge patch for the HeadroomConfig `status` subresource."""
    return {
        "apiVersion": API_VERSION,
        "kind": CONFIG_KIND,
        "metadata": {"name": CONFIG_NAME},
        "status": dict(status),
    }
