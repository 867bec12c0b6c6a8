from __future__ import annotations

from typing import Any

from app.core.config import parse_config
from app.core.eligibility import Ineligible
from kubectl_headroom.explain import as_dict, explain_pod, render
from tests.unit.app import builders as b

MANAGED = {"kube-headroom.dev/mode": "managed"}


def _pod(
    name: str, cpu: str, *, namespace: str = "team-a", limit: str | None = None
) -> dict[str, Any]:
    return b.pod(
        name,
        namespace=namespace,
        containers=[b.container(cpu_request=cpu, cpu_limit=limit)],
        owners=[],
    )


def _explain(target: dict[str, Any], others: list[dict[str, Any]], **kwargs: Any) -> Any:
    spec = kwargs.pop("spec", {})
    return explain_pod(
        pod=target,
        node=kwargs.pop("node", b.node("node-1", cpu="16")),
        node_pods=[target, *others],
        namespaces=[b.namespace("team-a", labels=MANAGED), b.namespace("other", labels={})],
        limit_ranges=kwargs.pop("limit_ranges", []),
        vpas=[],
        settings=parse_config(b.headroom_config(spec=spec)),
        **kwargs,
    )


def test_worked_example_matches_the_design() -> None:
    a, pod_b, c = _pod("a", "500m"), _pod("b", "1500m"), _pod("c", "6")
    explanation = _explain(pod_b, [a, c], spec={"minBurstFloor": "0"})
    document = as_dict(explanation)
    assert document["annotation"] == {
        "factor": "2.00",
        "slack": "8000m",
        "managedRequests": "8000m",
        "nodePods": 3,
        "targetLimit": "3000m",
    }
    assert document["target"] == "3000m"
    assert [x["pod"] for x in document["bookings"]] == ["team-a/c", "team-a/b", "team-a/a"]
    text = render(explanation, last_event="1500m -> 3000m (node factor 2.00, slack 8/16 cores)")
    assert "Slack S = A - R = 8000m" in text
    assert "Factor F = 1 + S/M = 2.00" in text
    assert "Last CPULimitAdjusted: 1500m -> 3000m" in text


def test_a_weighted_pod_shows_its_weight_the_rule_and_the_weighted_sum() -> None:
    a, pod_b, c = _pod("a", "500m"), _pod("b", "1500m"), _pod("c", "6")
    pod_b["metadata"]["labels"] = {"tier": "gold"}
    weights = [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"tier": "gold"}}, "weight": 4}
    ]
    explanation = _explain(pod_b, [a, c], spec={"minBurstFloor": "0", "weights": weights})
    document = as_dict(explanation)
    # W = 500m + 4*1500m + 6 cores; b's share is 8 cores * 6/12.5.
    assert (document["weight"], document["weightRule"]) == (4, "spec.weights[0]")
    assert document["weightedRequests"] == "12500m"
    assert document["target"] == "5340m"
    assert document["annotation"]["weight"] == 4
    text = render(explanation, last_event=None)
    assert "Weighted W = sum of weight*request = 12500m" in text
    assert "Factor F = 1 + S/W = 1.64" in text
    assert "  weight w = 4 (by spec.weights[0])" in text
    assert "  proportional share S*w*r/W = 3840m" in text
    neighbour = render(_explain(a, [pod_b, c], spec={"weights": weights}), last_event=None)
    assert "  weight w = 1 (no weight rule matches)" in neighbour
    plain = render(_explain(a, [pod_b, c]), last_event=None)
    assert "  weight w = 1 (no weight rules)" in plain


def test_unmanaged_neighbours_book_slack_but_are_not_managed() -> None:
    target = _pod("a", "2")
    neighbour = _pod("n", "8", namespace="other")
    document = as_dict(_explain(target, [neighbour]))
    assert document["slack"] == "6000m"
    assert document["managedRequests"] == "2000m"
    assert {x["pod"]: x["managed"] for x in document["bookings"]} == {
        "other/n": False,
        "team-a/a": True,
    }


def test_a_neighbour_books_what_the_scheduler_books() -> None:
    target = _pod("a", "2")
    neighbour = b.init_heavy_pod("n", namespace="other", owners=[])
    document = as_dict(_explain(target, [neighbour]))
    assert document["slack"] == "11750m"
    assert {x["pod"]: x["booked"] for x in document["bookings"]} == {
        "other/n": "2250m",
        "team-a/a": "2000m",
    }


def test_an_unmanaged_pod_says_why() -> None:
    target = _pod("n", "1", namespace="other")
    explanation = _explain(target, [])
    assert explanation.ineligible is Ineligible.NAMESPACE_NOT_ENROLLED
    assert explanation.result is None
    assert "not managed: namespace-not-enrolled" in render(explanation, last_event=None)
    assert as_dict(explanation)["annotation"] == {}


def test_what_if_a_bigger_request() -> None:
    target = _pod("a", "1")
    neighbour = _pod("b", "1")
    now = as_dict(_explain(target, [neighbour]))
    bigger = as_dict(_explain(target, [neighbour], what_if_request_m=4000))
    assert now["request"] == "1000m"
    assert bigger["request"] == "4000m"
    # Now: S = 14 cores split 1:1. What-if: S = 11 cores split 4:1, 4 + 8.8 cores.
    assert (now["target"], bigger["target"]) == ("8000m", "12800m")


def test_what_if_scales_every_request_bearing_container() -> None:
    target = b.pod(
        "two",
        containers=[b.container("a", cpu_request="1"), b.container("b", cpu_request="3")],
        init_containers=[b.container("side", cpu_request="1", restart_policy="Always")],
        owners=[],
    )
    explanation = _explain(target, [], what_if_request_m=10000)
    assert explanation.result is not None
    assert explanation.result.request_m == 10000
    assert {c.name: c.limit_m >= 0 for c in explanation.result.containers} == {
        "a": True,
        "b": True,
        "side": True,
    }


def test_limit_range_cap_is_named_as_the_bound() -> None:
    target = _pod("a", "1")
    document = as_dict(_explain(target, [], limit_ranges=[b.limit_range(container_max_cpu="3")]))
    assert document["ceiling"] == "3000m"
    assert document["ceilingBoundBy"] == "limit-range"


def test_a_node_that_cannot_resize_is_named_with_its_kubelet() -> None:
    pod = _pod("a", "500m")
    explanation = _explain(pod, [], node=b.node("node-1", kubelet_version="v1.34.2"))
    assert explanation.ineligible is Ineligible.KUBELET_TOO_OLD
    assert explanation.result is None
    text = render(explanation, last_event=None)
    assert "  not managed: kubelet-too-old\n" in text
    assert (
        "  node node-1: kubelet v1.34.2 cannot resize pods in place (needs 1.35 or newer); "
        "its pods are left alone\n"
    ) in text
    document = as_dict(explanation)
    assert document["managed"] is False
    assert document["ineligible"] == "kubelet-too-old"
    assert document["nodeGate"] == (
        "kubelet v1.34.2 cannot resize pods in place (needs 1.35 or newer)"
    )


def test_a_windows_node_by_its_reported_os() -> None:
    node = b.node("node-1", labels={}, operating_system="windows")
    explanation = _explain(_pod("a", "500m"), [], node=node)
    assert explanation.ineligible is Ineligible.WINDOWS_NODE
    assert as_dict(explanation)["nodeGate"] == "Windows node: in-place resize is unsupported there"


def test_an_overbooked_node_reads_slack_zero_and_by_how_much() -> None:
    target = _pod("a", "1")
    neighbour = _pod("n", "17", namespace="other")
    explanation = _explain(target, [neighbour])
    text = render(explanation, last_event=None)
    assert "Slack S = 0m: overbooked, R exceeds A by 2000m\n" in text
    assert "-2000m" not in text
    document = as_dict(explanation)
    assert (document["slack"], document["overbooked"]) == ("0m", "2000m")
    assert document["annotation"]["slack"] == "0m"
    assert document["annotation"]["overbooked"] == "2000m"


def test_a_node_in_a_pool_is_explained_with_the_pools_settings() -> None:
    pools = [
        {"name": "web", "nodeSelector": {"matchLabels": {"pool": "web"}}, "maxMultiplier": "3"}
    ]
    target = _pod("a", "1")
    explanation = explain_pod(
        pod=target,
        node=b.node("node-1", labels={"pool": "web"}),
        node_pods=[target],
        namespaces=[b.namespace("team-a", labels=MANAGED)],
        limit_ranges=[],
        vpas=[],
        settings=parse_config(b.headroom_config(spec={"nodePools": pools})),
    )
    document = as_dict(explanation)
    assert (document["pool"], document["target"], document["ceilingBoundBy"]) == (
        "web",
        "3000m",
        "max-multiplier",
    )
    assert document["annotation"]["pool"] == "web"
    assert "Node pool: web (its overrides apply)" in render(explanation, last_event=None)


def test_a_pod_level_pod_is_explained_at_pod_level_or_left_alone() -> None:
    target = b.pod(
        "p", resources=b.pod_resources(cpu_request="1"), containers=[b.bare_container()], owners=[]
    )

    def explained(node: dict[str, Any]) -> Any:
        return explain_pod(
            pod=target,
            node=node,
            node_pods=[target],
            namespaces=[b.namespace("team-a", labels=MANAGED)],
            limit_ranges=[],
            vpas=[],
            settings=parse_config(b.headroom_config()),
        )

    able = explained(
        b.node("node-1", declared_features=["InPlacePodLevelResourcesVerticalScaling"])
    )
    assert as_dict(able)["podLevel"] is True
    assert "pod-level resources: the limit is set at pod level" in render(able, last_event=None)
    unable = explained(b.node("node-1"))
    assert unable.ineligible is Ineligible.POD_LEVEL_RESIZE_UNSUPPORTED
    assert "not managed: pod-level-resize-unsupported" in render(unable, last_event=None)


def test_an_excluded_container_is_named_with_the_limit_it_keeps() -> None:
    target = b.pod(
        "meshed",
        containers=[
            b.container("app", cpu_request="500m"),
            b.container("envoy", cpu_request="50m"),
        ],
        init_containers=[
            b.container("istio-proxy", cpu_request="100m", cpu_limit="2", restart_policy="Always")
        ],
        owners=[],
    )
    explanation = _explain(target, [], spec={"excludedContainers": ["istio-proxy", "envoy"]})
    document = as_dict(explanation)
    assert (document["request"], document["managedRequests"], document["booked"]) == (
        "500m",
        "500m",
        "650m",
    )
    assert document["excludedContainers"] == [
        {"name": "envoy", "request": "50m", "limit": None},
        {"name": "istio-proxy", "request": "100m", "limit": "2000m"},
    ]
    text = render(explanation, last_event=None)
    assert (
        "istio-proxy: left to its owner (spec.excludedContainers), request 100m not in r, "
        "limit 2000m kept"
    ) in text
    assert "envoy: left to its owner (spec.excludedContainers), request 50m not in r, " in text
