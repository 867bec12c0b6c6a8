"""``/mutate/pods``: seed a birth CPU limit on new pods in managed namespaces (design §6).

Only CREATE, only when ``webhook.enabled`` and not ``dryRun``, only for pods Headroom
would manage. What changes is edited on a copy and diffed into a JSONPatch, so nothing
but the seeded ``limits.cpu`` values can change; no patch when nothing was seeded.
"""

from collections.abc import Mapping
from typing import Any

from app.eligibility import pod_ineligibility
from app.pods import pod_info_from_dict
from app.policy import ContainerLimit, seed_limits
from app.quantity import format_cpu_millis
from webhook.cache import ClusterCache, Unavailable
from webhook.envelope import AdmissionRequest
from webhook.handlers.decision import Decision, allow, unchecked
from webhook.metrics import Result
from webhook.patch import json_patch


async def review_pod(request: AdmissionRequest, *, cluster: ClusterCache) -> Decision:
    pod = request.object
    if request.operation != "CREATE" or pod is None:
        return allow()
    try:
        settings = await cluster.settings()
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
    limits = seed_limits(info, settings, limit_range=limit_range)
    if not limits:
        return allow(warnings=warnings)
    patch = _limits_patch(pod, limits)
    if patch is None:
        return allow(warnings=warnings)
    return Decision(allowed=True, result=Result.PATCHED, warnings=tuple(warnings), patch=patch)


def _limits_patch(
    pod: Mapping[str, Any], limits: tuple[ContainerLimit, ...]
) -> list[dict[str, Any]] | None:
    """The JSONPatch setting the seeded limits, diffed from an edited copy.

    Only the limits of the containers being seeded are compared, keyed by index
    (``{"containers": {"0": {...}}}`` has the same JSON pointers as the pod's lists):
    nothing else may change, and jsonpatch's diff of a whole pod costs milliseconds.
    """
    by_key = {(limit.sidecar, limit.name): limit.limit_m for limit in limits}
    spec = pod.get("spec") or {}
    original: dict[str, dict[str, Any]] = {}
    edited: dict[str, dict[str, Any]] = {}
    for field, sidecar in (("containers", False), ("initContainers", True)):
        for index, container in enumerate(spec.get(field) or ()):
            limit_m = by_key.get((sidecar, container.get("name")))
            if limit_m is None:
                continue
            before = _limits_view(container)
            resources = dict(before.get("resources") or {})
            resources["limits"] = {
                **(resources.get("limits") or {}),
                "cpu": format_cpu_millis(limit_m),
            }
            original.setdefault(field, {})[str(index)] = before
            edited.setdefault(field, {})[str(index)] = {"resources": resources}
    return json_patch(original, edited, at="/spec")


def _limits_view(container: Mapping[str, Any]) -> dict[str, Any]:
    """The container reduced to the path to its limits, as far as that path exists."""
    if "resources" not in container:
        return {}
    resources = container["resources"]
    if not isinstance(resources, Mapping):
        return {"resources": resources}
    return {"resources": {"limits": resources["limits"]} if "limits" in resources else {}}
