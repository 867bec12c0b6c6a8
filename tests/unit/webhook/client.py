"""Posting AdmissionReviews to the webhook app in-process, and decoding the answers."""

import asyncio
import base64
from collections.abc import Mapping
from typing import Any

import httpx
import jsonpatch
import orjson
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from certs.source import SelfSignedCertificateSource
from webhook.app import create_app
from webhook.cache import AdmissionCache
from webhook.health import Health
from webhook.metrics import WebhookMetrics

CERTS = SelfSignedCertificateSource(dns_names=["localhost"], ip_addresses=["127.0.0.1"])


class Client:
    """Synchronous requests to an ASGI app in-process; app exceptions propagate."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def request(
        self,
        method: str,
        path: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="https://webhook") as client:
                return await client.request(method, path, content=content, headers=headers)

        return asyncio.run(send())

    def post(
        self, path: str, *, content: bytes, headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        return self.request("POST", path, content=content, headers=headers)

    def get(self, path: str) -> httpx.Response:
        return self.request("GET", path)


def webhook_client(cluster: AdmissionCache, *, registry: CollectorRegistry | None = None) -> Client:
    app = create_app(
        cluster=cluster,
        health=Health(certificates=CERTS, cluster=cluster),
        metrics=WebhookMetrics(registry or CollectorRegistry()),
    )
    return Client(app)


def admit(client: Client, path: str, review: Mapping[str, Any]) -> dict[str, Any]:
    """POST a review; assert a well-formed 200 answer echoing the uid; return ``response``."""
    reply = client.post(
        path, content=orjson.dumps(review), headers={"content-type": "application/json"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == review["request"]["uid"]
    response: dict[str, Any] = body["response"]
    return response


def patched(obj: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` after applying the response's JSONPatch (unchanged without one)."""
    if "patch" not in response:
        return dict(obj)
    assert response["patchType"] == "JSONPatch"
    operations = orjson.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(obj, operations)
    return result
