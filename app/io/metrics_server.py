"""The /metrics endpoint both processes serve (HTTPS on :8443 behind Kubernetes authn/authz).

A scrape must carry a bearer token that a TokenReview authenticates and a
SubjectAccessReview allows to ``get`` the ``/metrics`` non-resource URL; answers are
cached briefly so a scrape every few seconds costs no API calls. ``--metrics-secure=false``
serves plain HTTP without authentication, for local runs only.

``Listener`` (one uvicorn server on one address, TLS from a certificate source) is also
what the webhook process uses for its admission and probe servers.
"""

import asyncio
import contextlib
import gzip
import hashlib
import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from enum import StrEnum
from typing import Any, Final, Protocol

import uvicorn
from prometheus_client import CollectorRegistry, exposition
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.apipaths import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, Resource
from certs.source import CertificateSource

logger = logging.getLogger(__name__)

METRICS_PATH: Final = "/metrics"
_REVIEW_SECONDS: Final = 5.0
# The fields of a TokenReview's user, by the SubjectAccessReview spec key they fill.
_USER_FIELDS: Final = {"user": "username", "uid": "uid", "groups": "groups", "extra": "extra"}


class Access(StrEnum):
    ALLOWED = "allowed"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"


class AccessReviewer(Protocol):
    async def review(self, token: str) -> Access:
        """Whether the bearer of ``token`` may read the metrics."""


class JsonPoster(Protocol):
    async def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]: ...


class KubeAccessReviewer:
    """TokenReview, then SubjectAccessReview for ``get`` on ``/metrics``; results cached."""

    def __init__(
        self,
        api: JsonPoster,
        *,
        ttl_seconds: float = 10.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._ttl = ttl_seconds
        self._max_entries = max_entries
        self._clock = clock
        # Keyed by a digest so raw tokens are not kept in memory longer than a request.
        self._cache: dict[bytes, tuple[Access, float]] = {}

    async def review(self, token: str) -> Access:
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        async with asyncio.timeout(_REVIEW_SECONDS):
            access = await self._review(token)
        if len(self._cache) >= self._max_entries:
            self._cache = {k: v for k, v in self._cache.items() if v[1] > now}
            if len(self._cache) >= self._max_entries:
                self._cache.clear()
        self._cache[key] = (access, now + self._ttl)
        return access

    async def _review(self, token: str) -> Access:
        token_review = await self._post(TOKEN_REVIEWS, "TokenReview", {"token": token})
        status = token_review.get("status") or {}
        if not status.get("authenticated"):
            return Access.UNAUTHENTICATED
        user = status.get("user") or {}
        spec = {key: user[field] for key, field in _USER_FIELDS.items() if user.get(field)}
        spec["nonResourceAttributes"] = {"path": METRICS_PATH, "verb": "get"}
        access_review = await self._post(SUBJECT_ACCESS_REVIEWS, "SubjectAccessReview", spec)
        allowed = (access_review.get("status") or {}).get("allowed") is True
        return Access.ALLOWED if allowed else Access.FORBIDDEN

    async def _post(self, resource: Resource, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": resource.api_version, "kind": kind, "spec": spec}
        return await self._api.post(resource.path(), body)


class MetricsApp:
    """ASGI app serving one registry at /metrics, optionally behind an AccessReviewer."""

    def __init__(self, *, registry: CollectorRegistry, reviewer: AccessReviewer | None) -> None:
        self._registry = registry
        self._reviewer = reviewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != METRICS_PATH:
            await send_text(send, 404, "not found; metrics are at /metrics")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await send_text(send, 405, "only GET is served")
            return
        if self._reviewer is not None:
            token = _bearer_token(scope)
            if token is None:
                await send_text(send, 401, "a bearer token is required")
                return
            try:
                access = await self._reviewer.review(token)
            except Exception:
                logger.warning("cannot review metrics credentials", exc_info=True)
                await send_text(send, 503, "cannot review credentials right now")
                return
            if access is Access.UNAUTHENTICATED:
                await send_text(send, 401, "the bearer token is not valid")
                return
            if access is Access.FORBIDDEN:
                await send_text(send, 403, "not allowed to get /metrics")
                return
        await self._expose(scope, send)

    async def _expose(self, scope: Scope, send: Send) -> None:
        """The registry in the format the scraper accepts, gzipped if it accepts that.
        Formatting is pure Python and grows with the cluster (about 3 s for 150,000 pods'
        bookings, measured): a worker thread does it, so the event loop, which stalled
        for all of it, now waits at most about 0.1 s at a time."""
        encoder, content_type = exposition.choose_encoder(_header(scope, b"accept"))
        gzipped = exposition.gzip_accepted(_header(scope, b"accept-encoding"))

        def bake() -> bytes:
            body = encoder(self._registry)
            return gzip.compress(body) if gzipped else body

        body = await asyncio.to_thread(bake)
        headers = [(b"content-type", content_type.encode())]
        if gzipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str:
    """Every value of the request header ``name``, comma-joined."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    return ",".join(value.decode("latin-1") for key, value in headers if key == name)


def _bearer_token(scope: Scope) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            return token if scheme.lower() == "bearer" and token else None
    return None


async def send_text(send: Send, status: int, text: str) -> None:
    body = text.encode() + b"\n"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def parse_bind_address(text: str) -> tuple[str, int]:
    """``":8443"`` (all IPv4 interfaces), ``"127.0.0.1:0"`` or ``"[::1]:9443"`` to (host, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"bind address {text!r} is not HOST:PORT or :PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"bind address {text!r}: write IPv6 hosts in brackets, [::1]:PORT")
    return host or "0.0.0.0", int(port_text)  # noqa: S104 - binding all interfaces is the point


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Several servers share one process; its entry point owns the signals and stops them all.
        yield


class ListenError(Exception):
    """A listener could not bind its address."""


class Listener:
    """One uvicorn server for ``app`` on ``address`` (``[HOST]:PORT``); HTTPS when given a
    certificate source.

    ``bind()`` opens the socket up front so a taken port fails start-up with a clear
    message, and so a port of 0 is known before serving.
    """

    def __init__(
        self,
        *,
        name: str,
        app: ASGIApp,
        address: str,
        certificates: CertificateSource | None,
        keep_alive_seconds: int = 5,
        http_protocol: type[asyncio.Protocol] | None = None,
    ) -> None:
        self.name = name
        self._host, self._port = parse_bind_address(address)
        self._certificates = certificates
        self._socket: socket.socket | None = None
        # uvicorn's ssl_* options take file paths and build a context once. Handing it the
        # source's own context instead lets a rotated certificate reach new handshakes.
        context = None if certificates is None else certificates.ssl_context()
        self._server = _Server(
            uvicorn.Config(
                app,
                http=http_protocol or "httptools",
                lifespan="off",
                log_config=None,
                access_log=False,
                proxy_headers=False,
                server_header=False,
                timeout_keep_alive=keep_alive_seconds,
                timeout_graceful_shutdown=10,
                ssl_context_factory=None if context is None else lambda _config, _default: context,
            )
        )

    def bind(self) -> int:
        """Open the listening socket (once); returns the bound port."""
        if self._socket is None:
            family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
            try:
                self._socket = socket.create_server(
                    (self._host, self._port), family=family, backlog=2048
                )
            except OSError as err:
                raise ListenError(
                    f"{self.name} server cannot listen on {self._host}:{self._port}: {err}"
                ) from err
        return int(self._socket.getsockname()[1])

    async def serve(self) -> None:
        port = self.bind()
        assert self._socket is not None
        if self._certificates is not None:
            await self._certificates.start()
        scheme = "https" if self._certificates is not None else "http"
        logger.info("%s server listening on %s://%s:%d", self.name, scheme, self._host, port)
        try:
            await self._server.serve(sockets=[self._socket])
        finally:
            if self._certificates is not None:
                await self._certificates.stop()

    def stop(self) -> None:
        self._server.should_exit = True
