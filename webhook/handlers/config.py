"""``/validate/headroomconfigs``: every rule of the config model, every error with its path."""

from app.core.config import validate_config
from app.core.labels import CONFIG_KIND
from webhook.cache import AdmissionCache
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import Decision, allow, deny


async def review_config(request: AdmissionRequest, cluster: AdmissionCache) -> Decision:
    # The config is checked on its own; ``cluster`` is taken as every handler takes it.
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return allow()
    result = validate_config(request.object)
    warnings = [str(warning) for warning in result.warnings]
    if result.allowed:
        return allow(warnings=warnings)
    count = len(result.errors)
    findings = "; ".join(str(error) for error in result.errors)
    noun = "error" if count == 1 else "errors"
    return deny(
        f"{CONFIG_KIND} {request.name or '(unnamed)'} is invalid ({count} {noun}): {findings}",
        code=422,
        warnings=warnings,
    )
