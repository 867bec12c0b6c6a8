"""What a handler decided, before it is wrapped in an AdmissionReview."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.core.birth import Unreached
from webhook.metrics import Result

# Where a tenant or operator reads why Headroom refuses limits.cpu quotas.
RUNBOOK_QUOTA_SECTION: Final = (
    'the Headroom operator runbook, Preflight, "ResourceQuota: requests.cpu only" '
    "(docs/operator-runbook.md#preflight)"
)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    result: Result
    message: str | None = None
    code: int | None = None
    warnings: tuple[str, ...] = ()
    patch: list[dict[str, Any]] | None = None
    # A pod Headroom manages, born without a birth limit: why (``/mutate/pods`` only).
    unseeded: Unreached | None = None


def allow(*, warnings: Sequence[str] = ()) -> Decision:
    return Decision(allowed=True, result=Result.ALLOWED, warnings=tuple(warnings))


def deny(message: str, *, code: int = 403, warnings: Sequence[str] = ()) -> Decision:
    return Decision(
        allowed=False, result=Result.DENIED, message=message, code=code, warnings=tuple(warnings)
    )


def unchecked(warning: str) -> Decision:
    """Admitted without the check because the cluster cache could not answer."""
    return Decision(allowed=True, result=Result.UNCHECKED, warnings=(warning,))
