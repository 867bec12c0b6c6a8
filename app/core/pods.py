"""Slotted pod records holding only what Headroom's decisions need.

A raw pod dict weighs tens of kilobytes; a cluster-wide cache keeps these records
instead. Stripping also settles, once, everything derived from the pod: its CPU request
and current limit in millicores, its QoS class, whether pinning limits to requests
would make it Guaranteed, and its ``max-cpu`` cap.
"""

import functools
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final, TypeVar

import msgspec

from app.core.labels import MAX_CPU_ANNOTATION, MIRROR_POD_ANNOTATION, STATUS_ANNOTATION
from app.core.quantity import QuantityError, parse_quantity

GUARANTEED: Final = "Guaranteed"
BURSTABLE: Final = "Burstable"
BEST_EFFORT: Final = "BestEffort"
TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
_RESIZE_PENDING: Final = "PodResizePending"
_RESIZE_IN_PROGRESS: Final = "PodResizeInProgress"
_NO_LABELS: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    # The group part of apiVersion: "apps" for "apps/v1", "" for the core "v1".
    api_group: str
    name: str
    controller: bool


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    """An app container or a sidecar (restartable init container)."""

    name: str
    sidecar: bool
    # 0 when the container has no CPU request; such a container is never resized.
    cpu_request_m: int
    cpu_limit_m: int | None
    memory_request_bytes: int | None
    memory_limit_bytes: int | None
    restart_on_cpu_resize: bool


@dataclass(frozen=True, slots=True)
class PodLevelResources:
    """A pod's own ``spec.resources``: Headroom sets its ``limits.cpu`` there and leaves
    the containers' limits alone. The pod's request and current limit (``PodInfo``'s
    ``request_m`` and ``limit_m``) are then the pod-level ones."""

    # The pod-level CPU limit; None while unset.
    cpu_limit_m: int | None
    # The largest container CPU limit (0 if none): the API server refuses a pod-level
    # limit below any container's.
    container_limit_floor_m: int


@dataclass(frozen=True, slots=True)
class ResourceFacts:
    """What a pod's containers and resources settle: the same for every pod of one
    template, so a caller reading many pods may compute it once per distinct spec."""

    # App containers in spec order, then sidecars in spec order.
    containers: tuple[ContainerInfo, ...]
    # Those of them with a CPU request: the only ones Headroom sets limits on.
    cpu_containers: tuple[ContainerInfo, ...]
    # Plain (non-restartable) init containers; they do not count toward the request.
    init_cpu_requests_m: tuple[int, ...]
    # The CPU the scheduler books for the pod while it is bound: the larger of its
    # containers' and sidecars' requests and any init container's (with the sidecars
    # started before it), or its pod-level request, plus its RuntimeClass overhead.
    booked_m: int
    qos_class: str
    # Setting every CPU limit to its request would make the pod Guaranteed.
    guaranteed_if_pinned: bool
    # r: CPU requests of app containers and sidecars, or the pod-level request.
    request_m: int
    # c: their CPU limits summed over request-bearing containers; 0 if any has none.
    # With pod-level resources: the pod-level CPU limit, 0 while unset.
    limit_m: int
    # Set only for pods that declare pod-level resources (few do).
    pod_resources: PodLevelResources | None
    # Request-bearing containers left out of cpu_containers (and of request_m, limit_m and
    # guaranteed_if_pinned) by ``spec.excludedContainers``: their limits are their owner's.
    excluded: tuple[ContainerInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    # "" while the pod is not bound.
    node_name: str
    phase: str
    deleting: bool
    mirror: bool
    # Shared by the pods with the same labels (the replicas of a workload).
    labels: Mapping[str, str]
    # "" when the pod names none.
    priority_class: str
    owners: tuple[OwnerRef, ...]
    # The containers and resources, shared by every pod of one spec.
    facts: ResourceFacts
    max_cpu_m: int | None
    max_cpu_warning: str | None
    # Reason of a PodResizePending condition ("Deferred", "Infeasible"), if any.
    resize_pending: str | None
    resize_pending_message: str
    # PodResizeInProgress reports reason Error.
    resize_error: bool
    generation: int | None
    observed_generation: int | None
    status_annotation: str | None

    @property
    def report_generation(self) -> int | None:
        """The generation a kubelet report on the pod is about: the one the kubelet last
        saw, when it says which."""
        return self.observed_generation if self.observed_generation is not None else self.generation

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Finished or being deleted: not managed."""
        return self.deleting or self.phase in TERMINAL_PHASES

    @property
    def books_cpu(self) -> bool:
        """Whether the pod books CPU on its node: some, until it has finished, as the
        scheduler counts it (a pod being deleted holds its CPU until the kubelet reports it
        finished or it is gone)."""
        return self.facts.booked_m > 0 and self.phase not in TERMINAL_PHASES


@dataclass(frozen=True, slots=True)
class _Resources:
    cpu_request: Fraction | None
    cpu_limit: Fraction | None
    memory_request: Fraction | None
    memory_limit: Fraction | None


# The wire schema: only the fields Headroom reads. Quantities are strings on the wire;
# numbers are accepted as the API server's own decoder accepts them. Unknown fields are
# skipped without being decoded, and null stands for absent, as it does for the API (and
# is left out when a record is encoded again).
Quantity = str | int | float


class _QuantitiesWire(msgspec.Struct, gc=False, omit_defaults=True):
    cpu: Quantity | None = None
    memory: Quantity | None = None


_NO_QUANTITIES: Final = _QuantitiesWire()


class _RequirementsWire(msgspec.Struct, gc=False, omit_defaults=True):
    requests: _QuantitiesWire | None = None
    limits: _QuantitiesWire | None = None


_NO_REQUIREMENTS: Final = _RequirementsWire()


class _PodRequirementsWire(msgspec.Struct, gc=False, omit_defaults=True):
    """Pod-level resources: any resource name counts (hugepages too), so kept whole."""

    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class _ResizePolicyWire(msgspec.Struct, gc=False, omit_defaults=True):
    resourceName: str | None = None
    restartPolicy: str | None = None


class ContainerWire(msgspec.Struct, gc=False, omit_defaults=True):
    name: str | None = None
    resources: _RequirementsWire | None = None
    resizePolicy: list[_ResizePolicyWire] | None = None
    restartPolicy: str | None = None


class _OwnerWire(msgspec.Struct, gc=False, omit_defaults=True):
    apiVersion: str | None = None
    kind: str | None = None
    name: str | None = None
    controller: bool | None = None


class _AnnotationsWire(msgspec.Struct, gc=False, omit_defaults=True):
    status: str | None = msgspec.field(default=None, name=STATUS_ANNOTATION)
    max_cpu: str | None = msgspec.field(default=None, name=MAX_CPU_ANNOTATION)
    mirror: str | None = msgspec.field(default=None, name=MIRROR_POD_ANNOTATION)


_NO_ANNOTATIONS: Final = _AnnotationsWire()


class _MetadataWire(msgspec.Struct, gc=False, omit_defaults=True):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    deletionTimestamp: str | None = None
    # A null value reads as absent, as it does everywhere in the wire schema.
    labels: dict[str, str | None] | None = None
    annotations: _AnnotationsWire | None = None
    ownerReferences: list[_OwnerWire] | None = None


class PodSpecWire(msgspec.Struct, gc=False, omit_defaults=True):
    nodeName: str | None = None
    containers: list[ContainerWire] | None = None
    initContainers: list[ContainerWire] | None = None
    resources: _PodRequirementsWire | None = None
    # Set at admission from the pod's RuntimeClass.
    overhead: _QuantitiesWire | None = None
    priorityClassName: str | None = None


class _ConditionWire(msgspec.Struct, gc=False, omit_defaults=True):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None


class _StatusWire(msgspec.Struct, gc=False, omit_defaults=True):
    phase: str | None = None
    qosClass: str | None = None
    observedGeneration: int | None = None
    conditions: list[_ConditionWire] | None = None


class PodWire(msgspec.Struct, gc=False, omit_defaults=True):
    metadata: _MetadataWire | None = None
    spec: PodSpecWire | None = None
    status: _StatusWire | None = None


# Distinct specs and owners remembered for sharing; far more than a cluster's workloads.
_SHARED_RECORDS: Final = 8192
_SPEC_KEY: Final = msgspec.json.Encoder()
_FACTS: dict[tuple[bytes, str | None], ResourceFacts] = {}
_LABELS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
_NO_METADATA: Final = _MetadataWire()
_NO_SPEC: Final = PodSpecWire()
_NO_STATUS: Final = _StatusWire()
_POD_DECODER: Final = msgspec.json.Decoder(PodWire)


class PodShapeError(ValueError):
    """A pod object whose fields have the wrong JSON types; the message names the field."""


def decode_pod(data: bytes | memoryview) -> PodWire:
    """Decode a pod's JSON straight into the fields Headroom reads, skipping the rest.

    Skipped fields (env, volumes, managedFields, other labels and annotations, container
    statuses) are never turned into Python objects: decoding costs a fraction of a full
    parse and leaves almost no garbage behind.
    """
    try:
        return _POD_DECODER.decode(data)
    except msgspec.ValidationError as err:
        raise PodShapeError(str(err)) from err


def pod_wire(obj: Mapping[str, Any]) -> PodWire:
    """A pod held as a dict, in the wire schema; raises ``PodShapeError`` on a wrong type."""
    return _convert(obj, PodWire)


def pod_info_from_dict(obj: Mapping[str, Any]) -> PodInfo:
    """Strip a pod held as a dict (an admission request, a listed or saved item).

    Raises ``PodShapeError`` when a field has the wrong type and ``QuantityError`` on a
    bad quantity.
    """
    return pod_info(pod_wire(obj))


def resource_facts(
    spec: Mapping[str, Any] | PodSpecWire, *, qos_class: str | None
) -> ResourceFacts:
    """The facts of a pod spec; ``qos_class`` is the one in the pod's status, if any.

    Raises ``QuantityError`` on a bad quantity.
    """
    wire = spec if isinstance(spec, PodSpecWire) else _convert(spec, PodSpecWire)
    inits = wire.initContainers or ()
    apps = wire.containers or ()
    # App containers, then sidecars: the init containers that keep running.
    resizable_wire = (*apps, *(c for c in inits if c.restartPolicy == "Always"))
    resizable = [_resources(c) for c in resizable_wire]
    plain_resources = [_resources(c) for c in inits if c.restartPolicy != "Always"]
    containers = tuple(
        _container(c, sidecar=index >= len(apps), resources=r)
        for index, (c, r) in enumerate(zip(resizable_wire, resizable, strict=True))
    )
    cpu_containers = tuple(c for c in containers if c.cpu_request_m > 0)
    limits = [c.cpu_limit_m for c in cpu_containers]
    request_m = sum(c.cpu_request_m for c in cpu_containers)
    limit_m = 0 if None in limits else sum(c or 0 for c in limits)
    pod_level = _pod_level(wire.resources, containers=resizable)
    pod_resources = None
    if pod_level is None:
        qos = qos_class or _qos([*resizable, *plain_resources])
        # The pod as it would be if the policy gave it no burst at all.
        pinned = [replace(r, cpu_limit=r.cpu_request) if r.cpu_request else r for r in resizable]
        guaranteed_if_pinned = _qos([*pinned, *plain_resources]) == GUARANTEED
    else:
        qos = qos_class or _requirements_qos(pod_level)
        pinned_pod = replace(pod_level, cpu_limit=pod_level.cpu_request)
        guaranteed_if_pinned = _requirements_qos(pinned_pod) == GUARANTEED
        request_m = _millis(pod_level.cpu_request) or 0
        limit_m = _millis(pod_level.cpu_limit) or 0
        pod_resources = PodLevelResources(
            cpu_limit_m=_millis(pod_level.cpu_limit),
            container_limit_floor_m=max((c.cpu_limit_m or 0 for c in containers), default=0),
        )
    pod_requirements = wire.resources or _PodRequirementsWire()
    pod_cpu = "cpu" in (pod_requirements.requests or {}) or "cpu" in (pod_requirements.limits or {})
    booked_m = (
        _millis(pod_level.cpu_request) or 0
        if pod_level is not None and pod_cpu
        else _scheduler_request_m(apps=resizable[: len(apps)], inits=inits)
    ) + (_millis(_quantity((wire.overhead or _NO_QUANTITIES).cpu)) or 0)
    return ResourceFacts(
        containers=containers,
        cpu_containers=cpu_containers,
        init_cpu_requests_m=tuple(_millis(r.cpu_request) or 0 for r in plain_resources),
        booked_m=booked_m,
        qos_class=qos,
        guaranteed_if_pinned=guaranteed_if_pinned,
        request_m=request_m,
        limit_m=limit_m,
        pod_resources=pod_resources,
    )


def excluding(pod: PodInfo, names: frozenset[str]) -> PodInfo:
    """``pod`` as Headroom manages it when the containers named ``names`` keep the CPU
    limits someone else gave them: they leave its request, current limit and split (they
    still book the node). Unchanged when it has none of them, and for a pod with pod-level
    resources, whose pod-level limit is the only one Headroom sets."""
    if (
        not names
        or pod.facts.pod_resources is not None
        or not any(c.name in names for c in pod.facts.cpu_containers)
    ):
        return pod
    return replace(pod, facts=_excluding(pod.facts, names))


@functools.lru_cache(maxsize=_SHARED_RECORDS)
def _excluding(facts: ResourceFacts, names: frozenset[str]) -> ResourceFacts:
    """Shared like the facts themselves: the replicas of a workload get one."""
    managed = tuple(c for c in facts.cpu_containers if c.name not in names)
    kept = tuple(c for c in facts.cpu_containers if c.name in names)
    limits = [c.cpu_limit_m for c in managed]
    # Pinned, the managed containers' limits equal their requests; the kept ones keep
    # theirs, so the pod is Guaranteed only if theirs already equal their requests.
    kept_pinned = all(c.cpu_limit_m == c.cpu_request_m for c in kept)
    return replace(
        facts,
        cpu_containers=managed,
        request_m=sum(c.cpu_request_m for c in managed),
        limit_m=0 if None in limits else sum(c or 0 for c in limits),
        guaranteed_if_pinned=facts.guaranteed_if_pinned and kept_pinned,
        excluded=kept,
    )


def shared_facts(spec: PodSpecWire, *, qos_class: str | None) -> ResourceFacts:
    """``resource_facts``, worked out once per distinct spec and shared by its pods.

    The replicas of a workload have the same containers and resources: their records then
    point at one set of container records, which is most of a record's size. The spec's
    resource fields, re-encoded, are the key; raises ``QuantityError`` on a bad quantity.
    """
    key = (
        _SPEC_KEY.encode((spec.containers, spec.initContainers, spec.resources, spec.overhead)),
        qos_class,
    )
    facts = _FACTS.get(key)
    if facts is None:
        if len(_FACTS) >= _SHARED_RECORDS:
            _FACTS.clear()
        facts = _FACTS[key] = resource_facts(spec, qos_class=qos_class)
    return facts


def shared_labels(labels: Mapping[str, str | None] | None) -> Mapping[str, str]:
    """``labels`` (read only: typed ``Mapping``), shared with every pod that has the same.

    Weight rules select pods by label, so records keep them. The replicas of a workload
    have the same labels and share one copy: 14 bytes a pod, measured, where a copy each
    would cost about 400 (what a pod with labels of its own, a StatefulSet's, pays).
    """
    if not labels:
        return _NO_LABELS
    key = tuple((k, v) for k, v in labels.items() if v is not None)
    shared = _LABELS.get(key)
    if shared is None:
        if len(_LABELS) >= _SHARED_RECORDS:
            _LABELS.clear()
        shared = _LABELS[key] = {sys.intern(k): sys.intern(v) for k, v in key}
    return shared


def pod_info(wire: PodWire) -> PodInfo:
    """Strip a decoded pod; raises ``QuantityError`` on a bad quantity."""
    metadata = wire.metadata or _NO_METADATA
    spec = wire.spec or _NO_SPEC
    status = wire.status or _NO_STATUS
    annotations = metadata.annotations or _NO_ANNOTATIONS
    max_cpu_m, max_cpu_warning = max_cpu_cap(annotations.max_cpu)
    pending_reason, pending_message, resize_error = _resize_conditions(status.conditions or ())
    return PodInfo(
        namespace=sys.intern(metadata.namespace or ""),
        name=metadata.name or "",
        uid=metadata.uid or "",
        node_name=sys.intern(spec.nodeName or ""),
        phase=sys.intern(status.phase or ""),
        deleting=metadata.deletionTimestamp is not None,
        mirror=annotations.mirror is not None,
        labels=shared_labels(metadata.labels),
        priority_class=sys.intern(spec.priorityClassName or ""),
        owners=_owners(
            tuple(
                owner_ref(ref.apiVersion, ref.kind, ref.name, bool(ref.controller))
                for ref in metadata.ownerReferences or ()
            )
        ),
        facts=shared_facts(spec, qos_class=status.qosClass),
        max_cpu_m=max_cpu_m,
        max_cpu_warning=max_cpu_warning,
        resize_pending=pending_reason,
        resize_pending_message=pending_message,
        resize_error=resize_error,
        generation=metadata.generation,
        observed_generation=status.observedGeneration,
        status_annotation=annotations.status,
    )


def qos_class(spec: Mapping[str, Any]) -> str:
    """The QoS class the API server computes for a pod spec (init containers included).

    Pod-level resources, when the pod declares any, decide it alone.
    """
    wire = _convert(spec, PodSpecWire)
    resources = [_resources(c) for c in (*(wire.containers or ()), *(wire.initContainers or ()))]
    pod_level = _pod_level(wire.resources, containers=resources)
    return _qos(resources) if pod_level is None else _requirements_qos(pod_level)


def max_cpu_cap(text: str | None) -> tuple[int | None, str | None]:
    """The ``max-cpu`` annotation as ``(cap in millicores, None)``, or ``(None, warning)``.

    An invalid or non-positive value is ignored; the warning is for an event.
    """
    if text is None:
        return None, None
    try:
        value = parse_quantity(text)
    except QuantityError as error:
        return None, f"ignoring {MAX_CPU_ANNOTATION}: {error}"
    if value <= 0:
        return None, f"ignoring {MAX_CPU_ANNOTATION}={text!r}: must be greater than 0"
    return math.ceil(value * 1000), None


def booked_cpu_m(pods: Iterable[PodInfo]) -> int:
    """R: the CPU booked by every pod in ``pods`` that books any (managed or not)."""
    return sum(pod.facts.booked_m for pod in pods if pod.books_cpu)


def _scheduler_request_m(apps: Sequence[_Resources], inits: Sequence[ContainerWire]) -> int:
    """A pod's CPU request as the scheduler sums it from its containers (the sidecar
    rule of component-helpers' ``PodRequests``): app containers and sidecars together,
    unless an init container, with the sidecars started before it, asks for more."""
    running = sum(_millis(r.cpu_request) or 0 for r in apps)
    sidecars = peak = 0
    for init in inits:
        request = _millis(_resources(init).cpu_request) or 0
        if init.restartPolicy == "Always":
            running += request
            sidecars += request
            peak = max(peak, sidecars)
        else:
            peak = max(peak, sidecars + request)
    return max(running, peak)


T = TypeVar("T")


def _convert(obj: Mapping[str, Any], wire: type[T]) -> T:
    try:
        return msgspec.convert(obj, wire)
    except msgspec.ValidationError as err:
        raise PodShapeError(str(err)) from err


def _pod_level(
    resources: _PodRequirementsWire | None, *, containers: Sequence[_Resources]
) -> _Resources | None:
    """Pod-level CPU and memory as the API server stores them, or None when the pod
    declares no pod-level resources.

    Requests are defaulted the way the API server does (so a pod still under admission
    reads like the stored one): with pod-level limits, a missing request is the sum of
    the containers' requests, or the pod-level limit when no container requests it.
    """
    if resources is None:
        return None
    requests = resources.requests or {}
    limits = resources.limits or {}
    if not any(n in ("cpu", "memory") or n.startswith("hugepages-") for n in (*requests, *limits)):
        return None
    cpu_limit = _quantity(limits.get("cpu"))
    memory_limit = _quantity(limits.get("memory"))
    cpu_request = _quantity(requests.get("cpu"))
    memory_request = _quantity(requests.get("memory"))
    # cpu_limit is None without pod-level limits: the request is then the sum alone.
    if cpu_request is None:
        cpu_request = _sum_or_none([c.cpu_request for c in containers]) or cpu_limit
    if limits and memory_request is None:
        memory_request = _sum_or_none([c.memory_request for c in containers]) or memory_limit
    return _Resources(cpu_request, cpu_limit, memory_request, memory_limit)


def _sum_or_none(values: Sequence[Fraction | None]) -> Fraction | None:
    present = [value for value in values if value]
    return sum(present, Fraction(0)) if present else None


def _resources(container: ContainerWire) -> _Resources:
    resources = container.resources or _NO_REQUIREMENTS
    requests = resources.requests or _NO_QUANTITIES
    limits = resources.limits or _NO_QUANTITIES
    cpu_limit = _quantity(limits.cpu)
    memory_limit = _quantity(limits.memory)
    # API-server defaulting: a limit without a request sets the request.
    cpu_request = _quantity(requests.cpu if requests.cpu is not None else limits.cpu)
    memory_request = _quantity(requests.memory if requests.memory is not None else limits.memory)
    return _Resources(cpu_request, cpu_limit, memory_request, memory_limit)


def _container(container: ContainerWire, *, sidecar: bool, resources: _Resources) -> ContainerInfo:
    restart = any(
        policy.resourceName == "cpu" and policy.restartPolicy == "RestartContainer"
        for policy in container.resizePolicy or ()
    )
    return ContainerInfo(
        name=container.name or "",
        sidecar=sidecar,
        cpu_request_m=_millis(resources.cpu_request) or 0,
        cpu_limit_m=_millis(resources.cpu_limit),
        memory_request_bytes=_ceil(resources.memory_request),
        memory_limit_bytes=_ceil(resources.memory_limit),
        restart_on_cpu_resize=restart,
    )


# The replicas of one workload share their owner: one record (and one tuple of them) serves
# them all, as one `ResourceFacts` serves every pod of one spec.
@functools.lru_cache(maxsize=_SHARED_RECORDS)
def owner_ref(
    api_version: str | None, kind: str | None, name: str | None, controller: bool
) -> OwnerRef:
    group, _, _ = (api_version or "").rpartition("/")
    return OwnerRef(
        kind=sys.intern(kind or ""),
        api_group=sys.intern(group),
        name=name or "",
        controller=controller,
    )


@functools.lru_cache(maxsize=_SHARED_RECORDS)
def _owners(refs: tuple[OwnerRef, ...]) -> tuple[OwnerRef, ...]:
    return refs


def _resize_conditions(conditions: Sequence[_ConditionWire]) -> tuple[str | None, str, bool]:
    pending: str | None = None
    message = ""
    error = False
    for condition in conditions:
        if condition.status != "True":
            continue
        if condition.type == _RESIZE_PENDING:
            pending = condition.reason or ""
            message = condition.message or ""
        elif condition.type == _RESIZE_IN_PROGRESS:
            error = condition.reason == "Error"
    return pending, message, error


def _qos(containers: Sequence[_Resources]) -> str:
    """``ComputePodQOS``: compares summed requests and limits, zero counting as unset."""
    cpu_requests = [r.cpu_request for r in containers if r.cpu_request]
    memory_requests = [r.memory_request for r in containers if r.memory_request]
    cpu_limits = [r.cpu_limit for r in containers if r.cpu_limit]
    memory_limits = [r.memory_limit for r in containers if r.memory_limit]
    if not (cpu_requests or memory_requests or cpu_limits or memory_limits):
        return BEST_EFFORT
    if (
        all(r.cpu_limit and r.memory_limit for r in containers)
        and cpu_requests
        and memory_requests
        and _exact_sum(cpu_requests) == _exact_sum(cpu_limits)
        and _exact_sum(memory_requests) == _exact_sum(memory_limits)
    ):
        return GUARANTEED
    return BURSTABLE


def _requirements_qos(resources: _Resources) -> str:
    """``requirementsQOS`` over one set of requests and limits (pod-level resources):
    per resource, equal non-zero values are Guaranteed, both unset BestEffort."""
    classes = set()
    for request, limit in (
        (resources.cpu_request, resources.cpu_limit),
        (resources.memory_request, resources.memory_limit),
    ):
        if (request or 0) != (limit or 0):
            return BURSTABLE
        classes.add(GUARANTEED if request else BEST_EFFORT)
    return classes.pop() if len(classes) == 1 else BURSTABLE


def _exact_sum(values: Sequence[Fraction]) -> Fraction:
    """``sum(values)``, without a Fraction addition (and its gcd) per term when the values
    share one denominator, as byte counts and millicores of one pod usually do."""
    denominator = values[0].denominator
    if all(value.denominator == denominator for value in values):
        return Fraction(sum(value.numerator for value in values), denominator)
    return sum(values, Fraction(0))


def _quantity(value: object) -> Fraction | None:
    return None if value is None else parse_quantity(str(value))


# Cached like parse_quantity: the same few values recur on every pod.
@functools.lru_cache(maxsize=4096)
def _millis(value: Fraction | None) -> int | None:
    if value is None:
        return None
    if value < 0:
        raise QuantityError(f"CPU quantity {value} is negative")
    return math.ceil(value * 1000)


@functools.lru_cache(maxsize=4096)
def _ceil(value: Fraction | None) -> int | None:
    return None if value is None else math.ceil(value)
