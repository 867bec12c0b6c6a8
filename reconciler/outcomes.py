"""Resize outcomes: the `headroom_resizes_total{result}` vocabulary and how API answers map to it.

The label values are spelled exactly as the operator runbook's table spells them, because
operators' alerts match on them.
"""

from collections.abc import Mapping
from enum import StrEnum
from http import HTTPStatus
from typing import Any


class Result(StrEnum):
    OK = "ok"
    DRY_RUN = "dry-run"
    DEFERRED = "Deferred"
    INFEASIBLE = "Infeasible"
    QUOTA_DENIED = "quota-denied"
    CONFLICT = "conflict"
    ERROR = "error"


# ResourceQuota admission phrases its refusals of a resize this way; any other 403 (RBAC,
# LimitRanger) is not fixed by waiting for quota to free up.
_QUOTA_PHRASES = ("exceeded quota", "must specify limits.cpu")


def status_message(body: Mapping[str, Any]) -> str:
    """The human message of an API `Status` object, or an empty string."""
    message = body.get("message")
    return message if isinstance(message, str) else ""


def resize_result(*, code: int, body: Mapping[str, Any]) -> Result | None:
    """Classify the API server's answer to a `pods/resize` patch; None means the pod is gone."""
    if HTTPStatus.OK <= code < HTTPStatus.MULTIPLE_CHOICES:
        return Result.OK
    if code == HTTPStatus.NOT_FOUND:
        return None
    if code == HTTPStatus.CONFLICT:
        return Result.CONFLICT
    if code == HTTPStatus.FORBIDDEN:
        message = status_message(body)
        if any(phrase in message for phrase in _QUOTA_PHRASES):
            return Result.QUOTA_DENIED
    return Result.ERROR
