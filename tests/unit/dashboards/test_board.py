"""Grafana's substitution of the dashboard's variables, as the real-node tier sends its
queries to Prometheus."""

import pytest

from tests.unit.dashboards.board import grafana_expr, panel_exprs

LIMIT = 'headroom_pod_limit_cores{namespace=~"$namespace", pod=~"$pod"}'


def test_every_variable_takes_its_all_value() -> None:
    assert grafana_expr(LIMIT, step=5, scrape_interval=5) == (
        'headroom_pod_limit_cores{namespace=~".*", pod=~".*"}'
    )


def test_a_picked_value_is_escaped_for_a_regex_matcher() -> None:
    picked = grafana_expr(
        LIMIT, step=5, scrape_interval=5, picked={"pod": "web.1", "namespace": "a"}
    )
    assert picked == 'headroom_pod_limit_cores{namespace=~"a", pod=~"web\\\\.1"}'
    slashed = grafana_expr('up{pod=~"$pod"}', step=5, scrape_interval=5, picked={"pod": "a\\b"})
    assert slashed == 'up{pod=~"a\\\\\\\\b"}'


@pytest.mark.parametrize(
    ("step", "scrape", "window"), [(5, 5, "20s"), (30, 5, "35s"), (2, 15, "60s")]
)
def test_rate_interval_is_grafanas(step: float, scrape: float, window: str) -> None:
    expr = "rate(x[$__rate_interval]) + y[$__interval]"
    assert grafana_expr(expr, step=step, scrape_interval=scrape) == (
        f"rate(x[{window}]) + y[{step:g}s]"
    )


def test_every_panel_query_substitutes() -> None:
    for _, expr in panel_exprs():
        assert "$" not in grafana_expr(expr, step=5, scrape_interval=5)


def test_an_unknown_variable_is_an_error() -> None:
    with pytest.raises(KeyError, match=r"\$cluster"):
        grafana_expr('up{cluster=~"$cluster"}', step=5, scrape_interval=5)
    with pytest.raises(KeyError, match="no variable"):
        grafana_expr(LIMIT, step=5, scrape_interval=5, picked={"cluster": "a"})
