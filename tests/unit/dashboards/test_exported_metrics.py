"""The metric list the dashboard and docs are checked against is what the processes serve."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from reconciler.metrics import ReconcilerMetrics
from tests.unit.app.builders import pod_info
from tests.unit.dashboards.promql import EXPORTED_METRICS, HISTOGRAMS
from webhook.metrics import WebhookMetrics

# prometheus_client appends these to a histogram's family samples.
_SAMPLE_LABELS = {"le"}


def _families(registry: CollectorRegistry) -> dict[str, frozenset[str]]:
    families: dict[str, frozenset[str]] = {}
    for family in registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {key for sample in family.samples for key in sample.labels} - _SAMPLE_LABELS
        families[name] = frozenset(labels)
    return families


def test_exported_metrics_are_what_a_scrape_of_the_real_registries_serves() -> None:
    reconciler = ReconcilerMetrics()
    # Per-node, per-pod and per-pool series only exist once observed; give each a sample.
    reconciler.node_factor.labels(node="n").set(2)
    reconciler.node_slack_cores.labels(node="n").set(8)
    reconciler.node_allocatable_cores.labels(node="n").set(16)
    reconciler.pod_booked_cores.set_node("n", [pod_info("p")])
    reconciler.pod_limit_cores.labels(namespace="ns", pod="p").set(3)
    reconciler.set_pool_managed("web", 4)
    reconciler.set_rule_managed("spec.weights[0]", 4, 2)
    webhook_registry = CollectorRegistry()
    WebhookMetrics(webhook_registry)
    exported = {**_families(reconciler.registry), **_families(webhook_registry)}
    assert exported == EXPORTED_METRICS


def test_histograms_are_read_as_histograms() -> None:
    assert {
        "headroom_reconcile_duration_seconds",
        "headroom_webhook_request_duration_seconds",
    } == HISTOGRAMS
