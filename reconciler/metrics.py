"""The reconciler's Prometheus series, in a dedicated registry.

Names and label values are the runbook's; every `result` exists at zero from start-up so
that alerts on `increase(...)` see the first event.
"""

import contextlib
from collections.abc import Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.core.pods import PodInfo
from reconciler.outcomes import Result

# Reconciling one node is a cache walk plus a handful of writes: milliseconds normally,
# seconds under API-server pressure (the runbook alerts on a climbing p99).
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class PodBookings(Collector):
    """``headroom_pod_booked_cores{node,namespace,pod}``: the CPU the scheduler books for
    every pod on each node, as the node's last reconcile counted it (the figures its slack
    and ``kubectl headroom explain`` are made of). Kept as one tuple per node and read at
    scrape time: a gauge child per pod costs 662 bytes against 74 for its tuple entry,
    measured, where the whole cached pod is about 1.6 KB."""

    NAME: Final = "headroom_pod_booked_cores"
    LABELS: Final = ("node", "namespace", "pod")
    HELP: Final = (
        "CPU the scheduler books for the pod (requests of its app containers and sidecars "
        "or its largest init container, pod-level request, RuntimeClass overhead), in cores."
    )

    def __init__(self) -> None:
        self._by_node: dict[str, tuple[tuple[str, str, int], ...]] = {}

    def set_node(self, node: str, pods: Iterable[PodInfo]) -> None:
        self._by_node[node] = tuple((pod.namespace, pod.name, pod.facts.booked_m) for pod in pods)

    def forget_node(self, node: str) -> None:
        self._by_node.pop(node, None)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=self.LABELS)
        # A copy: a scrape served from another thread never sees the dict change size.
        for node, pods in list(self._by_node.items()):
            for namespace, pod, booked_m in pods:
                family.add_metric((node, namespace, pod), booked_m / 1000)
        yield family


class ReconcilerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()

        def gauge(name: str, documentation: str, *labels: str) -> Gauge:
            return Gauge(name, documentation, labels, registry=self.registry)

        self.node_factor = gauge(
            "headroom_node_factor",
            "Per-node slack factor F = 1 + S/M (S/W under weight rules).",
            "node",
        )
        self.node_slack_cores = gauge(
            "headroom_node_slack_cores",
            "Unbooked CPU on the node (allocatable minus requests), in cores.",
            "node",
        )
        self.node_allocatable_cores = gauge(
            "headroom_node_allocatable_cores",
            "The node's allocatable CPU, in cores.",
            "node",
        )
        self.pod_booked_cores = PodBookings()
        self.registry.register(self.pod_booked_cores)
        self.pod_limit_cores = gauge(
            "headroom_pod_limit_cores",
            "Computed CPU limit ceiling of a managed pod, in cores.",
            "namespace",
            "pod",
        )
        self.resizes = Counter(
            "headroom_resizes",
            "Per-pod resize outcomes.",
            ["result"],
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "headroom_reconcile_duration_seconds",
            "Time to reconcile one node.",
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.pods_managed = gauge("headroom_pods_managed", "Managed pods across all nodes.")
        self.resizes_deferred = gauge(
            "headroom_resizes_deferred",
            "Managed pods whose resize the kubelet currently reports as Deferred.",
        )
        self.pool_pods_managed = gauge(
            "headroom_pool_pods_managed",
            "Managed pods on the nodes of each node pool (pools with none have no series).",
            "pool",
        )
        self.weight_rule_pods_managed = gauge(
            "headroom_weight_rule_pods_managed",
            "Managed pods each weight rule matched, by the rule's path in the config and its "
            "weight (rules matching none have no series).",
            "rule",
            "weight",
        )
        for result in Result:
            self.resizes.labels(result=result.value)

    def count(self, result: Result, amount: int = 1) -> None:
        self.resizes.labels(result=result.value).inc(amount)

    def set_pool_managed(self, pool: str, count: int) -> None:
        _count(self.pool_pods_managed, count, pool)

    def set_rule_managed(self, rule: str, weight: int, count: int) -> None:
        _count(self.weight_rule_pods_managed, count, rule, str(weight))

    def forget_pod(self, *, namespace: str, pod: str) -> None:
        with contextlib.suppress(KeyError):
            self.pod_limit_cores.remove(namespace, pod)

    def forget_node(self, node: str) -> None:
        for gauge in (self.node_factor, self.node_slack_cores, self.node_allocatable_cores):
            with contextlib.suppress(KeyError):
                gauge.remove(node)
        self.pod_booked_cores.forget_node(node)


def _count(gauge: Gauge, count: int, *labels: str) -> None:
    """A count's series, removed at 0 so that what matches nothing has none."""
    if count:
        gauge.labels(*labels).set(count)
        return
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
