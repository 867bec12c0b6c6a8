"""Liveness and readiness endpoints (`/healthz`, `/readyz`) for the kubelet's probes."""

from collections.abc import Callable

from starlette.types import Receive, Scope, Send

from app.io.metrics_server import send_text


class ProbeApp:
    """Alive while the event loop answers; ready once every cache has synced."""

    def __init__(self, *, ready: Callable[[], str | None]) -> None:
        # `ready` returns None when ready, else what is still missing.
        self._ready = ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/healthz":
            await send_text(send, 200, "ok")
        elif path == "/readyz":
            missing = self._ready()
            if missing is None:
                await send_text(send, 200, "ok")
            else:
                await send_text(send, 503, f"not ready: {missing}")
        else:
            await send_text(send, 404, "not found; probes are /healthz and /readyz")
