import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest

from app.io.http import JSON, METADATA, METADATA_LIST, ApiError, ApiResponse, Request
from app.io.reflector import Reflector
from tests.unit.reconciler.fakes import FixedRandom

PATH = "/api/v1/pods"


def item(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


def page(items: list[dict[str, Any]], *, version: str, token: str = "") -> ApiResponse:
    metadata = (
        {"resourceVersion": version, "continue": token} if token else {"resourceVersion": version}
    )
    return ApiResponse(code=200, body=orjson.dumps({"metadata": metadata, "items": items}))


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": kind, "object": obj}) + b"\n"


def status(code: int) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "reason": "Expired", "code": code}


class Script:
    """An API server scripted per call: list answers in order, then watch streams in order."""

    def __init__(
        self, *, lists: list[ApiResponse], watches: list[list[bytes] | ApiResponse]
    ) -> None:
        self.lists = lists
        self.watches = watches
        self.list_queries: list[dict[str, str]] = []
        self.watch_queries: list[dict[str, str]] = []
        # What each list and watch asked for (the Accept header).
        self.accepted: list[str] = []
        self.exhausted = asyncio.Event()

    async def request(self, request: Request) -> ApiResponse:
        assert (request.method, request.path) == ("GET", PATH)
        self.list_queries.append(dict(request.query))
        self.accepted.append(request.accept)
        return self.lists.pop(0)

    # No default for accept: the reflector always names what it accepts, and the tests check it.
    @asynccontextmanager
    async def stream(
        self, path: str, *, query: Sequence[tuple[str, str]], timeout_seconds: int, accept: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        assert path == PATH
        assert 240 <= timeout_seconds <= 480
        self.watch_queries.append(dict(query))
        self.accepted.append(accept)
        if not self.watches:
            self.exhausted.set()
            await asyncio.Event().wait()
        script = self.watches.pop(0)
        if isinstance(script, ApiResponse):
            raise ApiError.from_response(script)
        yield _lines(script)


async def _lines(lines: list[bytes]) -> AsyncIterator[bytes]:
    for line in lines:
        yield line


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def relist_started(self) -> None:
        self.calls.append(("relist", ""))

    def listed(self, raw: memoryview) -> None:
        self.calls.append(("listed", orjson.loads(raw)["metadata"]["name"]))

    def relist_finished(self) -> None:
        self.calls.append(("relisted", ""))

    def event(self, kind: str, raw: memoryview) -> None:
        self.calls.append((kind, orjson.loads(raw)["metadata"]["name"]))


def drive(reflector: Reflector, *, until: asyncio.Event) -> None:
    """Runs the reflector until the event is set, then stops it."""

    async def scenario() -> None:
        task = asyncio.ensure_future(reflector.run())
        await asyncio.wait_for(until.wait(), 5.0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())


def run(
    script: Script, *, field_selector: str | None = None, metadata_only: bool = False
) -> tuple[Recorder, Reflector]:
    recorder = Recorder()
    reflector = Reflector(
        api=script,
        path=PATH,
        handler=recorder,
        field_selector=field_selector,
        metadata_only=metadata_only,
        rand=FixedRandom(0.0),
        page_size=2,
    )

    drive(reflector, until=script.exhausted)
    return recorder, reflector


def test_lists_in_pages_then_watches_from_the_list_version() -> None:
    script = Script(
        lists=[
            page([item("a", "5"), item("b", "6")], version="10", token="next"),
            page([item("c", "7")], version="10"),
        ],
        watches=[
            [
                event("ADDED", item("d", "11")),
                event("BOOKMARK", {"metadata": {"resourceVersion": "15"}}),
            ],
            [event("DELETED", item("a", "16"))],
        ],
    )
    recorder, reflector = run(script, field_selector="spec.nodeName!=")
    assert recorder.calls == [
        ("relist", ""),
        ("listed", "a"),
        ("listed", "b"),
        ("listed", "c"),
        ("relisted", ""),
        ("ADDED", "d"),
        ("DELETED", "a"),
    ]
    assert reflector.synced.is_set()
    assert script.list_queries == [
        {"fieldSelector": "spec.nodeName!=", "limit": "2"},
        {"fieldSelector": "spec.nodeName!=", "limit": "2", "continue": "next"},
    ]
    assert [q["resourceVersion"] for q in script.watch_queries] == ["10", "15", "16"]
    assert all(q["allowWatchBookmarks"] == "true" for q in script.watch_queries)


@pytest.mark.parametrize(
    ("metadata_only", "accepted"),
    [
        pytest.param(False, [JSON, JSON], id="whole-objects"),
        pytest.param(True, [METADATA_LIST, METADATA], id="metadata-alone"),
    ],
)
def test_lists_and_watches_ask_for_what_the_reflector_keeps(
    metadata_only: bool, accepted: list[str]
) -> None:
    script = Script(lists=[page([item("a", "5")], version="10")], watches=[[]])
    run(script, metadata_only=metadata_only)
    assert script.accepted[:2] == accepted


def test_an_empty_list_of_metadata_alone_comes_as_null_and_is_empty() -> None:
    empty = ApiResponse(code=200, body=b'{"metadata":{"resourceVersion":"3"},"items":null}')
    script = Script(lists=[empty], watches=[[event("ADDED", item("a", "4"))]])
    recorder, reflector = run(script, metadata_only=True)
    assert recorder.calls == [("relist", ""), ("relisted", ""), ("ADDED", "a")]
    assert reflector.synced.is_set()


def test_an_expired_watch_relists() -> None:
    script = Script(
        lists=[page([item("a", "1")], version="2"), page([item("b", "3")], version="4")],
        watches=[[event("ERROR", status(410))], ApiResponse(code=410, body=b"{}")],
    )
    script.lists.append(page([], version="6"))
    recorder, _ = run(script)
    assert [call for call in recorder.calls if call[0] in ("listed", "relist")] == [
        ("relist", ""),
        ("listed", "a"),
        ("relist", ""),
        ("listed", "b"),
        ("relist", ""),
    ]
    assert [q["resourceVersion"] for q in script.watch_queries] == ["2", "4", "6"]


def test_errors_back_off_and_retry() -> None:
    script = Script(
        lists=[ApiResponse(code=500, body=b"{}"), page([item("a", "1")], version="2")],
        watches=[[event("ERROR", status(500))]],
    )
    recorder, _ = run(script)
    assert ("listed", "a") in recorder.calls
    assert len(script.list_queries) == 2
    # The failed watch resumes from the same version rather than relisting.
    assert [q["resourceVersion"] for q in script.watch_queries] == ["2", "2"]


def test_an_absent_api_counts_as_synced_and_empty() -> None:
    script = Script(lists=[ApiResponse(code=404, body=b"{}")], watches=[])
    recorder = Recorder()
    reflector = Reflector(api=script, path=PATH, handler=recorder)

    drive(reflector, until=reflector.synced)
    assert recorder.calls == [("relist", ""), ("relisted", "")]
    assert script.watch_queries == []


def test_a_handler_bug_relists_instead_of_stopping_the_watch() -> None:
    script = Script(
        lists=[page([item("a", "1")], version="2"), page([item("a", "3")], version="4")],
        watches=[[event("ADDED", item("boom", "3"))]],
    )
    recorder = Recorder()
    original = recorder.event

    def fragile(kind: str, raw: memoryview) -> None:
        if orjson.loads(raw)["metadata"]["name"] == "boom":
            raise KeyError("spec")
        original(kind, raw)

    recorder.event = fragile  # type: ignore[method-assign]
    reflector = Reflector(api=script, path=PATH, handler=recorder, rand=FixedRandom(0.0))

    drive(reflector, until=script.exhausted)
    assert recorder.calls.count(("relist", "")) == 2
    assert [q["resourceVersion"] for q in script.watch_queries] == ["2", "4"]


def test_a_watch_error_event_other_than_expired_is_an_api_error_retried_in_place(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failure = {"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd down"}
    script = Script(
        lists=[page([item("a", "1")], version="2")],
        watches=[[event("ERROR", failure)], [event("ADDED", item("b", "3"))]],
    )
    with caplog.at_level(logging.WARNING, logger="app.io.reflector"):
        recorder, _ = run(script)
    assert recorder.calls == [("relist", ""), ("listed", "a"), ("relisted", ""), ("ADDED", "b")]
    assert [q["resourceVersion"] for q in script.watch_queries] == ["2", "2", "3"]
    assert [record.getMessage().split(": ", 1)[1] for record in caplog.records] == [
        "500 InternalError: etcd down"
    ]
