"""A thin raw-JSON layer over the official async client's HTTP machinery.

The `kubernetes.aio` ApiClient supplies connection pooling, TLS and credentials (tokens
are refreshed by its configuration). Bodies are decoded here with orjson into plain dicts
instead of the client's typed models: a typed model costs ~1 ms and ~98 KB per pod
(perf-facts.md), which is unusable for a cluster-wide pod cache, and the reconciler needs
the raw `Status` bodies of refusals to classify them anyway.
"""

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol

import aiohttp
import orjson
from kubernetes.aio.client import ApiClient

from reconciler.ratelimit import TokenBucket

log = logging.getLogger(__name__)

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

# Watches end server-side after timeoutSeconds; the client gives up a little later.
_WATCH_GRACE_SECONDS = 30.0


class ApiUnavailable(Exception):
    """The API server could not be reached or did not answer in time."""


class ApiError(Exception):
    """The API server refused a request the caller cannot handle."""

    def __init__(self, response: "ApiResponse") -> None:
        self.response = response
        super().__init__(f"HTTP {response.code}: {response.message}")


@dataclass(frozen=True, slots=True)
class ApiResponse:
    code: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def json(self) -> dict[str, Any]:
        """The decoded body; an empty dict when it is empty or not a JSON object."""
        if not self.body:
            return {}
        try:
            decoded = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return {}
        return decoded if isinstance(decoded, dict) else {}

    @property
    def message(self) -> str:
        message = self.json().get("message")
        return message if isinstance(message, str) else self.body[:200].decode(errors="replace")

    def raise_for_status(self) -> None:
        if not self.ok:
            raise ApiError(self)


class Requester(Protocol):
    """The one call writers need; `KubeApi` implements it, tests substitute a fake."""

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> "ApiResponse": ...


class ListWatcher(Requester, Protocol):
    """What a reflector needs: requests for lists, and watches."""

    def watch(
        self, path: str, *, query: Sequence[tuple[str, str]], timeout_seconds: int
    ) -> AbstractAsyncContextManager[AsyncIterator[bytes]]: ...


class KubeApi:
    def __init__(
        self,
        client: ApiClient,
        *,
        limiter: TokenBucket | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        self._client = client
        self._limiter = limiter
        self._timeout = timeout_seconds

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> ApiResponse:
        if self._limiter is not None:
            await self._limiter.wait()
        response = await self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            request_timeout=self._timeout,
        )
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ApiUnavailable(f"{method} {path}: {exc}") from exc
        finally:
            response.response.release()
        return ApiResponse(code=response.status, body=data)

    @asynccontextmanager
    async def watch(
        self, path: str, *, query: Sequence[tuple[str, str]], timeout_seconds: int
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a watch; yields the stream of raw event lines, or raises ApiError."""
        if self._limiter is not None:
            await self._limiter.wait()
        params = [*query, ("watch", "true"), ("timeoutSeconds", str(timeout_seconds))]
        response = await self._send(
            "GET",
            path,
            query=params,
            body=None,
            content_type=JSON,
            request_timeout=aiohttp.ClientTimeout(
                total=timeout_seconds + _WATCH_GRACE_SECONDS, sock_connect=self._timeout
            ),
        )
        try:
            if not 200 <= response.status < 300:
                raise ApiError(ApiResponse(code=response.status, body=await response.read()))
            yield _event_lines(response.response)
        finally:
            response.response.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        body: Mapping[str, Any] | None,
        content_type: str,
        request_timeout: float | aiohttp.ClientTimeout,
    ) -> Any:
        headers = {"Accept": JSON, "Content-Type": content_type}
        try:
            method, url, headers, payload, _ = await self._client.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query),
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
            )
            return await self._client.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=request_timeout
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiUnavailable(f"{method} {path}: {exc}") from exc


async def _event_lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """Newline-delimited watch events, as raw bytes."""
    try:
        while line := await response.content.readline():
            if line.strip():
                yield line
    except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ApiUnavailable(f"watch interrupted: {exc}") from exc
