"""The webhook's Prometheus series, in a registry of its own, every label value present at zero."""

from enum import StrEnum
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

from app.core.birth import Unseeded


class Endpoint(StrEnum):
    MUTATE_PODS = "/mutate/pods"
    VALIDATE_CONFIG = "/validate/headroomconfigs"
    VALIDATE_QUOTAS = "/validate/resourcequotas"
    VALIDATE_NAMESPACES = "/validate/namespaces"


class Result(StrEnum):
    # Admitted unchanged after a complete check.
    ALLOWED = "allowed"
    # Admitted with a JSONPatch (mutating only).
    PATCHED = "patched"
    DENIED = "denied"
    # Admitted without the check: the cluster cache could not answer.
    UNCHECKED = "unchecked"
    # The handler failed; answered with the endpoint's failure response.
    ERROR = "error"
    # The request was not an AdmissionReview we accept (4xx).
    BAD_REQUEST = "bad-request"


_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "headroom_webhook_requests_total",
            "Admission requests by endpoint and result.",
            ["endpoint", "result"],
            registry=registry,
        )
        self.duration = Histogram(
            "headroom_webhook_request_duration_seconds",
            "Time to answer an admission request, from body read to response built.",
            ["endpoint"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.unseeded = Counter(
            "headroom_webhook_unseeded_total",
            "Pods Headroom manages that were born without a birth limit, by why: no live "
            "reconciler, no node to land on yet, or a node Headroom does not manage.",
            ["reason"],
            registry=registry,
        )
        self._unseeded = {reason: self.unseeded.labels(reason) for reason in Unseeded}
        # Every child is created up front (series exist at zero) and kept, so recording a
        # request costs no label look-up.
        self._durations = {endpoint: self.duration.labels(endpoint) for endpoint in Endpoint}
        self._counts = {
            (endpoint, result): self.requests.labels(endpoint, result)
            for endpoint in Endpoint
            for result in Result
        }

    def observe(
        self,
        *,
        endpoint: Endpoint,
        result: Result,
        seconds: float,
        unseeded: Unseeded | None = None,
    ) -> None:
        self._counts[endpoint, result].inc()
        self._durations[endpoint].observe(seconds)
        if unseeded is not None:
            self._unseeded[unseeded].inc()
