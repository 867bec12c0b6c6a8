"""The runbook's money graph on real kubelets: a real Prometheus scrapes every kubelet's
``/metrics/cadvisor`` and Headroom's own metrics, and the dashboard's "CPU limit vs CFS
throttling" panel joins a CPU-bound managed pod's ``headroom_pod_limit_cores`` to the
share of its CFS periods cAdvisor counted as throttled: throttled while a neighbour books
the node and Headroom holds the pod near its request, not once the neighbour leaves and
Headroom raises the limit. While the neighbour books the node, the "Booked by pod" panel
shows each pod's booking as ``kubectl headroom explain`` lists it: the neighbour books its
init container with the sidecar started before it, not its app container. Then every
panel of ``dashboards/headroom.json`` returns data from the same Prometheus, queried as
Grafana queries it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable

import pytest

from app.core.quantity import parse_cpu_millis
from devcluster.prometheus import Labels, Prometheus
from devcluster.realnodes import WORKLOAD
from tests.integration.conftest import Cluster
from tests.integration.kubectl_headroom.plugin import kubectl_headroom
from tests.integration.reconciler.conftest import Reconciler
from tests.realnode import builders
from tests.realnode.conftest import SCRAPE_INTERVAL, Scene, say
from tests.unit.dashboards.board import grafana_expr, panel_exprs
from tests.unit.dashboards.promql import CADVISOR_THROTTLING, series_names

NODE = WORKLOAD.name
# A graph's resolution: one point per scrape.
STEP = SCRAPE_INTERVAL
# Managed request 150m beside a neighbour booking 2550m on the 3-CPU node: 300m of slack,
# a 450m limit; alone, the 10x cap: 1.5 cores. The pod burns one core throughout. The
# neighbour books its 2500m init container beside the 50m sidecar started before it; its
# app container requests 1 CPU.
REQUEST = "150m"
NEIGHBOUR_SIDECARS = (
    builders.container("proxy", cpu="50m", sidecar=True),
    builders.container("warm", cpu="2500m", args=["cat", "/dev/null"]),
)
BOOKED_LIMIT, FREE_LIMIT = 0.45, 1.5
POOL = {"name": "workload", "nodeSelector": {"matchLabels": {"kubernetes.io/hostname": NODE}}}
WEIGHT_1 = {"podSelector": {}, "weight": 1}


def overlay() -> tuple[str, str]:
    """The two queries of the panel that overlays the limit on throttling."""
    by_title: dict[str, list[str]] = {}
    for title, expr in panel_exprs():
        by_title.setdefault(title, []).append(expr)
    for exprs in by_title.values():
        limit = [e for e in exprs if "headroom_pod_limit_cores" in series_names(e)]
        throttled = [e for e in exprs if CADVISOR_THROTTLING in series_names(e)]
        if limit and throttled:
            return limit[0], throttled[0]
    raise AssertionError("no panel overlays headroom_pod_limit_cores on CFS throttling")


def money_graph(prometheus: Prometheus, namespace: str, pod: str) -> tuple[float, float]:
    """(limit in cores, throttled share of periods) the overlay draws for ``pod`` now,
    with the dashboard's namespace and pod variables picked for it; NaN for a query that
    returns no series for the pod."""
    picked = {"namespace": namespace, "pod": pod}
    values = []
    for expr in overlay():
        query = grafana_expr(expr, step=STEP, scrape_interval=SCRAPE_INTERVAL, picked=picked)
        found = [value for labels, value in prometheus.query(query) if labels == picked]
        values.append(found[0] if found else math.nan)
    limit, throttled = values
    return limit, throttled


def booked_by_pod(prometheus: Prometheus) -> dict[str, float]:
    """What the "Booked by pod" panel stacks on the node now: cores by namespace/pod."""
    (expr,) = [e for _, e in panel_exprs() if "headroom_pod_booked_cores" in series_names(e)]
    query = grafana_expr(expr, step=STEP, scrape_interval=SCRAPE_INTERVAL, picked={"node": NODE})
    return {
        f"{labels['namespace']}/{labels['pod']}": value for labels, value in prometheus.query(query)
    }


def explained_bookings(cluster: Cluster, namespace: str, pod: str) -> dict[str, float]:
    """The bookings ``kubectl headroom explain`` lists for the pod's node, in cores."""
    result = kubectl_headroom(cluster, "explain", "-n", namespace, pod, "-o", "json")
    assert result.returncode == 0, result.stderr
    return {
        booking["pod"]: parse_cpu_millis(booking["booked"]) / 1000
        for booking in json.loads(result.stdout)["bookings"]
    }


def wait_money_graph(
    prometheus: Prometheus,
    namespace: str,
    pod: str,
    *,
    limit: float,
    throttled: Callable[[float], bool],
    timeout: float = 180.0,
) -> tuple[float, float]:
    """Until the overlay draws ``limit`` for the pod and a throttled share that
    ``throttled`` accepts (a rate window of 4 scrapes needs a minute of samples)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = money_graph(prometheus, namespace, pod)
        if seen[0] == limit and throttled(seen[1]):
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"the money graph of {pod} after {timeout}s: (limit, throttled) {seen}")
        time.sleep(5)


def test_the_money_graph_and_every_panel(
    scene: Scene,
    managed_namespace: str,
    namespace: str,
    start_prometheus: Callable[[Reconciler], Prometheus],
    pytestconfig: pytest.Config,
) -> None:
    # A node pool and a weight rule, so the "by node pool" and "by weight rule" panels
    # have one each; a rule of weight 1 changes no limit.
    scene.enforce(nodePools=[POOL], weights=[WEIGHT_1])
    reconciler = scene.start_reconciler()
    prometheus = start_prometheus(reconciler)
    began = time.time()

    scene.neighbour(namespace, node=NODE, cpu="1", sidecars=NEIGHBOUR_SIDECARS)
    burn = builders.container(cpu=REQUEST, args=["burn", "1"])
    scene.place("burn", burn, namespace=managed_namespace, node=NODE)
    scene.settled(managed_namespace, "burn", round(BOOKED_LIMIT * 1000))
    booked = wait_money_graph(
        prometheus, managed_namespace, "burn", limit=BOOKED_LIMIT, throttled=lambda x: x > 0.5
    )

    # The panel and explain agree pod by pod, the neighbour at its init container's 2550m
    # (a scrape behind explain at most: pods of earlier tests may still be leaving).
    deadline = time.monotonic() + 60
    while True:
        explained = explained_bookings(scene.cluster, managed_namespace, "burn")
        panel = booked_by_pod(prometheus)
        if panel == explained or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert explained[f"{namespace}/neighbour"] == 2.55
    assert panel == explained
    scene.delete(namespace, "neighbour")
    scene.settled(managed_namespace, "burn", round(FREE_LIMIT * 1000))
    free = wait_money_graph(
        prometheus, managed_namespace, "burn", limit=FREE_LIMIT, throttled=lambda x: x < 0.02
    )
    say(
        pytestconfig,
        f"\nmoney graph of {NODE}'s CPU-bound pod (one core of demand): limit "
        f"{booked[0]} cores, {booked[1]:.0%} of CFS periods throttled while booked; "
        f"limit {free[0]} cores, {free[1]:.0%} throttled once the neighbour left",
    )

    end = time.time()
    empty: list[str] = []
    for title, expr in panel_exprs():
        query = grafana_expr(expr, step=STEP, scrape_interval=SCRAPE_INTERVAL)
        series = prometheus.query_range(query, start=began, end=end, step=STEP)
        if not any(s.finite() for s in series):
            empty.append(f"{title}: {query}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
    say(pytestconfig, f"all {len(panel_exprs())} panel queries returned data")
    pool: list[tuple[Labels, float]] = prometheus.query("headroom_pool_pods_managed")
    assert [(labels.get("pool"), value) for labels, value in pool] == [("workload", 1.0)]
    weighted: list[tuple[Labels, float]] = prometheus.query("headroom_weight_rule_pods_managed")
    assert [(labels.get("rule"), labels.get("weight"), value) for labels, value in weighted] == [
        ("spec.weights[0]", "1", 1.0)
    ]
