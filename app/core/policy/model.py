"""Inputs and results of the per-node computation."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import NamedTuple

from app.core.config import WeightRule
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo


class Cap(StrEnum):
    """What set a pod's ceiling ``hi``; on ties the most specific cap is named."""

    ALLOCATABLE = "allocatable"
    MAX_MULTIPLIER = "max-multiplier"
    LIMIT_RANGE = "limit-range"
    MAX_CPU = "max-cpu"
    # Every cap was below the request, so the ceiling is the request itself.
    REQUEST = "request"
    # Pod-level limits only: a container's own CPU limit is above every cap, and the
    # pod-level limit may not be below it.
    CONTAINER_LIMIT = "container-limit"
    # A RequestsOnly VerticalPodAutoscaler's upper bound is above Headroom's own caps: the
    # ceiling is that upper bound, at most the node's and the namespace's caps.
    VPA_UPPER_BOUND = "vpa-upper-bound"


class Reason(StrEnum):
    """Why a pod is or is not patched."""

    GROW = "grow"
    SHRINK = "shrink"
    # Some request-bearing container has no CPU limit yet.
    NO_LIMIT = "no-limit"
    AT_TARGET = "at-target"
    IN_DEADBAND = "in-deadband"
    # Any allowed target would make the pod Guaranteed, so it is left alone.
    QOS_GUARD = "qos-guard"


@dataclass(frozen=True, slots=True)
class NodeInput:
    """What the policy reads of a node: its allocatable CPU and what is booked on it."""

    name: str
    allocatable_m: int
    # R: what the scheduler books for every unfinished pod bound to the node, managed or not.
    booked_m: int
    # The node's managed pods only (each with a CPU request).
    pods: Sequence[PodInfo]
    # LimitRange caps by namespace; namespaces without LimitRanges may be absent.
    limit_ranges: Mapping[str, LimitRangeCaps] = field(default_factory=dict)
    # By pod UID, the CPU upper bounds (millicores, by container name) of the RequestsOnly
    # VPA that actuates the pod (``app.core.eligibility.vpa_cpu_recommendation``), which its
    # limits are never below; pods without one may be absent.
    vpa_floors: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # By pod UID, the weight rule that matched the pod; pods no rule matched (weight 1)
    # may be absent.
    weights: Mapping[str, WeightRule] = field(default_factory=dict)


# Results are NamedTuples: immutable like frozen dataclasses, and three times cheaper to
# build, which matters at one per pod and container on every node computation.
class ContainerLimit(NamedTuple):
    name: str
    sidecar: bool
    limit_m: int


class PodResult(NamedTuple):
    pod: PodInfo
    request_m: int
    current_m: int
    target_m: int
    hi_m: int
    hi_cap: Cap
    # The formula asked for more than hi.
    capped: bool
    # Limits for the request-bearing containers; empty when the QoS guard skips the pod
    # and for pods with pod-level resources, whose pod-level limit is the target.
    containers: tuple[ContainerLimit, ...]
    patch: bool
    reason: Reason
    # The pod's VPA upper bound (the sum over its containers, at most the node's and the
    # namespace's caps) when it lifted the target above what slack and Headroom's caps
    # give; 0 otherwise.
    vpa_m: int = 0
    # The weight rule that matched the pod; None: no rule, weight 1.
    weight_rule: WeightRule | None = None

    @property
    def weight(self) -> int:
        return rule_weight(self.weight_rule)


def rule_weight(rule: WeightRule | None) -> int:
    """The weight a pod shares the slack with: its rule's, or 1 when no rule matched it."""
    return 1 if rule is None else rule.weight


@dataclass(frozen=True, slots=True)
class NodeResult:
    name: str
    allocatable_m: int
    booked_m: int
    slack_m: int
    managed_m: int
    # W: each managed pod's request times its weight, summed; ``managed_m`` when every
    # weight is 1.
    weighted_m: int
    pod_count: int
    # 1 + S/W, with W the managed requests each times its pod's weight: the ceiling over
    # the request of a pod of weight 1 the floor does not lift.
    factor: Fraction
    pods: tuple[PodResult, ...]
