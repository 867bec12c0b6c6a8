"""KubeHttp against a small local HTTP server speaking the API server's JSON conventions."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from kubernetes.aio import client as aio_client

from app.io.budget import Lane, WriteBudget
from app.io.http import (
    APPLY_PATCH,
    ApiError,
    ApiResponse,
    ApiUnavailable,
    KubeHttp,
    Request,
    Skipped,
)

Scenario = Callable[[KubeHttp, list[web.Request]], Awaitable[Any]]


async def _namespace(request: web.Request) -> web.Response:
    return web.json_response(
        {"kind": "Namespace", "metadata": {"name": request.match_info["name"]}}
    )


async def _missing(request: web.Request) -> web.Response:
    status = {"kind": "Status", "reason": "NotFound", "message": 'namespaces "x" not found'}
    return web.json_response(status, status=404)


async def _broken(request: web.Request) -> web.Response:
    return web.Response(text="upstream exploded", status=502)


async def _echo(request: web.Request) -> web.Response:
    return web.json_response({"received": await request.json()}, status=201)


async def _patch(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "contentType": request.content_type,
            "query": dict(request.query),
            "body": await request.json(),
        }
    )


async def _silent(request: web.Request) -> web.StreamResponse:
    """A watch whose connection stays open while nothing arrives: a stalled server."""
    response = web.StreamResponse()
    await response.prepare(request)
    await asyncio.sleep(2)
    return response


async def _watch(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
    ]
    for event in events:
        await response.write(orjson.dumps(event) + b"\n\n")
    await response.write_eof()
    return response


@asynccontextmanager
async def _api() -> AsyncIterator[tuple[KubeHttp, list[web.Request]]]:
    seen: list[web.Request] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(request)
        return await handler(request)

    app = web.Application(middlewares=[record])
    app.router.add_get("/api/v1/namespaces/missing", _missing)
    app.router.add_get("/api/v1/namespaces/broken", _broken)
    app.router.add_get("/api/v1/namespaces/{name}", _namespace)
    app.router.add_get("/api/v1/namespaces", _watch)
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", _echo)
    app.router.add_patch("/api/v1/namespaces/ns/pods/p/resize", _patch)
    app.router.add_get("/api/v1/pods", _silent)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = aio_client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.api_key = {"BearerToken": "secret"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    budgets = {lane: WriteBudget(rate=0.001, burst=5) for lane in Lane}
    http = KubeHttp(aio_client.ApiClient(configuration), budgets=budgets)
    try:
        yield http, seen
    finally:
        await http.close()
        await runner.cleanup()


def _run(scenario: Scenario) -> Any:
    async def main() -> Any:
        async with _api() as (http, seen):
            return await scenario(http, seen)

    return asyncio.run(main())


def test_get_decodes_json_and_sends_the_bearer_token() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> Any:
        found = await http.get("/api/v1/namespaces/team-a", params={"pretty": "false"})
        return found, seen[0].headers["Authorization"], seen[0].query["pretty"]

    assert _run(scenario) == (
        {"kind": "Namespace", "metadata": {"name": "team-a"}},
        "Bearer secret",
        "false",
    )


@pytest.mark.parametrize(
    ("path", "status", "reason", "message"),
    [
        pytest.param(
            "/api/v1/namespaces/missing", 404, "NotFound", 'namespaces "x" not found', id="status"
        ),
        pytest.param("/api/v1/namespaces/broken", 502, "", "upstream exploded", id="not-json"),
    ],
)
def test_errors_carry_status_reason_and_message(
    path: str, status: int, reason: str, message: str
) -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> ApiError:
        with pytest.raises(ApiError) as raised:
            await http.get(path)
        return raised.value

    error = _run(scenario)
    assert (error.status, error.reason, error.message) == (status, reason, message)


def test_post_sends_json() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> Any:
        return await http.post("/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"a": 1}})

    assert _run(scenario) == {"received": {"spec": {"a": 1}}}


def test_a_stream_yields_each_event_line_until_the_server_ends_it() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> Any:
        query = [("resourceVersion", "1")]
        async with http.stream("/api/v1/namespaces", query=query, timeout_seconds=7) as lines:
            events = [orjson.loads(line) async for line in lines]
        return events, dict(seen[0].query)

    events, query = _run(scenario)
    assert [event["type"] for event in events] == ["ADDED", "BOOKMARK"]
    assert query == {
        "resourceVersion": "1",
        "watch": "true",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "7",
    }


def test_a_patch_sends_its_content_type_and_json_body() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> ApiResponse:
        return await http.request(
            Request(
                "PATCH",
                "/api/v1/namespaces/ns/pods/p/resize",
                {"spec": {"containers": []}},
                content_type=APPLY_PATCH,
                query=(("fieldManager", "headroom"), ("force", "true")),
            )
        )

    assert _run(scenario).json() == {
        "contentType": APPLY_PATCH,
        "query": {"fieldManager": "headroom", "force": "true"},
        "body": {"spec": {"containers": []}},
    }


def test_refusals_come_back_as_responses_with_their_status() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> ApiResponse:
        return await http.request(Request("GET", "/api/v1/namespaces/missing"))

    response = _run(scenario)
    assert (response.code, response.ok, response.message) == (
        404,
        False,
        'namespaces "x" not found',
    )
    with pytest.raises(ApiError) as raised:
        response.raise_for_status()
    assert (raised.value.status, raised.value.reason) == (404, "NotFound")


async def _primary_burst_goes_at_once(http: KubeHttp) -> None:
    """Five writes on the resizes' lane, each sent within a second: none waits for a refill."""
    for _ in range(5):
        await asyncio.wait_for(
            http.request(Request("GET", "/api/v1/namespaces/a", lane=Lane.PRIMARY)), 1.0
        )


def test_writes_spend_tokens_of_their_lane_s_budget_and_reads_do_not() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> int:
        for _ in range(5):
            await http.request(Request("GET", "/api/v1/namespaces/a", lane=Lane.SECONDARY))
        await http.request(Request("GET", "/api/v1/namespaces/a"))  # a read: no token
        # The explanations' burst of five is spent and the refill is slow: a sixth waits.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(
                http.request(Request("GET", "/api/v1/namespaces/a", lane=Lane.SECONDARY)), 0.2
            )
        # The resizes' budget is their own: all five of its burst go at once.
        await _primary_burst_goes_at_once(http)
        return len(seen)

    assert _run(scenario) == 11


def test_a_write_whose_precondition_fails_is_not_sent_and_refunds_its_token() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> int:
        for _ in range(5):
            with pytest.raises(Skipped):
                await http.request(
                    Request("GET", "/api/v1/namespaces/a", lane=Lane.PRIMARY),
                    precondition=lambda: False,
                )
        # Every token came back: five writes still go out at once.
        await _primary_burst_goes_at_once(http)
        return len(seen)

    assert _run(scenario) == 5


def test_a_silent_watch_is_given_up_as_unavailable() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> None:
        async with http.stream("/api/v1/pods", query=[], idle_seconds=0.3) as lines:
            async for _ in lines:
                pass

    with pytest.raises(ApiUnavailable):
        _run(scenario)


def test_a_refused_stream_raises_with_the_status() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> None:
        async with http.stream("/api/v1/namespaces/missing", query=[]):
            pass

    with pytest.raises(ApiError) as raised:
        _run(scenario)
    assert raised.value.status == 404


def test_an_unreachable_server_is_unavailable() -> None:
    async def main() -> None:
        http = KubeHttp(
            aio_client.ApiClient(aio_client.Configuration(host="http://127.0.0.1:1")),
            timeout_seconds=2,
        )
        try:
            await http.request(Request("GET", "/api/v1/pods"))
        finally:
            await http.close()

    with pytest.raises(ApiUnavailable):
        asyncio.run(main())


@pytest.mark.parametrize(
    ("body", "decoded"),
    [
        pytest.param(b"", {}, id="empty"),
        pytest.param(b"not json", {}, id="garbage"),
        pytest.param(b"[1, 2]", {}, id="not-an-object"),
        pytest.param(b'{"a": 1}', {"a": 1}, id="object"),
    ],
)
def test_response_json_is_always_an_object(body: bytes, decoded: dict[str, Any]) -> None:
    assert ApiResponse(code=200, body=body).json() == decoded


def test_message_falls_back_to_the_raw_body() -> None:
    assert ApiResponse(code=502, body=b"<html>bad gateway</html>").message == (
        "<html>bad gateway</html>"
    )
