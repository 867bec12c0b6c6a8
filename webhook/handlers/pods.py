"""``/mutate/pods``: seed a birth CPU limit on new pods in managed namespaces (design §6).

Only CREATE, only when ``webhook.enabled`` and not ``dryRun`` (the pod's node pool's, when
its node selection settles which pool it lands in), only for pods Headroom would manage.
A pod with pod-level resources gets its limit at pod level, and only where the API server
resizes pod-level resources by default: elsewhere Headroom could never adjust that limit
later. The JSONPatch touches nothing but the seeded ``limits.cpu`` values (see
``webhook.patch``); no patch when nothing was seeded.
"""

from app.config import settings_for_pod
from app.eligibility import pod_ineligibility
from app.nodefeatures import server_resizes_pod_level_by_default
from app.pods import pod_info_from_dict
from app.policy import seed_limits, seed_pod_limit
from webhook.cache import ClusterCache, Unavailable
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import Decision, allow, unchecked
from webhook.metrics import Result
from webhook.patch import limits_patch, pod_limit_patch


async def review_pod(request: AdmissionRequest, *, cluster: ClusterCache) -> Decision:
    pod = request.object
    if request.operation != "CREATE" or pod is None:
        return allow()
    spec = pod.get("spec") or {}
    try:
        settings, _ = settings_for_pod(await cluster.settings(), spec)
        if not settings.webhook_enabled or settings.dry_run:
            return allow()
        namespace_labels = await cluster.namespace_labels(request.namespace)
        limit_range = await cluster.limit_range_caps(request.namespace)
    except Unavailable as err:
        return unchecked(f"Headroom did not seed a CPU limit: {err}")
    metadata = pod.get("metadata") or {}
    # The object may omit its namespace; the request names it.
    info = pod_info_from_dict({**pod, "metadata": {**metadata, "namespace": request.namespace}})
    warnings = [info.max_cpu_warning] if info.max_cpu_warning else []
    # A pod being created is unbound and has no resize history, and this webhook does not
    # watch VPAs: the node, back-off and VPA gates are the reconciler's.
    if pod_ineligibility(
        settings,
        info,
        namespace_labels=namespace_labels,
        node_labels=None,
        backed_off=False,
        vpa_controls_limits=False,
    ):
        return allow(warnings=warnings)
    if info.pod_resources is not None:
        try:
            served = server_resizes_pod_level_by_default(await cluster.server_version())
        except Unavailable as err:
            return unchecked(f"Headroom did not seed a CPU limit: {err}")
        limit_m = seed_pod_limit(info, settings, limit_range=limit_range) if served else None
        patch = None if limit_m is None else pod_limit_patch(pod, limit_m)
    else:
        patch = limits_patch(pod, seed_limits(info, settings, limit_range=limit_range))
    if patch is None:
        return allow(warnings=warnings)
    return Decision(allowed=True, result=Result.PATCHED, warnings=tuple(warnings), patch=patch)
