"""The series Headroom exports, and a small PromQL reader that finds the series a query uses."""

import re
from collections.abc import Mapping
from typing import Final

# Every series the project exports, with its labels: the one list to update when a
# metric is added or renamed. Histograms are listed by their base name.
EXPORTED_METRICS: Final[Mapping[str, frozenset[str]]] = {
    "headroom_node_factor": frozenset({"node"}),
    "headroom_node_slack_cores": frozenset({"node"}),
    "headroom_pod_limit_cores": frozenset({"namespace", "pod"}),
    "headroom_resizes_total": frozenset({"result"}),
    "headroom_reconcile_duration_seconds": frozenset(),
    "headroom_pods_managed": frozenset(),
    "headroom_resizes_deferred": frozenset(),
    "headroom_pool_pods_managed": frozenset({"pool"}),
    "headroom_webhook_requests_total": frozenset({"endpoint", "result"}),
    "headroom_webhook_request_duration_seconds": frozenset({"endpoint"}),
}
HISTOGRAMS: Final = frozenset(
    {"headroom_reconcile_duration_seconds", "headroom_webhook_request_duration_seconds"}
)
RESIZE_RESULTS: Final = (
    "ok",
    "dry-run",
    "Deferred",
    "Infeasible",
    "quota-denied",
    "conflict",
    "error",
)
# cAdvisor's CPU throttling counter (kubelet /metrics/cadvisor), the one foreign series.
CADVISOR_THROTTLING: Final = "container_cpu_cfs_throttled_periods_total"

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


def unknown_series(expr: str) -> set[str]:
    """Series in the expression that Headroom does not export (cAdvisor's throttling aside)."""
    return series_names(expr) - set(queryable_series()) - {CADVISOR_THROTTLING}
