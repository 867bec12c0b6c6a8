"""The real webhook's memory after 40,000 malformed reviews over TLS: back to a bounded
baseline, not growing with what it has answered.

The webhook runs as its own process against the real API server, its caches synced, an
enforcing config and the reviews' namespace enrolled, so every review that fits reaches
its handler's full path. Its resident set is read from /proc, after a warm-up that fills
the allocator's pools and the caches that are bounded by design."""

import asyncio
import contextlib
import json
import ssl
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster
from tests.integration.webhook.conftest import start_webhook
from tests.unit.app.builders import headroom_config, namespace
from tests.unit.webhook.malformed import REVIEW_NAMESPACE, confused_reviews, encoded
from webhook.metrics import Endpoint

WARM_UP = 4_000
REVIEWS = 40_000
CONNECTIONS = 8
# Allocator slack, not growth: the test fails on a leak of more than ~400 bytes a review.
BOUND_MIB = 16


def _malformed_bodies() -> list[tuple[str, bytes]]:
    """Type-confused reviews of every endpoint, then bodies that are not reviews at all."""
    bodies = [(endpoint, encoded(review)) for endpoint, _, review in confused_reviews()]
    broken = [b"{", b"[]", b'{"kind": "AdmissionReview"}', b"\xff" * 64, b"[" * 2000]
    bodies += [(Endpoint.MUTATE_PODS.value, body) for body in broken]
    return bodies


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


async def _send(
    port: int, context: ssl.SSLContext, bodies: list[tuple[str, bytes]], *, first: int, count: int
) -> Counter[int]:
    """``count`` requests on one keep-alive connection (reopened if the server closes it)."""
    statuses: Counter[int] = Counter()
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
    )
    try:
        for index in range(first, first + count):
            path, body = bodies[index % len(bodies)]
            writer.write(
                b"POST %s HTTP/1.1\r\nhost: webhook\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
            )
            status = int((await reader.readline()).split()[1])
            length, close = 0, False
            while (line := await reader.readline()) != b"\r\n":
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                close = close or (name.lower() == "connection" and "close" in value.lower())
            await reader.readexactly(length)
            statuses[status] += 1
            if close:
                await _close(writer)
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
                )
    finally:
        await _close(writer)
    return statuses


async def _close(writer: asyncio.StreamWriter) -> None:
    # Waiting lets the TLS shutdown finish: a transport abandoned mid-shutdown when the loop
    # ends is only reclaimed by the garbage collector, later, inside some other test.
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def _load(port: int, context: ssl.SSLContext, *, first: int, total: int) -> Counter[int]:
    bodies = _malformed_bodies()
    share = total // CONNECTIONS
    results = await asyncio.gather(
        *(
            _send(port, context, bodies, first=first + i * share, count=share)
            for i in range(CONNECTIONS)
        )
    )
    return sum(results, Counter())


@pytest.fixture
def enrolled(control_plane: Cluster, headroom_crd: str) -> Iterator[None]:
    """The namespace the reviews name, enrolled, and an enforcing config."""
    objects = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            namespace(REVIEW_NAMESPACE),
            headroom_config(generation=None, spec={"dryRun": False}),
        ],
    }
    control_plane.kubectl("delete", "hcfg", "cluster", "--ignore-not-found")
    # Other tests on this control plane use the same namespace and delete it without
    # waiting: a namespace still terminating cannot be created again.
    control_plane.kubectl("wait", "--for=delete", f"namespace/{REVIEW_NAMESPACE}", "--timeout=120s")
    control_plane.kubectl("create", "-f", "-", input=json.dumps(objects))
    try:
        yield
    finally:
        control_plane.kubectl("delete", "-f", "-", "--wait=false", input=json.dumps(objects))


def test_memory_returns_to_its_baseline_after_40000_malformed_reviews(
    control_plane: Cluster, enrolled: None, webhook_kubeconfig: Path, tmp_path: Path
) -> None:
    webhook = start_webhook(control_plane, tmp_path, kubeconfig=webhook_kubeconfig)
    port, pid = webhook.port, webhook.process.pid
    context = ssl.create_default_context(cafile=str(webhook.cert_dir / "ca.crt"))

    asyncio.run(_load(port, context, first=0, total=WARM_UP))
    time.sleep(1)
    baseline = _rss_mib(pid)
    statuses = asyncio.run(_load(port, context, first=WARM_UP, total=REVIEWS))
    time.sleep(1)
    after = _rss_mib(pid)

    assert sum(statuses.values()) == REVIEWS
    assert set(statuses) <= {200, 400, 422}, statuses
    assert webhook.stop() == 0
    assert after - baseline < BOUND_MIB, (baseline, after)
    # No handler failed on any of them: nothing logged at error, no traceback.
    records = [
        json.loads(line)
        for line in webhook.log_path.read_text().splitlines()
        if line.startswith("{")
    ]
    assert [r for r in records if r["level"] in ("error", "critical") or "error" in r] == []
