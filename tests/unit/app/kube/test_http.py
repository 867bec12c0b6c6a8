"""KubeHttp against a small local HTTP server speaking the API server's JSON conventions."""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from kubernetes.aio import client as aio_client

from app.kube.http import ApiError, KubeHttp

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


async def _watch(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse()
    await response.prepare(request)
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
    ]
    if request.query.get("resourceVersion") == "old":
        events = [
            {"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "gone"}}
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
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = aio_client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.api_key = {"BearerToken": "secret"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    http = KubeHttp(aio_client.ApiClient(configuration))
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


def test_watch_yields_events_until_the_server_ends_it() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> Any:
        events = [
            event
            async for event in http.watch(
                "/api/v1/namespaces", params={"resourceVersion": "1"}, timeout_seconds=7
            )
        ]
        return events, dict(seen[0].query)

    events, query = _run(scenario)
    assert [event["type"] for event in events] == ["ADDED", "BOOKMARK"]
    assert query == {
        "resourceVersion": "1",
        "watch": "true",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "7",
    }


def test_watch_error_event_raises_with_its_code() -> None:
    async def scenario(http: KubeHttp, seen: list[web.Request]) -> ApiError:
        with pytest.raises(ApiError) as raised:
            async for _ in http.watch("/api/v1/namespaces", params={"resourceVersion": "old"}):
                pass
        return raised.value

    error = _run(scenario)
    assert (error.status, error.reason) == (410, "Expired")
