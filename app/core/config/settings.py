"""The typed, defaulted settings every part of Headroom reads from one HeadroomConfig."""

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from app.core.config.selector import LabelSelector, Operator, Requirement
from app.core.labels import MODE_LABEL, MODE_MANAGED

PROPORTIONAL: Final = "Proportional"
# Unset namespaceSelector: namespaces labelled exactly kube-headroom.dev/mode=managed.
DEFAULT_NAMESPACE_SELECTOR: Final = LabelSelector(
    (Requirement(MODE_LABEL, Operator.IN, frozenset({MODE_MANAGED})),)
)


@dataclass(frozen=True, slots=True)
class OwnerExclusion:
    """Pods with an ownerReference matching this are never managed.

    ``api_group`` is the group part of the owner's ``apiVersion`` ("" for the core
    group); None for ``api_group`` or ``name`` matches any.
    """

    kind: str
    api_group: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class WeightRule:
    """Pods matching every matcher set here share the slack with this weight.

    A matcher left None matches any pod; a rule with none matches every pod. ``path`` is
    the rule's place in the config (``spec.weights[0]``), which explanations name.
    """

    path: str
    weight: int = 1
    priority_class: str | None = None
    namespace_selector: LabelSelector | None = None
    pod_selector: LabelSelector | None = None

    def matches(
        self, *, priority_class: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        return (
            (self.priority_class is None or self.priority_class == priority_class)
            and (
                self.namespace_selector is None or self.namespace_selector.matches(namespace_labels)
            )
            and (self.pod_selector is None or self.pod_selector.matches(labels))
        )


@dataclass(frozen=True, slots=True)
class PoolOverrides:
    """What a node pool changes; None keeps the top-level value."""

    max_multiplier: Fraction | None = None
    min_burst_floor_m: int | None = None
    quantum_m: int | None = None
    grow_percent: int | None = None
    shrink_percent: int | None = None
    # True puts the pool in dry-run; it can never take the top-level dry-run away.
    dry_run: bool | None = None
    initial_multiplier: Fraction | None = None
    # Replaces the top-level list on the pool's nodes.
    weights: tuple[WeightRule, ...] | None = None


@dataclass(frozen=True, slots=True)
class NodePool:
    """The nodes a selector picks, and what the pool changes for them."""

    name: str
    node_selector: LabelSelector
    overrides: PoolOverrides


@dataclass(frozen=True, slots=True)
class Settings:
    policy: str = PROPORTIONAL
    dry_run: bool = True
    min_burst_floor_m: int = 1000
    # 0 disables the cap.
    max_multiplier: Fraction = Fraction(10)
    quantum_m: int = 10
    grow_percent: int = 10
    shrink_percent: int = 5
    debounce_seconds: float = 2.0
    backoff_seconds: float = 300.0
    per_node_patches_per_second: int = 10
    # The write budget of resizes and the config's status.
    client_qps: int = 50
    client_burst: int = 100
    # The write budget of the annotations and events that explain limits, apart, so
    # explanations never hold resizes back.
    explanation_qps: int = 50
    explanation_burst: int = 100
    webhook_enabled: bool = True
    webhook_initial_multiplier: Fraction = Fraction(2)
    namespace_selector: LabelSelector = DEFAULT_NAMESPACE_SELECTOR
    excluded_namespaces: frozenset[str] = frozenset({"kube-system"})
    excluded_owners: tuple[OwnerExclusion, ...] = ()
    excluded_node_selector: LabelSelector | None = None
    # Containers, by name, whose CPU limit is left to whoever set it (a mesh's injector).
    excluded_containers: frozenset[str] = frozenset()
    # Ordered: a pod takes the weight of the first rule that matches it, else 1.
    weights: tuple[WeightRule, ...] = ()
    # Ordered: a node takes the overrides of the first pool whose selector matches it.
    node_pools: tuple[NodePool, ...] = ()
    # metadata.generation of the config these settings came from; None for defaults.
    generation: int | None = None


DEFAULT_SETTINGS: Final = Settings()
