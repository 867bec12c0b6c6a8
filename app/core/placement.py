"""Which nodes a pod not yet bound may be bound to, as the scheduler's filters would allow.

The mutating webhook seeds a birth limit before the scheduler has chosen a node, so it
asks which nodes are still open to the pod: the node it names (``spec.nodeName``), else
every node that its ``nodeSelector`` and required node affinity select and whose
``NoSchedule`` and ``NoExecute`` taints it tolerates. Every approximation here errs
towards *more* nodes, never fewer: a node wrongly counted only costs a birth limit the
reconciler sets anyway once the pod is bound, while a node wrongly left out could leave a
pod with a limit Headroom will never manage. So numeric affinity operators (``Gt``,
``Lt``) count as "the label exists", and readiness, cordons, resources and pod
(anti-)affinity are not filtered on.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from app.core.config.pools import node_fields, pod_node_terms
from app.core.config.selector import LabelSelector

# Taints that keep a pod off a node unless tolerated; PreferNoSchedule only steers.
REPELLING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Taint:
    """A node's taint, as `spec.taints` lists it."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """The API's rule: matching effect (or none), key (or none, with ``Exists``), and
        value under ``Equal``. An operator this reading does not know tolerates."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        return self.operator != "Equal" or self.value == taint.value


class NodeCandidate(Protocol):
    """The parts of a node placement reads."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def taints(self) -> tuple[Taint, ...]: ...


N = TypeVar("N", bound=NodeCandidate)


@dataclass(frozen=True, slots=True)
class Placement:
    """A pod's constraints on its node, read once from its spec."""

    node_name: str
    terms: tuple[LabelSelector, ...]
    tolerations: tuple[Toleration, ...]

    def allows(self, node: NodeCandidate) -> bool:
        if self.node_name:
            # Bound at creation: the scheduler is bypassed and no other node is possible.
            return node.name == self.node_name
        if self.terms:
            fields = node_fields(node.name, node.labels)
            if not any(term.matches(fields) for term in self.terms):
                return False
        return all(
            any(toleration.tolerates(taint) for toleration in self.tolerations)
            for taint in node.taints
        )

    def candidates(self, nodes: Iterable[N]) -> list[N]:
        return [node for node in nodes if self.allows(node)]


def placement(pod_spec: Mapping[str, Any]) -> Placement:
    """The pod's node constraints (``spec`` of a Pod as the API carries it)."""
    node_name = pod_spec.get("nodeName")
    return Placement(
        node_name=node_name if isinstance(node_name, str) else "",
        terms=tuple(pod_node_terms(pod_spec)),
        tolerations=tuple(_tolerations(pod_spec.get("tolerations") or ())),
    )


def repelling_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """A Node object's taints that keep untolerating pods off it."""
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    return tuple(
        Taint(
            key=str(taint.get("key") or ""),
            value=str(taint.get("value") or ""),
            effect=str(taint.get("effect") or ""),
        )
        for taint in taints or ()
        if isinstance(taint, Mapping) and taint.get("effect") in REPELLING_EFFECTS
    )


def _tolerations(raw: Sequence[Any]) -> list[Toleration]:
    return [
        Toleration(
            key=str(item.get("key") or ""),
            operator=str(item.get("operator") or "Equal"),
            value=str(item.get("value") or ""),
            effect=str(item.get("effect") or ""),
        )
        for item in raw
        if isinstance(item, Mapping)
    ]
