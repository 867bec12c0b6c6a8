"""Liveness and readiness (`/healthz`, `/readyz`) for the kubelet's probes, for both processes.

Alive while the event loop answers; ready when nothing stands in the way, else 503 with
what does (the reasons joined by "; ").
"""

from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from app.io.metrics_server import send_text

LIVENESS = "/healthz"
READINESS = "/readyz"


def probe_answer(path: str, not_ready: Callable[[], list[str]]) -> tuple[int, str]:
    """The status and text a probe of `path` gets."""
    if path == LIVENESS:
        return 200, "ok"
    if path == READINESS:
        reasons = not_ready()
        return (503, "; ".join(reasons)) if reasons else (200, "ok")
    return 404, f"not found; probes are {LIVENESS} and {READINESS}"


class ProbeApp:
    """The probes on a listener of their own (`--health-probe-bind-address`)."""

    def __init__(self, *, not_ready: Callable[[], list[str]]) -> None:
        self._not_ready = not_ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send_text(send, *probe_answer(scope["path"], self._not_ready))
