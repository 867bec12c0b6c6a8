"""What Headroom keeps of the objects it reads besides pods, each reduced once, here.

The reconciler's cache, the webhook's cache, ``kubectl headroom`` and its snapshots all
turn a listed or watched object into the same view: a node's allocatable CPU and gate
facts, a namespace's labels, a VerticalPodAutoscaler's targeting and policies, whether a
ResourceQuota holds ``limits.cpu``, and the HeadroomConfig as settings or its errors.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.core.config import DEFAULT_SETTINGS, ConfigError, Settings, parse_config
from app.core.nodefeatures import resizes_pod_level
from app.core.nodes import node_facts
from app.core.placement import Taint, repelling_taints
from app.core.quantity import QuantityError, parse_cpu_millis

LIMITS_CPU: Final = "limits.cpu"
# The VPA fields the eligibility gate and the VPA floor read (app.core.eligibility).
_VPA_FIELDS: Final = ("targetRef", "updatePolicy", "resourcePolicy")


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    meta = metadata(obj)
    namespace = meta.get("namespace")
    name = meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    value = metadata(obj).get("labels")
    return dict(value) if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    allocatable_m: int
    labels: Mapping[str, str]
    # status.nodeInfo: the node gates read them (app.core.nodes).
    kubelet_version: str
    operating_system: str
    # The kubelet declares in-place resize of pod-level resources (app.core.nodefeatures).
    pod_level_resize: bool = False
    # The taints that keep pods off the node unless tolerated (app.core.placement).
    taints: tuple[Taint, ...] = ()


def allocatable_m(node: Mapping[str, Any]) -> int:
    """The node's allocatable CPU in millicores; 0 when unreported or unreadable."""
    status = node.get("status")
    allocatable = (status.get("allocatable") if isinstance(status, Mapping) else None) or {}
    cpu = allocatable.get("cpu") if isinstance(allocatable, Mapping) else None
    try:
        return 0 if cpu is None else parse_cpu_millis(str(cpu))
    except QuantityError:
        return 0


def node_record(obj: Mapping[str, Any]) -> NodeRecord:
    facts = node_facts(obj)
    return NodeRecord(
        name=str(metadata(obj).get("name") or ""),
        allocatable_m=allocatable_m(obj),
        labels=facts.labels,
        kubelet_version=facts.kubelet_version,
        operating_system=facts.operating_system,
        pod_level_resize=resizes_pod_level(obj),
        taints=repelling_taints(obj),
    )


def vpa_view(vpa: Mapping[str, Any]) -> Mapping[str, Any]:
    """What Headroom reads of a VerticalPodAutoscaler: its name, the targeting and policy
    fields, and each container's recommended CPU target and upper bound."""
    spec = vpa.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    meta = metadata(vpa)
    view: dict[str, Any] = {
        "metadata": {"namespace": meta.get("namespace"), "name": meta.get("name")},
        "spec": {field: spec[field] for field in _VPA_FIELDS if field in spec},
    }
    recommended = [
        {
            "containerName": entry.get("containerName"),
            **{
                amount: {"cpu": entry[amount]["cpu"]}
                for amount in _RECOMMENDED
                if isinstance(entry.get(amount), Mapping) and "cpu" in entry[amount]
            },
        }
        for entry in _recommendations(vpa)
    ]
    if recommended:
        view["status"] = {"recommendation": {"containerRecommendations": recommended}}
    return view


# The recommended amounts Headroom reads (app.core.eligibility.Recommended).
_RECOMMENDED: Final = ("target", "upperBound")


def _recommendations(vpa: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The status's container recommendations (an entry without a CPU amount still says
    that VPA has recommended for its container)."""
    status = vpa.get("status")
    recommendation = status.get("recommendation") if isinstance(status, Mapping) else None
    entries = (
        recommendation.get("containerRecommendations")
        if isinstance(recommendation, Mapping)
        else None
    )
    if not isinstance(entries, list):
        return []
    return [entry for entry in entries if isinstance(entry, Mapping)]


def limit_range_view(limit_range: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the LimitRange caps read (app.core.limitrange): its spec."""
    return {"spec": limit_range.get("spec") or {}}


def has_limits_cpu(quota: Mapping[str, Any]) -> bool:
    """Whether a ResourceQuota's ``spec.hard`` constrains ``limits.cpu``."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    return isinstance(hard, Mapping) and LIMITS_CPU in hard


@dataclass(frozen=True, slots=True)
class ConfigState:
    settings: Settings
    # Whether a HeadroomConfig object exists; without one the defaults apply.
    present: bool
    generation: int | None
    # The object's status as last seen, to write only real changes.
    status: Mapping[str, Any] | None
    # The config's errors when it breaks a rule; limits then stay frozen.
    invalid: str | None


DEFAULT_CONFIG: Final = ConfigState(
    settings=DEFAULT_SETTINGS, present=False, generation=None, status=None, invalid=None
)


def config_state(obj: Mapping[str, Any] | None, *, previous: ConfigState) -> ConfigState:
    """The config as Headroom uses it. An invalid object keeps the previous settings (so
    nothing moves) and carries its errors; no object means the defaults."""
    if obj is None:
        return DEFAULT_CONFIG
    generation = metadata(obj).get("generation")
    try:
        settings, invalid = parse_config(obj), None
    except ConfigError as err:
        settings, invalid = previous.settings, str(err)
    return ConfigState(
        settings=settings,
        present=True,
        generation=generation if isinstance(generation, int) else None,
        status=obj.get("status"),
        invalid=invalid,
    )
