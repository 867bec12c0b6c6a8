import orjson
import pytest
from prometheus_client import CollectorRegistry

from app.core.birth import Unseeded
from tests.unit.app.builders import headroom_config, resource_quota
from tests.unit.webhook.builders import admission_review, cluster_cache, new_pod
from tests.unit.webhook.client import CERTS, Client, admit, webhook_client
from webhook.app import create_app
from webhook.cache import Resource
from webhook.health import Health
from webhook.metrics import Endpoint, Result, WebhookMetrics

JSON = {"content-type": "application/json"}
ENDPOINTS = [endpoint.value for endpoint in Endpoint]


def _status(reply_json: dict[str, object], code: int) -> None:
    assert reply_json["kind"] == "Status"
    assert reply_json["code"] == code
    assert isinstance(reply_json["message"], str)
    assert reply_json["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_malformed_json_is_a_400(path: str) -> None:
    reply = webhook_client(cluster_cache()).post(path, content=b"{not json", headers=JSON)
    assert reply.status_code == 400
    _status(reply.json(), 400)
    assert reply.json()["message"].startswith("body is not valid JSON")


@pytest.mark.parametrize("path", ENDPOINTS)
def test_wrong_content_type_is_a_415(path: str) -> None:
    reply = webhook_client(cluster_cache()).post(
        path, content=b"{}", headers={"content-type": "text/plain"}
    )
    assert reply.status_code == 415
    _status(reply.json(), 415)


def test_declared_oversized_body_is_a_413_before_reading_it() -> None:
    client = webhook_client(cluster_cache())
    reply = client.post(
        "/mutate/pods", content=b"{}", headers={**JSON, "content-length": str(4 * 1024 * 1024)}
    )
    assert reply.status_code == 413
    assert reply.json()["message"] == "body larger than 3145728 bytes"


def test_streamed_oversized_body_is_a_413() -> None:
    cluster = cluster_cache()
    app = create_app(
        cluster=cluster,
        health=Health(certificates=CERTS, cluster=cluster),
        metrics=WebhookMetrics(CollectorRegistry()),
        max_body_bytes=1024,
    )
    review = admission_review(new_pod())
    review["request"]["object"]["metadata"]["annotations"] = {"padding": "x" * 2048}
    reply = Client(app).post("/mutate/pods", content=orjson.dumps(review), headers=JSON)
    assert reply.status_code == 413


def test_review_of_another_kind_is_a_422() -> None:
    client = webhook_client(cluster_cache())
    review = admission_review(resource_quota(), kind="ResourceQuota")
    reply = client.post("/mutate/pods", content=orjson.dumps(review), headers=JSON)
    assert reply.status_code == 422
    assert reply.json()["message"] == (
        "/mutate/pods reviews Pod, got ResourceQuota; check the webhook configuration's rules"
    )


def test_get_on_an_admission_endpoint_is_not_allowed() -> None:
    assert webhook_client(cluster_cache()).get("/mutate/pods").status_code == 405


def test_probes_follow_certificates_and_cache() -> None:
    ready = webhook_client(cluster_cache())
    assert ready.get("/healthz").status_code == 200
    assert ready.get("/readyz").text == "ok\n"
    syncing = webhook_client(cluster_cache(unsynced=[Resource.CONFIG, Resource.LIMIT_RANGES]))
    reply = syncing.get("/readyz")
    assert reply.status_code == 503
    assert reply.text == "limitranges not synced; headroomconfig not synced\n"
    assert syncing.get("/healthz").status_code == 200


def test_every_series_exists_at_zero_and_counts_results() -> None:
    registry = CollectorRegistry()
    client = webhook_client(
        cluster_cache(config=headroom_config(spec={"dryRun": False})), registry=registry
    )

    def count(endpoint: Endpoint, result: Result) -> float | None:
        return registry.get_sample_value(
            "headroom_webhook_requests_total", {"endpoint": endpoint, "result": result}
        )

    for endpoint in Endpoint:
        for result in Result:
            assert count(endpoint, result) == 0.0
        assert (
            registry.get_sample_value(
                "headroom_webhook_request_duration_seconds_count", {"endpoint": endpoint}
            )
            == 0.0
        )
    for reason in Unseeded:
        assert registry.get_sample_value("headroom_webhook_unseeded_total", {"reason": reason}) == 0
    admit(client, "/mutate/pods", admission_review(new_pod()))
    admit(
        client,
        "/validate/resourcequotas",
        admission_review(resource_quota(hard={"limits.cpu": "1"}), kind="ResourceQuota"),
    )
    client.post("/validate/namespaces", content=b"nope", headers=JSON)
    assert count(Endpoint.MUTATE_PODS, Result.PATCHED) == 1.0
    assert count(Endpoint.VALIDATE_QUOTAS, Result.DENIED) == 1.0
    assert count(Endpoint.VALIDATE_NAMESPACES, Result.BAD_REQUEST) == 1.0
    assert (
        registry.get_sample_value(
            "headroom_webhook_request_duration_seconds_count", {"endpoint": "/mutate/pods"}
        )
        == 1.0
    )
