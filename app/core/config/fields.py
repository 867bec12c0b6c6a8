"""The HeadroomConfig fields, in one table: where each sits, what it holds, what it fills.

The table drives the spec and the node pools' overrides alike, so a field's parsing,
bounds, messages and default exist once; the unit tests hold it against the CRD schema
and docs/configuration.md. Defaults are the ``Settings`` dataclass's own.
"""

import re
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.core.config.errors import Findings
from app.core.config.kinds import (
    Boolean,
    Duration,
    Enum,
    Integer,
    Kind,
    Millicores,
    Multiplier,
    ObjectName,
    Selector,
    StringList,
)
from app.core.config.settings import (
    DEFAULT_SETTINGS,
    PROPORTIONAL,
    NodePool,
    OwnerExclusion,
    PoolOverrides,
    WeightRule,
)

_MAX_MULTIPLIER: Final = 100
# Bounds the CRD's CEL cost for the unique-name rule; far more than any cluster needs.
MAX_NODE_POOLS: Final = 64
_POOL_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_POOL_NAME: Final = 63
MAX_WEIGHT_RULES: Final = 64
MAX_WEIGHT: Final = 100


@dataclass(frozen=True, slots=True)
class Field:
    """One row of the table; its default is the ``Settings`` attribute's."""

    path: str  # below spec, dotted: "deadband.growPercent"
    kind: Kind
    attribute: str  # the Settings attribute it fills
    override: str | None = None  # the PoolOverrides attribute, when a pool may set it
    pool_key: str | None = None  # where a pool sets it, when not at ``path``

    @property
    def default(self) -> Any:
        return getattr(DEFAULT_SETTINGS, self.attribute)

    @property
    def in_pool(self) -> str:
        return self.pool_key or self.path


class Layout:
    """Fields as they sit in an object and its sections; every other key is an error."""

    def __init__(
        self, fields: Iterable[tuple[str, str, Kind]], *, keys: Iterable[str] = ()
    ) -> None:
        self.fields = tuple(fields)  # (dotted key, attribute, kind)
        self.tree: dict[str, Any] = dict.fromkeys(keys)
        for dotted, _, _ in self.fields:
            *sections, key = dotted.split(".")
            node = self.tree
            for section in sections:
                node = node.setdefault(section, {})
            node[key] = None

    def present(self, value: object, path: str, findings: Findings) -> dict[str, Any]:
        """The values set (not null) in ``value``, by dotted key."""
        return _present(value, self.tree, path, findings)

    def read(self, present: Mapping[str, Any], path: str, findings: Findings) -> dict[str, Any]:
        """Attribute to typed value, for every field set and valid."""
        values = {}
        for dotted, attribute, kind in self.fields:
            if dotted in present:
                value = kind.parse(present[dotted], f"{path}.{dotted}", findings)
                if value is not None:
                    values[attribute] = value
        return values


def as_object(value: object, path: str, findings: Findings) -> Mapping[str, Any]:
    """An object, or {} when it is unset (so its defaults apply) or not an object (an error)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        findings.error(path, "must be an object")
        return {}
    return value


def _present(
    value: object, tree: Mapping[str, Any], path: str, findings: Findings
) -> dict[str, Any]:
    obj = as_object(value, path, findings)
    for unknown in sorted(set(obj) - set(tree), key=str):
        findings.error(f"{path}.{unknown}", "unknown field")
    found: dict[str, Any] = {}
    for key, section in tree.items():
        if section is not None:
            inner = _present(obj.get(key), section, f"{path}.{key}", findings)
            found.update((f"{key}.{dotted}", value) for dotted, value in inner.items())
        elif obj.get(key) is not None:
            found[key] = obj[key]
    return found


class ObjectList(Kind):
    """A list of objects laid out as ``layout``; an item with an error is dropped."""

    shape: str  # in "must be a list of {shape} objects"
    members: str  # in "must be an object with {members}"

    @property
    @abstractmethod
    def layout(self) -> Layout: ...

    @abstractmethod
    def item(self, present: Mapping[str, Any], path: str, findings: Findings) -> Any:
        """The item read from its set values; it is kept only if this records no error."""

    def entries(
        self, value: object, path: str, findings: Findings
    ) -> Iterator[tuple[int, Mapping[str, Any], Any]]:
        """(index, object, item or None) for each object in the list, in order."""
        if not isinstance(value, list):
            findings.error(path, f"must be a list of {self.shape} objects")
            return
        for index, obj in enumerate(value):
            item_path = f"{path}[{index}]"
            if not isinstance(obj, Mapping):
                findings.error(item_path, f"must be an object with {self.members}")
                continue
            before = len(findings.errors)
            item = self.item(self.layout.present(obj, item_path, findings), item_path, findings)
            yield index, obj, item if len(findings.errors) == before else None


class Owners(ObjectList):
    layout = Layout((), keys=("kind", "apiGroup", "name"))
    shape = "{kind, apiGroup, name}"
    members = "kind and optional apiGroup and name"

    def parse(self, value: Any, path: str, findings: Findings) -> tuple[OwnerExclusion, ...]:
        entries = self.entries(value, path, findings)
        owners = [(index, owner) for index, _, owner in entries if owner is not None]
        for index, owner in owners:
            if owner.api_group == "":
                findings.warn(
                    f"{path}[{index}].apiGroup",
                    f'"" matches only {owner.kind} owners in the core group (apiVersion "v1"); '
                    f"omit apiGroup to match {owner.kind} owners in any group",
                )
        return tuple(owner for _, owner in owners)

    def item(self, present: Mapping[str, Any], path: str, findings: Findings) -> OwnerExclusion:
        kind, api_group, name = (present.get(key) for key in ("kind", "apiGroup", "name"))
        if not isinstance(kind, str) or not kind:
            findings.error(f"{path}.kind", "is required")
        if api_group is not None and not isinstance(api_group, str):
            findings.error(f"{path}.apiGroup", 'must be a string ("" for the core group)')
        if name is not None and (not isinstance(name, str) or not name):
            findings.error(f"{path}.name", "must be a non-empty string")
        # Only reached without errors when kind is a string; never repr() a hostile value.
        return OwnerExclusion(
            kind=kind if isinstance(kind, str) else "", api_group=api_group, name=name
        )


class NodePools(ObjectList):
    """Pools with their index in the list, which the warnings about them name."""

    shape = "{name, nodeSelector, overrides}"
    members = "name, nodeSelector and overrides"

    @property
    def layout(self) -> Layout:
        return POOL  # built from the table, below

    def parse(self, value: Any, path: str, findings: Findings) -> tuple[tuple[int, NodePool], ...]:
        if isinstance(value, list) and len(value) > MAX_NODE_POOLS:
            findings.error(path, f"must have at most {MAX_NODE_POOLS} pools")
        named: dict[str, int] = {}
        pools = []
        for index, obj, pool in self.entries(value, path, findings):
            name = obj.get("name")
            if isinstance(name, str) and name in named:
                findings.error(
                    f"{path}[{index}].name",
                    f"duplicates {path}[{named[name]}].name: pool names must be unique",
                )
            elif isinstance(name, str):
                named[name] = index
            if pool is not None:
                pools.append((index, pool))
        return tuple(pools)

    def item(self, present: Mapping[str, Any], path: str, findings: Findings) -> NodePool | None:
        name = present.get("name")
        if not isinstance(name, str) or not name:
            findings.error(f"{path}.name", "is required")
        elif len(name) > _MAX_POOL_NAME or not _POOL_NAME.fullmatch(name):
            findings.error(
                f"{path}.name",
                "must be a DNS label: at most 63 lowercase alphanumerics or '-', "
                "starting and ending with an alphanumeric",
            )
        selector = None
        if "nodeSelector" in present:
            selector = Selector().parse(present["nodeSelector"], f"{path}.nodeSelector", findings)
        else:
            findings.error(f"{path}.nodeSelector", "is required ({} selects every node)")
        overrides = PoolOverrides(**POOL.read(present, path, findings))
        if selector is None or not isinstance(name, str):
            return None
        return NodePool(name=name, node_selector=selector, overrides=overrides)


class WeightRules(ObjectList):
    """Ordered rules; each one's path, which explanations name, is kept with it."""

    layout = Layout(
        (
            ("priorityClassName", "priority_class", ObjectName("PriorityClass name")),
            ("namespaceSelector", "namespace_selector", Selector()),
            ("podSelector", "pod_selector", Selector()),
            ("weight", "weight", Integer(low=0, high=MAX_WEIGHT)),
        )
    )
    shape = "{priorityClassName, namespaceSelector, podSelector, weight}"
    members = "optional priorityClassName, namespaceSelector, podSelector and weight"

    def parse(self, value: Any, path: str, findings: Findings) -> tuple[WeightRule, ...]:
        if isinstance(value, list) and len(value) > MAX_WEIGHT_RULES:
            findings.error(path, f"must have at most {MAX_WEIGHT_RULES} rules")
        return tuple(rule for _, _, rule in self.entries(value, path, findings) if rule is not None)

    def item(self, present: Mapping[str, Any], path: str, findings: Findings) -> WeightRule:
        return WeightRule(path=path, **self.layout.read(present, path, findings))


_PERCENT: Final = Integer(low=0, high=100)
_RATE: Final = Integer(low=1)
# Path below spec, kind, the Settings attribute it fills and, when a pool may override it,
# the PoolOverrides attribute. In the order errors are reported.
FIELDS: Final = (
    Field("policy", Enum((PROPORTIONAL,)), "policy"),
    Field("minBurstFloor", Millicores(positive=False), "min_burst_floor_m", "min_burst_floor_m"),
    Field("maxMultiplier", Multiplier(0, _MAX_MULTIPLIER), "max_multiplier", "max_multiplier"),
    Field("quantum", Millicores(positive=True), "quantum_m", "quantum_m"),
    Field("deadband.growPercent", _PERCENT, "grow_percent", "grow_percent"),
    Field("deadband.shrinkPercent", _PERCENT, "shrink_percent", "shrink_percent"),
    Field("dryRun", Boolean(), "dry_run", "dry_run"),
    Field("debouncePeriod", Duration(), "debounce_seconds"),
    Field("backoffPeriod", Duration(), "backoff_seconds"),
    Field("rateLimits.perNodePatchesPerSecond", _RATE, "per_node_patches_per_second"),
    Field("rateLimits.clientQPS", _RATE, "client_qps"),
    Field("rateLimits.clientBurst", _RATE, "client_burst"),
    Field("rateLimits.explanationQPS", _RATE, "explanation_qps"),
    Field("rateLimits.explanationBurst", _RATE, "explanation_burst"),
    Field("webhook.enabled", Boolean(), "webhook_enabled"),
    Field(
        "webhook.initialMultiplier",
        Multiplier(1, _MAX_MULTIPLIER),
        "webhook_initial_multiplier",
        "initial_multiplier",
        pool_key="initialMultiplier",
    ),
    Field("namespaceSelector", Selector(), "namespace_selector"),
    Field("excludedNamespaces", StringList("namespace name"), "excluded_namespaces"),
    Field("excludedOwners", Owners(), "excluded_owners"),
    Field("excludedNodeSelector", Selector(), "excluded_node_selector"),
    Field("excludedContainers", StringList("container name"), "excluded_containers"),
    Field("weights", WeightRules(), "weights", "weights"),
    Field("nodePools", NodePools(), "node_pools"),
)
SPEC: Final = Layout((f.path, f.attribute, f.kind) for f in FIELDS)
POOL: Final = Layout(
    ((f.in_pool, f.override, f.kind) for f in FIELDS if f.override is not None),
    keys=("name", "nodeSelector"),
)
# For the warnings: Settings attribute to the field's path, and for the fields a pool may
# override, to the key below a pool and the PoolOverrides attribute.
SPEC_PATHS: Final = {field.attribute: f"spec.{field.path}" for field in FIELDS}
POOL_KEYS: Final = {f.attribute: (f.in_pool, f.override) for f in FIELDS if f.override is not None}
