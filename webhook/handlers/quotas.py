"""``/validate/resourcequotas``: no ``limits.cpu`` quota in a namespace Headroom manages.

Such a quota is charged for every limit Headroom raises and refuses raises past its
budget, so the fix is to quota ``requests.cpu`` instead. Removing the key is always
allowed; quotas in namespaces Headroom does not manage are none of its business.
"""

from typing import Final

from app.core.eligibility import namespace_enrolled
from app.core.views import LIMITS_CPU, has_limits_cpu
from webhook.cache import AdmissionCache, Unavailable
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import RUNBOOK_QUOTA_SECTION, Decision, allow, deny, unchecked
from webhook.shapes import ANYTHING, Fields, MapOf

# What this handler reads of the quota: whether spec.hard holds limits.cpu.
QUOTA_SHAPE: Final = Fields(spec=Fields(hard=MapOf(ANYTHING)))


async def review_quota(request: AdmissionRequest, cluster: AdmissionCache) -> Decision:
    quota = request.object
    if request.operation not in ("CREATE", "UPDATE") or quota is None or not has_limits_cpu(quota):
        return allow()
    namespace = request.namespace
    name = f"{namespace}/{request.name}"
    try:
        settings = await cluster.settings()
        labels = await cluster.namespace_labels(namespace)
    except Unavailable as err:
        return unchecked(
            f"Headroom could not check ResourceQuota {name} ({err}); if namespace {namespace} "
            f"is managed by Headroom, a {LIMITS_CPU} quota will block its CPU limit raises"
        )
    if not namespace_enrolled(settings, name=namespace, labels=labels):
        return allow()
    return deny(
        f"ResourceQuota {name} sets {LIMITS_CPU} in spec.hard, but namespace {namespace} is "
        f"managed by Headroom, which raises CPU limits into idle node capacity; a {LIMITS_CPU} "
        f"quota would be charged for those raises and refuse them. Remove {LIMITS_CPU} from "
        f"spec.hard and quota requests.cpu instead. See {RUNBOOK_QUOTA_SECTION}."
    )
