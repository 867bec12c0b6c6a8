"""HeadroomConfig validation and parsing: one pass that finds every error and warning.

``validate_config`` (the validating webhook) and ``parse_config`` (the reconciler and
the mutating webhook) share this walk, so the rules and defaults exist once. Defaults
apply at every level, including when a parent object such as ``deadband`` is omitted
or null. A null field means "unset".
"""

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, Final

from app.core.config.duration import DurationError, parse_duration_seconds
from app.core.config.errors import ConfigError, FieldError, ValidationResult
from app.core.config.pools import apply_overrides
from app.core.config.selector import LabelSelector, SelectorError, parse_label_selector
from app.core.config.selectorlogic import can_match_together, implies
from app.core.config.settings import (
    DEFAULT_SETTINGS,
    PROPORTIONAL,
    NodePool,
    OwnerExclusion,
    PoolOverrides,
    Settings,
)
from app.core.labels import CONFIG_NAME
from app.core.quantity import QuantityError, parse_quantity

_SPEC_FIELDS: Final = frozenset(
    {
        "policy",
        "dryRun",
        "minBurstFloor",
        "maxMultiplier",
        "quantum",
        "deadband",
        "debouncePeriod",
        "backoffPeriod",
        "rateLimits",
        "webhook",
        "namespaceSelector",
        "excludedNamespaces",
        "excludedOwners",
        "excludedNodeSelector",
        "nodePools",
    }
)
_DEADBAND_FIELDS: Final = frozenset({"growPercent", "shrinkPercent"})
_RATE_LIMIT_FIELDS: Final = frozenset({"perNodePatchesPerSecond", "clientQPS", "clientBurst"})
_WEBHOOK_FIELDS: Final = frozenset({"enabled", "initialMultiplier"})
_OWNER_FIELDS: Final = frozenset({"kind", "apiGroup", "name"})
_POOL_FIELDS: Final = frozenset(
    {
        "name",
        "nodeSelector",
        "maxMultiplier",
        "minBurstFloor",
        "quantum",
        "deadband",
        "dryRun",
        "initialMultiplier",
    }
)
_POOL_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_POOL_NAME: Final = 63
# Bounds the CRD's CEL cost for the unique-name rule; far more than any cluster needs.
MAX_NODE_POOLS: Final = 64
_POLICIES: Final = (PROPORTIONAL,)
_MAX_MULTIPLIER: Final = 100
# A quantum this coarse rounds small pods' bursts away or doubles them.
_LARGE_QUANTUM_M: Final = 1000
_PROTECTED_NAMESPACE: Final = "kube-system"


def validate_config(obj: Mapping[str, Any]) -> ValidationResult:
    """Check a whole HeadroomConfig object; every error carries its field path."""
    reader = _Reader()
    reader.settings(obj)
    return ValidationResult(tuple(reader.errors), tuple(reader.warnings))


def parse_config(obj: Mapping[str, Any] | None) -> Settings:
    """Typed settings from a HeadroomConfig object; None (no config) gives the defaults.

    Raises ``ConfigError`` with every error when the object breaks a rule.
    """
    if obj is None:
        return DEFAULT_SETTINGS
    reader = _Reader()
    settings = reader.settings(obj)
    if reader.errors:
        raise ConfigError(tuple(reader.errors))
    return settings


class _Reader:
    """Reads fields with defaults, recording errors and warnings instead of stopping."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[FieldError] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(FieldError(path, message))

    def settings(self, obj: Mapping[str, Any]) -> Settings:
        defaults = DEFAULT_SETTINGS
        metadata = self.section(obj, key="metadata", path="metadata", fields=None)
        if metadata.get("name") != CONFIG_NAME:
            self.error("metadata.name", f'must be "{CONFIG_NAME}": the config is a singleton')
        generation = metadata.get("generation")
        spec = self.section(obj, key="spec", path="spec", fields=_SPEC_FIELDS)
        deadband = self.section(spec, key="deadband", path="spec.deadband", fields=_DEADBAND_FIELDS)
        rate_limits = self.section(
            spec, key="rateLimits", path="spec.rateLimits", fields=_RATE_LIMIT_FIELDS
        )
        webhook = self.section(spec, key="webhook", path="spec.webhook", fields=_WEBHOOK_FIELDS)

        # None when unset or invalid; an invalid selector is an error, so the default
        # never silently replaces what the operator wrote.
        namespace_selector = self.selector(
            spec, key="namespaceSelector", path="spec.namespaceSelector"
        )
        policy = spec.get("policy")
        if policy is None:
            policy = defaults.policy
        if policy not in _POLICIES:
            self.error("spec.policy", f"must be one of {', '.join(_POLICIES)}")
            policy = defaults.policy
        settings = Settings(
            policy=policy,
            dry_run=self.boolean(spec, key="dryRun", path="spec.dryRun", default=defaults.dry_run),
            min_burst_floor_m=self.millis(
                spec,
                key="minBurstFloor",
                path="spec.minBurstFloor",
                default=defaults.min_burst_floor_m,
                positive=False,
            ),
            max_multiplier=self.max_multiplier(
                spec,
                key="maxMultiplier",
                path="spec.maxMultiplier",
                default=defaults.max_multiplier,
            ),
            quantum_m=self.millis(
                spec, key="quantum", path="spec.quantum", default=defaults.quantum_m, positive=True
            ),
            grow_percent=self.integer(
                deadband,
                key="growPercent",
                path="spec.deadband.growPercent",
                default=defaults.grow_percent,
                low=0,
                high=100,
            ),
            shrink_percent=self.integer(
                deadband,
                key="shrinkPercent",
                path="spec.deadband.shrinkPercent",
                default=defaults.shrink_percent,
                low=0,
                high=100,
            ),
            debounce_seconds=self.duration(
                spec,
                key="debouncePeriod",
                path="spec.debouncePeriod",
                default=defaults.debounce_seconds,
            ),
            backoff_seconds=self.duration(
                spec,
                key="backoffPeriod",
                path="spec.backoffPeriod",
                default=defaults.backoff_seconds,
            ),
            per_node_patches_per_second=self.integer(
                rate_limits,
                key="perNodePatchesPerSecond",
                path="spec.rateLimits.perNodePatchesPerSecond",
                default=defaults.per_node_patches_per_second,
                low=1,
                high=None,
            ),
            client_qps=self.integer(
                rate_limits,
                key="clientQPS",
                path="spec.rateLimits.clientQPS",
                default=defaults.client_qps,
                low=1,
                high=None,
            ),
            client_burst=self.integer(
                rate_limits,
                key="clientBurst",
                path="spec.rateLimits.clientBurst",
                default=defaults.client_burst,
                low=1,
                high=None,
            ),
            webhook_enabled=self.boolean(
                webhook,
                key="enabled",
                path="spec.webhook.enabled",
                default=defaults.webhook_enabled,
            ),
            webhook_initial_multiplier=self.initial_multiplier(
                webhook,
                key="initialMultiplier",
                path="spec.webhook.initialMultiplier",
                default=defaults.webhook_initial_multiplier,
            ),
            namespace_selector=(
                defaults.namespace_selector if namespace_selector is None else namespace_selector
            ),
            excluded_namespaces=self.namespaces(spec, default=defaults.excluded_namespaces),
            excluded_owners=self.owners(spec),
            excluded_node_selector=self.selector(
                spec, key="excludedNodeSelector", path="spec.excludedNodeSelector"
            ),
            generation=generation if _is_int(generation) else None,
        )
        self.warn_risky(settings, spec=spec)
        return replace(settings, node_pools=self.node_pools(spec, top=settings))

    def warn_risky(self, settings: Settings, *, spec: Mapping[str, Any]) -> None:
        if not settings.dry_run:
            self.warn("spec.dryRun", "false: pods in enrolled namespaces will be resized")
        if settings.max_multiplier == 0:
            self.warn(
                "spec.maxMultiplier",
                "0 disables the cap: a pod alone on a node may burst to all of it",
            )
        if 0 < settings.max_multiplier < 1:
            self.warn("spec.maxMultiplier", "below 1 pins every limit to its request")
        if settings.quantum_m >= _LARGE_QUANTUM_M:
            self.warn("spec.quantum", "a quantum of a core or more rounds small pods' bursts away")
        if settings.grow_percent == 0:
            self.warn("spec.deadband.growPercent", "0 patches on every change of target")
        if settings.shrink_percent > settings.grow_percent:
            self.warn(
                "spec.deadband.shrinkPercent",
                "wider than growPercent: stale generous limits linger longer than stale tight ones",
            )
        if settings.debounce_seconds == 0:
            self.warn("spec.debouncePeriod", "0 recomputes a node on every pod event of a rollout")
        if settings.backoff_seconds == 0:
            self.warn(
                "spec.backoffPeriod", "0 retries Infeasible and quota-denied resizes without pause"
            )
        if spec.get("namespaceSelector") == {}:
            self.warn("spec.namespaceSelector", "{} selects every namespace")
        if _PROTECTED_NAMESPACE not in settings.excluded_namespaces:
            self.warn(
                "spec.excludedNamespaces",
                f"{_PROTECTED_NAMESPACE} is not excluded: system pods could be resized",
            )
        if 0 < settings.max_multiplier < settings.webhook_initial_multiplier:
            self.warn(
                "spec.webhook.initialMultiplier",
                "above maxMultiplier: seeded limits are capped at maxMultiplier",
            )

    def section(
        self, obj: Mapping[str, Any], *, key: str, path: str, fields: frozenset[str] | None
    ) -> Mapping[str, Any]:
        """A nested object, or {} when it is omitted or null, so its defaults still apply."""
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.error(path, "must be an object")
            return {}
        if fields is not None:
            for unknown in sorted(set(value) - fields, key=str):
                self.error(f"{path}.{unknown}", "unknown field")
        return value

    def boolean(self, obj: Mapping[str, Any], *, key: str, path: str, default: bool) -> bool:
        value = obj.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(path, "must be true or false")
            return default
        return value

    def integer(
        self,
        obj: Mapping[str, Any],
        *,
        key: str,
        path: str,
        default: int,
        low: int,
        high: int | None,
    ) -> int:
        value = obj.get(key)
        if value is None:
            return default
        if not _is_int(value):
            self.error(path, "must be an integer")
            return default
        if value < low or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            self.error(path, f"must be {bounds}")
            return default
        return int(value)

    def quantity(self, obj: Mapping[str, Any], *, key: str, path: str) -> Fraction | None:
        """The exact value, or None when unset or invalid (invalid is recorded)."""
        value = obj.get(key)
        if value is None:
            return None
        if _is_int(value):
            return Fraction(value)
        if not isinstance(value, str):
            self.error(path, 'must be a quantity string such as "1", "500m" or "1.5"')
            return None
        try:
            return parse_quantity(value)
        except QuantityError as error:
            self.error(path, str(error))
            return None

    def millis(
        self, obj: Mapping[str, Any], *, key: str, path: str, default: int, positive: bool
    ) -> int:
        value = self.quantity(obj, key=key, path=path)
        if value is None:
            return default
        if value < 0 or (positive and value == 0):
            self.error(path, "must be greater than 0" if positive else "must not be negative")
            return default
        return math.ceil(value * 1000)

    def max_multiplier(
        self, obj: Mapping[str, Any], *, key: str, path: str, default: Fraction
    ) -> Fraction:
        value = self.quantity(obj, key=key, path=path)
        if value is None:
            return default
        if value < 0 or value > _MAX_MULTIPLIER:
            self.error(path, f"must be 0 (no cap) or greater than 0 and at most {_MAX_MULTIPLIER}")
            return default
        return value

    def initial_multiplier(
        self, obj: Mapping[str, Any], *, key: str, path: str, default: Fraction
    ) -> Fraction:
        value = self.quantity(obj, key=key, path=path)
        if value is None:
            return default
        if value < 1 or value > _MAX_MULTIPLIER:
            self.error(path, f"must be between 1 and {_MAX_MULTIPLIER}")
            return default
        return value

    def duration(self, obj: Mapping[str, Any], *, key: str, path: str, default: float) -> float:
        value = obj.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            self.error(path, 'must be a duration string such as "2s", "1m30s" or "500ms"')
            return default
        try:
            seconds = parse_duration_seconds(value)
        except DurationError as error:
            self.error(path, str(error))
            return default
        if seconds < 0:
            self.error(path, "must not be negative")
            return default
        return seconds

    def selector(self, obj: Mapping[str, Any], *, key: str, path: str) -> LabelSelector | None:
        """The parsed selector, or None when it is unset or invalid (invalid is recorded)."""
        value = obj.get(key)
        if value is None:
            return None
        try:
            return parse_label_selector(value, path=path)
        except SelectorError as error:
            self.errors.extend(error.errors)
            return None

    def namespaces(self, spec: Mapping[str, Any], *, default: frozenset[str]) -> frozenset[str]:
        path = "spec.excludedNamespaces"
        value = spec.get("excludedNamespaces")
        if value is None:
            return default
        if not isinstance(value, list):
            self.error(path, "must be a list of namespace names")
            return default
        names = set()
        for index, name in enumerate(value):
            if isinstance(name, str) and name:
                names.add(name)
            else:
                self.error(f"{path}[{index}]", "must be a non-empty namespace name")
        return frozenset(names)

    def node_pools(self, spec: Mapping[str, Any], *, top: Settings) -> tuple[NodePool, ...]:
        path = "spec.nodePools"
        value = spec.get("nodePools")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.error(path, "must be a list of {name, nodeSelector, overrides} objects")
            return ()
        if len(value) > MAX_NODE_POOLS:
            self.error(path, f"must have at most {MAX_NODE_POOLS} pools")
        named: dict[str, int] = {}
        pools: list[tuple[int, NodePool]] = []
        for index, item in enumerate(value):
            pool = self.node_pool(item, path=f"{path}[{index}]", top=top)
            name = item.get("name") if isinstance(item, Mapping) else None
            if isinstance(name, str) and name in named:
                self.error(
                    f"{path}[{index}].name",
                    f"duplicates {path}[{named[name]}].name: pool names must be unique",
                )
            elif isinstance(name, str):
                named[name] = index
            if pool is not None:
                pools.append((index, pool))
        self.warn_pool_overlaps(pools, top=top)
        return tuple(pool for _, pool in pools)

    def node_pool(self, obj: object, *, path: str, top: Settings) -> NodePool | None:
        if not isinstance(obj, Mapping):
            self.error(path, "must be an object with name, nodeSelector and overrides")
            return None
        before = len(self.errors)
        for unknown in sorted(set(obj) - _POOL_FIELDS, key=str):
            self.error(f"{path}.{unknown}", "unknown field")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            self.error(f"{path}.name", "is required")
        elif len(name) > _MAX_POOL_NAME or not _POOL_NAME.fullmatch(name):
            self.error(
                f"{path}.name",
                "must be a DNS label: at most 63 lowercase alphanumerics or '-', "
                "starting and ending with an alphanumeric",
            )
        selector = None
        if obj.get("nodeSelector") is None:
            self.error(f"{path}.nodeSelector", "is required ({} selects every node)")
        else:
            selector = self.selector(obj, key="nodeSelector", path=f"{path}.nodeSelector")
        deadband = self.section(
            obj, key="deadband", path=f"{path}.deadband", fields=_DEADBAND_FIELDS
        )
        overrides = PoolOverrides(
            max_multiplier=self.max_multiplier(
                obj, key="maxMultiplier", path=f"{path}.maxMultiplier", default=top.max_multiplier
            )
            if _given(obj, "maxMultiplier")
            else None,
            min_burst_floor_m=self.millis(
                obj,
                key="minBurstFloor",
                path=f"{path}.minBurstFloor",
                default=top.min_burst_floor_m,
                positive=False,
            )
            if _given(obj, "minBurstFloor")
            else None,
            quantum_m=self.millis(
                obj, key="quantum", path=f"{path}.quantum", default=top.quantum_m, positive=True
            )
            if _given(obj, "quantum")
            else None,
            grow_percent=self.integer(
                deadband,
                key="growPercent",
                path=f"{path}.deadband.growPercent",
                default=top.grow_percent,
                low=0,
                high=100,
            )
            if _given(deadband, "growPercent")
            else None,
            shrink_percent=self.integer(
                deadband,
                key="shrinkPercent",
                path=f"{path}.deadband.shrinkPercent",
                default=top.shrink_percent,
                low=0,
                high=100,
            )
            if _given(deadband, "shrinkPercent")
            else None,
            dry_run=self.boolean(obj, key="dryRun", path=f"{path}.dryRun", default=top.dry_run)
            if _given(obj, "dryRun")
            else None,
            initial_multiplier=self.initial_multiplier(
                obj,
                key="initialMultiplier",
                path=f"{path}.initialMultiplier",
                default=top.webhook_initial_multiplier,
            )
            if _given(obj, "initialMultiplier")
            else None,
        )
        if len(self.errors) > before or selector is None:
            return None
        pool = NodePool(name=str(name), node_selector=selector, overrides=overrides)
        self.warn_pool(pool, path=path, top=top)
        return pool

    def warn_pool(self, pool: NodePool, *, path: str, top: Settings) -> None:
        """The top-level warnings, for the values the pool changes."""
        overrides = pool.overrides
        if overrides == PoolOverrides():
            self.warn(path, "no overrides: its nodes use the top-level values")
            return
        effective = apply_overrides(top, overrides)
        if overrides.max_multiplier == 0:
            self.warn(
                f"{path}.maxMultiplier",
                "0 disables the cap: a pod alone on a node may burst to all of it",
            )
        elif overrides.max_multiplier is not None and overrides.max_multiplier < 1:
            self.warn(f"{path}.maxMultiplier", "below 1 pins every limit to its request")
        if overrides.quantum_m is not None and overrides.quantum_m >= _LARGE_QUANTUM_M:
            self.warn(
                f"{path}.quantum", "a quantum of a core or more rounds small pods' bursts away"
            )
        if overrides.grow_percent == 0:
            self.warn(f"{path}.deadband.growPercent", "0 patches on every change of target")
        deadband_changed = (
            overrides.grow_percent is not None or overrides.shrink_percent is not None
        )
        if deadband_changed and effective.shrink_percent > effective.grow_percent:
            self.warn(
                f"{path}.deadband.shrinkPercent",
                "wider than growPercent: stale generous limits linger longer than stale tight ones",
            )
        if overrides.dry_run is False and top.dry_run:
            self.warn(
                f"{path}.dryRun",
                "false has no effect while spec.dryRun is true: the top-level dry-run covers "
                "every pool",
            )
        multipliers_changed = (
            overrides.max_multiplier is not None or overrides.initial_multiplier is not None
        )
        if (
            multipliers_changed
            and 0 < effective.max_multiplier < effective.webhook_initial_multiplier
        ):
            self.warn(
                f"{path}.initialMultiplier",
                "above maxMultiplier: seeded limits are capped at maxMultiplier",
            )

    def warn_pool_overlaps(self, pools: Sequence[tuple[int, NodePool]], *, top: Settings) -> None:
        """Pools a node could match more than one of: the first wins, which may surprise."""
        excluded = top.excluded_node_selector
        for position, (index, pool) in enumerate(pools):
            path = f"spec.nodePools[{index}].nodeSelector"
            selector = pool.node_selector
            if excluded is not None and implies(selector, excluded):
                self.warn(
                    path, "never applies: spec.excludedNodeSelector excludes every node it selects"
                )
                continue
            for earlier_index, earlier in pools[:position]:
                first = f"spec.nodePools[{earlier_index}] ({earlier.name!r}), which comes first"
                if implies(selector, earlier.node_selector):
                    self.warn(path, f"never applies: every node it selects is in {first}")
                    break
                if can_match_together(selector, earlier.node_selector):
                    self.warn(path, f"overlaps {first}: nodes matching both use {earlier.name!r}")

    def owners(self, spec: Mapping[str, Any]) -> tuple[OwnerExclusion, ...]:
        path = "spec.excludedOwners"
        value = spec.get("excludedOwners")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.error(path, "must be a list of {kind, apiGroup, name} objects")
            return ()
        owners = []
        for index, item in enumerate(value):
            owner = self.owner(item, path=f"{path}[{index}]")
            if owner is not None:
                owners.append(owner)
        return tuple(owners)

    def owner(self, obj: object, *, path: str) -> OwnerExclusion | None:
        if not isinstance(obj, Mapping):
            self.error(path, "must be an object with kind and optional apiGroup and name")
            return None
        before = len(self.errors)
        for unknown in sorted(set(obj) - _OWNER_FIELDS, key=str):
            self.error(f"{path}.{unknown}", "unknown field")
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            self.error(f"{path}.kind", "is required")
        api_group = obj.get("apiGroup")
        if api_group is not None and not isinstance(api_group, str):
            self.error(f"{path}.apiGroup", 'must be a string ("" for the core group)')
        name = obj.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            self.error(f"{path}.name", "must be a non-empty string")
        if len(self.errors) > before:
            return None
        if api_group == "":
            self.warn(
                f"{path}.apiGroup",
                f'"" matches only {kind} owners in the core group (apiVersion "v1"); '
                f"omit apiGroup to match {kind} owners in any group",
            )
        return OwnerExclusion(kind=str(kind), api_group=api_group, name=name)


def _given(obj: Mapping[str, Any], key: str) -> bool:
    return obj.get(key) is not None


def _is_int(value: object) -> bool:
    # bool is an int subclass, but `true` is not a number in a config.
    return isinstance(value, int) and not isinstance(value, bool)
