"""The series Headroom exports, read from the processes' own registries, the foreign series
the dashboard may also query, and a small PromQL reader that finds the series a query uses."""

import re
from collections.abc import Iterator, Mapping
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from reconciler.metrics import PodBookings, ReconcilerMetrics
from reconciler.outcomes import Result
from webhook.metrics import WebhookMetrics


def _collectors() -> Iterator[MetricWrapperBase | PodBookings]:
    """Each metric the reconciler and the webhook register (test_exported_metrics checks
    that these are all their registries serve)."""
    for owner in (ReconcilerMetrics(), WebhookMetrics(CollectorRegistry())):
        for value in vars(owner).values():
            if isinstance(value, MetricWrapperBase | PodBookings):
                yield value


def _exported() -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Every exported series with its labels (histograms by base name), and the histograms.

    Read from the real metric objects: a labelled series has no sample until it is observed,
    so its label names come from the metric itself rather than from a scrape.
    """
    series: dict[str, frozenset[str]] = {}
    histograms = set()
    for metric in _collectors():
        (family,) = metric.describe()
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = metric.LABELS if isinstance(metric, PodBookings) else metric._labelnames
        series[name] = frozenset(labels)
        if family.type == "histogram":
            histograms.add(name)
    return series, frozenset(histograms)


# Every series the processes export, with its labels: read from the code, never listed here.
_EXPORTED = _exported()
EXPORTED_METRICS: Final[Mapping[str, frozenset[str]]] = _EXPORTED[0]
HISTOGRAMS: Final[frozenset[str]] = _EXPORTED[1]
RESIZE_RESULTS: Final = tuple(result.value for result in Result)
CADVISOR_THROTTLING: Final = "container_cpu_cfs_throttled_periods_total"
CADVISOR_PERIODS: Final = "container_cpu_cfs_periods_total"
# The series from outside Headroom the dashboard may query, and their labels: cAdvisor's
# CFS counters (the kubelet's /metrics/cadvisor, scraped by most Prometheus setups), for the
# throttled share of periods, which no controller can know.
EXTERNAL_SERIES: Final[Mapping[str, frozenset[str]]] = {
    CADVISOR_THROTTLING: frozenset({"namespace", "pod", "container"}),
    CADVISOR_PERIODS: frozenset({"namespace", "pod", "container"}),
}

_KEYWORDS: Final = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "inf",
        "nan",
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_DURATION = re.compile(r"(?<![\w:])(?:\d+(?:ms|s|m|h|d|w|y))+\b")
_NUMBER = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def queryable_series() -> dict[str, frozenset[str]]:
    """Series names a query may use, with their labels (histograms expanded)."""
    series: dict[str, frozenset[str]] = {}
    for name, labels in EXPORTED_METRICS.items():
        if name in HISTOGRAMS:
            series[f"{name}_bucket"] = labels | {"le"}
            series[f"{name}_sum"] = labels
            series[f"{name}_count"] = labels
        else:
            series[name] = labels
    return series


def series_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    text = _DURATION.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    found = set()
    for match in _IDENTIFIER.finditer(text):
        word = match.group()
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if word.lower() not in _KEYWORDS:
            found.add(word)
    return found


def matcher_labels(expr: str) -> dict[str, set[str]]:
    """Per selected series, the label names its {…} matchers use."""
    used: dict[str, set[str]] = {}
    for name, body in _SELECTOR.findall(expr):
        used.setdefault(name, set()).update(_MATCHER_LABEL.findall(_STRING.sub('""', body)))
    return used


def unknown_series(
    expr: str, *, external: Mapping[str, frozenset[str]] = EXTERNAL_SERIES
) -> set[str]:
    """Series in the expression that neither Headroom nor the ``external`` list export."""
    return series_names(expr) - set(queryable_series()) - set(external)
