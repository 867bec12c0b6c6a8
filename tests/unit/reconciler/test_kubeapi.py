"""The raw JSON layer against a real local HTTP server (no Kubernetes, no mocks)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from kubernetes.aio.client import ApiClient, Configuration

from reconciler.kubeapi import (
    APPLY_PATCH,
    ApiError,
    ApiResponse,
    ApiUnavailable,
    KubeApi,
)
from reconciler.ratelimit import TokenBucket

Scenario = Callable[[KubeApi], Awaitable[Any]]


async def _pods(request: web.Request) -> web.StreamResponse:
    if request.query.get("watch") == "true":
        response = web.StreamResponse()
        await response.prepare(request)
        for name in ("a", "b"):
            line = {"type": "ADDED", "object": {"metadata": {"name": name}}}
            await response.write(orjson.dumps(line) + b"\n\n")
        return response
    return web.json_response(
        {"items": [], "query": dict(request.query), "auth": request.headers.get("Authorization")}
    )


async def _patch(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response(
        {"contentType": request.content_type, "query": dict(request.query), "body": body}
    )


async def _missing(request: web.Request) -> web.Response:
    status = {"kind": "Status", "code": 404, "message": 'pods "x" not found'}
    return web.json_response(status, status=404)


async def _expired(request: web.Request) -> web.Response:
    return web.json_response({"kind": "Status", "code": 410, "message": "too old"}, status=410)


def run(scenario: Scenario, *, limiter: TokenBucket | None = None) -> Any:
    async def main() -> Any:
        app = web.Application()
        app.router.add_get("/api/v1/pods", _pods)
        app.router.add_patch("/api/v1/namespaces/ns/pods/p/resize", _patch)
        app.router.add_get("/api/v1/namespaces/ns/pods/x", _missing)
        app.router.add_get("/api/v1/nodes", _expired)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        configuration = Configuration(host=f"http://127.0.0.1:{port}")
        configuration.api_key = {"BearerToken": "secret"}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        client = ApiClient(configuration)
        try:
            return await scenario(KubeApi(client, limiter=limiter, timeout_seconds=5))
        finally:
            await client.close()  # type: ignore[no-untyped-call]
            await runner.cleanup()

    return asyncio.run(main())


def test_requests_carry_the_query_and_the_bearer_token() -> None:
    async def scenario(api: KubeApi) -> ApiResponse:
        return await api.request(
            "GET", "/api/v1/pods", query=[("fieldSelector", "spec.nodeName!=")]
        )

    response = run(scenario)
    assert response.ok
    assert response.json()["query"] == {"fieldSelector": "spec.nodeName!="}
    assert response.json()["auth"] == "Bearer secret"


def test_a_patch_sends_its_content_type_and_json_body() -> None:
    async def scenario(api: KubeApi) -> ApiResponse:
        return await api.request(
            "PATCH",
            "/api/v1/namespaces/ns/pods/p/resize",
            query=[("fieldManager", "headroom"), ("force", "true")],
            body={"spec": {"containers": []}},
            content_type=APPLY_PATCH,
        )

    echoed = run(scenario).json()
    assert echoed == {
        "contentType": APPLY_PATCH,
        "query": {"fieldManager": "headroom", "force": "true"},
        "body": {"spec": {"containers": []}},
    }


def test_refusals_come_back_as_responses_with_their_status() -> None:
    async def scenario(api: KubeApi) -> ApiResponse:
        return await api.request("GET", "/api/v1/namespaces/ns/pods/x")

    response = run(scenario)
    assert (response.code, response.ok, response.message) == (404, False, 'pods "x" not found')
    with pytest.raises(ApiError, match="HTTP 404"):
        response.raise_for_status()


def test_a_watch_yields_event_lines() -> None:
    async def scenario(api: KubeApi) -> list[bytes]:
        async with api.watch("/api/v1/pods", query=[], timeout_seconds=5) as lines:
            return [line async for line in lines]

    lines = run(scenario)
    assert [orjson.loads(line)["object"]["metadata"]["name"] for line in lines] == ["a", "b"]


def test_a_refused_watch_raises_with_the_status() -> None:
    async def scenario(api: KubeApi) -> None:
        async with api.watch("/api/v1/nodes", query=[], timeout_seconds=5):
            pass

    with pytest.raises(ApiError) as raised:
        run(scenario)
    assert raised.value.response.code == 410


def test_an_unreachable_server_is_unavailable() -> None:
    async def scenario(api: KubeApi) -> None:
        configuration = Configuration(host="http://127.0.0.1:1")
        client = ApiClient(configuration)
        try:
            await KubeApi(client, timeout_seconds=2).request("GET", "/api/v1/pods")
        finally:
            await client.close()  # type: ignore[no-untyped-call]

    with pytest.raises(ApiUnavailable):
        run(scenario)


def test_requests_take_a_token_from_the_client_limiter() -> None:
    # A refill slow enough that the test's own duration cannot matter.
    limiter = TokenBucket(rate=0.001, burst=5)

    async def scenario(api: KubeApi) -> None:
        await api.request("GET", "/api/v1/pods")
        await api.request("GET", "/api/v1/pods")

    run(scenario, limiter=limiter)
    # Two of five tokens spent: three more go out without waiting.
    assert [limiter.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.reserve() > 0


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
