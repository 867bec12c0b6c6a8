"""A pod's chain of controllers, as VerticalPodAutoscaler resolves it.

VPA targets a pod through its top-most controller: a Deployment through the ReplicaSet it
owns, a CronJob through its Job, a custom resource with a ``/scale`` subresource (an Argo
Rollout) through the ReplicaSets it owns. Headroom reads the controller of every
ReplicaSet and Job (their metadata alone) and walks up from the pod's own controller; a
VPA whose target is anywhere on that chain counts as targeting the pod. That is a superset
of VPA's rule (VPA matches the top-most link only), on the safe side: a VPA that sets
limits then leaves the pod to VPA.
"""

import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

from app.core import apipaths
from app.core.pods import OwnerRef, owner_ref

# The controllers whose own controller is looked up, by (group, kind).
LOOKED_UP: Final[Mapping[tuple[str, str], apipaths.Resource]] = {
    ("apps", "ReplicaSet"): apipaths.REPLICA_SETS,
    ("batch", "Job"): apipaths.JOBS,
}
# Ownership is a tree in practice; a bound keeps a malformed cycle from looping.
_MAX_DEPTH: Final = 8
# Distinct controllers shared between their ReplicaSets and Jobs; far more than workloads.
_SHARED: Final = 8192

# The controller of a looked-up owner: None when it has none or is unknown.
Parent = Callable[[OwnerRef], OwnerRef | None]


def controller_of(obj: Mapping[str, Any]) -> OwnerRef | None:
    """The ownerReference marked controller in an object's metadata, if any."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return owner_ref(ref.get("apiVersion"), ref.get("kind"), ref.get("name"), True)
    return None


def link(obj: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    """An object's controller as a one-tuple shared by every object it controls; () when
    it has none."""
    controller = controller_of(obj)
    return () if controller is None else _shared(controller)


@functools.lru_cache(maxsize=_SHARED)
def _shared(controller: OwnerRef) -> tuple[OwnerRef, ...]:
    return (controller,)


def owner_chain(owners: tuple[OwnerRef, ...], parent: Parent) -> tuple[OwnerRef, ...]:
    """The pod's owners, then its controller's controller and so on up the chain."""
    chain = list(owners)
    current = next((owner for owner in owners if owner.controller), None)
    while (
        current is not None
        and (current.api_group, current.kind) in LOOKED_UP
        and len(chain) < _MAX_DEPTH
    ):
        current = parent(current)
        if current is None or current in chain:
            break
        chain.append(current)
    return tuple(chain)
