import argparse
import asyncio
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.io.flags import add_process_flags, process_listeners
from app.io.metrics_server import (
    Access,
    KubeAccessReviewer,
    Listener,
    ListenError,
    MetricsApp,
    parse_bind_address,
)
from certs.cli import main as headroom_certs
from certs.source import SelfSignedCertificateSource


class Reviews:
    """Stands in for the API server's TokenReview and SubjectAccessReview endpoints."""

    def __init__(self, users: Mapping[str, dict[str, Any]], allowed: set[str]) -> None:
        self.users = users
        self.allowed = allowed
        self.posts: list[tuple[str, Mapping[str, Any]]] = []

    async def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.posts.append((path, body))
        if body["kind"] == "TokenReview":
            user = self.users.get(body["spec"]["token"])
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
            return {**body, "status": status}
        return {**body, "status": {"allowed": body["spec"]["user"] in self.allowed}}


class FixedReviewer:
    def __init__(self, access: Access | Exception) -> None:
        self.access = access
        self.tokens: list[str] = []

    async def review(self, token: str) -> Access:
        self.tokens.append(token)
        if isinstance(self.access, Exception):
            raise self.access
        return self.access


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("headroom_test_total", "A test series.", registry=registry).inc()
    return registry


def _get(app: MetricsApp, path: str = "/metrics", **headers: str) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://metrics") as client:
            return await client.get(path, headers=headers)

    return asyncio.run(send())


@pytest.mark.parametrize(
    ("headers", "access", "status"),
    [
        pytest.param({}, Access.ALLOWED, 401, id="no-token"),
        pytest.param({"authorization": "Basic abc"}, Access.ALLOWED, 401, id="not-bearer"),
        pytest.param({"authorization": "Bearer "}, Access.ALLOWED, 401, id="empty-token"),
        pytest.param({"authorization": "Bearer t"}, Access.UNAUTHENTICATED, 401, id="invalid"),
        pytest.param({"authorization": "Bearer t"}, Access.FORBIDDEN, 403, id="forbidden"),
        pytest.param({"authorization": "Bearer t"}, Access.ALLOWED, 200, id="allowed"),
        pytest.param({"authorization": "bearer t"}, Access.ALLOWED, 200, id="scheme-any-case"),
        pytest.param(
            {"authorization": "Bearer t"}, ConnectionError("down"), 503, id="review-failed"
        ),
    ],
)
def test_metrics_need_an_allowed_token(
    headers: dict[str, str], access: Access | Exception, status: int
) -> None:
    reply = _get(MetricsApp(registry=_registry(), reviewer=FixedReviewer(access)), **headers)
    assert reply.status_code == status
    assert ("headroom_test_total 1.0" in reply.text) == (status == 200)


def test_without_a_reviewer_metrics_are_open() -> None:
    reply = _get(MetricsApp(registry=_registry(), reviewer=None))
    assert reply.status_code == 200
    assert "headroom_test_total 1.0" in reply.text


@pytest.mark.parametrize(
    ("headers", "content_type", "encoding"),
    [
        pytest.param({"accept-encoding": "identity"}, "text/plain; version=0.0.4", None, id="text"),
        pytest.param(
            {
                "accept": "application/openmetrics-text; version=1.0.0",
                "accept-encoding": "identity",
            },
            "application/openmetrics-text; version=1.0.0",
            None,
            id="openmetrics",
        ),
        pytest.param({"accept-encoding": "gzip"}, "text/plain; version=0.0.4", "gzip", id="gzip"),
    ],
)
def test_the_scraper_s_format_and_encoding_are_served(
    headers: dict[str, str], content_type: str, encoding: str | None
) -> None:
    reply = _get(MetricsApp(registry=_registry(), reviewer=None), **headers)
    assert reply.headers["content-type"].startswith(content_type)
    assert reply.headers.get("content-encoding") == encoding
    # httpx decodes the gzip.
    assert "headroom_test_total 1.0" in reply.text


class _Where(Collector):
    """Records the thread each scrape collects on."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def collect(self) -> Iterator[Metric]:
        self.threads.append(threading.get_ident())
        yield GaugeMetricFamily("headroom_test_where", "A test series.", value=1)


def test_a_scrape_is_formatted_off_the_event_loop() -> None:
    registry = CollectorRegistry()
    where = _Where()
    registry.register(where)
    app = MetricsApp(registry=registry, reviewer=None)

    async def scrape() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://metrics") as client:
            assert (await client.get("/metrics")).status_code == 200
        return threading.get_ident()

    loop_thread = asyncio.run(scrape())
    assert where.threads
    assert loop_thread not in where.threads


def test_only_metrics_path_is_served() -> None:
    assert _get(MetricsApp(registry=_registry(), reviewer=None), "/").status_code == 404


def test_reviewer_asks_token_then_access_review_for_get_on_metrics() -> None:
    api = Reviews(
        {"t": {"username": "prom", "uid": "1", "groups": ["g"], "extra": {"k": ["v"]}}}, {"prom"}
    )
    assert asyncio.run(KubeAccessReviewer(api).review("t")) is Access.ALLOWED
    (token_path, token_review), (access_path, access_review) = api.posts
    assert token_path == "/apis/authentication.k8s.io/v1/tokenreviews"
    assert token_review["spec"] == {"token": "t"}
    assert access_path == "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    assert access_review["spec"] == {
        "user": "prom",
        "uid": "1",
        "groups": ["g"],
        "extra": {"k": ["v"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


@pytest.mark.parametrize(
    ("token", "access", "posts"),
    [
        pytest.param("good", Access.ALLOWED, 2, id="allowed"),
        pytest.param("other", Access.FORBIDDEN, 2, id="forbidden"),
        pytest.param("bad", Access.UNAUTHENTICATED, 1, id="unauthenticated-skips-sar"),
    ],
)
def test_reviews_are_cached_until_they_expire(token: str, access: Access, posts: int) -> None:
    api = Reviews({"good": {"username": "prom"}, "other": {"username": "eve"}}, {"prom"})
    now = [0.0]
    reviewer = KubeAccessReviewer(api, ttl_seconds=10, clock=lambda: now[0])

    async def scenario() -> list[Access]:
        results = [await reviewer.review(token)]
        now[0] = 9.0
        results.append(await reviewer.review(token))
        now[0] = 10.5
        results.append(await reviewer.review(token))
        return results

    assert asyncio.run(scenario()) == [access] * 3
    assert len(api.posts) == 2 * posts


def test_cache_is_bounded() -> None:
    api = Reviews({f"t{i}": {"username": "prom"} for i in range(10)}, {"prom"})
    reviewer = KubeAccessReviewer(api, max_entries=3)

    async def scenario() -> None:
        for i in range(10):
            await reviewer.review(f"t{i}")

    asyncio.run(scenario())
    assert len(reviewer._cache) <= 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8443", ("0.0.0.0", 8443)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9443", ("::1", 9443)),
        ("localhost:8081", ("localhost", 8081)),
    ],
)
def test_bind_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize("text", ["8443", ":", ":http", ":70000", "::1:9443", "host:-1"])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="bind address"):
        parse_bind_address(text)


def _serve_and_get(listener: Listener, url: str, **client_args: Any) -> httpx.Response:
    async def scenario() -> httpx.Response:
        port = listener.bind()
        task = asyncio.create_task(listener.serve())
        try:
            # The socket is already listening: the connection waits until serving starts.
            async with httpx.AsyncClient(**client_args) as client:
                return await client.get(url.format(port=port))
        finally:
            listener.stop()
            await task

    return asyncio.run(scenario())


def test_listener_serves_https_from_a_certificate_source() -> None:
    certs = SelfSignedCertificateSource(dns_names=["localhost"], ip_addresses=["127.0.0.1"])
    ca_pem = certs.ca_pem()
    assert ca_pem is not None
    listener = Listener(
        name="metrics",
        app=MetricsApp(registry=_registry(), reviewer=FixedReviewer(Access.ALLOWED)),
        address="127.0.0.1:0",
        certificates=certs,
    )
    reply = _serve_and_get(
        listener,
        "https://127.0.0.1:{port}/metrics",
        verify=ssl.create_default_context(cadata=ca_pem.decode()),
        headers={"authorization": "Bearer t"},
    )
    assert reply.status_code == 200
    assert reply.http_version == "HTTP/1.1"
    assert "headroom_test_total 1.0" in reply.text


def _metrics_listener(*flags: str, api: Reviews | None = None) -> Listener:
    """The metrics listener the process flags describe."""
    parser = argparse.ArgumentParser()
    add_process_flags(parser)
    args = parser.parse_args([*flags, "--health-probe-bind-address=0"])
    [listener] = process_listeners(args, registry=_registry(), api=api, not_ready=list)
    return listener


def test_insecure_metrics_are_plain_http_without_auth(caplog: pytest.LogCaptureFixture) -> None:
    listener = _metrics_listener("--metrics-bind-address=127.0.0.1:0", "--metrics-secure=false")
    reply = _serve_and_get(listener, "http://127.0.0.1:{port}/metrics")
    assert reply.status_code == 200
    assert "without authentication" in caplog.text


def test_secure_metrics_log_the_provided_certificate_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert headroom_certs(["--out-dir", str(tmp_path), "--ip", "127.0.0.1"]) == 0
    caplog.set_level("INFO")
    _metrics_listener(
        "--metrics-bind-address=127.0.0.1:0",
        f"--metrics-cert-path={tmp_path}",
        api=Reviews({}, set()),
    )
    assert "Initializing metrics certificate watcher using provided certificates" in caplog.messages


def test_secure_metrics_need_an_api() -> None:
    with pytest.raises(ValueError, match="API client"):
        _metrics_listener("--metrics-bind-address=:0")


def test_a_taken_port_fails_with_a_clear_message() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        listener = _metrics_listener(
            f"--metrics-bind-address=127.0.0.1:{port}", "--metrics-secure=false"
        )
        with pytest.raises(ListenError, match=f"metrics server cannot listen on 127.0.0.1:{port}"):
            listener.bind()
