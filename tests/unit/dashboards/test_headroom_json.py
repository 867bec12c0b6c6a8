"""dashboards/headroom.json: valid Grafana JSON that queries only series that exist (the
processes' own, read from their registries, and the listed external ones), with a panel for
every one Headroom exports."""

import re

import pytest

from tests.unit.dashboards.board import dashboard, panel_exprs, panels
from tests.unit.dashboards.promql import (
    CADVISOR_PERIODS,
    CADVISOR_THROTTLING,
    EXPORTED_METRICS,
    EXTERNAL_SERIES,
    HISTOGRAMS,
    matcher_labels,
    queryable_series,
    series_names,
    unknown_series,
)

BOOKED = "headroom_pod_booked_cores"
ALLOCATABLE = "headroom_node_allocatable_cores"
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def variable_selectors() -> list[tuple[str, str]]:
    """(label, selector) of every label_values(...) template variable."""
    found = []
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.match(variable["query"]["query"])
        assert match, variable["name"]
        found.append((match["label"], match["selector"]))
    return found


def test_dashboard_is_a_grafana_dashboard() -> None:
    board = dashboard()
    assert board["title"] == "Headroom"
    assert board["uid"]
    ids = [panel["id"] for panel in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"]


def test_every_query_uses_exported_series_only() -> None:
    exprs = panel_exprs() + [(label, selector) for label, selector in variable_selectors()]
    assert exprs
    for title, expr in exprs:
        assert series_names(expr), f"{title}: no series in {expr!r}"
        assert unknown_series(expr) == set(), f"{title}: {expr!r}"


def test_matchers_use_labels_the_series_carry() -> None:
    series = {**queryable_series(), **EXTERNAL_SERIES}
    for title, expr in panel_exprs():
        for name, labels in matcher_labels(expr).items():
            assert labels <= series[name], f"{title}: {name} has no label {labels}"


@pytest.mark.parametrize("name", sorted(EXPORTED_METRICS))
def test_every_exported_series_has_a_panel(name: str) -> None:
    wanted = {f"{name}_bucket"} if name in HISTOGRAMS else {name}
    assert any(wanted & series_names(expr) for _, expr in panel_exprs()), name


def test_admission_latency_is_per_endpoint() -> None:
    latency = [
        expr
        for _, expr in panel_exprs()
        if "headroom_webhook_request_duration_seconds_bucket" in series_names(expr)
    ]
    assert latency
    for expr in latency:
        (grouping,) = re.findall(r"sum by \(([^)]*)\)", expr)
        assert {label.strip() for label in grouping.split(",")} == {"endpoint", "le"}, expr


def test_a_panel_shows_who_booked_a_node_against_its_allocatable_cpu() -> None:
    by_title: dict[str, set[str]] = {}
    for title, expr in panel_exprs():
        by_title.setdefault(title, set()).add(expr)
    (exprs,) = [e for e in by_title.values() if any(BOOKED in series_names(x) for x in e)]
    assert exprs == {
        f'sum by (namespace, pod) ({BOOKED}{{node=~"$node"}})',
        f'sum({ALLOCATABLE}{{node=~"$node"}})',
    }


def test_throttling_is_the_throttled_share_of_periods() -> None:
    throttling = [expr for _, expr in panel_exprs() if CADVISOR_THROTTLING in series_names(expr)]
    assert throttling
    for expr in throttling:
        throttled, _, periods = expr.partition(" / ")
        assert series_names(throttled) == {CADVISOR_THROTTLING}, expr
        assert series_names(periods) == {CADVISOR_PERIODS}, expr


def test_template_variables_read_labels_the_series_carry() -> None:
    series = queryable_series()
    for label, selector in variable_selectors():
        (name,) = series_names(selector)
        assert label in series[name]


def test_limit_is_overlaid_on_throttling_in_one_panel() -> None:
    overlays = [
        title
        for title, _ in panel_exprs()
        if {"headroom_pod_limit_cores", CADVISOR_THROTTLING}
        <= {s for t, e in panel_exprs() if t == title for s in series_names(e)}
    ]
    assert overlays


@pytest.mark.parametrize(
    ("what", "pattern"),
    [
        ("node factor", r"headroom_node_factor"),
        ("node slack", r"headroom_node_slack_cores"),
        ("resize outcomes by result", r"by \(result\).*headroom_resizes_total"),
        (
            "reconcile p99",
            r"histogram_quantile\(0\.99,.*headroom_reconcile_duration_seconds_bucket",
        ),
        ("managed pods", r"headroom_pods_managed"),
    ],
    ids=["node-factor", "node-slack", "resizes-by-result", "reconcile-p99", "managed-pods"],
)
def test_dashboard_shows(what: str, pattern: str) -> None:
    assert any(re.search(pattern, expr) for _, expr in panel_exprs()), what


@pytest.mark.parametrize(
    ("expr", "series"),
    [
        ("max(headroom_pods_managed)", {"headroom_pods_managed"}),
        (
            "sum by (namespace, pod) (rate(container_cpu_cfs_throttled_periods_total"
            '{pod=~"$pod"}[$__rate_interval]))',
            {CADVISOR_THROTTLING},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(x_bucket[5m]))) > 1.5e3",
            {"x_bucket"},
        ),
        ('a{result="or"} / on (node) group_left b offset 5m', {"a", "b"}),
    ],
    ids=["aggregation", "grafana-variables", "numbers-and-functions", "keywords-and-strings"],
)
def test_promql_reader_finds_the_series(expr: str, series: set[str]) -> None:
    assert series_names(expr) == series


def test_a_foreign_series_off_the_list_is_unknown() -> None:
    assert unknown_series("sum(rate(node_cpu_seconds_total[5m]))") == {"node_cpu_seconds_total"}
    assert unknown_series(f"rate({CADVISOR_THROTTLING}[5m])", external={}) == {CADVISOR_THROTTLING}
