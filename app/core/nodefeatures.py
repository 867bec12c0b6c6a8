"""Features a node's kubelet declares in ``status.declaredFeatures`` that Headroom reads.

Whether a pod's pod-level resources can be resized in place is decided there, not from
versions: the API server's NodeDeclaredFeatureValidator admission plugin refuses a
pod-level resize unless the pod's node declares ``InPlacePodLevelResourcesVerticalScaling``,
and a kubelet declares it only with that feature on (beta and on by default from 1.36).
On a 1.35 server the field is not even served (NodeDeclaredFeatures is alpha there), and
the API server refuses any resize of a pod with pod-level resources.
"""

from collections.abc import Mapping
from typing import Any, Final

from app.core.nodes import major_minor

POD_LEVEL_RESIZE: Final = "InPlacePodLevelResourcesVerticalScaling"
# The release where that feature turned beta, on by default, in the API server.
POD_LEVEL_RESIZE_ON_BY_DEFAULT: Final = (1, 36)


def declared_features(node: Mapping[str, Any]) -> frozenset[str]:
    """The features a Node object's kubelet declares; empty when it declares none."""
    declared = (node.get("status") or {}).get("declaredFeatures") or ()
    return frozenset(str(feature) for feature in declared)


def resizes_pod_level(node: Mapping[str, Any]) -> bool:
    """Whether pods on this node may have their pod-level resources resized in place."""
    return POD_LEVEL_RESIZE in declared_features(node)


def server_resizes_pod_level_by_default(git_version: str) -> bool:
    """Whether an API server of this version resizes pod-level resources unless an
    operator turned the feature off; False when the version cannot be read.

    Only the mutating webhook uses this, to decide whether a birth limit at pod level
    can be adjusted later: a pod being created has no node to ask yet.
    """
    version = major_minor(git_version)
    return version is not None and version >= POD_LEVEL_RESIZE_ON_BY_DEFAULT
