"""`simulate`, `explain` and the live reconciler agree pod by pod, on generated clusters.

Twenty-four cluster shapes come from a seeded generator, each a node and a namespace of
its own: node pools with overrides, LimitRanges, `max-cpu` caps, sidecars, pod-level
resources, limits already set (so some pods are raised, some lowered, some kept),
unmanaged neighbours, a pod whose kubelet reports its resize Infeasible, a pod whose
quantities Headroom cannot read, and weight rules by PriorityClass, namespace and pod
labels (one pool with rules of its own). Before anything is enforced, `kubectl headroom simulate`
(with `--set dryRun=false`) and `kubectl headroom explain` predict every pod; then the real
reconciler enforces, and every pod's limit must be what both predicted, every unmanaged
pod left alone for the reason both gave.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.core.apipaths import PODS
from app.core.quantity import parse_cpu_millis
from tests.integration.conftest import Cluster, eventually
from tests.integration.kubectl_headroom.test_preflight import kubectl_headroom
from tests.integration.reconciler.conftest import Pods, Reconciler
from tests.integration.reconciler.manifests import container, pod, running_status

SHAPES = 24
SEED = 20261201
# Two PriorityClasses, named after the run's tag ({tag}).
HIGH, LOW = "diff-high-{tag}", "diff-low-{tag}"
# Per run, with the classes' names: see `_weights`.
WEIGHTS = [
    {"priorityClassName": HIGH, "weight": 4},
    {"namespaceSelector": {"matchLabels": {"diff-tier": "gold"}}, "weight": 2},
    {
        "namespaceSelector": {},
        "podSelector": {"matchLabels": {"tier": "batch"}},
        "weight": 0,
    },
]
POOLS = [
    {"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "maxMultiplier": "20"},
    {
        "name": "tight",
        "nodeSelector": {"matchLabels": {"pool": "tight"}},
        "maxMultiplier": "3",
        "quantum": "50m",
        "deadband": {"growPercent": 0, "shrinkPercent": 0},
        "weights": [{"priorityClassName": LOW, "weight": 3}],
    },
]
UNMANAGED = {"kube-headroom.dev/mode": "unmanaged"}
# Accepted by the API server (stored as 100e1008), beyond what Headroom reads.
UNREADABLE_MEMORY = "1e1010"
INFEASIBLE = {
    "type": "PodResizePending",
    "status": "True",
    "reason": "Infeasible",
    "message": "Node didn't have enough capacity: cpu",
}


@dataclass
class Shape:
    namespace: str
    node: str
    gold: bool
    pods: list[dict[str, Any]] = field(default_factory=list)
    limit_range: dict[str, Any] | None = None
    # Pods whose status the test writes: an Infeasible report.
    infeasible: list[str] = field(default_factory=list)


def _millis(value: int) -> str:
    return f"{value}m"


def _generate(rand: random.Random, index: int, tag: str, make_node: Callable[..., str]) -> Shape:
    labels = rand.choice([{}, {"pool": "batch"}, {"pool": "tight"}])
    node = make_node(cpu=rand.choice(["4", "8", "16", "32"]), labels=labels)
    shape = Shape(namespace=f"diff-{tag}-{index:02d}", node=node, gold=rand.random() < 0.3)
    # LimitRanger admits pods only inside a LimitRange: under a ratio every container needs
    # a CPU request and a limit; under a max, limits stay below it, and containers without
    # a CPU request (pod-level pods') would be given one.
    ratio = False
    maximum: int | None = None
    if rand.random() < 0.3:
        ratio = rand.random() < 0.4
        maximum = None if ratio else rand.choice([2500, 6000])
        limit = (
            {"type": "Container", "maxLimitRequestRatio": {"cpu": "4"}}
            if ratio
            else {"type": "Container", "max": {"cpu": _millis(maximum or 0)}}
        )
        shape.limit_range = {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": "caps", "namespace": shape.namespace},
            "spec": {"limits": [limit]},
        }

    def limit_for(request: int) -> str | None:
        if ratio:
            return _millis(request * rand.choice([1, 2, 3]) + 10)
        if rand.random() < 0.35:
            limit = request * rand.choice([1, 2, 3, 6, 12]) + 10
            return _millis(limit if maximum is None else min(limit, maximum))
        return None

    for number in range(rand.randint(2, 5)):
        name = f"p{number}"
        request = rand.choice([50, 100, 250, 500, 1000, 1500])
        annotations = {}
        if rand.random() < 0.2:
            annotations["kube-headroom.dev/max-cpu"] = rand.choice(["700m", "2", "5"])
        # One pod of some shapes: its kubelet reports its resize Infeasible.
        infeasible = number == 0 and index % 6 == 1
        if shape.limit_range is None and not infeasible and rand.random() < 0.15:
            # Pod-level resources: the pod's own limit is Headroom's to set.
            obj = pod(
                name,
                namespace=shape.namespace,
                node=node,
                containers=[container(cpu=None, memory="32Mi")],
                annotations=annotations,
                resources={"requests": {"cpu": _millis(request), "memory": "64Mi"}},
            )
        else:
            containers = [container(cpu=_millis(request), cpu_limit=limit_for(request))]
            if rand.random() < 0.25:
                helper = max(10, request // 2)
                containers.append(
                    container("helper", cpu=_millis(helper), cpu_limit=limit_for(helper))
                )
            sidecars = []
            if rand.random() < 0.2:
                sidecars.append(
                    container("proxy", cpu="100m", cpu_limit=limit_for(100), sidecar=True)
                )
            labels = {"app": name, "tier": rand.choice(["web", "web", "batch"])}
            if rand.random() < 0.15 and not infeasible:
                labels.update(UNMANAGED)
            obj = pod(
                name,
                namespace=shape.namespace,
                node=node,
                containers=containers,
                sidecars=sidecars,
                annotations=annotations,
                labels=labels,
                custom_status=infeasible,
            )
            priority_class = rand.choice([None, None, HIGH, LOW])
            if priority_class is not None:
                obj["spec"]["priorityClassName"] = priority_class.format(tag=tag)
            if infeasible:
                shape.infeasible.append(name)
        shape.pods.append(obj)
    if index % 6 == 4:
        shape.pods.append(
            pod(
                "unreadable",
                namespace=shape.namespace,
                node=node,
                containers=[
                    container(cpu="200m", cpu_limit=limit_for(200), memory=UNREADABLE_MEMORY)
                ],
            )
        )
    return shape


@pytest.fixture
def shapes(
    control_plane: Cluster, make_node: Callable[..., str], pods: Pods
) -> Iterator[list[Shape]]:
    rand = random.Random(SEED)
    tag = pods.namespace.rsplit("-", 1)[-1]
    made = [_generate(rand, index, tag, make_node) for index in range(SHAPES)]
    classes = [name.format(tag=tag) for name in (HIGH, LOW)]
    try:
        for value, name in enumerate(classes):
            control_plane.apply(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": 1000 + value,
                }
            )
        for shape in made:
            control_plane.kubectl("create", "namespace", shape.namespace)
            labels = ["kube-headroom.dev/mode=managed", *(["diff-tier=gold"] if shape.gold else [])]
            control_plane.kubectl("label", "namespace", shape.namespace, *labels)
            if shape.limit_range is not None:
                control_plane.apply(shape.limit_range)
            control_plane.apply({"apiVersion": "v1", "kind": "List", "items": shape.pods})
            for name in shape.infeasible:
                obj = json.loads(
                    control_plane.kubectl("get", "pod", name, "-n", shape.namespace, "-o", "json")
                )
                control_plane.kubectl(
                    "patch", "pod", name, "-n", shape.namespace, "--subresource=status",
                    "--type=merge", "-p", json.dumps(running_status(obj, conditions=[INFEASIBLE])),
                )  # fmt: skip
        yield made
    finally:
        for shape in made:
            control_plane.kubectl(
                "delete", "namespace", shape.namespace, "--wait=false", "--ignore-not-found"
            )
        control_plane.kubectl("delete", "priorityclass", *classes, "--ignore-not-found")


def _run(cluster: Cluster, *args: str) -> dict[str, Any]:
    result: subprocess.CompletedProcess[str] = kubectl_headroom(cluster, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _limit_m(obj: dict[str, Any]) -> int:
    """The pod's CPU limit as Headroom counts it: pod-level, else the request-bearing
    containers' (app containers and sidecars) summed; 0 when one has none."""
    spec = obj["spec"]
    pod_level = (spec.get("resources") or {}).get("limits", {}).get("cpu")
    if spec.get("resources", {}).get("requests", {}).get("cpu"):
        return parse_cpu_millis(pod_level) if pod_level else 0
    total = 0
    containers = [
        *spec["containers"],
        *(c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"),
    ]
    for c in containers:
        resources = c.get("resources", {})
        if not resources.get("requests", {}).get("cpu"):
            continue
        limit = resources.get("limits", {}).get("cpu")
        if limit is None:
            return 0
        total += parse_cpu_millis(limit)
    return total


def _weights(rules: Any, tag: str) -> Any:
    """The rules with the run's PriorityClass names."""
    return json.loads(json.dumps(rules).replace("{tag}", tag))


def test_simulate_explain_and_the_reconciler_agree_pod_by_pod(
    control_plane: Cluster,
    configure: Callable[..., None],
    shapes: list[Shape],
    start_reconciler: Callable[..., Reconciler],
) -> None:
    tag = shapes[0].namespace.split("-")[1]
    weights, pools = _weights(WEIGHTS, tag), _weights(POOLS, tag)
    configure(dryRun=True, nodePools=pools, weights=weights)
    eventually(
        lambda: all(
            json.loads(control_plane.kubectl("get", "pods", "-n", s.namespace, "-o", "json"))[
                "items"
            ]
            and all(
                p.get("status", {}).get("phase") == "Running"
                for p in json.loads(
                    control_plane.kubectl("get", "pods", "-n", s.namespace, "-o", "json")
                )["items"]
            )
            for s in shapes
        ),
        timeout=120,
        what="every pod running",
    )
    namespaces = [s.namespace for s in shapes]
    simulated = _run(control_plane, "simulate", "--set", "dryRun=false", *_each("-n", namespaces))
    predicted = {f"{p['namespace']}/{p['pod']}": p for p in simulated["pods"]}
    unmanaged = {f"{p['namespace']}/{p['pod']}": p["reason"] for p in simulated["notManagedPods"]}
    explained: dict[str, dict[str, Any]] = {}
    for shape in shapes:
        # Every pod of the namespace (a selector that matches pods with or without the label).
        listed = _run(
            control_plane, "explain", "-n", shape.namespace, "-l", "kube-headroom.dev/mode!=none"
        )
        explained.update((item["pod"], item) for item in listed["items"])
    # The unreadable pods: simulate names them, explain says why, and skips them for their
    # neighbours.
    unreadable = {k for k, item in explained.items() if item["unreadable"] is not None}
    assert unreadable == {
        f"{s.namespace}/unreadable"
        for s in shapes
        if any(p["metadata"]["name"] == "unreadable" for p in s.pods)
    }
    assert set(simulated["unreadablePods"]) >= unreadable
    for key in unreadable:
        namespace = key.split("/")[0]
        neighbour = next(k for k in explained if k.startswith(f"{namespace}/") and k != key)
        assert key in {s["pod"] for s in explained[neighbour]["skipped"]}
        del explained[key]
    before = {key: _pod(control_plane, key) for key in explained}
    configure(dryRun=False, nodePools=pools, weights=weights)
    start_reconciler()
    expected = {}
    for key, explanation in explained.items():
        if key in predicted:
            outcome = predicted[key]
            assert explanation["managed"], key
            assert explanation["target"] == outcome["simulatedLimit"], key
            assert explanation["weight"] == outcome["weight"], key
            assert explanation["weightRule"] == outcome["weightRule"], key
            after = outcome["limitAfter"]
            expected[key] = 0 if after is None else parse_cpu_millis(after)
        else:
            # Not managed: both say why, and the limit stays where it is.
            assert not explanation["managed"], key
            assert explanation["ineligible"] == unmanaged[key], key
            expected[key] = _limit_m(before[key])
    backed_off = {k for k, reason in unmanaged.items() if reason == "backed-off"}
    assert backed_off == {f"{s.namespace}/{n}" for s in shapes for n in s.infeasible}

    def agreed() -> list[str]:
        return [key for key, want in expected.items() if _limit_m(_pod(control_plane, key)) != want]

    eventually(lambda: not agreed(), timeout=90, interval=1.0, what="the predicted limits")
    # The shapes hold every kind of rule, each weighing some managed pod.
    rules = {p["weightRule"] for p in predicted.values()} - {None}
    assert rules == {
        "spec.weights[0]",
        "spec.weights[1]",
        "spec.weights[2]",
        "spec.nodePools[1].weights[0]",
    }
    weighted = {k: p for k, p in predicted.items() if p["weight"] != 1 and p["patch"]}
    assert weighted

    def unexplained() -> dict[str, Any]:
        """Pods whose annotation does not name the predicted weight: (named, predicted)."""
        named = {key: _weight_of(control_plane, key) for key in weighted}
        return {
            key: (named[key], (outcome["weight"], outcome["weightRule"]))
            for key, outcome in weighted.items()
            if named[key] != (outcome["weight"], outcome["weightRule"])
        }

    eventually(lambda: not unexplained(), timeout=60, interval=1.0, what="weights annotated")
    print(
        f"{len(shapes)} shapes, {len(expected)} pods: {len(predicted)} managed, "
        f"{len(unmanaged)} not managed ({len(backed_off)} backed off), "
        f"{len(unreadable)} unreadable; every limit as simulate and explain predicted"
    )


def _weight_of(cluster: Cluster, key: str) -> tuple[Any, Any]:
    """The weight and rule the pod's status annotation names (None when it names none)."""
    text = _pod(cluster, key)["metadata"].get("annotations", {}).get("kube-headroom.dev/status")
    fields = json.loads(text) if text else {}
    return fields.get("weight"), fields.get("weightRule")


def _each(flag: str, values: list[str]) -> list[str]:
    return [item for value in values for item in (flag, value)]


def _pod(cluster: Cluster, key: str) -> dict[str, Any]:
    namespace, name = key.split("/")
    document = cluster.api.get(PODS.path(namespace=namespace, name=name))
    assert document is not None, f"no pod {key}"
    return document
