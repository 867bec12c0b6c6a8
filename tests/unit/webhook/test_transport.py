"""Connections that never get to a request, against the real webhook process over TLS:
a stalled TLS handshake, headers dribbled a byte at a time (slowloris), a stalled body.
Each is closed at its deadline while the server keeps answering real reviews."""

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass

import httpx

from tests.unit.webhook.builders import admission_review, new_pod
from tests.unit.webhook.process import Running
from webhook.transport import BODY_SECONDS, HANDSHAKE_SECONDS, HEADER_SECONDS, SWEEP_SECONDS

SLOWLORIS = 100
HALF_OPEN = 50
# Deadlines are checked every SWEEP_SECONDS; beyond that, scheduling slack on a busy machine.
SLACK_SECONDS = SWEEP_SECONDS + 3.0
GIVE_UP_SECONDS = 30.0


@dataclass(frozen=True)
class Closed:
    """How long a connection lived, bracketed: the server's clock for it started after
    ``dialled`` (so ``at_least`` never overstates the deadline's wait) and no later than
    ``opened`` (so ``at_most`` is what scheduling slack on a busy client can add to)."""

    at_least: float
    at_most: float
    answer: bytes


async def _read_until_closed(
    reader: asyncio.StreamReader, *, dialled: float, opened: float
) -> Closed:
    answer = b""
    try:
        async with asyncio.timeout(GIVE_UP_SECONDS):
            while chunk := await reader.read(4096):
                answer += chunk
    except (ConnectionError, ssl.SSLError):
        pass
    ended = time.monotonic()
    return Closed(at_least=ended - dialled, at_most=ended - opened, answer=answer)


async def _dribble(writer: asyncio.StreamWriter, data: bytes, *, every: float) -> None:
    """Send ``data`` a byte at a time until the server hangs up."""
    try:
        for index in range(len(data)):
            writer.write(data[index : index + 1])
            await writer.drain()
            await asyncio.sleep(every)
    except (ConnectionError, ssl.SSLError, RuntimeError):
        return


async def _slowloris(port: int, context: ssl.SSLContext) -> Closed:
    dialled = time.monotonic()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
    )
    opened = time.monotonic()
    headers = b"POST /mutate/pods HTTP/1.1\r\nhost: webhook\r\nx-slow: " + b"a" * 200
    dribbler = asyncio.create_task(_dribble(writer, headers, every=0.2))
    try:
        return await _read_until_closed(reader, dialled=dialled, opened=opened)
    finally:
        dribbler.cancel()
        await _close(writer)


async def _slow_body(port: int, context: ssl.SSLContext) -> Closed:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
    )
    writer.write(
        b"POST /mutate/pods HTTP/1.1\r\nhost: webhook\r\n"
        b"content-type: application/json\r\ncontent-length: 1000\r\n\r\n"
    )
    # The body's clock starts when the server has read the headers, after this write.
    started = time.monotonic()
    dribbler = asyncio.create_task(_dribble(writer, b"{" + b" " * 999, every=0.2))
    try:
        return await _read_until_closed(reader, dialled=started, opened=started)
    finally:
        dribbler.cancel()
        await _close(writer)


async def _half_open(port: int, hello: bytes) -> Closed:
    """A TCP connection that starts a TLS handshake (or not) and never finishes it."""
    dialled = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    writer.write(hello)
    try:
        return await _read_until_closed(reader, dialled=dialled, opened=opened)
    finally:
        await _close(writer)


async def _valid_review(port: int, context: ssl.SSLContext) -> int:
    await asyncio.sleep(1)
    async with httpx.AsyncClient(verify=context, timeout=10) as client:
        reply = await client.post(
            f"https://127.0.0.1:{port}/mutate/pods", json=admission_review(new_pod())
        )
    return reply.status_code


async def _attack(port: int, context: ssl.SSLContext) -> tuple[list[Closed], ...]:
    # A TLS record header announcing a ClientHello whose body never comes.
    partial_hello = b"\x16\x03\x01\x02\x00\x01"
    slowloris = [_slowloris(port, context) for _ in range(SLOWLORIS)]
    half_open = [_half_open(port, b"" if i % 2 else partial_hello) for i in range(HALF_OPEN)]
    results = await asyncio.gather(
        asyncio.gather(*slowloris),
        asyncio.gather(*half_open),
        asyncio.gather(_slow_body(port, context)),
        _valid_review(port, context),
    )
    *closed, status = results
    assert status == 200
    return tuple(closed)


def test_stalled_connections_are_closed_at_their_deadlines(webhook_process: Running) -> None:
    context = ssl.create_default_context(cafile=str(webhook_process.certs / "ca.crt"))
    slowloris, half_open, slow_body = asyncio.run(
        _attack(webhook_process.ports["webhook"], context)
    )

    for closed in slowloris:
        assert closed.at_least >= HEADER_SECONDS - 0.5
        assert closed.at_most <= HEADER_SECONDS + SLACK_SECONDS
        assert closed.answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert closed.answer.endswith(b"request headers not received within 5s\n")
    for closed in half_open:
        assert closed.at_least >= HANDSHAKE_SECONDS - 0.5
        assert closed.at_most <= HANDSHAKE_SECONDS + SLACK_SECONDS
    [body] = slow_body
    assert body.at_least >= BODY_SECONDS - 0.5
    assert body.at_most <= BODY_SECONDS + SLACK_SECONDS
    assert body.answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert body.answer.endswith(b"request body not received within 10s\n")
    assert webhook_process.process.poll() is None


async def _close(writer: asyncio.StreamWriter) -> None:
    # Let the TLS shutdown finish before the loop ends, so no transport is left for the
    # garbage collector to find during a later test.
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
