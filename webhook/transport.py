"""Deadlines for connections that never get to a request: the TLS handshake and the headers.

The API server opens a connection, completes the handshake and sends a request's headers
at once. A client that stalls in the handshake or dribbles headers (slowloris) holds a
socket, TLS buffers and parser state for as long as the server lets it; uvicorn has no
header deadline, and the event loop's handshake deadline is 60 seconds. Here:

- ``HandshakeDeadlineLoop`` gives every TLS server of the process a handshake deadline of
  ``HANDSHAKE_SECONDS`` (uvicorn creates its servers without saying one);
- ``HeaderDeadlineProtocol`` closes a connection whose next request's headers are not
  complete ``HEADER_SECONDS`` after the connection opened or the request began, answering
  408 first. Idle keep-alive connections stay governed by uvicorn's keep-alive timeout,
  and a body that stalls is the app's to time out.
"""

import asyncio
from typing import Any, Final

import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HANDSHAKE_SECONDS: Final = 5.0
HEADER_SECONDS: Final = 5.0
_LATE_BODY: Final = f"request headers not received within {HEADER_SECONDS:g}s\n".encode()
_REQUEST_TIMEOUT: Final = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\n"
    b"connection: close\r\n"
    b"\r\n%s" % (len(_LATE_BODY), _LATE_BODY)
)


class HandshakeDeadlineLoop(uvloop.Loop):
    """uvloop, with a TLS handshake deadline on servers that do not set their own."""

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None and kwargs.get("ssl_handshake_timeout") is None:
            kwargs["ssl_handshake_timeout"] = HANDSHAKE_SECONDS
        return await super().create_server(*args, **kwargs)


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's headers."""

    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(HEADER_SECONDS, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.write(_REQUEST_TIMEOUT)
            self.transport.close()
