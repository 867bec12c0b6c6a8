"""The watch-fed cluster cache and the rules that turn its changes into node wake-ups.

Pods are kept as slotted `PodInfo` records stripped from the raw objects, indexed by node
and namespace, so memory grows by about a kilobyte per pod. Nodes, namespaces,
LimitRanges and VPAs keep only the fields decisions read. Every change is checked
against design §5's enqueue rules and reported to a `Listener`:

- a pod binds to / leaves a node, turns terminal, or changes anything the policy reads
  (requests, limits, eligibility labels, the max-cpu cap, the kubelet's resize condition)
  → its node, debounced;
- a pod's status annotation changes → reported, so an edit by someone else (not
  Headroom's own write coming back) wakes its node;
- node allocatable or labels change → that node, debounced;
- the config changes → every node, promptly;
- a namespace's enrolment changes → the nodes with pods in it, promptly;
- a LimitRange or VPA changes → the nodes with pods in its namespace, debounced.
"""

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson

from app.core.config import DEFAULT_SETTINGS, ConfigError, Settings, parse_config
from app.core.eligibility import namespace_enrolled
from app.core.labels import CONFIG_NAME
from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps, limit_range_caps
from app.core.nodefeatures import resizes_pod_level
from app.core.nodes import node_facts
from app.core.pods import PodInfo, PodShapeError, PodWire, decode_pod, pod_info
from app.core.quantity import QuantityError, parse_cpu_millis

log = logging.getLogger(__name__)


class Listener(Protocol):
    def node_dirty(self, node: str, *, prompt: bool) -> None: ...

    def node_removed(self, node: str) -> None: ...

    def settings_changed(self, settings: Settings) -> None: ...

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None: ...

    def annotation_changed(self, pod: PodInfo) -> None: ...


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


DEFAULT_CONFIG = ConfigState(
    settings=DEFAULT_SETTINGS, present=False, generation=None, status=None, invalid=None
)


def node_record_from_dict(obj: Mapping[str, Any]) -> NodeRecord:
    metadata = obj.get("metadata") or {}
    allocatable = ((obj.get("status") or {}).get("allocatable") or {}).get("cpu")
    try:
        allocatable_m = parse_cpu_millis(str(allocatable)) if allocatable is not None else 0
    except QuantityError:
        allocatable_m = 0
    facts = node_facts(obj)
    return NodeRecord(
        name=metadata.get("name") or "",
        allocatable_m=allocatable_m,
        labels=facts.labels,
        kubelet_version=facts.kubelet_version,
        operating_system=facts.operating_system,
        pod_level_resize=resizes_pod_level(obj),
    )


def policy_view(pod: PodInfo) -> tuple[Any, ...]:
    """What decisions read from a pod; a change in anything else wakes no node.

    Left out on purpose: the status annotation (Headroom's own write, reported apart),
    generations and the resize message, and phases other than terminal ones.
    """
    return (*target_view(pod), pod.containers, pod.limit_m)


def target_view(pod: PodInfo) -> tuple[Any, ...]:
    """What a pod's target depends on: everything decisions read but its current limits,
    which only decide whether the target needs a patch."""
    pod_level = pod.pod_resources
    return (
        pod.uid,
        pod.node_name,
        pod.terminal,
        pod.labels,
        pod.owners,
        tuple(
            (c.name, c.sidecar, c.cpu_request_m, c.memory_request_bytes, c.memory_limit_bytes)
            for c in pod.containers
        ),
        pod.init_cpu_requests_m,
        None if pod_level is None else pod_level.container_limit_floor_m,
        pod.request_m,
        pod.guaranteed_if_pinned,
        pod.qos_class,
        pod.max_cpu_m,
        pod.max_cpu_warning,
        pod.resize_pending,
        pod.resize_error,
    )


def pod_change_nodes(old: PodInfo | None, new: PodInfo | None) -> frozenset[str]:
    """The nodes to reconcile after a pod changed from `old` to `new` (None: absent)."""
    if old is None and new is None:
        return frozenset()
    if old is None or new is None:
        present = new if new is not None else old
        assert present is not None
        return frozenset({present.node_name} - {""})
    if policy_view(old) == policy_view(new):
        return frozenset()
    return frozenset({old.node_name, new.node_name} - {""})


class ClusterCache:
    def __init__(self, *, listener: Listener) -> None:
        self._listener = listener
        self.pods: dict[str, PodInfo] = {}
        self._pods_by_node: dict[str, dict[str, PodInfo]] = {}
        self._pods_by_namespace: dict[str, set[str]] = {}
        self.nodes: dict[str, NodeRecord] = {}
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self._limit_ranges: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._limit_range_caps: dict[str, LimitRangeCaps] = {}
        self._vpas: dict[str, dict[str, Mapping[str, Any]]] = {}
        self.config = DEFAULT_CONFIG

    @property
    def settings(self) -> Settings:
        return self.config.settings

    # Reads used by reconciles.

    def pods_on(self, node: str) -> list[PodInfo]:
        return list(self._pods_by_node.get(node, {}).values())

    def node_names(self) -> list[str]:
        return list(self.nodes)

    def nodes_in_namespace(self, namespace: str) -> set[str]:
        return {self.pods[key].node_name for key in self._pods_by_namespace.get(namespace, ())}

    def limit_range_caps(self, namespace: str) -> LimitRangeCaps:
        return self._limit_range_caps.get(namespace, NO_LIMIT_RANGE_CAPS)

    def vpas(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._vpas.get(namespace, {}).values()

    # Writes, one per watched resource; `obj` None means the object is gone.

    def apply_pod(self, key: str, obj: PodWire | None) -> None:
        old = self.pods.get(key)
        new = self._strip_pod(key, obj)
        if old is not None:
            self._unindex(key, old)
        if new is not None:
            self.pods[key] = new
            self._pods_by_node.setdefault(new.node_name, {})[key] = new
            self._pods_by_namespace.setdefault(new.namespace, set()).add(key)
        for node in pod_change_nodes(old, new):
            self._listener.node_dirty(node, prompt=False)
        if old is not None and new is not None and old.status_annotation != new.status_annotation:
            # Headroom's own write, or somebody else's edit: the listener knows which.
            self._listener.annotation_changed(new)

    def apply_node(self, name: str, obj: Mapping[str, Any] | None) -> None:
        old = self.nodes.get(name)
        if obj is None:
            if old is not None:
                del self.nodes[name]
                self._listener.node_removed(name)
            return
        new = node_record_from_dict(obj)
        self.nodes[name] = new
        if new != old:
            self._listener.node_dirty(name, prompt=False)

    def apply_namespace(self, name: str, obj: Mapping[str, Any] | None) -> None:
        old = self.namespaces.get(name)
        labels: Mapping[str, str] | None = None
        if obj is None:
            self.namespaces.pop(name, None)
        else:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            self.namespaces[name] = labels
        enrolled = self._enrolled(name, labels)
        if self._enrolled(name, old) != enrolled:
            self._listener.namespace_changed(name, enrolled=enrolled)
            for node in self.nodes_in_namespace(name):
                self._listener.node_dirty(node, prompt=True)

    def apply_config(self, name: str, obj: Mapping[str, Any] | None) -> None:
        if name != CONFIG_NAME:
            return
        old = self.config
        if obj is None:
            new = DEFAULT_CONFIG
        else:
            metadata = obj.get("metadata") or {}
            generation = metadata.get("generation")
            try:
                settings, invalid = parse_config(obj), None
            except ConfigError as err:
                settings, invalid = old.settings, str(err)
                log.error("HeadroomConfig %s is invalid; limits stay frozen: %s", name, err)
            new = ConfigState(
                settings=settings,
                present=True,
                generation=generation if isinstance(generation, int) else None,
                status=obj.get("status"),
                invalid=invalid,
            )
        self.config = new
        if (new.settings, new.invalid) != (old.settings, old.invalid):
            self._listener.settings_changed(new.settings)
            for node in self.node_names():
                self._listener.node_dirty(node, prompt=True)

    def apply_limit_range(self, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        ranges = self._limit_ranges.setdefault(namespace, {})
        if obj is None:
            ranges.pop(name, None)
        else:
            ranges[name] = {"spec": obj.get("spec") or {}}
        caps = limit_range_caps(ranges.values()) if ranges else NO_LIMIT_RANGE_CAPS
        if not ranges:
            del self._limit_ranges[namespace]
        if caps != self.limit_range_caps(namespace):
            if caps == NO_LIMIT_RANGE_CAPS:
                self._limit_range_caps.pop(namespace, None)
            else:
                self._limit_range_caps[namespace] = caps
            self._wake_namespace(namespace)

    def apply_vpa(self, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        vpas = self._vpas.setdefault(namespace, {})
        old = vpas.get(name)
        new: Mapping[str, Any] | None = None
        if obj is None:
            vpas.pop(name, None)
        else:
            spec = obj.get("spec") or {}
            new = {
                "metadata": {"namespace": namespace, "name": name},
                "spec": {
                    field: spec[field]
                    for field in ("targetRef", "updatePolicy", "resourcePolicy")
                    if field in spec
                },
            }
            vpas[name] = new
        if not vpas:
            del self._vpas[namespace]
        if new != old:
            self._wake_namespace(namespace)

    def keys(self, kind: str) -> Iterable[str]:
        """Current keys of a resource kind, for deleting what a relist no longer returns."""
        if kind == "pods":
            return list(self.pods)
        if kind == "nodes":
            return list(self.nodes)
        if kind == "namespaces":
            return list(self.namespaces)
        if kind == "config":
            return [CONFIG_NAME] if self.config.present else []
        if kind == "limitranges":
            return [f"{ns}/{name}" for ns, ranges in self._limit_ranges.items() for name in ranges]
        if kind == "vpas":
            return [f"{ns}/{name}" for ns, vpas in self._vpas.items() for name in vpas]
        raise ValueError(f"unknown kind {kind!r}")

    def _enrolled(self, name: str, labels: Mapping[str, str] | None) -> bool:
        return labels is not None and namespace_enrolled(self.settings, name=name, labels=labels)

    def _wake_namespace(self, namespace: str) -> None:
        for node in self.nodes_in_namespace(namespace):
            self._listener.node_dirty(node, prompt=False)

    def _strip_pod(self, key: str, obj: PodWire | None) -> PodInfo | None:
        if obj is None:
            return None
        try:
            pod = pod_info(obj)
        except QuantityError as err:
            log.error("ignoring pod %s with an invalid quantity: %s", key, err)
            return None
        # Unbound pods book nothing on any node; the watch normally filters them out.
        return pod if pod.node_name else None

    def _unindex(self, key: str, pod: PodInfo) -> None:
        del self.pods[key]
        on_node = self._pods_by_node.get(pod.node_name)
        if on_node is not None:
            on_node.pop(key, None)
            if not on_node:
                del self._pods_by_node[pod.node_name]
        in_namespace = self._pods_by_namespace.get(pod.namespace)
        if in_namespace is not None:
            in_namespace.discard(key)
            if not in_namespace:
                del self._pods_by_namespace[pod.namespace]


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name") or ""
    return f"{namespace}/{name}" if namespace else name


def pod_key(pod: PodWire) -> str:
    metadata = pod.metadata
    return "/" if metadata is None else f"{metadata.namespace or ''}/{metadata.name or ''}"


T = TypeVar("T")


class CacheFeed(Generic[T]):
    """Adapts one resource's list/watch stream to a `ClusterCache` apply function.

    Decodes each object's raw JSON with `decode` (pods into their wire schema, the few
    other objects into dicts). A relist reports every object; whatever the cache held
    that the relist did not report was deleted while the watch was down.
    """

    def __init__(
        self,
        *,
        decode: Callable[[memoryview], T],
        key: Callable[[T], str],
        apply: Callable[[str, T | None], None],
        keys: Callable[[], Iterable[str]],
    ) -> None:
        self._decode = decode
        self._key = key
        self._apply = apply
        self._keys = keys
        self._seen: set[str] | None = None

    def relist_started(self) -> None:
        self._seen = set()

    def listed(self, raw: memoryview) -> None:
        obj = self._decode(raw)
        key = self._key(obj)
        if self._seen is not None:
            self._seen.add(key)
        self._apply(key, obj)

    def relist_finished(self) -> None:
        seen = self._seen or set()
        for key in [key for key in self._keys() if key not in seen]:
            self._apply(key, None)
        self._seen = None

    def event(self, kind: str, raw: memoryview) -> None:
        obj = self._decode(raw)
        self._apply(self._key(obj), None if kind == "DELETED" else obj)


def decode_object(raw: memoryview) -> dict[str, Any]:
    decoded = orjson.loads(raw)
    if not isinstance(decoded, dict):
        raise PodShapeError("watched object is not a JSON object")
    return decoded


def pod_feed(cache: ClusterCache) -> CacheFeed[PodWire]:
    return CacheFeed(
        decode=decode_pod, key=pod_key, apply=cache.apply_pod, keys=lambda: cache.keys("pods")
    )


def object_feed(
    apply: Callable[[str, Mapping[str, Any] | None], None], keys: Callable[[], Iterable[str]]
) -> CacheFeed[dict[str, Any]]:
    return CacheFeed(decode=decode_object, key=object_key, apply=apply, keys=keys)
