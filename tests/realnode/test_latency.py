"""How fast the ceiling follows the node's bookings on a real kubelet: a neighbour's
binding to the managed container's ``cpu.max`` shrinking, and its finishing after its
deletion to the ceiling rising again (``devcluster.latency``). The trials run on both
guests at once, two on each, each guest with a managed pod and a neighbour of its own that
takes all its slack. The assertions are the design's, and hold for every trial: Headroom
waits out the node's debounce (2 s, jittered by ±50%) before it writes, and the kubelet
applies every resize. The trials are printed; their distribution is ``make
bench-realnode``'s (20 trials by default), not this test's."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from devcluster.latency import POLL_SECONDS, CeilingTrials, Trial, report
from devcluster.realnodes import STATIC, WORKLOAD
from tests.realnode.conftest import Scene, say

TRIALS = 4
DEBOUNCE_FLOOR_SECONDS = 1.0
# Each guest's managed pod (500m requested), its neighbours' request and the pod's
# ceiling alone, the node's allocatable (3 CPUs; 2 less 500m reserved).
GUESTS = {WORKLOAD.name: ("web", "1500m", 3000), STATIC.name: ("web-2", "1000m", 1500)}


def test_binding_and_deletion_to_cpu_max(
    pytestconfig: pytest.Config, scene: Scene, managed_namespace: str, namespace: str
) -> None:
    real_cluster = scene.real
    scene.start_reconciler()
    for node, (pod, _, _) in GUESTS.items():
        scene.place(pod, namespace=managed_namespace, node=node)
    for pod, _, alone in GUESTS.values():
        scene.settled(managed_namespace, pod, alone)

    def trials_on(node: str) -> list[Trial]:
        pod, neighbour_cpu, _ = GUESTS[node]
        return CeilingTrials(
            plane=real_cluster.plane,
            api=real_cluster.api,
            guest=real_cluster.guest(node),
            namespace=managed_namespace,
            pod=pod,
            container="app",
            neighbour_namespace=namespace,
            neighbour_cpu=neighbour_cpu,
        ).run(TRIALS // len(GUESTS))

    with ThreadPoolExecutor(len(GUESTS)) as pool:
        trials = [trial for found in pool.map(trials_on, GUESTS) for trial in found]
    say(pytestconfig, f"\n{' and '.join(GUESTS)} at once\n" + report(trials))
    assert len(trials) == TRIALS
    # A shrink's cause is stamped before the binding is sent; a rise's when a poll first
    # saw the neighbour finished, which the reconciler's watch may have seen up to one poll
    # earlier.
    rise_floor = DEBOUNCE_FLOOR_SECONDS - POLL_SECONDS
    for trial in trials:
        for step, floor in ((trial.shrink, DEBOUNCE_FLOOR_SECONDS), (trial.rise, rise_floor)):
            assert step.headroom >= floor, step
            assert 0 < step.write < step.headroom, step
            assert step.kubelet > 0, step
    # Every shrink and rise landed where the policy puts it, and the kubelet's status
    # catches up with the last rise.
    for pod, _, alone in GUESTS.values():
        scene.settled(managed_namespace, pod, alone, timeout=60)
