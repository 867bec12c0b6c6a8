"""Node pools: which pool's overrides apply to a node, or to a pod not scheduled yet.

The first pool whose ``nodeSelector`` matches a node wins; a node no pool matches uses
the top-level values. A pod being created has no node yet: its pool is known only when
its ``nodeSelector`` and required node affinity leave no doubt, that is when every node
it could land on falls in the same pool first.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from app.core.config.fields import POOL_KEYS
from app.core.config.selector import OPERATORS, LabelSelector, Operator, Requirement
from app.core.config.selectorlogic import can_match_together, implies
from app.core.config.settings import NodePool, PoolOverrides, Settings

# Numeric comparisons are read as "the label exists": a weaker constraint, so a pool
# derived from it is still certain.
_NUMERIC_OPERATORS: Final = frozenset({"Gt", "Lt"})
_NAME_FIELD: Final = "metadata.name"
# The node's name, as a term's labels see it: ':' is in no label key, so no label collides.
NODE_NAME_KEY: Final = "field:metadata.name"


def settings_for_node(
    settings: Settings, node_labels: Mapping[str, str]
) -> tuple[Settings, str | None]:
    """The settings for a node (its pool's overrides applied) and the pool's name.

    The name is None when no pool matches; the settings are then ``settings`` itself.
    """
    for index, pool in enumerate(settings.node_pools):
        if pool.node_selector.matches(node_labels):
            return pool_settings(settings, index), pool.name
    return settings, None


@functools.lru_cache(maxsize=256)
def pool_settings(settings: Settings, index: int) -> Settings:
    """``settings`` with the overrides of ``settings.node_pools[index]`` applied."""
    return apply_overrides(settings, settings.node_pools[index].overrides)


def apply_overrides(settings: Settings, overrides: PoolOverrides) -> Settings:
    """``settings`` as a pool with ``overrides`` sees them.

    A pool's ``dryRun: true`` puts it in dry-run; the top-level ``dryRun: true`` keeps
    every pool in dry-run whatever the pool says, so it stays the one stop button.
    """
    changes = {
        attribute: value
        for attribute, (_, override) in POOL_KEYS.items()
        if (value := getattr(overrides, override)) is not None
    }
    changes["dry_run"] = settings.dry_run or bool(overrides.dry_run)
    return replace(settings, **changes)


def settings_for_pod(
    settings: Settings, pod_spec: Mapping[str, Any]
) -> tuple[Settings, str | None]:
    """The settings for a pod that is not scheduled yet, and its pool's name.

    The pool is the one every node the pod may land on falls in first; when the pod's
    node selection leaves that open (or it has none), the top-level settings apply.
    """
    if not settings.node_pools:
        return settings, None
    # No constraint at all is one term that every node satisfies.
    terms = pod_node_terms(pod_spec) or [LabelSelector(())]
    chosen = {_pool_of_term(settings.node_pools, term) for term in terms}
    index = chosen.pop() if len(chosen) == 1 else None
    if index is None or index < 0:
        return settings, None
    return pool_settings(settings, index), settings.node_pools[index].name


def _pool_of_term(pools: Sequence[NodePool], term: LabelSelector) -> int | None:
    """The index of the pool every node matching ``term`` falls in first; -1 when no pool
    can match such a node; None when it depends on the node."""
    for index, pool in enumerate(pools):
        if implies(term, pool.node_selector):
            return index
        if can_match_together(term, pool.node_selector):
            return None
    return -1


def pod_node_terms(pod_spec: Mapping[str, Any]) -> list[LabelSelector]:
    """The pod's node constraints as alternatives (ORed), each a selector over node labels.

    ``nodeSelector`` is ANDed into every required node-affinity term. Terms that match
    no node (empty, per the API) are dropped. A ``matchFields`` requirement on
    ``metadata.name`` (how a DaemonSet pins its pods) becomes one on the ``NODE_NAME_KEY``
    pseudo-label, which a node's labels never hold: match ``node_fields``. Other fields
    and unknown operators are read as no constraint. Empty when the pod does not
    constrain its node at all.
    """
    base = [
        Requirement(key, Operator.IN, frozenset({value}))
        for key, value in (pod_spec.get("nodeSelector") or {}).items()
        if isinstance(key, str) and isinstance(value, str)
    ]
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    raw_terms = required.get("nodeSelectorTerms") or []
    if not raw_terms:
        return [LabelSelector(tuple(base))] if base else []
    terms = []
    for raw in raw_terms:
        expressions = (raw or {}).get("matchExpressions") or []
        fields = (raw or {}).get("matchFields") or []
        if not expressions and not fields:
            continue
        by_name = [
            {**field, "key": NODE_NAME_KEY}
            for field in fields
            if isinstance(field, Mapping) and field.get("key") == _NAME_FIELD
        ]
        terms.append(LabelSelector((*base, *_requirements([*expressions, *by_name]))))
    return terms


def node_fields(name: str, labels: Mapping[str, str]) -> Mapping[str, str]:
    """A node's labels with its name under ``NODE_NAME_KEY``: what ``pod_node_terms``
    match."""
    return {**labels, NODE_NAME_KEY: name}


def _requirements(expressions: Sequence[Mapping[str, Any]]) -> list[Requirement]:
    requirements = []
    for expression in expressions:
        key = expression.get("key")
        raw_operator = expression.get("operator")
        if not isinstance(key, str):
            continue
        if raw_operator in _NUMERIC_OPERATORS:
            requirements.append(Requirement(key, Operator.EXISTS, frozenset()))
        elif isinstance(raw_operator, str) and raw_operator in OPERATORS:
            values = frozenset(v for v in expression.get("values") or () if isinstance(v, str))
            requirements.append(Requirement(key, OPERATORS[raw_operator], values))
    return requirements
