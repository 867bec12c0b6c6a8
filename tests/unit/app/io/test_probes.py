import asyncio

import httpx
import pytest

from app.io.probes import ProbeApp


@pytest.mark.parametrize(
    ("path", "missing", "status", "text"),
    [
        pytest.param("/healthz", "caches", 200, "ok", id="alive-while-syncing"),
        pytest.param("/readyz", None, 200, "ok", id="ready"),
        pytest.param("/readyz", "caches not synced: /api/v1/pods", 503, "not ready", id="syncing"),
        pytest.param("/metrics", None, 404, "not found", id="unknown-path"),
    ],
)
def test_probes(path: str, missing: str | None, status: int, text: str) -> None:
    app = ProbeApp(not_ready=lambda: [] if missing is None else [f"not ready: {missing}"])

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://probe") as client:
            return await client.get(path)

    response = asyncio.run(get())
    assert response.status_code == status
    assert response.text.startswith(text)
