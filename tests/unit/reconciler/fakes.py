"""Test doubles for the reconciler: a settable clock with timers, a scripted random source,
and a transport fake at the level of the project's own `Transport` interface."""

import asyncio
import heapq
import itertools
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.io.budget import Lane
from app.io.http import ApiResponse, Request, Skipped


class FakeClock:
    """A settable clock with timers: `advance` moves time and fires what came due."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._timers: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], object]) -> "_Timer":
        timer = _Timer(callback)
        heapq.heappush(self._timers, (self.now + max(0.0, delay), next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._timers and self._timers[0][0] <= self.now:
            _, _, timer = heapq.heappop(self._timers)
            timer.fire()


class _Timer:
    def __init__(self, callback: Callable[[], object]) -> None:
        self._callback: Callable[[], object] | None = callback

    def cancel(self) -> None:
        self._callback = None

    def fire(self) -> None:
        if self._callback is not None:
            callback, self._callback = self._callback, None
            callback()


class FixedRandom(random.Random):
    """`uniform(a, b)` returns the point `fraction` of the way from a to b."""

    def __init__(self, fraction: float = 0.5) -> None:
        super().__init__(0)
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction

    def random(self) -> float:
        return self.fraction


@dataclass(frozen=True)
class SentRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Mapping[str, Any] | None
    content_type: str
    lane: Lane | None


class FakeApi:
    """Records every request it sends; answers from a script keyed by (method, path), else
    success. Like `KubeHttp`, a request whose precondition fails is not sent (`Skipped`).

    `hold()` makes requests wait for `release()`, to act while writes are in flight.
    """

    def __init__(self) -> None:
        self.sent: list[SentRequest] = []
        self.skipped: list[tuple[str, str]] = []
        self.answers: dict[tuple[str, str], ApiResponse] = {}
        self.after_send: Callable[[SentRequest], None] | None = None
        self._gate: asyncio.Event | None = None

    def answer(self, method: str, path: str, *, code: int, body: Mapping[str, Any]) -> None:
        self.answers[(method, path)] = ApiResponse(code=code, body=orjson.dumps(body))

    def hold(self) -> None:
        self._gate = asyncio.Event()

    def release(self) -> None:
        if self._gate is not None:
            self._gate.set()
        self._gate = None

    async def request(
        self, request: Request, *, precondition: Callable[[], bool] | None = None
    ) -> ApiResponse:
        method, path = request.method, request.path
        if self._gate is not None:
            await self._gate.wait()
        if precondition is not None and not precondition():
            self.skipped.append((method, path))
            raise Skipped
        sent = SentRequest(
            method, path, dict(request.query), request.body, request.content_type, request.lane
        )
        self.sent.append(sent)
        if self.after_send is not None:
            self.after_send(sent)
        scripted = self.answers.get((method, path))
        if scripted is not None:
            return scripted
        return ApiResponse(code=201 if method == "POST" else 200, body=b"{}")

    def writes(self, *, kind: str) -> list[SentRequest]:
        """Requests of one kind: "resize", "annotation", "event" or "status"."""
        return [request for request in self.sent if _kind(request) == kind]


def _kind(request: SentRequest) -> str:
    if request.path.endswith("/resize"):
        return "resize"
    if request.path.endswith("/events"):
        return "event"
    if request.path.endswith("/status"):
        return "status"
    return "annotation"
