"""Which pods Headroom manages (design section 3), as pure checks over stripped records."""

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any, Final

from app.core.config import Settings
from app.core.labels import MODE_LABEL, MODE_MANAGED
from app.core.nodes import MINIMUM_RESIZE_TEXT, NodeView, resize_capable, windows
from app.core.pods import BURSTABLE, OwnerRef, PodInfo
from app.core.quantity import QuantityError, parse_cpu_millis

_VPA_REQUESTS_ONLY: Final = "RequestsOnly"
_VPA_OFF: Final = "Off"
_VPA_DEFAULT_POLICY: Final = "*"
_VPA_RESOURCES: Final = ("cpu", "memory")


class Ineligible(StrEnum):
    """Why a pod is not managed, in the order the gates are checked."""

    TERMINAL = "terminal"
    # The API server refuses to resize static pods.
    MIRROR_POD = "mirror-pod"
    NAMESPACE_NOT_ENROLLED = "namespace-not-enrolled"
    OPTED_OUT = "opted-out"
    NOT_BURSTABLE = "not-burstable"
    NO_CPU_REQUEST = "no-cpu-request"
    RESTART_ON_RESIZE = "restart-on-resize"
    # The node cannot resize in place: Windows, or a kubelet older than 1.35 (or one
    # that has not said which version it is).
    WINDOWS_NODE = "windows-node"
    KUBELET_TOO_OLD = "kubelet-too-old"
    KUBELET_VERSION_UNKNOWN = "kubelet-version-unknown"
    # Matched by spec.excludedNodeSelector.
    NODE_EXCLUDED = "node-excluded"
    # The pod declares pod-level resources and its node cannot resize those in place.
    POD_LEVEL_RESIZE_UNSUPPORTED = "pod-level-resize-unsupported"
    OWNER_EXCLUDED = "owner-excluded"
    BACKED_OFF = "backed-off"
    VPA_CONTROLS_LIMITS = "vpa-controls-limits"


def namespace_enrolled(settings: Settings, *, name: str, labels: Mapping[str, str]) -> bool:
    """Selected by the namespace selector and not excluded by name."""
    return name not in settings.excluded_namespaces and settings.namespace_selector.matches(labels)


def node_ineligibility(settings: Settings, node: NodeView) -> Ineligible | None:
    """Why no pod on ``node`` is managed, or None: the node gates, in order.

    The operator's own exclusion comes first: it is the reason they expect to read.
    """
    selector = settings.excluded_node_selector
    if selector is not None and selector.matches(node.labels):
        return Ineligible.NODE_EXCLUDED
    if windows(node):
        return Ineligible.WINDOWS_NODE
    capable = resize_capable(node.kubelet_version)
    if capable is None:
        return Ineligible.KUBELET_VERSION_UNKNOWN
    if not capable:
        return Ineligible.KUBELET_TOO_OLD
    return None


def node_reason(reason: Ineligible, node: NodeView) -> str:
    """The node gate's reason in words, for people (explain, preflight)."""
    if reason is Ineligible.WINDOWS_NODE:
        return "Windows node: in-place resize is unsupported there"
    if reason is Ineligible.KUBELET_TOO_OLD:
        return (
            f"kubelet {node.kubelet_version} cannot resize pods in place "
            f"(needs {MINIMUM_RESIZE_TEXT} or newer)"
        )
    if reason is Ineligible.KUBELET_VERSION_UNKNOWN:
        reported = node.kubelet_version or "nothing"
        return (
            f"kubelet version unknown (status.nodeInfo.kubeletVersion is {reported!r}); "
            f"in-place resize needs {MINIMUM_RESIZE_TEXT} or newer"
        )
    return "matched by spec.excludedNodeSelector"


def owner_excluded(settings: Settings, pod: PodInfo) -> bool:
    return any(
        owner.kind == exclusion.kind
        and exclusion.api_group in (None, owner.api_group)
        and exclusion.name in (None, owner.name)
        for exclusion in settings.excluded_owners
        for owner in pod.owners
    )


def pod_ineligibility(
    settings: Settings,
    pod: PodInfo,
    *,
    namespace_labels: Mapping[str, str] | None,
    node: NodeView | None,
    backed_off: bool,
    vpa_controls_limits: bool,
    node_resizes_pod_level: bool | None = None,
) -> Ineligible | None:
    """The first gate the pod fails, or None when Headroom manages it.

    ``namespace_labels`` None means the namespace is unknown (not enrolled);
    ``node`` None means the pod is not bound yet, so the node gates are skipped.
    ``node_resizes_pod_level`` says whether the pod's node can resize pod-level resources
    in place (``app.core.nodefeatures``); None (not bound yet) skips that gate.
    The mode label is a keyword and fails closed: any value but ``managed`` opts out.
    """
    if pod.terminal:
        return Ineligible.TERMINAL
    if pod.mirror:
        return Ineligible.MIRROR_POD
    if namespace_labels is None or not namespace_enrolled(
        settings, name=pod.namespace, labels=namespace_labels
    ):
        return Ineligible.NAMESPACE_NOT_ENROLLED
    if pod.labels.get(MODE_LABEL, MODE_MANAGED) != MODE_MANAGED:
        return Ineligible.OPTED_OUT
    if pod.facts.qos_class != BURSTABLE:
        return Ineligible.NOT_BURSTABLE
    if pod.facts.request_m <= 0:
        return Ineligible.NO_CPU_REQUEST
    if any(container.restart_on_cpu_resize for container in pod.facts.containers):
        return Ineligible.RESTART_ON_RESIZE
    if node is not None and (reason := node_ineligibility(settings, node)) is not None:
        return reason
    if pod.facts.pod_resources is not None and node_resizes_pod_level is False:
        return Ineligible.POD_LEVEL_RESIZE_UNSUPPORTED
    if owner_excluded(settings, pod):
        return Ineligible.OWNER_EXCLUDED
    if backed_off:
        return Ineligible.BACKED_OFF
    if vpa_controls_limits:
        return Ineligible.VPA_CONTROLS_LIMITS
    return None


def vpa_controls_limits(
    vpa: Mapping[str, Any], *, container_names: Iterable[str] | None = None
) -> bool:
    """Whether a VerticalPodAutoscaler would set limits on the pod's containers.

    A container policy controls limits unless its ``controlledValues`` is
    ``RequestsOnly`` or its ``mode`` is ``Off``; containers without a policy (and no
    ``*`` policy) get the default, ``RequestsAndLimits``. ``updateMode: Off`` never
    actuates. Without ``container_names`` every policy counts, which errs towards
    leaving the pod alone.
    """
    spec = vpa.get("spec") or {}
    if (spec.get("updatePolicy") or {}).get("updateMode") == _VPA_OFF:
        return False
    policies = (spec.get("resourcePolicy") or {}).get("containerPolicies") or []
    by_container = {policy.get("containerName"): policy for policy in policies}
    fallback = by_container.get(_VPA_DEFAULT_POLICY, {})
    if container_names is None:
        applicable = [*policies, fallback]
    else:
        applicable = [by_container.get(name, fallback) for name in container_names]
    return any(
        policy.get("mode") != _VPA_OFF and policy.get("controlledValues") != _VPA_REQUESTS_ONLY
        for policy in applicable
    )


class Recommended(StrEnum):
    """Which of a VerticalPodAutoscaler's recommended amounts (a field of each
    ``status.recommendation.containerRecommendations[]``)."""

    # What VPA sets the request to: what a pod's birth limit is computed from.
    TARGET = "target"
    # The most VPA says the container may need: what its ceiling is never below.
    UPPER_BOUND = "upperBound"


# The upper bound of a container VPA actuates but has not recommended for yet: VPA's own
# upper bound without history is unbounded. Above any node, so the node's caps set it.
UNBOUNDED_M: Final = 1 << 62


def vpa_cpu_recommendation(
    vpa: Mapping[str, Any], container_names: Iterable[str], recommended: Recommended
) -> dict[str, int]:
    """The CPU amounts (millicores) a ``RequestsOnly`` VerticalPodAutoscaler recommends for
    the named containers it actuates, from its status.

    VPA caps the requests it sets for such a container at the container's current limit
    (its updater and admission controller alike), and sizes them from the CPU the
    container used, which the limit caps too. A VPA that sets limits, never actuates
    (``updateMode: Off``) or leaves a container alone (policy ``mode: Off``) gives none; an
    amount that cannot be read is skipped. For the upper bound, a container the VPA
    actuates without a recommendation yet gets ``UNBOUNDED_M``.
    """
    names = list(container_names)
    if vpa_controls_limits(vpa, container_names=names):
        return {}
    spec = vpa.get("spec") or {}
    if (spec.get("updatePolicy") or {}).get("updateMode") == _VPA_OFF:
        return {}
    policies = (spec.get("resourcePolicy") or {}).get("containerPolicies") or []
    by_container = {policy.get("containerName"): policy for policy in policies}
    fallback = by_container.get(_VPA_DEFAULT_POLICY, {})
    actuated = [name for name in names if _sets_cpu(by_container.get(name, fallback))]
    recommendation = ((vpa.get("status") or {}).get("recommendation") or {}).get(
        "containerRecommendations"
    ) or []
    by_name = {entry.get("containerName"): entry for entry in recommendation}
    amounts: dict[str, int] = {}
    for name in actuated:
        if name not in by_name:
            if recommended is Recommended.UPPER_BOUND:
                amounts[name] = UNBOUNDED_M
            continue
        cpu = (by_name[name].get(recommended) or {}).get("cpu")
        if not isinstance(cpu, str):
            continue
        try:
            amounts[name] = parse_cpu_millis(cpu)
        except QuantityError:
            continue
    return amounts


def _sets_cpu(policy: Mapping[str, Any]) -> bool:
    """Whether a container policy lets VPA set the container's CPU request."""
    resources = policy.get("controlledResources") or _VPA_RESOURCES
    return policy.get("mode") != _VPA_OFF and "cpu" in resources


def vpa_targets_pod(vpa: Mapping[str, Any], pod: PodInfo, chain: Iterable[OwnerRef]) -> bool:
    """Whether the VPA's targetRef is on the pod's chain of controllers
    (`app.core.owners`). As VPA does, the target's kind and name decide, not its
    apiVersion."""
    namespace = (vpa.get("metadata") or {}).get("namespace")
    if namespace is not None and namespace != pod.namespace:
        return False
    target = (vpa.get("spec") or {}).get("targetRef") or {}
    kind = target.get("kind")
    name = target.get("name")
    return any(owner.kind == kind and owner.name == name for owner in chain)
