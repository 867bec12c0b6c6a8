"""dashboards/headroom.json as Grafana reads it: its panels, their queries, and each query
with the dashboard's variables substituted the way Grafana substitutes them."""

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[3] / "dashboards" / "headroom.json"
# Grafana's escaping of a variable's value inside a regex matcher (its Prometheus data
# source's prometheusRegularEscape): a backslash becomes four, and each of these
# characters gets a backslash, itself escaped for the PromQL string.
_REGEX_SPECIAL = re.compile(r"([$^*{}\[\]'+?.()|])")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(container: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in container.get("panels", []):
        yield panel
        yield from panels(panel)


def panel_exprs() -> list[tuple[str, str]]:
    """(panel title, query) of every target of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in panels(dashboard())
        for target in panel.get("targets", [])
    ]


def grafana_expr(
    expr: str, *, step: float, scrape_interval: float, picked: Mapping[str, str] | None = None
) -> str:
    """``expr`` as Grafana sends it for a graph of resolution ``step`` seconds, from a data
    source whose scrape interval is ``scrape_interval``: each dashboard variable is the one
    value ``picked`` for it, else its "All" value; ``$__interval`` is the step and
    ``$__rate_interval`` is max(step + scrape interval, 4 x scrape interval)."""
    picked = picked or {}
    values = {
        "__interval": f"{step:g}s",
        "__rate_interval": f"{max(step + scrape_interval, 4 * scrape_interval):g}s",
    }
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] != "query":
            continue
        name = variable["name"]
        if name in picked:
            escaped = picked[name].replace("\\", "\\" * 4)
            values[name] = _REGEX_SPECIAL.sub(r"\\\\\1", escaped)
        else:
            values[name] = variable["allValue"]
    unknown = set(picked) - set(values)
    if unknown:
        raise KeyError(f"the dashboard has no variable {sorted(unknown)}")

    def value(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name not in values:
            raise KeyError(f"{expr!r} uses ${name}, which the dashboard does not define")
        return values[name]

    return _VARIABLE.sub(value, expr)
