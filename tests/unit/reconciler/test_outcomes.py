from typing import Any

import pytest

from reconciler.outcomes import Result, classify, result_of


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A `Status` body as the API server returns it with a refusal."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": "web-1", "kind": "pods"},
        "code": code,
    }


@pytest.mark.parametrize(
    ("code", "body", "expected"),
    [
        pytest.param(200, {"kind": "Pod"}, Result.OK, id="applied"),
        pytest.param(201, {"kind": "Pod"}, Result.OK, id="created"),
        pytest.param(
            403,
            status(
                403,
                "Forbidden",
                'pods "web-1" is forbidden: exceeded quota: compute, requested: limits.cpu=500m,'
                " used: limits.cpu=2, limited: limits.cpu=2",
            ),
            Result.QUOTA_DENIED,
            id="quota-exceeded",
        ),
        pytest.param(
            403,
            status(
                403,
                "Forbidden",
                'pods "web-1" is forbidden: failed quota: compute:'
                " must specify limits.cpu for: app",
            ),
            Result.QUOTA_DENIED,
            id="quota-needs-limits",
        ),
        pytest.param(
            403,
            status(
                403,
                "Forbidden",
                'pods "web-1" is forbidden: User "system:serviceaccount:kube-headroom-system:r"'
                ' cannot patch resource "pods/resize" in API group "" in the namespace "team-a"',
            ),
            Result.ERROR,
            id="rbac-forbidden",
        ),
        pytest.param(
            409,
            status(
                409,
                "Conflict",
                'Operation cannot be fulfilled on pods "web-1": the object has been modified',
            ),
            Result.CONFLICT,
            id="conflict",
        ),
        pytest.param(
            422,
            status(
                422,
                "Invalid",
                'Pod "web-1" is invalid: spec: Forbidden: Pod QOS Class may not change as a'
                " result of resizing",
            ),
            Result.ERROR,
            id="invalid-qos-change",
        ),
        pytest.param(
            429, status(429, "TooManyRequests", "slow down"), Result.ERROR, id="throttled"
        ),
        pytest.param(500, {}, Result.ERROR, id="server-error-without-body"),
        pytest.param(404, status(404, "NotFound", 'pods "web-1" not found'), None, id="pod-gone"),
    ],
)
def test_resize_result(code: int, body: dict[str, Any], expected: Result | None) -> None:
    assert result_of(classify(code=code, body=body)) is expected


def test_result_values_are_spelled_as_the_runbook_table() -> None:
    assert [result.value for result in Result] == [
        "ok",
        "dry-run",
        "Deferred",
        "Infeasible",
        "quota-denied",
        "conflict",
        "error",
    ]
