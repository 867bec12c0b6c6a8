"""The cluster cache both processes and the tools read, and the rules that turn its changes
into node wake-ups.

Pods are kept as slotted `PodInfo` records stripped from the raw objects, indexed by node
and namespace, so memory grows by about a kilobyte per pod. Nodes, namespaces,
LimitRanges and VPAs keep only the fields decisions read; ReplicaSets and Jobs only their
controller, one shared reference per controller. Every change is checked
against design §5's enqueue rules and reported to a `Listener`:

- a pod binds to / leaves a node, turns terminal, or changes anything the policy reads
  (requests, limits, labels, the max-cpu cap, the kubelet's resize condition)
  → its node, debounced;
- a pod's status annotation changes → reported, so an edit by someone else (not
  Headroom's own write coming back) wakes its node;
- node allocatable or labels change → that node, debounced;
- the config changes → every node, promptly;
- a namespace's enrolment changes → the nodes with pods in it, promptly; its other labels
  change while a weight rule selects namespaces → the same, debounced;
- a LimitRange or VPA changes → the nodes with pods in its namespace, debounced;
- a ReplicaSet's or Job's controller appears, changes or goes, in a namespace with VPAs
  → the same (which VPA targets a pod follows its chain of controllers, app.core.owners).

It is pure: the list/watch feeds (`app.core.feeds`) fill it from the reflectors
(`app.io.reflector`), `kubectl headroom` from a snapshot; `node_view` is what a node's
decision (`app.core.decision`) reads.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from app.core.config import Settings
from app.core.eligibility import namespace_enrolled
from app.core.labels import CONFIG_NAME
from app.core.limitrange import NO_LIMIT_RANGE_CAPS, LimitRangeCaps, limit_range_caps
from app.core.owners import LOOKED_UP, link
from app.core.pods import OwnerRef, PodInfo, PodWire, pod_info, pod_wire
from app.core.quantity import QuantityError
from app.core.views import (
    DEFAULT_CONFIG,
    NodeRecord,
    config_state,
    has_limits_cpu,
    labels,
    limit_range_view,
    node_record,
    object_key,
    vpa_view,
)


class Listener(Protocol):
    def node_dirty(self, node: str, *, prompt: bool) -> None: ...

    def node_removed(self, node: str) -> None: ...

    def settings_changed(self, settings: Settings) -> None: ...

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None: ...

    def annotation_changed(self, pod: PodInfo) -> None: ...


class Quiet:
    """A listener for readers that decide on demand and need no wake-ups (the tools)."""

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        """Nothing is scheduled."""

    def node_removed(self, node: str) -> None:
        """Nothing is scheduled."""

    def settings_changed(self, settings: Settings) -> None:
        """Nothing is scheduled."""

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None:
        """Nothing is scheduled."""

    def annotation_changed(self, pod: PodInfo) -> None:
        """Nothing is scheduled."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A pod whose quantities Headroom cannot read: it is skipped, and books nothing."""

    key: str
    node_name: str
    reason: str


class Lookups(Protocol):
    """The namespace-scoped objects a node's decision reads about its pods."""

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None: ...

    def limit_range_caps(self, namespace: str) -> LimitRangeCaps: ...

    def vpas(self, namespace: str) -> Iterable[Mapping[str, Any]]: ...

    def controller_of(self, namespace: str, owner: OwnerRef) -> OwnerRef | None:
        """The controller of a ReplicaSet or Job (`app.core.owners`); None when it has
        none or is unknown."""
        ...


@dataclass(frozen=True, slots=True)
class NamespaceFacts:
    """`Lookups` for one namespace's objects, read already (an admission request's)."""

    namespace: str
    labels: Mapping[str, str] | None
    caps: LimitRangeCaps = NO_LIMIT_RANGE_CAPS
    namespace_vpas: tuple[Mapping[str, Any], ...] = ()
    # The controllers of the pod's ReplicaSet or Job, and up, read for it.
    controllers: Mapping[OwnerRef, OwnerRef | None] = field(default_factory=dict)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.labels if namespace == self.namespace else None

    def limit_range_caps(self, namespace: str) -> LimitRangeCaps:
        return self.caps if namespace == self.namespace else NO_LIMIT_RANGE_CAPS

    def vpas(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self.namespace_vpas if namespace == self.namespace else ()

    def controller_of(self, namespace: str, owner: OwnerRef) -> OwnerRef | None:
        return self.controllers.get(owner) if namespace == self.namespace else None


@dataclass(frozen=True, slots=True)
class NodeView:
    """Everything one node's decision reads: the node, every pod bound to it, and the
    namespaced objects about those pods."""

    node: NodeRecord
    pods: tuple[PodInfo, ...]
    unreadable: tuple[Unreadable, ...]
    lookups: Lookups


def policy_view(pod: PodInfo) -> tuple[Any, ...]:
    """What decisions read from a pod; a change in anything else wakes no node.

    Left out on purpose: the status annotation (Headroom's own write, reported apart),
    generations unless a kubelet reports a pending resize about one (each report is acted
    on once per generation, and a repeat on the next one changes nothing else), the resize
    message, and phases other than terminal ones.
    """
    reported = pod.report_generation if pod.resize_pending is not None else None
    return (*target_view(pod), pod.facts.containers, pod.facts.limit_m, reported)


def target_view(pod: PodInfo) -> tuple[Any, ...]:
    """What a pod's target depends on: everything decisions read but its current limits,
    which only decide whether the target needs a patch."""
    pod_level = pod.facts.pod_resources
    return (
        pod.uid,
        pod.node_name,
        pod.terminal,
        pod.books_cpu,
        pod.labels,
        pod.owners,
        tuple(
            (c.name, c.sidecar, c.cpu_request_m, c.memory_request_bytes, c.memory_limit_bytes)
            for c in pod.facts.containers
        ),
        pod.facts.init_cpu_requests_m,
        None if pod_level is None else pod_level.container_limit_floor_m,
        pod.facts.request_m,
        pod.facts.booked_m,
        pod.facts.guaranteed_if_pinned,
        pod.facts.qos_class,
        pod.max_cpu_m,
        pod.max_cpu_warning,
        pod.resize_pending,
        pod.resize_error,
    )


def pod_change_nodes(old: PodInfo | None, new: PodInfo | None) -> frozenset[str]:
    """The nodes to reconcile after a pod changed from `old` to `new` (None: absent)."""
    if old is not None and new is not None:
        if policy_view(old) == policy_view(new):
            return frozenset()
        return frozenset({old.node_name, new.node_name} - {""})
    present = new if new is not None else old
    return frozenset() if present is None else frozenset({present.node_name} - {""})


def pod_key(pod: PodWire) -> str:
    metadata = pod.metadata
    return "/" if metadata is None else f"{metadata.namespace or ''}/{metadata.name or ''}"


class ClusterCache:
    """The objects decisions read, indexed for them; it implements `Lookups`.

    ``on_pod`` sees every change of a pod's record (old, new); ``on_unreadable`` every pod
    skipped because its quantities cannot be read.
    """

    def listen(self, listener: Listener) -> None:
        """Send wake-ups to ``listener`` from now on (a listener that reads this cache is
        built after it)."""
        self._listener = listener

    def __init__(
        self,
        *,
        listener: Listener,
        on_pod: Callable[[PodInfo | None, PodInfo | None], None] | None = None,
        on_unreadable: Callable[[Unreadable], None] | None = None,
    ) -> None:
        self._listener = listener
        self._on_pod = on_pod
        self._on_unreadable = on_unreadable
        self.pods: dict[str, PodInfo] = {}
        self._pods_by_node: dict[str, dict[str, PodInfo]] = {}
        self._pods_by_namespace: dict[str, dict[str, PodInfo]] = {}
        self._unreadable: dict[str, Unreadable] = {}
        # Per node, a count that moves whenever a pod's target inputs there change.
        self._bookings: dict[str, int] = {}
        self.nodes: dict[str, NodeRecord] = {}
        # Moves whenever a node record is added, changed or removed.
        self.node_generation = 0
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self._limit_ranges: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._limit_range_caps: dict[str, LimitRangeCaps] = {}
        self._vpas: dict[str, dict[str, Mapping[str, Any]]] = {}
        # Per looked-up resource ("replicasets", "jobs"), namespace -> {name: its
        # controller, or () when it has none}.
        self._controllers: dict[str, dict[str, dict[str, tuple[OwnerRef, ...]]]] = {
            resource.plural: {} for resource in LOOKED_UP.values()
        }
        # namespace -> {name: True} for its ResourceQuotas that hold limits.cpu
        self._limit_quotas: dict[str, dict[str, bool]] = {}
        self.config = DEFAULT_CONFIG

    @property
    def settings(self) -> Settings:
        return self.config.settings

    # Reads used by decisions (`Lookups`) and their callers.

    def node_names(self) -> list[str]:
        return list(self.nodes)

    def bookings(self, node: str) -> int:
        """A count that moves whenever a pod bound to the node changes what targets depend
        on (a pod binds, leaves, changes its requests): equal counts, same targets."""
        return self._bookings.get(node, 0)

    def node_view(self, name: str) -> NodeView | None:
        """What the node's decision reads; None when the node is gone."""
        node = self.nodes.get(name)
        if node is None:
            return None
        return NodeView(
            node=node,
            pods=tuple(self._pods_by_node.get(name, {}).values()),
            unreadable=tuple(u for u in self._unreadable.values() if u.node_name == name)
            if self._unreadable
            else (),
            lookups=self,
        )

    def nodes_in_namespace(self, namespace: str) -> set[str]:
        return {pod.node_name for pod in self._pods_by_namespace.get(namespace, {}).values()}

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    def limit_range_caps(self, namespace: str) -> LimitRangeCaps:
        return self._limit_range_caps.get(namespace, NO_LIMIT_RANGE_CAPS)

    def vpas(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        return self._vpas.get(namespace, {}).values()

    def controller_of(self, namespace: str, owner: OwnerRef) -> OwnerRef | None:
        known = self.known_controller(namespace, owner)
        return known[0] if known else None

    def known_controller(self, namespace: str, owner: OwnerRef) -> tuple[OwnerRef, ...] | None:
        """A looked-up owner's controller, () when it has none; None when it is unknown."""
        resource = LOOKED_UP.get((owner.api_group, owner.kind))
        if resource is None:
            return None
        return self._controllers[resource.plural].get(namespace, {}).get(owner.name)

    def limit_quota_names(self, namespace: str) -> list[str]:
        """Names of the namespace's ResourceQuotas that hold ``limits.cpu``, sorted."""
        return sorted(self._limit_quotas.get(namespace, ()))

    def unreadable(self) -> list[Unreadable]:
        return list(self._unreadable.values())

    # Writes, one per watched resource; `obj` None means the object is gone.

    def apply_pod(self, key: str, obj: PodWire | None) -> None:
        """Store the pod's record, or why it cannot be read, or its absence (None)."""
        record: PodInfo | Unreadable | None = None
        if obj is not None:
            try:
                record = pod_info(obj)
            except QuantityError as err:
                node_name = (obj.spec.nodeName if obj.spec else None) or ""
                record = Unreadable(key=key, node_name=node_name, reason=str(err))
        self.put_pod(key, record)

    def put_pod(self, key: str, record: PodInfo | Unreadable | None) -> None:
        """Store a pod's record (already stripped), or why it cannot be read, or its absence."""
        old = self.pods.get(key)
        new: PodInfo | None = None
        self._unreadable.pop(key, None)
        if isinstance(record, Unreadable):
            self._unreadable[key] = record
            if self._on_unreadable is not None:
                self._on_unreadable(record)
        elif record is not None and record.node_name:
            # Unbound pods book nothing on any node; the watch normally filters them out.
            new = record
        if old is not None:
            del self.pods[key]
            _store(self._pods_by_node, old.node_name, key, None)
            _store(self._pods_by_namespace, old.namespace, key, None)
        if new is not None:
            self.pods[key] = new
            self._pods_by_node.setdefault(new.node_name, {})[key] = new
            self._pods_by_namespace.setdefault(new.namespace, {})[key] = new
        if self._on_pod is not None and (old is not None or new is not None):
            self._on_pod(old, new)
        if old is None or new is None or target_view(old) != target_view(new):
            for node in {pod.node_name for pod in (old, new) if pod is not None}:
                if node in self.nodes:
                    self._bookings[node] = self._bookings.get(node, 0) + 1
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
                self.node_generation += 1
                self._bookings.pop(name, None)
                self._listener.node_removed(name)
            return
        new = node_record(obj)
        self.nodes[name] = new
        if new != old:
            self.node_generation += 1
            self._listener.node_dirty(name, prompt=False)

    def apply_namespace(self, name: str, obj: Mapping[str, Any] | None) -> None:
        old = self.namespaces.get(name)
        new = None if obj is None else labels(obj)
        if new is None:
            self.namespaces.pop(name, None)
        else:
            self.namespaces[name] = new
        enrolled = self._enrolled(name, new)
        if self._enrolled(name, old) != enrolled:
            self._listener.namespace_changed(name, enrolled=enrolled)
            for node in self.nodes_in_namespace(name):
                self._listener.node_dirty(node, prompt=True)
        elif old != new and _weighs_namespaces(self.settings):
            self._wake_namespace(name)

    def apply_config(self, name: str, obj: Mapping[str, Any] | None) -> None:
        if name != CONFIG_NAME:
            return
        old = self.config
        new = config_state(obj, previous=old)
        self.config = new
        if (new.settings, new.invalid) != (old.settings, old.invalid):
            self._listener.settings_changed(new.settings)
            for node in self.node_names():
                self._listener.node_dirty(node, prompt=True)

    def apply_limit_range(self, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        _store(self._limit_ranges, namespace, name, None if obj is None else limit_range_view(obj))
        caps = limit_range_caps(self._limit_ranges.get(namespace, {}).values())
        if caps != self.limit_range_caps(namespace):
            if caps == NO_LIMIT_RANGE_CAPS:
                self._limit_range_caps.pop(namespace, None)
            else:
                self._limit_range_caps[namespace] = caps
            self._wake_namespace(namespace)

    def apply_vpa(self, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        new = None if obj is None else vpa_view(obj)
        if new != _store(self._vpas, namespace, name, new):
            self._wake_namespace(namespace)

    def apply_replica_set(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._apply_controlled("replicasets", key, obj)

    def apply_job(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._apply_controlled("jobs", key, obj)

    def _apply_controlled(self, plural: str, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        new = None if obj is None else link(obj)
        old = _store(self._controllers[plural], namespace, name, new)
        # Which VPA targets a pod matters only where there are VPAs.
        if new != old and namespace in self._vpas:
            self._wake_namespace(namespace)

    def apply_quota(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """ResourceQuotas matter only for whether they hold ``limits.cpu``; no decision of
        the reconciler's reads them, so no node wakes."""
        namespace, _, name = key.partition("/")
        holds_limits_cpu = obj is not None and has_limits_cpu(obj)
        _store(self._limit_quotas, namespace, name, True if holds_limits_cpu else None)

    def keys(self, kind: str) -> Iterable[str]:
        """Current keys of a resource kind, for deleting what a relist no longer returns."""
        if kind == "pods":
            return [*self.pods, *self._unreadable]
        if kind == "nodes":
            return list(self.nodes)
        if kind == "namespaces":
            return list(self.namespaces)
        if kind == "config":
            return [CONFIG_NAME] if self.config.present else []
        namespaced: dict[str, Mapping[str, Iterable[str]]] = {
            "limitranges": self._limit_ranges,
            "vpas": self._vpas,
            "resourcequotas": self._limit_quotas,
            **self._controllers,
        }
        if kind in namespaced:
            return [f"{ns}/{name}" for ns, names in namespaced[kind].items() for name in names]
        raise ValueError(f"unknown kind {kind!r}")

    def _enrolled(self, name: str, labels: Mapping[str, str] | None) -> bool:
        return labels is not None and namespace_enrolled(self.settings, name=name, labels=labels)

    def _wake_namespace(self, namespace: str) -> None:
        for node in self.nodes_in_namespace(namespace):
            self._listener.node_dirty(node, prompt=False)


def _weighs_namespaces(settings: Settings) -> bool:
    """Whether some weight rule, top-level or a pool's, selects pods by their namespace."""
    lists = (settings.weights, *(pool.overrides.weights or () for pool in settings.node_pools))
    return any(rule.namespace_selector is not None for rules in lists for rule in rules)


V = TypeVar("V")


def _store(index: dict[str, dict[str, V]], group: str, name: str, value: V | None) -> V | None:
    """Put ``value`` (None: remove it) under ``name`` in ``group`` of an index of groups,
    dropping a group left empty; returns the value it replaced."""
    members = index.setdefault(group, {})
    old = members.get(name)
    if value is None:
        members.pop(name, None)
    else:
        members[name] = value
    if not members:
        del index[group]
    return old


def listed_cache(
    *,
    nodes: Iterable[Mapping[str, Any]],
    namespaces: Iterable[Mapping[str, Any]],
    limit_ranges: Iterable[Mapping[str, Any]],
    vpas: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    replica_sets: Iterable[Mapping[str, Any]] = (),
    jobs: Iterable[Mapping[str, Any]] = (),
) -> ClusterCache:
    """A cache of objects listed already, for the tools, which decide on demand."""
    cache = ClusterCache(listener=Quiet())
    for objects, apply in (
        (nodes, cache.apply_node),
        (namespaces, cache.apply_namespace),
        (limit_ranges, cache.apply_limit_range),
        (vpas, cache.apply_vpa),
        (replica_sets, cache.apply_replica_set),
        (jobs, cache.apply_job),
    ):
        for obj in objects:
            apply(object_key(obj), obj)
    for pod in pods:
        wire = pod_wire(pod)
        cache.apply_pod(pod_key(wire), wire)
    return cache
