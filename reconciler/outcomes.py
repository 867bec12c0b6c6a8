"""Resize outcomes: the `headroom_resizes_total{result}` vocabulary, and what each API answer
to a write means.

The label values are spelled exactly as the operator runbook's table spells them, because
operators' alerts match on them.

Answers are classified once, here (`classify`):

- **stopped**: the chart's own admission policies refused the write because a stop
  happened while it was on its way: the HeadroomConfig was deleted (the resize policy
  then has no params), the pod's namespace left enrolment, the pod opted out, or its
  owner was excluded. The write gate checks all of these right before sending, so only
  a change landing in flight reaches the API server. Like the gate's own refusal it means
  "not wanted now": no back-off, and the pod is planned again when the cluster says so
  (the config back, the namespace enrolled, the label removed).
- **quota-denied**: a `limits.cpu` ResourceQuota refused the raise (back off).
- **transient**: the API server could not answer now (429, 5xx), or could not evaluate the
  chart's resize policy because it could not read the policy's HeadroomConfig just then (its
  own read timed out, say): retried soon.
- **rejected**: anything else the API server refused. The eligibility gates and the QoS
  guard exist so that this never happens: it is logged as a bug and the pod backs off,
  until its node's settings change.
"""

import re
from collections.abc import Mapping
from enum import Enum, StrEnum
from http import HTTPStatus
from typing import Any, Final


class Result(StrEnum):
    OK = "ok"
    DRY_RUN = "dry-run"
    DEFERRED = "Deferred"
    INFEASIBLE = "Infeasible"
    QUOTA_DENIED = "quota-denied"
    CONFLICT = "conflict"
    ERROR = "error"


class Answer(Enum):
    OK = "ok"
    # The pod is gone.
    GONE = "gone"
    CONFLICT = "conflict"
    STOPPED = "stopped"
    QUOTA_DENIED = "quota-denied"
    TRANSIENT = "transient"
    REJECTED = "rejected"


# ResourceQuota admission phrases its refusals of a resize this way; any other 403 (RBAC,
# LimitRanger) is not fixed by waiting for quota to free up.
_QUOTA_PHRASES: Final = ("exceeded quota", "must specify limits.cpu")
# How the API server names a ValidatingAdmissionPolicy that denied a request.
_POLICY_DENIAL: Final = re.compile(r"ValidatingAdmissionPolicy '[^']*-pod-resizes'")
# The chart's resize policy (chart/kube-headroom/templates/reconciler-pod-policy.yaml):
# the API server's words when its HeadroomConfig parameter is gone, and the policy's own
# messages for the stops. A unit test holds these to the rendered chart.
POLICY_STOPS: Final = (
    "no params found for policy binding",
    "resizes only pods in namespaces its HeadroomConfig enrols",
    "does not resize pods labelled kube-headroom.dev/mode other than managed",
    "does not resize pods whose owner spec.excludedOwners excludes",
    "does not change the CPU limits of containers spec.excludedContainers names",
)
# How the API server says it could not set the policy up for this request (other than a
# missing parameter, a stop): typically its read of the HeadroomConfig failed just then.
_POLICY_UNCONFIGURED: Final = "failed to configure binding"

_RESULTS: Final = {
    Answer.OK: Result.OK,
    Answer.CONFLICT: Result.CONFLICT,
    # Refused because the cluster changed under the write: a conflict with the stop.
    Answer.STOPPED: Result.CONFLICT,
    Answer.QUOTA_DENIED: Result.QUOTA_DENIED,
    Answer.TRANSIENT: Result.ERROR,
    Answer.REJECTED: Result.ERROR,
}


def classify(*, code: int, body: Mapping[str, Any]) -> Answer:
    """What the API server's answer to a write means."""
    if HTTPStatus.OK <= code < HTTPStatus.MULTIPLE_CHOICES:
        return Answer.OK
    if code == HTTPStatus.NOT_FOUND:
        return Answer.GONE
    if code == HTTPStatus.CONFLICT:
        return Answer.CONFLICT
    if code == HTTPStatus.TOO_MANY_REQUESTS or code >= HTTPStatus.INTERNAL_SERVER_ERROR:
        return Answer.TRANSIENT
    message = str(body.get("message") or "")
    if _POLICY_DENIAL.search(message):
        if any(stop in message for stop in POLICY_STOPS):
            return Answer.STOPPED
        if _POLICY_UNCONFIGURED in message:
            return Answer.TRANSIENT
    if code == HTTPStatus.FORBIDDEN and any(phrase in message for phrase in _QUOTA_PHRASES):
        return Answer.QUOTA_DENIED
    return Answer.REJECTED


def result_of(answer: Answer) -> Result | None:
    """The resize outcome an answer counts as; None for a pod that is gone."""
    return _RESULTS.get(answer)
