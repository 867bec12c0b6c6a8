"""The admission server's FastAPI app: transport, envelopes, error handling, metrics.

Every request ends in a deliberate answer. Input that is not an AdmissionReview we accept
gets a 4xx with a message (413 too large, 415 not JSON, 400 malformed, 422 a review of a
kind the endpoint does not handle, or whose object does not have the shape its handler
reads, every misfit named by path; a body too slow is the transport's, see
``webhook.transport``). A handler that fails unexpectedly
is logged and answered in-band: the mutating webhook admits the pod unchanged with a
warning (a pod without a seeded limit is what failurePolicy Ignore gives anyway), the
validating ones deny with code 500 and a retryable message. Never a 500 with a traceback.
"""

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import orjson
from fastapi import FastAPI, Request, Response
from starlette.requests import ClientDisconnect
from starlette.routing import Route

from app.core.labels import CONFIG_KIND, GROUP
from app.io.probes import LIVENESS, READINESS, ProbeApp
from webhook.cache import AdmissionCache
from webhook.envelope import AdmissionRequest, BadReview, build_response, cut, parse_review
from webhook.handlers.config import review_config
from webhook.handlers.decision import Decision
from webhook.handlers.namespaces import NAMESPACE_SHAPE, review_namespace
from webhook.handlers.pods import POD_SHAPE, review_pod
from webhook.handlers.quotas import QUOTA_SHAPE, review_quota
from webhook.health import Health
from webhook.metrics import Endpoint, Result, WebhookMetrics
from webhook.shapes import ANYTHING, Shape, problems, summary

logger = logging.getLogger(__name__)

# The API server's own limit on a request body.
MAX_BODY_BYTES: Final = 3 * 1024 * 1024

Review = Callable[[AdmissionRequest, AdmissionCache], Awaitable[Decision]]


@dataclass(frozen=True, slots=True)
class _Route:
    endpoint: Endpoint
    group: str
    kind: str
    review: Review
    mutating: bool = False
    # What the handler reads of request.object and request.oldObject.
    object_shape: Shape = ANYTHING
    old_object_shape: Shape = ANYTHING


# The config handler reads no field blindly: the validator checks every one.
_ROUTES: Final = (
    _Route(Endpoint.MUTATE_PODS, "", "Pod", review_pod, mutating=True, object_shape=POD_SHAPE),
    _Route(Endpoint.VALIDATE_CONFIG, GROUP, CONFIG_KIND, review_config),
    _Route(Endpoint.VALIDATE_QUOTAS, "", "ResourceQuota", review_quota, object_shape=QUOTA_SHAPE),
    _Route(
        Endpoint.VALIDATE_NAMESPACES,
        "",
        "Namespace",
        review_namespace,
        object_shape=NAMESPACE_SHAPE,
        old_object_shape=NAMESPACE_SHAPE,
    ),
)


def create_app(
    *,
    cluster: AdmissionCache,
    health: Health,
    metrics: WebhookMetrics,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    app = FastAPI(title="headroom-webhook", openapi_url=None, docs_url=None, redoc_url=None)
    for route in _ROUTES:
        # A plain Starlette route: FastAPI's parameter resolution added about a third to
        # the time of an admission, and the body is parsed here anyway.
        endpoint = _admission_endpoint(route, cluster, metrics, max_body_bytes)
        app.add_route(route.endpoint, endpoint, methods=["POST"])
    # The probes' own app, as on their listener; an ASGI app is a Route of its own.
    probe = ProbeApp(not_ready=health.not_ready)
    app.router.routes += [Route(path, probe, methods=["GET"]) for path in (LIVENESS, READINESS)]
    return app


def _admission_endpoint(
    route: _Route, cluster: AdmissionCache, metrics: WebhookMetrics, max_body_bytes: int
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        try:
            review = parse_review(await _read_body(request, limit=max_body_bytes))
            _check_kind(review, route)
            _check_shape(review, route)
        except BadReview as err:
            result, response = Result.BAD_REQUEST, _failure_status(err.status, str(err))
            unseeded = None
        else:
            decision = await _decide(route, review, cluster)
            result = decision.result
            unseeded = None if decision.unseeded is None else decision.unseeded.reason
            body = build_response(
                uid=review.uid,
                allowed=decision.allowed,
                message=decision.message,
                code=decision.code,
                warnings=decision.warnings,
                patch=decision.patch,
            )
            response = Response(orjson.dumps(body), media_type="application/json")
        metrics.observe(
            endpoint=route.endpoint,
            result=result,
            seconds=time.perf_counter() - started,
            unseeded=unseeded,
        )
        return response

    return endpoint


async def _decide(route: _Route, review: AdmissionRequest, cluster: AdmissionCache) -> Decision:
    try:
        decision = await route.review(review, cluster)
    except Exception:
        logger.exception(
            "%s failed on %s %s",
            route.endpoint,
            route.kind,
            _object_name(review),
            extra=_log_context(review),
        )
        decision = _handler_failed(route)
    if not decision.allowed:
        logger.info(
            "denied %s %s: %s",
            route.kind,
            _object_name(review),
            decision.message,
            extra=_log_context(review),
        )
    elif decision.unseeded is not None and logger.isEnabledFor(logging.DEBUG):
        # One line per pod: only when asked for (``--log-level=debug``); the metric counts.
        logger.debug(
            "no birth limit for %s %s: %s",
            route.kind,
            _object_name(review),
            decision.unseeded.detail,
            extra=_log_context(review),
        )
    return decision


async def _read_body(request: Request, *, limit: int) -> bytes:
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise BadReview(
            f"Content-Type must be application/json, got {media_type or 'none'}", status=415
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadReview(_too_large(limit), status=413)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise BadReview(_too_large(limit), status=413)
    except ClientDisconnect as err:
        raise BadReview("client disconnected before sending the whole body") from err
    return bytes(body)


def _too_large(limit: int) -> str:
    return f"body larger than {limit} bytes"


def _check_kind(review: AdmissionRequest, route: _Route) -> None:
    if (review.kind.group, review.kind.kind) != (route.group, route.kind):
        got = cut(f"{review.kind.group}/{review.kind.kind}".lstrip("/"))
        want = f"{route.group}/{route.kind}".lstrip("/")
        raise BadReview(
            f"{route.endpoint} reviews {want}, got {got}; check the webhook configuration's rules",
            status=422,
        )


def _check_shape(review: AdmissionRequest, route: _Route) -> None:
    found = [
        *problems(review.object, route.object_shape, path="request.object"),
        *problems(review.old_object, route.old_object_shape, path="request.oldObject"),
    ]
    if found:
        raise BadReview(
            f"{route.endpoint} cannot read this {route.kind}: {summary(found)}", status=422
        )


def _handler_failed(route: _Route) -> Decision:
    if route.mutating:
        return Decision(
            allowed=True,
            result=Result.ERROR,
            warnings=("Headroom did not seed a CPU limit: internal error, see the webhook logs",),
        )
    return Decision(
        allowed=False,
        result=Result.ERROR,
        code=500,
        message=f"Headroom could not validate this {route.kind} because of an internal error; "
        "retry, and if it persists see the headroom-webhook logs",
    )


def _log_context(review: AdmissionRequest) -> dict[str, str]:
    return {"uid": review.uid, "kind": review.kind.kind, "object": _object_name(review)}


def _object_name(review: AdmissionRequest) -> str:
    return f"{review.namespace}/{review.name}" if review.namespace else review.name


def _failure_status(status: int, message: str) -> Response:
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message}
    # The rest of a body too large is not worth reading: close the connection instead.
    headers = {"connection": "close"} if status == 413 else None
    return Response(
        orjson.dumps({**body, "code": status}),
        status,
        headers=headers,
        media_type="application/json",
    )
