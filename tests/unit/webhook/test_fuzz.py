"""Fuzzing every endpoint: any body gets a deliberate answer, never a crash, a 500 or a
handler exception.

Three kinds of input: arbitrary bytes and JSON; generated AdmissionReviews; and type
confusion inside well-formed reviews, where every field of a complete object at every
depth (everything a handler reads, and more) is replaced in turn by a value of each JSON
type, including one nested 900 deep. The in-process client re-raises anything the app
does not answer, so an escaped exception fails the test; a handler exception the app
does answer is caught by the log check.
"""

import json
import logging
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tests.unit.app.builders import (
    container,
    headroom_config,
    limit_range,
    namespace,
    resource_quota,
)
from tests.unit.webhook.builders import GVK, admission_review, cluster_cache, new_pod
from tests.unit.webhook.client import webhook_client
from tests.unit.webhook.malformed import (
    DEEP,
    DEEP_MARK,
    confused_reviews,
    encoded,
    full_pod,
    replaced,
)
from webhook.metrics import Endpoint

ALLOWED_STATUSES = {200, 400, 413, 415, 422}
REGISTRY = CollectorRegistry()
CLIENT = webhook_client(
    cluster_cache(
        namespaces=[namespace("team-a"), namespace("team-b", labels={})],
        quotas=[resource_quota("q", hard={"limits.cpu": "1"})],
        limit_ranges=[limit_range(container_max_cpu="3")],
        config=headroom_config(spec={"dryRun": False}),
    ),
    registry=REGISTRY,
)


class _Problems(logging.Handler):
    """Every record logged at ERROR or with a traceback: a handler exception logs both."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


PROBLEMS = _Problems()


@pytest.fixture(autouse=True, scope="module")
def _watch_logs() -> Iterator[None]:
    logger = logging.getLogger("webhook")
    logger.addHandler(PROBLEMS)
    try:
        yield
    finally:
        logger.removeHandler(PROBLEMS)


def _no_handler_exceptions() -> None:
    found = [record.getMessage() for record in PROBLEMS.records]
    PROBLEMS.records.clear()
    assert found == []


endpoints = st.sampled_from([endpoint.value for endpoint in Endpoint])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
quantities = st.sampled_from(
    ["1", "500m", "0", "-1", "1e3", "0.0001", "abc", "", "10Ki"]
) | st.text(max_size=6)
containers = st.builds(
    container,
    name=st.sampled_from(["app", "side", "init"]),
    cpu_request=st.none() | quantities,
    cpu_limit=st.none() | quantities,
    memory_request=st.none() | quantities,
    memory_limit=st.none() | quantities,
    restart_policy=st.sampled_from([None, "Always", "OnFailure"]),
    cpu_resize_policy=st.sampled_from([None, "RestartContainer", "NotRequired"]),
)
objects = st.one_of(
    st.builds(
        new_pod,
        namespace=st.sampled_from(["team-a", "team-b", "kube-system"]),
        containers=st.lists(containers, max_size=3),
        init_containers=st.lists(containers, max_size=2),
        max_cpu=st.none() | quantities,
    ),
    st.builds(
        resource_quota,
        hard=st.dictionaries(st.sampled_from(["limits.cpu", "requests.cpu", "pods"]), quantities),
    ),
    st.builds(
        namespace,
        st.sampled_from(["team-a", "team-b"]),
        labels=st.dictionaries(
            st.sampled_from(["kube-headroom.dev/mode", "x"]), st.text(max_size=8)
        ),
    ),
    st.builds(headroom_config, spec=st.dictionaries(st.text(max_size=12), json_values, max_size=4)),
    json_values,
)


def _post(path: str, body: bytes, content_type: str = "application/json") -> Any:
    reply = CLIENT.post(path, content=body, headers={"content-type": content_type})
    assert reply.status_code in ALLOWED_STATUSES, (reply.status_code, reply.text)
    decoded = reply.json()
    assert isinstance(decoded, dict)
    _no_handler_exceptions()
    return reply.status_code, decoded


@given(path=endpoints, body=st.binary(max_size=512))
def test_arbitrary_bytes(path: str, body: bytes) -> None:
    _post(path, body)


@given(path=endpoints, body=json_values)
def test_arbitrary_json(path: str, body: object) -> None:
    _post(path, json.dumps(body).encode())


@given(
    path=endpoints,
    content_type=st.sampled_from(
        ["application/json", "application/json; charset=utf-8", "text/plain", ""]
    ),
)
def test_content_types(path: str, content_type: str) -> None:
    body = orjson.dumps(admission_review(new_pod()))
    status, _ = _post(path, body, content_type)
    assert (status == 415) == (not content_type.startswith("application/json"))


@given(
    path=endpoints,
    obj=objects,
    old=st.none() | objects,
    kind=st.sampled_from(list(GVK)),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    overrides=st.dictionaries(
        st.sampled_from(
            ["uid", "kind", "operation", "namespace", "name", "object", "oldObject", "dryRun"]
        ),
        json_values,
        max_size=2,
    ),
)
def test_admission_reviews(
    path: str, obj: Any, old: Any, kind: str, operation: str, overrides: dict[str, Any]
) -> None:
    review = admission_review(
        obj if isinstance(obj, dict) else None,
        kind=kind,
        operation=operation,
        old=old if isinstance(old, dict) else None,
        namespace="team-a",
    )
    review["request"].update(overrides)
    status, body = _post(path, json.dumps(review).encode())
    if status == 200:
        assert body["apiVersion"] == "admission.k8s.io/v1"
        assert body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == review["request"]["uid"]
        assert isinstance(body["response"]["allowed"], bool)


# -- type confusion at every depth ------------------------------------------------------


def test_type_confusion_at_every_depth_gets_a_clean_answer() -> None:
    before = _sample("error")
    sent = 0
    unexpected = []
    for endpoint, _field, review in confused_reviews():
        reply = CLIENT.post(
            endpoint, content=encoded(review), headers={"content-type": "application/json"}
        )
        sent += 1
        if reply.status_code not in {200, 422}:
            unexpected.append((endpoint, reply.status_code, reply.text[:200]))
        elif reply.status_code == 200:
            assert reply.json()["response"]["uid"] == review["request"]["uid"]
        else:
            assert "cannot read this" in reply.json()["message"]
    _no_handler_exceptions()
    assert unexpected == []
    assert _sample("error") == before
    # Every field of four complete objects (and the namespace's old object), each way.
    assert sent > 1000


def test_a_misfit_is_named_by_its_path() -> None:
    pod = replaced(full_pod(), ("spec", "containers", 1, "resources", "limits"), ["1"])
    pod = replaced(pod, ("metadata", "labels", "app"), 3)
    reply = CLIENT.post(
        Endpoint.MUTATE_PODS,
        content=orjson.dumps(admission_review(pod, namespace="team-a")),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 422
    assert reply.json()["message"] == (
        "/mutate/pods cannot read this Pod: "
        "request.object.metadata.labels['app']: must be a string, got a number; "
        "request.object.spec.containers[1].resources.limits: must be an object, got a list"
    )


@pytest.mark.parametrize("field", ["operation", "kind", "apiVersion", "uid", "object"])
@pytest.mark.parametrize("depth", [DEEP, 1023, 5000])
def test_deeply_nested_values_in_the_envelope_are_a_400(field: str, depth: int) -> None:
    review = admission_review(new_pod())
    target = review if field in ("kind", "apiVersion") else review["request"]
    target[field] = DEEP_MARK
    nested = b"[" * depth + b"1" + b"]" * depth
    body = json.dumps(review).replace(f'"{DEEP_MARK}"', nested.decode()).encode()
    status, decoded = _post(Endpoint.MUTATE_PODS, body)
    assert status in {400, 422}
    assert len(decoded["message"]) < 300


def _sample(result: str) -> float:
    return sum(
        REGISTRY.get_sample_value(
            "headroom_webhook_requests_total", {"endpoint": endpoint.value, "result": result}
        )
        or 0.0
        for endpoint in Endpoint
    )
