"""Whether a birth limit stays within Headroom's reach (design §6 and §9).

A birth limit is a promise that the reconciler will take the pod's limit over once the
pod is bound: the API server refuses to remove a limit, so a seeded limit on a node the
reconciler never manages would cap the pod for life, where without Headroom it would
have had none. So the webhook seeds only when that promise holds:

- a live reconciler holds its Lease (``app.core.lease``): a pod created while the
  reconciler is down is born as its owner wrote it, and the reconciler sets its limit
  when it returns;
- the pod can be scheduled to at least one node that exists now (``app.core.placement``),
  and every such node is one the reconciler manages and enforces on: it passes the node
  gates under its own pool's settings, and that pool is not in dry-run. A pod with
  pod-level resources also needs each such node to resize those in place.

The only window left is a node that joins, or changes into one Headroom leaves alone,
between the pod's admission and its binding; such a pod keeps its birth limit, frozen,
like every limit on a node Headroom stops managing.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from app.core.config import Settings, settings_for_node
from app.core.eligibility import node_ineligibility
from app.core.placement import Placement
from app.core.views import NodeRecord


class Unseeded(StrEnum):
    """Why a pod Headroom manages was born without a birth limit (a metric label)."""

    NO_RECONCILER = "no-reconciler"
    NO_NODE = "no-node"
    UNMANAGED_NODE = "unmanaged-node"


@dataclass(frozen=True, slots=True)
class Unreached:
    """A pod born without a birth limit, and why."""

    reason: Unseeded
    # In words, naming the node where there is one.
    detail: str


NO_LIVE_RECONCILER: Final = Unreached(Unseeded.NO_RECONCILER, "no live reconciler holds its Lease")


def birth_reach(
    settings: Settings,
    placement: Placement,
    nodes: Iterable[NodeRecord],
    *,
    reconciler_live: bool,
    pod_level: bool,
) -> Unreached | None:
    """Why a birth limit would not stay within reach, or None when it would.

    ``settings`` are the top-level ones (each node's pool is resolved here); ``pod_level``
    says the limit would be seeded at pod level.
    """
    if not reconciler_live:
        return NO_LIVE_RECONCILER
    candidates = placement.candidates(nodes)
    if not candidates:
        return Unreached(Unseeded.NO_NODE, "no node it can be scheduled to exists yet")
    for node in candidates:
        why = _unmanaged(settings, node, pod_level=pod_level)
        if why is not None:
            return Unreached(Unseeded.UNMANAGED_NODE, f"it may land on node {node.name}, {why}")
    return None


def _unmanaged(settings: Settings, node: NodeRecord, *, pod_level: bool) -> str | None:
    node_settings, pool = settings_for_node(settings, node.labels)
    gate = node_ineligibility(node_settings, node)
    if gate is not None:
        return f"which Headroom does not manage ({gate})"
    if node_settings.dry_run:
        return "where Headroom is in dry-run" + ("" if pool is None else f" (node pool {pool})")
    if pod_level and not node.pod_level_resize:
        return "which cannot resize pod-level resources in place"
    return None
