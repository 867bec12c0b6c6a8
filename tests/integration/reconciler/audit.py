"""Reading the API server's audit log: which writes arrived, from whom, and when."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from devcluster import ControlPlane
from devcluster.timestamps import epoch_seconds


@dataclass(frozen=True)
class Write:
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    user: str
    code: int
    # When the API server received the request (seconds since the epoch).
    received: float


def writes(plane: ControlPlane) -> list[Write]:
    """Completed writes, in the order the API server received them."""
    found = [
        _write(event) for event in plane.audit_events() if event.get("stage") == "ResponseComplete"
    ]
    return sorted(found, key=lambda write: write.received)


def _write(event: dict[str, Any]) -> Write:
    ref = event.get("objectRef") or {}
    return Write(
        verb=str(event.get("verb")),
        resource=str(ref.get("resource") or ""),
        subresource=str(ref.get("subresource") or ""),
        namespace=str(ref.get("namespace") or ""),
        name=str(ref.get("name") or ""),
        user=str((event.get("user") or {}).get("username") or ""),
        code=int((event.get("responseStatus") or {}).get("code") or 0),
        received=epoch_seconds(str(event["requestReceivedTimestamp"])),
    )


def resizes(found: Iterable[Write], *, namespace: str) -> list[Write]:
    return [
        w
        for w in found
        if w.subresource == "resize" and w.namespace == namespace and w.verb == "patch"
    ]
