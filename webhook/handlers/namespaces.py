"""``/validate/namespaces``: a namespace holding a ``limits.cpu`` quota cannot be enrolled.

Only a change that enrols the namespace is checked: a namespace already managed (or
one being created, which holds no quota yet) is allowed, so ordinary updates are never
blocked by a quota that predates this webhook.
"""

from collections.abc import Mapping
from typing import Any, Final

from app.core.config import Settings
from app.core.eligibility import namespace_enrolled
from app.core.views import LIMITS_CPU, labels
from webhook.cache import AdmissionCache, Unavailable
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import RUNBOOK_QUOTA_SECTION, Decision, allow, deny, unchecked
from webhook.shapes import STRING_MAP, Fields

# What this handler reads of the namespace, new and old.
NAMESPACE_SHAPE: Final = Fields(metadata=Fields(labels=STRING_MAP))


async def review_namespace(request: AdmissionRequest, cluster: AdmissionCache) -> Decision:
    namespace = request.object
    if request.operation != "UPDATE" or namespace is None:
        return allow()
    name = request.name
    try:
        settings = await cluster.settings()
    except Unavailable as err:
        return unchecked(f"Headroom could not check whether this change enrols {name}: {err}")
    if not _enrolled(settings, name, namespace) or (
        request.old_object is not None and _enrolled(settings, name, request.old_object)
    ):
        return allow()
    try:
        quotas = await cluster.limit_quota_names(name)
    except Unavailable as err:
        return unchecked(
            f"Headroom could not check namespace {name} for {LIMITS_CPU} quotas ({err}); "
            f"any such quota will block CPU limit raises once it is managed"
        )
    if not quotas:
        return allow()
    noun = "ResourceQuota" if len(quotas) == 1 else "ResourceQuotas"
    return deny(
        f"namespace {name} cannot be enrolled in Headroom while its {noun} "
        f"{', '.join(quotas)} set {LIMITS_CPU}: Headroom raises CPU limits into idle node "
        f"capacity, and a {LIMITS_CPU} quota would be charged for those raises and refuse "
        f"them. Remove {LIMITS_CPU} from their spec.hard (quota requests.cpu instead), then "
        f"enrol the namespace. See {RUNBOOK_QUOTA_SECTION}."
    )


def _enrolled(settings: Settings, name: str, namespace: Mapping[str, Any]) -> bool:
    return namespace_enrolled(settings, name=name, labels=labels(namespace))
