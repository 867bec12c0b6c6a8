"""HeadroomConfig validation and parsing: one pass that finds every error and warning.

``validate_config`` (the validating webhook) and ``parse_config`` (the reconciler and
the mutating webhook) share this walk over the field table (``fields.FIELDS``), so the
rules and defaults exist once. Defaults apply at every level, including when a parent
object such as ``deadband`` is omitted or null. A null field means "unset". The warnings
here are the cross-field ones: legal settings that are usually a mistake.
"""

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from app.core.config.errors import ConfigError, Findings, ValidationResult
from app.core.config.fields import POOL_KEYS, SPEC, SPEC_PATHS, as_object
from app.core.config.kinds import is_integer
from app.core.config.pools import apply_overrides
from app.core.config.selectorlogic import can_match_together, implies
from app.core.config.settings import (
    DEFAULT_SETTINGS,
    NodePool,
    PoolOverrides,
    Settings,
    WeightRule,
)
from app.core.labels import CONFIG_NAME

# A quantum this coarse rounds small pods' bursts away or doubles them.
_LARGE_QUANTUM_M: Final = 1000
_PROTECTED_NAMESPACE: Final = "kube-system"


def validate_config(obj: Mapping[str, Any]) -> ValidationResult:
    """Check a whole HeadroomConfig object; every error carries its field path."""
    findings = Findings()
    _read(obj, findings)
    return ValidationResult(tuple(findings.errors), tuple(findings.warnings))


def parse_config(obj: Mapping[str, Any] | None) -> Settings:
    """Typed settings from a HeadroomConfig object; None (no config) gives the defaults.

    Raises ``ConfigError`` with every error when the object breaks a rule.
    """
    if obj is None:
        return DEFAULT_SETTINGS
    findings = Findings()
    settings = _read(obj, findings)
    if findings.errors:
        raise ConfigError(tuple(findings.errors))
    return settings


def _read(obj: Mapping[str, Any], findings: Findings) -> Settings:
    metadata = as_object(obj.get("metadata"), "metadata", findings)
    if metadata.get("name") != CONFIG_NAME:
        findings.error("metadata.name", f'must be "{CONFIG_NAME}": the config is a singleton')
    generation = metadata.get("generation")
    spec = SPEC.present(obj.get("spec"), "spec", findings)
    # A field unset or invalid keeps its default, so the warnings still see whole settings;
    # an invalid one is an error, so the default never silently replaces what was written.
    values = SPEC.read(spec, "spec", findings)
    pools: Sequence[tuple[int, NodePool]] = values.pop("node_pools", ())
    settings = Settings(
        **values,
        node_pools=tuple(pool for _, pool in pools),
        generation=generation if is_integer(generation) else None,
    )
    _warn_top(findings, settings, spec)
    _warn_weights(findings, settings.weights, top=settings)
    for index, pool in pools:
        _warn_pool(findings, pool, path=f"{SPEC_PATHS['node_pools']}[{index}]", top=settings)
        _warn_weights(findings, pool.overrides.weights or (), top=settings)
    _warn_pool_overlaps(findings, pools, top=settings)
    return settings


def _warn_top(findings: Findings, settings: Settings, spec: Mapping[str, Any]) -> None:
    if not settings.dry_run:
        findings.warn(SPEC_PATHS["dry_run"], "false: pods in enrolled namespaces will be resized")
    _warn_limits(findings, settings, changed=SPEC_PATHS, at=SPEC_PATHS)
    if settings.debounce_seconds == 0:
        findings.warn(
            SPEC_PATHS["debounce_seconds"], "0 recomputes a node on every pod event of a rollout"
        )
    if settings.backoff_seconds == 0:
        findings.warn(
            SPEC_PATHS["backoff_seconds"],
            "0 retries Infeasible and quota-denied resizes without pause",
        )
    if spec.get("namespaceSelector") == {}:
        findings.warn(SPEC_PATHS["namespace_selector"], "{} selects every namespace")
    if _PROTECTED_NAMESPACE not in settings.excluded_namespaces:
        findings.warn(
            SPEC_PATHS["excluded_namespaces"],
            f"{_PROTECTED_NAMESPACE} is not excluded: system pods could be resized",
        )
    _warn_initial(findings, settings, changed=SPEC_PATHS, at=SPEC_PATHS)


def _warn_pool(findings: Findings, pool: NodePool, *, path: str, top: Settings) -> None:
    """The top-level warnings, for the values the pool changes."""
    overrides = pool.overrides
    if overrides == PoolOverrides():
        findings.warn(path, "no overrides: its nodes use the top-level values")
        return
    effective = apply_overrides(top, overrides)
    at = {attribute: f"{path}.{key}" for attribute, (key, _) in POOL_KEYS.items()}
    changed = {
        a for a, (_, override) in POOL_KEYS.items() if getattr(overrides, override) is not None
    }
    _warn_limits(findings, effective, changed=changed, at=at)
    if overrides.dry_run is False and top.dry_run:
        findings.warn(
            at["dry_run"],
            f"false has no effect while {SPEC_PATHS['dry_run']} is true: the top-level dry-run "
            "covers every pool",
        )
    _warn_initial(findings, effective, changed=changed, at=at)


def _warn_limits(
    findings: Findings, settings: Settings, *, changed: Collection[str], at: Mapping[str, str]
) -> None:
    """Risky caps, quantum and deadband, among the ``changed`` attributes."""
    if "max_multiplier" in changed and settings.max_multiplier == 0:
        findings.warn(
            at["max_multiplier"],
            "0 disables the cap: a pod alone on a node may burst to all of it",
        )
    elif "max_multiplier" in changed and settings.max_multiplier < 1:
        findings.warn(at["max_multiplier"], "below 1 pins every limit to its request")
    if "quantum_m" in changed and settings.quantum_m >= _LARGE_QUANTUM_M:
        findings.warn(at["quantum_m"], "a quantum of a core or more rounds small pods' bursts away")
    if "grow_percent" in changed and settings.grow_percent == 0:
        findings.warn(at["grow_percent"], "0 patches on every change of target")
    deadband_changed = "grow_percent" in changed or "shrink_percent" in changed
    if deadband_changed and settings.shrink_percent > settings.grow_percent:
        findings.warn(
            at["shrink_percent"],
            "wider than growPercent: stale generous limits linger longer than stale tight ones",
        )


def _warn_initial(
    findings: Findings, settings: Settings, *, changed: Collection[str], at: Mapping[str, str]
) -> None:
    multipliers_changed = "max_multiplier" in changed or "webhook_initial_multiplier" in changed
    if multipliers_changed and 0 < settings.max_multiplier < settings.webhook_initial_multiplier:
        findings.warn(
            at["webhook_initial_multiplier"],
            "above maxMultiplier: seeded limits are capped at maxMultiplier",
        )


def _warn_weights(findings: Findings, rules: Sequence[WeightRule], *, top: Settings) -> None:
    """Rules that can never apply, and rules any tenant can claim."""
    enrolling = SPEC_PATHS["namespace_selector"]
    for position, rule in enumerate(rules):
        namespaces, pods = rule.namespace_selector, rule.pod_selector
        if namespaces is not None and not can_match_together(namespaces, top.namespace_selector):
            findings.warn(
                f"{rule.path}.namespaceSelector",
                f"never applies: no namespace it selects is enrolled by {enrolling}",
            )
            continue
        unmatchable = next(
            (
                (key, selector)
                for key, selector in (("namespaceSelector", namespaces), ("podSelector", pods))
                if selector is not None and not can_match_together(selector, selector)
            ),
            None,
        )
        if unmatchable is not None:
            findings.warn(f"{rule.path}.{unmatchable[0]}", "never applies: it matches no labels")
            continue
        earlier = next((e for e in rules[:position] if _covers(e, rule)), None)
        if earlier is not None:
            findings.warn(
                rule.path,
                f"never applies: every pod it matches matches {earlier.path}, which comes first",
            )
            continue
        if rule.weight > 1 and pods is not None and namespaces is None:
            findings.warn(
                f"{rule.path}.podSelector",
                f"pod labels alone give weight {rule.weight}: a tenant can label its own pods "
                "to claim it; add a namespaceSelector for the namespaces it is meant for",
            )


def _covers(first: WeightRule, later: WeightRule) -> bool:
    """Whether every pod ``later`` matches is matched by ``first`` too."""
    if first.priority_class is not None and first.priority_class != later.priority_class:
        return False
    pairs = (
        (first.namespace_selector, later.namespace_selector),
        (first.pod_selector, later.pod_selector),
    )
    return all(
        wide is None or (narrow is not None and implies(narrow, wide)) for wide, narrow in pairs
    )


def _warn_pool_overlaps(
    findings: Findings, pools: Sequence[tuple[int, NodePool]], *, top: Settings
) -> None:
    """Pools a node could match more than one of: the first wins, which may surprise."""
    excluded = top.excluded_node_selector
    listed = SPEC_PATHS["node_pools"]
    for position, (index, pool) in enumerate(pools):
        path = f"{listed}[{index}].nodeSelector"
        selector = pool.node_selector
        if excluded is not None and implies(selector, excluded):
            findings.warn(
                path,
                f"never applies: {SPEC_PATHS['excluded_node_selector']} excludes every node it "
                "selects",
            )
            continue
        for earlier_index, earlier in pools[:position]:
            first = f"{listed}[{earlier_index}] ({earlier.name!r}), which comes first"
            if implies(selector, earlier.node_selector):
                findings.warn(path, f"never applies: every node it selects is in {first}")
                break
            if can_match_together(selector, earlier.node_selector):
                findings.warn(path, f"overlaps {first}: nodes matching both use {earlier.name!r}")
