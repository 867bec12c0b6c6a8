import datetime

import pytest

from app.io.probes import ProbeApp
from certs.source import SelfSignedCertificateSource
from tests.unit.webhook.builders import cluster_cache
from tests.unit.webhook.client import Client
from webhook.cache import Resource
from webhook.health import Health


def _certs(*, expired: bool = False) -> SelfSignedCertificateSource:
    now = [datetime.datetime.now(datetime.UTC)]
    source = SelfSignedCertificateSource(
        dns_names=["localhost"], ip_addresses=[], clock=lambda: now[0]
    )
    if expired:
        now[0] += datetime.timedelta(days=400)
    return source


@pytest.mark.parametrize(
    ("expired", "unsynced", "status", "text"),
    [
        pytest.param(False, [], 200, "ok\n", id="ready"),
        pytest.param(True, [], 503, "serving certificate is not healthy\n", id="cert"),
        pytest.param(False, [Resource.NAMESPACES], 503, "namespaces not synced\n", id="cache"),
        pytest.param(
            True,
            [Resource.RESOURCE_QUOTAS],
            503,
            "serving certificate is not healthy; resourcequotas not synced\n",
            id="both",
        ),
    ],
)
def test_readiness(expired: bool, unsynced: list[Resource], status: int, text: str) -> None:
    cluster = cluster_cache(unsynced=unsynced)
    probes = Client(
        ProbeApp(not_ready=Health(certificates=_certs(expired=expired), cluster=cluster).not_ready)
    )
    reply = probes.get("/readyz")
    assert (reply.status_code, reply.text) == (status, text)
    assert probes.get("/healthz").status_code == 200


def test_unknown_probe_path() -> None:
    probes = Client(
        ProbeApp(not_ready=Health(certificates=_certs(), cluster=cluster_cache()).not_ready)
    )
    assert probes.get("/livez").status_code == 404
