import base64
from typing import Any

import orjson
import pytest

from tests.unit.webhook.builders import admission_review, new_pod
from webhook.envelope import BadReview, GroupVersionKind, build_response, parse_review


def _review(**request_overrides: Any) -> dict[str, Any]:
    review = admission_review(new_pod(), uid="uid-1")
    for key, value in request_overrides.items():
        if value is None:
            review["request"].pop(key, None)
        else:
            review["request"][key] = value
    return review


def test_parses_a_pod_review() -> None:
    pod = new_pod()
    request = parse_review(orjson.dumps(admission_review(pod, uid="uid-1", dry_run=True)))
    assert request.uid == "uid-1"
    assert request.kind == GroupVersionKind(group="", version="v1", kind="Pod")
    assert request.operation == "CREATE"
    assert (request.namespace, request.name) == ("team-a", "web-abcde")
    assert request.object == pod
    assert request.old_object is None
    assert request.dry_run is True


BAD = {
    "not-json": (b"{", "body is not valid JSON"),
    "not-an-object": (b"[1, 2]", "body must be a JSON object"),
    "wrong-kind": (
        orjson.dumps({**_review(), "kind": "Pod"}),
        "kind must be AdmissionReview, got 'Pod'",
    ),
    "v1beta1": (
        orjson.dumps({**_review(), "apiVersion": "admission.k8s.io/v1beta1"}),
        "apiVersion must be admission.k8s.io/v1, got 'admission.k8s.io/v1beta1'",
    ),
    "no-request": (
        orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
        "request is missing",
    ),
    "no-uid": (orjson.dumps(_review(uid=None)), "request.uid is missing"),
    "empty-uid": (orjson.dumps(_review(uid="")), "request.uid is missing"),
    "numeric-uid": (orjson.dumps(_review(uid=7)), "request.uid is missing"),
    "bad-operation": (orjson.dumps(_review(operation="PATCH")), "request.operation must be"),
    "no-kind": (orjson.dumps(_review(kind=None)), "request.kind is missing"),
    "kind-without-version": (
        orjson.dumps(_review(kind={"group": "", "kind": "Pod"})),
        "request.kind needs version and kind",
    ),
    "kind-field-not-string": (
        orjson.dumps(_review(kind={"group": 1, "version": "v1", "kind": "Pod"})),
        "request.kind.group must be a string",
    ),
    "object-not-object": (orjson.dumps(_review(object=[1])), "request.object must be an object"),
    "namespace-not-string": (orjson.dumps(_review(namespace=3)), "request.namespace must be"),
    "dry-run-not-bool": (orjson.dumps(_review(dryRun="yes")), "request.dryRun must be a boolean"),
}


@pytest.mark.parametrize(("body", "message"), list(BAD.values()), ids=list(BAD))
def test_rejects_what_is_not_an_admission_review_v1(body: bytes, message: str) -> None:
    with pytest.raises(BadReview, match=message) as raised:
        parse_review(body)
    assert raised.value.status == 400


def test_response_echoes_uid_api_version_and_kind() -> None:
    assert build_response(uid="abc", allowed=True) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "abc", "allowed": True},
    }


def test_denial_carries_status_and_warnings() -> None:
    review = build_response(uid="abc", allowed=False, message="no", code=422, warnings=["careful"])
    assert review["response"] == {
        "uid": "abc",
        "allowed": False,
        "status": {"code": 422, "message": "no"},
        "warnings": ["careful"],
    }


def test_denial_code_defaults_to_forbidden() -> None:
    assert build_response(uid="u", allowed=False, message="no")["response"]["status"] == {
        "code": 403,
        "message": "no",
    }


def test_patch_is_base64_json_patch() -> None:
    patch = [{"op": "add", "path": "/spec/containers/0/resources/limits/cpu", "value": "1"}]
    response = build_response(uid="u", allowed=True, patch=patch)["response"]
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == patch


@pytest.mark.parametrize("patch", [None, []], ids=["none", "empty"])
def test_no_patch_fields_without_operations(patch: list[dict[str, Any]] | None) -> None:
    response = build_response(uid="u", allowed=True, patch=patch)["response"]
    assert "patch" not in response
    assert "patchType" not in response
