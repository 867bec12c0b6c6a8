"""Deadlines for connections that stall: the TLS handshake, a request's headers and its body.

The API server opens a connection, completes the handshake and sends a request at once. A
client that stalls in the handshake, dribbles headers (slowloris) or a body holds a
socket, TLS buffers, parser state and a task for as long as the server lets it; uvicorn
has no header or body deadline, and the event loop's handshake deadline is 60 seconds.
Here:

- ``HandshakeDeadlineLoop`` gives every TLS server of the process a handshake deadline of
  ``HANDSHAKE_SECONDS`` (uvicorn creates its servers without saying one);
- ``DeadlineProtocol`` answers 408 and closes a connection whose request's headers are not
  complete ``HEADER_SECONDS`` after the connection opened or the request began, or whose
  body is not complete ``BODY_SECONDS`` after the request began. Idle keep-alive
  connections stay governed by uvicorn's keep-alive timeout.

A request only records when its deadline falls; one sweep per ``SWEEP_SECONDS`` over the
open connections enforces them. A timer per request cost more than the rest of the
transport's work on an admission.
"""

import asyncio
from typing import Any, ClassVar, Final

import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HANDSHAKE_SECONDS: Final = 5.0
HEADER_SECONDS: Final = 5.0
BODY_SECONDS: Final = 10.0
SWEEP_SECONDS: Final = 0.25


def _timeout_response(what: str, seconds: float) -> bytes:
    body = f"request {what} not received within {seconds:g}s\n".encode()
    return (
        b"HTTP/1.1 408 Request Timeout\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"content-length: %d\r\n"
        b"connection: close\r\n"
        b"\r\n%s" % (len(body), body)
    )


_HEADERS_LATE: Final = _timeout_response("headers", HEADER_SECONDS)
_BODY_LATE: Final = _timeout_response("body", BODY_SECONDS)


class HandshakeDeadlineLoop(uvloop.Loop):
    """uvloop, with a TLS handshake deadline on servers that do not set their own."""

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None and kwargs.get("ssl_handshake_timeout") is None:
            kwargs["ssl_handshake_timeout"] = HANDSHAKE_SECONDS
        return await super().create_server(*args, **kwargs)


class DeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with deadlines on each request's headers and body.

    The open connections and the one sweep that checks them are the process's: it runs
    a single event loop.
    """

    _open: ClassVar[set["DeadlineProtocol"]] = set()
    _sweep: ClassVar[asyncio.TimerHandle | None] = None

    # When the current request (or the connection, before its first) must be in by:
    # its headers while _late is _HEADERS_LATE, its body while it is _BODY_LATE.
    _deadline: float | None = None
    _late: bytes = _HEADERS_LATE
    _began: float = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._awaiting_headers()
        self._open.add(self)
        if DeadlineProtocol._sweep is None:
            DeadlineProtocol._sweep = self.loop.call_later(SWEEP_SECONDS, _sweep, self.loop)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers()

    def on_headers_complete(self) -> None:
        self._deadline = self._began + BODY_SECONDS
        self._late = _BODY_LATE
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._deadline = None
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._open.discard(self)
        super().connection_lost(exc)

    def _awaiting_headers(self) -> None:
        self._began = self.loop.time()
        self._deadline = self._began + HEADER_SECONDS
        self._late = _HEADERS_LATE

    def expire(self, now: float) -> None:
        """Answer 408 and close if the deadline has passed."""
        if self._deadline is None or now < self._deadline or self.transport.is_closing():
            return
        self._deadline = None
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(self._late)
        self.transport.close()


def _sweep(loop: asyncio.AbstractEventLoop) -> None:
    now = loop.time()
    for protocol in list(DeadlineProtocol._open):
        protocol.expire(now)
    # Idle (no connections), the sweep stops; the next connection starts it again.
    DeadlineProtocol._sweep = (
        loop.call_later(SWEEP_SECONDS, _sweep, loop) if DeadlineProtocol._open else None
    )
