"""AdmissionReview v1 envelopes: strict parsing of requests, a pure builder for responses."""

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict, TypeVar, cast, get_args

import orjson

from webhook.shapes import kind_of

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
_OPERATIONS: Final = frozenset(get_args(Operation))
T = TypeVar("T")
# How much of a caller's string an error message repeats.
_SHOWN_CHARS: Final = 64


class BadReview(ValueError):
    """The body is not an AdmissionReview this server can answer; ``status`` is the HTTP code."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """What kind of object an AdmissionReview is about."""

    group: str
    version: str
    kind: str


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    kind: GroupVersionKind
    operation: Operation
    namespace: str
    name: str
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None
    dry_run: bool


class StatusResult(TypedDict):
    code: int
    message: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[StatusResult]
    warnings: NotRequired[list[str]]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]


class AdmissionReviewResponse(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


def parse_review(body: bytes) -> AdmissionRequest:
    """Decode and check an AdmissionReview body; raises ``BadReview`` saying what is wrong."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadReview(f"body is not valid JSON: {err}") from err
    if not isinstance(review, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if review.get("kind") != KIND:
        raise BadReview(f"kind must be {KIND}, got {shown(review.get('kind'))}")
    if review.get("apiVersion") != API_VERSION:
        raise BadReview(
            f"apiVersion must be {API_VERSION}, got {shown(review.get('apiVersion'))}; "
            "the webhook configuration must list admissionReviewVersions: [v1]"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid is missing or not a non-empty string")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in _OPERATIONS:
        raise BadReview(
            f"request.operation must be one of {', '.join(sorted(_OPERATIONS))}, "
            f"got {shown(operation)}"
        )
    return AdmissionRequest(
        uid=uid,
        kind=_gvk(request.get("kind")),
        operation=cast(Operation, operation),
        namespace=_optional(request, "namespace", str, "", "a string"),
        name=_optional(request, "name", str, "", "a string"),
        object=_optional(request, "object", dict, None, "an object or null"),
        old_object=_optional(request, "oldObject", dict, None, "an object or null"),
        dry_run=_optional(request, "dryRun", bool, False, "a boolean"),
    )


def cut(text: str) -> str:
    """A caller's string, cut short for an error message."""
    return text if len(text) <= _SHOWN_CHARS else f"{text[:_SHOWN_CHARS]}..."


def shown(value: object) -> str:
    """A caller's value for an error message: a string quoted and cut short, anything
    else by its kind alone (a value nested a thousand deep must not be formatted)."""
    return repr(cut(value)) if isinstance(value, str) else kind_of(value)


def _gvk(value: object) -> GroupVersionKind:
    if not isinstance(value, dict):
        raise BadReview("request.kind is missing or not an object")
    parts = {key: value.get(key, "") for key in ("group", "version", "kind")}
    for key, part in parts.items():
        if not isinstance(part, str):
            raise BadReview(f"request.kind.{key} must be a string")
    if not parts["version"] or not parts["kind"]:
        raise BadReview("request.kind needs version and kind")
    return GroupVersionKind(group=parts["group"], version=parts["version"], kind=parts["kind"])


def _optional(request: Mapping[str, Any], key: str, kind: type[T], default: T, noun: str) -> T:
    """The field's value, ``default`` when it is absent or null."""
    value = request.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise BadReview(f"request.{key} must be {noun}")
    return value


def build_response(
    *,
    uid: str,
    allowed: bool,
    message: str | None = None,
    code: int | None = None,
    warnings: Sequence[str] = (),
    patch: Sequence[Mapping[str, Any]] | None = None,
) -> AdmissionReviewResponse:
    """The AdmissionReview answering ``uid``; a patch is attached only when it has operations."""
    response: AdmissionResponse = {"uid": uid, "allowed": allowed}
    if message is not None or code is not None:
        response["status"] = {"code": code or (200 if allowed else 403), "message": message or ""}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(list(patch))).decode("ascii")
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
