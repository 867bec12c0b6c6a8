"""JSON requests and watches over the API server's REST paths, decoded with orjson into dicts.

The generated async client handles credentials, TLS and token refresh; this layer only
skips its typed models, which cost ~4x the decode time of plain dicts (perf-facts.md) and
are not needed for the few fields Headroom reads.
"""

from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from kubernetes.aio import client as aio_client

# A watch is closed by the server after this long and re-opened; the client allows a margin.
WATCH_SECONDS = 300
_WATCH_CLIENT_MARGIN = 30
# Backstop for single requests; callers bound their own waits tighter with asyncio.timeout.
_REQUEST_SECONDS = 30.0


class ApiError(Exception):
    """A non-2xx answer, with the API's Status reason and message when it sent one."""

    def __init__(self, *, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class KubeHttp:
    def __init__(self, api_client: aio_client.ApiClient) -> None:
        self._api = api_client

    async def close(self) -> None:
        await self._api.close()  # type: ignore[no-untyped-call]

    async def get(self, path: str, *, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return await self._json("GET", path, params=params, body=None)

    async def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._json("POST", path, params=None, body=body)

    async def watch(
        self, path: str, *, params: Mapping[str, str], timeout_seconds: int = WATCH_SECONDS
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events (``{"type": ..., "object": {...}}``) until the server ends the watch."""
        query = {
            **params,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        response = await self._send(
            "GET",
            path,
            params=query,
            body=None,
            request_seconds=timeout_seconds + _WATCH_CLIENT_MARGIN,
        )
        try:
            if response.status >= 300:
                raise _api_error(response.status, await response.read())
            while line := await response.content.readline():
                if line.strip():
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise ApiError(
                            status=int(status.get("code") or 500),
                            reason=str(status.get("reason") or "Error"),
                            message=str(status.get("message") or ""),
                        )
                    yield event
        finally:
            response.release()

    async def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        response = await self._send(
            method, path, params=params, body=body, request_seconds=_REQUEST_SECONDS
        )
        try:
            data = await response.read()
        finally:
            response.release()
        if response.status >= 300:
            raise _api_error(response.status, data)
        decoded = orjson.loads(data)
        if not isinstance(decoded, dict):
            raise ApiError(status=response.status, reason="BadResponse", message="not an object")
        return decoded

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
        request_seconds: float,
    ) -> Any:
        method, url, headers, payload, _ = await self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((params or {}).items()),
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=dict(body) if body is not None else None,
            auth_settings=["BearerToken"],
        )
        rest_response = await self._api.call_api(
            method,
            url,
            header_params=headers,
            body=payload,
            _request_timeout=request_seconds,
            _preload_content=False,
        )
        return rest_response.response


def _api_error(status: int, data: bytes) -> ApiError:
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict):
        return ApiError(
            status=status,
            reason=str(decoded.get("reason") or ""),
            message=str(decoded.get("message") or ""),
        )
    return ApiError(status=status, reason="", message=data[:200].decode(errors="replace"))
