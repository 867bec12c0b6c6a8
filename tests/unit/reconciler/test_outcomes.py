from typing import Any

import pytest

from reconciler.outcomes import Answer, Result, classify, result_of


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


def _denied(message: str) -> dict[str, Any]:
    """The API server's words when the chart's resize policy denies a resize."""
    return status(
        422,
        "Invalid",
        'pods "rl-node-11-p11" is forbidden: ValidatingAdmissionPolicy '
        "'kube-headroom-reconciler-pod-resizes' with binding "
        f"'kube-headroom-reconciler-pod-resizes' denied request: {message}",
    )


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(
            "failed to configure binding: no params found for policy binding with `Deny` "
            "parameterNotFoundAction",
            id="config-deleted",
        ),
        pytest.param(
            "Headroom's reconciler resizes only pods in namespaces its HeadroomConfig enrols "
            "(spec.namespaceSelector, minus spec.excludedNamespaces).",
            id="namespace-left",
        ),
        pytest.param(
            "Headroom's reconciler does not resize pods labelled kube-headroom.dev/mode other "
            "than managed.",
            id="pod-opted-out",
        ),
        pytest.param(
            "Headroom's reconciler does not resize pods whose owner spec.excludedOwners excludes.",
            id="owner-excluded",
        ),
    ],
)
def test_a_stop_landing_in_flight_is_stopped_not_a_bug(message: str) -> None:
    for code in (403, 422):
        answer = classify(code=code, body=_denied(message))
        assert (answer, result_of(answer)) == (Answer.STOPPED, Result.CONFLICT)


def test_a_policy_the_api_server_could_not_set_up_is_retried_soon() -> None:
    # What the API server answered when its own read of the HeadroomConfig timed out just
    # after the config was deleted and created again (the stops-mid-wave test, under load).
    body = _denied(
        "failed to configure binding: Get "
        '"https://127.0.0.1:20682/apis/kube-headroom.dev/v1alpha1/headroomconfigs/cluster": '
        "context deadline exceeded"
    )
    answer = classify(code=422, body=body)
    assert (answer, result_of(answer)) == (Answer.TRANSIENT, Result.ERROR)


def test_the_policy_s_other_refusal_is_still_a_bug() -> None:
    body = _denied(
        "Headroom's reconciler changes only limits.cpu through pods/resize, never requests, "
        "memory or any other field."
    )
    assert classify(code=403, body=body) is Answer.REJECTED


def test_another_policy_s_words_are_not_taken_for_a_stop() -> None:
    body = status(
        403,
        "Forbidden",
        "ValidatingAdmissionPolicy 'someone-elses' with binding 'b' denied request: "
        "no params found for policy binding with `Deny` parameterNotFoundAction",
    )
    assert classify(code=403, body=body) is Answer.REJECTED
