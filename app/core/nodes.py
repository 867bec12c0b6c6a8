"""What Headroom reads of a Node to decide whether its pods can be resized in place.

A node can resize in place only when its kubelet is 1.35 or newer (in-place resize is GA,
and on by default, from 1.35) and it is not a Windows node (the API server refuses to
resize Windows pods). The kubelet reports both in ``status.nodeInfo``; the OS is also
read from the ``kubernetes.io/os`` label, either one saying Windows being enough.

Whether a kubelet runs a static CPU or Memory Manager policy is kubelet configuration the
Node API does not carry, so it is not read here. Under a static policy the kubelet
refuses resizes of Guaranteed pods only, which Headroom never manages (and never makes);
nodes an operator wants left alone anyway are excluded with ``excludedNodeSelector``.
"""

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from app.core.labels import OS_LABEL, OS_WINDOWS

# In-place pod resize is GA (and on by default) from this minor.
MINIMUM_RESIZE_VERSION: Final = (1, 35)
MINIMUM_RESIZE_TEXT: Final = "1.35"
_VERSION: Final = re.compile(r"^v?(\d+)\.(\d+)")


class NodeView(Protocol):
    """The fields of a node the eligibility gates read."""

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def kubelet_version(self) -> str: ...

    @property
    def operating_system(self) -> str: ...


@dataclass(frozen=True, slots=True)
class NodeFacts:
    labels: Mapping[str, str]
    # status.nodeInfo.kubeletVersion and .operatingSystem; "" when not reported.
    kubelet_version: str
    operating_system: str


def node_facts(obj: Mapping[str, Any]) -> NodeFacts:
    """The gate-relevant fields of a Node object as the API returns it."""
    metadata = obj.get("metadata") or {}
    info = (obj.get("status") or {}).get("nodeInfo") or {}
    return NodeFacts(
        labels=metadata.get("labels") or {},
        kubelet_version=str(info.get("kubeletVersion") or ""),
        operating_system=str(info.get("operatingSystem") or ""),
    )


def major_minor(text: str) -> tuple[int, int] | None:
    """(1, 37) from "v1.37.2", "v1.37.2-gke.1" or "1.37"; None when unparseable."""
    match = _VERSION.match(text.strip())
    return None if match is None else (int(match.group(1)), int(match.group(2)))


@functools.lru_cache(maxsize=64)
def resize_capable(kubelet_version: str) -> bool | None:
    """Whether a kubelet of this version resizes in place; None when the version is unknown."""
    version = major_minor(kubelet_version)
    return None if version is None else version >= MINIMUM_RESIZE_VERSION


def windows(node: NodeView) -> bool:
    return node.labels.get(OS_LABEL) == OS_WINDOWS or node.operating_system == OS_WINDOWS
