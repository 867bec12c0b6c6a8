"""Reconciling under weight rules: the writes, the explanations and the metric."""

import json
import random
from typing import Any

import pytest

from tests.unit.app import builders
from tests.unit.app.builders import container
from tests.unit.reconciler.test_reconcile import World

CRITICAL = {"priorityClassName": "critical", "weight": 4}


def test_a_weighted_pod_gets_its_share_and_says_by_which_rule() -> None:
    world = World(spec={"dryRun": False, "minBurstFloor": "0", "weights": [CRITICAL]})
    world.add("a", containers=[container(cpu_request="1")], priority_class="critical")
    world.add("b", containers=[container(cpu_request="1")])
    world.reconcile()
    # S = 14 cores, W = 4*1 + 1: 11.2 and 2.8 cores above the requests.
    assert world.resizes() == {"a": "10", "b": "3800m"}
    assert world.annotations()["a"]["weight"] == 4
    assert world.annotations()["a"]["weightRule"] == "spec.weights[0]"
    assert "weight" not in world.annotations()["b"]
    assert {name: message for name, _, message in world.events()} == {
        "a": "unset -> 10000m (node factor 3.80, slack 14/16 cores, weight 4 by spec.weights[0])",
        "b": "unset -> 3800m (node factor 3.80, slack 14/16 cores)",
    }
    labels = {"rule": "spec.weights[0]", "weight": "4"}
    assert world.gauge("headroom_weight_rule_pods_managed", labels) == 1
    world.cache.apply_pod("team-a/a", None)
    world.reconcile()
    assert world.gauge("headroom_weight_rule_pods_managed", labels) is None


def _random_pods(seed: int) -> list[dict[str, Any]]:
    """Pods like the differential test's: sidecars, limits already set (some above, some
    below the target), max-cpu caps, opted-out neighbours, priority classes and labels."""
    rand = random.Random(seed)
    pods = []
    for number in range(rand.randint(2, 6)):
        request = rand.choice([50, 100, 250, 500, 1000, 1500])

        def limit(request: int) -> str | None:
            return rand.choice([None, None, f"{request * rand.choice([1, 2, 6, 12]) + 10}m"])

        containers = [container(cpu_request=f"{request}m", cpu_limit=limit(request))]
        if rand.random() < 0.25:
            containers.append(container("helper", cpu_request="100m", cpu_limit=limit(100)))
        sidecars = []
        if rand.random() < 0.2:
            sidecars.append(
                container(
                    "proxy", cpu_request="100m", cpu_limit=limit(100), restart_policy="Always"
                )
            )
        labels = {"app": rand.choice(["web", "db"])}
        if rand.random() < 0.15:
            labels["kube-headroom.dev/mode"] = "unmanaged"
        pods.append(
            builders.pod(
                f"p{number}",
                containers=containers,
                init_containers=sidecars,
                labels=labels,
                max_cpu=rand.choice([None, None, None, "700m", "5"]),
                priority_class=rand.choice([None, "critical", "batch"]),
            )
        )
    return pods


# Rules that weigh every pod 1, whichever matches it.
EVERY_WEIGHT_1 = [
    {"priorityClassName": "critical", "weight": 1},
    {"podSelector": {"matchLabels": {"app": "db"}}},
    {"namespaceSelector": {}, "weight": 1},
]


def _writes(world: World) -> list[tuple[str, str, str]]:
    return [
        (request.method, request.path, json.dumps(request.body, sort_keys=True))
        for request in world.api.sent
    ]


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("cpu", ["4", "16"])
def test_every_weight_1_writes_byte_for_byte_what_no_weights_write(seed: int, cpu: str) -> None:
    worlds = [
        World(spec={"dryRun": False, **spec}, cpu=cpu) for spec in ({}, {"weights": EVERY_WEIGHT_1})
    ]
    for world in worlds:
        for obj in _random_pods(seed):
            world.cache.apply_pod(f"team-a/{obj['metadata']['name']}", builders.wire(obj))
        world.reconcile()
    plain, weighted = (_writes(world) for world in worlds)
    assert plain
    assert weighted == plain
