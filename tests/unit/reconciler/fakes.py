"""Test doubles for the reconciler: a settable clock, a scripted random source, and an
API fake at the level of the reconciler's own `Requester` interface."""

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from reconciler.kubeapi import JSON, ApiResponse


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


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


class FakeApi:
    """Records every request; answers from a script keyed by (method, path), else success."""

    def __init__(self) -> None:
        self.sent: list[SentRequest] = []
        self.answers: dict[tuple[str, str], ApiResponse] = {}

    def answer(self, method: str, path: str, *, code: int, body: Mapping[str, Any]) -> None:
        self.answers[(method, path)] = ApiResponse(code=code, body=orjson.dumps(body))

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
    ) -> ApiResponse:
        self.sent.append(SentRequest(method, path, dict(query), body, content_type))
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
