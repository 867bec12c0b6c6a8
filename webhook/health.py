"""Liveness and readiness: ready only with a healthy certificate and a synced cluster cache."""

from typing import Protocol

from starlette.types import Receive, Scope, Send

from app.io.metrics_server import send_text
from certs.source import CertificateSource


class Syncable(Protocol):
    def unsynced(self) -> list[str]: ...


class Health:
    def __init__(self, *, certificates: CertificateSource, cluster: Syncable) -> None:
        self._certificates = certificates
        self._cluster = cluster

    def not_ready(self) -> list[str]:
        """Why the webhook should not receive traffic yet; empty when ready."""
        reasons = []
        if not self._certificates.healthy():
            reasons.append("serving certificate is not healthy")
        reasons += [f"{resource} not synced" for resource in self._cluster.unsynced()]
        return reasons


class ProbeApp:
    """Plain-HTTP ``/healthz`` and ``/readyz`` for the kubelet (``--health-probe-bind-address``)."""

    def __init__(self, health: Health) -> None:
        self._health = health

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/healthz":
            await send_text(send, 200, "ok")
        elif scope["path"] == "/readyz":
            reasons = self._health.not_ready()
            await send_text(send, 503 if reasons else 200, "; ".join(reasons) or "ok")
        else:
            await send_text(send, 404, "not found; probes are /healthz and /readyz")
