"""A stop pressed while a wave of resizes is being written, then undone, costs nothing.

The write gate checks the config, the namespace's enrolment and the pod's opt-out right
before each resize leaves, but a stop can land while a resize is on its way: the chart's
resize policy then refuses it at admission (no params once the config is gone; "resizes
only pods in namespaces its HeadroomConfig enrols"; "does not resize pods labelled ...").
Such a refusal means "stopped", like the gate's own: no back-off, and the pods are planned
again as soon as the stop is undone.

On the reliability harness (20 nodes, 320 managed pods, two leader-elected reconcilers as
the chart's ServiceAccount under its RBAC and policies), at the default write budget, each
run starts a wave of 320 resizes (by moving every target: `maxMultiplier` alternates), presses
the stop once a third of it is written, undoes it a few seconds later, and requires every
pod on target within debounce + 10 s of the undo, no limit removed and no `error`-level line
in either reconciler's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from tests.integration.conftest import Cluster, eventually
from tests.integration.reconciler.manifests import headroom_config
from tests.integration.reconciler.reliability import (
    NODES,
    PODS_PER_NODE,
    RECOVERY_BUDGET_SECONDS,
    Scenario,
    off_target,
    on_target_within,
    reliability_plane,
    scenario_on,
)

RUNS = 5
WAVE = NODES * PODS_PER_NODE
# How long each stop stays pressed.
STOPPED_SECONDS = 4.0
# Cap-bound targets on roomy nodes: moving maxMultiplier moves every target.
MULTIPLIERS = ("4", "8")
NODE_CPU = "64"
MODE_LABEL = "kube-headroom.dev/mode"


@dataclass
class Run:
    """One run's config spec, and the pods a stop acted on."""

    spec: dict[str, object]
    pods: list[str] = field(default_factory=list)


@dataclass
class Stop:
    press: Callable[[Scenario, Run], None]
    undo: Callable[[Scenario, Run], None]


def _delete_config(scenario: Scenario, run: Run) -> None:
    scenario.cluster.kubectl("delete", "hcfg", "cluster", "--wait=false")


def _create_config(scenario: Scenario, run: Run) -> None:
    # Applied as every run applies it, so the next run's change is one field manager's.
    scenario.cluster.apply(headroom_config(**run.spec))


def _unlabel_namespaces(scenario: Scenario, run: Run) -> None:
    scenario.cluster.kubectl("label", "namespace", *scenario.namespaces, "kube-headroom.dev/mode-")


def _label_namespaces(scenario: Scenario, run: Run) -> None:
    scenario.cluster.kubectl(
        "label", "namespace", *scenario.namespaces, "kube-headroom.dev/mode=managed"
    )


def _label_pods(scenario: Scenario, keys: list[str], value: str | None) -> None:
    """Set (or, with None, remove) the opt-out label on the pods, all at once."""

    def patch(key: str) -> None:
        namespace, name = key.split("/")
        scenario.api.call(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            {"metadata": {"labels": {MODE_LABEL: value}}},
            content_type="application/merge-patch+json",
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(patch, keys))


def _opt_out(scenario: Scenario, run: Run) -> None:
    # The pods whose resizes are still to be written, some of them on their way.
    run.pods = off_target(scenario)
    _label_pods(scenario, run.pods, "unmanaged")


def _opt_in(scenario: Scenario, run: Run) -> None:
    _label_pods(scenario, run.pods, None)


STOPS = {
    "config-deleted-and-created": Stop(press=_delete_config, undo=_create_config),
    "namespaces-unlabelled-and-labelled": Stop(press=_unlabel_namespaces, undo=_label_namespaces),
    "pods-opted-out-and-in": Stop(press=_opt_out, undo=_opt_in),
}


@pytest.fixture(scope="module")
def stops_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with reliability_plane(
        tmp_path_factory.mktemp("stops-plane"), logs="stops-plane-logs"
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def landed(stops_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The wave's pods, landed in dry-run (so no limit yet), with the reconcilers running."""
    with scenario_on(
        stops_cluster,
        tmp_path_factory.mktemp("stops"),
        config={"dryRun": True},
        node_cpu=NODE_CPU,
    ) as scenario:
        wave = scenario.wave()
        wave.start().join(timeout=600)
        assert wave.created == WAVE
        yield scenario


def _stopped_in_flight(scenario: Scenario, after: float) -> int:
    """Resizes the chart's policy refused for a stop that landed while they were on their
    way, after ``after``: how often the race this test is about happened."""
    return sum(
        1
        for reconciler in scenario.reconcilers
        for line in reconciler.log_lines()
        if line.get("msg", "").startswith("resize stopped in flight") and _stamp(line) >= after
    )


def _errors(scenario: Scenario, after: float) -> list[str]:
    """Error-level lines the reconcilers logged after ``after`` (a `time.time()`)."""
    found = []
    for reconciler in scenario.reconcilers:
        for line in reconciler.log_lines():
            if line.get("level") == "error" and _stamp(line) >= after:
                found.append(str(line.get("msg")))
    return found


def _stamp(line: dict[str, object]) -> float:
    try:
        return datetime.fromisoformat(str(line.get("ts") or "")).timestamp()
    except ValueError:
        return float("inf")


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("stop", list(STOPS))
def test_a_stop_pressed_mid_wave_and_undone_leaves_no_pod_behind(
    landed: Scenario, stop: str, run: int
) -> None:
    scenario = landed
    started = time.time()
    # A new target for every pod: a wave of WAVE resizes at the default budget.
    multiplier = MULTIPLIERS[(list(STOPS).index(stop) * RUNS + run) % len(MULTIPLIERS)]
    spec: dict[str, object] = {"dryRun": False, "maxMultiplier": multiplier}
    scenario.cluster.apply(headroom_config(**spec))
    this = Run(spec=spec)
    eventually(
        lambda: 0 < len(off_target(scenario)) <= WAVE * 2 // 3,
        timeout=60,
        interval=0.05,
        what="a third of the wave written",
    )
    STOPS[stop].press(scenario, this)
    pressed = time.time()
    time.sleep(STOPPED_SECONDS)
    STOPS[stop].undo(scenario, this)
    undone = time.time()
    recovery = on_target_within(scenario, since=undone)
    left = WAVE - len(off_target(scenario))
    print(
        f"{stop} run {run + 1}: pressed {pressed - started:.1f} s into the wave, undone "
        f"{undone - pressed:.1f} s later; on target {recovery:.1f} s after the undo ({left} pods); "
        f"{_stopped_in_flight(scenario, after=started)} resizes stopped in flight"
    )
    assert recovery <= RECOVERY_BUDGET_SECONDS
    assert _errors(scenario, after=started) == []
