"""Fuzzing every endpoint: any body gets a deliberate answer, never a crash or a 500."""

import json
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.app.builders import (
    container,
    headroom_config,
    limit_range,
    namespace,
    resource_quota,
)
from tests.unit.webhook.builders import GVK, admission_review, cluster_cache, new_pod
from tests.unit.webhook.client import webhook_client
from webhook.metrics import Endpoint

ALLOWED_STATUSES = {200, 400, 413, 415, 422}
CLIENT = webhook_client(
    cluster_cache(
        namespaces=[namespace("team-a"), namespace("team-b", labels={})],
        quotas=[resource_quota("q", hard={"limits.cpu": "1"})],
        limit_ranges=[limit_range(container_max_cpu="3")],
        config=headroom_config(spec={"dryRun": False}),
    )
)
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
