"""Which of a node's pods Headroom manages right now, from the watched objects.

Shared by the reconciler and ``kubectl headroom explain`` so both pick the same pods.
Back-off lives in the reconciler's memory and is passed in.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from app.core.config import Settings
from app.core.eligibility import Ineligible, pod_ineligibility, vpa_controls_limits, vpa_targets_pod
from app.core.nodes import NodeView
from app.core.pods import PodInfo


def ineligibility(
    settings: Settings,
    pod: PodInfo,
    *,
    namespace_labels: Mapping[str, str] | None,
    node: NodeView | None,
    vpas: Iterable[Mapping[str, Any]],
    backed_off: bool = False,
    node_resizes_pod_level: bool | None = None,
) -> Ineligible | None:
    """``pod_ineligibility`` with the VPA gate worked out from the namespace's VPAs."""
    controlled = any(
        vpa_targets_pod(vpa, pod)
        and vpa_controls_limits(vpa, container_names=[c.name for c in pod.containers])
        for vpa in vpas
    )
    return pod_ineligibility(
        settings,
        pod,
        namespace_labels=namespace_labels,
        node=node,
        backed_off=backed_off,
        vpa_controls_limits=controlled,
        node_resizes_pod_level=node_resizes_pod_level,
    )
