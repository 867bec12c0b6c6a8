"""``/mutate/pods``: seed a birth CPU limit on new pods in managed namespaces (design §6).

Only CREATE, only when ``webhook.enabled`` and not ``dryRun`` (the pod's node pool's, when
its node selection settles which pool it lands in), only for pods Headroom would manage:
that includes the VPA gate, so a pod whose VerticalPodAutoscaler sets limits is born as
its owner wrote it. And only within Headroom's reach (``app.core.birth``): while a live
reconciler holds its Lease, and when every node the pod can be scheduled to is one the
reconciler manages and enforces on; otherwise the pod is born as its owner wrote it, and
``headroom_webhook_unseeded_total`` counts why. A pod with pod-level resources gets its
limit at pod level, and only where the API server resizes pod-level resources by default:
elsewhere Headroom could never adjust that limit later. A container whose RequestsOnly VPA
recommends a CPU target is seeded from that target, the request VPA's admission
controller is about to set (it caps that request at the limit the pod is born with). The
JSONPatch touches nothing but the seeded ``limits.cpu`` values (see ``webhook.patch``); no
patch when nothing was seeded.
"""

from typing import Final

from app.core.cluster import NamespaceFacts
from app.core.config import settings_for_pod
from app.core.decision import pod_gate, vpa_recommended
from app.core.eligibility import Recommended
from app.core.nodefeatures import server_resizes_pod_level_by_default
from app.core.placement import placement
from app.core.pods import PodWire, excluding, pod_info_from_dict
from app.core.policy import seed_limits, seed_pod_limit
from app.core.quantity import QuantityError
from webhook.cache import AdmissionCache, Unavailable
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import Decision, allow, unchecked
from webhook.metrics import Result
from webhook.patch import limits_patch, pod_limit_patch
from webhook.shapes import STRING, STRING_MAP, Fields, ListOf, merged, shape_of

_NODE_SELECTOR_REQUIREMENTS: Final = ListOf(
    Fields(key=STRING, operator=STRING, values=ListOf(STRING))
)
_NODE_SELECTOR_TERM: Final = Fields(
    matchExpressions=_NODE_SELECTOR_REQUIREMENTS, matchFields=_NODE_SELECTOR_REQUIREMENTS
)
# Everything of a pod that this handler reads: what ``pod_info_from_dict`` decodes (its
# schema, ``PodWire``), the whole label and annotation maps, and the node selection that
# ``settings_for_pod`` and ``placement`` read.
POD_SHAPE: Final = merged(
    shape_of(PodWire),
    Fields(
        metadata=Fields(labels=STRING_MAP, annotations=STRING_MAP),
        spec=Fields(
            nodeSelector=STRING_MAP,
            affinity=Fields(
                nodeAffinity=Fields(
                    requiredDuringSchedulingIgnoredDuringExecution=Fields(
                        nodeSelectorTerms=ListOf(_NODE_SELECTOR_TERM)
                    )
                )
            ),
            tolerations=ListOf(Fields(key=STRING, operator=STRING, value=STRING, effect=STRING)),
        ),
    ),
)


async def review_pod(request: AdmissionRequest, cluster: AdmissionCache) -> Decision:
    pod = request.object
    if request.operation != "CREATE" or pod is None:
        return allow()
    spec = pod.get("spec") or {}
    try:
        top = await cluster.settings()
        settings, _ = settings_for_pod(top, spec)
        if not settings.webhook_enabled or settings.dry_run:
            return allow()
        namespace_labels = await cluster.namespace_labels(request.namespace)
        caps = await cluster.limit_range_caps(request.namespace)
        vpas = tuple(await cluster.vpas(request.namespace))
    except Unavailable as err:
        return unchecked(f"Headroom did not seed a CPU limit: {err}")
    metadata = pod.get("metadata") or {}
    # The object may omit its namespace; the request names it.
    try:
        whole = pod_info_from_dict(
            {**pod, "metadata": {**metadata, "namespace": request.namespace}}
        )
    except QuantityError as err:
        # The API server refuses such a pod after admission; nothing to seed.
        return allow(warnings=[f"Headroom did not seed a CPU limit: {err}"])
    # Excluded containers keep whatever limit they have, or none.
    info = excluding(whole, settings.excluded_containers)
    try:
        # Which VPA targets the pod follows its chain of controllers: read only where
        # there are VPAs.
        controllers = await cluster.controllers(request.namespace, info.owners) if vpas else {}
    except Unavailable as err:
        return unchecked(f"Headroom did not seed a CPU limit: {err}")
    lookups = NamespaceFacts(
        namespace=request.namespace,
        labels=namespace_labels,
        caps=caps,
        namespace_vpas=vpas,
        controllers=controllers,
    )
    warnings = [info.max_cpu_warning] if info.max_cpu_warning else []
    # A pod being created is unbound and has no resize history: the node and back-off
    # gates are the reconciler's.
    if pod_gate(settings, info, node=None, lookups=lookups):
        return allow(warnings=warnings)
    try:
        unreached = cluster.birth_reach(
            top, placement(spec), pod_level=info.facts.pod_resources is not None
        )
    except Unavailable as err:
        return unchecked(f"Headroom did not seed a CPU limit: {err}")
    if unreached is not None:
        return Decision(
            allowed=True, result=Result.ALLOWED, warnings=tuple(warnings), unseeded=unreached
        )
    if info.facts.pod_resources is not None:
        try:
            served = server_resizes_pod_level_by_default(await cluster.server_version())
        except Unavailable as err:
            return unchecked(f"Headroom did not seed a CPU limit: {err}")
        limit_m = seed_pod_limit(info, settings, limit_range=lookups.caps) if served else None
        patch = None if limit_m is None else pod_limit_patch(pod, limit_m)
    else:
        limits = seed_limits(
            info,
            settings,
            limit_range=lookups.caps,
            vpa_targets=vpa_recommended(info, lookups, Recommended.TARGET),
        )
        patch = limits_patch(pod, limits)
    if patch is None:
        return allow(warnings=warnings)
    return Decision(allowed=True, result=Result.PATCHED, warnings=tuple(warnings), patch=patch)
