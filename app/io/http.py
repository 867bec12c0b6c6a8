"""The one HTTP transport to the API server: raw JSON requests and watch streams.

Credentials, TLS and token refresh come from the official client's configuration
(`kubernetes.aio`); the requests themselves go straight to aiohttp. The generated client's
request path (`param_serialize`, then `call_api` with stdlib JSON encoding) costs about
80 µs per call before any I/O, and its typed models about 1 ms and 98 KB per pod
(perf-facts.md): both are skipped here. Bodies are encoded and decoded with orjson.

Status handling lives here too: a transport failure or timeout is `ApiUnavailable`, a
non-2xx answer is an `ApiResponse` the caller classifies (or `ApiError` from the
convenience calls). Writes name a `Lane`, whose `WriteBudget` they spend a token of; the
token is taken first, then an optional precondition is checked right before the request
goes out, so a write that is no longer wanted is never sent.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlencode

import aiohttp
import orjson
from kubernetes.aio.client import ApiClient
from kubernetes.aio.client.rest import RESTClientObject

from app.io.budget import Lane, WriteBudget

log = logging.getLogger(__name__)

JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
# The objects' metadata alone, for a list and for a watch's events.
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA: Final = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

# A watch is closed by the server after this long and re-opened.
WATCH_SECONDS: Final = 300
# The client allows the server this margin past a watch's timeoutSeconds.
_WATCH_GRACE_SECONDS: Final = 30.0
# A watch that delivers nothing at all (not even a bookmark) for this long is presumed
# dead: its connection may be open while the server behind it is gone.
WATCH_IDLE_SECONDS: Final = 90.0
# Backstop for single requests.
REQUEST_SECONDS: Final = 30.0
# Watch events can exceed aiohttp's default line buffer.
_READ_BUFFER: Final = 2**21
# Identifies the process in the API server's audit log and metrics, as client-go does.
DEFAULT_USER_AGENT: Final = "kube-headroom"
# Writes in flight at once, per lane. The budgets pace them; bounding their concurrency as
# well keeps a slow API server from costing a new TLS connection per queued write, while
# leaving room for a budget's worth of writes waiting a second each for their answers.
MAX_WRITES_IN_FLIGHT: Final = 32
# Idle connections are kept this long (closed at the pool's next sweep, so within twice
# this), so a wave's writes reuse them. Not longer: each TLS connection holds about 150 KiB
# of buffers, and a wave leaves up to MAX_WRITES_IN_FLIGHT of them behind.
KEEPALIVE_SECONDS: Final = 10.0


class ApiUnavailable(Exception):
    """The API server could not be reached or did not answer in time."""


@dataclass(frozen=True, slots=True)
class ApiResponse:
    code: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def json(self) -> dict[str, Any]:
        """The decoded body; an empty dict when it is empty or not a JSON object."""
        try:
            decoded = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return {}
        return decoded if isinstance(decoded, dict) else {}

    @property
    def message(self) -> str:
        message = self.json().get("message")
        return message if isinstance(message, str) else self.body[:200].decode(errors="replace")

    @property
    def reason(self) -> str:
        reason = self.json().get("reason")
        return reason if isinstance(reason, str) else ""

    def raise_for_status(self) -> None:
        if not self.ok:
            raise ApiError.from_response(self)


class ApiError(Exception):
    """A non-2xx answer, with the API's Status reason and message when it sent one."""

    def __init__(self, *, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @classmethod
    def from_response(cls, response: ApiResponse) -> "ApiError":
        return cls(status=response.code, reason=response.reason, message=response.message)


async def failure_of(request: Awaitable[ApiResponse]) -> str | None:
    """Why a request did not succeed (the API server unreachable, or its answer's message);
    None when it did."""
    try:
        response = await request
    except ApiUnavailable as exc:
        return str(exc)
    return None if response.ok else response.message


class Skipped(Exception):
    """A write's precondition no longer held once its turn came; nothing was sent."""


@dataclass(frozen=True, slots=True)
class Request:
    """One request, as a value built with no I/O; a `Transport` sends it."""

    method: str
    path: str
    body: Mapping[str, Any] | None = None
    # The write budget it spends a token of; reads and the Lease spend none.
    lane: Lane | None = None
    content_type: str = JSON
    query: tuple[tuple[str, str], ...] = ()
    accept: str = JSON


class Transport(Protocol):
    """What sends writes, the lease elector's requests and the reflectors' lists;
    `KubeHttp` implements it, unit tests record it."""

    async def request(
        self, request: Request, *, precondition: Callable[[], bool] | None = None
    ) -> ApiResponse: ...


class KubeHttp:
    def __init__(
        self,
        client: ApiClient,
        *,
        budgets: Mapping[Lane, WriteBudget] | None = None,
        timeout_seconds: float = REQUEST_SECONDS,
        user_agent: str = DEFAULT_USER_AGENT,
    ) -> None:
        self._client = client
        self._user_agent = user_agent
        self._configuration = client.configuration
        self._budgets = dict(budgets or {})
        self._timeout = timeout_seconds
        self._session: aiohttp.ClientSession | None = None
        self._writes = {lane: asyncio.Semaphore(MAX_WRITES_IN_FLIGHT) for lane in Lane}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        await self._client.close()  # type: ignore[no-untyped-call]

    async def request(
        self, request: Request, *, precondition: Callable[[], bool] | None = None
    ) -> ApiResponse:
        """Send one request and read the whole answer.

        With a `lane`, a token of its budget is taken first; `precondition` is then checked
        right before sending, and when it fails the token is refunded and `Skipped` raised.
        """
        lane = request.lane
        budget = None if lane is None else self._budgets.get(lane)
        # The token first: a write holds a connection slot only once it may go.
        if budget is not None:
            await budget.acquire()
        async with contextlib.nullcontext() if lane is None else self._writes[lane]:
            if precondition is not None and not precondition():
                if budget is not None:
                    budget.refund()
                raise Skipped
            try:
                timeout = aiohttp.ClientTimeout(total=self._timeout)
                async with self._open(request, timeout) as response:
                    return ApiResponse(code=response.status, body=await response.read())
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                failure = exc or type(exc).__name__
                raise ApiUnavailable(f"{request.method} {request.path}: {failure}") from exc

    async def get(
        self, path: str, *, params: Mapping[str, str] | None = None, accept: str = JSON
    ) -> dict[str, Any]:
        query = tuple((params or {}).items())
        return _decoded(await self.request(Request("GET", path, query=query, accept=accept)))

    async def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return _decoded(await self.request(Request("POST", path, body)))

    @asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        timeout_seconds: int = WATCH_SECONDS,
        idle_seconds: float = WATCH_IDLE_SECONDS,
        accept: str = JSON,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a watch; yields its newline-delimited events as raw bytes.

        Raises `ApiError` when the server refuses the watch, and `ApiUnavailable` when the
        connection fails or stays silent for `idle_seconds`.
        """
        # A parameter the caller passed too (the reflector asks for bookmarks) is sent once.
        params = {
            **dict(query),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        watch = Request("GET", path, query=tuple(params.items()), accept=accept)
        timeout = aiohttp.ClientTimeout(
            total=timeout_seconds + _WATCH_GRACE_SECONDS,
            sock_connect=self._timeout,
            sock_read=idle_seconds,
        )
        try:
            async with self._open(watch, timeout) as response:
                if not 200 <= response.status < 300:
                    data = await response.read()
                    raise ApiError.from_response(ApiResponse(code=response.status, body=data))
                yield _lines(response)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiUnavailable(f"watch {path}: {exc or type(exc).__name__}") from exc

    @asynccontextmanager
    async def _open(
        self, request: Request, client_timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        url = f"{self._configuration.host}{request.path}"
        if request.query:
            url = f"{url}?{urlencode(request.query)}"
        body = request.body
        headers = {
            "Accept": request.accept,
            "Content-Type": request.content_type,
            "User-Agent": self._user_agent,
            **(await self._auth_headers()),
        }
        async with self._connection().request(
            request.method,
            url,
            data=orjson.dumps(body) if body is not None else None,
            headers=headers,
            timeout=client_timeout,
            server_hostname=self._configuration.tls_server_name or None,
            proxy=self._configuration.proxy or None,
        ) as response:
            yield response

    async def _auth_headers(self) -> dict[str, str]:
        # auth_settings() runs the configuration's refresh hook, so rotated service-account
        # tokens and expiring exec credentials are picked up.
        settings = await self._configuration.auth_settings()
        return {
            str(setting["key"]): str(setting["value"])
            for setting in settings.values()
            if setting.get("in") == "header" and setting.get("value")
        }

    def _connection(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # The official client's REST object builds the SSL context (CA, client
            # certificate, verification) from the configuration; its session is not used.
            ssl_context = RESTClientObject(self._configuration).ssl_context
            # The proxy, if any, is the kubeconfig's (`proxy-url`): reading the proxy
            # environment on every request would cost a thread hop each.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    ssl=ssl_context,
                    limit=100,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                    ttl_dns_cache=None,
                ),
                read_bufsize=_READ_BUFFER,
            )
        return self._session


def _decoded(response: ApiResponse) -> dict[str, Any]:
    """The JSON object a 2xx answer carries; `ApiError` for any other answer."""
    response.raise_for_status()
    try:
        decoded = orjson.loads(response.body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(status=response.code, reason="BadResponse", message=str(exc)) from exc
    if not isinstance(decoded, dict):
        raise ApiError(status=response.code, reason="BadResponse", message="not an object")
    return decoded


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        while line := await response.content.readline():
            if line.strip():
                yield line
    except (aiohttp.ClientError, TimeoutError, asyncio.IncompleteReadError) as exc:
        raise ApiUnavailable(f"watch interrupted: {exc or type(exc).__name__}") from exc
